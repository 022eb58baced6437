//! The embedded SQLite backend: one writer thread with group commit
//! (`writer`), a pool of reader threads (`readers`), a background
//! checkpointer (`checkpoint`), and the SQL itself (`reads`, `writes`,
//! `search`). docs/STORAGE.md explains the durability choices.

pub mod accounts;
mod backfill;
mod checkpoint;
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
mod readers;
pub mod reads;
pub mod reports;
pub mod saves;
pub mod search;
pub mod search_queue;
pub mod site;
mod writer;
pub mod writes;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

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
    PostSort, ReportPage, Search, SearchPage, Store, StoreError, StoreResult, TopicPage,
};

use checkpoint::{Checkpointer, WalLog};
use readers::Readers;
use writer::Writer;

/// Tuning for `SqliteStore::open`.
#[derive(Debug, Clone)]
pub struct SqliteOptions {
    pub readers: usize,
    pub max_batch: usize,
    pub wal_limit_bytes: u64,
    pub checkpoint_every: Duration,
}

impl Default for SqliteOptions {
    fn default() -> Self {
        SqliteOptions {
            readers: crate::settings::default_readers(),
            max_batch: 512,
            wal_limit_bytes: 64 << 20,
            checkpoint_every: Duration::from_secs(1),
        }
    }
}

pub struct SqliteStore {
    path: PathBuf,
    writer: Writer,
    readers: Readers,
    checkpointer: Checkpointer,
    /// Whether the writer left changes in the search queue (set before the
    /// writes are acknowledged): a search has them indexed first.
    search_pending: Arc<AtomicBool>,
    /// Batch sizes, commit and checkpoint timings, file sizes (`/metrics`).
    metrics: crate::store::StoreMetrics,
}

impl SqliteStore {
    /// Opens (creating when missing) the database at `path`, migrates it and
    /// starts the writer, readers and checkpointer.
    pub fn open(path: &Path, opts: &SqliteOptions) -> StoreResult<SqliteStore> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|e| {
                StoreError::Unavailable(format!("cannot create the data directory {}: {e}", dir.display()))
            })?;
        }
        let mut conn = conn::open(path, conn::Role::Writer)?;
        // SQLite silently opens a write-protected file read-only; say so now
        // rather than failing every write later.
        if conn.is_readonly(rusqlite::MAIN_DB).unwrap_or(false) {
            let why = conn::not_writable(path).unwrap_or_else(|| "the database file is read-only".into());
            return Err(StoreError::Unavailable(why));
        }
        check_integrity(&conn)?;
        conn::migrate(&mut conn)?;
        // The integrity check and the migrations (with the HTML backfill's
        // scan) read the whole file through this connection's page cache:
        // give that memory back rather than hold pages no write will need.
        let _ = conn.execute_batch("PRAGMA shrink_memory");
        let readers = Readers::start(path, opts.readers)?;
        // The writer and the checkpointer take turns checkpointing (see WalBound).
        let turns = std::sync::Arc::new(std::sync::Mutex::new(()));
        let metrics = crate::store::StoreMetrics::new(path);
        let search_pending = Arc::new(AtomicBool::new(false));
        let log = Arc::new(WalLog::default());
        let page_size: i64 = conn.query_row("PRAGMA page_size", [], |r| r.get(0)).map_err(conn::map_err)?;
        let page_size = u64::try_from(page_size).unwrap_or(4096);
        let checkpointer = Checkpointer::start(
            path.to_owned(),
            opts.wal_limit_bytes,
            opts.checkpoint_every,
            turns.clone(),
            metrics.clone(),
            log.clone(),
            page_size,
        )?;
        Ok(SqliteStore {
            path: path.to_owned(),
            writer: Writer::start(
                conn,
                opts.max_batch,
                writer::WalBound {
                    limit_bytes: opts.wal_limit_bytes,
                    log,
                    page_size,
                    lock: turns,
                    metrics: metrics.clone(),
                },
                search_pending.clone(),
            )?,
            search_pending,
            readers,
            checkpointer,
            metrics,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// A quick structural check at start, so a damaged file is reported before
/// serving rather than as errors later.
fn check_integrity(conn: &rusqlite::Connection) -> StoreResult<()> {
    let verdict: String =
        conn.query_row("PRAGMA quick_check(1)", [], |r| r.get(0)).map_err(|e| match e.sqlite_error_code() {
            Some(rusqlite::ErrorCode::DatabaseCorrupt | rusqlite::ErrorCode::NotADatabase) => conn::corrupted(&e),
            _ => StoreError::Unavailable(format!("the database is unreadable: {e}")),
        })?;
    if verdict != "ok" {
        return Err(StoreError::Internal(format!(
            "the database is corrupted (integrity check: {verdict}); restore it from a backup"
        )));
    }
    Ok(())
}

impl Store for SqliteStore {
    fn metrics(&self) -> Option<crate::store::StoreMetrics> {
        Some(self.metrics.clone())
    }

    async fn create_user(&self, name: Username, password_hash: Option<String>, is_admin: bool) -> StoreResult<User> {
        let now = Timestamp::now();
        self.writer.write(move |c| writes::create_user(c, &name, password_hash.as_deref(), is_admin, now)).await
    }

    async fn user_credentials(&self, name: String) -> StoreResult<Option<(User, Option<String>)>> {
        self.readers.read(move |c| reads::user_credentials(c, &name)).await
    }

    async fn issue_token(&self, token: NewToken) -> StoreResult<()> {
        let now = Timestamp::now();
        self.writer.write(move |c| accounts::issue_token(c, &token, now)).await
    }

    async fn token_user(&self, token_hash: [u8; 32]) -> StoreResult<Option<(User, TokenRecord)>> {
        self.readers.read(move |c| accounts::token_user(c, &token_hash)).await
    }

    async fn touch_token(&self, token_hash: [u8; 32], at: Timestamp) -> StoreResult<()> {
        self.writer.write(move |c| accounts::touch_token(c, &token_hash, at)).await
    }

    async fn user_tokens(&self, user_id: i64) -> StoreResult<Vec<TokenRecord>> {
        self.readers.read(move |c| accounts::user_tokens(c, user_id)).await
    }

    async fn revoke_token(&self, token_hash: [u8; 32]) -> StoreResult<()> {
        self.writer.write(move |c| writes::revoke_token(c, &token_hash)).await
    }

    async fn sweep_expired(&self, now: Timestamp, limits: IdleLimits, limit: usize) -> StoreResult<usize> {
        self.writer.write(move |c| accounts::sweep_expired(c, now, limits, limit)).await
    }

    async fn revoke_tokens(&self, user_id: i64, keep: Option<[u8; 32]>) -> StoreResult<Vec<[u8; 32]>> {
        self.writer.write(move |c| accounts::revoke_tokens(c, user_id, keep.as_ref())).await
    }

    async fn set_password(
        &self,
        user_id: i64,
        old: String,
        new: String,
        keep: Option<[u8; 32]>,
    ) -> StoreResult<Vec<[u8; 32]>> {
        self.writer.write(move |c| accounts::set_password(c, user_id, &old, &new, keep.as_ref())).await
    }

    async fn profile(&self, name: String) -> StoreResult<Profile> {
        self.readers.read(move |c| reads::profile(c, &name)).await
    }

    async fn list_communities(&self) -> StoreResult<Vec<Community>> {
        self.readers.read(reads::communities).await
    }

    async fn community(&self, name: String) -> StoreResult<Community> {
        self.readers.read(move |c| reads::community(c, &name)).await
    }

    async fn topic_community(&self, topic_id: i64) -> StoreResult<Community> {
        self.readers.read(move |c| reads::topic_community(c, topic_id)).await
    }

    async fn create_community(&self, creator: &User, new: NewCommunity) -> StoreResult<Community> {
        let (creator, now) = (creator.clone(), Timestamp::now());
        self.writer.write(move |c| writes::create_community(c, &creator, &new, now)).await
    }

    async fn list_topics(&self, q: ListTopics) -> StoreResult<TopicPage> {
        let now = Timestamp::now();
        self.readers.read(move |c| reads::list_topics(c, &q, now)).await
    }

    async fn topic_with_posts(&self, id: i64, sort: PostSort) -> StoreResult<(Topic, Vec<Post>)> {
        self.readers.read(move |c| reads::topic_with_posts(c, id, sort)).await
    }

    async fn topic(&self, id: i64) -> StoreResult<Topic> {
        self.readers.read(move |c| reads::topic(c, id)).await
    }

    async fn topic_page(
        &self,
        id: i64,
        sort: PostSort,
        after: Option<crate::store::PostCursor>,
        limit: crate::model::paging::PageLimit,
    ) -> StoreResult<crate::store::PostPage> {
        self.readers.read(move |c| parts::topic_page(c, id, sort, after, limit)).await
    }

    async fn topic_post(&self, topic: i64, post: i64, max_depth: usize) -> StoreResult<(Topic, Post, usize)> {
        self.readers.read(move |c| parts::topic_post(c, topic, post, max_depth)).await
    }

    async fn thread(
        &self,
        topic: i64,
        root: i64,
        depth: usize,
        sort: PostSort,
        limit: crate::model::paging::PageLimit,
    ) -> StoreResult<(Topic, Vec<Post>, bool)> {
        self.readers.read(move |c| parts::thread(c, topic, root, depth, sort, limit)).await
    }

    // Bodies come rendered (`model::Text`): no write waits on the single
    // writer thread behind another's rendering.

    async fn create_topic(&self, author: &User, new: NewTopic) -> StoreResult<Topic> {
        let (author, now) = (author.clone(), Timestamp::now());
        self.writer.write(move |c| writes::create_topic(c, &author, &new, new.body.as_ref().map(Text::html), now)).await
    }

    async fn edit_topic(&self, actor: &User, id: i64, body: Option<Text>, title: Option<String>) -> StoreResult<Topic> {
        let (actor, now) = (actor.clone(), Timestamp::now());
        self.writer
            .write(move |c| {
                let media = body.as_ref().map_or(&[][..], Text::media);
                let body = body.as_ref().map(|text| (text.as_str(), text.html()));
                writes::edit_topic(c, &actor, id, body, title.as_deref(), media, now)
            })
            .await
    }

    async fn delete_topic(&self, actor: &User, id: i64) -> StoreResult<()> {
        let (actor, now) = (actor.clone(), Timestamp::now());
        self.writer.write(move |c| writes::delete_topic(c, &actor, id, now)).await
    }

    async fn create_post(&self, author: &User, new: NewPost) -> StoreResult<Post> {
        let now = Timestamp::now();
        // The writer thread only borrows the inputs, so their memory is
        // freed here, not there: glibc frees a block in the arena of the
        // thread that allocated it, and the writer freeing the runtime's
        // blocks contended for those arenas' locks (perf: futex wakes from
        // `free` on the writer thread). The reply is built here too.
        let input = std::sync::Arc::new((author.clone(), new));
        let shared = input.clone();
        // `create_post` refuses before its first change: no savepoint needed.
        let (id, replied_to, notified) = self
            .writer
            .write_checked_first(move |c| {
                let (author, new) = &*shared;
                writes::create_post(c, author, new, new.body.html(), now)
            })
            .await?;
        let (author, new) = &*input;
        Ok(crate::store::common::new_reply(id, author, new, new.body.html(), now, replied_to, notified))
    }

    async fn edit_post(&self, actor: &User, id: i64, body: Text) -> StoreResult<Post> {
        let (actor, now) = (actor.clone(), Timestamp::now());
        self.writer.write(move |c| writes::edit_post(c, &actor, id, &body, now)).await
    }

    async fn delete_post(&self, actor: &User, id: i64) -> StoreResult<i64> {
        let (actor, now) = (actor.clone(), Timestamp::now());
        self.writer.write(move |c| writes::delete_post(c, &actor, id, now)).await
    }

    async fn search(&self, q: Search) -> StoreResult<SearchPage> {
        // What was acknowledged is found: changes the writer left queued
        // for the search index are indexed before the query runs.
        if self.search_pending.load(Ordering::Acquire) {
            self.writer.write(search_queue::apply_in_batch).await?;
        }
        self.readers.read(move |c| search::search(c, &q)).await
    }

    async fn vote(&self, voter: &User, target: VoteTarget, value: i8) -> StoreResult<VoteOutcome> {
        let (voter, now) = (voter.clone(), Timestamp::now());
        // Numbered on the writer thread, in commit order. `vote` refuses
        // before its first change: no savepoint needed.
        let vote = move |c: &_| {
            writes::vote(c, &voter, target, value, now).map(|o| VoteOutcome { seq: Some(writer::next_seq()), ..o })
        };
        self.writer.write_checked_first(vote).await
    }

    async fn set_saved(&self, user: &User, target: VoteTarget, saved: bool) -> StoreResult<bool> {
        let (user, now) = (user.clone(), Timestamp::now());
        self.writer.write(move |c| saves::set_saved(c, &user, target, saved, now)).await
    }

    async fn saved(
        &self,
        user_id: i64,
        after: Option<crate::model::SavedCursor>,
        limit: usize,
    ) -> StoreResult<crate::store::SavedPage> {
        self.readers.read(move |c| saves::saved(c, user_id, after, limit)).await
    }

    async fn set_blocked(&self, user: &User, community: String, blocked: bool) -> StoreResult<bool> {
        let (user, now) = (user.clone(), Timestamp::now());
        self.writer.write(move |c| saves::set_blocked(c, &user, &community, blocked, now)).await
    }

    async fn blocked(&self, user_id: i64) -> StoreResult<Vec<String>> {
        self.readers.read(move |c| saves::blocked(c, user_id)).await
    }

    async fn marks(&self, user_id: i64, topic: i64, posts: Vec<i64>) -> StoreResult<crate::model::Marks> {
        self.readers.read(move |c| saves::marks(c, user_id, topic, &posts)).await
    }

    async fn topic_votes(&self, user_id: i64, topics: Vec<i64>) -> StoreResult<Vec<(i64, i8)>> {
        self.readers.read(move |c| saves::topic_votes(c, user_id, &topics)).await
    }

    async fn is_moderator(&self, user_id: i64, community_id: i64) -> StoreResult<bool> {
        self.readers.read(move |c| moderation::is_moderator(c, user_id, community_id)).await
    }

    async fn moderators(&self, community: String) -> StoreResult<Vec<User>> {
        self.readers.read(move |c| moderation::moderators(c, &community)).await
    }

    async fn set_moderator(
        &self,
        actor: &User,
        community: String,
        username: String,
        appoint: bool,
    ) -> StoreResult<bool> {
        let (actor, now) = (actor.clone(), Timestamp::now());
        self.writer.write(move |c| moderation::set_moderator(c, &actor, &community, &username, appoint, now)).await
    }

    async fn moderate(&self, actor: &User, action: ModAction, reason: Reason) -> StoreResult<Moderated> {
        let (actor, now) = (actor.clone(), Timestamp::now());
        self.writer.write(move |c| moderation::moderate(c, &actor, action, &reason, now)).await
    }

    async fn ban(&self, actor: &User, ban: NewBan) -> StoreResult<Ban> {
        let (actor, now) = (actor.clone(), Timestamp::now());
        self.writer.write(move |c| moderation::ban(c, &actor, &ban, now)).await
    }

    async fn unban(&self, actor: &User, community: Option<String>, username: String) -> StoreResult<()> {
        let (actor, now) = (actor.clone(), Timestamp::now());
        self.writer.write(move |c| moderation::unban(c, &actor, community.as_deref(), &username, now)).await
    }

    async fn bans(&self, actor: &User, community: Option<String>) -> StoreResult<Vec<Ban>> {
        let (actor, now) = (actor.clone(), Timestamp::now());
        self.readers.read(move |c| moderation::bans(c, &actor, community.as_deref(), now)).await
    }

    async fn report(&self, reporter: &User, target: VoteTarget, reason: Reason) -> StoreResult<Report> {
        let (reporter, now) = (reporter.clone(), Timestamp::now());
        self.writer.write(move |c| reports::report(c, &reporter, target, &reason, now)).await
    }

    async fn reports(&self, actor: &User, q: ListReports) -> StoreResult<ReportPage> {
        let actor = actor.clone();
        self.readers.read(move |c| reports::reports(c, &actor, &q)).await
    }

    async fn resolve_report(&self, actor: &User, id: i64, status: ReportStatus) -> StoreResult<Report> {
        let (actor, now) = (actor.clone(), Timestamp::now());
        self.writer.write(move |c| reports::resolve_report(c, &actor, id, status, now)).await
    }

    async fn mod_log(&self, q: ListModLog) -> StoreResult<ModLogPage> {
        self.readers.read(move |c| moderation::mod_log(c, &q)).await
    }

    async fn site_settings(&self) -> StoreResult<SiteSettings> {
        self.readers.read(site::settings).await
    }

    async fn set_site_settings(&self, actor: &User, settings: SiteSettings) -> StoreResult<SiteSettings> {
        let actor = actor.clone();
        self.writer.write(move |c| site::set_settings(c, &actor, settings)).await
    }

    async fn create_invite(
        &self,
        creator: Option<&User>,
        code_hash: [u8; 32],
        expires_at: Option<Timestamp>,
    ) -> StoreResult<Invite> {
        let (creator, now) = (creator.cloned(), Timestamp::now());
        self.writer.write(move |c| site::create_invite(c, creator.as_ref(), &code_hash, expires_at, now)).await
    }

    async fn register_user(
        &self,
        name: Username,
        password_hash: String,
        invite_hash: Option<[u8; 32]>,
    ) -> StoreResult<User> {
        let now = Timestamp::now();
        self.writer.write(move |c| site::register_user(c, &name, &password_hash, invite_hash.as_ref(), now)).await
    }

    async fn has_admin(&self) -> StoreResult<bool> {
        self.readers.read(first_admin::has_admin).await
    }

    async fn create_first_admin(&self, name: Username, password_hash: String) -> StoreResult<User> {
        let now = Timestamp::now();
        self.writer.write(move |c| first_admin::create_first_admin(c, &name, &password_hash, now)).await
    }

    async fn inbox(&self, user_id: i64, q: ListInbox) -> StoreResult<InboxPage> {
        self.readers.read(move |c| inbox::inbox(c, user_id, &q)).await
    }

    async fn unread_count(&self, user_id: i64) -> StoreResult<i64> {
        self.readers.read(move |c| inbox::unread(c, user_id)).await
    }

    async fn mark_read(&self, user_id: i64, mark: MarkRead) -> StoreResult<i64> {
        self.writer.write(move |c| inbox::mark_read(c, user_id, &mark)).await
    }

    async fn send_message(&self, sender: &User, to: String, body: Text) -> StoreResult<(Message, Vec<Notified>)> {
        let (sender, now) = (sender.clone(), Timestamp::now());
        self.writer.write(move |c| messages::send_message(c, &sender, &to, &body, now)).await
    }

    async fn conversations(&self, user_id: i64, page: IdPage) -> StoreResult<ConversationPage> {
        self.readers.read(move |c| messages::conversations(c, user_id, page)).await
    }

    async fn conversation(&self, user_id: i64, with: String, page: IdPage) -> StoreResult<MessagePage> {
        self.readers.read(move |c| messages::conversation(c, user_id, &with, page)).await
    }

    async fn mark_conversation_read(&self, user_id: i64, other_id: i64) -> StoreResult<Option<i64>> {
        self.writer.write(move |c| messages::mark_conversation_read(c, user_id, other_id)).await
    }

    async fn report_message(&self, reporter: &User, message_id: i64, reason: Reason) -> StoreResult<MessageReport> {
        let (reporter, now) = (reporter.clone(), Timestamp::now());
        self.writer.write(move |c| messages::report_message(c, &reporter, message_id, &reason, now)).await
    }

    async fn message_reports(&self, status: Option<ReportStatus>, page: IdPage) -> StoreResult<MessageReportPage> {
        self.readers.read(move |c| messages::message_reports(c, status, page)).await
    }

    async fn resolve_message_report(&self, actor: &User, id: i64, status: ReportStatus) -> StoreResult<MessageReport> {
        let (actor, now) = (actor.clone(), Timestamp::now());
        self.writer.write(move |c| messages::resolve_message_report(c, &actor, id, status, now)).await
    }

    async fn set_user_blocked(&self, user: &User, name: String, blocked: bool) -> StoreResult<bool> {
        let (user, now) = (user.clone(), Timestamp::now());
        self.writer.write(move |c| messages::set_user_blocked(c, &user, &name, blocked, now)).await
    }

    async fn blocks(&self, user_id: i64) -> StoreResult<Blocks> {
        self.readers.read(move |c| messages::blocks(c, user_id)).await
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
        self.writer
            .write(move |c| {
                let user = site::register_user(c, &name, &password_hash, invite_hash.as_ref(), now)?;
                mail::set_email(c, &user, &email, &link, now)?;
                Ok(user)
            })
            .await
    }

    async fn set_email(&self, user_id: i64, email: Email, link: MailLink) -> StoreResult<()> {
        let now = Timestamp::now();
        self.writer.write(move |c| mail::set_email(c, &mail::user(c, user_id)?, &email, &link, now)).await
    }

    async fn verify_email(&self, hash: [u8; 32], now: Timestamp) -> StoreResult<Option<User>> {
        self.writer.write(move |c| mail::verify_email(c, &hash, now)).await
    }

    async fn issue_reset(&self, to: ResetFor, link: MailLink) -> StoreResult<Option<User>> {
        let now = Timestamp::now();
        self.writer.write(move |c| mail::issue_reset(c, &to, &link, now)).await
    }

    async fn reset_password(
        &self,
        hash: [u8; 32],
        password_hash: String,
        now: Timestamp,
    ) -> StoreResult<Option<(User, Vec<[u8; 32]>)>> {
        self.writer.write(move |c| mail::reset_password(c, &hash, &password_hash, now)).await
    }

    async fn email_settings(&self, user_id: i64) -> StoreResult<EmailSettings> {
        self.readers.read(move |c| mail::email_settings(c, user_id)).await
    }

    async fn set_digest(&self, user_id: i64, on: bool) -> StoreResult<()> {
        self.writer.write(move |c| mail::set_digest(c, user_id, on)).await
    }

    async fn queue_digests(&self, now: Timestamp, base: String) -> StoreResult<usize> {
        self.writer.write(move |c| mail::queue_digests(c, now, &base)).await
    }

    async fn claim_mail(&self, now: Timestamp, lease_secs: i64, limit: usize) -> StoreResult<Vec<OutMail>> {
        self.writer.write(move |c| mail::claim_mail(c, now, lease_secs, limit)).await
    }

    async fn finish_mail(&self, id: i64, outcome: Delivery) -> StoreResult<()> {
        self.writer.write(move |c| mail::finish_mail(c, id, &outcome)).await
    }

    async fn outbox_counts(&self) -> StoreResult<(i64, i64)> {
        self.readers.read(mail::outbox_counts).await
    }

    async fn authored_topics(&self, user_id: i64, after: Option<i64>, limit: usize) -> StoreResult<Vec<Topic>> {
        self.readers.read(move |c| lifecycle::authored_topics(c, user_id, after, limit)).await
    }

    async fn authored_posts(&self, user_id: i64, after: Option<i64>, limit: usize) -> StoreResult<Vec<Post>> {
        self.readers.read(move |c| lifecycle::authored_posts(c, user_id, after, limit)).await
    }

    async fn cast_votes(
        &self,
        user_id: i64,
        after: Option<(i64, i64)>,
        limit: usize,
    ) -> StoreResult<Vec<crate::model::CastVote>> {
        self.readers.read(move |c| lifecycle::cast_votes(c, user_id, after, limit)).await
    }

    async fn delete_user(&self, user_id: i64, fate: crate::model::ContentFate) -> StoreResult<Vec<i64>> {
        let now = Timestamp::now();
        self.writer.write(move |c| lifecycle::delete_user(c, user_id, fate, now)).await
    }

    async fn two_factor(&self, user_id: i64) -> StoreResult<crate::model::TwoFactor> {
        self.readers.read(move |c| lifecycle::two_factor(c, user_id)).await
    }

    async fn begin_totp(&self, user_id: i64, secret: Vec<u8>) -> StoreResult<()> {
        self.writer.write(move |c| lifecycle::begin_totp(c, user_id, &secret)).await
    }

    async fn enable_totp(&self, user_id: i64, secret: Vec<u8>, step: i64, codes: Vec<[u8; 32]>) -> StoreResult<bool> {
        self.writer.write(move |c| lifecycle::enable_totp(c, user_id, &secret, step, &codes)).await
    }

    async fn disable_totp(&self, user_id: i64) -> StoreResult<()> {
        self.writer.write(move |c| lifecycle::disable_totp(c, user_id)).await
    }

    async fn use_totp_step(&self, user_id: i64, step: i64) -> StoreResult<bool> {
        self.writer.write(move |c| lifecycle::use_totp_step(c, user_id, step)).await
    }

    async fn use_recovery_code(&self, user_id: i64, digest: [u8; 32]) -> StoreResult<bool> {
        self.writer.write(move |c| lifecycle::use_recovery_code(c, user_id, &digest)).await
    }

    async fn record_media(
        &self,
        new: crate::model::media::Media,
        quota: crate::model::media::MediaQuota,
    ) -> StoreResult<crate::model::media::Recorded> {
        self.writer.write(move |c| media::record_media(c, &new, quota)).await
    }

    async fn media_usage(&self, owner: Option<i64>) -> StoreResult<crate::model::media::MediaUsage> {
        self.readers.read(move |c| media::usage(c, owner)).await
    }

    async fn take_freed_media(&self) -> StoreResult<Vec<String>> {
        self.writer.write(media::take_freed).await
    }

    async fn media_rows(&self, after: String, limit: usize) -> StoreResult<Vec<crate::store::MediaRow>> {
        self.readers.read(move |c| media::rows(c, &after, limit)).await
    }

    async fn forget_media(&self, names: Vec<String>) -> StoreResult<usize> {
        self.writer.write(move |c| media::forget(c, &names)).await
    }

    async fn actor_key(&self, kind: ActorKind, local_id: i64) -> StoreResult<Option<ActorKey>> {
        self.readers.read(move |c| federation::actor_key(c, kind, local_id)).await
    }

    async fn put_actor_key(&self, kind: ActorKind, local_id: i64, key: ActorKey) -> StoreResult<ActorKey> {
        self.writer.write(move |c| federation::put_actor_key(c, kind, local_id, &key)).await
    }

    async fn remote_actor_by_key(&self, key_id: String) -> StoreResult<Option<KnownActor>> {
        self.readers.read(move |c| federation::remote_actor_by_key(c, &key_id)).await
    }

    async fn put_remote_actor(&self, actor: RemoteActor) -> StoreResult<()> {
        self.writer.write(move |c| federation::put_remote_actor(c, &actor)).await
    }

    async fn add_follower(&self, community_id: i64, actor_id: String, follow_id: String) -> StoreResult<()> {
        self.writer.write(move |c| federation::add_follower(c, community_id, &actor_id, &follow_id)).await
    }

    async fn remove_follower(&self, community_id: i64, actor_id: String) -> StoreResult<bool> {
        self.writer.write(move |c| federation::remove_follower(c, community_id, &actor_id)).await
    }

    async fn followers(&self, community_id: i64) -> StoreResult<Vec<RemoteActor>> {
        self.readers.read(move |c| federation::followers(c, community_id)).await
    }

    async fn queue_deliveries(&self, new: Vec<NewDelivery>, now: Timestamp) -> StoreResult<()> {
        self.writer.write(move |c| federation::queue_deliveries(c, &new, now)).await
    }

    async fn claim_deliveries(
        &self,
        now: Timestamp,
        lease_secs: i64,
        limit: usize,
    ) -> StoreResult<Vec<QueuedDelivery>> {
        self.writer.write(move |c| federation::claim_deliveries(c, now, lease_secs, limit)).await
    }

    async fn finish_delivery(&self, id: i64, outcome: Delivery) -> StoreResult<()> {
        self.writer.write(move |c| federation::finish_delivery(c, id, &outcome)).await
    }

    async fn queued_deliveries(&self) -> StoreResult<i64> {
        self.readers.read(federation::queued_count).await
    }

    async fn remote_user(&self, actor_id: String, name: String) -> StoreResult<User> {
        // Made once, read ever after: the single writer is not asked again.
        let id = actor_id.clone();
        if let Some(user) = self.readers.read(move |c| federation::actor_user(c, &id)).await? {
            return Ok(user);
        }
        let now = Timestamp::now();
        self.writer.write(move |c| federation::remote_user(c, &actor_id, &name, now)).await
    }

    async fn remote_object(&self, object_id: String) -> StoreResult<Option<LocalObject>> {
        self.readers.read(move |c| federation::remote_object(c, &object_id)).await
    }

    async fn remote_object_id(&self, target: VoteTarget) -> StoreResult<Option<String>> {
        self.readers.read(move |c| federation::remote_object_id(c, target)).await
    }

    async fn remote_actor(&self, actor_id: String) -> StoreResult<Option<RemoteActor>> {
        self.readers.read(move |c| following::remote_actor(c, &actor_id)).await
    }

    async fn put_remote_community(
        &self,
        group: RemoteActor,
        name: String,
        title: String,
        description: String,
    ) -> StoreResult<Community> {
        let now = Timestamp::now();
        self.writer.write(move |c| following::put_remote_community(c, &group, &name, &title, &description, now)).await
    }

    async fn community_actor(&self, name: String) -> StoreResult<Option<RemoteActor>> {
        self.readers.read(move |c| following::community_actor(c, &name)).await
    }

    async fn community_of_actor(&self, actor_id: String) -> StoreResult<Option<Community>> {
        self.readers.read(move |c| following::community_of_actor(c, &actor_id)).await
    }

    async fn follow_remote(&self, community_id: i64, user_id: i64, follow_id: String) -> StoreResult<()> {
        self.writer.write(move |c| following::follow_remote(c, community_id, user_id, &follow_id)).await
    }

    async fn unfollow_remote(&self, community_id: i64, user_id: i64) -> StoreResult<Option<String>> {
        self.writer.write(move |c| following::unfollow_remote(c, community_id, user_id)).await
    }

    async fn settle_remote_follow(&self, community_id: i64, follow_id: String, accepted: bool) -> StoreResult<bool> {
        self.writer.write(move |c| following::settle_remote_follow(c, community_id, &follow_id, accepted)).await
    }

    async fn remote_follow(&self, community_id: i64, user_id: i64) -> StoreResult<Option<bool>> {
        self.readers.read(move |c| following::remote_follow(c, community_id, user_id)).await
    }

    async fn remote_follow_count(&self, community_id: i64) -> StoreResult<i64> {
        self.readers.read(move |c| following::remote_follow_count(c, community_id)).await
    }

    async fn instance_rules(&self) -> StoreResult<Vec<InstanceEntry>> {
        self.readers.read(instances::rules).await
    }

    async fn set_instance_rule(&self, host: String, rule: Option<(InstanceRule, String)>) -> StoreResult<bool> {
        self.writer.write(move |c| instances::set_rule(c, &host, rule.as_ref())).await
    }

    async fn shutdown(&self) {
        self.checkpointer.stop();
        self.writer.shutdown().await;
    }
}
