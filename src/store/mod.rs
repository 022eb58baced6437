//! Storage behind one trait. Handlers speak only these domain-level
//! operations; each backend (today `sqlite`) owns its SQL, its connections
//! and its durability story.

pub mod cursor;
pub mod sqlite;

use std::future::Future;

use crate::model::{
    Body, Community, CommunityName, Link, Post, Profile, Timestamp, Title, Topic, User, Username, VoteOutcome,
    VoteTarget,
};

pub use cursor::Cursor;

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
    /// The request is well-formed but refers to something inconsistent
    /// (a parent post from another topic, say).
    #[error("{0}")]
    Invalid(String),
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
}

#[derive(Debug, Clone)]
pub struct TopicPage {
    pub topics: Vec<Topic>,
    /// Where the next page starts, when there is one.
    pub next: Option<Cursor>,
}

/// A topic as submitted.
#[derive(Debug, Clone)]
pub struct NewTopic {
    pub community: CommunityName,
    pub title: Title,
    pub body: Option<Body>,
    pub url: Option<Link>,
}

#[derive(Debug, Clone)]
pub struct NewCommunity {
    pub name: CommunityName,
    pub title: Title,
    pub description: String,
}

/// A reply as submitted.
#[derive(Debug, Clone)]
pub struct NewPost {
    pub topic_id: i64,
    pub parent_id: Option<i64>,
    pub body: Body,
}

/// The storage interface. Every method is a single atomic operation; writes
/// return only once durable.
pub trait Store: Send + Sync + 'static {
    // Accounts.
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
    fn add_token(&self, user_id: i64, token_hash: [u8; 32]) -> impl Future<Output = StoreResult<()>> + Send;
    fn user_by_token(&self, token_hash: [u8; 32]) -> impl Future<Output = StoreResult<Option<User>>> + Send;
    fn revoke_token(&self, token_hash: [u8; 32]) -> impl Future<Output = StoreResult<()>> + Send;
    fn profile(&self, name: String) -> impl Future<Output = StoreResult<Profile>> + Send;

    // Communities.
    fn list_communities(&self) -> impl Future<Output = StoreResult<Vec<Community>>> + Send;
    fn community(&self, name: String) -> impl Future<Output = StoreResult<Community>> + Send;
    fn create_community(
        &self,
        creator: &User,
        new: NewCommunity,
    ) -> impl Future<Output = StoreResult<Community>> + Send;

    // Topics and posts.
    fn list_topics(&self, q: ListTopics) -> impl Future<Output = StoreResult<TopicPage>> + Send;
    fn topic_with_posts(&self, id: i64, sort: PostSort)
    -> impl Future<Output = StoreResult<(Topic, Vec<Post>)>> + Send;
    fn create_topic(&self, author: &User, new: NewTopic) -> impl Future<Output = StoreResult<Topic>> + Send;
    fn edit_topic(&self, actor: &User, id: i64, body: Option<Body>) -> impl Future<Output = StoreResult<Topic>> + Send;
    fn delete_topic(&self, actor: &User, id: i64) -> impl Future<Output = StoreResult<()>> + Send;
    fn create_post(&self, author: &User, new: NewPost) -> impl Future<Output = StoreResult<Post>> + Send;
    fn edit_post(&self, actor: &User, id: i64, body: Body) -> impl Future<Output = StoreResult<Post>> + Send;
    /// Deletes a post; returns its topic id.
    fn delete_post(&self, actor: &User, id: i64) -> impl Future<Output = StoreResult<i64>> + Send;
    /// `value` is -1, 0 (withdraw) or 1.
    fn vote(
        &self,
        voter: &User,
        target: VoteTarget,
        value: i8,
    ) -> impl Future<Output = StoreResult<VoteOutcome>> + Send;

    /// Finish pending writes and checkpoint; called once at shutdown.
    fn shutdown(&self) -> impl Future<Output = ()> + Send;
}
