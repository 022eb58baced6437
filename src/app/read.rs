//! Reading a topic as the API answers it: rendered once into the cache,
//! served from there to every reader, rendered again in the background
//! after a write (`evict`, called by `apply`), and rendered privately for
//! the few who may see removed content. A huge topic is answered in pages
//! (`PageLimit::API`), each cached as its own rendering.

use std::sync::Arc;

use axum::http::header;
use serde::Serialize;

use super::{AppError, AppResult, AppState, AuthUser};
use crate::cache::{Key, Patched, Rendered, Variant};
use crate::model::paging::{PageFill, PageLimit};
use crate::model::policy::{self, BanFacts, ItemFacts, Kind, TopicFacts};
use crate::model::{Post, Restricted, Timestamp, Topic, User, Viewer, redact};
use crate::store::{PostCursor, PostPage, PostSort, Store};

/// `?html=`: whether a topic's post list carries `body_html` too.
pub fn parse_html(s: Option<&str>) -> AppResult<bool> {
    match s {
        None | Some("false") => Ok(false),
        Some("true") => Ok(true),
        Some(_) => Err(AppError::BadRequest("invalid_query", "html must be true or false".into())),
    }
}

pub fn parse_post_sort(s: Option<&str>) -> AppResult<PostSort> {
    match s {
        None | Some("best") => Ok(PostSort::Best),
        Some("new") => Ok(PostSort::New),
        Some("old") => Ok(PostSort::Old),
        Some(_) => Err(AppError::BadRequest("invalid_query", "sort must be one of best, new, old".into())),
    }
}

/// `?after=`: where a page of a huge topic starts (the previous page's
/// `next`), in `sort` order; empty or absent is the first page.
pub fn parse_post_cursor(s: Option<&str>, sort: PostSort) -> AppResult<Option<PostCursor>> {
    let bad = |m: &str| AppError::BadRequest("invalid_query", m.to_owned());
    match s {
        None | Some("") => Ok(None),
        Some(s) => match PostCursor::decode(s) {
            Some(c) if c.sort() == sort => Ok(Some(c)),
            Some(_) => Err(bad("after is a cursor of another sort order")),
            None => Err(bad("after is not a valid cursor")),
        },
    }
}

#[derive(Serialize)]
struct TopicResponse<'a> {
    topic: &'a Topic,
    posts: Vec<ListedPost<'a>>,
    /// Only past the cut-off (`PageLimit::API`): the `after` of the next
    /// page. Absent otherwise, so a topic of ordinary size answers the
    /// same bytes as before pages existed.
    #[serde(skip_serializing_if = "Option::is_none")]
    next: Option<String>,
}

/// A post as a topic's post list carries it: `Post` without what the list
/// already says or what is at its default. The topic's id is the topic's;
/// `parent_id` is there for replies only, `edited_at` once edited, `deleted`
/// and `removed` when true; `body_html` only when asked for (`?html=true`).
/// The post list is what every read sends and what the cache holds, and a
/// realistic post's field names and default values were about half the
/// size of its text; the pages render from the stored HTML without this
/// JSON. `tests/it/api.rs` checks the shape.
#[derive(Serialize)]
struct ListedPost<'a> {
    id: i64,
    #[serde(skip_serializing_if = "Option::is_none")]
    parent_id: Option<i64>,
    author: Option<&'a str>,
    body: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    body_html: Option<&'a str>,
    created_at: Timestamp,
    #[serde(skip_serializing_if = "Option::is_none")]
    edited_at: Option<Timestamp>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    deleted: bool,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    removed: bool,
    score: i64,
}

impl<'a> ListedPost<'a> {
    fn of(p: &'a Post, html: bool) -> ListedPost<'a> {
        ListedPost {
            id: p.id,
            parent_id: p.parent_id,
            author: p.author.as_deref(),
            body: &p.body,
            body_html: html.then_some(p.body_html.as_str()),
            created_at: p.created_at,
            edited_at: p.edited_at,
            deleted: p.deleted,
            removed: p.removed,
            score: p.score,
        }
    }
}

/// Evicts every rendering of `topic` after a write to it committed, and
/// renders again, in the background, the API renderings that were cached
/// and read since they were rendered: a topic people read is read again
/// soon, and that reader would otherwise wait for the render (the 1 % of
/// reads behind the open-loop p99, docs/BENCHMARKS.md "Open-loop
/// latency"). A rendering nobody read since the last write (the topic is
/// written faster than it is read) is not made again for nobody: its next
/// reader renders it. The pages and post fragments render on their next
/// request.
pub fn evict<S: Store>(state: &AppState<S>, topic: i64) {
    let read = state.cache.invalidate(topic);
    render_ahead(state, topic, read);
}

/// Renders again, in the background, the API renderings among `read`
/// (what `invalidate` evicted that readers had got).
fn render_ahead<S: Store>(state: &AppState<S>, topic: i64, read: Vec<Variant>) {
    let api: Vec<(PostSort, bool)> = read.into_iter().filter_map(Variant::json_params).collect();
    if api.is_empty() {
        return;
    }
    let state = state.clone();
    tokio::spawn(async move {
        for (sort, html) in api {
            let key = (topic, Variant::json(sort, html));
            // A failure (the topic deleted meanwhile, say) is the next
            // reader's to see, through the ordinary miss.
            let _ = state.cache.render_ahead(key, || render(&state, topic, sort, html, None, Viewer::Public)).await;
        }
    });
}

/// After vote number `seq` on `topic` (its own score, now `score`)
/// committed: its cached API renderings take the new score in place
/// (`TopicCache::patch`), which costs a copy of their bytes where
/// evicting them cost a render from the database at every vote
/// (docs/PERFORMANCE.md, "Inbound federation"); its pages are evicted.
/// When it cannot, the topic is evicted as after any write.
pub fn rescore<S: Store>(state: &AppState<S>, topic: i64, seq: u64, score: i64) {
    let patch = |variant: Variant, old: &Rendered| match variant {
        Variant::Json(_) | Variant::JsonHtml(_) | Variant::JsonAfter(..) => {
            with_topic_score(&old.body, score).map_or(Patched::Evicted, |body| Patched::New(old.with_body(body)))
        }
        Variant::Page(_) | Variant::Post(_) | Variant::PageAfter(_) | Variant::Thread(..) => Patched::Evicted,
    };
    if let Some(read) = state.cache.patch(topic, Some(seq), patch) {
        render_ahead(state, topic, read);
    }
}

/// After `post` was created: the cached API renderings of its topic that
/// hold all of it take the post in place, where its order puts it, and
/// the topic's `post_count` one more (a render from the database of every
/// post was the readers' main cost beside inbound replies,
/// docs/PERFORMANCE.md "Inbound federation"). Later pages, pages and
/// post fragments are evicted; a rendering that already holds the post
/// (rendered after it committed) is kept. When it cannot, the topic is
/// evicted as after any write.
///
/// Only a rendering a reader got since it was made takes the post: one
/// nobody read is evicted instead, as `evict` leaves it to its next
/// reader. Patching it would copy and hash the whole topic for nobody at
/// every post, and under a stream of posts the next post to a topic comes
/// before its next read (docs/PERFORMANCE.md, "Writes over HTTP"); a
/// topic read between two posts is patched at each, as before.
pub fn add_post<S: Store>(state: &AppState<S>, post: &Post) {
    // A new post is neither removed nor deleted; anything else is left to
    // a render, which redacts.
    if post.removed || post.deleted {
        evict(state, post.topic_id);
        return;
    }
    let size = post.body.len() + post.body_html.len();
    // The post as the list renders it, without and with `body_html`: made
    // once for all the renderings (three orders each) that take it.
    let listed: [std::cell::OnceCell<Option<Vec<u8>>>; 2] = Default::default();
    let patch = |variant: Variant, old: &Rendered| {
        if !old.was_read() {
            return Patched::Evicted;
        }
        let (Some((sort, html)), Some(fill)) = (variant.json_params(), old.fill) else { return Patched::Evicted };
        if !PageLimit::API.holds_one_more(fill, size) {
            return Patched::Evicted;
        }
        let listed = listed[usize::from(html)].get_or_init(|| serde_json::to_vec(&ListedPost::of(post, html)).ok());
        let Some(listed) = listed else { return Patched::Evicted };
        match with_post(&old.body, post, sort, listed) {
            Some(Added::There) => Patched::Kept,
            Some(Added::Body(body)) => Patched::New(
                old.with_body(body).with_fill(Some(PageFill { posts: fill.posts + 1, bytes: fill.bytes + size })),
            ),
            None => Patched::Evicted,
        }
    };
    if let Some(read) = state.cache.patch(post.topic_id, None, patch) {
        render_ahead(state, post.topic_id, read);
    }
}

/// What `with_post` made of a rendering.
#[derive(Debug, PartialEq)]
enum Added {
    /// The post is in it already.
    There,
    /// The rendering with the post.
    Body(Vec<u8>),
}

/// `body` (a `TopicResponse` holding all of its topic, in `sort` order)
/// with `post` (`listed`, as `ListedPost` renders it) in its place and the
/// topic's `post_count` one more; `None` if it is not such a rendering.
/// The bytes are found as in `with_topic_score`: inside a JSON string a
/// quote is always escaped, so `{"id":`, `,"score":` and `},"posts":[`
/// can only be the keys (and every listed post starts with its id and
/// ends with its score, with nothing nested between).
fn with_post(body: &[u8], post: &Post, sort: PostSort, listed: &[u8]) -> Option<Added> {
    use memchr::memmem::find;
    const COUNT: &[u8] = b",\"post_count\":";
    const POSTS: &[u8] = b"},\"posts\":[";
    const ID: &[u8] = b"{\"id\":";
    const SCORE: &[u8] = b",\"score\":";
    if !body.starts_with(b"{\"topic\":{") || !body.ends_with(b"]}") {
        return None; // the public view of a removed topic, or a page with a next
    }
    let list = find(body, POSTS)? + POSTS.len();
    let count_at = find(&body[..list], COUNT)? + COUNT.len();
    let (count, count_len) = number(&body[count_at..])?;
    let end = body.len() - 2;
    // Built once: a search of its own for each post built it again each
    // time (3 % of the server's time beside inbound replies).
    let score_key = memchr::memmem::Finder::new(SCORE);
    let goes_before = |score: i64, id: i64| match sort {
        PostSort::Old => id > post.id,
        PostSort::New => id < post.id,
        PostSort::Best => score < post.score || (score == post.score && id > post.id),
    };
    let (mut at, mut place) = (list, None);
    while at < end {
        if !body[at..].starts_with(ID) {
            return None;
        }
        let (id, _) = number(&body[at + ID.len()..])?;
        let score_at = at + score_key.find(&body[at..end])? + SCORE.len();
        let (post_score, score_len) = number(&body[score_at..])?;
        if id == post.id {
            return Some(Added::There);
        }
        if place.is_none() && goes_before(post_score, id) {
            place = Some(at);
        }
        // Past the score: `}`, then `,` before the next post or the end.
        at = score_at + score_len + 1;
        if at < end {
            at += 1;
        }
    }
    let mut out = Vec::with_capacity(body.len() + listed.len() + 8);
    out.extend_from_slice(&body[..count_at]);
    out.extend_from_slice(itoa::Buffer::new().format(count + 1).as_bytes());
    out.extend_from_slice(&body[count_at + count_len..list]);
    match place {
        Some(place) => {
            out.extend_from_slice(&body[list..place]);
            out.extend_from_slice(listed);
            out.push(b',');
            out.extend_from_slice(&body[place..]);
        }
        None => {
            out.extend_from_slice(&body[list..end]);
            if end > list {
                out.push(b',');
            }
            out.extend_from_slice(listed);
            out.extend_from_slice(&body[end..]);
        }
    }
    Some(Added::Body(out))
}

/// The integer `bytes` start with, and how many bytes it takes.
fn number(bytes: &[u8]) -> Option<(i64, usize)> {
    let len = bytes.iter().enumerate().take_while(|&(i, &b)| b.is_ascii_digit() || (i == 0 && b == b'-')).count();
    let n = std::str::from_utf8(&bytes[..len]).ok()?.parse().ok()?;
    Some((n, len))
}

/// `body` (a `TopicResponse`) with the topic's `score` set to `score`;
/// `None` if it is not one (the empty public view of a removed topic).
/// The topic comes first and has no nested objects, so the first
/// `,"score":` is its own: inside a JSON string a quote is always
/// escaped, so those bytes cannot be part of a title or a body.
fn with_topic_score(body: &[u8], score: i64) -> Option<Vec<u8>> {
    const TOPIC: &[u8] = b"{\"topic\":{";
    const KEY: &[u8] = b",\"score\":";
    if !body.starts_with(TOPIC) {
        return None;
    }
    let at = memchr::memmem::find(body, KEY)? + KEY.len();
    let (_, digits) = number(&body[at..])?;
    let mut out = Vec::with_capacity(body.len() + 20);
    out.extend_from_slice(&body[..at]);
    out.extend_from_slice(itoa::Buffer::new().format(score).as_bytes());
    out.extend_from_slice(&body[at + digits..]);
    Some(out)
}

/// The public API rendering of a topic (of its page from `after`), from
/// the cache or rendered once for every reader that misses it at the same
/// time.
pub async fn cached_public<S: Store>(
    state: &AppState<S>,
    id: i64,
    sort: PostSort,
    html: bool,
    after: Option<PostCursor>,
) -> AppResult<Arc<Rendered>> {
    state
        .cache
        .get_or_render(public_key(id, sort, html, after), || render(state, id, sort, html, after, Viewer::Public))
        .await
}

/// The cache key of the public API rendering `cached_public` returns.
pub fn public_key(id: i64, sort: PostSort, html: bool, after: Option<PostCursor>) -> Key {
    match after {
        None => (id, Variant::json(sort, html)),
        Some(c) => (id, Variant::JsonAfter(c, html)),
    }
}

/// Reads and renders the topic (its page from `after`) as `viewer` may see
/// it. The public view of a removed topic is an empty body carrying its
/// restriction: cached like any other, so even its 404s are answered
/// without a query.
pub async fn render<S: Store>(
    state: &AppState<S>,
    id: i64,
    sort: PostSort,
    html: bool,
    after: Option<PostCursor>,
    viewer: Viewer,
) -> AppResult<Arc<Rendered>> {
    let PostPage { mut topic, mut posts, next, bytes } =
        state.store.topic_page(id, sort, after, PageLimit::API).await?;
    // Only a first page that holds all of its topic may take a new post in place.
    let whole = after.is_none() && next.is_none();
    // Serialising a big topic takes milliseconds: keep it off
    // the async workers.
    let rendered = tokio::task::spawn_blocking(move || {
        let restricted = Restricted::of(&topic, &posts);
        let visible = redact(&mut topic, &mut posts, viewer);
        let fill = (whole && visible).then_some(PageFill { posts: posts.len(), bytes });
        let body = if visible {
            let posts = posts.iter().map(|p| ListedPost::of(p, html)).collect();
            // The cache copies these bytes into an allocation of their
            // size class, without the growth slack of this Vec.
            let next = next.map(|c| c.encode());
            serde_json::to_vec(&TopicResponse { topic: &topic, posts, next })
                .map_err(|e| AppError::Internal(e.to_string()))?
        } else if viewer == Viewer::Public {
            Vec::new()
        } else {
            return Err(AppError::not_found("topic"));
        };
        Ok(Arc::new(Rendered::restricted(body, restricted).with_fill(fill)))
    })
    .await
    .map_err(|e| AppError::Internal(e.to_string()))??;
    Ok(rendered)
}

/// The Markdown an edit form starts from: the topic's body, or that of
/// its post `post`, when `user` may edit it as the API's edit decides
/// (`policy::may_edit`: the author or an admin, nothing deleted, nothing a
/// moderator removed). Bans are left to the edit itself, which says why.
/// Anyone else gets the edit's refusal (403, or 404 for what is deleted or
/// not there), never the source of someone else's or of removed text.
pub async fn edit_source<S: Store>(
    state: &AppState<S>,
    user: &User,
    topic: i64,
    post: Option<i64>,
) -> AppResult<String> {
    // One post, or the topic alone: never the whole topic for one form.
    let (t, post) = match post {
        Some(id) => state.store.topic_post(topic, id, 0).await.map(|(t, p, _)| (t, Some(p)))?,
        None => (state.store.topic(topic).await?, None),
    };
    let facts = TopicFacts {
        deleted: t.deleted,
        removed: t.removed,
        locked: t.locked,
        author_id: t.author_id,
        community_id: t.community_id,
    };
    let (item, body) = match post {
        None => (ItemFacts::of_topic(facts), t.body.unwrap_or_default()),
        Some(p) => {
            let item = ItemFacts {
                kind: Kind::Post,
                author_id: p.author_id,
                deleted: p.deleted,
                removed: p.removed,
                topic: facts,
            };
            (item, p.body)
        }
    };
    policy::may_edit(user, &item, &BanFacts::default(), Timestamp::now())?;
    Ok(body)
}

/// The viewer behind the request's token when they may see more of this
/// topic than the public: a site admin or moderator of its community sees
/// everything, the author of removed content their own. A missing or bad
/// token, or a failed lookup, leaves the request public (it fails closed).
pub async fn privileged_viewer<S: Store>(
    state: &AppState<S>,
    parts: &mut axum::http::request::Parts,
    restricted: &Restricted,
) -> Option<Viewer> {
    use axum::extract::FromRequestParts;
    if !parts.headers.contains_key(header::AUTHORIZATION) {
        return None;
    }
    let user = AuthUser::from_request_parts(parts, state).await.ok()?.user;
    if user.is_admin {
        return Some(Viewer::Moderator);
    }
    match state.store.is_moderator(user.id, restricted.community_id).await {
        Ok(true) => Some(Viewer::Moderator),
        _ if restricted.concerns(user.id) => Some(Viewer::Author(user.id)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn topic(post_count: i64) -> Topic {
        Topic {
            id: 4,
            community: "c".into(),
            author: Some("ann".into()),
            title: r#"the ,"post_count":1 and },"posts":[ trick"#.into(),
            body: Some(r#"quote {"id":9,"score":9}"#.into()),
            body_html: None,
            url: None,
            created_at: Timestamp(0),
            edited_at: None,
            deleted: false,
            removed: false,
            locked: false,
            score: 41,
            post_count,
            community_id: 1,
            author_id: 1,
            inbox: Vec::new(),
        }
    }

    fn post(id: i64, score: i64) -> Post {
        Post {
            id,
            topic_id: 4,
            parent_id: (id % 3 == 0).then_some(id - 1),
            author: Some(format!("user{id}")),
            body: format!(r#"post {id}: {{"id":{},"score":{}}} ,"score":-1}}"#, id + 1, score - 1),
            body_html: format!("<p>post {id}</p>"),
            created_at: Timestamp(1_764_000_000 + id),
            edited_at: (id % 4 == 0).then_some(Timestamp(1_764_000_100)),
            deleted: id % 5 == 0,
            removed: false,
            score,
            author_id: id,
            notify: None,
            inbox: Vec::new(),
        }
    }

    fn sorted(mut posts: Vec<Post>, sort: PostSort) -> Vec<Post> {
        posts.sort_by_key(|p| match sort {
            PostSort::Old => (0, p.id),
            PostSort::New => (0, -p.id),
            PostSort::Best => (-p.score, p.id),
        });
        posts
    }

    fn rendering(posts: &[Post], html: bool) -> Vec<u8> {
        let topic = topic(posts.len() as i64);
        let posts = posts.iter().map(|p| ListedPost::of(p, html)).collect();
        serde_json::to_vec(&TopicResponse { topic: &topic, posts, next: None }).expect("serialises")
    }

    /// Posts added one by one, in any order, to a rendering of none or
    /// some of them, end as the bytes of a render of them all, in every
    /// order and both shapes; a post already there changes nothing.
    #[test]
    fn a_new_post_goes_where_a_render_would_put_it() {
        let scores = [3, -2, 0, 3, 7, 0, -2, 1, 3, 0];
        let all: Vec<Post> = scores.iter().enumerate().map(|(i, &s)| post(i as i64 + 10, s)).collect();
        for sort in [PostSort::Best, PostSort::New, PostSort::Old] {
            for html in [false, true] {
                for first in [0, 1, 4] {
                    let mut have: Vec<Post> = all[..first].to_vec();
                    let mut body = rendering(&sorted(have.clone(), sort), html);
                    // Out of commit order: the later posts first.
                    for p in all[first..].iter().rev() {
                        let listed = serde_json::to_vec(&ListedPost::of(p, html)).expect("serialises");
                        body = match with_post(&body, p, sort, &listed) {
                            Some(Added::Body(body)) => body,
                            other => panic!("{other:?} for post {} in {sort:?}", p.id),
                        };
                        have.push(p.clone());
                        let want = rendering(&sorted(have.clone(), sort), html);
                        assert_eq!(String::from_utf8_lossy(&body), String::from_utf8_lossy(&want), "{sort:?}");
                        assert_eq!(with_post(&body, p, sort, &listed), Some(Added::There));
                    }
                }
            }
        }
    }

    #[test]
    fn a_new_post_leaves_what_is_not_a_whole_topic_alone() {
        let p = post(11, 1);
        let listed = serde_json::to_vec(&ListedPost::of(&p, false)).expect("serialises");
        assert_eq!(with_post(b"", &p, PostSort::Best, &listed), None, "the public view of a removed topic");
        let paged = br#"{"topic":{"id":4,"score":1,"post_count":2},"posts":[{"id":2,"score":5}],"next":"x"}"#;
        assert_eq!(with_post(paged, &p, PostSort::Best, &listed), None, "a page with a next");
        let odd = br#"{"topic":{"id":4,"score":1,"post_count":2},"posts":[{"score":5}]}"#;
        assert_eq!(with_post(odd, &p, PostSort::Best, &listed), None);
    }

    #[test]
    fn a_vote_changes_the_topics_score_and_nothing_else() {
        let body = br#"{"topic":{"id":1,"title":"a,\"score\":7","body":"x","locked":false,"score":-3,"post_count":2},"posts":[{"id":2,"score":5}]}"#;
        let new = with_topic_score(body, 12).expect("a topic rendering");
        let want = br#"{"topic":{"id":1,"title":"a,\"score\":7","body":"x","locked":false,"score":12,"post_count":2},"posts":[{"id":2,"score":5}]}"#;
        assert_eq!(String::from_utf8_lossy(&new), String::from_utf8_lossy(want));
        let back = with_topic_score(&new, -3).expect("a topic rendering");
        assert_eq!(&back[..], &body[..]);
    }

    #[test]
    fn what_is_not_a_topic_rendering_is_left_alone() {
        assert_eq!(with_topic_score(b"", 1), None, "the public view of a removed topic");
        assert_eq!(with_topic_score(br#"{"posts":[{"id":2,"score":5}]}"#, 1), None);
        assert_eq!(with_topic_score(br#"{"topic":{"id":1,"score":null}}"#, 1), None);
    }

    #[test]
    fn a_rendered_topic_is_patched_where_it_says_its_score() {
        let topic =
            Topic { title: r#"the ,"score":1 trick"#.into(), body: Some(r#"quote "score":9"#.into()), ..topic(0) };
        let render = |topic: &Topic| {
            serde_json::to_vec(&TopicResponse { topic, posts: Vec::new(), next: None }).expect("serialises")
        };
        let patched = with_topic_score(&render(&topic), 42).expect("a topic rendering");
        assert_eq!(patched, render(&Topic { score: 42, ..topic }));
    }
}
