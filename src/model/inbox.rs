//! The inbox's domain types: a stored notification (`Notice`), one as a
//! write creates it (`NewNotice`), a page of them, what marking read names,
//! and what the live channel is told (`Notified`). Who is notified is
//! `policy`'s (`reply_notices`, `moderation_notice`).

use serde::{Deserialize, Serialize};

use super::{ModAction, Timestamp};

/// Longest excerpt, in characters.
pub const EXCERPT_CHARS: usize = 140;
/// Most users one post notifies of a mention (more names are ignored).
pub const MAX_MENTIONS: usize = 10;
/// Unread notifications are counted up to this many: the count is read
/// on every signed-in page view and, on the writer, for every notification
/// written, so its cost stays bounded however many a user leaves unread.
pub const MAX_UNREAD: i64 = 1000;
/// Most ids one request may mark read.
pub const MAX_MARK_IDS: usize = 100;

/// What a notification is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NoticeKind {
    /// A reply to the user's topic or post.
    Reply,
    /// `@name` in a post or in a topic's text.
    Mention,
    /// A private message to the user (no topic or post: `from` names the
    /// sender, whose conversation holds it).
    Message,
    /// A moderator removed, restored, locked or unlocked the user's topic
    /// or post.
    Moderation,
}

impl NoticeKind {
    pub fn as_str(self) -> &'static str {
        match self {
            NoticeKind::Reply => "reply",
            NoticeKind::Mention => "mention",
            NoticeKind::Message => "message",
            NoticeKind::Moderation => "moderation",
        }
    }

    pub fn parse(s: &str) -> Option<NoticeKind> {
        Some(match s {
            "reply" => NoticeKind::Reply,
            "mention" => NoticeKind::Mention,
            "message" => NoticeKind::Message,
            "moderation" => NoticeKind::Moderation,
            _ => return None,
        })
    }
}

/// A stored notification, as its user reads it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Notice {
    pub id: i64,
    pub kind: NoticeKind,
    pub topic_id: Option<i64>,
    pub post_id: Option<i64>,
    /// Who caused it, when someone did (a moderator is not named).
    pub from: Option<String>,
    /// Plain text, at most `EXCERPT_CHARS` characters.
    pub excerpt: String,
    pub created_at: Timestamp,
    pub read: bool,
}

/// A notification as a write creates it.
#[derive(Debug, Clone, PartialEq)]
pub struct NewNotice {
    pub user_id: i64,
    pub kind: NoticeKind,
    pub from_id: Option<i64>,
    pub topic_id: Option<i64>,
    pub post_id: Option<i64>,
    pub excerpt: String,
}

/// A user's inbox, newest first.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct InboxPage {
    pub items: Vec<Notice>,
    /// How many of the user's notifications are unread (all of them, not
    /// just this page's), up to `MAX_UNREAD`.
    pub unread: i64,
    /// The cursor of the next page (the last item's id), when there is one.
    pub next: Option<i64>,
}

/// What a request marks read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MarkRead {
    /// These notifications of the user's (others' ids are ignored).
    Ids(Vec<i64>),
    /// Every notification of the user's.
    All,
}

/// What a user's live channel hears of a stored notification (or, with no
/// `kind`, of notifications marked read): enough to update a count.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Notified {
    pub user_id: i64,
    pub kind: Option<NoticeKind>,
    pub topic_id: Option<i64>,
    pub post_id: Option<i64>,
    /// The user's unread count once this was written.
    pub unread: i64,
}

/// The excerpt of a moderator's action on the user's content: what was
/// done, and the reason given.
pub fn moderation_excerpt(action: ModAction, reason: &str) -> String {
    let done = match action {
        ModAction::RemoveTopic(_) => "Your topic was removed by a moderator",
        ModAction::RestoreTopic(_) => "Your topic was restored by a moderator",
        ModAction::LockTopic(_) => "Your topic was locked by a moderator",
        ModAction::UnlockTopic(_) => "Your topic was unlocked by a moderator",
        ModAction::RemovePost(_) => "Your comment was removed by a moderator",
        ModAction::RestorePost(_) => "Your comment was restored by a moderator",
    };
    let text = if reason.trim().is_empty() { format!("{done}.") } else { format!("{done}: {}", reason.trim()) };
    text.chars().take(EXCERPT_CHARS).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_reads_back_from_its_name() {
        for kind in [NoticeKind::Reply, NoticeKind::Mention, NoticeKind::Message, NoticeKind::Moderation] {
            assert_eq!(NoticeKind::parse(kind.as_str()), Some(kind));
            assert_eq!(serde_json::to_value(kind).ok(), Some(serde_json::json!(kind.as_str())));
        }
        assert_eq!(NoticeKind::parse("vote"), None);
    }

    #[test]
    fn a_moderation_excerpt_says_what_was_done_and_why() {
        assert_eq!(
            moderation_excerpt(ModAction::RemovePost(1), " spam "),
            "Your comment was removed by a moderator: spam"
        );
        assert_eq!(moderation_excerpt(ModAction::LockTopic(1), ""), "Your topic was locked by a moderator.");
        assert_eq!(moderation_excerpt(ModAction::RemoveTopic(1), &"x".repeat(500)).chars().count(), EXCERPT_CHARS);
    }
}
