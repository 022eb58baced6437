//! Domain types: what the forum is made of, and the validated values a
//! client may send. Handlers parse raw input into these newtypes, so the
//! storage layer only ever sees checked data.

use serde::{Deserialize, Deserializer, Serialize, Serializer};

pub mod account;
pub mod change;
pub mod federation;
pub mod inbox;
pub mod instances;
mod lookalike;
pub mod mail;
pub mod media;
pub mod messages;
mod moderation;
pub mod paging;
pub mod policy;
mod saves;
mod search;
mod sessions;
pub use account::{CastVote, ContentFate, TwoFactor};
pub use change::Change;
pub use inbox::{InboxPage, MarkRead, NewNotice, Notice, NoticeKind, Notified};
pub use lookalike::NameKeys;
pub use messages::{Blocks, Conversation, ConversationPage, Message, MessagePage, MessageReport, MessageReportPage};
pub use moderation::*;
pub use saves::{EXCERPT_CHARS, Marks, Saved, SavedCursor};
pub use search::SearchHit;
pub use sessions::{IdleLimits, NewToken, TokenKind, TokenRecord, label};

/// Unix seconds, serialised as RFC 3339 (`2026-11-22T10:00:00Z`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Timestamp(pub i64);

impl Timestamp {
    pub fn now() -> Self {
        let secs =
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs() as i64).unwrap_or(0);
        Timestamp(secs)
    }

    pub fn rfc3339(self) -> String {
        time::OffsetDateTime::from_unix_timestamp(self.0)
            .ok()
            .and_then(|t| t.format(&time::format_description::well_known::Rfc3339).ok())
            .unwrap_or_else(|| self.0.to_string())
    }
}

impl Serialize for Timestamp {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.rfc3339())
    }
}

/// The RFC 3339 text back (or plain seconds): a `Change` crosses the
/// cluster bus as JSON.
impl<'de> Deserialize<'de> for Timestamp {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        if let Ok(secs) = text.parse::<i64>() {
            return Ok(Timestamp(secs));
        }
        time::OffsetDateTime::parse(&text, &time::format_description::well_known::Rfc3339)
            .map(|t| Timestamp(t.unix_timestamp()))
            .map_err(serde::de::Error::custom)
    }
}

#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct User {
    pub id: i64,
    pub name: String,
    pub is_admin: bool,
    pub created_at: Timestamp,
}

#[derive(Debug, Clone, Serialize)]
pub struct Community {
    pub id: i64,
    pub name: String,
    pub title: String,
    pub description: String,
    pub created_at: Timestamp,
    pub topic_count: i64,
    /// A community on another server (its name is `name@host`): its page
    /// at home (docs/FEDERATION.md, phase 2); absent for a local one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub home: Option<String>,
}

impl Community {
    /// Whether it lives on another server and is followed from here.
    pub fn is_remote(&self) -> bool {
        crate::model::federation::is_remote_name(&self.name)
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Topic {
    pub id: i64,
    pub community: String,
    /// `None` once the topic is deleted.
    pub author: Option<String>,
    pub title: String,
    /// The Markdown source, as written.
    pub body: Option<String>,
    /// `body` rendered to sanitized HTML when it was written (see
    /// `markdown::render`): readers never render. `None` with `body`.
    pub body_html: Option<String>,
    pub url: Option<String>,
    pub created_at: Timestamp,
    pub edited_at: Option<Timestamp>,
    pub deleted: bool,
    /// Removed by a moderator: hidden from the public (see `redact`).
    pub removed: bool,
    /// Takes no new replies, except from moderators.
    pub locked: bool,
    pub score: i64,
    pub post_count: i64,
    /// For permission checks and `redact`; not part of the API.
    #[serde(skip)]
    pub community_id: i64,
    #[serde(skip)]
    pub author_id: i64,
    /// The inbox notifications this new topic wrote (its mentions), for
    /// the live channel. Set only on a topic just created.
    #[serde(skip)]
    pub inbox: Vec<Notified>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Post {
    pub id: i64,
    pub topic_id: i64,
    pub parent_id: Option<i64>,
    /// `None` once the post is deleted (its replies stay).
    pub author: Option<String>,
    /// The Markdown source, as written.
    pub body: String,
    /// `body` rendered to sanitized HTML when it was written; empty
    /// whenever `body` is (deleted, or removed and redacted).
    pub body_html: String,
    pub created_at: Timestamp,
    pub edited_at: Option<Timestamp>,
    pub deleted: bool,
    /// Removed by a moderator: the body is hidden from the public (see
    /// `redact`), the post keeps its place in the thread.
    pub removed: bool,
    pub score: i64,
    /// For `redact`; not part of the API.
    #[serde(skip)]
    pub author_id: i64,
    /// Who is told of this new post in their live inbox: the author of the
    /// post or topic it replies to (never the replier). Set only on a post
    /// just created.
    #[serde(skip)]
    pub notify: Option<i64>,
    /// The inbox notifications this new post wrote (its reply and
    /// mentions), for the live channel. Set only on a post just created.
    #[serde(skip)]
    pub inbox: Vec<Notified>,
}

/// A user's public page: the account and its recent activity.
#[derive(Debug, Clone, Serialize)]
pub struct Profile {
    pub user: User,
    /// A remote user's profile page at its home instance (its name is
    /// `name@host`); absent for a local user.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub home: Option<String>,
    pub topics: Vec<Topic>,
    pub posts: Vec<Post>,
}

/// What a vote is cast on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VoteTarget {
    Topic(i64),
    Post(i64),
}

/// Totals after a vote, and the topic whose rendered page changed.
#[derive(Debug, Clone, Serialize)]
pub struct VoteOutcome {
    pub score: i64,
    pub vote: i8,
    #[serde(skip)]
    pub topic_id: i64,
    /// The vote's number in the order the store committed votes, when it
    /// has one order (SQLite's one writer); the cache tells an older score
    /// from a newer one by it (`cache::TopicCache::rescore`).
    #[serde(skip)]
    pub seq: Option<u64>,
}

/// Reddit's "hot" rank: order of magnitude of the score plus age, in
/// 12.5-hour units since the Reddit epoch (1134028003).
pub fn hot_rank(score: i64, created_at: i64) -> f64 {
    let order = (score.unsigned_abs().max(1) as f64).log10();
    let sign = score.signum() as f64;
    sign * order + (created_at - 1_134_028_003) as f64 / 45_000.0
}

/// Why a client-supplied value was refused; the message names the field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Invalid(pub String);

fn check_len(field: &str, value: &str, min: usize, max: usize) -> Result<(), Invalid> {
    let n = value.chars().count();
    if n < min {
        return Err(Invalid(format!("{field} must be at least {min} characters")));
    }
    if n > max {
        return Err(Invalid(format!("{field} must be at most {max} characters")));
    }
    Ok(())
}

fn no_control(field: &str, value: &str, allow_newlines: bool) -> Result<(), Invalid> {
    let bad = value.chars().any(|c| c.is_control() && !(allow_newlines && (c == '\n' || c == '\r' || c == '\t')));
    if bad {
        return Err(Invalid(format!("{field} must not contain control characters")));
    }
    Ok(())
}

macro_rules! newtype {
    ($name:ident) => {
        #[derive(Debug, Clone, PartialEq, Eq)]
        pub struct $name(String);
        impl $name {
            pub fn as_str(&self) -> &str {
                &self.0
            }
            pub fn into_inner(self) -> String {
                self.0
            }
        }
    };
}

newtype!(Username);
newtype!(Password);
newtype!(CommunityName);
newtype!(Title);
newtype!(Body);
newtype!(Link);

impl Username {
    pub fn parse(s: &str) -> Result<Self, Invalid> {
        check_len("username", s, 3, 20)?;
        if !s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-') {
            return Err(Invalid("username may contain only letters, digits, '_' and '-'".into()));
        }
        Ok(Self(s.to_owned()))
    }
}

impl Password {
    pub fn parse(s: &str) -> Result<Self, Invalid> {
        check_len("password", s, 8, 256)?;
        Ok(Self(s.to_owned()))
    }
}

impl CommunityName {
    /// A name for a new community here: `a-z`, `0-9`, `_`.
    pub fn parse(s: &str) -> Result<Self, Invalid> {
        check_len("name", s, 3, 21)?;
        if !s.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_') {
            return Err(Invalid("name may contain only a-z, 0-9 and '_'".into()));
        }
        Ok(Self(s.to_owned()))
    }

    /// The name of an existing community to post into or read: a local
    /// one's (`parse`) or a remote one's, `name@host`
    /// (`federation::remote_community_name`'s shape).
    pub fn named(s: &str) -> Result<Self, Invalid> {
        match s.split_once('@') {
            Some((name, host)) => {
                check_len("name", s, 3, 160)?;
                let name_ok =
                    !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'));
                let host_ok = !host.is_empty()
                    && host
                        .chars()
                        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '.' | '-' | ':'));
                if !(name_ok && host_ok) {
                    return Err(Invalid("a community on another server is named name@host".into()));
                }
                Ok(Self(s.to_owned()))
            }
            None => Self::parse(s),
        }
    }
}

impl Title {
    pub fn parse(s: &str) -> Result<Self, Invalid> {
        let t = s.trim();
        check_len("title", t, 1, 300)?;
        no_control("title", t, false)?;
        Ok(Self(t.to_owned()))
    }
}

/// Longest post or topic body, in characters (Reddit allows 40,000).
pub const MAX_BODY_CHARS: usize = 40_000;

impl Body {
    pub fn parse(s: &str) -> Result<Self, Invalid> {
        if s.trim().is_empty() {
            return Err(Invalid("body must not be empty".into()));
        }
        check_len("body", s, 1, MAX_BODY_CHARS)?;
        no_control("body", s, true)?;
        Ok(Self(s.to_owned()))
    }
}

/// A body as written and as rendered to sanitized HTML. The application
/// core renders Markdown once, in the operation that writes it
/// (`app::text`); the store keeps both and readers never render.
#[derive(Debug, Clone)]
pub struct Text {
    source: Body,
    html: String,
    /// The names `@mentioned` (linked in `html`), lowercased: whom a new
    /// post notifies besides the author it replies to.
    mentions: Vec<String>,
    /// The site's pictures it shows (`/media/NAME`, full-size names): the
    /// references the store records with the body.
    media: Vec<String>,
    /// Its notifications' plain-text excerpt (`inbox::EXCERPT_CHARS`),
    /// made with the rendering rather than on the writer thread, where it
    /// was ~4 % of the server's CPU per reply.
    excerpt: String,
}

impl Text {
    /// Renders `source` here, on this thread.
    pub fn render(source: Body) -> Text {
        let (out, excerpt) = crate::markdown::render_with_excerpt(source.as_str(), inbox::EXCERPT_CHARS);
        Text { source, html: out.html, mentions: out.mentions, media: out.media, excerpt }
    }

    /// The excerpt a notification of it shows.
    pub fn excerpt(&self) -> &str {
        &self.excerpt
    }

    pub fn mentions(&self) -> &[String] {
        &self.mentions
    }

    /// The site's pictures the body shows, by name, each once.
    pub fn media(&self) -> &[String] {
        &self.media
    }

    /// The Markdown as written.
    pub fn as_str(&self) -> &str {
        self.source.as_str()
    }

    pub fn html(&self) -> &str {
        &self.html
    }
}

impl Link {
    pub fn parse(s: &str) -> Result<Self, Invalid> {
        check_len("url", s, 1, 2000)?;
        let lower = s.to_ascii_lowercase();
        if !(lower.starts_with("http://") || lower.starts_with("https://")) || s.len() < 10 {
            return Err(Invalid("url must be an http:// or https:// address".into()));
        }
        if s.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(Invalid("url must not contain spaces or control characters".into()));
        }
        Ok(Self(s.to_owned()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hot_rank_matches_reddits_formula() {
        let t = 1_134_028_003 + 45_000;
        assert!((hot_rank(0, t) - 1.0).abs() < 1e-9);
        assert!((hot_rank(10, t) - 2.0).abs() < 1e-9);
        assert!((hot_rank(-100, t) - (-1.0)).abs() < 1e-9);
    }

    #[test]
    fn a_newer_topic_outranks_an_older_one_with_ten_times_the_score_after_12_5_hours() {
        assert!(hot_rank(1, 1_700_000_000 + 45_001) > hot_rank(10, 1_700_000_000));
    }

    #[test]
    fn usernames_with_spaces_or_too_short_are_rejected() {
        assert!(Username::parse("ab").is_err());
        assert!(Username::parse("a b c").is_err());
        assert!(Username::parse("alice_01").is_ok());
    }

    #[test]
    fn a_body_of_only_whitespace_or_over_the_limit_is_rejected() {
        assert!(Body::parse("   \n").is_err());
        assert!(Body::parse(&"x".repeat(MAX_BODY_CHARS + 1)).is_err());
        assert!(Body::parse("hello\nworld").is_ok());
        assert!(Body::parse("nul\0").is_err());
    }

    #[test]
    fn only_http_links_are_accepted() {
        assert!(Link::parse("javascript:alert(1)").is_err());
        assert!(Link::parse("https://example.org/x").is_ok());
    }
}
