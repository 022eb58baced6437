//! The PostgreSQL backend: a pool of connections (deadpool-postgres), each
//! `Store` call one transaction on one of them, prepared statements cached
//! per connection. Unlike SQLite there is no writer thread: PostgreSQL
//! serialises what must be serialised with row locks, and several Pith
//! nodes may serve one database. docs/POSTGRES.md tells the differences.

pub mod accounts;
pub mod conn;
pub mod federation;
mod first_admin;
pub mod following;
pub mod inbox;
pub mod instances;
pub mod lifecycle;
pub mod mail;
pub mod media;
pub mod messages;
pub mod moderation;
mod parts;
pub mod reads;
pub mod reports;
pub mod saves;
pub mod search;
pub mod site;
pub mod writes;

use std::time::Duration;

use deadpool_postgres::Pool;

use crate::model::federation::{
    ActorKey, ActorKind, KnownActor, LocalObject, NewDelivery, QueuedDelivery, RemoteActor,
};
use crate::model::instances::{InstanceEntry, InstanceRule};
use crate::model::mail::{Delivery, Email, EmailSettings, MailLink, OutMail, ResetFor};
use crate::model::{
    Ban, Blocks, Community, ConversationPage, IdleLimits, InboxPage, Invite, MarkRead, Message, MessagePage,
    MessageReport, MessageReportPage, ModAction, Moderated, NewToken, Notified, Post, Profile, Reason, Report,
    ReportStatus, SiteSettings, Text, Timestamp, TokenRecord, Topic, User, Username, VoteOutcome, VoteTarget,
};
use crate::store::{
    IdPage, ListInbox, ListModLog, ListReports, ListTopics, ModLogPage, NewBan, NewCommunity, NewPost, NewTopic,
    PostSort, ReportPage, Search, SearchPage, Store, StoreResult, TopicPage,
};

use conn::{begin, finish, get, snapshot};

/// Tuning for `PgStore::connect`.
#[derive(Debug, Clone)]
pub struct PgOptions {
    /// Most connections open at once.
    pub pool_size: usize,
    /// How long a call waits for a connection (or to make one) before it
    /// fails as `Unavailable`.
    pub wait: Duration,
}

impl Default for PgOptions {
    fn default() -> Self {
        PgOptions { pool_size: 16, wait: Duration::from_secs(10) }
    }
}

pub struct PgStore {
    pool: Pool,
}

impl PgStore {
    /// Connects to `url` (`postgres://user:password@host:port/database`),
    /// checks that the server answers and applies the migrations not
    /// applied yet. The database must exist.
    pub async fn connect(url: &str, opts: &PgOptions) -> StoreResult<PgStore> {
        let pool = conn::pool(url, opts.pool_size, opts.wait)?;
        conn::migrate(&pool).await?;
        Ok(PgStore { pool })
    }

    /// The pool, for tools that load data in bulk (`pith seed`).
    pub fn pool(&self) -> &Pool {
        &self.pool
    }
}

/// Runs `$body` with `$c` bound to a read-write transaction, committed when
/// the body succeeds. A macro, not a function taking a closure: an async
/// closure borrowing the transaction cannot promise a `Send` future.
macro_rules! write {
    ($self:ident, |$c:ident| $body:expr) => {{
        let mut client = get(&$self.pool).await?;
        let tx = begin(&mut client).await?;
        let result = {
            let $c = &tx;
            $body.await
        };
        finish(tx, result).await
    }};
}

/// Runs `$body` with `$c` bound to a read-only snapshot transaction.
macro_rules! read {
    ($self:ident, |$c:ident| $body:expr) => {{
        let mut client = get(&$self.pool).await?;
        let tx = snapshot(&mut client).await?;
        let result = {
            let $c = &tx;
            $body.await
        };
        finish(tx, result).await
    }};
}

impl Store for PgStore {
    async fn create_user(&self, name: Username, password_hash: Option<String>, is_admin: bool) -> StoreResult<User> {
        let now = Timestamp::now();
        write!(self, |c| writes::create_user(c, &name, password_hash.as_deref(), is_admin, now))
    }

    async fn user_credentials(&self, name: String) -> StoreResult<Option<(User, Option<String>)>> {
        let client = get(&self.pool).await?;
        reads::user_credentials(&client, &name).await
    }

    async fn issue_token(&self, token: NewToken) -> StoreResult<()> {
        let client = get(&self.pool).await?;
        accounts::issue_token(&client, &token, Timestamp::now()).await
    }

    async fn token_user(&self, token_hash: [u8; 32]) -> StoreResult<Option<(User, TokenRecord)>> {
        let client = get(&self.pool).await?;
        accounts::token_user(&client, &token_hash).await
    }

    async fn touch_token(&self, token_hash: [u8; 32], at: Timestamp) -> StoreResult<()> {
        let client = get(&self.pool).await?;
        accounts::touch_token(&client, &token_hash, at).await
    }

    async fn user_tokens(&self, user_id: i64) -> StoreResult<Vec<TokenRecord>> {
        let client = get(&self.pool).await?;
        accounts::user_tokens(&client, user_id).await
    }

    async fn revoke_token(&self, token_hash: [u8; 32]) -> StoreResult<()> {
        let client = get(&self.pool).await?;
        writes::revoke_token(&client, &token_hash).await
    }

    async fn sweep_expired(&self, now: Timestamp, limits: IdleLimits, limit: usize) -> StoreResult<usize> {
        let client = get(&self.pool).await?;
        accounts::sweep_expired(&client, now, limits, limit).await
    }

    async fn revoke_tokens(&self, user_id: i64, keep: Option<[u8; 32]>) -> StoreResult<Vec<[u8; 32]>> {
        let client = get(&self.pool).await?;
        accounts::revoke_tokens(&client, user_id, keep.as_ref()).await
    }

    async fn set_password(
        &self,
        user_id: i64,
        old: String,
        new: String,
        keep: Option<[u8; 32]>,
    ) -> StoreResult<Vec<[u8; 32]>> {
        write!(self, |c| accounts::set_password(c, user_id, &old, &new, keep.as_ref()))
    }

    async fn profile(&self, name: String) -> StoreResult<Profile> {
        read!(self, |c| reads::profile(c, &name))
    }

    async fn list_communities(&self) -> StoreResult<Vec<Community>> {
        let client = get(&self.pool).await?;
        reads::communities(&client).await
    }

    async fn community(&self, name: String) -> StoreResult<Community> {
        let client = get(&self.pool).await?;
        reads::community(&client, &name).await
    }

    async fn topic_community(&self, topic_id: i64) -> StoreResult<Community> {
        let client = get(&self.pool).await?;
        reads::topic_community(&client, topic_id).await
    }

    async fn create_community(&self, creator: &User, new: NewCommunity) -> StoreResult<Community> {
        let now = Timestamp::now();
        write!(self, |c| writes::create_community(c, creator, &new, now))
    }

    async fn list_topics(&self, q: ListTopics) -> StoreResult<TopicPage> {
        let now = Timestamp::now();
        read!(self, |c| reads::list_topics(c, &q, now))
    }

    async fn topic_with_posts(&self, id: i64, sort: PostSort) -> StoreResult<(Topic, Vec<Post>)> {
        read!(self, |c| reads::topic_with_posts(c, id, sort))
    }

    async fn topic(&self, id: i64) -> StoreResult<Topic> {
        let client = get(&self.pool).await?;
        reads::topic(&client, id).await
    }

    async fn topic_page(
        &self,
        id: i64,
        sort: PostSort,
        after: Option<crate::store::PostCursor>,
        limit: crate::model::paging::PageLimit,
    ) -> StoreResult<crate::store::PostPage> {
        read!(self, |c| parts::topic_page(c, id, sort, after, limit))
    }

    async fn topic_post(&self, topic: i64, post: i64, max_depth: usize) -> StoreResult<(Topic, Post, usize)> {
        read!(self, |c| parts::topic_post(c, topic, post, max_depth))
    }

    async fn thread(
        &self,
        topic: i64,
        root: i64,
        depth: usize,
        sort: PostSort,
        limit: crate::model::paging::PageLimit,
    ) -> StoreResult<(Topic, Vec<Post>, bool)> {
        read!(self, |c| parts::thread(c, topic, root, depth, sort, limit))
    }

    // Bodies come rendered (`model::Text`): no connection (nor a row
    // lock) is held while rendering.

    async fn create_topic(&self, author: &User, new: NewTopic) -> StoreResult<Topic> {
        let now = Timestamp::now();
        write!(self, |c| writes::create_topic(c, author, &new, new.body.as_ref().map(Text::html), now))
    }

    async fn edit_topic(&self, actor: &User, id: i64, body: Option<Text>, title: Option<String>) -> StoreResult<Topic> {
        let now = Timestamp::now();
        let media = body.as_ref().map_or(&[][..], Text::media);
        let body = body.as_ref().map(|text| (text.as_str(), text.html()));
        write!(self, |c| writes::edit_topic(c, actor, id, body, title.as_deref(), media, now))
    }

    async fn delete_topic(&self, actor: &User, id: i64) -> StoreResult<()> {
        let now = Timestamp::now();
        write!(self, |c| writes::delete_topic(c, actor, id, now))
    }

    async fn create_post(&self, author: &User, new: NewPost) -> StoreResult<Post> {
        let now = Timestamp::now();
        write!(self, |c| writes::create_post(c, author, &new, new.body.html(), now))
    }

    async fn edit_post(&self, actor: &User, id: i64, body: Text) -> StoreResult<Post> {
        let now = Timestamp::now();
        write!(self, |c| writes::edit_post(c, actor, id, &body, now))
    }

    async fn delete_post(&self, actor: &User, id: i64) -> StoreResult<i64> {
        let now = Timestamp::now();
        write!(self, |c| writes::delete_post(c, actor, id, now))
    }

    async fn search(&self, q: Search) -> StoreResult<SearchPage> {
        read!(self, |c| search::search(c, &q))
    }

    async fn vote(&self, voter: &User, target: VoteTarget, value: i8) -> StoreResult<VoteOutcome> {
        let now = Timestamp::now();
        write!(self, |c| writes::vote(c, voter, target, value, now))
    }

    async fn set_saved(&self, user: &User, target: VoteTarget, saved: bool) -> StoreResult<bool> {
        let now = Timestamp::now();
        write!(self, |c| saves::set_saved(c, user, target, saved, now))
    }

    async fn saved(
        &self,
        user_id: i64,
        after: Option<crate::model::SavedCursor>,
        limit: usize,
    ) -> StoreResult<crate::store::SavedPage> {
        read!(self, |c| saves::saved(c, user_id, after, limit))
    }

    async fn set_blocked(&self, user: &User, community: String, blocked: bool) -> StoreResult<bool> {
        let now = Timestamp::now();
        write!(self, |c| saves::set_blocked(c, user, &community, blocked, now))
    }

    async fn blocked(&self, user_id: i64) -> StoreResult<Vec<String>> {
        let client = get(&self.pool).await?;
        saves::blocked(&client, user_id).await
    }

    async fn marks(&self, user_id: i64, topic: i64, posts: Vec<i64>) -> StoreResult<crate::model::Marks> {
        read!(self, |c| saves::marks(c, user_id, topic, &posts))
    }

    async fn topic_votes(&self, user_id: i64, topics: Vec<i64>) -> StoreResult<Vec<(i64, i8)>> {
        let client = get(&self.pool).await?;
        saves::topic_votes(&client, user_id, &topics).await
    }

    async fn is_moderator(&self, user_id: i64, community_id: i64) -> StoreResult<bool> {
        let client = get(&self.pool).await?;
        moderation::is_moderator(&client, user_id, community_id).await
    }

    async fn moderators(&self, community: String) -> StoreResult<Vec<User>> {
        read!(self, |c| moderation::moderators(c, &community))
    }

    async fn set_moderator(
        &self,
        actor: &User,
        community: String,
        username: String,
        appoint: bool,
    ) -> StoreResult<bool> {
        let now = Timestamp::now();
        write!(self, |c| moderation::set_moderator(c, actor, &community, &username, appoint, now))
    }

    async fn moderate(&self, actor: &User, action: ModAction, reason: Reason) -> StoreResult<Moderated> {
        let now = Timestamp::now();
        write!(self, |c| moderation::moderate(c, actor, action, &reason, now))
    }

    async fn ban(&self, actor: &User, ban: NewBan) -> StoreResult<Ban> {
        let now = Timestamp::now();
        write!(self, |c| moderation::ban(c, actor, &ban, now))
    }

    async fn unban(&self, actor: &User, community: Option<String>, username: String) -> StoreResult<()> {
        let now = Timestamp::now();
        write!(self, |c| moderation::unban(c, actor, community.as_deref(), &username, now))
    }

    async fn bans(&self, actor: &User, community: Option<String>) -> StoreResult<Vec<Ban>> {
        let now = Timestamp::now();
        read!(self, |c| moderation::bans(c, actor, community.as_deref(), now))
    }

    async fn report(&self, reporter: &User, target: VoteTarget, reason: Reason) -> StoreResult<Report> {
        let now = Timestamp::now();
        write!(self, |c| reports::report(c, reporter, target, &reason, now))
    }

    async fn reports(&self, actor: &User, q: ListReports) -> StoreResult<ReportPage> {
        read!(self, |c| reports::reports(c, actor, &q))
    }

    async fn resolve_report(&self, actor: &User, id: i64, status: ReportStatus) -> StoreResult<Report> {
        let now = Timestamp::now();
        write!(self, |c| reports::resolve_report(c, actor, id, status, now))
    }

    async fn mod_log(&self, q: ListModLog) -> StoreResult<ModLogPage> {
        read!(self, |c| moderation::mod_log(c, &q))
    }

    async fn site_settings(&self) -> StoreResult<SiteSettings> {
        let client = get(&self.pool).await?;
        site::settings(&client).await
    }

    async fn set_site_settings(&self, actor: &User, settings: SiteSettings) -> StoreResult<SiteSettings> {
        write!(self, |c| site::set_settings(c, actor, settings))
    }

    async fn create_invite(
        &self,
        creator: Option<&User>,
        code_hash: [u8; 32],
        expires_at: Option<Timestamp>,
    ) -> StoreResult<Invite> {
        let now = Timestamp::now();
        write!(self, |c| site::create_invite(c, creator, &code_hash, expires_at, now))
    }

    async fn register_user(
        &self,
        name: Username,
        password_hash: String,
        invite_hash: Option<[u8; 32]>,
    ) -> StoreResult<User> {
        let now = Timestamp::now();
        write!(self, |c| site::register_user(c, &name, &password_hash, invite_hash.as_ref(), now))
    }

    async fn has_admin(&self) -> StoreResult<bool> {
        read!(self, |c| first_admin::has_admin(c))
    }

    async fn create_first_admin(&self, name: Username, password_hash: String) -> StoreResult<User> {
        let now = Timestamp::now();
        write!(self, |c| first_admin::create_first_admin(c, &name, &password_hash, now))
    }

    /// Every write committed before it returned: closing the pool is all.
    async fn inbox(&self, user_id: i64, q: ListInbox) -> StoreResult<InboxPage> {
        read!(self, |c| inbox::inbox(c, user_id, &q))
    }

    async fn unread_count(&self, user_id: i64) -> StoreResult<i64> {
        let client = get(&self.pool).await?;
        inbox::unread(&client, user_id).await
    }

    async fn mark_read(&self, user_id: i64, mark: MarkRead) -> StoreResult<i64> {
        write!(self, |c| inbox::mark_read(c, user_id, &mark))
    }

    async fn send_message(&self, sender: &User, to: String, body: Text) -> StoreResult<(Message, Vec<Notified>)> {
        let now = Timestamp::now();
        write!(self, |c| messages::send_message(c, sender, &to, &body, now))
    }

    async fn conversations(&self, user_id: i64, page: IdPage) -> StoreResult<ConversationPage> {
        read!(self, |c| messages::conversations(c, user_id, page))
    }

    async fn conversation(&self, user_id: i64, with: String, page: IdPage) -> StoreResult<MessagePage> {
        read!(self, |c| messages::conversation(c, user_id, &with, page))
    }

    async fn mark_conversation_read(&self, user_id: i64, other_id: i64) -> StoreResult<Option<i64>> {
        write!(self, |c| messages::mark_conversation_read(c, user_id, other_id))
    }

    async fn report_message(&self, reporter: &User, message_id: i64, reason: Reason) -> StoreResult<MessageReport> {
        let now = Timestamp::now();
        write!(self, |c| messages::report_message(c, reporter, message_id, &reason, now))
    }

    async fn message_reports(&self, status: Option<ReportStatus>, page: IdPage) -> StoreResult<MessageReportPage> {
        read!(self, |c| messages::message_reports(c, status, page))
    }

    async fn resolve_message_report(&self, actor: &User, id: i64, status: ReportStatus) -> StoreResult<MessageReport> {
        let now = Timestamp::now();
        write!(self, |c| messages::resolve_message_report(c, actor, id, status, now))
    }

    async fn set_user_blocked(&self, user: &User, name: String, blocked: bool) -> StoreResult<bool> {
        let now = Timestamp::now();
        write!(self, |c| messages::set_user_blocked(c, user, &name, blocked, now))
    }

    async fn blocks(&self, user_id: i64) -> StoreResult<Blocks> {
        read!(self, |c| messages::blocks(c, user_id))
    }

    async fn register_with_email(
        &self,
        name: Username,
        password_hash: String,
        invite_hash: Option<[u8; 32]>,
        email: Email,
        link: MailLink,
    ) -> StoreResult<User> {
        let now = Timestamp::now();
        write!(self, |c| async {
            let user = site::register_user(c, &name, &password_hash, invite_hash.as_ref(), now).await?;
            mail::set_email(c, &user, &email, &link, now).await?;
            StoreResult::Ok(user)
        })
    }

    async fn set_email(&self, user_id: i64, email: Email, link: MailLink) -> StoreResult<()> {
        let now = Timestamp::now();
        write!(self, |c| async { mail::set_email(c, &mail::user(c, user_id).await?, &email, &link, now).await })
    }

    async fn verify_email(&self, hash: [u8; 32], now: Timestamp) -> StoreResult<Option<User>> {
        write!(self, |c| mail::verify_email(c, &hash, now))
    }

    async fn issue_reset(&self, to: ResetFor, link: MailLink) -> StoreResult<Option<User>> {
        let now = Timestamp::now();
        write!(self, |c| mail::issue_reset(c, &to, &link, now))
    }

    async fn reset_password(
        &self,
        hash: [u8; 32],
        password_hash: String,
        now: Timestamp,
    ) -> StoreResult<Option<(User, Vec<[u8; 32]>)>> {
        write!(self, |c| mail::reset_password(c, &hash, &password_hash, now))
    }

    async fn email_settings(&self, user_id: i64) -> StoreResult<EmailSettings> {
        let client = get(&self.pool).await?;
        mail::email_settings(&client, user_id).await
    }

    async fn set_digest(&self, user_id: i64, on: bool) -> StoreResult<()> {
        let client = get(&self.pool).await?;
        mail::set_digest(&client, user_id, on).await
    }

    async fn queue_digests(&self, now: Timestamp, base: String) -> StoreResult<usize> {
        write!(self, |c| mail::queue_digests(c, now, &base))
    }

    async fn claim_mail(&self, now: Timestamp, lease_secs: i64, limit: usize) -> StoreResult<Vec<OutMail>> {
        write!(self, |c| mail::claim_mail(c, now, lease_secs, limit))
    }

    async fn finish_mail(&self, id: i64, outcome: Delivery) -> StoreResult<()> {
        let client = get(&self.pool).await?;
        mail::finish_mail(&client, id, &outcome).await
    }

    async fn outbox_counts(&self) -> StoreResult<(i64, i64)> {
        let client = get(&self.pool).await?;
        mail::outbox_counts(&client).await
    }

    async fn authored_topics(&self, user_id: i64, after: Option<i64>, limit: usize) -> StoreResult<Vec<Topic>> {
        let client = get(&self.pool).await?;
        lifecycle::authored_topics(&client, user_id, after, limit).await
    }

    async fn authored_posts(&self, user_id: i64, after: Option<i64>, limit: usize) -> StoreResult<Vec<Post>> {
        let client = get(&self.pool).await?;
        lifecycle::authored_posts(&client, user_id, after, limit).await
    }

    async fn cast_votes(
        &self,
        user_id: i64,
        after: Option<(i64, i64)>,
        limit: usize,
    ) -> StoreResult<Vec<crate::model::CastVote>> {
        let client = get(&self.pool).await?;
        lifecycle::cast_votes(&client, user_id, after, limit).await
    }

    async fn record_media(
        &self,
        new: crate::model::media::Media,
        quota: crate::model::media::MediaQuota,
    ) -> StoreResult<crate::model::media::Recorded> {
        write!(self, |c| media::record_media(c, &new, quota))
    }

    async fn media_usage(&self, owner: Option<i64>) -> StoreResult<crate::model::media::MediaUsage> {
        let client = get(&self.pool).await?;
        media::usage(&client, owner).await
    }

    async fn take_freed_media(&self) -> StoreResult<Vec<String>> {
        write!(self, |c| media::take_freed(c))
    }

    async fn media_rows(&self, after: String, limit: usize) -> StoreResult<Vec<crate::store::MediaRow>> {
        let client = get(&self.pool).await?;
        media::rows(&client, &after, limit).await
    }

    async fn forget_media(&self, names: Vec<String>) -> StoreResult<usize> {
        write!(self, |c| media::forget(c, &names))
    }

    async fn actor_key(&self, kind: ActorKind, local_id: i64) -> StoreResult<Option<ActorKey>> {
        let client = get(&self.pool).await?;
        federation::actor_key(&client, kind, local_id).await
    }

    async fn put_actor_key(&self, kind: ActorKind, local_id: i64, key: ActorKey) -> StoreResult<ActorKey> {
        write!(self, |c| federation::put_actor_key(c, kind, local_id, &key))
    }

    async fn remote_actor_by_key(&self, key_id: String) -> StoreResult<Option<KnownActor>> {
        let client = get(&self.pool).await?;
        federation::remote_actor_by_key(&client, &key_id).await
    }

    async fn put_remote_actor(&self, actor: RemoteActor) -> StoreResult<()> {
        write!(self, |c| federation::put_remote_actor(c, &actor))
    }

    async fn add_follower(&self, community_id: i64, actor_id: String, follow_id: String) -> StoreResult<()> {
        write!(self, |c| federation::add_follower(c, community_id, &actor_id, &follow_id))
    }

    async fn remove_follower(&self, community_id: i64, actor_id: String) -> StoreResult<bool> {
        write!(self, |c| federation::remove_follower(c, community_id, &actor_id))
    }

    async fn followers(&self, community_id: i64) -> StoreResult<Vec<RemoteActor>> {
        let client = get(&self.pool).await?;
        federation::followers(&client, community_id).await
    }

    async fn queue_deliveries(&self, new: Vec<NewDelivery>, now: Timestamp) -> StoreResult<()> {
        write!(self, |c| federation::queue_deliveries(c, &new, now))
    }

    async fn claim_deliveries(
        &self,
        now: Timestamp,
        lease_secs: i64,
        limit: usize,
    ) -> StoreResult<Vec<QueuedDelivery>> {
        write!(self, |c| federation::claim_deliveries(c, now, lease_secs, limit))
    }

    async fn finish_delivery(&self, id: i64, outcome: Delivery) -> StoreResult<()> {
        write!(self, |c| federation::finish_delivery(c, id, &outcome))
    }

    async fn queued_deliveries(&self) -> StoreResult<i64> {
        let client = get(&self.pool).await?;
        federation::queued_count(&client).await
    }

    async fn remote_user(&self, actor_id: String, name: String) -> StoreResult<User> {
        // Made once, read ever after, outside a write transaction.
        if let Some(user) = federation::actor_user(&get(&self.pool).await?, &actor_id).await? {
            return Ok(user);
        }
        let now = Timestamp::now();
        write!(self, |c| federation::remote_user(c, &actor_id, &name, now))
    }

    async fn remote_object(&self, object_id: String) -> StoreResult<Option<LocalObject>> {
        let client = get(&self.pool).await?;
        federation::remote_object(&client, &object_id).await
    }

    async fn remote_object_id(&self, target: VoteTarget) -> StoreResult<Option<String>> {
        let client = get(&self.pool).await?;
        federation::remote_object_id(&client, target).await
    }

    async fn remote_actor(&self, actor_id: String) -> StoreResult<Option<RemoteActor>> {
        following::remote_actor(&get(&self.pool).await?, &actor_id).await
    }

    async fn put_remote_community(
        &self,
        group: RemoteActor,
        name: String,
        title: String,
        description: String,
    ) -> StoreResult<Community> {
        let now = Timestamp::now();
        write!(self, |c| following::put_remote_community(c, &group, &name, &title, &description, now))
    }

    async fn community_actor(&self, name: String) -> StoreResult<Option<RemoteActor>> {
        following::community_actor(&get(&self.pool).await?, &name).await
    }

    async fn community_of_actor(&self, actor_id: String) -> StoreResult<Option<Community>> {
        read!(self, |c| following::community_of_actor(c, &actor_id))
    }

    async fn follow_remote(&self, community_id: i64, user_id: i64, follow_id: String) -> StoreResult<()> {
        write!(self, |c| following::follow_remote(c, community_id, user_id, &follow_id))
    }

    async fn unfollow_remote(&self, community_id: i64, user_id: i64) -> StoreResult<Option<String>> {
        write!(self, |c| following::unfollow_remote(c, community_id, user_id))
    }

    async fn settle_remote_follow(&self, community_id: i64, follow_id: String, accepted: bool) -> StoreResult<bool> {
        write!(self, |c| following::settle_remote_follow(c, community_id, &follow_id, accepted))
    }

    async fn remote_follow(&self, community_id: i64, user_id: i64) -> StoreResult<Option<bool>> {
        following::remote_follow(&get(&self.pool).await?, community_id, user_id).await
    }

    async fn remote_follow_count(&self, community_id: i64) -> StoreResult<i64> {
        following::remote_follow_count(&get(&self.pool).await?, community_id).await
    }

    async fn instance_rules(&self) -> StoreResult<Vec<InstanceEntry>> {
        let client = get(&self.pool).await?;
        instances::rules(&client).await
    }

    async fn set_instance_rule(&self, host: String, rule: Option<(InstanceRule, String)>) -> StoreResult<bool> {
        write!(self, |c| instances::set_rule(c, &host, rule.as_ref()))
    }

    async fn delete_user(&self, user_id: i64, fate: crate::model::ContentFate) -> StoreResult<Vec<i64>> {
        let now = Timestamp::now();
        write!(self, |c| lifecycle::delete_user(c, user_id, fate, now))
    }

    async fn two_factor(&self, user_id: i64) -> StoreResult<crate::model::TwoFactor> {
        let client = get(&self.pool).await?;
        lifecycle::two_factor(&client, user_id).await
    }

    async fn begin_totp(&self, user_id: i64, secret: Vec<u8>) -> StoreResult<()> {
        let client = get(&self.pool).await?;
        lifecycle::begin_totp(&client, user_id, &secret).await
    }

    async fn enable_totp(&self, user_id: i64, secret: Vec<u8>, step: i64, codes: Vec<[u8; 32]>) -> StoreResult<bool> {
        write!(self, |c| lifecycle::enable_totp(c, user_id, &secret, step, &codes))
    }

    async fn disable_totp(&self, user_id: i64) -> StoreResult<()> {
        write!(self, |c| lifecycle::disable_totp(c, user_id))
    }

    async fn use_totp_step(&self, user_id: i64, step: i64) -> StoreResult<bool> {
        let client = get(&self.pool).await?;
        lifecycle::use_totp_step(&client, user_id, step).await
    }

    async fn use_recovery_code(&self, user_id: i64, digest: [u8; 32]) -> StoreResult<bool> {
        let client = get(&self.pool).await?;
        lifecycle::use_recovery_code(&client, user_id, &digest).await
    }

    async fn shutdown(&self) {
        self.pool.close();
    }
}
