//! An account's lifecycle: what becomes of its content when it is deleted,
//! the votes it cast as its export lists them, and the state of its
//! two-factor login.

use serde::{Deserialize, Serialize};

use super::Invalid;

/// What deleting an account does to the topics and posts it wrote.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ContentFate {
    /// They stay, shown as "[deleted]" under no name.
    KeepAnonymous,
    /// Their text and titles are erased; a topic or post keeps its place
    /// (others' replies hang from it) as a deleted one.
    Remove,
}

impl ContentFate {
    pub fn parse(s: &str) -> Result<ContentFate, Invalid> {
        match s {
            "keep_anonymous" => Ok(ContentFate::KeepAnonymous),
            "remove" => Ok(ContentFate::Remove),
            _ => Err(Invalid("content must be \"keep_anonymous\" or \"remove\"".into())),
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            ContentFate::KeepAnonymous => "keep_anonymous",
            ContentFate::Remove => "remove",
        }
    }
}

/// One vote an account cast, as its export lists them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CastVote {
    /// `topic` or `post`.
    pub kind: &'static str,
    pub id: i64,
    /// 1 or -1.
    pub value: i8,
}

impl CastVote {
    /// From the store's (kind, target, value) columns, kind 0 a topic.
    pub fn of(kind: i64, id: i64, value: i64) -> CastVote {
        CastVote { kind: if kind == 0 { "topic" } else { "post" }, id, value: value.clamp(-1, 1) as i8 }
    }

    /// The store's (kind, target) key, where the next page starts after.
    pub fn key(&self) -> (i64, i64) {
        (i64::from(self.kind == "post"), self.id)
    }
}

/// An account's two-factor login as stored.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TwoFactor {
    /// The shared TOTP secret: two-factor login is on.
    pub secret: Option<Vec<u8>>,
    /// The secret of an enrolment not confirmed yet.
    pub pending: Option<Vec<u8>>,
    /// How many unused recovery codes are left.
    pub recovery_left: i64,
}
