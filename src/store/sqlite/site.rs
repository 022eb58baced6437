//! The site's settings, invites, and public registration, which checks the
//! registration mode and uses up an invite in the same transaction that
//! creates the account (so one code can never make two accounts).

use rusqlite::{Connection, OptionalExtension, params};

use super::conn::map_err;
use super::writes;
use crate::model::policy::{self, Admission, InviteFacts};
use crate::model::{Invite, RegistrationMode, SiteSettings, Timestamp, User, Username};
use crate::store::StoreResult;

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
    policy::may_change_site(actor)?;
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
    policy::may_create_invite(creator)?;
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
    let admission = policy::may_register(settings(conn)?.registration, invite_hash.is_some())?;
    let invite = match invite_hash {
        Some(hash) if admission == Admission::ByInvite => {
            // Looked up by its SHA-256: the code itself is never stored,
            // and a digest lookup leaks nothing about other codes through
            // timing.
            let invite: Option<(i64, InviteFacts)> = conn
                .prepare_cached("SELECT id, used_by IS NOT NULL, expires_at FROM invites WHERE code_hash = ?1")
                .and_then(|mut s| {
                    s.query_row([&hash[..]], |r| {
                        let expires_at = r.get::<_, Option<i64>>(2)?.map(Timestamp);
                        Ok((r.get(0)?, InviteFacts { used: r.get(1)?, expires_at }))
                    })
                    .optional()
                })
                .map_err(map_err)?;
            policy::may_use_invite(invite.as_ref().map(|(_, facts)| facts), now)?;
            invite.map(|(id, _)| id)
        }
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
