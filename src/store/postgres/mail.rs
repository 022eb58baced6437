//! Email's SQL on PostgreSQL: as src/store/sqlite/mail.rs, whose comments
//! say why. Several nodes may drain one outbox: a sender claims mail with
//! `FOR UPDATE SKIP LOCKED`, and a digest claims its user's row the same
//! way, so no mail goes out twice.

use deadpool_postgres::GenericClient;

use super::conn::{all, col, exec, one, opt};
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

pub async fn enqueue(c: &impl GenericClient, to: &str, letter: &Letter, now: Timestamp) -> StoreResult<()> {
    exec(
        c,
        "INSERT INTO outbox (to_addr, subject, body, created_at, next_at) VALUES ($1, $2, $3, $4, $4)",
        &[&to, &letter.subject, &letter.body, &now.0],
    )
    .await?;
    Ok(())
}

async fn store_link(
    c: &impl GenericClient,
    user_id: i64,
    purpose: LinkPurpose,
    address: &str,
    link: &MailLink,
    now: Timestamp,
) -> StoreResult<()> {
    exec(
        c,
        "INSERT INTO mail_tokens (hash, user_id, purpose, address, created_at, expires_at) \
         VALUES ($1, $2, $3, $4, $5, $6)",
        &[&&link.hash[..], &user_id, &purpose.as_str(), &address, &now.0, &link.expires_at.0],
    )
    .await?;
    Ok(())
}

pub async fn set_email(
    c: &impl GenericClient,
    user: &User,
    email: &Email,
    link: &MailLink,
    now: Timestamp,
) -> StoreResult<()> {
    let other = opt(
        c,
        "SELECT user_id FROM emails WHERE (lower(address) = lower($1) OR lower(pending) = lower($1)) \
         AND user_id <> $2 LIMIT 1",
        &[&email.as_str(), &user.id],
    )
    .await?;
    if other.is_some() {
        return Err(taken());
    }
    exec(
        c,
        "INSERT INTO emails (user_id, pending) VALUES ($1, $2) ON CONFLICT (user_id) DO UPDATE SET pending = $2",
        &[&user.id, &email.as_str()],
    )
    .await?;
    exec(c, "DELETE FROM mail_tokens WHERE user_id = $1 AND purpose = 'verify'", &[&user.id]).await?;
    store_link(c, user.id, LinkPurpose::Verify, email.as_str(), link, now).await?;
    if let Some(url) = &link.url {
        enqueue(c, email.as_str(), &verify_letter(&user.name, url), now).await?;
    }
    Ok(())
}

pub async fn user(c: &impl GenericClient, id: i64) -> StoreResult<User> {
    let row = opt(c, &format!("SELECT {USER_COLS} FROM users u WHERE u.id = $1"), &[&id]).await?;
    user_row(&row.ok_or(StoreError::NotFound("user"))?)
}

async fn take_link(
    c: &impl GenericClient,
    hash: &[u8; 32],
    purpose: LinkPurpose,
    now: Timestamp,
) -> StoreResult<Option<(i64, String)>> {
    let row = opt(
        c,
        "DELETE FROM mail_tokens WHERE hash = $1 AND purpose = $2 RETURNING user_id, address, expires_at",
        &[&&hash[..], &purpose.as_str()],
    )
    .await?;
    let Some(r) = row else { return Ok(None) };
    if col::<i64>(&r, 2)? <= now.0 {
        return Ok(None);
    }
    Ok(Some((col(&r, 0)?, col(&r, 1)?)))
}

pub async fn verify_email(c: &impl GenericClient, hash: &[u8; 32], now: Timestamp) -> StoreResult<Option<User>> {
    let Some((user_id, address)) = take_link(c, hash, LinkPurpose::Verify, now).await? else { return Ok(None) };
    let other =
        opt(c, "SELECT 1 FROM emails WHERE lower(address) = lower($1) AND user_id <> $2", &[&address, &user_id])
            .await?;
    if other.is_some() {
        return Err(taken());
    }
    exec(
        c,
        "UPDATE emails SET address = $2, pending = CASE WHEN lower(pending) = lower($2) THEN NULL ELSE pending END \
         WHERE user_id = $1",
        &[&user_id, &address],
    )
    .await?;
    user(c, user_id).await.map(Some)
}

pub async fn issue_reset(
    c: &impl GenericClient,
    to: &ResetFor,
    link: &MailLink,
    now: Timestamp,
) -> StoreResult<Option<User>> {
    let row =
        match to {
            ResetFor::Address(email) => opt(
                c,
                &format!(
                    "SELECT {USER_COLS}, COALESCE(e.address, e.pending) FROM emails e JOIN users u ON u.id = e.user_id \
                     WHERE lower(e.address) = lower($1) OR (e.address IS NULL AND lower(e.pending) = lower($1)) \
                     ORDER BY e.address IS NULL LIMIT 1"
                ),
                &[&email.as_str()],
            )
            .await?,
            ResetFor::Name(name) => {
                opt(c, &format!("SELECT {USER_COLS}, '' FROM users u WHERE lower(u.name) = lower($1)"), &[name]).await?
            }
        };
    let Some(r) = row else { return Ok(None) };
    let (user, address): (User, String) = (user_row(&r)?, col(&r, 4)?);
    store_link(c, user.id, LinkPurpose::Reset, "", link, now).await?;
    if let Some(url) = &link.url {
        enqueue(c, &address, &reset_letter(&user.name, url), now).await?;
    }
    Ok(Some(user))
}

pub async fn reset_password(
    c: &impl GenericClient,
    hash: &[u8; 32],
    password_hash: &str,
    now: Timestamp,
) -> StoreResult<Option<(User, Vec<[u8; 32]>)>> {
    let Some((user_id, _)) = take_link(c, hash, LinkPurpose::Reset, now).await? else { return Ok(None) };
    exec(c, "UPDATE users SET password_hash = $2 WHERE id = $1", &[&user_id, &password_hash]).await?;
    exec(c, "DELETE FROM mail_tokens WHERE user_id = $1 AND purpose = 'reset'", &[&user_id]).await?;
    let revoked = super::accounts::revoke_tokens(c, user_id, None).await?;
    Ok(Some((user(c, user_id).await?, revoked)))
}

pub async fn email_settings(c: &impl GenericClient, user_id: i64) -> StoreResult<EmailSettings> {
    match opt(c, "SELECT address, pending, digest FROM emails WHERE user_id = $1", &[&user_id]).await? {
        Some(r) => Ok(EmailSettings { email: col(&r, 0)?, pending: col(&r, 1)?, digest: col(&r, 2)? }),
        None => Ok(EmailSettings::default()),
    }
}

pub async fn set_digest(c: &impl GenericClient, user_id: i64, on: bool) -> StoreResult<()> {
    if exec(c, "UPDATE emails SET digest = $2 WHERE user_id = $1", &[&user_id, &on]).await? == 0 {
        return Err(StoreError::Invalid("set an email address first".into()));
    }
    Ok(())
}

async fn new_notices(c: &impl GenericClient, user_id: i64, after: i64) -> StoreResult<Vec<Notice>> {
    let rows = all(
        c,
        "SELECT n.id, n.kind, n.topic_id, n.post_id, u.name, n.excerpt, n.created_at, n.read \
         FROM notifications n LEFT JOIN users u ON u.id = n.from_id \
         WHERE n.user_id = $1 AND NOT n.read AND n.id > $2 ORDER BY n.id LIMIT $3",
        &[&user_id, &after, &(DIGEST_ITEMS as i64)],
    )
    .await?;
    rows.iter().map(super::inbox::notice_row).collect()
}

pub async fn queue_digests(c: &impl GenericClient, now: Timestamp, base: &str) -> StoreResult<usize> {
    let due = all(
        c,
        "SELECT e.user_id, u.name, e.address, e.digest_after FROM emails e JOIN users u ON u.id = e.user_id \
         WHERE e.digest AND e.address IS NOT NULL AND e.digest_sent_at <= $1 AND EXISTS \
         (SELECT 1 FROM notifications n WHERE n.user_id = e.user_id AND NOT n.read AND n.id > e.digest_after) \
         LIMIT 100 FOR UPDATE OF e SKIP LOCKED",
        &[&(now.0 - DIGEST_GAP_SECS)],
    )
    .await?;
    for r in &due {
        let (user_id, name, address, after): (i64, String, String, i64) =
            (col(r, 0)?, col(r, 1)?, col(r, 2)?, col(r, 3)?);
        let items = new_notices(c, user_id, after).await?;
        let counts = one(
            c,
            "SELECT count(*), COALESCE(max(id), $2) FROM notifications WHERE user_id = $1 AND NOT read AND id > $2",
            &[&user_id, &after],
        )
        .await?;
        let (count, newest): (i64, i64) = (col(&counts, 0)?, col(&counts, 1)?);
        let more = (count as usize).saturating_sub(items.len());
        enqueue(c, &address, &digest_letter(&name, base, &items, more), now).await?;
        exec(
            c,
            "UPDATE emails SET digest_sent_at = $2, digest_after = $3 WHERE user_id = $1",
            &[&user_id, &now.0, &newest],
        )
        .await?;
    }
    Ok(due.len())
}

pub async fn claim_mail(
    c: &impl GenericClient,
    now: Timestamp,
    lease_secs: i64,
    limit: usize,
) -> StoreResult<Vec<OutMail>> {
    let rows = all(
        c,
        "UPDATE outbox SET next_at = $2 WHERE id IN \
         (SELECT id FROM outbox WHERE NOT failed AND next_at <= $1 ORDER BY next_at, id LIMIT $3 \
          FOR UPDATE SKIP LOCKED) \
         RETURNING id, to_addr, subject, body, attempts",
        &[&now.0, &(now.0 + lease_secs), &(limit as i64)],
    )
    .await?;
    rows.iter()
        .map(|r| {
            Ok(OutMail { id: col(r, 0)?, to: col(r, 1)?, subject: col(r, 2)?, body: col(r, 3)?, attempts: col(r, 4)? })
        })
        .collect()
}

pub async fn finish_mail(c: &impl GenericClient, id: i64, outcome: &Delivery) -> StoreResult<()> {
    match outcome {
        Delivery::Sent => exec(c, "DELETE FROM outbox WHERE id = $1", &[&id]).await?,
        Delivery::Retry { at, error } => {
            exec(
                c,
                "UPDATE outbox SET attempts = attempts + 1, next_at = $2, last_error = $3 WHERE id = $1",
                &[&id, &at.0, error],
            )
            .await?
        }
        Delivery::Failed { error } => {
            exec(
                c,
                "UPDATE outbox SET attempts = attempts + 1, failed = true, body = '', last_error = $2 WHERE id = $1",
                &[&id, error],
            )
            .await?
        }
    };
    Ok(())
}

pub async fn outbox_counts(c: &impl GenericClient) -> StoreResult<(i64, i64)> {
    let r =
        one(c, "SELECT count(*) FILTER (WHERE NOT failed), count(*) FILTER (WHERE failed) FROM outbox", &[]).await?;
    Ok((col(&r, 0)?, col(&r, 1)?))
}
