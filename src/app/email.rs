//! Email addresses and what they are for: verifying one with a mailed
//! link, a password reset by mail, and the notification digest setting.
//! Links carry a random token; the store keeps only its SHA-256, as it
//! does for session tokens, and uses a link up when it is followed. Mail
//! is queued by the store in the transaction of the write, and sent by
//! `mail`'s background task: no request waits on an SMTP server.

use axum::http::StatusCode;

use super::accounts::blocking;
use super::auth::{AuthUser, hash_password, new_token, token_digest, verify_password};
use super::limits::{Action, ClientIp, Who};
use super::{AppError, AppResult, AppState};
use crate::model::mail::{Email, EmailSettings, MailLink, RESET_TTL_SECS, ResetFor, VERIFY_TTL_SECS};
use crate::model::{Change, Password, Timestamp, User};
use crate::store::Store;

/// The page a verification link opens.
pub const VERIFY_PATH: &str = "/verify/";
/// The page a reset link opens.
pub const RESET_PATH: &str = "/reset/";

/// A new one-use link under `path` on `base`, valid `ttl` seconds: the
/// token (for the URL) and the link as the store keeps it.
pub fn new_link(base: &str, path: &str, ttl: i64) -> (String, MailLink) {
    let token = new_token();
    let url = format!("{base}{path}{token}");
    let link = MailLink {
        hash: token_digest(&token),
        expires_at: Timestamp(Timestamp::now().0 + ttl),
        url: Some(url.clone()),
    };
    (url, link)
}

/// 403 `mail_unavailable` when the forum sends no mail: a link that
/// cannot be mailed is no use (an administrator hands out reset links
/// instead). Not a 5xx: nothing is wrong with the server.
fn need_mail<S: Store>(state: &AppState<S>) -> AppResult<()> {
    if state.mail.enabled() {
        return Ok(());
    }
    Err(AppError::Rejected(
        StatusCode::FORBIDDEN,
        "mail_unavailable",
        "this forum sends no mail; an administrator can make a reset link with `pith user reset-link`".into(),
    ))
}

/// The address given at registration: required under
/// `--require-email`, validated when given, and the link that verifies it.
pub fn registration_email<S: Store>(state: &AppState<S>, email: Option<&str>) -> AppResult<Option<(Email, MailLink)>> {
    let email = email.map(str::trim).filter(|e| !e.is_empty());
    let Some(email) = email else {
        if state.mail.require_email() {
            return Err(AppError::Rejected(
                StatusCode::UNPROCESSABLE_ENTITY,
                "email_required",
                "this forum requires an email address (`email`) to register".into(),
            ));
        }
        return Ok(None);
    };
    let email = Email::parse(email)?;
    need_mail(state)?;
    let (_, link) = new_link(&state.web.public_url(), VERIFY_PATH, VERIFY_TTL_SECS);
    Ok(Some((email, link)))
}

/// Refuses a login while the site requires email and the account never
/// verified its address; called once the password proved right.
pub async fn check_held<S: Store>(state: &AppState<S>, user: &User) -> AppResult<()> {
    if state.mail.require_email() && state.store.email_settings(user.id).await?.unverified() {
        return Err(AppError::Rejected(
            StatusCode::FORBIDDEN,
            "email_unverified",
            "confirm your email address first: follow the link mailed to you".into(),
        ));
    }
    Ok(())
}

/// Follows a verification link.
pub async fn verify<S: Store>(state: &AppState<S>, token: &str) -> AppResult<User> {
    let found = if token.is_empty() || token.len() > 128 {
        None
    } else {
        state.store.verify_email(token_digest(token.trim()), Timestamp::now()).await?
    };
    found.ok_or_else(|| {
        AppError::Rejected(
            StatusCode::BAD_REQUEST,
            "verify_token_invalid",
            "this confirmation link is unknown, used or expired".into(),
        )
    })
}

/// Asks for a reset link by mail. The answer is the same whether or not
/// the address belongs to anyone, and comes as fast either way: the
/// lookup and the queueing run after the answer, in their own task.
pub async fn request_reset<S: Store>(state: &AppState<S>, ip: ClientIp, email: &str) -> AppResult<()> {
    state.limits.check(Action::Login, ip, Who::Nobody)?;
    let email = Email::parse(email)?;
    need_mail(state)?;
    let (_, link) = new_link(&state.web.public_url(), RESET_PATH, RESET_TTL_SECS);
    let state = state.clone();
    tokio::spawn(async move {
        match state.store.issue_reset(ResetFor::Address(email), link).await {
            Ok(Some(_)) => state.mail.wake(),
            Ok(None) => {}
            Err(e) => tracing::warn!(error = %e, "could not queue a password reset"),
        }
    });
    Ok(())
}

/// Follows a reset link: sets the new password, and revokes every session
/// and API token of the account.
pub async fn confirm_reset<S: Store>(
    state: &AppState<S>,
    ip: ClientIp,
    token: &str,
    password: &str,
) -> AppResult<User> {
    state.limits.check(Action::Login, ip, Who::Nobody)?;
    let password = Password::parse(password)?;
    let invalid = || {
        AppError::Rejected(
            StatusCode::BAD_REQUEST,
            "reset_token_invalid",
            "this reset link is unknown, used or expired; ask for a new one".into(),
        )
    };
    if token.is_empty() || token.len() > 128 {
        return Err(invalid());
    }
    let hash = blocking(move || hash_password(password.as_str())).await?.map_err(AppError::Internal)?;
    let (user, revoked) =
        state.store.reset_password(token_digest(token.trim()), hash, Timestamp::now()).await?.ok_or_else(invalid)?;
    for digest in &revoked {
        state.tokens.remove(digest);
    }
    state.tokens.forget_user(user.id);
    super::apply::apply(state, Change::TokensRevoked { user_id: user.id });
    Ok(user)
}

/// Sets the signed-in user's address (after checking their password) and
/// mails the link that verifies it; until then it is pending.
pub async fn set_email<S: Store>(
    state: &AppState<S>,
    ip: ClientIp,
    auth: &AuthUser,
    email: &str,
    password: String,
) -> AppResult<EmailSettings> {
    state.limits.check(Action::Login, ip, Who::Name(&auth.user.name))?;
    let email = Email::parse(email)?;
    need_mail(state)?;
    let hash = match state.store.user_credentials(auth.user.name.clone()).await? {
        Some((_, Some(hash))) if password.len() <= 256 => hash,
        _ => String::new(),
    };
    if !blocking(move || verify_password(&password, &hash)).await? {
        return Err(AppError::Rejected(StatusCode::FORBIDDEN, "wrong_password", "the password is wrong".into()));
    }
    let (_, link) = new_link(&state.web.public_url(), VERIFY_PATH, VERIFY_TTL_SECS);
    state.store.set_email(auth.user.id, email, link).await?;
    state.mail.wake();
    Ok(state.store.email_settings(auth.user.id).await?)
}

/// Turns the notification digest on or off.
pub async fn set_digest<S: Store>(state: &AppState<S>, auth: &AuthUser, on: bool) -> AppResult<EmailSettings> {
    state.store.set_digest(auth.user.id, on).await?;
    Ok(state.store.email_settings(auth.user.id).await?)
}
