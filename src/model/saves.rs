//! Saved topics and posts, and what a signed-in reader's own marks on a
//! topic are (their votes and saves), for the personal layer of a page.

use serde::Serialize;

use super::{Timestamp, VoteTarget};

/// One saved item as stored: the topic or post, its topic's title and
/// community, the start of its text, and whether it is gone. The caller
/// blanks what a removed or deleted item may not show (`redact`).
#[derive(Debug, Clone, Serialize)]
pub struct Saved {
    /// `topic` or `post`.
    pub kind: &'static str,
    pub topic_id: i64,
    /// The post's id; absent for a saved topic.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub post_id: Option<i64>,
    /// The topic's title; null when the topic was removed.
    pub title: Option<String>,
    pub community: String,
    /// The first characters of the text (`EXCERPT_CHARS`); null when there
    /// is none or it is gone.
    pub excerpt: Option<String>,
    pub saved_at: Timestamp,
    /// Deleted by its author.
    pub deleted: bool,
    /// Removed by a moderator (a post also when its topic was, once
    /// redacted).
    pub removed: bool,
    /// The topic was removed: it hides its title and every post in it.
    #[serde(skip)]
    pub topic_removed: bool,
}

/// How much of a saved item's text the saved list shows.
pub const EXCERPT_CHARS: usize = 200;

impl Saved {
    /// What it is saved as.
    pub fn target(&self) -> VoteTarget {
        match self.post_id {
            Some(id) => VoteTarget::Post(id),
            None => VoteTarget::Topic(self.topic_id),
        }
    }

    /// Blanks what a gone item may not show, as the rest of the API does:
    /// no text for a deleted or removed item, no title for a removed topic.
    pub fn redact(mut self) -> Saved {
        if self.topic_removed {
            self.removed = true;
            self.title = None;
        }
        if self.deleted || self.removed {
            self.excerpt = None;
        }
        self
    }
}

/// Where a saved list's page starts: after (saved_at, kind, id) of the
/// last item of the previous page, newest first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SavedCursor {
    pub saved_at: i64,
    /// 0 topic, 1 post (the store's `kind`).
    pub kind: i64,
    pub id: i64,
}

impl SavedCursor {
    pub fn of(item: &Saved) -> SavedCursor {
        let (kind, id) = match item.target() {
            VoteTarget::Topic(id) => (0, id),
            VoteTarget::Post(id) => (1, id),
        };
        SavedCursor { saved_at: item.saved_at.0, kind, id }
    }

    pub fn encode(&self) -> String {
        format!("{}.{}.{}", self.saved_at, self.kind, self.id)
    }

    /// `None` for anything that is not a cursor `encode` made.
    pub fn decode(s: &str) -> Option<SavedCursor> {
        if s.len() > 64 {
            return None;
        }
        let mut parts = s.split('.');
        let saved_at = parts.next()?.parse().ok()?;
        let kind = parts.next()?.parse().ok().filter(|k| *k == 0 || *k == 1)?;
        let id = parts.next()?.parse().ok().filter(|id| *id > 0)?;
        parts.next().is_none().then_some(SavedCursor { saved_at, kind, id })
    }
}

/// A reader's own marks on one topic and the posts of a page of it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Marks {
    /// Their vote on the topic: -1, 0 (none) or 1.
    pub topic_vote: i8,
    pub topic_saved: bool,
    /// (post id, vote) for each post they voted on.
    pub post_votes: Vec<(i64, i8)>,
    /// Ids of the posts they saved.
    pub posts_saved: Vec<i64>,
    /// Ids of the page's authors they blocked: those posts show collapsed.
    pub blocked_authors: Vec<i64>,
}

impl Marks {
    /// The marks from both backends' one query: rows of (0 for a vote, 1
    /// for a save or 2 for a blocked author; 0 for the topic or 1 for a
    /// post; the target's or author's id; the vote's value).
    pub fn from_rows(rows: impl IntoIterator<Item = (i64, i64, i64, i64)>) -> Marks {
        let mut marks = Marks::default();
        for (what, kind, id, value) in rows {
            let value = value.clamp(-1, 1) as i8;
            match (what, kind) {
                (2, _) => marks.blocked_authors.push(id),
                (0, 0) => marks.topic_vote = value,
                (0, _) => marks.post_votes.push((id, value)),
                (_, 0) => marks.topic_saved = true,
                _ => marks.posts_saved.push(id),
            }
        }
        marks
    }

    pub fn vote_on(&self, post: i64) -> i8 {
        self.post_votes.iter().find(|(id, _)| *id == post).map_or(0, |(_, v)| *v)
    }

    pub fn saved(&self, post: i64) -> bool {
        self.posts_saved.contains(&post)
    }

    /// The reader blocked this author: their post shows collapsed.
    pub fn blocked(&self, author_id: i64) -> bool {
        self.blocked_authors.contains(&author_id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_saved_cursor_decodes_to_what_it_encoded_and_nothing_else() {
        let c = SavedCursor { saved_at: 1_700_000_000, kind: 1, id: 42 };
        assert_eq!(SavedCursor::decode(&c.encode()), Some(c));
        for bad in ["", "1.2.3", "1.0", "1.0.0", "x.0.1", "1.0.1.2", "1.1.-3"] {
            assert_eq!(SavedCursor::decode(bad), None, "{bad}");
        }
    }

    #[test]
    fn a_removed_item_keeps_no_text_and_a_removed_topic_no_title() {
        let item = Saved {
            kind: "topic",
            topic_id: 1,
            post_id: None,
            title: Some("t".into()),
            community: "c".into(),
            excerpt: Some("x".into()),
            saved_at: Timestamp(1),
            deleted: false,
            removed: true,
            topic_removed: true,
        };
        let r = item.clone().redact();
        assert_eq!((r.title, r.excerpt), (None, None));
        let d = Saved { removed: false, topic_removed: false, deleted: true, ..item.clone() }.redact();
        assert_eq!((d.title.as_deref(), d.excerpt), (Some("t"), None));
        let p = Saved { post_id: Some(2), topic_removed: false, ..item }.redact();
        assert_eq!((p.title.as_deref(), p.excerpt, p.removed), (Some("t"), None, true));
    }
}
