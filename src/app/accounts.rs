//! Accounts: registration, logging in and out, and the bearer tokens a
//! session is, for the API and the pages alike.

use std::sync::{Arc, Weak};

use axum::http::StatusCode;

use super::auth::{dummy_hash, hash_password, new_token, token_digest, verify_password};
use super::limits::{Action, ClientIp, Who};
use super::{App, AppError, AppResult, AppState};
use crate::live::Resolver;
use crate::model::Change;
use crate::model::{NewToken, Password, RegistrationMode, TokenKind, User, Username};
use crate::store::Store;

/// Argon2 takes tens of milliseconds: keep it off the async workers.
pub async fn blocking<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> AppResult<T> {
    tokio::task::spawn_blocking(f).await.map_err(|e| AppError::Internal(e.to_string()))
}

/// Stores a new bearer token for `user` and returns it; the API hands it
/// out in JSON (`TokenKind::Api`), the forms in a cookie
/// (`TokenKind::Session`). `label` (the User-Agent) names it in the
/// owner's list of sessions.
pub async fn issue_token<S: Store>(
    state: &AppState<S>,
    user: &User,
    kind: TokenKind,
    label: &str,
) -> AppResult<String> {
    let token = new_token();
    let new = NewToken { user_id: user.id, hash: token_digest(&token), kind, label: crate::model::label(label) };
    state.store.issue_token(new).await?;
    Ok(token)
}

/// Public registration for the API and the form: the name and password
/// rules, the email address (`email::registration_email`), the site's
/// registration `mode`, the per-address limit, then the hash (argon2id,
/// off the async workers).
pub async fn create_account<S: Store>(
    state: &AppState<S>,
    ip: ClientIp,
    mode: RegistrationMode,
    username: &str,
    password: &str,
    invite: Option<String>,
    email: Option<&str>,
) -> AppResult<User> {
    let name = Username::parse(username)?;
    let password = Password::parse(password)?;
    let email = super::email::registration_email(state, email)?;
    let invite = invite.filter(|code| !code.is_empty());
    // Refused before the costly hash; the store checks again, in the
    // transaction that creates the account.
    if let Some((code, message)) = mode.refusal(invite.is_some()) {
        return Err(AppError::Rejected(StatusCode::FORBIDDEN, code, message.into()));
    }
    state.limits.check(Action::Register, ip, Who::Nobody)?;
    let hash = blocking(move || hash_password(password.as_str())).await?.map_err(AppError::Internal)?;
    let invite_hash = invite.map(|code| token_digest(&code));
    match email {
        Some((email, link)) => {
            let user = state.store.register_with_email(name, hash, invite_hash, email, link).await?;
            state.mail.wake();
            Ok(user)
        }
        None => Ok(state.store.register_user(name, hash, invite_hash).await?),
    }
}

/// The user `name` when `password` is theirs and, with two-factor login
/// on, `totp` is a good code (`two_factor::check_login`); for the API and
/// the form.
pub async fn check_login<S: Store>(
    state: &AppState<S>,
    ip: ClientIp,
    name: &str,
    password: String,
    totp: Option<&str>,
) -> AppResult<User> {
    if name.len() > 64 || password.len() > 256 {
        return Err(AppError::BadCredentials);
    }
    // Every attempt counts, before the password is even hashed: brute force
    // stalls at the limit, and a stalled guesser learns nothing.
    state.limits.check(Action::Login, ip, Who::Name(name))?;
    let (user, hash) = match state.store.user_credentials(name.to_owned()).await? {
        Some((user, Some(hash))) => (Some(user), hash),
        // Verify anyway so unknown names take as long as wrong passwords.
        _ => (None, dummy_hash().to_owned()),
    };
    let ok = blocking(move || verify_password(&password, &hash)).await?;
    match (user, ok) {
        (Some(user), true) => {
            super::email::check_held(state, &user).await?;
            super::two_factor::check_login(state, ip, &user, totp).await?;
            Ok(user)
        }
        _ => Err(AppError::BadCredentials),
    }
}

/// Ends a session of `user_id`, for the API's logout and the form's.
pub async fn revoke_token<S: Store>(state: &AppState<S>, user_id: i64, digest: [u8; 32]) -> AppResult<()> {
    // Forget the cached token before and after revoking, so no request can
    // re-cache it in between and no cancelled request can leave it cached.
    state.tokens.remove(&digest);
    state.store.revoke_token(digest).await?;
    state.tokens.remove(&digest);
    // Other nodes of a cluster forget it too.
    super::apply::apply(state, Change::TokensRevoked { user_id });
    Ok(())
}

/// The user id behind a bearer token, through the token cache and the
/// idle limits (`sessions::token_user`).
pub async fn user_id<S: Store>(app: &Arc<App<S>>, token: &str) -> AppResult<Option<i64>> {
    if token.is_empty() || token.len() > 128 {
        return Ok(None);
    }
    Ok(super::sessions::token_user(app, token_digest(token)).await?.map(|u| u.id))
}

/// Lets a socket that sends `{"op":"auth"}` check its token against the
/// store, without the hub knowing the store's type.
pub fn token_resolver<S: Store>(app: Weak<App<S>>) -> Resolver {
    Box::new(move |token: String| {
        let app = app.clone();
        Box::pin(async move {
            let app = app.upgrade()?;
            user_id(&app, token.trim()).await.ok().flatten()
        })
    })
}
