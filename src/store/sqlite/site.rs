//! The site's settings, invites, and public registration, which checks the
//! registration mode and uses up an invite in the same transaction that
//! creates the account (so one code can never make two accounts).

use rusqlite::{Connection, OptionalExtension, params};

use super::conn::map_err;
use super::writes;
use crate::model::{Invite, RegistrationMode, SiteSettings, Timestamp, User, Username};
use crate::store::{StoreError, StoreResult};

pub fn settings(conn: &Connection) -> StoreResult<SiteSettings> {
    let mode: Option<String> = conn
        .prepare_cached("SELECT registration FROM site WHERE id = 1")
        .and_then(|mut s| s.query_row([], |r| r.get(0)).optional())
        .map_err(map_err)?;
    // The column's CHECK allows only known modes; the row always exists.
    let registration = mode.as_deref().and_then(RegistrationMode::parse).unwrap_or_default();
    Ok(SiteSettings { registration })
}

pub fn set_settings(conn: &Connection, actor: &User, new: SiteSettings) -> StoreResult<SiteSettings> {
    if !actor.is_admin {
        return Err(StoreError::Forbidden("only site administrators may change the site's settings"));
    }
    conn.prepare_cached("INSERT OR REPLACE INTO site (id, registration) VALUES (1, ?1)")
        .and_then(|mut s| s.execute([new.registration.as_str()]))
        .map_err(map_err)?;
    settings(conn)
}

pub fn create_invite(
    conn: &Connection,
    creator: Option<&User>,
    code_hash: &[u8; 32],
    expires_at: Option<Timestamp>,
    now: Timestamp,
) -> StoreResult<Invite> {
    if creator.is_some_and(|u| !u.is_admin) {
        return Err(StoreError::Forbidden("only site administrators may create invites"));
    }
    conn.prepare_cached("INSERT INTO invites (code_hash, created_by, created_at, expires_at) VALUES (?1, ?2, ?3, ?4)")
        .and_then(|mut s| s.execute(params![&code_hash[..], creator.map(|u| u.id), now.0, expires_at.map(|t| t.0)]))
        .map_err(map_err)?;
    Ok(Invite { id: conn.last_insert_rowid(), created_at: now, expires_at })
}

pub fn register_user(
    conn: &Connection,
    name: &Username,
    password_hash: &str,
    invite_hash: Option<&[u8; 32]>,
    now: Timestamp,
) -> StoreResult<User> {
    let mode = settings(conn)?.registration;
    if let Some((code, message)) = mode.refusal(invite_hash.is_some()) {
        return Err(StoreError::Denied(code, message.into()));
    }
    let invite = match invite_hash {
        Some(hash) if mode == RegistrationMode::Invite => Some(
            // Looked up by its SHA-256: the code itself is never stored,
            // and a digest lookup leaks nothing about other codes through
            // timing.
            conn.prepare_cached(
                "SELECT id FROM invites WHERE code_hash = ?1 AND used_by IS NULL \
                 AND (expires_at IS NULL OR expires_at > ?2)",
            )
            .and_then(|mut s| s.query_row(params![&hash[..], now.0], |r| r.get::<_, i64>(0)).optional())
            .map_err(map_err)?
            .ok_or_else(|| {
                StoreError::Denied("invalid_invite", "the invite code is unknown, already used or expired".into())
            })?,
        ),
        // In open mode a code is not needed, and not used up.
        _ => None,
    };
    let user = writes::create_user(conn, name, Some(password_hash), false, now)?;
    if let Some(id) = invite {
        conn.prepare_cached("UPDATE invites SET used_by = ?1, used_at = ?2 WHERE id = ?3")
            .and_then(|mut s| s.execute(params![user.id, now.0, id]))
            .map_err(map_err)?;
    }
    Ok(user)
}
