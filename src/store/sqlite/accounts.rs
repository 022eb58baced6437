//! Accounts' names and tokens: the look-alike lookup that account creation
//! runs in its transaction, web sessions and API tokens with their use
//! recorded, and revoking them in bulk (a password change, "sign out
//! everywhere else").

use rusqlite::{Connection, OptionalExtension, Row, params};

use super::conn::map_err;
use super::reads::{USER_COLS, user_row};
use crate::model::{IdleLimits, NameKeys, NewToken, Timestamp, TokenKind, TokenRecord, User};
use crate::store::{StoreError, StoreResult};

/// A user whose name looks like `name` (`NameKeys::meets`), other than
/// `name` itself in any case.
pub fn similar_name(conn: &Connection, name: &str, keys: &NameKeys) -> StoreResult<Option<String>> {
    conn.prepare_cached(
        // `name` is COLLATE NOCASE: `<>` ignores case, as the unique index does.
        "SELECT name FROM users WHERE (skeleton IN (?1, ?2) OR skeleton_folded IN (?1, ?2)) AND name <> ?3 LIMIT 1",
    )
    .and_then(|mut s| s.query_row(params![keys.written, keys.folded, name], |r| r.get(0)).optional())
    .map_err(map_err)
}

pub fn issue_token(conn: &Connection, token: &NewToken, now: Timestamp) -> StoreResult<()> {
    conn.prepare_cached(
        "INSERT INTO tokens (hash, user_id, created_at, kind, last_used_at, label) VALUES (?1, ?2, ?3, ?4, ?3, ?5)",
    )
    .and_then(|mut s| s.execute(params![&token.hash[..], token.user_id, now.0, token.kind.as_str(), token.label]))
    .map_err(map_err)?;
    Ok(())
}

const TOKEN_COLS: &str = "k.hash, k.kind, k.label, k.created_at, k.last_used_at";

/// A token from `TOKEN_COLS`, the first at `at`.
fn token_row(r: &Row<'_>, at: usize) -> rusqlite::Result<TokenRecord> {
    let bytes: Vec<u8> = r.get(at)?;
    let kind: String = r.get(at + 1)?;
    Ok(TokenRecord {
        hash: bytes.try_into().unwrap_or([0; 32]),
        kind: TokenKind::parse(&kind),
        label: r.get(at + 2)?,
        created_at: Timestamp(r.get(at + 3)?),
        last_used_at: Timestamp(r.get(at + 4)?),
    })
}

pub fn token_user(conn: &Connection, hash: &[u8; 32]) -> StoreResult<Option<(User, TokenRecord)>> {
    conn.prepare_cached(&format!(
        "SELECT {USER_COLS}, {TOKEN_COLS} FROM tokens k JOIN users u ON u.id = k.user_id \
         WHERE k.hash = ?1 AND u.deleted_at IS NULL"
    ))
    .and_then(|mut s| s.query_row([&hash[..]], |r| Ok((user_row(r)?, token_row(r, 4)?))).optional())
    .map_err(map_err)
}

pub fn touch_token(conn: &Connection, hash: &[u8; 32], at: Timestamp) -> StoreResult<()> {
    conn.prepare_cached("UPDATE tokens SET last_used_at = ?2 WHERE hash = ?1 AND last_used_at < ?2")
        .and_then(|mut s| s.execute(params![&hash[..], at.0]))
        .map_err(map_err)?;
    Ok(())
}

pub fn user_tokens(conn: &Connection, user_id: i64) -> StoreResult<Vec<TokenRecord>> {
    conn.prepare_cached(&format!(
        "SELECT {TOKEN_COLS} FROM tokens k WHERE k.user_id = ?1 ORDER BY k.last_used_at DESC, k.created_at DESC"
    ))
    .and_then(|mut s| s.query_map([user_id], |r| token_row(r, 0))?.collect())
    .map_err(map_err)
}

/// `Store::sweep_expired`: the tokens first, then the links, `limit` in all.
pub fn sweep_expired(conn: &Connection, now: Timestamp, limits: IdleLimits, limit: usize) -> StoreResult<usize> {
    let tokens = conn
        .prepare_cached(
            "DELETE FROM tokens WHERE hash IN (SELECT hash FROM tokens WHERE \
             (kind = 'session' AND ?1 > 0 AND last_used_at < ?3 - ?1 * 86400) OR \
             (kind = 'api' AND ?2 > 0 AND last_used_at < ?3 - ?2 * 86400) LIMIT ?4)",
        )
        .and_then(|mut s| s.execute(params![limits.session_days, limits.api_days, now.0, limit as i64]))
        .map_err(map_err)?;
    let links = conn
        .prepare_cached(
            "DELETE FROM mail_tokens WHERE hash IN (SELECT hash FROM mail_tokens WHERE expires_at < ?1 LIMIT ?2)",
        )
        .and_then(|mut s| s.execute(params![now.0, limit.saturating_sub(tokens) as i64]))
        .map_err(map_err)?;
    Ok(tokens + links)
}

pub fn revoke_tokens(conn: &Connection, user_id: i64, keep: Option<&[u8; 32]>) -> StoreResult<Vec<[u8; 32]>> {
    conn.prepare_cached("DELETE FROM tokens WHERE user_id = ?1 AND hash IS NOT ?2 RETURNING hash")
        .and_then(|mut s| {
            s.query_map(params![user_id, keep.map(|k| &k[..])], |r| r.get::<_, Vec<u8>>(0))?
                .map(|bytes| bytes.map(|b| b.try_into().unwrap_or([0; 32])))
                .collect()
        })
        .map_err(map_err)
}

pub fn set_password(
    conn: &Connection,
    user_id: i64,
    old: &str,
    new: &str,
    keep: Option<&[u8; 32]>,
) -> StoreResult<Vec<[u8; 32]>> {
    let changed = conn
        .prepare_cached("UPDATE users SET password_hash = ?3 WHERE id = ?1 AND password_hash = ?2")
        .and_then(|mut s| s.execute(params![user_id, old, new]))
        .map_err(map_err)?;
    if changed == 0 {
        return Err(StoreError::Conflict("the password was changed meanwhile; try again".into()));
    }
    revoke_tokens(conn, user_id, keep)
}

/// Computes the look-alike keys of every user that has none: the rows
/// before migration 0005, and any a tool wrote without them. SQL cannot
/// compute a skeleton, so this runs when the database opens; once every
/// row has its keys it is one lookup in `users_skeleton`.
pub fn fill_name_keys(conn: &mut Connection) -> StoreResult<usize> {
    let names: Vec<(i64, String)> = conn
        .prepare("SELECT id, name FROM users WHERE skeleton IS NULL OR skeleton_folded IS NULL")
        .and_then(|mut s| s.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?.collect())
        .map_err(map_err)?;
    if names.is_empty() {
        return Ok(0);
    }
    let tx = conn.transaction().map_err(map_err)?;
    {
        let mut update =
            tx.prepare("UPDATE users SET skeleton = ?2, skeleton_folded = ?3 WHERE id = ?1").map_err(map_err)?;
        for (id, name) in &names {
            let keys = NameKeys::of(name);
            update.execute(params![id, keys.written, keys.folded]).map_err(map_err)?;
        }
    }
    tx.commit().map_err(map_err)?;
    tracing::info!(users = names.len(), "computed the look-alike keys of user names");
    Ok(names.len())
}
