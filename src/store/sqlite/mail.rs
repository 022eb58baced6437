//! Email's SQL: addresses and their verification, one-use links stored as
//! digests, notification digests, and the outbox the sender drains. Every
//! mail is composed (`model::mail`) and queued in the transaction of the
//! write that causes it, on the writer thread.

use rusqlite::{Connection, OptionalExtension, params};

use super::conn::map_err;
use super::reads::{USER_COLS, user_row};
use crate::model::mail::{
    DIGEST_GAP_SECS, DIGEST_ITEMS, Delivery, Email, EmailSettings, Letter, LinkPurpose, MailLink, OutMail, ResetFor,
    digest_letter, reset_letter, verify_letter,
};
use crate::model::{Notice, Timestamp, User};
use crate::store::{StoreError, StoreResult};

fn taken() -> StoreError {
    StoreError::Taken("email_taken", "another account uses this email address".into())
}

/// Queues a mail.
pub fn enqueue(conn: &Connection, to: &str, letter: &Letter, now: Timestamp) -> StoreResult<()> {
    conn.prepare_cached("INSERT INTO outbox (to_addr, subject, body, created_at, next_at) VALUES (?1, ?2, ?3, ?4, ?4)")
        .and_then(|mut s| s.execute(params![to, letter.subject, letter.body, now.0]))
        .map_err(map_err)?;
    Ok(())
}

fn store_link(
    conn: &Connection,
    user_id: i64,
    purpose: LinkPurpose,
    address: &str,
    link: &MailLink,
    now: Timestamp,
) -> StoreResult<()> {
    conn.prepare_cached(
        "INSERT INTO mail_tokens (hash, user_id, purpose, address, created_at, expires_at) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
    )
    .and_then(|mut s| s.execute(params![&link.hash[..], user_id, purpose.as_str(), address, now.0, link.expires_at.0]))
    .map_err(map_err)?;
    Ok(())
}

/// Sets `user`'s pending address, stores its link and queues the mail.
pub fn set_email(conn: &Connection, user: &User, email: &Email, link: &MailLink, now: Timestamp) -> StoreResult<()> {
    let other: Option<i64> = conn
        .prepare_cached("SELECT user_id FROM emails WHERE (address = ?1 OR pending = ?1) AND user_id <> ?2 LIMIT 1")
        .and_then(|mut s| s.query_row(params![email.as_str(), user.id], |r| r.get(0)).optional())
        .map_err(map_err)?;
    if other.is_some() {
        return Err(taken());
    }
    conn.prepare_cached(
        "INSERT INTO emails (user_id, pending) VALUES (?1, ?2) ON CONFLICT (user_id) DO UPDATE SET pending = ?2",
    )
    .and_then(|mut s| s.execute(params![user.id, email.as_str()]))
    .map_err(map_err)?;
    // An older link to another address stops working.
    conn.prepare_cached("DELETE FROM mail_tokens WHERE user_id = ?1 AND purpose = 'verify'")
        .and_then(|mut s| s.execute([user.id]))
        .map_err(map_err)?;
    store_link(conn, user.id, LinkPurpose::Verify, email.as_str(), link, now)?;
    if let Some(url) = &link.url {
        enqueue(conn, email.as_str(), &verify_letter(&user.name, url), now)?;
    }
    Ok(())
}

pub fn user(conn: &Connection, id: i64) -> StoreResult<User> {
    conn.prepare_cached(&format!("SELECT {USER_COLS} FROM users u WHERE u.id = ?1"))
        .and_then(|mut s| s.query_row([id], user_row).optional())
        .map_err(map_err)?
        .ok_or(StoreError::NotFound("user"))
}

/// Deletes the link of `purpose` and returns its user and address when it
/// was unexpired.
fn take_link(
    conn: &Connection,
    hash: &[u8; 32],
    purpose: LinkPurpose,
    now: Timestamp,
) -> StoreResult<Option<(i64, String)>> {
    // A link of the other purpose stays as it is; an expired one goes.
    let row: Option<(i64, String, i64)> = conn
        .prepare_cached(
            "DELETE FROM mail_tokens WHERE hash = ?1 AND purpose = ?2 RETURNING user_id, address, expires_at",
        )
        .and_then(|mut s| {
            s.query_row(params![&hash[..], purpose.as_str()], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?))).optional()
        })
        .map_err(map_err)?;
    Ok(row.filter(|(_, _, exp)| *exp > now.0).map(|(u, a, _)| (u, a)))
}

pub fn verify_email(conn: &Connection, hash: &[u8; 32], now: Timestamp) -> StoreResult<Option<User>> {
    let Some((user_id, address)) = take_link(conn, hash, LinkPurpose::Verify, now)? else { return Ok(None) };
    let other: Option<i64> = conn
        .prepare_cached("SELECT user_id FROM emails WHERE address = ?1 AND user_id <> ?2")
        .and_then(|mut s| s.query_row(params![address, user_id], |r| r.get(0)).optional())
        .map_err(map_err)?;
    if other.is_some() {
        return Err(taken());
    }
    conn.prepare_cached(
        "UPDATE emails SET address = ?2, pending = CASE WHEN pending = ?2 THEN NULL ELSE pending END \
         WHERE user_id = ?1",
    )
    .and_then(|mut s| s.execute(params![user_id, address]))
    .map_err(map_err)?;
    user(conn, user_id).map(Some)
}

pub fn issue_reset(conn: &Connection, to: &ResetFor, link: &MailLink, now: Timestamp) -> StoreResult<Option<User>> {
    let found: Option<(User, String)> = match to {
        // A verified address first; an account's pending one only when it
        // has none verified (a new account that never followed its link).
        ResetFor::Address(email) => conn
            .prepare_cached(&format!(
                "SELECT {USER_COLS}, COALESCE(e.address, e.pending) FROM emails e JOIN users u ON u.id = e.user_id \
                 WHERE e.address = ?1 OR (e.address IS NULL AND e.pending = ?1) \
                 ORDER BY e.address IS NULL LIMIT 1"
            ))
            .and_then(|mut s| s.query_row([email.as_str()], |r| Ok((user_row(r)?, r.get(4)?))).optional())
            .map_err(map_err)?,
        ResetFor::Name(name) => conn
            .prepare_cached(&format!("SELECT {USER_COLS}, '' FROM users u WHERE u.name = ?1"))
            .and_then(|mut s| s.query_row([name], |r| Ok((user_row(r)?, r.get(4)?))).optional())
            .map_err(map_err)?,
    };
    let Some((user, address)) = found else { return Ok(None) };
    store_link(conn, user.id, LinkPurpose::Reset, "", link, now)?;
    if let Some(url) = &link.url {
        enqueue(conn, &address, &reset_letter(&user.name, url), now)?;
    }
    Ok(Some(user))
}

pub fn reset_password(
    conn: &Connection,
    hash: &[u8; 32],
    password_hash: &str,
    now: Timestamp,
) -> StoreResult<Option<(User, Vec<[u8; 32]>)>> {
    let Some((user_id, _)) = take_link(conn, hash, LinkPurpose::Reset, now)? else { return Ok(None) };
    conn.prepare_cached("UPDATE users SET password_hash = ?2 WHERE id = ?1")
        .and_then(|mut s| s.execute(params![user_id, password_hash]))
        .map_err(map_err)?;
    // Every other reset link of the account stops working too.
    conn.prepare_cached("DELETE FROM mail_tokens WHERE user_id = ?1 AND purpose = 'reset'")
        .and_then(|mut s| s.execute([user_id]))
        .map_err(map_err)?;
    let revoked = super::accounts::revoke_tokens(conn, user_id, None)?;
    Ok(Some((user(conn, user_id)?, revoked)))
}

pub fn email_settings(conn: &Connection, user_id: i64) -> StoreResult<EmailSettings> {
    conn.prepare_cached("SELECT address, pending, digest FROM emails WHERE user_id = ?1")
        .and_then(|mut s| {
            s.query_row([user_id], |r| Ok(EmailSettings { email: r.get(0)?, pending: r.get(1)?, digest: r.get(2)? }))
                .optional()
        })
        .map_err(map_err)
        .map(Option::unwrap_or_default)
}

pub fn set_digest(conn: &Connection, user_id: i64, on: bool) -> StoreResult<()> {
    let n = conn
        .prepare_cached("UPDATE emails SET digest = ?2 WHERE user_id = ?1")
        .and_then(|mut s| s.execute(params![user_id, on]))
        .map_err(map_err)?;
    if n == 0 {
        return Err(StoreError::Invalid("set an email address first".into()));
    }
    Ok(())
}

/// The user's unread notifications newer than `after`, oldest first, up
/// to one more than a digest lists.
fn new_notices(conn: &Connection, user_id: i64, after: i64) -> StoreResult<Vec<Notice>> {
    conn.prepare_cached(
        "SELECT n.id, n.kind, n.topic_id, n.post_id, u.name, n.excerpt, n.created_at, n.read \
         FROM notifications n LEFT JOIN users u ON u.id = n.from_id \
         WHERE n.user_id = ?1 AND n.read = 0 AND n.id > ?2 ORDER BY n.id LIMIT ?3",
    )
    .and_then(|mut s| {
        s.query_map(params![user_id, after, DIGEST_ITEMS as i64 + 1], super::inbox::notice_row)?.collect()
    })
    .map_err(map_err)
}

fn unread_after(conn: &Connection, user_id: i64, after: i64) -> StoreResult<(i64, i64)> {
    conn.prepare_cached(
        "SELECT count(*), COALESCE(max(id), ?2) FROM notifications WHERE user_id = ?1 AND read = 0 AND id > ?2",
    )
    .and_then(|mut s| s.query_row(params![user_id, after], |r| Ok((r.get(0)?, r.get(1)?))))
    .map_err(map_err)
}

pub fn queue_digests(conn: &Connection, now: Timestamp, base: &str) -> StoreResult<usize> {
    let due: Vec<(i64, String, String, i64)> = conn
        .prepare_cached(
            "SELECT e.user_id, u.name, e.address, e.digest_after FROM emails e JOIN users u ON u.id = e.user_id \
             WHERE e.digest = 1 AND e.address IS NOT NULL AND e.digest_sent_at <= ?1 AND EXISTS \
             (SELECT 1 FROM notifications n WHERE n.user_id = e.user_id AND n.read = 0 AND n.id > e.digest_after) \
             LIMIT 100",
        )
        .and_then(|mut s| {
            s.query_map([now.0 - DIGEST_GAP_SECS], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))?.collect()
        })
        .map_err(map_err)?;
    for (user_id, name, address, after) in &due {
        let mut items = new_notices(conn, *user_id, *after)?;
        let (count, newest) = unread_after(conn, *user_id, *after)?;
        items.truncate(DIGEST_ITEMS);
        let more = (count as usize).saturating_sub(items.len());
        enqueue(conn, address, &digest_letter(name, base, &items, more), now)?;
        conn.prepare_cached("UPDATE emails SET digest_sent_at = ?2, digest_after = ?3 WHERE user_id = ?1")
            .and_then(|mut s| s.execute(params![user_id, now.0, newest]))
            .map_err(map_err)?;
    }
    Ok(due.len())
}

pub fn claim_mail(conn: &Connection, now: Timestamp, lease_secs: i64, limit: usize) -> StoreResult<Vec<OutMail>> {
    conn.prepare_cached(
        "UPDATE outbox SET next_at = ?2 WHERE id IN \
         (SELECT id FROM outbox WHERE failed = 0 AND next_at <= ?1 ORDER BY next_at, id LIMIT ?3) \
         RETURNING id, to_addr, subject, body, attempts",
    )
    .and_then(|mut s| {
        s.query_map(params![now.0, now.0 + lease_secs, limit as i64], |r| {
            Ok(OutMail { id: r.get(0)?, to: r.get(1)?, subject: r.get(2)?, body: r.get(3)?, attempts: r.get(4)? })
        })?
        .collect()
    })
    .map_err(map_err)
}

pub fn finish_mail(conn: &Connection, id: i64, outcome: &Delivery) -> StoreResult<()> {
    match outcome {
        Delivery::Sent => conn.prepare_cached("DELETE FROM outbox WHERE id = ?1").and_then(|mut s| s.execute([id])),
        Delivery::Retry { at, error } => conn
            .prepare_cached("UPDATE outbox SET attempts = attempts + 1, next_at = ?2, last_error = ?3 WHERE id = ?1")
            .and_then(|mut s| s.execute(params![id, at.0, error])),
        // The body may hold a link: nobody will send it now.
        Delivery::Failed { error } => conn
            .prepare_cached(
                "UPDATE outbox SET attempts = attempts + 1, failed = 1, body = '', last_error = ?2 WHERE id = ?1",
            )
            .and_then(|mut s| s.execute(params![id, error])),
    }
    .map_err(map_err)?;
    Ok(())
}

pub fn outbox_counts(conn: &Connection) -> StoreResult<(i64, i64)> {
    conn.prepare_cached("SELECT count(*) FILTER (WHERE failed = 0), count(*) FILTER (WHERE failed = 1) FROM outbox")
        .and_then(|mut s| s.query_row([], |r| Ok((r.get(0)?, r.get(1)?))))
        .map_err(map_err)
}
