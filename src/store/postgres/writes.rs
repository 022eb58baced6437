//! Write operations, each run inside the transaction its `Store` method
//! opened. Authorisation checks that depend on stored state (is this the
//! author?) happen here, in the same transaction as the write; a write
//! that reads what it then changes (a vote and its score) locks the row it
//! reads first (`FOR UPDATE`), so concurrent writers queue on it instead
//! of losing an update.

use deadpool_postgres::GenericClient;

use super::conn::{col, exec, exec_raw, is_unique_violation, map_err, one, opt};
use super::moderation::{can_moderate, check_ban};
use super::reads;
use crate::model::{Community, Post, Timestamp, Topic, User, Username, VoteOutcome, VoteTarget, hot_rank};
use crate::store::{NewCommunity, NewPost, NewTopic, StoreError, StoreResult};

pub async fn create_user(
    c: &impl GenericClient,
    name: &Username,
    password_hash: Option<&str>,
    is_admin: bool,
    now: Timestamp,
) -> StoreResult<User> {
    let st = c
        .prepare_cached(
            "INSERT INTO users (name, password_hash, is_admin, created_at) VALUES ($1, $2, $3, $4) RETURNING id",
        )
        .await
        .map_err(map_err)?;
    match c.query_one(&st, &[&name.as_str(), &password_hash, &is_admin, &now.0]).await {
        Ok(r) => Ok(User { id: col(&r, 0)?, name: name.as_str().to_owned(), is_admin, created_at: now }),
        Err(e) if is_unique_violation(&e) => Err(StoreError::Conflict("username is already taken".into())),
        Err(e) => Err(map_err(e)),
    }
}

pub async fn add_token(c: &impl GenericClient, user_id: i64, hash: &[u8; 32], now: Timestamp) -> StoreResult<()> {
    exec(c, "INSERT INTO tokens (hash, user_id, created_at) VALUES ($1, $2, $3)", &[&&hash[..], &user_id, &now.0])
        .await?;
    Ok(())
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
    if !creator.is_admin {
        return Err(StoreError::Forbidden("only site administrators may create communities"));
    }
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
    check_ban(c, author, Some(community_id), now).await?;
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
    reads::topic(c, col(&row, 0)?).await
}

/// Why a user touches their own item.
#[derive(Clone, Copy)]
enum Change {
    /// At this time (for ban expiry).
    Edit(Timestamp),
    Delete,
}

/// Loads who wrote an item, failing when it is gone or `actor` may not
/// change it. An edit is also refused when a moderator removed the item
/// or the author is banned. Locks the item's row until the change commits.
async fn check_owner(c: &impl GenericClient, is_topic: bool, id: i64, actor: &User, change: Change) -> StoreResult<()> {
    let (what, sql) = if is_topic {
        ("topic", "SELECT author_id, deleted, removed, community_id FROM topics WHERE id = $1 FOR UPDATE")
    } else {
        (
            "post",
            // A post in a removed topic is as hidden as the topic.
            "SELECT p.author_id, p.deleted, p.removed OR t.removed, t.community_id FROM posts p \
             JOIN topics t ON t.id = p.topic_id WHERE p.id = $1 FOR UPDATE OF p",
        )
    };
    let row = match opt(c, sql, &[&id]).await? {
        Some(r) => (col::<i64>(&r, 0)?, col::<bool>(&r, 1)?, col::<bool>(&r, 2)?, col::<i64>(&r, 3)?),
        None => return Err(StoreError::NotFound(what)),
    };
    match row {
        (_, true, _, _) => Err(StoreError::NotFound(what)),
        (author, ..) if author != actor.id && !actor.is_admin => {
            Err(StoreError::Forbidden("only the author may change this"))
        }
        (_, _, removed, community_id) => match change {
            Change::Edit(_) if removed => Err(StoreError::Forbidden("a moderator removed this; it cannot be edited")),
            Change::Edit(now) => check_ban(c, actor, Some(community_id), now).await,
            Change::Delete => Ok(()),
        },
    }
}

/// `body` is the source and its rendered HTML, `None` to clear it.
pub async fn edit_topic(
    c: &impl GenericClient,
    actor: &User,
    id: i64,
    body: Option<(&str, &str)>,
    now: Timestamp,
) -> StoreResult<Topic> {
    check_owner(c, true, id, actor, Change::Edit(now)).await?;
    let (source, html) = body.unzip();
    exec(
        c,
        "UPDATE topics SET body = $1, body_html = $2, edited_at = $3 WHERE id = $4",
        &[&source, &html, &now.0, &id],
    )
    .await?;
    reads::topic(c, id).await
}

pub async fn delete_topic(c: &impl GenericClient, actor: &User, id: i64) -> StoreResult<()> {
    check_owner(c, true, id, actor, Change::Delete).await?;
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
    // FOR NO KEY UPDATE, not FOR SHARE: this reply bumps the topic's counts
    // below, and two replies that each held a share lock would deadlock
    // upgrading it. Replies to one topic queue here instead, and a delete,
    // removal or lock of the topic waits for them.
    let topic = opt(
        c,
        "SELECT deleted, removed, locked, author_id, community_id FROM topics WHERE id = $1 FOR NO KEY UPDATE",
        &[&new.topic_id],
    )
    .await?;
    let Some(topic) = topic else {
        return Err(StoreError::NotFound("topic"));
    };
    let (deleted, removed, locked): (bool, bool, bool) = (col(&topic, 0)?, col(&topic, 1)?, col(&topic, 2)?);
    let (topic_author, community_id): (i64, i64) = (col(&topic, 3)?, col(&topic, 4)?);
    if deleted {
        return Err(StoreError::Invalid("the topic has been deleted".into()));
    }
    if removed {
        return Err(StoreError::Invalid("the topic has been removed by a moderator".into()));
    }
    check_ban(c, author, Some(community_id), now).await?;
    // Moderators may still reply in a locked topic (to explain the lock).
    if locked && !can_moderate(c, author, community_id).await? {
        return Err(StoreError::Denied("topic_locked", "the topic is locked: it takes no new replies".into()));
    }
    // Whose reply this is: the parent post's author, else the topic's.
    let mut replied_to = Some(topic_author);
    if let Some(parent) = new.parent_id {
        let row = opt(c, "SELECT topic_id, author_id, deleted FROM posts WHERE id = $1", &[&parent]).await?;
        match row {
            Some(r) if col::<i64>(&r, 0)? == new.topic_id => {
                replied_to = (!col::<bool>(&r, 2)?).then_some(col::<i64>(&r, 1)?);
            }
            _ => {
                return Err(StoreError::Invalid(format!("parent_id {parent} is not a post in topic {}", new.topic_id)));
            }
        }
    }
    let row = one(
        c,
        "INSERT INTO posts (topic_id, parent_id, author_id, body, body_html, created_at) \
         VALUES ($1, $2, $3, $4, $5, $6) RETURNING id",
        &[&new.topic_id, &new.parent_id, &author.id, &new.body.as_str(), &html, &now.0],
    )
    .await?;
    let id: i64 = col(&row, 0)?;
    exec(c, "UPDATE topics SET post_count = post_count + 1 WHERE id = $1", &[&new.topic_id]).await?;
    Ok(crate::store::common::new_reply(id, author, new, html, now, replied_to))
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
    body: &str,
    html: &str,
    now: Timestamp,
) -> StoreResult<Post> {
    check_owner(c, false, id, actor, Change::Edit(now)).await?;
    exec(c, "UPDATE posts SET body = $1, body_html = $2, edited_at = $3 WHERE id = $4", &[&body, &html, &now.0, &id])
        .await?;
    post(c, id).await
}

pub async fn delete_post(c: &impl GenericClient, actor: &User, id: i64) -> StoreResult<i64> {
    check_owner(c, false, id, actor, Change::Delete).await?;
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
    let sql = if kind == 0 {
        "SELECT id, deleted OR removed, created_at, community_id FROM topics WHERE id = $1 FOR UPDATE"
    } else {
        "SELECT p.topic_id, p.deleted OR p.removed OR t.deleted OR t.removed, p.created_at, t.community_id \
         FROM posts p JOIN topics t ON t.id = p.topic_id WHERE p.id = $1 FOR UPDATE OF p"
    };
    let Some(row) = opt(c, sql, &[&id]).await? else {
        return Err(StoreError::NotFound(if kind == 0 { "topic" } else { "post" }));
    };
    let (topic_id, gone, created_at, community_id): (i64, bool, i64, i64) =
        (col(&row, 0)?, col(&row, 1)?, col(&row, 2)?, col(&row, 3)?);
    if gone {
        return Err(StoreError::Invalid("cannot vote on deleted or removed content".into()));
    }
    // Votes in a locked topic stay allowed (as on Reddit); bans apply.
    check_ban(c, voter, Some(community_id), now).await?;
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
    Ok(VoteOutcome { score, vote: value, topic_id })
}
