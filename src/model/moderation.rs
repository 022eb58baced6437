//! Moderation's domain types: who may see removed content, bans, reports,
//! the public moderation log, and the site's registration setting.

use serde::{Deserialize, Serialize};

use super::{Invalid, Post, Timestamp, Topic, check_len, no_control};

/// Who reads a topic, as far as removed content goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Viewer {
    /// Anyone: sees no removed content. The cached rendering is this view.
    Public,
    /// A signed-in user: sees their own removed content, nobody else's.
    Author(i64),
    /// A site admin or a moderator of the topic's community: sees all.
    Moderator,
}

impl Viewer {
    /// May this viewer read a removed item written by `author_id`?
    pub fn sees_removed(self, author_id: i64) -> bool {
        match self {
            Viewer::Public => false,
            Viewer::Author(id) => id == author_id,
            Viewer::Moderator => true,
        }
    }
}

/// Hides from `viewer` what moderators removed and `viewer` may not see. A
/// removed post keeps its place in the thread (its replies stay) with an
/// empty body and `removed: true`, as on Reddit. Returns false when the
/// topic itself is removed and hidden from `viewer` (answered 404).
pub fn redact(topic: &mut Topic, posts: &mut [Post], viewer: Viewer) -> bool {
    if topic.removed && !viewer.sees_removed(topic.author_id) {
        return false;
    }
    for p in posts.iter_mut().filter(|p| p.removed && !viewer.sees_removed(p.author_id)) {
        p.body.clear();
        p.body_html.clear();
    }
    true
}

/// What the public rendering of a topic hides, and from whom; `None` when
/// nothing in it is removed, so every viewer gets the same bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Restricted {
    /// Its moderators see everything.
    pub community_id: i64,
    /// Authors of removed items (the topic's included when it is removed):
    /// each sees their own.
    pub authors: Box<[i64]>,
    /// The topic itself is removed: the public gets 404.
    pub topic_removed: bool,
}

impl Restricted {
    /// Computed from the unredacted topic and posts.
    pub fn of(topic: &Topic, posts: &[Post]) -> Option<Restricted> {
        let mut authors: Vec<i64> = posts.iter().filter(|p| p.removed).map(|p| p.author_id).collect();
        if topic.removed {
            authors.push(topic.author_id);
        }
        if authors.is_empty() {
            return None;
        }
        authors.sort_unstable();
        authors.dedup();
        Some(Restricted {
            community_id: topic.community_id,
            authors: authors.into_boxed_slice(),
            topic_removed: topic.removed,
        })
    }

    pub fn concerns(&self, user_id: i64) -> bool {
        self.authors.binary_search(&user_id).is_ok()
    }
}

/// Longest moderation or report reason, in characters.
pub const MAX_REASON_CHARS: usize = 500;

/// Why a moderator acted or a user reported: one line of text.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Reason(String);

impl Reason {
    /// Trimmed; `required` refuses an empty reason (reports need one).
    pub fn parse(s: &str, required: bool) -> Result<Reason, Invalid> {
        let t = s.trim();
        check_len("reason", t, usize::from(required), MAX_REASON_CHARS)?;
        no_control("reason", t, false)?;
        Ok(Reason(t.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// A moderator's action on one topic or post.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ModAction {
    RemoveTopic(i64),
    RestoreTopic(i64),
    LockTopic(i64),
    UnlockTopic(i64),
    RemovePost(i64),
    RestorePost(i64),
}

impl ModAction {
    /// Its name in the moderation log.
    pub fn name(self) -> &'static str {
        match self {
            ModAction::RemoveTopic(_) => "remove_topic",
            ModAction::RestoreTopic(_) => "restore_topic",
            ModAction::LockTopic(_) => "lock_topic",
            ModAction::UnlockTopic(_) => "unlock_topic",
            ModAction::RemovePost(_) => "remove_post",
            ModAction::RestorePost(_) => "restore_post",
        }
    }
}

/// What a moderator's action changed.
#[derive(Debug, Clone)]
pub struct Moderated {
    pub topic_id: i64,
    /// The topic is removed: nothing in it may be published live.
    pub topic_removed: bool,
    /// The post acted on, as it is now (unredacted).
    pub post: Option<Post>,
    /// False when the item already was in the asked state (nothing logged).
    pub changed: bool,
    /// The notification its author got, for their live channel.
    pub notified: Option<super::Notified>,
}

/// A ban in force or expired (`expires_at` in the past).
#[derive(Debug, Clone, Serialize)]
pub struct Ban {
    pub user: String,
    /// `None`: banned from the whole site.
    pub community: Option<String>,
    pub reason: String,
    pub banned_by: String,
    pub created_at: Timestamp,
    /// `None`: permanent.
    pub expires_at: Option<Timestamp>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReportStatus {
    Open,
    Resolved,
    Dismissed,
}

impl ReportStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            ReportStatus::Open => "open",
            ReportStatus::Resolved => "resolved",
            ReportStatus::Dismissed => "dismissed",
        }
    }

    pub fn parse(s: &str) -> Option<ReportStatus> {
        match s {
            "open" => Some(ReportStatus::Open),
            "resolved" => Some(ReportStatus::Resolved),
            "dismissed" => Some(ReportStatus::Dismissed),
            _ => None,
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub id: i64,
    pub community: String,
    pub topic_id: i64,
    /// `None`: the report is about the topic itself.
    pub post_id: Option<i64>,
    pub reporter: String,
    pub reason: String,
    pub status: ReportStatus,
    pub created_at: Timestamp,
    pub resolved_by: Option<String>,
    pub resolved_at: Option<Timestamp>,
}

/// One line of the public moderation log.
#[derive(Debug, Clone, Serialize)]
pub struct ModLogEntry {
    pub id: i64,
    /// `None` for site-wide actions (site bans).
    pub community: Option<String>,
    pub actor: String,
    /// `remove_topic`, `ban`, `appoint_moderator`... (docs/API.md).
    pub action: String,
    pub target_user: Option<String>,
    pub topic_id: Option<i64>,
    pub post_id: Option<i64>,
    pub reason: String,
    /// For bans: when it ends (`None`: permanent).
    pub expires_at: Option<Timestamp>,
    pub created_at: Timestamp,
}

/// Who may create an account.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum RegistrationMode {
    #[default]
    Open,
    Closed,
    /// Only with an unused invite code.
    Invite,
}

impl RegistrationMode {
    pub fn as_str(self) -> &'static str {
        match self {
            RegistrationMode::Open => "open",
            RegistrationMode::Closed => "closed",
            RegistrationMode::Invite => "invite",
        }
    }

    /// Why a registration is refused in this mode, as an error code and a
    /// message; `None` when it may go ahead (an invite code still has to be
    /// valid).
    pub fn refusal(self, has_invite: bool) -> Option<(&'static str, &'static str)> {
        match self {
            RegistrationMode::Open => None,
            RegistrationMode::Closed => Some(("registration_closed", "registration is closed on this site")),
            RegistrationMode::Invite if !has_invite => {
                Some(("invite_required", "registration on this site needs an invite code (`invite`)"))
            }
            RegistrationMode::Invite => None,
        }
    }

    pub fn parse(s: &str) -> Option<RegistrationMode> {
        match s {
            "open" => Some(RegistrationMode::Open),
            "closed" => Some(RegistrationMode::Closed),
            "invite" => Some(RegistrationMode::Invite),
            _ => None,
        }
    }
}

/// The administrators' settings for the whole site.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct SiteSettings {
    pub registration: RegistrationMode,
}

/// A stored invite (the code itself is shown once, at creation).
#[derive(Debug, Clone, Serialize)]
pub struct Invite {
    pub id: i64,
    pub created_at: Timestamp,
    pub expires_at: Option<Timestamp>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn topic(removed: bool) -> Topic {
        Topic {
            id: 1,
            community: "c".into(),
            author: Some("t".into()),
            title: "T".into(),
            body: Some("topic body".into()),
            body_html: Some("<p>topic body</p>\n".into()),
            url: None,
            created_at: Timestamp(0),
            edited_at: None,
            deleted: false,
            removed,
            locked: false,
            score: 0,
            post_count: 2,
            community_id: 9,
            author_id: 10,
            inbox: Vec::new(),
        }
    }

    fn post(id: i64, author_id: i64, removed: bool) -> Post {
        Post {
            id,
            topic_id: 1,
            parent_id: None,
            author: Some("p".into()),
            body: format!("body {id}"),
            body_html: format!("<p>body {id}</p>\n"),
            created_at: Timestamp(0),
            edited_at: None,
            deleted: false,
            removed,
            score: 0,
            author_id,
            notify: None,
            inbox: Vec::new(),
        }
    }

    #[test]
    fn the_public_sees_no_removed_body_the_author_their_own_a_moderator_all() {
        for (viewer, want) in [
            (Viewer::Public, ["", "body 2"]),
            (Viewer::Author(20), ["body 1", "body 2"]),
            (Viewer::Author(21), ["", "body 2"]),
            (Viewer::Moderator, ["body 1", "body 2"]),
        ] {
            let (mut t, mut posts) = (topic(false), vec![post(1, 20, true), post(2, 21, false)]);
            assert!(redact(&mut t, &mut posts, viewer));
            let bodies: Vec<&str> = posts.iter().map(|p| p.body.as_str()).collect();
            assert_eq!(bodies, want, "{viewer:?}");
            let hidden = posts.iter().filter(|p| p.body.is_empty()).all(|p| p.body_html.is_empty());
            assert!(hidden, "{viewer:?}: a hidden body's HTML is hidden too");
        }
    }

    #[test]
    fn a_removed_topic_is_hidden_from_all_but_its_author_and_moderators() {
        for (viewer, visible) in [
            (Viewer::Public, false),
            (Viewer::Author(11), false),
            (Viewer::Author(10), true),
            (Viewer::Moderator, true),
        ] {
            assert_eq!(redact(&mut topic(true), &mut [], viewer), visible, "{viewer:?}");
        }
    }

    #[test]
    fn a_topic_with_nothing_removed_is_not_restricted() {
        assert_eq!(Restricted::of(&topic(false), &[post(1, 20, false)]), None);
        let r = Restricted::of(&topic(true), &[post(1, 20, true), post(2, 20, true)]).expect("restricted");
        assert_eq!((&*r.authors, r.topic_removed, r.community_id), (&[10, 20][..], true, 9));
        assert!(r.concerns(20) && !r.concerns(21));
    }

    #[test]
    fn reasons_are_one_bounded_line() {
        assert_eq!(Reason::parse("  spam ", true).map(|r| r.0), Ok("spam".into()));
        assert!(Reason::parse("", true).is_err());
        assert!(Reason::parse("", false).is_ok());
        assert!(Reason::parse("a\nb", false).is_err());
        assert!(Reason::parse(&"x".repeat(MAX_REASON_CHARS + 1), false).is_err());
    }
}
