//! What the templates show: model values turned into display-ready views
//! (times, topic rows, the post tree flattened for a loop).

use std::collections::HashMap;

use crate::model::{Post, Timestamp, Topic, User};

/// A time as `<time datetime="ISO">TEXT</time>`; the script turns TEXT
/// into "5 min ago".
pub struct Time {
    pub iso: String,
    pub text: String,
}

impl Time {
    pub fn of(t: Timestamp) -> Time {
        let text = time::OffsetDateTime::from_unix_timestamp(t.0)
            .ok()
            .and_then(|d| d.format(time::macros::format_description!("[year]-[month]-[day] [hour]:[minute] UTC")).ok())
            .unwrap_or_default();
        Time { iso: t.rfc3339(), text }
    }
}

/// One line of a listing.
pub struct TopicRow {
    pub id: i64,
    pub title: String,
    pub url: Option<String>,
    /// The link's host, shown after the title.
    pub domain: Option<String>,
    pub community: String,
    pub author: Option<String>,
    pub score: i64,
    pub post_count: i64,
    pub created: Time,
    pub locked: bool,
    /// The signed-in viewer's own vote on it (-1, 0, 1); 0 when signed out.
    pub vote: i8,
}

impl TopicRow {
    pub fn of(t: &Topic) -> TopicRow {
        TopicRow {
            id: t.id,
            title: t.title.clone(),
            url: t.url.clone(),
            domain: t.url.as_deref().map(domain),
            community: t.community.clone(),
            author: t.author.clone(),
            score: t.score,
            post_count: t.post_count,
            created: Time::of(t.created_at),
            locked: t.locked,
            vote: 0,
        }
    }

    pub fn comments(&self) -> String {
        match self.post_count {
            1 => "1 comment".into(),
            n => format!("{n} comments"),
        }
    }
}

/// `https://www.example.org:8080/x` -> `example.org`.
fn domain(url: &str) -> String {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let host = rest.split(['/', '?', '#']).next().unwrap_or("");
    let host = host.rsplit('@').next().unwrap_or(host);
    let host = host.split(':').next().unwrap_or(host);
    host.strip_prefix("www.").unwrap_or(host).to_ascii_lowercase()
}

/// A post as the topic page shows it.
pub struct PostView {
    pub id: i64,
    pub topic_id: i64,
    pub author: Option<String>,
    /// Sanitized HTML; empty when deleted or removed.
    pub body_html: String,
    pub created: Time,
    pub edited: bool,
    pub deleted: bool,
    pub removed: bool,
    pub score: i64,
    /// The viewer may edit and delete it.
    pub mine: bool,
    /// The viewer may report it (signed in, someone else's, visible).
    pub report: bool,
    /// The viewer moderates its community: remove and restore buttons,
    /// and where to ban its author (`/c/{name}/bans?user=`).
    pub moderate: Option<String>,
    /// Nesting depth, 0 at the top.
    pub depth: usize,
    /// The viewer's own vote on it (-1, 0, 1): the personal layer of a
    /// signed-in page (`web::topic`), 0 on the shared signed-out one.
    pub vote: i8,
    /// The viewer saved it.
    pub saved: bool,
    /// The viewer may save it (signed in).
    pub can_save: bool,
    /// Its author's id, for the personal layer to match blocked authors.
    pub author_id: i64,
    /// The viewer blocked its author: it shows collapsed (a closed
    /// `<details>`, opened with a click, script or not).
    pub blocked: bool,
    /// Its "reply" link shows: not in a locked topic (but to its
    /// moderators) or a deleted one.
    pub reply: bool,
}

impl PostView {
    pub fn of(p: &Post, viewer: Option<&User>, depth: usize) -> PostView {
        let gone = p.deleted || (p.removed && p.body.is_empty());
        PostView {
            id: p.id,
            topic_id: p.topic_id,
            author: p.author.clone(),
            body_html: if gone { String::new() } else { p.body_html.clone() },
            created: Time::of(p.created_at),
            edited: p.edited_at.is_some(),
            deleted: p.deleted,
            removed: p.removed,
            score: p.score,
            mine: !p.deleted && viewer.is_some_and(|u| u.is_admin || u.id == p.author_id),
            report: !p.deleted && !p.removed && viewer.is_some_and(|u| u.id != p.author_id),
            moderate: None,
            depth,
            vote: 0,
            saved: false,
            can_save: viewer.is_some(),
            author_id: p.author_id,
            blocked: false,
            reply: true,
        }
    }

    /// Shows a moderator's controls, for a moderator of `community`.
    pub fn moderated(mut self, community: Option<&str>) -> PostView {
        self.moderate = community.map(|c| match &self.author {
            Some(a) => format!("/c/{c}/bans?user={a}"),
            None => format!("/c/{c}/bans"),
        });
        self
    }

    /// Past `MAX_INDENT`: its replies line up with it.
    pub fn deep(&self) -> bool {
        self.depth >= MAX_INDENT
    }

    pub fn points(&self) -> &'static str {
        if self.score == 1 || self.score == -1 { "point" } else { "points" }
    }
}

/// One step of the flattened tree: a post opens (its replies follow), the
/// most recently opened post closes, or, in place of replies past
/// `MAX_DEPTH`, a link to the thread under the post they reply to.
pub struct Item {
    pub open: Option<PostView>,
    /// "Continue this thread": the post whose replies are not shown here.
    pub more: Option<i64>,
}

impl Item {
    fn open(p: PostView) -> Item {
        Item { open: Some(p), more: None }
    }

    fn close() -> Item {
        Item { open: None, more: None }
    }

    fn more(post: i64) -> Item {
        Item { open: None, more: Some(post) }
    }
}

/// Deepest level that is still indented; deeper replies line up with it,
/// so a long chain stays readable on a phone.
pub const MAX_INDENT: usize = 6;

/// Levels of a thread a page shows, the top one included. Replies below
/// are a "continue this thread" link to the page of the thread under the
/// last post shown (`/t/{id}?thread={post}`), which shows as many levels
/// and links on, as Reddit does at about this depth. A chain of 5,000
/// nested replies, all shown, took Chromium 42 s to lay out (73 s without
/// JavaScript) where the server answered in 19 ms (issue 26).
pub const MAX_DEPTH: usize = 10;

/// Flattens the posts (in the order the store sorted them) into a
/// depth-first walk of open and close steps, `max_depth` levels deep (see
/// `MAX_DEPTH`). A post whose parent is missing is shown at the top level.
/// `moderating`: the community, when the viewer moderates it.
pub fn thread(posts: &[Post], viewer: Option<&User>, moderating: Option<&str>, max_depth: usize) -> Vec<Item> {
    let ids: std::collections::HashSet<i64> = posts.iter().map(|p| p.id).collect();
    let mut children: HashMap<Option<i64>, Vec<&Post>> = HashMap::new();
    for p in posts {
        let parent = p.parent_id.filter(|id| ids.contains(id) && *id != p.id);
        children.entry(parent).or_default().push(p);
    }
    let mut out = Vec::with_capacity(posts.len() * 2);
    // An explicit stack: a deep chain of replies must not overflow ours.
    let mut stack: Vec<(std::slice::Iter<'_, &Post>, usize)> = Vec::new();
    if let Some(roots) = children.get(&None) {
        stack.push((roots.iter(), 0));
    }
    while let Some((iter, depth)) = stack.last_mut() {
        let depth = *depth;
        match iter.next() {
            Some(p) => {
                out.push(Item::open(PostView::of(p, viewer, depth).moderated(moderating)));
                match children.get(&Some(p.id)) {
                    Some(_) if depth + 1 >= max_depth => {
                        out.push(Item::more(p.id));
                        out.push(Item::close());
                    }
                    Some(kids) => stack.push((kids.iter(), depth + 1)),
                    None => out.push(Item::close()),
                }
            }
            None => {
                stack.pop();
                if !stack.is_empty() {
                    out.push(Item::close());
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn post(id: i64, parent: Option<i64>) -> Post {
        Post {
            id,
            topic_id: 1,
            parent_id: parent,
            author: Some("a".into()),
            body: format!("b{id}"),
            body_html: format!("<p>b{id}</p>\n"),
            created_at: Timestamp(0),
            edited_at: None,
            deleted: false,
            removed: false,
            score: 0,
            author_id: 1,
            notify: None,
            inbox: Vec::new(),
        }
    }

    fn shape(items: &[Item]) -> String {
        items
            .iter()
            .map(|i| match (&i.open, i.more) {
                (Some(p), _) => format!("({}", p.id),
                (None, Some(more)) => format!("[{more}]"),
                (None, None) => ")".to_owned(),
            })
            .collect()
    }

    #[test]
    fn replies_nest_under_their_parents_in_store_order() {
        let posts = [post(1, None), post(2, Some(1)), post(3, None), post(4, Some(2)), post(5, Some(1))];
        assert_eq!(shape(&thread(&posts, None, None, MAX_DEPTH)), "(1(2(4))(5))(3)");
    }

    #[test]
    fn an_orphan_reply_is_shown_at_the_top_level() {
        assert_eq!(shape(&thread(&[post(7, Some(99))], None, None, MAX_DEPTH)), "(7)");
    }

    #[test]
    fn a_chain_of_100000_replies_does_not_overflow_the_stack() {
        let posts: Vec<Post> = (1..=100_000).map(|i| post(i, (i > 1).then_some(i - 1))).collect();
        assert_eq!(thread(&posts, None, None, usize::MAX).len(), 200_000);
    }

    #[test]
    fn replies_past_the_depth_are_a_link_to_the_thread_under_the_last_post_shown() {
        let posts: Vec<Post> = (1..=5_000).map(|i| post(i, (i > 1).then_some(i - 1))).collect();
        let shown = "(1(2(3(4(5(6(7(8(9(10[10]))))))))))";
        assert_eq!(shape(&thread(&posts, None, None, MAX_DEPTH)), shown);
        let leaf = [post(1, None), post(2, Some(1)), post(3, Some(2)), post(4, Some(1))];
        assert_eq!(shape(&thread(&leaf, None, None, 2)), "(1(2[2])(4))", "a leaf at the last level needs no link");
    }

    #[test]
    fn domains_drop_scheme_www_port_and_credentials() {
        assert_eq!(domain("https://www.Example.org:8080/x?y"), "example.org");
        assert_eq!(domain("http://user@host.net"), "host.net");
    }
}
