//! Write operations, each run inside the transaction its `Store` method
//! opened. The facts a rule of `model::policy` decides on (is this the
//! author? is the topic locked?) are read here, in the same transaction as
//! the write the rule allows; a write that reads what it then changes (a
//! vote and its score) locks the row it reads first (`FOR UPDATE`), so
//! concurrent writers queue on it instead of losing an update.

use deadpool_postgres::GenericClient;
use tokio_postgres::Row;

use super::conn::{col, exec, exec_raw, is_unique_violation, map_err, one, opt};
use super::moderation::{ban_facts, is_moderator};
use super::reads;
use crate::model::policy::{self, ItemFacts, Kind, Standing, TopicFacts};
use crate::model::{
    Community, NameKeys, Post, Text, Timestamp, Topic, User, Username, VoteOutcome, VoteTarget, hot_rank,
};
use crate::store::{NewCommunity, NewPost, NewTopic, StoreError, StoreResult, common};

pub async fn create_user(
    c: &impl GenericClient,
    name: &Username,
    password_hash: Option<&str>,
    is_admin: bool,
    now: Timestamp,
) -> StoreResult<User> {
    let keys = NameKeys::of(name.as_str());
    policy::may_take_name(super::accounts::similar_name(c, name.as_str(), &keys).await?.as_deref())?;
    let st = c
        .prepare_cached(
            "INSERT INTO users (name, password_hash, is_admin, created_at, skeleton, skeleton_folded) \
             VALUES ($1, $2, $3, $4, $5, $6) RETURNING id",
        )
        .await
        .map_err(map_err)?;
    match c.query_one(&st, &[&name.as_str(), &password_hash, &is_admin, &now.0, &keys.written, &keys.folded]).await {
        Ok(r) => Ok(User { id: col(&r, 0)?, name: name.as_str().to_owned(), is_admin, created_at: now }),
        Err(e) if is_unique_violation(&e) => Err(StoreError::Conflict("username is already taken".into())),
        Err(e) => Err(map_err(e)),
    }
}

pub async fn revoke_token(c: &impl GenericClient, hash: &[u8; 32]) -> StoreResult<()> {
    exec(c, "DELETE FROM tokens WHERE hash = $1", &[&&hash[..]]).await?;
    Ok(())
}

pub async fn create_community(
    c: &impl GenericClient,
    creator: &User,
    new: &NewCommunity,
    now: Timestamp,
) -> StoreResult<Community> {
    policy::may_create_community(creator)?;
    let st = c
        .prepare_cached(
            "INSERT INTO communities (name, title, description, created_by, created_at) \
             VALUES ($1, $2, $3, $4, $5) RETURNING id",
        )
        .await
        .map_err(map_err)?;
    let inserted =
        c.query_one(&st, &[&new.name.as_str(), &new.title.as_str(), &new.description, &creator.id, &now.0]).await;
    match inserted {
        Ok(r) => {
            let id: i64 = col(&r, 0)?;
            // The creator is the community's first moderator.
            exec(
                c,
                "INSERT INTO moderators (community_id, user_id, created_at) VALUES ($1, $2, $3)",
                &[&id, &creator.id, &now.0],
            )
            .await?;
            reads::community(c, new.name.as_str()).await
        }
        Err(e) if is_unique_violation(&e) => Err(StoreError::Conflict("a community with that name exists".into())),
        Err(e) => Err(map_err(e)),
    }
}

/// `html` is the body rendered (`None` without a body), before the
/// transaction began.
pub async fn create_topic(
    c: &impl GenericClient,
    author: &User,
    new: &NewTopic,
    html: Option<&str>,
    now: Timestamp,
) -> StoreResult<Topic> {
    let community_id = reads::community_id(c, new.community.as_str()).await?;
    policy::may_create_topic(author, &ban_facts(c, author, community_id).await?, now)?;
    let row = one(
        c,
        "INSERT INTO topics (community_id, author_id, title, body, body_html, url, created_at, hot) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8) RETURNING id",
        &[
            &community_id,
            &author.id,
            &new.title.as_str(),
            &new.body.as_ref().map(|b| b.as_str()),
            &html,
            &new.url.as_ref().map(|u| u.as_str()),
            &now.0,
            &hot_rank(0, now.0),
        ],
    )
    .await?;
    let id: i64 = col(&row, 0)?;
    super::federation::map_object(c, new.remote_id.as_deref(), VoteTarget::Topic(id), id).await?;
    // Its mentions' notifications and its pictures, in this transaction.
    let mut notified = Vec::new();
    if let Some(body) = &new.body {
        super::media::set_refs(c, 0, id, body.media()).await?;
        let mentioned = super::inbox::user_ids(c, common::mentioned_names(body)).await?;
        let notices = common::new_notices(author, (id, None), body, None, &mentioned);
        notified = super::inbox::notify(c, &notices, now).await?;
    }
    Ok(Topic { inbox: notified, ..reads::topic(c, id).await? })
}

/// A topic's facts from its columns `deleted, removed, locked, author_id,
/// community_id`, the first at `at`.
fn topic_facts(r: &Row, at: usize) -> StoreResult<TopicFacts> {
    Ok(TopicFacts {
        deleted: col(r, at)?,
        removed: col(r, at + 1)?,
        locked: col(r, at + 2)?,
        author_id: col(r, at + 3)?,
        community_id: col(r, at + 4)?,
    })
}

/// A topic or post as the rules see it, with what its writer needs besides.
pub(super) struct Item {
    pub id: i64,
    pub topic_id: i64,
    pub created_at: i64,
    pub facts: ItemFacts,
}

/// Whether `item` locks the row it reads until the transaction ends.
#[derive(Clone, Copy)]
pub(super) enum Lock {
    None,
    /// For a write that changes the item (`FOR UPDATE`, of the post only).
    Update,
}

// An item's columns: its topic's id, its creation time, its topic's facts
// (`topic_facts`), then for a post its author, deleted and removed. Macros,
// so `concat!` can append the lock.
macro_rules! topic_item {
    () => {
        "SELECT id, created_at, deleted, removed, locked, author_id, community_id FROM topics WHERE id = $1"
    };
}

macro_rules! post_item {
    () => {
        "SELECT p.topic_id, p.created_at, t.deleted, t.removed, t.locked, t.author_id, t.community_id, \
         p.author_id, p.deleted, p.removed FROM posts p JOIN topics t ON t.id = p.topic_id WHERE p.id = $1"
    };
}

/// The topic or post `target` names; `NotFound` when there is none.
pub(super) async fn item(c: &impl GenericClient, target: VoteTarget, lock: Lock) -> StoreResult<Item> {
    let (id, kind, sql) = match (target, lock) {
        (VoteTarget::Topic(id), Lock::None) => (id, Kind::Topic, topic_item!()),
        (VoteTarget::Topic(id), Lock::Update) => (id, Kind::Topic, concat!(topic_item!(), " FOR UPDATE")),
        (VoteTarget::Post(id), Lock::None) => (id, Kind::Post, post_item!()),
        (VoteTarget::Post(id), Lock::Update) => (id, Kind::Post, concat!(post_item!(), " FOR UPDATE OF p")),
    };
    let Some(r) = opt(c, sql, &[&id]).await? else {
        return Err(StoreError::NotFound(kind.name()));
    };
    let topic = topic_facts(&r, 2)?;
    let facts = match kind {
        Kind::Topic => ItemFacts::of_topic(topic),
        Kind::Post => ItemFacts { kind, author_id: col(&r, 7)?, deleted: col(&r, 8)?, removed: col(&r, 9)?, topic },
    };
    Ok(Item { id, topic_id: col(&r, 0)?, created_at: col(&r, 1)?, facts })
}

/// Refuses an edit of `target` that `actor` may not make; locks the item's
/// row until the edit commits.
async fn check_edit(c: &impl GenericClient, actor: &User, target: VoteTarget, now: Timestamp) -> StoreResult<()> {
    let item = item(c, target, Lock::Update).await?;
    let bans = ban_facts(c, actor, item.facts.community_id()).await?;
    Ok(policy::may_edit(actor, &item.facts, &bans, now)?)
}

/// Refuses a deletion of `target` that `actor` may not make; locks the
/// item's row until the deletion commits.
async fn check_delete(c: &impl GenericClient, actor: &User, target: VoteTarget) -> StoreResult<()> {
    Ok(policy::may_delete(actor, &item(c, target, Lock::Update).await?.facts)?)
}

/// `body` is the source and its rendered HTML, `None` to clear it.
pub async fn edit_topic(
    c: &impl GenericClient,
    actor: &User,
    id: i64,
    body: Option<(&str, &str)>,
    title: Option<&str>,
    media: &[String],
    now: Timestamp,
) -> StoreResult<Topic> {
    check_edit(c, actor, VoteTarget::Topic(id), now).await?;
    super::media::set_refs(c, 0, id, media).await?;
    let (source, html) = body.unzip();
    exec(
        c,
        "UPDATE topics SET body = $1, body_html = $2, edited_at = $3, title = coalesce($5, title) WHERE id = $4",
        &[&source, &html, &now.0, &id, &title],
    )
    .await?;
    reads::topic(c, id).await
}

pub async fn delete_topic(c: &impl GenericClient, actor: &User, id: i64, now: Timestamp) -> StoreResult<()> {
    check_delete(c, actor, VoteTarget::Topic(id)).await?;
    super::media::drop_refs(c, 0, id, now).await?;
    exec(c, "UPDATE topics SET deleted = true, body = NULL, body_html = NULL, url = NULL WHERE id = $1", &[&id])
        .await?;
    Ok(())
}

/// `html` is `new.body` rendered, before the transaction began.
pub async fn create_post(
    c: &impl GenericClient,
    author: &User,
    new: &NewPost,
    html: &str,
    now: Timestamp,
) -> StoreResult<Post> {
    // FOR NO KEY UPDATE, not FOR SHARE: this reply bumps the topic's count
    // of posts below (topic_counts), and two replies that each held a share
    // lock would deadlock upgrading it. Replies to one topic queue here
    // instead, and a delete, removal or lock of the topic waits for them.
    let topic = opt(
        c,
        "SELECT deleted, removed, locked, author_id, community_id FROM topics WHERE id = $1 FOR NO KEY UPDATE",
        &[&new.topic_id],
    )
    .await?;
    let topic = match topic {
        Some(r) => topic_facts(&r, 0)?,
        None => return Err(StoreError::NotFound("topic")),
    };
    let bans = ban_facts(c, author, topic.community_id).await?;
    let is_moderator =
        policy::reply_needs_is_moderator(author, &topic) && is_moderator(c, author.id, topic.community_id).await?;
    policy::may_reply(author, &topic, &Standing { is_moderator, bans }, now)?;
    // Whose reply this is: the parent post's author, else the topic's.
    let mut replied_to = Some(topic.author_id);
    if let Some(parent) = new.parent_id {
        let parent_row =
            match opt(c, "SELECT topic_id, author_id, deleted FROM posts WHERE id = $1", &[&parent]).await? {
                Some(r) => Some((col::<i64>(&r, 0)?, col::<i64>(&r, 1)?, col::<bool>(&r, 2)?)),
                None => None,
            };
        policy::valid_parent(new.topic_id, parent, parent_row.map(|(topic_id, ..)| topic_id))?;
        replied_to = parent_row.filter(|&(.., deleted)| !deleted).map(|(_, author, _)| author);
    }
    let row = one(
        c,
        "INSERT INTO posts (topic_id, parent_id, author_id, body, body_html, created_at) \
         VALUES ($1, $2, $3, $4, $5, $6) RETURNING id",
        &[&new.topic_id, &new.parent_id, &author.id, &new.body.as_str(), &html, &now.0],
    )
    .await?;
    let id: i64 = col(&row, 0)?;
    super::federation::map_object(c, new.remote_id.as_deref(), VoteTarget::Post(id), new.topic_id).await?;
    super::media::set_refs(c, 1, id, new.body.media()).await?;
    exec(
        c,
        "INSERT INTO topic_counts (topic_id, post_count) VALUES ($1, 1) \
         ON CONFLICT (topic_id) DO UPDATE SET post_count = topic_counts.post_count + 1",
        &[&new.topic_id],
    )
    .await?;
    // Its notifications, in this transaction.
    let mentioned = super::inbox::user_ids(c, common::mentioned_names(&new.body)).await?;
    let notices = common::new_notices(author, (new.topic_id, Some(id)), &new.body, replied_to, &mentioned);
    let notified = super::inbox::notify(c, &notices, now).await?;
    Ok(common::new_reply(id, author, new, html, now, replied_to, notified))
}

pub async fn post(c: &impl GenericClient, id: i64) -> StoreResult<Post> {
    let sql = format!("SELECT {} {} WHERE p.id = $1", reads::POST_COLS, reads::POST_FROM);
    match opt(c, &sql, &[&id]).await? {
        Some(r) => reads::post_row(&r),
        None => Err(StoreError::NotFound("post")),
    }
}

pub async fn edit_post(
    c: &impl GenericClient,
    actor: &User,
    id: i64,
    body: &Text,
    now: Timestamp,
) -> StoreResult<Post> {
    check_edit(c, actor, VoteTarget::Post(id), now).await?;
    super::media::set_refs(c, 1, id, body.media()).await?;
    let (source, html) = (body.as_str(), body.html());
    exec(c, "UPDATE posts SET body = $1, body_html = $2, edited_at = $3 WHERE id = $4", &[&source, &html, &now.0, &id])
        .await?;
    post(c, id).await
}

pub async fn delete_post(c: &impl GenericClient, actor: &User, id: i64, now: Timestamp) -> StoreResult<i64> {
    check_delete(c, actor, VoteTarget::Post(id)).await?;
    super::media::drop_refs(c, 1, id, now).await?;
    exec(c, "UPDATE posts SET deleted = true, body = '', body_html = '' WHERE id = $1", &[&id]).await?;
    Ok(post(c, id).await?.topic_id)
}

pub async fn vote(
    c: &impl GenericClient,
    voter: &User,
    target: VoteTarget,
    value: i8,
    now: Timestamp,
) -> StoreResult<VoteOutcome> {
    let (kind, id): (i64, i64) = match target {
        VoteTarget::Topic(id) => (0, id),
        VoteTarget::Post(id) => (1, id),
    };
    // The voted row is locked first: votes on one item queue there, so
    // each reads the previous one's vote and score.
    let item = item(c, target, Lock::Update).await?;
    policy::may_vote(voter, &item.facts, &ban_facts(c, voter, item.facts.community_id()).await?, now)?;
    let (topic_id, created_at) = (item.topic_id, item.created_at);
    let old: i64 = match opt(
        c,
        "SELECT value FROM votes WHERE user_id = $1 AND kind = $2 AND target_id = $3",
        &[&voter.id, &kind, &id],
    )
    .await?
    {
        Some(r) => col(&r, 0)?,
        None => 0,
    };
    let value64 = i64::from(value);
    if value == 0 {
        exec(c, "DELETE FROM votes WHERE user_id = $1 AND kind = $2 AND target_id = $3", &[&voter.id, &kind, &id])
            .await?;
    } else {
        exec_raw(
            c,
            "INSERT INTO votes (user_id, kind, target_id, value) VALUES ($1, $2, $3, $4) \
             ON CONFLICT (user_id, kind, target_id) DO UPDATE SET value = excluded.value",
            &[&voter.id, &kind, &id, &value64],
        )
        .await
        .map_err(map_err)?;
    }
    let delta = value64 - old;
    let score: i64 = if kind == 0 {
        let r = one(c, "UPDATE topics SET score = score + $1 WHERE id = $2 RETURNING score", &[&delta, &id]).await?;
        let score = col(&r, 0)?;
        exec(c, "UPDATE topics SET hot = $1 WHERE id = $2", &[&hot_rank(score, created_at), &id]).await?;
        score
    } else {
        let r = one(c, "UPDATE posts SET score = score + $1 WHERE id = $2 RETURNING score", &[&delta, &id]).await?;
        col(&r, 0)?
    };
    Ok(VoteOutcome { score, vote: value, topic_id, seq: None })
}
