//! `pith user`: create an account from the command line (the way to make
//! the first administrator) and print a fresh API token, issue a new API
//! token to an existing account, create an invite code for a site that
//! admits by invitation, or delete an account.

use crate::app::auth::{hash_password, new_token, token_digest};
use crate::backup::{with_postgres, with_sqlite};
use crate::config::{Backend, UserAddConfig, UserDeleteConfig, UserInviteConfig, UserResetLinkConfig, UserTokenConfig};
use crate::model::{ContentFate, NewToken, Password, Timestamp, TokenKind, User, Username};
use crate::store::{Store, StoreError};

pub fn add(cfg: UserAddConfig) -> anyhow::Result<()> {
    let name = Username::parse(&cfg.name).map_err(|e| anyhow::anyhow!("invalid user name: {e}"))?;
    let hash = match cfg.password.as_deref() {
        Some(p) => {
            let p = Password::parse(p).map_err(|e| anyhow::anyhow!("invalid password: {e}"))?;
            Some(hash_password(p.as_str()).map_err(anyhow::Error::msg)?)
        }
        None => None,
    };
    let admin = cfg.admin;
    let (user, token) = match cfg.data.backend() {
        Backend::Sqlite(_) => with_sqlite(&cfg.data, |store| add_user(store, name, hash, admin))?,
        Backend::Postgres(url) => with_postgres(&url, |store| add_user(store, name, hash, admin))?,
    };
    eprintln!("created user {} (id {}{})", user.name, user.id, if user.is_admin { ", admin" } else { "" });
    println!("{token}");
    Ok(())
}

/// Issues a new API token to an existing account (one that lost its
/// token, or a password-less one run by a script); the database keeps
/// only its digest, so this is the one time it is shown.
pub fn token(cfg: UserTokenConfig) -> anyhow::Result<()> {
    let name = cfg.name.clone();
    let (user, token) = match cfg.data.backend() {
        Backend::Sqlite(_) => with_sqlite(&cfg.data, |store| new_api_token(store, name))?,
        Backend::Postgres(url) => with_postgres(&url, |store| new_api_token(store, name))?,
    };
    eprintln!("issued a new API token to user {} (id {}); their other sessions and tokens stay", user.name, user.id);
    println!("{token}");
    Ok(())
}

async fn new_api_token<S: Store>(store: std::sync::Arc<S>, name: String) -> anyhow::Result<(User, String)> {
    refuse_remote(&name)?;
    let Some((user, _)) = store.user_credentials(name.clone()).await? else {
        anyhow::bail!("there is no user {name} (`pith user add {name}` creates one)");
    };
    let token = issue(&*store, &user, "pith user token").await?;
    Ok((user, token))
}

/// A remote user (`name@host`, docs/FEDERATION.md) acts only through its
/// own server's signed activities: no token or password is ever made for
/// it, here either.
fn refuse_remote(name: &str) -> anyhow::Result<()> {
    if crate::model::federation::is_remote_name(name) {
        anyhow::bail!("{name} is a user of another instance: it cannot sign in here");
    }
    Ok(())
}

/// Stores a new API token for `user`, labelled with the command that made it.
async fn issue<S: Store>(store: &S, user: &User, label: &str) -> anyhow::Result<String> {
    let token = new_token();
    let new = NewToken { user_id: user.id, hash: token_digest(&token), kind: TokenKind::Api, label: label.into() };
    store.issue_token(new).await?;
    Ok(token)
}

/// Makes a one-use password-reset link for an account, valid an hour,
/// for an administrator to hand over (a forum without mail, a user whose
/// address is gone); only its digest is stored, so this is the one time
/// it is shown.
pub fn reset_link(cfg: UserResetLinkConfig) -> anyhow::Result<()> {
    use crate::model::mail::{RESET_TTL_SECS, ResetFor};
    let base = cfg.public_url.clone().unwrap_or_else(|| crate::app::web_settings::listen_url("http", cfg.listen));
    let (url, mut link) = crate::app::email::new_link(&base, crate::app::email::RESET_PATH, RESET_TTL_SECS);
    // Printed, not mailed.
    link.url = None;
    let name = cfg.name.clone();
    refuse_remote(&name)?;
    let found = match cfg.data.backend() {
        Backend::Sqlite(_) => {
            with_sqlite(
                &cfg.data,
                |store| async move { anyhow::Ok(store.issue_reset(ResetFor::Name(name), link).await?) },
            )?
        }
        Backend::Postgres(db) => {
            with_postgres(&db, |store| async move { anyhow::Ok(store.issue_reset(ResetFor::Name(name), link).await?) })?
        }
    };
    let Some(user) = found else { anyhow::bail!("there is no user {}", cfg.name) };
    eprintln!("a one-use reset link for user {} (id {}), valid for an hour:", user.name, user.id);
    println!("{url}");
    Ok(())
}

/// Makes an invite code; the database keeps only its digest, so this is
/// the one time it is shown.
pub fn invite(cfg: UserInviteConfig) -> anyhow::Result<()> {
    let code = new_token();
    let digest = token_digest(&code);
    let expires_at = cfg.expires_days.map(|d| Timestamp(Timestamp::now().0 + d as i64 * 86_400));
    let invite =
        match cfg.data.backend() {
            Backend::Sqlite(_) => with_sqlite(&cfg.data, |store| async move {
                anyhow::Ok(store.create_invite(None, digest, expires_at).await?)
            })?,
            Backend::Postgres(url) => {
                with_postgres(
                    &url,
                    |store| async move { anyhow::Ok(store.create_invite(None, digest, expires_at).await?) },
                )?
            }
        };
    match invite.expires_at {
        Some(t) => eprintln!("created invite {} (expires {})", invite.id, t.rfc3339()),
        None => eprintln!("created invite {} (never expires; works once)", invite.id),
    }
    println!("{code}");
    Ok(())
}

/// Deletes an account as `DELETE /api/v1/admin/users/{name}` does. A
/// server running on the same database notices within a minute (its
/// token cache); pages it cached keep the name until their topic is next
/// written to, so on a live site the admin API is the better door.
pub fn delete(cfg: UserDeleteConfig) -> anyhow::Result<()> {
    let fate = ContentFate::parse(&cfg.content).map_err(|e| anyhow::anyhow!("{e}"))?;
    let name = cfg.name.clone();
    let topics = match cfg.data.backend() {
        Backend::Sqlite(_) => with_sqlite(&cfg.data, |store| delete_user(store, name, fate))?,
        Backend::Postgres(url) => with_postgres(&url, |store| delete_user(store, name, fate))?,
    };
    eprintln!("deleted user {} ({}); {topics} topics touched", cfg.name, fate.as_str());
    Ok(())
}

async fn delete_user<S: Store>(store: std::sync::Arc<S>, name: String, fate: ContentFate) -> anyhow::Result<usize> {
    let Some((user, _)) = store.user_credentials(name.clone()).await? else {
        anyhow::bail!("there is no user {name}");
    };
    Ok(store.delete_user(user.id, fate).await?.len())
}

/// Creates the account and its first API token.
async fn add_user<S: Store>(
    store: std::sync::Arc<S>,
    name: Username,
    hash: Option<String>,
    admin: bool,
) -> anyhow::Result<(User, String)> {
    let shown = name.as_str().to_owned();
    let user = match store.create_user(name, hash, admin).await {
        Ok(user) => user,
        Err(StoreError::Conflict(_)) => {
            anyhow::bail!("user {shown} already exists; `pith user token {shown}` issues it a new API token")
        }
        Err(e) => return Err(e.into()),
    };
    let token = issue(&*store, &user, "pith user add").await?;
    Ok((user, token))
}
