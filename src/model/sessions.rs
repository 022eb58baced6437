//! Bearer tokens as their owner sees them: what each was issued for, when
//! it was last used, and the rules that end one left unused.

use serde::Serialize;

use super::Timestamp;

/// What a token was issued for; each kind has its own idle limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum TokenKind {
    /// A browser's session cookie (`/login`, `/register`, `/setup`).
    Session,
    /// A token for the API (`/api/v1/auth/*`, `pith user add`/`token`).
    Api,
}

impl TokenKind {
    pub fn as_str(self) -> &'static str {
        match self {
            TokenKind::Session => "session",
            TokenKind::Api => "api",
        }
    }

    /// The stored value back; the column's CHECK allows only these.
    pub fn parse(s: &str) -> TokenKind {
        if s == "session" { TokenKind::Session } else { TokenKind::Api }
    }
}

/// A token to store: only its digest, never the token.
#[derive(Debug, Clone)]
pub struct NewToken {
    pub user_id: i64,
    pub hash: [u8; 32],
    pub kind: TokenKind,
    /// What it was issued to, for its owner's list (a User-Agent).
    pub label: String,
}

/// A token on record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenRecord {
    /// The SHA-256 of the token: never shown (`auth::token_id` names it).
    pub hash: [u8; 32],
    pub kind: TokenKind,
    pub label: String,
    pub created_at: Timestamp,
    pub last_used_at: Timestamp,
}

/// Days of disuse after which a token ends, per kind; 0: never.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IdleLimits {
    pub session_days: u32,
    pub api_days: u32,
}

/// A use is written down at most this often per token: enough for an
/// idle limit counted in days, and no write for most requests.
pub const TOUCH_EVERY_SECS: i64 = 60;

/// The longest label kept; a User-Agent can run to kilobytes.
pub const LABEL_MAX_CHARS: usize = 120;

impl TokenRecord {
    /// Unused for longer than its kind's idle limit: it no longer signs in.
    pub fn expired(&self, now: Timestamp, limits: IdleLimits) -> bool {
        let days = match self.kind {
            TokenKind::Session => limits.session_days,
            TokenKind::Api => limits.api_days,
        };
        days > 0 && now.0 - self.last_used_at.0 > i64::from(days) * 86_400
    }

    /// Whether this use should be written down (`TOUCH_EVERY_SECS`).
    pub fn use_is_news(&self, now: Timestamp) -> bool {
        now.0 - self.last_used_at.0 >= TOUCH_EVERY_SECS
    }
}

/// A label as stored: printable characters only, at most `LABEL_MAX_CHARS`.
pub fn label(text: &str) -> String {
    text.chars().filter(|c| !c.is_control()).take(LABEL_MAX_CHARS).collect::<String>().trim().to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    const DAY: i64 = 86_400;

    fn token(kind: TokenKind, last_used: i64) -> TokenRecord {
        TokenRecord {
            hash: [0; 32],
            kind,
            label: String::new(),
            created_at: Timestamp(0),
            last_used_at: Timestamp(last_used),
        }
    }

    #[test]
    fn a_token_unused_past_its_kinds_limit_expires_and_zero_means_never() {
        let limits = IdleLimits { session_days: 30, api_days: 0 };
        let now = Timestamp(1000 * DAY);
        assert!(!token(TokenKind::Session, now.0 - 30 * DAY).expired(now, limits), "30 days exactly still works");
        assert!(token(TokenKind::Session, now.0 - 30 * DAY - 1).expired(now, limits));
        assert!(!token(TokenKind::Api, 0).expired(now, limits), "0: API tokens never idle out");
        let limits = IdleLimits { session_days: 0, api_days: 365 };
        assert!(!token(TokenKind::Session, 0).expired(now, limits));
        assert!(token(TokenKind::Api, now.0 - 366 * DAY).expired(now, limits));
    }

    #[test]
    fn a_use_is_written_down_at_most_once_a_minute() {
        let now = Timestamp(10_000);
        assert!(!token(TokenKind::Session, now.0 - 59).use_is_news(now));
        assert!(token(TokenKind::Session, now.0 - 60).use_is_news(now));
    }

    #[test]
    fn labels_lose_control_characters_and_are_cut_short() {
        assert_eq!(label(" Firefox\r\n\0 on Linux "), "Firefox on Linux");
        assert_eq!(label(&"x".repeat(500)).len(), LABEL_MAX_CHARS);
    }
}
