//! An account's lifecycle in SQL (see `sqlite::lifecycle`): its export
//! read in pages, its deletion in one transaction, and its two-factor
//! login's secret, last step used and recovery codes.

use deadpool_postgres::GenericClient;

use super::conn::{all, col, exec, one, opt};
use super::reads::{POST_COLS, POST_FROM, TOPIC_COLS, TOPIC_FROM, post_row, topic_row};
use crate::model::{CastVote, ContentFate, Post, Timestamp, Topic, TwoFactor};
use crate::store::common::{PURGED, PURGED_MESSAGES, last_admin};
use crate::store::{StoreError, StoreResult};

pub async fn authored_topics(
    c: &impl GenericClient,
    user_id: i64,
    after: Option<i64>,
    limit: usize,
) -> StoreResult<Vec<Topic>> {
    let sql = format!("SELECT {TOPIC_COLS} {TOPIC_FROM} WHERE t.author_id = $1 AND t.id > $2 ORDER BY t.id LIMIT $3");
    all(c, &sql, &[&user_id, &after.unwrap_or(0), &(limit as i64)]).await?.iter().map(topic_row).collect()
}

pub async fn authored_posts(
    c: &impl GenericClient,
    user_id: i64,
    after: Option<i64>,
    limit: usize,
) -> StoreResult<Vec<Post>> {
    let sql = format!("SELECT {POST_COLS} {POST_FROM} WHERE p.author_id = $1 AND p.id > $2 ORDER BY p.id LIMIT $3");
    all(c, &sql, &[&user_id, &after.unwrap_or(0), &(limit as i64)]).await?.iter().map(post_row).collect()
}

pub async fn cast_votes(
    c: &impl GenericClient,
    user_id: i64,
    after: Option<(i64, i64)>,
    limit: usize,
) -> StoreResult<Vec<CastVote>> {
    let (kind, id) = after.unwrap_or((-1, 0));
    let sql = "SELECT kind, target_id, value FROM votes WHERE user_id = $1 AND (kind, target_id) > ($2, $3) \
               ORDER BY kind, target_id LIMIT $4";
    all(c, sql, &[&user_id, &kind, &id, &(limit as i64)])
        .await?
        .iter()
        .map(|r| Ok(CastVote::of(col(r, 0)?, col(r, 1)?, col(r, 2)?)))
        .collect()
}

pub async fn delete_user(
    c: &impl GenericClient,
    user_id: i64,
    fate: ContentFate,
    now: Timestamp,
) -> StoreResult<Vec<i64>> {
    let sql = "SELECT is_admin FROM users WHERE id = $1 AND deleted_at IS NULL FOR UPDATE";
    let is_admin: bool = match opt(c, sql, &[&user_id]).await? {
        Some(r) => col(&r, 0)?,
        None => return Err(StoreError::NotFound("user")),
    };
    if is_admin {
        // The other admins' rows are locked too: two admins deleting each
        // other at once cannot both see the other left.
        let sql = "SELECT count(*) FROM (SELECT 1 FROM users WHERE is_admin AND deleted_at IS NULL AND id <> $1 \
                   FOR UPDATE) a";
        if col::<i64>(&one(c, sql, &[&user_id]).await?, 0)? == 0 {
            return Err(last_admin());
        }
    }
    let sql = "SELECT id FROM topics WHERE author_id = $1 UNION SELECT topic_id FROM posts WHERE author_id = $1";
    let topics = all(c, sql, &[&user_id]).await?.iter().map(|r| col(r, 0)).collect::<StoreResult<Vec<i64>>>()?;
    super::media::drop_user(c, user_id, fate == ContentFate::Remove, now).await?;
    if fate == ContentFate::Remove {
        for sql in [
            "UPDATE topics SET title = '[deleted]', deleted = true, body = NULL, body_html = NULL, url = NULL \
             WHERE author_id = $1",
            "UPDATE posts SET deleted = true, body = '', body_html = '' WHERE author_id = $1",
            // Their excerpts quote the erased text.
            "DELETE FROM notifications WHERE from_id = $1",
        ] {
            exec(c, sql, &[&user_id]).await?;
        }
    }
    for (_, sql) in PURGED_MESSAGES {
        exec(c, sql, &[&user_id]).await?;
    }
    for table in PURGED {
        exec(c, &format!("DELETE FROM {table} WHERE user_id = $1"), &[&user_id]).await?;
    }
    let sql = "UPDATE users SET deleted_at = $2, password_hash = NULL, is_admin = false, totp_secret = NULL, \
               totp_pending = NULL WHERE id = $1";
    exec(c, sql, &[&user_id, &now.0]).await?;
    Ok(topics)
}

pub async fn two_factor(c: &impl GenericClient, user_id: i64) -> StoreResult<TwoFactor> {
    let sql = "SELECT totp_secret, totp_pending, (SELECT count(*) FROM recovery_codes WHERE user_id = $1) \
               FROM users WHERE id = $1";
    match opt(c, sql, &[&user_id]).await? {
        Some(r) => Ok(TwoFactor { secret: col(&r, 0)?, pending: col(&r, 1)?, recovery_left: col(&r, 2)? }),
        None => Err(StoreError::NotFound("user")),
    }
}

pub async fn begin_totp(c: &impl GenericClient, user_id: i64, secret: &[u8]) -> StoreResult<()> {
    exec(c, "UPDATE users SET totp_pending = $2 WHERE id = $1", &[&user_id, &secret]).await.map(drop)
}

pub async fn enable_totp(
    c: &impl GenericClient,
    user_id: i64,
    secret: &[u8],
    step: i64,
    codes: &[[u8; 32]],
) -> StoreResult<bool> {
    let sql = "UPDATE users SET totp_secret = totp_pending, totp_pending = NULL, totp_last_step = $3 \
               WHERE id = $1 AND totp_pending = $2";
    if exec(c, sql, &[&user_id, &secret, &step]).await? == 0 {
        return Ok(false);
    }
    exec(c, "DELETE FROM recovery_codes WHERE user_id = $1", &[&user_id]).await?;
    for code in codes {
        exec(c, "INSERT INTO recovery_codes (user_id, hash) VALUES ($1, $2)", &[&user_id, &&code[..]]).await?;
    }
    Ok(true)
}

pub async fn disable_totp(c: &impl GenericClient, user_id: i64) -> StoreResult<()> {
    exec(c, "UPDATE users SET totp_secret = NULL, totp_pending = NULL WHERE id = $1", &[&user_id]).await?;
    exec(c, "DELETE FROM recovery_codes WHERE user_id = $1", &[&user_id]).await.map(drop)
}

pub async fn use_totp_step(c: &impl GenericClient, user_id: i64, step: i64) -> StoreResult<bool> {
    let sql = "UPDATE users SET totp_last_step = $2 WHERE id = $1 AND totp_last_step < $2";
    Ok(exec(c, sql, &[&user_id, &step]).await? > 0)
}

pub async fn use_recovery_code(c: &impl GenericClient, user_id: i64, digest: &[u8; 32]) -> StoreResult<bool> {
    let sql = "DELETE FROM recovery_codes WHERE user_id = $1 AND hash = $2";
    Ok(exec(c, sql, &[&user_id, &&digest[..]]).await? > 0)
}
