//! Email: a validated address, the one-use links mailed to it (their
//! purposes and lifetimes), a queued mail, and the text of each mail Pith
//! sends. Pure: the store composes a mail with these in the transaction
//! that queues it, and the sender in `app::mail` delivers it.

use serde::Serialize;

use super::{Invalid, Notice, NoticeKind, Timestamp};

/// How long a password-reset link works.
pub const RESET_TTL_SECS: i64 = 3_600;
/// How long an address-verification link works: a day, as a new member
/// may read their mail late.
pub const VERIFY_TTL_SECS: i64 = 86_400;
/// At most one notification digest per user in this many seconds.
pub const DIGEST_GAP_SECS: i64 = 900;
/// Notifications listed in one digest; the rest are counted.
pub const DIGEST_ITEMS: usize = 20;

/// An address as given, trimmed; the store compares them without case.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Email(String);

impl Email {
    /// A plain `local@domain.tld`: no display name, no spaces, no quoting
    /// or comments, the lengths RFC 5321 allows. Deliberately narrower
    /// than RFC 5322, so the address goes into a header as it is.
    pub fn parse(s: &str) -> Result<Email, Invalid> {
        let s = s.trim();
        let bad = |why: &str| Invalid(format!("email: {why}"));
        if s.is_empty() {
            return Err(bad("must not be empty"));
        }
        if s.len() > 254 {
            return Err(bad("at most 254 characters"));
        }
        let (local, domain) = s.rsplit_once('@').ok_or_else(|| bad("must look like name@example.org"))?;
        if local.is_empty() || local.len() > 64 || local.contains('@') {
            return Err(bad("must look like name@example.org"));
        }
        let allowed = |c: char| c.is_alphanumeric() || "!#$%&'*+-/=?^_`{|}~.".contains(c);
        if !local.chars().all(allowed) || local.starts_with('.') || local.ends_with('.') || local.contains("..") {
            return Err(bad("the part before @ has a character an address cannot have"));
        }
        let label_ok = |l: &str| {
            !l.is_empty()
                && l.len() <= 63
                && !l.starts_with('-')
                && !l.ends_with('-')
                && l.chars().all(|c| c.is_alphanumeric() || c == '-')
        };
        if !domain.contains('.') || !domain.split('.').all(label_ok) {
            return Err(bad("the domain after @ must be a name like example.org"));
        }
        Ok(Email(s.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// What a one-use mailed link proves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkPurpose {
    /// Whoever follows it reads mail at the address it was sent to.
    Verify,
    /// Whoever follows it may set the account's password.
    Reset,
}

impl LinkPurpose {
    pub fn as_str(self) -> &'static str {
        match self {
            LinkPurpose::Verify => "verify",
            LinkPurpose::Reset => "reset",
        }
    }
}

/// A one-use link as issued: the digest of its token (the token itself
/// is only in the mail), when it stops working, and the address the mail
/// goes to with its whole URL (`None`: no mail, `pith user reset-link`
/// prints the link instead).
#[derive(Debug, Clone)]
pub struct MailLink {
    pub hash: [u8; 32],
    pub expires_at: Timestamp,
    pub url: Option<String>,
}

/// Which account a reset is for.
#[derive(Debug, Clone)]
pub enum ResetFor {
    /// The account with this address (a verified one, or the address of
    /// an account that has none verified yet).
    Address(Email),
    /// The account of this name (`pith user reset-link`).
    Name(String),
}

/// A user's email settings as their settings page shows them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct EmailSettings {
    /// The verified address, if any.
    pub email: Option<String>,
    /// An address waiting for its link to be followed.
    pub pending: Option<String>,
    /// Whether new unread notifications are mailed as a digest.
    pub digest: bool,
}

impl EmailSettings {
    /// An account that gave an address and never proved it: held from
    /// logging in while the site requires email.
    pub fn unverified(&self) -> bool {
        self.email.is_none() && self.pending.is_some()
    }
}

/// A mail queued in the outbox, as the sender takes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutMail {
    pub id: i64,
    pub to: String,
    pub subject: String,
    pub body: String,
    /// Deliveries tried before this one.
    pub attempts: i64,
}

/// What came of one delivery.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Delivery {
    /// The server took it: the row goes, with the links it carried.
    Sent,
    /// Try again at this time.
    Retry { at: Timestamp, error: String },
    /// Given up: kept, marked failed, its body erased.
    Failed { error: String },
}

/// A mail's subject and plain-text body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Letter {
    pub subject: String,
    pub body: String,
}

/// The mail that carries an address-verification link.
pub fn verify_letter(name: &str, url: &str) -> Letter {
    Letter {
        subject: "Confirm your email address".into(),
        body: format!(
            "Hello {name},\n\nfollow this link to confirm that this address is yours:\n\n{url}\n\n\
             It works once, for a day. If you did not ask for this, ignore this mail.\n"
        ),
    }
}

/// The mail that carries a password-reset link.
pub fn reset_letter(name: &str, url: &str) -> Letter {
    Letter {
        subject: "Reset your password".into(),
        body: format!(
            "Hello {name},\n\nsomeone (we hope you) asked to reset the password of your account, {name}.\n\
             Follow this link to choose a new one:\n\n{url}\n\n\
             It works once, for an hour, and signs you out everywhere. \
             If you did not ask for this, ignore this mail: your password stays as it is.\n"
        ),
    }
}

/// The digest of a user's new unread notifications; `more` is how many
/// were left out of the list. `base` is the site's address.
pub fn digest_letter(name: &str, base: &str, items: &[Notice], more: usize) -> Letter {
    let mut body = format!("Hello {name},\n\nnew in your inbox:\n\n");
    for n in items {
        let what = match n.kind {
            NoticeKind::Reply => "replied",
            NoticeKind::Mention => "mentioned you",
            NoticeKind::Message => "sent you a message",
            NoticeKind::Moderation => "a moderator acted on your post",
        };
        let who = n.from.as_deref().unwrap_or("someone");
        let link = match (n.topic_id, n.post_id) {
            (Some(t), Some(p)) => format!("{base}/t/{t}#p{p}"),
            (Some(t), None) => format!("{base}/t/{t}"),
            _ => format!("{base}/inbox"),
        };
        let who = if n.kind == NoticeKind::Moderation { String::new() } else { format!("{who} ") };
        body.push_str(&format!("- {who}{what}: {}\n  {link}\n", n.excerpt));
    }
    if more > 0 {
        body.push_str(&format!("\n...and {more} more.\n"));
    }
    body.push_str(&format!(
        "\nYour inbox: {base}/inbox\nYou get at most one of these every 15 minutes; turn them off in your settings: {base}/settings\n"
    ));
    let count = items.len() + more;
    let subject = if count == 1 { "1 new notification".to_owned() } else { format!("{count} new notifications") };
    Letter { subject, body }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_addresses_pass_and_odd_ones_are_refused() {
        assert_eq!(Email::parse("  Ann@Example.org ").expect("valid").as_str(), "Ann@Example.org");
        assert!(Email::parse("a.b+tag@mail.example.co.uk").is_ok());
        for bad in [
            "",
            "ann",
            "ann@",
            "@example.org",
            "ann@localhost",
            "a b@example.org",
            "ann@ex ample.org",
            "<ann@example.org>",
            "ann@@example.org",
            ".ann@example.org",
            "ann@-x.org",
            "ann@example..org",
            "ann@example.org\r\nBcc: x@y.z",
        ] {
            assert!(Email::parse(bad).is_err(), "{bad:?} was accepted");
        }
        assert!(Email::parse(&format!("{}@example.org", "a".repeat(65))).is_err());
    }

    #[test]
    fn a_digest_names_each_notification_and_counts_the_rest() {
        let n = Notice {
            id: 1,
            kind: NoticeKind::Reply,
            topic_id: Some(3),
            post_id: Some(9),
            from: Some("bob".into()),
            excerpt: "hi there".into(),
            created_at: Timestamp(0),
            read: false,
        };
        let letter = digest_letter("ann", "http://f.example", &[n], 2);
        assert_eq!(letter.subject, "3 new notifications");
        assert!(letter.body.contains("bob replied: hi there\n  http://f.example/t/3#p9"), "{}", letter.body);
        assert!(letter.body.contains("...and 2 more."));
    }
}
