//! The site's settings, invites, and public registration, which checks the
//! registration mode and uses up an invite in the same transaction that
//! creates the account (the invite's row is locked, so one code can never
//! make two accounts).

use deadpool_postgres::GenericClient;

use super::conn::{col, exec, one, opt};
use super::writes;
use crate::model::policy::{self, Admission, InviteFacts};
use crate::model::{Invite, RegistrationMode, SiteSettings, Timestamp, User, Username};
use crate::store::StoreResult;

pub async fn settings(c: &impl GenericClient) -> StoreResult<SiteSettings> {
    let mode: Option<String> = match opt(c, "SELECT registration FROM site WHERE id = 1", &[]).await? {
        Some(r) => Some(col(&r, 0)?),
        None => None,
    };
    // The column's CHECK allows only known modes; the row always exists.
    let registration = mode.as_deref().and_then(RegistrationMode::parse).unwrap_or_default();
    Ok(SiteSettings { registration })
}

pub async fn set_settings(c: &impl GenericClient, actor: &User, new: SiteSettings) -> StoreResult<SiteSettings> {
    policy::may_change_site(actor)?;
    exec(
        c,
        "INSERT INTO site (id, registration) VALUES (1, $1) \
         ON CONFLICT (id) DO UPDATE SET registration = excluded.registration",
        &[&new.registration.as_str()],
    )
    .await?;
    settings(c).await
}

pub async fn create_invite(
    c: &impl GenericClient,
    creator: Option<&User>,
    code_hash: &[u8; 32],
    expires_at: Option<Timestamp>,
    now: Timestamp,
) -> StoreResult<Invite> {
    policy::may_create_invite(creator)?;
    let row = one(
        c,
        "INSERT INTO invites (code_hash, created_by, created_at, expires_at) VALUES ($1, $2, $3, $4) RETURNING id",
        &[&&code_hash[..], &creator.map(|u| u.id), &now.0, &expires_at.map(|t| t.0)],
    )
    .await?;
    Ok(Invite { id: col(&row, 0)?, created_at: now, expires_at })
}

pub async fn register_user(
    c: &impl GenericClient,
    name: &Username,
    password_hash: &str,
    invite_hash: Option<&[u8; 32]>,
    now: Timestamp,
) -> StoreResult<User> {
    let admission = policy::may_register(settings(c).await?.registration, invite_hash.is_some())?;
    let invite: Option<(i64, InviteFacts)> = match invite_hash {
        Some(hash) if admission == Admission::ByInvite => {
            // Looked up by its SHA-256: the code itself is never stored.
            // FOR UPDATE: a second registration with the same code waits,
            // then finds it used.
            let row = opt(
                c,
                "SELECT id, used_by IS NOT NULL, expires_at FROM invites WHERE code_hash = $1 FOR UPDATE",
                &[&&hash[..]],
            )
            .await?;
            let invite = match row {
                Some(r) => {
                    let expires_at = col::<Option<i64>>(&r, 2)?.map(Timestamp);
                    Some((col(&r, 0)?, InviteFacts { used: col(&r, 1)?, expires_at }))
                }
                None => None,
            };
            policy::may_use_invite(invite.as_ref().map(|(_, facts)| facts), now)?;
            invite
        }
        // In open mode a code is not needed, and not used up.
        _ => None,
    };
    let user = writes::create_user(c, name, Some(password_hash), false, now).await?;
    if let Some((id, facts)) = invite {
        // `used_by IS NULL` again: under READ COMMITTED a waiter re-checks
        // the locked row; a code used meanwhile changes nothing here, and
        // is refused as used.
        let used = exec(
            c,
            "UPDATE invites SET used_by = $1, used_at = $2 WHERE id = $3 AND used_by IS NULL",
            &[&user.id, &now.0, &id],
        )
        .await?;
        policy::may_use_invite(Some(&InviteFacts { used: used == 0, ..facts }), now)?;
    }
    Ok(user)
}
