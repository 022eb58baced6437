//! Sessions and API tokens as their owner manages them: how long each kind
//! lasts unused (`--session-idle-days`, `--api-idle-days`), the check every
//! token goes through (expired ones are refused and deleted; a use is
//! recorded at most once a minute), the owner's list of them, revoking
//! one or all the others, and changing the password (which signs out
//! everywhere else).

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use axum::http::StatusCode;
use serde::Serialize;

use super::accounts::blocking;
use super::auth::{AuthUser, hash_password, token_id, verify_password};
use super::limits::{Action, ClientIp, Who};
use super::{App, AppError, AppResult, AppState};
use crate::model::{Change, IdleLimits, Password, Timestamp, TokenKind, TokenRecord, User};
use crate::store::Store;

/// `pith serve`'s idle limits.
#[derive(Debug, Clone, clap::Args)]
pub struct SessionConfig {
    /// Days a web session may go unused before it ends and the browser must
    /// log in again; 0 keeps sessions until they log out.
    #[arg(long, env = "PITH_SESSION_IDLE_DAYS", default_value_t = DEFAULT_SESSION_IDLE_DAYS,
          value_parser = clap::value_parser!(u32).range(0..=3650))]
    pub session_idle_days: u32,

    /// Days an API token (from `/api/v1/auth/*` or `pith user add`/`token`)
    /// may go unused before it stops working; 0 keeps tokens until revoked.
    #[arg(long, env = "PITH_API_IDLE_DAYS", default_value_t = DEFAULT_API_IDLE_DAYS,
          value_parser = clap::value_parser!(u32).range(0..=3650))]
    pub api_idle_days: u32,
}

/// A month, as most forums keep a browser signed in.
const DEFAULT_SESSION_IDLE_DAYS: u32 = 30;
/// A year: scripts and bots may run seldom (a monthly job), but a token
/// forgotten for a year is not one anybody uses.
const DEFAULT_API_IDLE_DAYS: u32 = 365;

/// The idle limits in force; set by `pith serve` after the state is built.
#[derive(Debug)]
pub struct SessionSettings {
    session_days: AtomicU32,
    api_days: AtomicU32,
}

impl Default for SessionSettings {
    fn default() -> Self {
        SessionSettings {
            session_days: AtomicU32::new(DEFAULT_SESSION_IDLE_DAYS),
            api_days: AtomicU32::new(DEFAULT_API_IDLE_DAYS),
        }
    }
}

impl SessionSettings {
    pub fn set(&self, cfg: &SessionConfig) {
        self.session_days.store(cfg.session_idle_days, Ordering::Relaxed);
        self.api_days.store(cfg.api_idle_days, Ordering::Relaxed);
    }

    pub fn limits(&self) -> IdleLimits {
        IdleLimits {
            session_days: self.session_days.load(Ordering::Relaxed),
            api_days: self.api_days.load(Ordering::Relaxed),
        }
    }
}

/// The user behind a token digest, through the token cache. A token past
/// its kind's idle limit is refused like an unknown one, and deleted. A
/// cache miss (at most once a minute per token and node) records the use
/// when the last one recorded is a minute old, so auth costs no write on
/// most requests.
pub async fn token_user<S: Store>(app: &Arc<App<S>>, digest: [u8; 32]) -> AppResult<Option<User>> {
    if let Some(user) = app.tokens.get(&digest) {
        return Ok(Some(user));
    }
    let Some((user, token)) = app.store.token_user(digest).await? else { return Ok(None) };
    let now = Timestamp::now();
    if token.expired(now, app.sessions.limits()) {
        // Best effort: refused either way, and deleted on a later try.
        if let Err(e) = app.store.revoke_token(digest).await {
            tracing::debug!(error = %e, "could not delete an expired token");
        }
        return Ok(None);
    }
    if token.use_is_news(now)
        && let Err(e) = app.store.touch_token(digest, now).await
    {
        // A read-only or full database still lets people read signed in.
        tracing::debug!(error = %e, "could not record a token's use");
    }
    app.tokens.put(digest, user.clone());
    Ok(Some(user))
}

/// One of the user's sessions or tokens, as their list shows it.
#[derive(Debug, Clone, Serialize)]
pub struct SessionInfo {
    /// Names the token without revealing it (`auth::token_id`).
    pub id: String,
    pub kind: TokenKind,
    /// What it was issued to (a browser's User-Agent), or empty.
    pub label: String,
    pub created_at: Timestamp,
    /// To the minute.
    pub last_used_at: Timestamp,
    /// The token this request came with.
    pub current: bool,
}

/// The user's sessions and API tokens in force, most recently used first;
/// the expired ones are deleted on the way.
pub async fn list<S: Store>(state: &AppState<S>, auth: &AuthUser) -> AppResult<Vec<SessionInfo>> {
    let (now, limits) = (Timestamp::now(), state.sessions.limits());
    let (expired, live): (Vec<TokenRecord>, Vec<TokenRecord>) =
        state.store.user_tokens(auth.user.id).await?.into_iter().partition(|t| t.expired(now, limits));
    for token in expired {
        super::accounts::revoke_token(state, auth.user.id, token.hash).await?;
    }
    Ok(live
        .into_iter()
        .map(|t| SessionInfo {
            id: token_id(&t.hash),
            kind: t.kind,
            label: t.label,
            created_at: t.created_at,
            last_used_at: t.last_used_at,
            current: t.hash == auth.digest,
        })
        .collect())
}

/// Revokes the user's session or token `id` (their own only; 404 for
/// anyone else's or an unknown one). Revoking the current one signs out.
pub async fn revoke<S: Store>(state: &AppState<S>, auth: &AuthUser, id: &str) -> AppResult<()> {
    let tokens = state.store.user_tokens(auth.user.id).await?;
    let token = tokens.iter().find(|t| token_id(&t.hash) == id).ok_or(AppError::not_found("session"))?;
    super::accounts::revoke_token(state, auth.user.id, token.hash).await
}

/// "Sign out everywhere else": revokes every session and token of the user
/// but the one this request came with; how many were revoked.
pub async fn revoke_others<S: Store>(state: &AppState<S>, auth: &AuthUser) -> AppResult<usize> {
    forget_all(state, auth.user.id).await?;
    let revoked = state.store.revoke_tokens(auth.user.id, Some(auth.digest)).await?;
    forget(state, auth.user.id, &revoked);
    Ok(revoked.len())
}

/// Changes the password after checking the current one, and revokes every
/// other session and token of the user (keeping the caller's): whoever
/// held one with the old password is signed out. The attempt counts as a
/// login attempt for the rate limits, since it checks a password.
pub async fn change_password<S: Store>(
    state: &AppState<S>,
    ip: ClientIp,
    auth: &AuthUser,
    current: String,
    new: &str,
) -> AppResult<usize> {
    let new = Password::parse(new)?;
    let old_hash = check_password(state, ip, &auth.user, current).await?;
    let new_hash = blocking(move || hash_password(new.as_str())).await?.map_err(AppError::Internal)?;
    forget_all(state, auth.user.id).await?;
    let revoked = state.store.set_password(auth.user.id, old_hash, new_hash, Some(auth.digest)).await?;
    forget(state, auth.user.id, &revoked);
    Ok(revoked.len())
}

/// Checks that `password` is the user's own, before a change to their
/// account (a new password, 2FA off, deletion); returns the stored hash.
/// Counts as a login attempt for the rate limits: it checks a password.
/// 403 `wrong_password`, or `no_password` for an account with none.
pub async fn check_password<S: Store>(
    state: &AppState<S>,
    ip: ClientIp,
    user: &User,
    password: String,
) -> AppResult<String> {
    state.limits.check(Action::Login, ip, Who::Name(&user.name))?;
    if password.len() > 256 {
        return Err(wrong_password());
    }
    let Some((_, Some(stored))) = state.store.user_credentials(user.name.clone()).await? else {
        return Err(AppError::Rejected(
            StatusCode::FORBIDDEN,
            "no_password",
            "this account has no password: it signs in with a token only".into(),
        ));
    };
    let hash = stored.clone();
    if !blocking(move || verify_password(&password, &hash)).await? {
        return Err(wrong_password());
    }
    Ok(stored)
}

fn wrong_password() -> AppError {
    AppError::Rejected(StatusCode::FORBIDDEN, "wrong_password", "the current password is wrong".into())
}

/// Drops the user's tokens from the token cache before a bulk revocation,
/// as `accounts::revoke_token` does for one: a token revoked must not
/// answer from the cache.
async fn forget_all<S: Store>(state: &AppState<S>, user_id: i64) -> AppResult<()> {
    let tokens = state.store.user_tokens(user_id).await?;
    for token in tokens {
        state.tokens.remove(&token.hash);
    }
    Ok(())
}

/// Drops revoked tokens from this node's token cache, and tells the other
/// nodes of a cluster to drop the user's from theirs.
fn forget<S: Store>(state: &AppState<S>, user_id: i64, digests: &[[u8; 32]]) {
    for digest in digests {
        state.tokens.remove(digest);
    }
    super::apply::apply(state, Change::TokensRevoked { user_id });
}

/// The request's `User-Agent`, to label the session or token it starts.
pub struct UserAgent(pub String);

impl<S: Send + Sync> axum::extract::FromRequestParts<S> for UserAgent {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(parts: &mut axum::http::request::Parts, _: &S) -> Result<Self, Self::Rejection> {
        let ua = parts.headers.get(axum::http::header::USER_AGENT).and_then(|v| v.to_str().ok()).unwrap_or_default();
        Ok(UserAgent(crate::model::label(ua)))
    }
}
