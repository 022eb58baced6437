//! Accounts' names and tokens on PostgreSQL: the look-alike lookup that
//! account creation runs in its transaction, web sessions and API tokens
//! with their use recorded, and revoking them in bulk. As
//! src/store/sqlite/accounts.rs, whose comments say why.

use deadpool_postgres::GenericClient;
use tokio_postgres::Row;

use super::conn::{all, col, exec, map_err, opt};
use super::reads::{USER_COLS, user_row};
use crate::model::{IdleLimits, NameKeys, NewToken, Timestamp, TokenKind, TokenRecord, User};
use crate::store::{StoreError, StoreResult};

/// Any number fixed for "a new account's name": account creation takes it,
/// so two look-alike names registered at once on two nodes cannot both
/// pass the check before either is inserted.
const NEW_NAME_LOCK: i64 = 0x7069_7468_0002;

/// A user whose name looks like `name`, other than `name` in any case;
/// call inside the transaction that then inserts `name`.
pub async fn similar_name(c: &impl GenericClient, name: &str, keys: &NameKeys) -> StoreResult<Option<String>> {
    exec(c, "SELECT pg_advisory_xact_lock($1)", &[&NEW_NAME_LOCK]).await?;
    let row = opt(
        c,
        "SELECT name FROM users WHERE (skeleton IN ($1, $2) OR skeleton_folded IN ($1, $2)) \
         AND lower(name) <> lower($3) LIMIT 1",
        &[&keys.written, &keys.folded, &name],
    )
    .await?;
    row.map(|r| col(&r, 0)).transpose()
}

pub async fn issue_token(c: &impl GenericClient, token: &NewToken, now: Timestamp) -> StoreResult<()> {
    exec(
        c,
        "INSERT INTO tokens (hash, user_id, created_at, kind, last_used_at, label) VALUES ($1, $2, $3, $4, $3, $5)",
        &[&&token.hash[..], &token.user_id, &now.0, &token.kind.as_str(), &token.label],
    )
    .await?;
    Ok(())
}

const TOKEN_COLS: &str = "k.hash, k.kind, k.label, k.created_at, k.last_used_at";

fn token_row(r: &Row, at: usize) -> StoreResult<TokenRecord> {
    let bytes: Vec<u8> = col(r, at)?;
    let kind: String = col(r, at + 1)?;
    Ok(TokenRecord {
        hash: bytes.try_into().unwrap_or([0; 32]),
        kind: TokenKind::parse(&kind),
        label: col(r, at + 2)?,
        created_at: Timestamp(col(r, at + 3)?),
        last_used_at: Timestamp(col(r, at + 4)?),
    })
}

pub async fn token_user(c: &impl GenericClient, hash: &[u8; 32]) -> StoreResult<Option<(User, TokenRecord)>> {
    let sql = format!(
        "SELECT {USER_COLS}, {TOKEN_COLS} FROM tokens k JOIN users u ON u.id = k.user_id \
         WHERE k.hash = $1 AND u.deleted_at IS NULL"
    );
    match opt(c, &sql, &[&&hash[..]]).await? {
        Some(r) => Ok(Some((user_row(&r)?, token_row(&r, 4)?))),
        None => Ok(None),
    }
}

pub async fn touch_token(c: &impl GenericClient, hash: &[u8; 32], at: Timestamp) -> StoreResult<()> {
    exec(c, "UPDATE tokens SET last_used_at = $2 WHERE hash = $1 AND last_used_at < $2", &[&&hash[..], &at.0]).await?;
    Ok(())
}

pub async fn user_tokens(c: &impl GenericClient, user_id: i64) -> StoreResult<Vec<TokenRecord>> {
    let sql = format!(
        "SELECT {TOKEN_COLS} FROM tokens k WHERE k.user_id = $1 ORDER BY k.last_used_at DESC, k.created_at DESC"
    );
    all(c, &sql, &[&user_id]).await?.iter().map(|r| token_row(r, 0)).collect()
}

/// `Store::sweep_expired`: the tokens first, then the links, `limit` in all.
pub async fn sweep_expired(
    c: &impl GenericClient,
    now: Timestamp,
    limits: IdleLimits,
    limit: usize,
) -> StoreResult<usize> {
    let (session, api) = (i64::from(limits.session_days), i64::from(limits.api_days));
    let tokens = exec(
        c,
        "DELETE FROM tokens WHERE hash IN (SELECT hash FROM tokens WHERE \
         (kind = 'session' AND $1::BIGINT > 0 AND last_used_at < $3 - $1::BIGINT * 86400) OR \
         (kind = 'api' AND $2::BIGINT > 0 AND last_used_at < $3 - $2::BIGINT * 86400) LIMIT $4)",
        &[&session, &api, &now.0, &(limit as i64)],
    )
    .await? as usize;
    let links = exec(
        c,
        "DELETE FROM mail_tokens WHERE hash IN (SELECT hash FROM mail_tokens WHERE expires_at < $1 LIMIT $2)",
        &[&now.0, &(limit.saturating_sub(tokens) as i64)],
    )
    .await? as usize;
    Ok(tokens + links)
}

pub async fn revoke_tokens(
    c: &impl GenericClient,
    user_id: i64,
    keep: Option<&[u8; 32]>,
) -> StoreResult<Vec<[u8; 32]>> {
    let keep = keep.map(|k| &k[..]);
    let rows =
        all(c, "DELETE FROM tokens WHERE user_id = $1 AND hash IS DISTINCT FROM $2 RETURNING hash", &[&user_id, &keep])
            .await?;
    rows.iter().map(|r| col::<Vec<u8>>(r, 0).map(|b| b.try_into().unwrap_or([0; 32]))).collect()
}

pub async fn set_password(
    c: &impl GenericClient,
    user_id: i64,
    old: &str,
    new: &str,
    keep: Option<&[u8; 32]>,
) -> StoreResult<Vec<[u8; 32]>> {
    let changed =
        exec(c, "UPDATE users SET password_hash = $3 WHERE id = $1 AND password_hash = $2", &[&user_id, &old, &new])
            .await?;
    if changed == 0 {
        return Err(StoreError::Conflict("the password was changed meanwhile; try again".into()));
    }
    revoke_tokens(c, user_id, keep).await
}

/// Computes the look-alike keys of every user that has none (the rows
/// before migration 4, and `pith seed`'s), at connect.
pub async fn fill_name_keys(c: &impl GenericClient) -> StoreResult<usize> {
    let rows = c
        .query("SELECT id, name FROM users WHERE skeleton IS NULL OR skeleton_folded IS NULL", &[])
        .await
        .map_err(map_err)?;
    if rows.is_empty() {
        return Ok(0);
    }
    let mut ids = Vec::with_capacity(rows.len());
    let (mut written, mut folded) = (Vec::with_capacity(rows.len()), Vec::with_capacity(rows.len()));
    for r in &rows {
        let keys = NameKeys::of(&col::<String>(r, 1)?);
        ids.push(col::<i64>(r, 0)?);
        written.push(keys.written);
        folded.push(keys.folded);
    }
    c.execute(
        "UPDATE users SET skeleton = k.written, skeleton_folded = k.folded \
         FROM unnest($1::bigint[], $2::text[], $3::text[]) AS k(id, written, folded) WHERE users.id = k.id",
        &[&ids, &written, &folded],
    )
    .await
    .map_err(map_err)?;
    tracing::info!(users = ids.len(), "computed the look-alike keys of user names");
    Ok(ids.len())
}
