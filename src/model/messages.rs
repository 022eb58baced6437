//! Private messages between two users, a user's list of conversations,
//! a recipient's report of a message (the only way an administrator
//! reads one), and the users someone blocked.

use serde::Serialize;

use super::{ReportStatus, Timestamp};

/// Longest excerpt of a conversation's last message, in characters.
pub const EXCERPT_CHARS: usize = 140;

/// One private message, as its sender and its recipient read it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Message {
    pub id: i64,
    pub from: String,
    pub to: String,
    /// Markdown as written.
    pub body: String,
    /// Sanitized HTML, rendered once when it was sent.
    pub body_html: String,
    pub created_at: Timestamp,
    /// The recipient opened the conversation since.
    pub read: bool,
}

/// One page of a conversation, newest first.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MessagePage {
    /// The other user, as their name is spelt.
    pub with: String,
    /// Their id, for marking the conversation read.
    #[serde(skip)]
    pub with_id: i64,
    pub messages: Vec<Message>,
    /// Pass as `after` for the older messages; null on the last page.
    pub next: Option<i64>,
}

/// One of a user's conversations: the other user and the last message
/// either way.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Conversation {
    pub with: String,
    pub last_id: i64,
    /// Who sent the last message (the user or `with`).
    pub last_from: String,
    /// Plain text, at most `EXCERPT_CHARS` characters.
    pub excerpt: String,
    pub last_at: Timestamp,
    /// Messages from `with` the user has not read.
    pub unread: i64,
}

/// A user's conversations, the most recent first.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ConversationPage {
    pub conversations: Vec<Conversation>,
    /// Pass as `after` for the next page (the last one's `last_id`); null
    /// on the last page.
    pub next: Option<i64>,
}

/// A report of a private message, with the message: what an
/// administrator reads.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MessageReport {
    pub id: i64,
    pub message: Message,
    pub reporter: String,
    pub reason: String,
    pub status: ReportStatus,
    pub created_at: Timestamp,
    pub resolved_by: Option<String>,
    pub resolved_at: Option<Timestamp>,
}

/// One page of message reports, newest first.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MessageReportPage {
    pub reports: Vec<MessageReport>,
    pub next: Option<i64>,
}

/// What a user blocked: users (their posts collapse, their messages and
/// notifications stop) and communities (hidden from the front page).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Blocks {
    pub users: Vec<String>,
    pub communities: Vec<String>,
}

/// The two users of a conversation in id order, as `messages` keys them.
pub fn pair(a: i64, b: i64) -> (i64, i64) {
    (a.min(b), a.max(b))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pair_is_the_same_from_either_side() {
        assert_eq!(pair(7, 3), (3, 7));
        assert_eq!(pair(3, 7), pair(7, 3));
    }
}
