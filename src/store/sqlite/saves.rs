//! Saved items, community blocks and a reader's marks on a topic.

use rusqlite::{Connection, OptionalExtension, Row, params};

use super::conn::map_err;
use super::reads::community_id;
use crate::model::{EXCERPT_CHARS, Marks, Saved, SavedCursor, Timestamp, User, VoteTarget};
use crate::store::{SavedPage, StoreError, StoreResult};

/// The store's (kind, id) of a target, as `votes` names them.
fn key(target: VoteTarget) -> (i64, i64) {
    match target {
        VoteTarget::Topic(id) => (0, id),
        VoteTarget::Post(id) => (1, id),
    }
}

fn exists(conn: &Connection, target: VoteTarget) -> StoreResult<()> {
    let (sql, what) = match target {
        VoteTarget::Topic(_) => ("SELECT 1 FROM topics WHERE id = ?1", "topic"),
        VoteTarget::Post(_) => ("SELECT 1 FROM posts WHERE id = ?1", "post"),
    };
    let found: Option<i64> = conn
        .prepare_cached(sql)
        .and_then(|mut s| s.query_row([key(target).1], |r| r.get(0)).optional())
        .map_err(map_err)?;
    found.map(|_| ()).ok_or(StoreError::NotFound(what))
}

pub fn set_saved(conn: &Connection, user: &User, target: VoteTarget, saved: bool, now: Timestamp) -> StoreResult<bool> {
    exists(conn, target)?;
    let (kind, id) = key(target);
    let changed = if saved {
        conn.prepare_cached(
            "INSERT INTO saves (user_id, kind, target_id, saved_at) VALUES (?1, ?2, ?3, ?4) ON CONFLICT DO NOTHING",
        )
        .and_then(|mut s| s.execute(params![user.id, kind, id, now.0]))
    } else {
        conn.prepare_cached("DELETE FROM saves WHERE user_id = ?1 AND kind = ?2 AND target_id = ?3")
            .and_then(|mut s| s.execute(params![user.id, kind, id]))
    }
    .map_err(map_err)?;
    Ok(changed > 0)
}

/// A saved item's columns: the save, the topic (the item or the post's),
/// and the post when the item is one.
const SAVED_SQL: &str = "SELECT s.kind, s.target_id, s.saved_at, t.id, t.title, c.name, t.deleted, t.removed, \
     substr(t.body, 1, ?3), p.deleted, p.removed, substr(p.body, 1, ?3) \
     FROM saves s \
     LEFT JOIN posts p ON s.kind = 1 AND p.id = s.target_id \
     JOIN topics t ON t.id = CASE WHEN s.kind = 0 THEN s.target_id ELSE p.topic_id END \
     JOIN communities c ON c.id = t.community_id \
     WHERE s.user_id = ?1";

fn saved_row(r: &Row<'_>) -> rusqlite::Result<Saved> {
    let kind: i64 = r.get(0)?;
    let topic_removed: bool = r.get(7)?;
    let (post_id, deleted, removed, excerpt) = if kind == 0 {
        (None, r.get(6)?, topic_removed, r.get(8)?)
    } else {
        (Some(r.get(1)?), r.get(9)?, r.get(10)?, r.get(11)?)
    };
    Ok(Saved {
        kind: if kind == 0 { "topic" } else { "post" },
        topic_id: r.get(3)?,
        post_id,
        title: Some(r.get(4)?),
        community: r.get(5)?,
        excerpt,
        saved_at: Timestamp(r.get(2)?),
        deleted,
        removed,
        topic_removed,
    })
}

pub fn saved(conn: &Connection, user_id: i64, after: Option<SavedCursor>, limit: usize) -> StoreResult<SavedPage> {
    let order = " ORDER BY s.saved_at DESC, s.kind DESC, s.target_id DESC LIMIT ?2";
    let chars = EXCERPT_CHARS as i64;
    let take = (limit + 1) as i64;
    let mut items: Vec<Saved> = match after {
        None => conn
            .prepare_cached(&format!("{SAVED_SQL}{order}"))
            .and_then(|mut s| s.query_map(params![user_id, take, chars], saved_row)?.collect())
            .map_err(map_err)?,
        Some(c) => conn
            .prepare_cached(&format!("{SAVED_SQL} AND (s.saved_at, s.kind, s.target_id) < (?4, ?5, ?6){order}"))
            .and_then(|mut s| {
                s.query_map(params![user_id, take, chars, c.saved_at, c.kind, c.id], saved_row)?.collect()
            })
            .map_err(map_err)?,
    };
    let next = if items.len() > limit {
        items.truncate(limit);
        items.last().map(SavedCursor::of)
    } else {
        None
    };
    Ok(SavedPage { items, next })
}

pub fn set_blocked(
    conn: &Connection,
    user: &User,
    community: &str,
    blocked: bool,
    now: Timestamp,
) -> StoreResult<bool> {
    let community = community_id(conn, community)?;
    let changed = if blocked {
        conn.prepare_cached(
            "INSERT INTO community_blocks (user_id, community_id, created_at) VALUES (?1, ?2, ?3) \
             ON CONFLICT DO NOTHING",
        )
        .and_then(|mut s| s.execute(params![user.id, community, now.0]))
    } else {
        conn.prepare_cached("DELETE FROM community_blocks WHERE user_id = ?1 AND community_id = ?2")
            .and_then(|mut s| s.execute(params![user.id, community]))
    }
    .map_err(map_err)?;
    Ok(changed > 0)
}

pub fn blocked(conn: &Connection, user_id: i64) -> StoreResult<Vec<String>> {
    conn.prepare_cached(
        "SELECT c.name FROM community_blocks b JOIN communities c ON c.id = b.community_id \
         WHERE b.user_id = ?1 ORDER BY c.name",
    )
    .and_then(|mut s| s.query_map([user_id], |r| r.get(0))?.collect())
    .map_err(map_err)
}

pub fn marks(conn: &Connection, user_id: i64, topic: i64, posts: &[i64]) -> StoreResult<Marks> {
    // The page's posts as a JSON array: one statement, whatever their number.
    let ids = serde_json::to_string(posts).map_err(|e| StoreError::Internal(e.to_string()))?;
    let sql = "SELECT 0, v.kind, v.target_id, v.value FROM votes v \
         WHERE v.user_id = ?1 AND ((v.kind = 0 AND v.target_id = ?2) \
           OR (v.kind = 1 AND v.target_id IN (SELECT value FROM json_each(?3)))) \
         UNION ALL SELECT 1, s.kind, s.target_id, 0 FROM saves s \
         WHERE s.user_id = ?1 AND ((s.kind = 0 AND s.target_id = ?2) \
           OR (s.kind = 1 AND s.target_id IN (SELECT value FROM json_each(?3)))) \
         UNION ALL SELECT 2, 1, b.blocked_id, 0 FROM user_blocks b \
         WHERE b.user_id = ?1 AND b.blocked_id IN \
           (SELECT author_id FROM posts WHERE id IN (SELECT value FROM json_each(?3)))";
    let rows: Vec<(i64, i64, i64, i64)> = conn
        .prepare_cached(sql)
        .and_then(|mut s| {
            s.query_map(params![user_id, topic, ids], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))?.collect()
        })
        .map_err(map_err)?;
    Ok(Marks::from_rows(rows))
}

pub fn topic_votes(conn: &Connection, user_id: i64, topics: &[i64]) -> StoreResult<Vec<(i64, i8)>> {
    let ids = serde_json::to_string(topics).map_err(|e| StoreError::Internal(e.to_string()))?;
    conn.prepare_cached(
        "SELECT target_id, value FROM votes \
         WHERE user_id = ?1 AND kind = 0 AND target_id IN (SELECT value FROM json_each(?2))",
    )
    .and_then(|mut s| {
        s.query_map(params![user_id, ids], |r| Ok((r.get(0)?, r.get::<_, i64>(1)?.clamp(-1, 1) as i8)))?.collect()
    })
    .map_err(map_err)
}
