//! Write operations, each run by the writer thread inside the current
//! group transaction. Authorisation checks that depend on stored state
//! (is this the author?) happen here, in the same transaction as the write.

use rusqlite::{Connection, OptionalExtension, params};

use super::conn::{is_unique_violation, map_err};
use super::moderation::{can_moderate, check_ban};
use super::reads;
use crate::model::{Community, Post, Timestamp, Topic, User, Username, VoteOutcome, VoteTarget, hot_rank};
use crate::store::{NewCommunity, NewPost, NewTopic, StoreError, StoreResult};

pub fn create_user(
    conn: &Connection,
    name: &Username,
    password_hash: Option<&str>,
    is_admin: bool,
    now: Timestamp,
) -> StoreResult<User> {
    let inserted = conn
        .prepare_cached("INSERT INTO users (name, password_hash, is_admin, created_at) VALUES (?1, ?2, ?3, ?4)")
        .and_then(|mut s| s.execute(params![name.as_str(), password_hash, is_admin, now.0]));
    match inserted {
        Ok(_) => Ok(User { id: conn.last_insert_rowid(), name: name.as_str().to_owned(), is_admin, created_at: now }),
        Err(e) if is_unique_violation(&e) => Err(StoreError::Conflict("username is already taken".into())),
        Err(e) => Err(map_err(e)),
    }
}

pub fn add_token(conn: &Connection, user_id: i64, hash: &[u8; 32], now: Timestamp) -> StoreResult<()> {
    conn.prepare_cached("INSERT INTO tokens (hash, user_id, created_at) VALUES (?1, ?2, ?3)")
        .and_then(|mut s| s.execute(params![&hash[..], user_id, now.0]))
        .map_err(map_err)?;
    Ok(())
}

pub fn revoke_token(conn: &Connection, hash: &[u8; 32]) -> StoreResult<()> {
    conn.prepare_cached("DELETE FROM tokens WHERE hash = ?1")
        .and_then(|mut s| s.execute([&hash[..]]))
        .map_err(map_err)?;
    Ok(())
}

pub fn create_community(
    conn: &Connection,
    creator: &User,
    new: &NewCommunity,
    now: Timestamp,
) -> StoreResult<Community> {
    if !creator.is_admin {
        return Err(StoreError::Forbidden("only site administrators may create communities"));
    }
    let inserted = conn
        .prepare_cached(
            "INSERT INTO communities (name, title, description, created_by, created_at) VALUES (?1, ?2, ?3, ?4, ?5)",
        )
        .and_then(|mut s| {
            s.execute(params![new.name.as_str(), new.title.as_str(), new.description, creator.id, now.0])
        });
    match inserted {
        Ok(_) => {
            // The creator is the community's first moderator.
            conn.prepare_cached("INSERT INTO moderators (community_id, user_id, created_at) VALUES (?1, ?2, ?3)")
                .and_then(|mut s| s.execute(params![conn.last_insert_rowid(), creator.id, now.0]))
                .map_err(map_err)?;
            reads::community(conn, new.name.as_str())
        }
        Err(e) if is_unique_violation(&e) => Err(StoreError::Conflict("a community with that name exists".into())),
        Err(e) => Err(map_err(e)),
    }
}

/// `html` is the body rendered (`None` without a body); the caller renders
/// it before the write reaches this thread.
pub fn create_topic(
    conn: &Connection,
    author: &User,
    new: &NewTopic,
    html: Option<&str>,
    now: Timestamp,
) -> StoreResult<Topic> {
    let community_id = reads::community_id(conn, new.community.as_str())?;
    check_ban(conn, author, Some(community_id), now)?;
    conn.prepare_cached(
        "INSERT INTO topics (community_id, author_id, title, body, body_html, url, created_at, hot) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
    )
    .and_then(|mut s| {
        s.execute(params![
            community_id,
            author.id,
            new.title.as_str(),
            new.body.as_ref().map(|b| b.as_str()),
            html,
            new.url.as_ref().map(|u| u.as_str()),
            now.0,
            hot_rank(0, now.0)
        ])
    })
    .map_err(map_err)?;
    reads::topic(conn, conn.last_insert_rowid())
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
/// (an edit is published live with its body) or the author is banned.
fn check_owner(conn: &Connection, table: &'static str, id: i64, actor: &User, change: Change) -> StoreResult<()> {
    let (what, sql) = if table == "topics" {
        ("topic", "SELECT author_id, deleted, removed, community_id FROM topics WHERE id = ?1")
    } else {
        (
            "post",
            // A post in a removed topic is as hidden as the topic.
            "SELECT p.author_id, p.deleted, p.removed OR t.removed, t.community_id FROM posts p \
             JOIN topics t ON t.id = p.topic_id WHERE p.id = ?1",
        )
    };
    let row: Option<(i64, bool, bool, i64)> = conn
        .prepare_cached(sql)
        .and_then(|mut s| s.query_row([id], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?))).optional())
        .map_err(map_err)?;
    match row {
        None | Some((_, true, _, _)) => Err(StoreError::NotFound(what)),
        Some((author, ..)) if author != actor.id && !actor.is_admin => {
            Err(StoreError::Forbidden("only the author may change this"))
        }
        Some((_, _, removed, community_id)) => match change {
            Change::Edit(_) if removed => Err(StoreError::Forbidden("a moderator removed this; it cannot be edited")),
            Change::Edit(now) => check_ban(conn, actor, Some(community_id), now),
            Change::Delete => Ok(()),
        },
    }
}

/// `body` is the source and its rendered HTML, `None` to clear it.
pub fn edit_topic(
    conn: &Connection,
    actor: &User,
    id: i64,
    body: Option<(&str, &str)>,
    now: Timestamp,
) -> StoreResult<Topic> {
    check_owner(conn, "topics", id, actor, Change::Edit(now))?;
    let (source, html) = body.unzip();
    conn.prepare_cached("UPDATE topics SET body = ?1, body_html = ?2, edited_at = ?3 WHERE id = ?4")
        .and_then(|mut s| s.execute(params![source, html, now.0, id]))
        .map_err(map_err)?;
    reads::topic(conn, id)
}

pub fn delete_topic(conn: &Connection, actor: &User, id: i64) -> StoreResult<()> {
    check_owner(conn, "topics", id, actor, Change::Delete)?;
    conn.prepare_cached("UPDATE topics SET deleted = 1, body = NULL, body_html = NULL, url = NULL WHERE id = ?1")
        .and_then(|mut s| s.execute([id]))
        .map_err(map_err)?;
    Ok(())
}

/// `html` is `new.body` rendered, before the write reached this thread.
/// Every refusal comes before the first change: the writer runs it without
/// a savepoint (`Writer::write_checked_first`), so keep it that way.
/// Returns the new post's id and whom it replies to (see `new_reply`).
pub fn create_post(
    conn: &Connection,
    author: &User,
    new: &NewPost,
    html: &str,
    now: Timestamp,
) -> StoreResult<(i64, Option<i64>)> {
    let topic: Option<(bool, bool, bool, i64, i64)> = conn
        .prepare_cached("SELECT deleted, removed, locked, author_id, community_id FROM topics WHERE id = ?1")
        .and_then(|mut s| {
            s.query_row([new.topic_id], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?))).optional()
        })
        .map_err(map_err)?;
    let Some((deleted, removed, locked, topic_author, community_id)) = topic else {
        return Err(StoreError::NotFound("topic"));
    };
    if deleted {
        return Err(StoreError::Invalid("the topic has been deleted".into()));
    }
    if removed {
        return Err(StoreError::Invalid("the topic has been removed by a moderator".into()));
    }
    check_ban(conn, author, Some(community_id), now)?;
    // Moderators may still reply in a locked topic (to explain the lock).
    if locked && !can_moderate(conn, author, community_id)? {
        return Err(StoreError::Denied("topic_locked", "the topic is locked: it takes no new replies".into()));
    }
    // Whose reply this is: the parent post's author, else the topic's.
    let mut replied_to = Some(topic_author);
    if let Some(parent) = new.parent_id {
        let parent_row: Option<(i64, i64, bool)> = conn
            .prepare_cached("SELECT topic_id, author_id, deleted FROM posts WHERE id = ?1")
            .and_then(|mut s| s.query_row([parent], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?))).optional())
            .map_err(map_err)?;
        match parent_row {
            Some((topic_id, author, deleted)) if topic_id == new.topic_id => {
                replied_to = (!deleted).then_some(author);
            }
            _ => {
                return Err(StoreError::Invalid(format!("parent_id {parent} is not a post in topic {}", new.topic_id)));
            }
        }
    }
    conn.prepare_cached(
        "INSERT INTO posts (topic_id, parent_id, author_id, body, body_html, created_at) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
    )
    .and_then(|mut s| s.execute(params![new.topic_id, new.parent_id, author.id, new.body.as_str(), html, now.0]))
    .map_err(map_err)?;
    let id = conn.last_insert_rowid();
    conn.prepare_cached("UPDATE topics SET post_count = post_count + 1 WHERE id = ?1")
        .and_then(|mut s| s.execute([new.topic_id]))
        .map_err(map_err)?;
    Ok((id, replied_to))
}

pub fn post(conn: &Connection, id: i64) -> StoreResult<Post> {
    conn.prepare_cached(&format!("SELECT {} {} WHERE p.id = ?1", reads::POST_COLS, reads::POST_FROM))
        .and_then(|mut s| s.query_row([id], reads::post_row).optional())
        .map_err(map_err)?
        .ok_or(StoreError::NotFound("post"))
}

pub fn edit_post(
    conn: &Connection,
    actor: &User,
    id: i64,
    body: &str,
    html: &str,
    now: Timestamp,
) -> StoreResult<Post> {
    check_owner(conn, "posts", id, actor, Change::Edit(now))?;
    conn.prepare_cached("UPDATE posts SET body = ?1, body_html = ?2, edited_at = ?3 WHERE id = ?4")
        .and_then(|mut s| s.execute(params![body, html, now.0, id]))
        .map_err(map_err)?;
    post(conn, id)
}

pub fn delete_post(conn: &Connection, actor: &User, id: i64) -> StoreResult<i64> {
    check_owner(conn, "posts", id, actor, Change::Delete)?;
    conn.prepare_cached("UPDATE posts SET deleted = 1, body = '', body_html = '' WHERE id = ?1")
        .and_then(|mut s| s.execute([id]))
        .map_err(map_err)?;
    Ok(post(conn, id)?.topic_id)
}

pub fn vote(
    conn: &Connection,
    voter: &User,
    target: VoteTarget,
    value: i8,
    now: Timestamp,
) -> StoreResult<VoteOutcome> {
    let (kind, id, table) = match target {
        VoteTarget::Topic(id) => (0, id, "topics"),
        VoteTarget::Post(id) => (1, id, "posts"),
    };
    let topic_sql = if kind == 0 {
        "SELECT id, deleted OR removed, created_at, community_id FROM topics WHERE id = ?1"
    } else {
        "SELECT p.topic_id, p.deleted OR p.removed OR t.deleted OR t.removed, p.created_at, t.community_id \
         FROM posts p JOIN topics t ON t.id = p.topic_id WHERE p.id = ?1"
    };
    let (topic_id, gone, created_at, community_id): (i64, bool, i64, i64) = conn
        .prepare_cached(topic_sql)
        .and_then(|mut s| s.query_row([id], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?))).optional())
        .map_err(map_err)?
        .ok_or(StoreError::NotFound(if kind == 0 { "topic" } else { "post" }))?;
    if gone {
        return Err(StoreError::Invalid("cannot vote on deleted or removed content".into()));
    }
    // Votes in a locked topic stay allowed (as on Reddit); bans apply.
    check_ban(conn, voter, Some(community_id), now)?;
    let old: i64 = conn
        .prepare_cached("SELECT value FROM votes WHERE user_id = ?1 AND kind = ?2 AND target_id = ?3")
        .and_then(|mut s| s.query_row(params![voter.id, kind, id], |r| r.get(0)).optional())
        .map_err(map_err)?
        .unwrap_or(0);
    let change = if value == 0 {
        conn.prepare_cached("DELETE FROM votes WHERE user_id = ?1 AND kind = ?2 AND target_id = ?3")
            .and_then(|mut s| s.execute(params![voter.id, kind, id]))
    } else {
        conn.prepare_cached(
            "INSERT INTO votes (user_id, kind, target_id, value) VALUES (?1, ?2, ?3, ?4) \
             ON CONFLICT (user_id, kind, target_id) DO UPDATE SET value = excluded.value",
        )
        .and_then(|mut s| s.execute(params![voter.id, kind, id, value]))
    };
    change.map_err(map_err)?;
    let delta = i64::from(value) - old;
    let score: i64 = conn
        .prepare_cached(&format!("UPDATE {table} SET score = score + ?1 WHERE id = ?2 RETURNING score"))
        .and_then(|mut s| s.query_row(params![delta, id], |r| r.get(0)))
        .map_err(map_err)?;
    if kind == 0 {
        conn.prepare_cached("UPDATE topics SET hot = ?1 WHERE id = ?2")
            .and_then(|mut s| s.execute(params![hot_rank(score, created_at), id]))
            .map_err(map_err)?;
    }
    Ok(VoteOutcome { score, vote: value, topic_id })
}
