//! An account's lifecycle in SQL: its export read in pages, its deletion
//! in one transaction, and its two-factor login's secret, last step used
//! and recovery codes.

use rusqlite::{Connection, OptionalExtension, params};

use super::conn::map_err;
use super::reads::{POST_COLS, POST_FROM, TOPIC_COLS, TOPIC_FROM, post_row, topic_row};
use crate::model::{CastVote, ContentFate, Post, Timestamp, Topic, TwoFactor};
use crate::store::common::{PURGED, PURGED_MESSAGES, last_admin};
use crate::store::{StoreError, StoreResult};

pub fn authored_topics(conn: &Connection, user_id: i64, after: Option<i64>, limit: usize) -> StoreResult<Vec<Topic>> {
    conn.prepare_cached(&format!(
        "SELECT {TOPIC_COLS} {TOPIC_FROM} WHERE t.author_id = ?1 AND t.id > ?2 ORDER BY t.id LIMIT ?3"
    ))
    .and_then(|mut s| s.query_map(params![user_id, after.unwrap_or(0), limit as i64], topic_row)?.collect())
    .map_err(map_err)
}

pub fn authored_posts(conn: &Connection, user_id: i64, after: Option<i64>, limit: usize) -> StoreResult<Vec<Post>> {
    conn.prepare_cached(&format!(
        "SELECT {POST_COLS} {POST_FROM} WHERE p.author_id = ?1 AND p.id > ?2 ORDER BY p.id LIMIT ?3"
    ))
    .and_then(|mut s| s.query_map(params![user_id, after.unwrap_or(0), limit as i64], post_row)?.collect())
    .map_err(map_err)
}

pub fn cast_votes(
    conn: &Connection,
    user_id: i64,
    after: Option<(i64, i64)>,
    limit: usize,
) -> StoreResult<Vec<CastVote>> {
    let (kind, id) = after.unwrap_or((-1, 0));
    conn.prepare_cached(
        "SELECT kind, target_id, value FROM votes WHERE user_id = ?1 AND (kind, target_id) > (?2, ?3) \
         ORDER BY kind, target_id LIMIT ?4",
    )
    .and_then(|mut s| {
        s.query_map(params![user_id, kind, id, limit as i64], |r| Ok(CastVote::of(r.get(0)?, r.get(1)?, r.get(2)?)))?
            .collect()
    })
    .map_err(map_err)
}

/// Run by the writer within its own savepoint: a refusal or failure
/// anywhere leaves nothing of it written.
pub fn delete_user(conn: &Connection, user_id: i64, fate: ContentFate, now: Timestamp) -> StoreResult<Vec<i64>> {
    let is_admin: bool = conn
        .prepare_cached("SELECT is_admin FROM users WHERE id = ?1 AND deleted_at IS NULL")
        .and_then(|mut s| s.query_row([user_id], |r| r.get(0)).optional())
        .map_err(map_err)?
        .ok_or(StoreError::NotFound("user"))?;
    if is_admin {
        let others: i64 = conn
            .prepare_cached("SELECT count(*) FROM users WHERE is_admin AND deleted_at IS NULL AND id <> ?1")
            .and_then(|mut s| s.query_row([user_id], |r| r.get(0)))
            .map_err(map_err)?;
        if others == 0 {
            return Err(last_admin());
        }
    }
    let topics: Vec<i64> = conn
        .prepare_cached(
            "SELECT id FROM topics WHERE author_id = ?1 UNION SELECT topic_id FROM posts WHERE author_id = ?1",
        )
        .and_then(|mut s| s.query_map([user_id], |r| r.get(0))?.collect())
        .map_err(map_err)?;
    super::media::drop_user(conn, user_id, fate == ContentFate::Remove, now)?;
    // Whose stored unread counts the deletions below may change (0018).
    let recipients: Vec<i64> = conn
        .prepare_cached("SELECT DISTINCT user_id FROM notifications WHERE from_id = ?1 AND read = 0")
        .and_then(|mut s| s.query_map([user_id], |r| r.get(0))?.collect())
        .map_err(map_err)?;
    let mut statements: Vec<&str> = Vec::new();
    if fate == ContentFate::Remove {
        statements.extend([
            "UPDATE topics SET title = '[deleted]', deleted = 1, body = NULL, body_html = NULL, url = NULL \
             WHERE author_id = ?1",
            "UPDATE posts SET deleted = 1, body = '', body_html = '' WHERE author_id = ?1",
            // Their excerpts quote the erased text.
            "DELETE FROM notifications WHERE from_id = ?1",
        ]);
    }
    statements.extend(PURGED_MESSAGES.map(|(sqlite, _)| sqlite));
    let purge: Vec<String> = PURGED.iter().map(|table| format!("DELETE FROM {table} WHERE user_id = ?1")).collect();
    for sql in statements.into_iter().chain(purge.iter().map(String::as_str)) {
        conn.prepare_cached(sql).and_then(|mut s| s.execute([user_id])).map_err(map_err)?;
    }
    super::inbox::recount_unread(conn, &recipients)?;
    conn.prepare_cached("DELETE FROM inbox_unread WHERE user_id = ?1")
        .and_then(|mut s| s.execute([user_id]))
        .map_err(map_err)?;
    conn.prepare_cached(
        "UPDATE users SET deleted_at = ?2, password_hash = NULL, is_admin = 0, totp_secret = NULL, \
         totp_pending = NULL WHERE id = ?1",
    )
    .and_then(|mut s| s.execute(params![user_id, now.0]))
    .map_err(map_err)?;
    Ok(topics)
}

pub fn two_factor(conn: &Connection, user_id: i64) -> StoreResult<TwoFactor> {
    conn.prepare_cached(
        "SELECT totp_secret, totp_pending, (SELECT count(*) FROM recovery_codes WHERE user_id = ?1) \
         FROM users WHERE id = ?1",
    )
    .and_then(|mut s| {
        s.query_row([user_id], |r| Ok(TwoFactor { secret: r.get(0)?, pending: r.get(1)?, recovery_left: r.get(2)? }))
            .optional()
    })
    .map_err(map_err)?
    .ok_or(StoreError::NotFound("user"))
}

pub fn begin_totp(conn: &Connection, user_id: i64, secret: &[u8]) -> StoreResult<()> {
    conn.prepare_cached("UPDATE users SET totp_pending = ?2 WHERE id = ?1")
        .and_then(|mut s| s.execute(params![user_id, secret]))
        .map_err(map_err)?;
    Ok(())
}

pub fn enable_totp(conn: &Connection, user_id: i64, secret: &[u8], step: i64, codes: &[[u8; 32]]) -> StoreResult<bool> {
    let changed = conn
        .prepare_cached(
            "UPDATE users SET totp_secret = totp_pending, totp_pending = NULL, totp_last_step = ?3 \
             WHERE id = ?1 AND totp_pending = ?2",
        )
        .and_then(|mut s| s.execute(params![user_id, secret, step]))
        .map_err(map_err)?;
    if changed == 0 {
        return Ok(false);
    }
    conn.prepare_cached("DELETE FROM recovery_codes WHERE user_id = ?1")
        .and_then(|mut s| s.execute([user_id]))
        .map_err(map_err)?;
    let mut insert =
        conn.prepare_cached("INSERT INTO recovery_codes (user_id, hash) VALUES (?1, ?2)").map_err(map_err)?;
    for code in codes {
        insert.execute(params![user_id, &code[..]]).map_err(map_err)?;
    }
    Ok(true)
}

pub fn disable_totp(conn: &Connection, user_id: i64) -> StoreResult<()> {
    conn.prepare_cached("UPDATE users SET totp_secret = NULL, totp_pending = NULL WHERE id = ?1")
        .and_then(|mut s| s.execute([user_id]))
        .map_err(map_err)?;
    conn.prepare_cached("DELETE FROM recovery_codes WHERE user_id = ?1")
        .and_then(|mut s| s.execute([user_id]))
        .map_err(map_err)?;
    Ok(())
}

pub fn use_totp_step(conn: &Connection, user_id: i64, step: i64) -> StoreResult<bool> {
    conn.prepare_cached("UPDATE users SET totp_last_step = ?2 WHERE id = ?1 AND totp_last_step < ?2")
        .and_then(|mut s| s.execute(params![user_id, step]))
        .map(|n| n > 0)
        .map_err(map_err)
}

pub fn use_recovery_code(conn: &Connection, user_id: i64, digest: &[u8; 32]) -> StoreResult<bool> {
    conn.prepare_cached("DELETE FROM recovery_codes WHERE user_id = ?1 AND hash = ?2")
        .and_then(|mut s| s.execute(params![user_id, &digest[..]]))
        .map(|n| n > 0)
        .map_err(map_err)
}
