//! Storage behind one trait. Handlers speak only these domain-level
//! operations; each backend (`sqlite`, `postgres`) owns its SQL, its connections
//! and its durability story.

pub mod common;
pub mod cursor;
pub mod html;
pub mod metrics;
pub mod postgres;
pub mod search;
pub mod settings;
pub mod sqlite;

use std::future::Future;

use crate::model::federation::{
    ActorKey, ActorKind, KnownActor, LocalObject, NewDelivery, QueuedDelivery, RemoteActor,
};
use crate::model::instances::{InstanceEntry, InstanceRule};
use crate::model::mail::{Delivery, Email, EmailSettings, MailLink, OutMail, ResetFor};
use crate::model::paging::PageLimit;
use crate::model::{
    Ban, Blocks, CastVote, Community, CommunityName, ContentFate, ConversationPage, IdleLimits, InboxPage, Invite,
    Link, MarkRead, Marks, Message, MessagePage, MessageReport, MessageReportPage, ModAction, ModLogEntry, Moderated,
    NewToken, Notified, Post, Profile, Reason, Report, ReportStatus, Saved, SavedCursor, SiteSettings, Text, Timestamp,
    Title, TokenKind, TokenRecord, Topic, TwoFactor, User, Username, VoteOutcome, VoteTarget,
};

pub use cursor::Cursor;
pub use cursor::PostCursor;
pub use metrics::StoreMetrics;
pub use search::{Search, SearchKind, SearchPage};
pub use settings::StoreConfig;

#[derive(Debug, Clone, thiserror::Error)]
pub enum StoreError {
    /// The named thing does not exist (or is hidden from this user).
    #[error("{0} not found")]
    NotFound(&'static str),
    /// A unique name is taken.
    #[error("{0}")]
    Conflict(String),
    /// The acting user may not do this.
    #[error("{0}")]
    Forbidden(&'static str),
    /// The acting user may not do this, for a reason with its own error
    /// code (`banned`, `topic_locked`, `registration_closed`...).
    #[error("{1}")]
    Denied(&'static str, String),
    /// The request is well-formed but refers to something inconsistent
    /// (a parent post from another topic, say).
    #[error("{0}")]
    Invalid(String),
    /// A name clashes with one on record, for a reason with its own error
    /// code (`username_too_similar`); answered 409.
    #[error("{1}")]
    Taken(&'static str, String),
    /// The database cannot take writes right now (disk full, read-only).
    #[error("storage unavailable: {0}")]
    Unavailable(String),
    /// Anything else: a bug or an I/O failure. Logged, answered as 500.
    #[error("storage error: {0}")]
    Internal(String),
}

pub type StoreResult<T> = Result<T, StoreError>;

/// Order of a topic's posts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PostSort {
    /// Highest score first, then oldest.
    Best,
    /// Newest first.
    New,
    /// Oldest first (chronological, as in Discourse).
    Old,
}

/// Order of a topic listing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TopicSort {
    Hot,
    New,
    Top(TimeWindow),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimeWindow {
    Day,
    Week,
    Month,
    Year,
    All,
}

impl TimeWindow {
    /// Oldest creation time still inside the window, relative to `now`.
    pub fn since(self, now: Timestamp) -> i64 {
        const DAY: i64 = 86_400;
        match self {
            TimeWindow::Day => now.0 - DAY,
            TimeWindow::Week => now.0 - 7 * DAY,
            TimeWindow::Month => now.0 - 30 * DAY,
            TimeWindow::Year => now.0 - 365 * DAY,
            TimeWindow::All => i64::MIN,
        }
    }
}

/// One page of a topic listing.
#[derive(Debug, Clone)]
pub struct ListTopics {
    /// `None` lists the front page across all communities.
    pub community: Option<String>,
    pub sort: TopicSort,
    pub after: Option<Cursor>,
    pub limit: usize,
    /// Leaves out the communities this user blocked (a signed-in reader's
    /// front page); `None` lists them all.
    pub hide_blocked_by: Option<i64>,
}

#[derive(Debug, Clone)]
pub struct TopicPage {
    pub topics: Vec<Topic>,
    /// Where the next page starts, when there is one.
    pub next: Option<Cursor>,
}

/// One page of a topic's posts (`Store::topic_page`).
#[derive(Debug, Clone)]
pub struct PostPage {
    pub topic: Topic,
    pub posts: Vec<Post>,
    /// Where the next page starts, when there is one.
    pub next: Option<PostCursor>,
    /// The stored text of the page's posts, as `PageLimit::bytes` weighs
    /// it: how near the page is to its cut (`app::read::add_post`).
    pub bytes: usize,
}

/// A topic as submitted, its body rendered.
#[derive(Debug, Clone)]
pub struct NewTopic {
    pub community: CommunityName,
    pub title: Title,
    pub body: Option<Text>,
    pub url: Option<Link>,
    /// The remote `Page`'s id, for a topic that came over federation:
    /// mapped to the topic in its transaction (`Conflict` when the id is
    /// mapped already, so a repeated `Create` makes nothing).
    pub remote_id: Option<String>,
}

#[derive(Debug, Clone)]
pub struct NewCommunity {
    pub name: CommunityName,
    pub title: Title,
    pub description: String,
}

/// A reply as submitted, its body rendered.
#[derive(Debug, Clone)]
pub struct NewPost {
    pub topic_id: i64,
    pub parent_id: Option<i64>,
    pub body: Text,
    /// The remote `Note`'s id, as `NewTopic::remote_id`.
    pub remote_id: Option<String>,
}

/// A ban as a moderator or admin issues it.
#[derive(Debug, Clone)]
pub struct NewBan {
    /// `None`: site-wide (admins only).
    pub community: Option<String>,
    pub username: String,
    pub reason: Reason,
    /// `None`: permanent.
    pub expires_at: Option<Timestamp>,
}

/// One page of a user's saved items, newest first.
#[derive(Debug, Clone)]
pub struct SavedPage {
    pub items: Vec<Saved>,
    pub next: Option<SavedCursor>,
}

/// One page of a community's reports, newest first.
#[derive(Debug, Clone)]
pub struct ListReports {
    pub community: String,
    /// `None`: every status.
    pub status: Option<ReportStatus>,
    /// Only reports with a smaller id (the previous page's `next`).
    pub after: Option<i64>,
    pub limit: usize,
}

#[derive(Debug, Clone)]
pub struct ReportPage {
    pub reports: Vec<Report>,
    pub next: Option<i64>,
}

/// One page of the moderation log, newest first.
#[derive(Debug, Clone)]
pub struct ListModLog {
    /// `None`: the whole site, every community and site-wide actions.
    pub community: Option<String>,
    pub after: Option<i64>,
    pub limit: usize,
}

#[derive(Debug, Clone)]
pub struct ModLogPage {
    pub entries: Vec<ModLogEntry>,
    pub next: Option<i64>,
}

/// One page of a user's inbox, newest first.
#[derive(Debug, Clone)]
pub struct ListInbox {
    /// Only the unread notifications.
    pub unread_only: bool,
    /// Only notifications with a smaller id (the previous page's `next`).
    pub after: Option<i64>,
    pub limit: usize,
}

/// A page of something listed newest first by id: only ids below
/// `after` (the previous page's `next`), at most `limit` of them.
#[derive(Debug, Clone, Copy)]
pub struct IdPage {
    pub after: Option<i64>,
    pub limit: usize,
}

/// A picture's row as `pith media gc` checks it against the files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MediaRow {
    pub name: String,
    pub created_at: Timestamp,
    /// Whether any topic or post shows it.
    pub referenced: bool,
}

/// The storage interface. Every method is a single atomic operation; writes
/// return only once durable.
pub trait Store: Send + Sync + 'static {
    // Accounts. Every way an account is made refuses a name that looks
    // like one on record (`policy::may_take_name`), in the transaction
    // that inserts it.
    fn create_user(
        &self,
        name: Username,
        password_hash: Option<String>,
        is_admin: bool,
    ) -> impl Future<Output = StoreResult<User>> + Send;
    /// The user and their password hash, for login.
    fn user_credentials(
        &self,
        name: String,
    ) -> impl Future<Output = StoreResult<Option<(User, Option<String>)>>> + Send;
    /// Stores an API token with no label.
    fn add_token(&self, user_id: i64, token_hash: [u8; 32]) -> impl Future<Output = StoreResult<()>> + Send {
        self.issue_token(NewToken { user_id, hash: token_hash, kind: TokenKind::Api, label: String::new() })
    }
    /// Stores a token of either kind, used as of now.
    fn issue_token(&self, token: NewToken) -> impl Future<Output = StoreResult<()>> + Send;
    /// The token's user and the token as recorded, expired or not: the
    /// caller applies the idle limits (`TokenRecord::expired`).
    fn token_user(&self, token_hash: [u8; 32])
    -> impl Future<Output = StoreResult<Option<(User, TokenRecord)>>> + Send;
    /// Records a use of the token at `at` (never moving it back).
    fn touch_token(&self, token_hash: [u8; 32], at: Timestamp) -> impl Future<Output = StoreResult<()>> + Send;
    /// A user's tokens, most recently used first.
    fn user_tokens(&self, user_id: i64) -> impl Future<Output = StoreResult<Vec<TokenRecord>>> + Send;
    fn revoke_token(&self, token_hash: [u8; 32]) -> impl Future<Output = StoreResult<()>> + Send;
    /// Deletes at most `limit` of what has expired by `now`: tokens unused
    /// past their kind's idle limit (which no longer sign in) and email
    /// links past their expiry (which no longer work); returns how many
    /// went. Housekeeping calls it until fewer than `limit` go, so no one
    /// write holds the writer long.
    fn sweep_expired(
        &self,
        now: Timestamp,
        limits: IdleLimits,
        limit: usize,
    ) -> impl Future<Output = StoreResult<usize>> + Send;
    /// Revokes every token of the user but `keep`; returns the digests
    /// revoked, for the token cache.
    fn revoke_tokens(
        &self,
        user_id: i64,
        keep: Option<[u8; 32]>,
    ) -> impl Future<Output = StoreResult<Vec<[u8; 32]>>> + Send;
    /// Sets the user's password hash, if it is still `old`, and revokes
    /// every token of theirs but `keep`, in one transaction; returns the
    /// digests revoked. `Conflict` when the hash changed meanwhile.
    fn set_password(
        &self,
        user_id: i64,
        old: String,
        new: String,
        keep: Option<[u8; 32]>,
    ) -> impl Future<Output = StoreResult<Vec<[u8; 32]>>> + Send;
    fn profile(&self, name: String) -> impl Future<Output = StoreResult<Profile>> + Send;

    // Communities.
    fn list_communities(&self) -> impl Future<Output = StoreResult<Vec<Community>>> + Send;
    fn community(&self, name: String) -> impl Future<Output = StoreResult<Community>> + Send;
    /// The community topic `topic_id` is in, in one read (NotFound
    /// "topic" without it): what an inbound activity about a topic needs.
    fn topic_community(&self, topic_id: i64) -> impl Future<Output = StoreResult<Community>> + Send;
    fn create_community(
        &self,
        creator: &User,
        new: NewCommunity,
    ) -> impl Future<Output = StoreResult<Community>> + Send;

    // Topics and posts.
    fn list_topics(&self, q: ListTopics) -> impl Future<Output = StoreResult<TopicPage>> + Send;
    /// The topic and its posts as stored: removed content included, for
    /// the caller to `redact` for its viewer.
    fn topic_with_posts(&self, id: i64, sort: PostSort)
    -> impl Future<Output = StoreResult<(Topic, Vec<Post>)>> + Send;
    /// The topic alone, as stored.
    fn topic(&self, id: i64) -> impl Future<Output = StoreResult<Topic>> + Send;
    /// One page of the topic's posts in `sort` order, from just after
    /// `after` (from the start without it), within `limit`
    /// (`PageLimit::cut`), as stored. Memory is bounded by the page,
    /// whatever the topic's size.
    fn topic_page(
        &self,
        id: i64,
        sort: PostSort,
        after: Option<PostCursor>,
        limit: PageLimit,
    ) -> impl Future<Output = StoreResult<PostPage>> + Send;
    /// One post of the topic, as stored, and how many ancestors it has
    /// (counted up to `max_depth`).
    fn topic_post(
        &self,
        topic: i64,
        post: i64,
        max_depth: usize,
    ) -> impl Future<Output = StoreResult<(Topic, Post, usize)>> + Send;
    /// The thread under the topic's post `root`: the post and its replies
    /// down to `depth` levels below it, taken level by level within `limit`,
    /// in `sort` order, as stored. True when the limit left replies out.
    fn thread(
        &self,
        topic: i64,
        root: i64,
        depth: usize,
        sort: PostSort,
        limit: PageLimit,
    ) -> impl Future<Output = StoreResult<(Topic, Vec<Post>, bool)>> + Send;
    fn create_topic(&self, author: &User, new: NewTopic) -> impl Future<Output = StoreResult<Topic>> + Send;
    /// Sets (or clears) a topic's body, and its title when given (a
    /// remote author's `Update`: local titles are not edited).
    fn edit_topic(
        &self,
        actor: &User,
        id: i64,
        body: Option<Text>,
        title: Option<String>,
    ) -> impl Future<Output = StoreResult<Topic>> + Send;
    fn delete_topic(&self, actor: &User, id: i64) -> impl Future<Output = StoreResult<()>> + Send;
    fn create_post(&self, author: &User, new: NewPost) -> impl Future<Output = StoreResult<Post>> + Send;
    fn edit_post(&self, actor: &User, id: i64, body: Text) -> impl Future<Output = StoreResult<Post>> + Send;
    /// Deletes a post; returns its topic id.
    fn delete_post(&self, actor: &User, id: i64) -> impl Future<Output = StoreResult<i64>> + Send;
    /// Full-text search over what the public may read, best match first.
    /// Any text is a valid query; one without words finds nothing.
    fn search(&self, q: Search) -> impl Future<Output = StoreResult<SearchPage>> + Send;
    /// `value` is -1, 0 (withdraw) or 1.
    fn vote(
        &self,
        voter: &User,
        target: VoteTarget,
        value: i8,
    ) -> impl Future<Output = StoreResult<VoteOutcome>> + Send;

    // Saves and community blocks: each the user's own, so no rule but
    // that the item or community exists.
    /// Saves (`saved`) or unsaves the topic or post; `NotFound` when it
    /// does not exist. Returns whether anything changed: saving again
    /// keeps the first time.
    fn set_saved(&self, user: &User, target: VoteTarget, saved: bool)
    -> impl Future<Output = StoreResult<bool>> + Send;
    /// One page of the user's saved items, newest first, as stored.
    fn saved(
        &self,
        user_id: i64,
        after: Option<SavedCursor>,
        limit: usize,
    ) -> impl Future<Output = StoreResult<SavedPage>> + Send;
    /// Blocks (`blocked`) or unblocks the community by name; `NotFound`
    /// when there is none. Returns whether anything changed.
    fn set_blocked(
        &self,
        user: &User,
        community: String,
        blocked: bool,
    ) -> impl Future<Output = StoreResult<bool>> + Send;
    /// The names of the communities the user blocked, by name.
    fn blocked(&self, user_id: i64) -> impl Future<Output = StoreResult<Vec<String>>> + Send;
    /// The user's votes and saves on the topic and on those of `posts`
    /// (the posts of the page shown): the personal layer of a topic page.
    fn marks(&self, user_id: i64, topic: i64, posts: Vec<i64>) -> impl Future<Output = StoreResult<Marks>> + Send;

    /// The user's votes on those of `topics` they voted on: the personal
    /// layer of a listing page.
    fn topic_votes(&self, user_id: i64, topics: Vec<i64>) -> impl Future<Output = StoreResult<Vec<(i64, i8)>>> + Send;

    // Moderation. Permissions are checked by the store, in the transaction
    // that acts: site admins everywhere, moderators in their communities.
    /// Is `user_id` a moderator of the community (admins aside)?
    fn is_moderator(&self, user_id: i64, community_id: i64) -> impl Future<Output = StoreResult<bool>> + Send;
    /// A community's moderators, in order of appointment.
    fn moderators(&self, community: String) -> impl Future<Output = StoreResult<Vec<User>>> + Send;
    /// Appoints (`appoint`) or removes a moderator; site admins only.
    /// Returns false when nothing changed.
    fn set_moderator(
        &self,
        actor: &User,
        community: String,
        username: String,
        appoint: bool,
    ) -> impl Future<Output = StoreResult<bool>> + Send;
    /// Removes, restores, locks or unlocks; logged publicly.
    fn moderate(
        &self,
        actor: &User,
        action: ModAction,
        reason: Reason,
    ) -> impl Future<Output = StoreResult<Moderated>> + Send;
    fn ban(&self, actor: &User, ban: NewBan) -> impl Future<Output = StoreResult<Ban>> + Send;
    fn unban(
        &self,
        actor: &User,
        community: Option<String>,
        username: String,
    ) -> impl Future<Output = StoreResult<()>> + Send;
    /// Bans in force in a community (or site-wide); moderators only.
    fn bans(&self, actor: &User, community: Option<String>) -> impl Future<Output = StoreResult<Vec<Ban>>> + Send;
    fn report(
        &self,
        reporter: &User,
        target: VoteTarget,
        reason: Reason,
    ) -> impl Future<Output = StoreResult<Report>> + Send;
    /// Moderators only.
    fn reports(&self, actor: &User, q: ListReports) -> impl Future<Output = StoreResult<ReportPage>> + Send;
    fn resolve_report(
        &self,
        actor: &User,
        id: i64,
        status: ReportStatus,
    ) -> impl Future<Output = StoreResult<Report>> + Send;
    /// Public.
    fn mod_log(&self, q: ListModLog) -> impl Future<Output = StoreResult<ModLogPage>> + Send;

    // The site and registration.
    fn site_settings(&self) -> impl Future<Output = StoreResult<SiteSettings>> + Send;
    /// Site admins only.
    fn set_site_settings(
        &self,
        actor: &User,
        settings: SiteSettings,
    ) -> impl Future<Output = StoreResult<SiteSettings>> + Send;
    /// Stores an invite code's digest; `creator` is `None` on the command line.
    fn create_invite(
        &self,
        creator: Option<&User>,
        code_hash: [u8; 32],
        expires_at: Option<Timestamp>,
    ) -> impl Future<Output = StoreResult<Invite>> + Send;
    /// Creates an account through public registration: checks the site's
    /// registration mode and uses up the invite, in one transaction.
    fn register_user(
        &self,
        name: Username,
        password_hash: String,
        invite_hash: Option<[u8; 32]>,
    ) -> impl Future<Output = StoreResult<User>> + Send;

    /// Whether any site administrator exists (first-run setup).
    fn has_admin(&self) -> impl Future<Output = StoreResult<bool>> + Send;
    /// Creates the first administrator; `Conflict` once one exists.
    fn create_first_admin(
        &self,
        name: Username,
        password_hash: String,
    ) -> impl Future<Output = StoreResult<User>> + Send;

    // The inbox. Notifications are written by the writes that cause them
    // (`create_post`, `moderate`), in their transaction.
    /// One page of the user's notifications, and their unread count.
    fn inbox(&self, user_id: i64, q: ListInbox) -> impl Future<Output = StoreResult<InboxPage>> + Send;
    /// How many of the user's notifications are unread.
    fn unread_count(&self, user_id: i64) -> impl Future<Output = StoreResult<i64>> + Send;
    /// Marks the user's notifications read (ids of other users' are
    /// ignored); returns the unread count after.
    fn mark_read(&self, user_id: i64, mark: MarkRead) -> impl Future<Output = StoreResult<i64>> + Send;

    // Private messages and user blocks. A message's notification is
    // written in its transaction.
    /// Stores a message from `sender` to the user named `to`, with its
    /// notification, and updates both users' conversations; returns the
    /// message and what the recipient's live channel is told. `NotFound`
    /// for no such user, `Denied("blocked")` when they blocked the sender
    /// (`policy::may_message`).
    fn send_message(
        &self,
        sender: &User,
        to: String,
        body: Text,
    ) -> impl Future<Output = StoreResult<(Message, Vec<Notified>)>> + Send;
    /// One page of the user's conversations, the most recent first.
    fn conversations(&self, user_id: i64, page: IdPage) -> impl Future<Output = StoreResult<ConversationPage>> + Send;
    /// One page of the user's conversation with the user named `with`,
    /// newest first; `NotFound` for no such user. Marks nothing read.
    fn conversation(
        &self,
        user_id: i64,
        with: String,
        page: IdPage,
    ) -> impl Future<Output = StoreResult<MessagePage>> + Send;
    /// Marks every message from `other_id` to the user read, with their
    /// notifications; returns the user's unread notification count when
    /// any notification changed.
    fn mark_conversation_read(
        &self,
        user_id: i64,
        other_id: i64,
    ) -> impl Future<Output = StoreResult<Option<i64>>> + Send;
    /// Reports a message by its recipient; `NotFound` for anyone else's,
    /// `Conflict` when it was reported already.
    fn report_message(
        &self,
        reporter: &User,
        message_id: i64,
        reason: Reason,
    ) -> impl Future<Output = StoreResult<MessageReport>> + Send;
    /// Message reports with their messages, newest first (the caller lets
    /// only administrators ask).
    fn message_reports(
        &self,
        status: Option<ReportStatus>,
        page: IdPage,
    ) -> impl Future<Output = StoreResult<MessageReportPage>> + Send;
    fn resolve_message_report(
        &self,
        actor: &User,
        id: i64,
        status: ReportStatus,
    ) -> impl Future<Output = StoreResult<MessageReport>> + Send;
    /// Blocks (`blocked`) or unblocks the user named `name`; `NotFound`
    /// for no such user, `Invalid` for oneself. Returns whether anything
    /// changed.
    fn set_user_blocked(
        &self,
        user: &User,
        name: String,
        blocked: bool,
    ) -> impl Future<Output = StoreResult<bool>> + Send;
    /// The users and communities the user blocked, by name.
    fn blocks(&self, user_id: i64) -> impl Future<Output = StoreResult<Blocks>> + Send;
    // Email. Each mail is queued in the outbox in the transaction of the
    // write that causes it, composed by `model::mail`.
    /// `register_user`, and the address (pending) with its verification
    /// link queued, in one transaction; `Taken("email_taken")` when
    /// another account has the address.
    fn register_with_email(
        &self,
        name: Username,
        password_hash: String,
        invite_hash: Option<[u8; 32]>,
        email: Email,
        link: MailLink,
    ) -> impl Future<Output = StoreResult<User>> + Send;
    /// Sets the user's pending address and queues its verification link;
    /// `Taken("email_taken")` when another account has it.
    fn set_email(&self, user_id: i64, email: Email, link: MailLink) -> impl Future<Output = StoreResult<()>> + Send;
    /// Uses up a verification link: its address becomes the user's
    /// verified one. `None` when the link is unknown, used or expired.
    fn verify_email(&self, hash: [u8; 32], now: Timestamp) -> impl Future<Output = StoreResult<Option<User>>> + Send;
    /// Stores a reset link for the account and, when `link.url` is set,
    /// queues its mail; `None` (and nothing stored) when no account
    /// matches.
    fn issue_reset(&self, to: ResetFor, link: MailLink) -> impl Future<Output = StoreResult<Option<User>>> + Send;
    /// Uses up a reset link: sets the password and revokes every token of
    /// the account, in one transaction; the user and the digests revoked,
    /// or `None` when the link is unknown, used or expired.
    fn reset_password(
        &self,
        hash: [u8; 32],
        password_hash: String,
        now: Timestamp,
    ) -> impl Future<Output = StoreResult<Option<(User, Vec<[u8; 32]>)>>> + Send;
    /// The user's address, pending address and digest setting.
    fn email_settings(&self, user_id: i64) -> impl Future<Output = StoreResult<EmailSettings>> + Send;
    /// Turns the notification digest on or off; `Invalid` for an account
    /// with no address.
    fn set_digest(&self, user_id: i64, on: bool) -> impl Future<Output = StoreResult<()>> + Send;
    /// Queues a digest for each user who opted in, has a verified address,
    /// new unread notifications, and had no digest in `DIGEST_GAP_SECS`;
    /// `base` is the site's address for the links. Returns how many.
    fn queue_digests(&self, now: Timestamp, base: String) -> impl Future<Output = StoreResult<usize>> + Send;
    /// Takes up to `limit` mails due at `now` and holds them until
    /// `now + lease_secs`, so no other sender (another node) takes them
    /// meanwhile.
    fn claim_mail(
        &self,
        now: Timestamp,
        lease_secs: i64,
        limit: usize,
    ) -> impl Future<Output = StoreResult<Vec<OutMail>>> + Send;
    /// Records how a claimed mail's delivery went.
    fn finish_mail(&self, id: i64, outcome: Delivery) -> impl Future<Output = StoreResult<()>> + Send;
    /// Mails waiting to be sent and mails given up, for `/metrics`.
    fn outbox_counts(&self) -> impl Future<Output = StoreResult<(i64, i64)>> + Send;
    // An account's lifecycle: its export, read in bounded pages (each
    // `limit` long, from just after `after`, oldest first), its deletion,
    // and its two-factor login.
    /// The topics the user wrote, as stored.
    fn authored_topics(
        &self,
        user_id: i64,
        after: Option<i64>,
        limit: usize,
    ) -> impl Future<Output = StoreResult<Vec<Topic>>> + Send;
    /// The posts the user wrote, as stored.
    fn authored_posts(
        &self,
        user_id: i64,
        after: Option<i64>,
        limit: usize,
    ) -> impl Future<Output = StoreResult<Vec<Post>>> + Send;
    /// The votes the user cast, by (kind, target) key.
    fn cast_votes(
        &self,
        user_id: i64,
        after: Option<(i64, i64)>,
        limit: usize,
    ) -> impl Future<Output = StoreResult<Vec<CastVote>>> + Send;
    /// Deletes the account, in one transaction: its tokens, inbox, saves,
    /// blocks, votes' record (their scores stay), moderator seats,
    /// recovery codes and 2FA secret go; its content stays nameless or is
    /// erased (`fate`); the row stays, marked deleted, keeping the name
    /// reserved. Returns the topics whose renderings it touched.
    /// `NotFound` for no such account (or one already deleted); `Denied`
    /// (`last_admin`) for the only administrator left.
    fn delete_user(&self, user_id: i64, fate: ContentFate) -> impl Future<Output = StoreResult<Vec<i64>>> + Send;
    /// The account's two-factor state.
    fn two_factor(&self, user_id: i64) -> impl Future<Output = StoreResult<TwoFactor>> + Send;
    /// Stores the secret of an enrolment just started (replacing any
    /// earlier one not confirmed).
    fn begin_totp(&self, user_id: i64, secret: Vec<u8>) -> impl Future<Output = StoreResult<()>> + Send;
    /// Turns two-factor login on with the pending secret, if it is still
    /// `secret`: records `step` as used and stores the recovery codes'
    /// digests, replacing any. False when the enrolment changed meanwhile.
    fn enable_totp(
        &self,
        user_id: i64,
        secret: Vec<u8>,
        step: i64,
        codes: Vec<[u8; 32]>,
    ) -> impl Future<Output = StoreResult<bool>> + Send;
    /// Turns two-factor login off: the secret and recovery codes go.
    fn disable_totp(&self, user_id: i64) -> impl Future<Output = StoreResult<()>> + Send;
    /// Records a code's step as used, if it is later than the last one
    /// used: false for a code already used (a replay).
    fn use_totp_step(&self, user_id: i64, step: i64) -> impl Future<Output = StoreResult<bool>> + Send;
    /// Uses up the recovery code with this digest; false when there is none.
    fn use_recovery_code(&self, user_id: i64, digest: [u8; 32]) -> impl Future<Output = StoreResult<bool>> + Send;

    // Pictures (`model::media`). Their files are written before their row
    // (`app::media`); topics' and posts' writes record which pictures
    // their bodies show (`Text::media`), and their deletions (and an
    // account's) free the pictures they showed.
    /// Records an uploaded picture: a new row within the quotas
    /// (`media::over_quota`, in the transaction), or the row already there
    /// under the same name (no longer freed), uncharged.
    fn record_media(
        &self,
        media: crate::model::media::Media,
        quota: crate::model::media::MediaQuota,
    ) -> impl Future<Output = StoreResult<crate::model::media::Recorded>> + Send;
    /// How many pictures and bytes `owner` has stored, or everyone.
    fn media_usage(
        &self,
        owner: Option<i64>,
    ) -> impl Future<Output = StoreResult<crate::model::media::MediaUsage>> + Send;
    /// Deletes the rows of freed pictures nothing shows any more; returns
    /// their names, for their files to be removed.
    fn take_freed_media(&self) -> impl Future<Output = StoreResult<Vec<String>>> + Send;
    /// A page of every picture's row by name, from just after `after`.
    fn media_rows(&self, after: String, limit: usize) -> impl Future<Output = StoreResult<Vec<MediaRow>>> + Send;
    /// Deletes these pictures' rows and references; returns how many rows.
    fn forget_media(&self, names: Vec<String>) -> impl Future<Output = StoreResult<usize>> + Send;

    // Federation (`model::federation`, docs/FEDERATION.md).
    /// The local actor's key pair, if it has one yet.
    fn actor_key(&self, kind: ActorKind, local_id: i64) -> impl Future<Output = StoreResult<Option<ActorKey>>> + Send;
    /// Stores `key` as the actor's unless it has one already; returns the
    /// one kept (two first uses at once agree on one key).
    fn put_actor_key(
        &self,
        kind: ActorKind,
        local_id: i64,
        key: ActorKey,
    ) -> impl Future<Output = StoreResult<ActorKey>> + Send;
    /// The remote actor whose key has this id, with the user it acts as
    /// here (none when not made yet or deleted: `remote_user` says which).
    fn remote_actor_by_key(&self, key_id: String) -> impl Future<Output = StoreResult<Option<KnownActor>>> + Send;
    /// Stores the remote actor as fetched, over what was there for its id.
    fn put_remote_actor(&self, actor: RemoteActor) -> impl Future<Output = StoreResult<()>> + Send;
    /// Makes the remote actor `actor_id` (stored) a follower of the
    /// community, by the Follow `follow_id`; `NotFound` for an unknown
    /// actor. Following again keeps one row, with the newer Follow's id.
    fn add_follower(
        &self,
        community_id: i64,
        actor_id: String,
        follow_id: String,
    ) -> impl Future<Output = StoreResult<()>> + Send;
    /// Ends the remote actor's following of the community; whether it did.
    fn remove_follower(&self, community_id: i64, actor_id: String) -> impl Future<Output = StoreResult<bool>> + Send;
    /// The community's remote followers, in the order they followed.
    fn followers(&self, community_id: i64) -> impl Future<Output = StoreResult<Vec<RemoteActor>>> + Send;
    /// Queues deliveries, due at `now`.
    fn queue_deliveries(&self, new: Vec<NewDelivery>, now: Timestamp) -> impl Future<Output = StoreResult<()>> + Send;
    /// Takes up to `limit` deliveries due at `now`, oldest first, and
    /// holds them until `now + lease_secs` (another node's sender, or this
    /// one after a crash, takes them after that).
    fn claim_deliveries(
        &self,
        now: Timestamp,
        lease_secs: i64,
        limit: usize,
    ) -> impl Future<Output = StoreResult<Vec<QueuedDelivery>>> + Send;
    /// Records how a claimed delivery went: `Sent` and `Failed` delete it,
    /// `Retry` counts the try and sets when it is due again.
    fn finish_delivery(&self, id: i64, outcome: Delivery) -> impl Future<Output = StoreResult<()>> + Send;
    /// Deliveries waiting, for tests and `/metrics`.
    fn queued_deliveries(&self) -> impl Future<Output = StoreResult<i64>> + Send;
    /// The user the stored remote actor `actor_id` acts as, made the first
    /// time (no password, no token: it cannot log in), named `name`
    /// (`RemoteActor::user_name`), or `name` with the actor's row id
    /// before its '@' when another actor has that name. `NotFound` for an
    /// actor not stored.
    fn remote_user(&self, actor_id: String, name: String) -> impl Future<Output = StoreResult<User>> + Send;
    /// The topic or post the remote object `object_id` became.
    fn remote_object(&self, object_id: String) -> impl Future<Output = StoreResult<Option<LocalObject>>> + Send;
    /// The remote id of a topic or post that came over federation.
    fn remote_object_id(&self, target: VoteTarget) -> impl Future<Output = StoreResult<Option<String>>> + Send;

    // Federation, phase 2: communities on other servers followed from here.
    /// The stored remote actor `actor_id`.
    fn remote_actor(&self, actor_id: String) -> impl Future<Output = StoreResult<Option<RemoteActor>>> + Send;
    /// Stores the `Group` actor (as `put_remote_actor`) and the community
    /// it is here: made the first time, named `name` (`name@host`; with
    /// the actor's row id before its '@' when that is taken), created by
    /// the user its Group acts as; its title and description set again
    /// each time.
    fn put_remote_community(
        &self,
        group: RemoteActor,
        name: String,
        title: String,
        description: String,
    ) -> impl Future<Output = StoreResult<Community>> + Send;
    /// The `Group` of the community `name`; `None` for a local one.
    fn community_actor(&self, name: String) -> impl Future<Output = StoreResult<Option<RemoteActor>>> + Send;
    /// The remote community whose `Group` is `actor_id`.
    fn community_of_actor(&self, actor_id: String) -> impl Future<Output = StoreResult<Option<Community>>> + Send;
    /// Records the user's `Follow` (`follow_id`) of a remote community,
    /// pending, over any earlier one; `Invalid` for a local community.
    fn follow_remote(
        &self,
        community_id: i64,
        user_id: i64,
        follow_id: String,
    ) -> impl Future<Output = StoreResult<()>> + Send;
    /// Ends the user's follow of the community; its Follow's id, if any.
    fn unfollow_remote(
        &self,
        community_id: i64,
        user_id: i64,
    ) -> impl Future<Output = StoreResult<Option<String>>> + Send;
    /// The community's Group answered the Follow `follow_id`: accepted
    /// (`true`) marks it so, rejected ends it. Whether there was one.
    fn settle_remote_follow(
        &self,
        community_id: i64,
        follow_id: String,
        accepted: bool,
    ) -> impl Future<Output = StoreResult<bool>> + Send;
    /// The user's follow of the community: `None`, or whether accepted.
    fn remote_follow(&self, community_id: i64, user_id: i64) -> impl Future<Output = StoreResult<Option<bool>>> + Send;
    /// How many local users follow the remote community (or asked to).
    fn remote_follow_count(&self, community_id: i64) -> impl Future<Output = StoreResult<i64>> + Send;
    /// The administrators' rules for other servers, by host.
    fn instance_rules(&self) -> impl Future<Output = StoreResult<Vec<InstanceEntry>>> + Send;
    /// Sets the rule for `host` (already `model::instances::parse_host`d),
    /// over any it had, with its reason; `None` removes it. Whether the
    /// host had a rule before.
    fn set_instance_rule(
        &self,
        host: String,
        rule: Option<(InstanceRule, String)>,
    ) -> impl Future<Output = StoreResult<bool>> + Send;

    /// Finish pending writes and checkpoint; called once at shutdown.
    fn shutdown(&self) -> impl Future<Output = ()> + Send;

    /// The engine's instruments for `/metrics`, when it keeps any.
    fn metrics(&self) -> Option<crate::store::StoreMetrics> {
        None
    }
}
