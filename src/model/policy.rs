//! The forum's rules, apart from any SQL: who may post, reply, edit,
//! delete, vote, report, moderate, ban, see reports and bans, change the
//! site and register, and the refusal each gets; and who hears of a reply,
//! a mention or a moderator's action in their inbox. Every rule is a pure
//! function over *facts* (what a backend reads in the transaction that then
//! acts), so SQLite and PostgreSQL cannot decide differently: a backend
//! fetches the facts and runs the SQL, a rule here decides. `store` answers
//! a `Refusal` as the `StoreError` of the same name, which fixes the API's
//! error code and message.

use super::inbox::MAX_MENTIONS;
use super::{NoticeKind, RegistrationMode, ReportStatus, Timestamp, User};

/// Why a rule refuses. The variants and their messages are `StoreError`'s.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// The thing is gone, or hidden from this user.
    #[error("{0} not found")]
    NotFound(&'static str),
    /// There can be only one (the site's first administrator).
    #[error("{0}")]
    Conflict(&'static str),
    /// The acting user may not do this.
    #[error("{0}")]
    Forbidden(&'static str),
    /// The acting user may not do this, for a reason with its own error
    /// code (`banned`, `topic_locked`, `registration_closed`...).
    #[error("{1}")]
    Denied(&'static str, String),
    /// The request contradicts what is stored (a reply to a deleted topic).
    #[error("{0}")]
    Invalid(String),
    /// A name clashes with one on record, for a reason with its own error
    /// code (`username_too_similar`).
    #[error("{1}")]
    Taken(&'static str, String),
}

/// A rule's answer: allowed, or refused and why.
pub type Verdict = Result<(), Refusal>;

// ---------------------------------------------------------------------------
// Facts.

/// A topic, as far as the rules go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TopicFacts {
    pub deleted: bool,
    /// Removed by a moderator.
    pub removed: bool,
    /// Takes no new replies, except from moderators.
    pub locked: bool,
    pub author_id: i64,
    pub community_id: i64,
}

/// Which kind of item a rule looks at; refusals name it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Topic,
    Post,
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::Topic => "topic",
            Kind::Post => "post",
        }
    }
}

/// A topic or a post, with the topic it is in (a topic is in itself): a
/// post in a removed topic is as hidden as the topic.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ItemFacts {
    pub kind: Kind,
    pub author_id: i64,
    pub deleted: bool,
    pub removed: bool,
    pub topic: TopicFacts,
}

impl ItemFacts {
    /// The topic itself as the item.
    pub fn of_topic(topic: TopicFacts) -> ItemFacts {
        ItemFacts {
            kind: Kind::Topic,
            author_id: topic.author_id,
            deleted: topic.deleted,
            removed: topic.removed,
            topic,
        }
    }

    pub fn community_id(&self) -> i64 {
        self.topic.community_id
    }
}

/// One ban on record, in force or expired: `now` decides, so a temporary
/// ban needs no job to end it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BanTerm {
    /// `None`: permanent.
    pub expires_at: Option<Timestamp>,
    /// The moderator's reason, quoted in the refusal.
    pub reason: String,
}

impl BanTerm {
    pub fn in_force(&self, now: Timestamp) -> bool {
        self.expires_at.is_none_or(|t| t > now)
    }
}

/// The bans on record against a user where they act: at most one from the
/// whole site and one from the community (one per user and scope).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BanFacts {
    pub site: Option<BanTerm>,
    /// With the community's name, for the refusal.
    pub community: Option<(String, BanTerm)>,
}

/// The acting user in one community: do they moderate it, and what bans
/// are on record against them there. Either may be left empty when the
/// rule does not ask for it (`needs_is_moderator`, `needs_bans`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Standing {
    /// Appointed moderator of the community.
    pub is_moderator: bool,
    pub bans: BanFacts,
}

/// The user a ban is aimed at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BanTarget {
    pub is_admin: bool,
    /// Moderates the community the ban is in (false for a site ban).
    pub is_moderator: bool,
}

/// An invite code on record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InviteFacts {
    pub used: bool,
    /// `None`: never expires.
    pub expires_at: Option<Timestamp>,
}

// ---------------------------------------------------------------------------
// Which facts a rule asks for: a backend skips reading the others (a write
// on the hot path saves a query).

/// Whether `actor`'s bans matter: administrators cannot be banned.
pub fn needs_bans(actor: &User) -> bool {
    !actor.is_admin
}

/// Whether it matters that `actor` is an appointed moderator: site
/// administrators moderate everywhere anyway.
pub fn needs_is_moderator(actor: &User) -> bool {
    !actor.is_admin
}

/// Whether `may_reply` asks if `actor` moderates the topic's community:
/// only in a locked topic.
pub fn reply_needs_is_moderator(actor: &User, topic: &TopicFacts) -> bool {
    topic.locked && needs_is_moderator(actor)
}

// ---------------------------------------------------------------------------
// Bans.

/// Refuses a user banned from the community (or the site) by a ban still
/// in force; the site's ban is the one named. Administrators cannot be
/// banned. Every write in a community goes through this.
pub fn not_banned(actor: &User, bans: &BanFacts, now: Timestamp) -> Verdict {
    if !needs_bans(actor) {
        return Ok(());
    }
    if let Some(ban) = bans.site.as_ref().filter(|b| b.in_force(now)) {
        return Err(banned(None, ban));
    }
    match &bans.community {
        Some((name, ban)) if ban.in_force(now) => Err(banned(Some(name), ban)),
        _ => Ok(()),
    }
}

/// The refusal for a ban in force: in `community` (`None`: site-wide),
/// until it expires, with the moderator's reason.
fn banned(community: Option<&str>, ban: &BanTerm) -> Refusal {
    let scope = community.map_or_else(|| "this site".to_owned(), |c| format!("community {c}"));
    let until = ban.expires_at.map_or_else(|| "permanently".to_owned(), |t| format!("until {}", t.rfc3339()));
    let reason = if ban.reason.is_empty() { String::new() } else { format!(" (reason: {})", ban.reason) };
    Refusal::Denied("banned", format!("you are banned from {scope} {until}{reason}"))
}

/// Banning and lifting bans: in a community (`Some`), its moderators, not
/// banned themselves; from the whole site (`None`), administrators.
pub fn may_ban(actor: &User, community: Option<&Standing>, now: Timestamp) -> Verdict {
    match community {
        Some(standing) => may_moderate(actor, standing, now),
        None if actor.is_admin => Ok(()),
        None => Err(Refusal::Forbidden("only site administrators may ban from the whole site")),
    }
}

/// Administrators cannot be banned, nor a moderator from their community
/// (an administrator removes them as moderator first).
pub fn may_be_banned(target: BanTarget) -> Verdict {
    if target.is_admin {
        return Err(Refusal::Forbidden("site administrators cannot be banned"));
    }
    if target.is_moderator {
        return Err(Refusal::Forbidden(
            "a moderator cannot be banned from their community; an administrator must remove them as moderator first",
        ));
    }
    Ok(())
}

/// Only a ban in force can be lifted: an expired one is as good as gone.
pub fn may_lift(ban: Option<&BanTerm>, now: Timestamp) -> Verdict {
    match ban {
        Some(ban) if ban.in_force(now) => Ok(()),
        _ => Err(Refusal::NotFound("ban")),
    }
}

/// A community's bans (`moderates`: whether `actor` moderates it) are for
/// its moderators; the site's (`None`) for administrators.
pub fn may_see_bans(actor: &User, moderates: Option<bool>) -> Verdict {
    match moderates {
        _ if !needs_is_moderator(actor) => Ok(()),
        Some(true) => Ok(()),
        Some(false) => Err(Refusal::Forbidden("only moderators of this community may see its bans")),
        None => Err(Refusal::Forbidden("only site administrators may see site bans")),
    }
}

// ---------------------------------------------------------------------------
// Topics and posts.

/// Creating communities is for site administrators.
pub fn may_create_community(actor: &User) -> Verdict {
    if actor.is_admin { Ok(()) } else { Err(Refusal::Forbidden("only site administrators may create communities")) }
}

/// A new topic: anyone not banned from the community.
pub fn may_create_topic(actor: &User, bans: &BanFacts, now: Timestamp) -> Verdict {
    not_banned(actor, bans, now)
}

/// A reply: not in a deleted or removed topic, not by a banned user, and
/// in a locked topic only by its moderators (to explain the lock).
/// `standing.is_moderator` is asked only when `reply_needs_is_moderator`.
pub fn may_reply(actor: &User, topic: &TopicFacts, standing: &Standing, now: Timestamp) -> Verdict {
    if topic.deleted {
        return Err(Refusal::Invalid("the topic has been deleted".into()));
    }
    if topic.removed {
        return Err(Refusal::Invalid("the topic has been removed by a moderator".into()));
    }
    not_banned(actor, &standing.bans, now)?;
    if topic.locked && !moderates(actor, standing) {
        return Err(Refusal::Denied("topic_locked", "the topic is locked: it takes no new replies".into()));
    }
    Ok(())
}

/// A reply's parent must be a post of the same topic; `parent_topic` is
/// the topic of post `parent_id`, `None` when there is no such post.
pub fn valid_parent(topic_id: i64, parent_id: i64, parent_topic: Option<i64>) -> Verdict {
    if parent_topic == Some(topic_id) {
        return Ok(());
    }
    Err(Refusal::Invalid(format!("parent_id {parent_id} is not a post in topic {topic_id}")))
}

/// Only its author (or an administrator) changes an item, and a deleted
/// item is gone.
fn owns(actor: &User, item: &ItemFacts) -> Verdict {
    if item.deleted {
        return Err(Refusal::NotFound(item.kind.name()));
    }
    if item.author_id != actor.id && !actor.is_admin {
        return Err(Refusal::Forbidden("only the author may change this"));
    }
    Ok(())
}

/// An edit: by the author, not of an item a moderator removed (an edit is
/// published live with its body), not while banned.
pub fn may_edit(actor: &User, item: &ItemFacts, bans: &BanFacts, now: Timestamp) -> Verdict {
    owns(actor, item)?;
    if item.removed || item.topic.removed {
        return Err(Refusal::Forbidden("a moderator removed this; it cannot be edited"));
    }
    not_banned(actor, bans, now)
}

/// A deletion: by the author, even of a removed item or while banned.
pub fn may_delete(actor: &User, item: &ItemFacts) -> Verdict {
    owns(actor, item)
}

/// A vote: not on deleted or removed content (its own or its topic's), not
/// while banned. A locked topic still takes votes, as on Reddit.
pub fn may_vote(actor: &User, item: &ItemFacts, bans: &BanFacts, now: Timestamp) -> Verdict {
    let gone = item.deleted || item.removed || item.topic.deleted || item.topic.removed;
    if gone {
        return Err(Refusal::Invalid("cannot vote on deleted or removed content".into()));
    }
    not_banned(actor, bans, now)
}

/// A report: not of anything in a removed topic (hidden from the public:
/// nothing to report), nor of deleted or removed content, not while banned.
pub fn may_report(actor: &User, item: &ItemFacts, bans: &BanFacts, now: Timestamp) -> Verdict {
    let what = item.kind.name();
    if item.topic.removed {
        return Err(Refusal::NotFound(what));
    }
    if item.deleted || item.removed || item.topic.deleted {
        return Err(Refusal::Invalid(format!("the {what} is already deleted or removed")));
    }
    not_banned(actor, bans, now)
}

// ---------------------------------------------------------------------------
// Moderation.

/// Site administrators moderate everywhere; moderators in their communities.
fn moderates(actor: &User, standing: &Standing) -> bool {
    !needs_is_moderator(actor) || standing.is_moderator
}

/// A moderation write (remove, restore, lock, unlock, resolve a report,
/// ban in the community): by its moderators, not banned from it.
pub fn may_moderate(actor: &User, standing: &Standing, now: Timestamp) -> Verdict {
    if !moderates(actor, standing) {
        return Err(Refusal::Forbidden("only moderators of this community may do this"));
    }
    not_banned(actor, &standing.bans, now)
}

/// A community's reports are for its moderators (`is_moderator`) and
/// administrators.
pub fn may_see_reports(actor: &User, is_moderator: bool) -> Verdict {
    if !needs_is_moderator(actor) || is_moderator {
        return Ok(());
    }
    Err(Refusal::Forbidden("only moderators of this community may see its reports"))
}

/// A report is resolved or dismissed, never reopened.
pub fn valid_resolution(status: ReportStatus) -> Verdict {
    if status == ReportStatus::Open {
        return Err(Refusal::Invalid("status must be resolved or dismissed".into()));
    }
    Ok(())
}

/// Appointing and removing moderators is for site administrators.
pub fn may_appoint_moderators(actor: &User) -> Verdict {
    if actor.is_admin {
        return Ok(());
    }
    Err(Refusal::Forbidden("only site administrators may appoint or remove moderators"))
}

// ---------------------------------------------------------------------------
// The site and registration.

/// The site's settings are for site administrators.
pub fn may_change_site(actor: &User) -> Verdict {
    if actor.is_admin {
        return Ok(());
    }
    Err(Refusal::Forbidden("only site administrators may change the site's settings"))
}

/// Invites are made by site administrators, or on the command line
/// (`creator` `None`).
pub fn may_create_invite(creator: Option<&User>) -> Verdict {
    if creator.is_some_and(|u| !u.is_admin) {
        return Err(Refusal::Forbidden("only site administrators may create invites"));
    }
    Ok(())
}

/// How a registration the site's mode allows goes ahead.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admission {
    /// Nothing more needed; a code sent anyway is not used up.
    Open,
    /// The invite code sent must be valid, and is used up.
    ByInvite,
}

/// Whether the site's registration mode lets someone register, with an
/// invite code or not (`RegistrationMode::refusal` has the messages).
pub fn may_register(mode: RegistrationMode, has_invite: bool) -> Result<Admission, Refusal> {
    if let Some((code, message)) = mode.refusal(has_invite) {
        return Err(Refusal::Denied(code, message.into()));
    }
    Ok(if mode == RegistrationMode::Invite { Admission::ByInvite } else { Admission::Open })
}

/// An invite code is good once: known, unused and not expired.
pub fn may_use_invite(invite: Option<&InviteFacts>, now: Timestamp) -> Verdict {
    match invite {
        Some(i) if !i.used && i.expires_at.is_none_or(|t| t > now) => Ok(()),
        _ => Err(Refusal::Denied("invalid_invite", "the invite code is unknown, already used or expired".into())),
    }
}

/// A new account's name may not read as a name on record: `similar` is
/// an existing user's name whose look-alike keys (`model::NameKeys`) meet
/// the new name's, other than the same name in another case (which the
/// unique index refuses as taken). Registration, first-run setup and
/// `pith user add` all go through this.
pub fn may_take_name(similar: Option<&str>) -> Verdict {
    match similar {
        None => Ok(()),
        Some(existing) => Err(Refusal::Taken(
            "username_too_similar",
            format!("that username is too similar to the existing user {existing}; choose another"),
        )),
    }
}

/// First-run setup makes one administrator, only while there is none.
pub fn may_create_first_admin(has_admin: bool) -> Verdict {
    if has_admin {
        return Err(Refusal::Conflict("the site already has an administrator"));
    }
    Ok(())
}

/// Who a new post notifies, and of what: the author of what it replies to
/// (`replied_to`) of a reply, then each user it mentions (`mentioned`,
/// existing users in order of mention) of the mention, at most
/// `MAX_MENTIONS` of them; never its own author, and nobody twice (a reply
/// that also mentions its parent's author is one reply notification).
pub fn reply_notices(author_id: i64, replied_to: Option<i64>, mentioned: &[i64]) -> Vec<(i64, NoticeKind)> {
    let mut out: Vec<(i64, NoticeKind)> = Vec::new();
    if let Some(user) = replied_to.filter(|&u| u != author_id) {
        out.push((user, NoticeKind::Reply));
    }
    for &user in mentioned.iter().take(MAX_MENTIONS) {
        if user != author_id && !out.iter().any(|&(u, _)| u == user) {
            out.push((user, NoticeKind::Mention));
        }
    }
    out
}

/// Whom a moderator's action notifies: the author of the topic or post
/// acted on, when the action changed something and was not on their own
/// content.
pub fn moderation_notice(actor_id: i64, author_id: i64, changed: bool) -> Option<i64> {
    (changed && actor_id != author_id).then_some(author_id)
}

/// A private message goes to anyone but its sender, unless they blocked
/// the sender (answered `blocked`, so the sender knows why), and never from
/// someone banned from the whole site (a community's ban leaves messages
/// alone: they belong to no community). `bans` need only hold the site ban.
pub fn may_message(
    sender: &User,
    recipient_id: i64,
    blocked_by_recipient: bool,
    bans: &BanFacts,
    now: Timestamp,
) -> Verdict {
    if sender.id == recipient_id {
        return Err(Refusal::Invalid("you cannot send a message to yourself".into()));
    }
    if let Some(ban) = bans.site.as_ref().filter(|b| needs_bans(sender) && b.in_force(now)) {
        return Err(banned(None, ban));
    }
    if blocked_by_recipient {
        return Err(Refusal::Denied("blocked", "this user does not take messages from you".into()));
    }
    Ok(())
}

/// A user blocks anyone but themself.
pub fn may_block(user_id: i64, blocked_id: i64) -> Verdict {
    if user_id == blocked_id {
        return Err(Refusal::Invalid("you cannot block yourself".into()));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: Timestamp = Timestamp(1_800_000_000);

    fn user(id: i64) -> User {
        User { id, name: format!("user{id}"), is_admin: false, created_at: Timestamp(0) }
    }

    fn admin() -> User {
        User { is_admin: true, ..user(99) }
    }

    fn topic() -> TopicFacts {
        TopicFacts { deleted: false, removed: false, locked: false, author_id: 1, community_id: 7 }
    }

    /// A post by user 2 in `topic()`.
    fn post() -> ItemFacts {
        ItemFacts { kind: Kind::Post, author_id: 2, deleted: false, removed: false, topic: topic() }
    }

    fn term(expires_at: Option<i64>, reason: &str) -> BanTerm {
        BanTerm { expires_at: expires_at.map(Timestamp), reason: reason.into() }
    }

    fn site_ban(expires_at: Option<i64>) -> BanFacts {
        BanFacts { site: Some(term(expires_at, "spam")), community: None }
    }

    fn community_ban(expires_at: Option<i64>) -> BanFacts {
        BanFacts { site: None, community: Some(("rust".into(), term(expires_at, ""))) }
    }

    fn moderator() -> Standing {
        Standing { is_moderator: true, bans: BanFacts::default() }
    }

    fn member() -> Standing {
        Standing::default()
    }

    fn forbidden(message: &'static str) -> Verdict {
        Err(Refusal::Forbidden(message))
    }

    fn invalid(message: &str) -> Verdict {
        Err(Refusal::Invalid(message.into()))
    }

    // Which facts a rule asks for.

    #[test]
    fn a_message_goes_to_anyone_but_its_sender_and_those_who_blocked_them() {
        let none = BanFacts::default();
        assert!(may_message(&user(1), 2, false, &none, NOW).is_ok());
        assert!(matches!(may_message(&user(1), 1, false, &none, NOW), Err(Refusal::Invalid(_))));
        assert!(matches!(may_message(&user(1), 2, true, &none, NOW), Err(Refusal::Denied("blocked", _))));
        assert!(may_block(1, 2).is_ok());
        assert!(may_block(2, 2).is_err());
    }

    #[test]
    fn a_site_ban_in_force_stops_messages_and_a_community_ban_does_not() {
        let refused = may_message(&user(1), 2, false, &site_ban(None), NOW);
        assert!(matches!(refused, Err(Refusal::Denied("banned", ref m)) if m.contains("this site")), "{refused:?}");
        assert!(may_message(&user(1), 2, false, &site_ban(Some(NOW.0 - 1)), NOW).is_ok(), "expired");
        assert!(may_message(&user(1), 2, false, &community_ban(None), NOW).is_ok());
        assert!(may_message(&admin(), 2, false, &site_ban(None), NOW).is_ok(), "bans never bind administrators");
    }

    #[test]
    fn an_administrators_bans_and_appointments_need_not_be_read() {
        assert!(needs_bans(&user(1)) && needs_is_moderator(&user(1)));
        assert!(!needs_bans(&admin()) && !needs_is_moderator(&admin()));
    }

    #[test]
    fn a_reply_asks_whether_its_author_moderates_only_in_a_locked_topic() {
        let locked = TopicFacts { locked: true, ..topic() };
        assert!(!reply_needs_is_moderator(&user(5), &topic()));
        assert!(reply_needs_is_moderator(&user(5), &locked));
        assert!(!reply_needs_is_moderator(&admin(), &locked));
    }

    // Bans.

    #[test]
    fn a_permanent_site_ban_refuses_with_the_banned_code_and_the_reason() {
        let verdict = not_banned(&user(1), &site_ban(None), NOW);
        assert_eq!(
            verdict,
            Err(Refusal::Denied("banned", "you are banned from this site permanently (reason: spam)".into()))
        );
    }

    #[test]
    fn a_temporary_community_ban_names_the_community_and_its_end_without_an_empty_reason() {
        let verdict = not_banned(&user(1), &community_ban(Some(NOW.0 + 60)), NOW);
        let until = Timestamp(NOW.0 + 60).rfc3339();
        assert_eq!(
            verdict,
            Err(Refusal::Denied("banned", format!("you are banned from community rust until {until}")))
        );
    }

    #[test]
    fn an_expired_ban_does_not_refuse() {
        assert_eq!(not_banned(&user(1), &site_ban(Some(NOW.0 - 1)), NOW), Ok(()));
        assert_eq!(not_banned(&user(1), &community_ban(Some(NOW.0)), NOW), Ok(()), "a ban ends at its expiry");
    }

    #[test]
    fn the_site_ban_is_named_before_the_community_ban() {
        let both = BanFacts { site: site_ban(None).site, community: community_ban(None).community };
        let Err(refusal) = not_banned(&user(1), &both, NOW) else { panic!("not refused") };
        assert!(refusal.to_string().starts_with("you are banned from this site"), "{refusal}");
    }

    #[test]
    fn an_expired_site_ban_leaves_the_community_ban_in_force() {
        let both = BanFacts { site: site_ban(Some(NOW.0 - 1)).site, community: community_ban(None).community };
        let Err(refusal) = not_banned(&user(1), &both, NOW) else { panic!("not refused") };
        assert!(refusal.to_string().starts_with("you are banned from community rust"), "{refusal}");
    }

    #[test]
    fn an_administrator_is_never_refused_as_banned() {
        assert_eq!(not_banned(&admin(), &site_ban(None), NOW), Ok(()));
    }

    #[test]
    fn a_banned_user_may_not_create_a_topic() {
        assert_eq!(may_create_topic(&user(1), &BanFacts::default(), NOW), Ok(()));
        assert!(matches!(may_create_topic(&user(1), &community_ban(None), NOW), Err(Refusal::Denied("banned", _))));
    }

    #[test]
    fn a_moderator_may_ban_in_their_community_and_only_an_administrator_site_wide() {
        assert_eq!(may_ban(&user(1), Some(&moderator()), NOW), Ok(()));
        assert_eq!(may_ban(&user(1), Some(&member()), NOW), forbidden("only moderators of this community may do this"));
        assert_eq!(may_ban(&admin(), None, NOW), Ok(()));
        assert_eq!(may_ban(&user(1), None, NOW), forbidden("only site administrators may ban from the whole site"));
    }

    #[test]
    fn a_banned_moderator_may_not_ban() {
        let banned = Standing { is_moderator: true, bans: community_ban(None) };
        assert!(matches!(may_ban(&user(1), Some(&banned), NOW), Err(Refusal::Denied("banned", _))));
    }

    #[test]
    fn an_administrator_or_a_moderator_of_the_community_cannot_be_banned() {
        let target = BanTarget { is_admin: false, is_moderator: false };
        assert_eq!(may_be_banned(target), Ok(()));
        assert_eq!(
            may_be_banned(BanTarget { is_admin: true, ..target }),
            forbidden("site administrators cannot be banned")
        );
        assert_eq!(
            may_be_banned(BanTarget { is_moderator: true, ..target }),
            forbidden(
                "a moderator cannot be banned from their community; an administrator must remove them as moderator \
                 first"
            )
        );
    }

    #[test]
    fn only_a_ban_in_force_can_be_lifted() {
        assert_eq!(may_lift(Some(&term(None, "")), NOW), Ok(()));
        assert_eq!(may_lift(Some(&term(Some(NOW.0 + 1), "")), NOW), Ok(()));
        assert_eq!(may_lift(Some(&term(Some(NOW.0), "")), NOW), Err(Refusal::NotFound("ban")));
        assert_eq!(may_lift(None, NOW), Err(Refusal::NotFound("ban")));
    }

    #[test]
    fn a_communitys_bans_are_for_its_moderators_and_the_sites_for_administrators() {
        assert_eq!(may_see_bans(&user(1), Some(true)), Ok(()));
        assert_eq!(
            may_see_bans(&user(1), Some(false)),
            forbidden("only moderators of this community may see its bans")
        );
        assert_eq!(may_see_bans(&user(1), None), forbidden("only site administrators may see site bans"));
        assert_eq!(may_see_bans(&admin(), Some(false)), Ok(()));
        assert_eq!(may_see_bans(&admin(), None), Ok(()));
    }

    // Topics and posts.

    #[test]
    fn only_an_administrator_may_create_a_community() {
        assert_eq!(may_create_community(&admin()), Ok(()));
        assert_eq!(may_create_community(&user(1)), forbidden("only site administrators may create communities"));
    }

    #[test]
    fn anyone_not_banned_may_reply_in_an_open_topic() {
        assert_eq!(may_reply(&user(5), &topic(), &member(), NOW), Ok(()));
    }

    #[test]
    fn a_reply_to_a_deleted_or_removed_topic_is_invalid() {
        let deleted = TopicFacts { deleted: true, removed: true, ..topic() };
        assert_eq!(may_reply(&admin(), &deleted, &moderator(), NOW), invalid("the topic has been deleted"));
        let removed = TopicFacts { removed: true, ..topic() };
        assert_eq!(
            may_reply(&admin(), &removed, &moderator(), NOW),
            invalid("the topic has been removed by a moderator")
        );
    }

    #[test]
    fn a_member_may_not_reply_in_a_locked_topic() {
        let locked = TopicFacts { locked: true, ..topic() };
        let verdict = may_reply(&user(5), &locked, &member(), NOW);
        assert_eq!(
            verdict,
            Err(Refusal::Denied("topic_locked", "the topic is locked: it takes no new replies".into()))
        );
    }

    #[test]
    fn a_moderator_may_reply_in_a_locked_topic() {
        let locked = TopicFacts { locked: true, ..topic() };
        assert_eq!(may_reply(&user(5), &locked, &moderator(), NOW), Ok(()));
        assert_eq!(may_reply(&admin(), &locked, &member(), NOW), Ok(()), "administrators moderate everywhere");
    }

    #[test]
    fn a_ban_is_refused_before_the_lock() {
        let locked = TopicFacts { locked: true, ..topic() };
        let banned = Standing { is_moderator: false, bans: site_ban(None) };
        assert!(matches!(may_reply(&user(5), &locked, &banned, NOW), Err(Refusal::Denied("banned", _))));
    }

    #[test]
    fn a_parent_must_be_a_post_of_the_same_topic() {
        assert_eq!(valid_parent(3, 40, Some(3)), Ok(()));
        assert_eq!(valid_parent(3, 40, Some(4)), invalid("parent_id 40 is not a post in topic 3"));
        assert_eq!(valid_parent(3, 41, None), invalid("parent_id 41 is not a post in topic 3"));
    }

    #[test]
    fn the_author_or_an_administrator_may_edit_and_delete_no_one_else() {
        let (item, none) = (post(), BanFacts::default());
        for actor in [user(2), admin()] {
            assert_eq!(may_edit(&actor, &item, &none, NOW), Ok(()), "{}", actor.name);
            assert_eq!(may_delete(&actor, &item), Ok(()), "{}", actor.name);
        }
        assert_eq!(may_edit(&user(3), &item, &none, NOW), forbidden("only the author may change this"));
        assert_eq!(may_delete(&user(3), &item), forbidden("only the author may change this"));
    }

    #[test]
    fn a_deleted_item_is_not_found_by_name() {
        let deleted = ItemFacts { deleted: true, ..post() };
        assert_eq!(may_edit(&user(2), &deleted, &BanFacts::default(), NOW), Err(Refusal::NotFound("post")));
        assert_eq!(may_delete(&admin(), &deleted), Err(Refusal::NotFound("post")));
        let topic = ItemFacts::of_topic(TopicFacts { deleted: true, ..topic() });
        assert_eq!(may_delete(&user(1), &topic), Err(Refusal::NotFound("topic")));
        assert_eq!(Refusal::NotFound("topic").to_string(), "topic not found");
    }

    #[test]
    fn an_edit_is_refused_when_a_moderator_removed_the_item_or_its_topic() {
        let refused = forbidden("a moderator removed this; it cannot be edited");
        let removed = ItemFacts { removed: true, ..post() };
        assert_eq!(may_edit(&user(2), &removed, &BanFacts::default(), NOW), refused);
        let in_removed_topic = ItemFacts { topic: TopicFacts { removed: true, ..topic() }, ..post() };
        assert_eq!(may_edit(&user(2), &in_removed_topic, &BanFacts::default(), NOW), refused);
        let removed_topic = ItemFacts::of_topic(TopicFacts { removed: true, ..topic() });
        assert_eq!(may_edit(&user(1), &removed_topic, &BanFacts::default(), NOW), refused);
    }

    #[test]
    fn a_removed_item_may_still_be_deleted_by_its_author() {
        assert_eq!(may_delete(&user(2), &ItemFacts { removed: true, ..post() }), Ok(()));
    }

    #[test]
    fn a_banned_author_may_delete_but_not_edit() {
        assert!(matches!(may_edit(&user(2), &post(), &site_ban(None), NOW), Err(Refusal::Denied("banned", _))));
        assert_eq!(may_delete(&user(2), &post()), Ok(()));
    }

    #[test]
    fn a_vote_on_deleted_or_removed_content_or_in_a_deleted_or_removed_topic_is_invalid() {
        let refused = invalid("cannot vote on deleted or removed content");
        let none = BanFacts::default();
        for item in [
            ItemFacts { deleted: true, ..post() },
            ItemFacts { removed: true, ..post() },
            ItemFacts { topic: TopicFacts { deleted: true, ..topic() }, ..post() },
            ItemFacts { topic: TopicFacts { removed: true, ..topic() }, ..post() },
            ItemFacts::of_topic(TopicFacts { removed: true, ..topic() }),
        ] {
            assert_eq!(may_vote(&admin(), &item, &none, NOW), refused, "{item:?}");
        }
    }

    #[test]
    fn a_vote_in_a_locked_topic_is_allowed() {
        let locked = TopicFacts { locked: true, ..topic() };
        assert_eq!(may_vote(&user(5), &ItemFacts::of_topic(locked), &BanFacts::default(), NOW), Ok(()));
        assert_eq!(may_vote(&user(5), &ItemFacts { topic: locked, ..post() }, &BanFacts::default(), NOW), Ok(()));
    }

    #[test]
    fn a_banned_user_may_not_vote() {
        assert!(matches!(may_vote(&user(5), &post(), &community_ban(None), NOW), Err(Refusal::Denied("banned", _))));
    }

    #[test]
    fn anything_in_a_removed_topic_is_not_found_for_a_report() {
        let in_removed = ItemFacts { topic: TopicFacts { removed: true, ..topic() }, ..post() };
        assert_eq!(may_report(&user(5), &in_removed, &BanFacts::default(), NOW), Err(Refusal::NotFound("post")));
        let removed_topic = ItemFacts::of_topic(TopicFacts { removed: true, ..topic() });
        assert_eq!(may_report(&user(5), &removed_topic, &BanFacts::default(), NOW), Err(Refusal::NotFound("topic")));
    }

    #[test]
    fn a_report_of_deleted_or_removed_content_is_invalid_and_names_it() {
        let none = BanFacts::default();
        let removed = ItemFacts { removed: true, ..post() };
        assert_eq!(may_report(&user(5), &removed, &none, NOW), invalid("the post is already deleted or removed"));
        let in_deleted = ItemFacts { topic: TopicFacts { deleted: true, ..topic() }, ..post() };
        assert_eq!(may_report(&user(5), &in_deleted, &none, NOW), invalid("the post is already deleted or removed"));
        let deleted_topic = ItemFacts::of_topic(TopicFacts { deleted: true, ..topic() });
        assert_eq!(
            may_report(&user(5), &deleted_topic, &none, NOW),
            invalid("the topic is already deleted or removed")
        );
    }

    #[test]
    fn a_banned_user_may_not_report_but_anyone_else_may() {
        assert_eq!(may_report(&user(5), &post(), &BanFacts::default(), NOW), Ok(()));
        assert!(matches!(may_report(&user(5), &post(), &site_ban(None), NOW), Err(Refusal::Denied("banned", _))));
    }

    // Moderation.

    #[test]
    fn administrators_moderate_everywhere_moderators_in_their_community() {
        assert_eq!(may_moderate(&admin(), &member(), NOW), Ok(()));
        assert_eq!(may_moderate(&user(5), &moderator(), NOW), Ok(()));
        assert_eq!(may_moderate(&user(5), &member(), NOW), forbidden("only moderators of this community may do this"));
    }

    #[test]
    fn a_banned_moderator_may_not_moderate_until_the_ban_expires() {
        let banned = Standing { is_moderator: true, bans: community_ban(Some(NOW.0 + 10)) };
        assert!(matches!(may_moderate(&user(5), &banned, NOW), Err(Refusal::Denied("banned", _))));
        assert_eq!(may_moderate(&user(5), &banned, Timestamp(NOW.0 + 10)), Ok(()));
    }

    #[test]
    fn a_communitys_reports_are_for_its_moderators_and_administrators() {
        assert_eq!(may_see_reports(&user(5), true), Ok(()));
        assert_eq!(may_see_reports(&admin(), false), Ok(()));
        assert_eq!(
            may_see_reports(&user(5), false),
            forbidden("only moderators of this community may see its reports")
        );
    }

    #[test]
    fn a_report_is_resolved_or_dismissed_never_reopened() {
        assert_eq!(valid_resolution(ReportStatus::Resolved), Ok(()));
        assert_eq!(valid_resolution(ReportStatus::Dismissed), Ok(()));
        assert_eq!(valid_resolution(ReportStatus::Open), invalid("status must be resolved or dismissed"));
    }

    #[test]
    fn only_an_administrator_may_appoint_or_remove_moderators() {
        assert_eq!(may_appoint_moderators(&admin()), Ok(()));
        assert_eq!(
            may_appoint_moderators(&user(5)),
            forbidden("only site administrators may appoint or remove moderators")
        );
    }

    // The site and registration.

    #[test]
    fn only_an_administrator_may_change_the_sites_settings() {
        assert_eq!(may_change_site(&admin()), Ok(()));
        assert_eq!(may_change_site(&user(5)), forbidden("only site administrators may change the site's settings"));
    }

    #[test]
    fn invites_are_made_by_administrators_or_on_the_command_line() {
        assert_eq!(may_create_invite(Some(&admin())), Ok(()));
        assert_eq!(may_create_invite(None), Ok(()));
        assert_eq!(may_create_invite(Some(&user(5))), forbidden("only site administrators may create invites"));
    }

    #[test]
    fn open_registration_needs_no_invite_and_uses_none_up() {
        assert_eq!(may_register(RegistrationMode::Open, false), Ok(Admission::Open));
        assert_eq!(may_register(RegistrationMode::Open, true), Ok(Admission::Open));
    }

    #[test]
    fn closed_registration_refuses_everyone() {
        let refused = Err(Refusal::Denied("registration_closed", "registration is closed on this site".into()));
        assert_eq!(may_register(RegistrationMode::Closed, false), refused);
        assert_eq!(may_register(RegistrationMode::Closed, true), refused);
    }

    #[test]
    fn invite_registration_needs_a_code_and_uses_it_up() {
        assert_eq!(
            may_register(RegistrationMode::Invite, false),
            Err(Refusal::Denied("invite_required", "registration on this site needs an invite code (`invite`)".into()))
        );
        assert_eq!(may_register(RegistrationMode::Invite, true), Ok(Admission::ByInvite));
    }

    #[test]
    fn an_invite_is_good_once_and_until_it_expires() {
        let refused =
            Err(Refusal::Denied("invalid_invite", "the invite code is unknown, already used or expired".into()));
        let fresh = InviteFacts { used: false, expires_at: None };
        assert_eq!(may_use_invite(Some(&fresh), NOW), Ok(()));
        assert_eq!(may_use_invite(Some(&InviteFacts { expires_at: Some(Timestamp(NOW.0 + 1)), ..fresh }), NOW), Ok(()));
        assert_eq!(may_use_invite(Some(&InviteFacts { expires_at: Some(NOW), ..fresh }), NOW), refused);
        assert_eq!(may_use_invite(Some(&InviteFacts { used: true, ..fresh }), NOW), refused);
        assert_eq!(may_use_invite(None, NOW), refused);
    }

    #[test]
    fn the_first_administrator_is_made_only_while_there_is_none() {
        assert_eq!(may_create_first_admin(false), Ok(()));
        assert_eq!(may_take_name(None), Ok(()));
        assert!(
            matches!(may_take_name(Some("alice")), Err(Refusal::Taken("username_too_similar", m)) if m.contains("alice"))
        );
        assert_eq!(may_create_first_admin(true), Err(Refusal::Conflict("the site already has an administrator")));
    }

    #[test]
    fn a_reply_notifies_the_parent_author_and_mentions_once_each_never_the_author() {
        use NoticeKind::*;
        assert_eq!(reply_notices(1, Some(2), &[3, 2, 1, 3]), [(2, Reply), (3, Mention)]);
        assert_eq!(reply_notices(1, Some(1), &[]), []);
        assert_eq!(reply_notices(1, None, &[1]), []);
        let many: Vec<i64> = (10..30).collect();
        assert_eq!(reply_notices(1, None, &many).len(), MAX_MENTIONS);
    }

    #[test]
    fn a_moderators_action_notifies_the_author_unless_nothing_changed_or_it_is_their_own() {
        assert_eq!(moderation_notice(1, 2, true), Some(2));
        assert_eq!(moderation_notice(1, 2, false), None);
        assert_eq!(moderation_notice(2, 2, true), None);
    }
}
