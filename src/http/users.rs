//! Account routes: register, log in, log out, who am I, and profiles.

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde::{Deserialize, Serialize};

use super::AppState;
use super::extract::{AuthUser, Json, Path};
use super::limits::{Action, ClientIp, Who};
use crate::auth::{dummy_hash, hash_password, new_token, token_digest, verify_password};
use crate::error::{AppError, AppResult};
use crate::model::{Password, User, Username};
use crate::store::Store;

pub fn router<S: Store>() -> Router<AppState<S>> {
    Router::new()
        .route("/auth/register", post(register::<S>))
        .route("/auth/login", post(login::<S>))
        .route("/auth/logout", post(logout::<S>))
        .route("/auth/me", get(me))
        .route("/users/{name}", get(profile::<S>))
}

#[derive(Deserialize)]
pub struct Credentials {
    username: String,
    password: String,
}

/// A registration: credentials and, when the site admits by invitation
/// only, an invite code.
#[derive(Deserialize)]
pub struct Registration {
    username: String,
    password: String,
    #[serde(default)]
    invite: Option<String>,
}

#[derive(Serialize)]
struct Session {
    token: String,
    user: User,
}

/// Argon2 takes tens of milliseconds: keep it off the async workers.
async fn blocking<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> AppResult<T> {
    tokio::task::spawn_blocking(f).await.map_err(|e| AppError::Internal(e.to_string()))
}

async fn issue_token<S: Store>(state: &AppState<S>, user: User) -> AppResult<Session> {
    let token = new_token();
    state.store.add_token(user.id, token_digest(&token)).await?;
    Ok(Session { token, user })
}

async fn register<S: Store>(
    State(state): State<AppState<S>>,
    ip: ClientIp,
    Json(req): Json<Registration>,
) -> AppResult<Response> {
    let name = Username::parse(&req.username)?;
    let password = Password::parse(&req.password)?;
    let invite = req.invite.filter(|code| !code.is_empty());
    // Refused before the costly hash; the store checks again, in the
    // transaction that creates the account.
    let mode = state.store.site_settings().await?.registration;
    if let Some((code, message)) = mode.refusal(invite.is_some()) {
        return Err(AppError::Rejected(StatusCode::FORBIDDEN, code, message.into()));
    }
    state.limits.check(Action::Register, ip, Who::Nobody)?;
    let hash = blocking(move || hash_password(password.as_str())).await?.map_err(AppError::Internal)?;
    let invite_hash = invite.map(|code| token_digest(&code));
    let user = state.store.register_user(name, hash, invite_hash).await?;
    let session = issue_token(&state, user).await?;
    Ok((StatusCode::CREATED, axum::Json(session)).into_response())
}

async fn login<S: Store>(
    State(state): State<AppState<S>>,
    ip: ClientIp,
    Json(req): Json<Credentials>,
) -> AppResult<Response> {
    if req.username.len() > 64 || req.password.len() > 256 {
        return Err(AppError::BadCredentials);
    }
    // Every attempt counts, before the password is even hashed: brute force
    // stalls at the limit, and a stalled guesser learns nothing.
    state.limits.check(Action::Login, ip, Who::Name(&req.username))?;
    let found = state.store.user_credentials(req.username).await?;
    let (user, hash) = match found {
        Some((user, Some(hash))) => (Some(user), hash),
        // Verify anyway so unknown names take as long as wrong passwords.
        _ => (None, dummy_hash().to_owned()),
    };
    let password = req.password;
    let ok = blocking(move || verify_password(&password, &hash)).await?;
    match (user, ok) {
        (Some(user), true) => Ok(axum::Json(issue_token(&state, user).await?).into_response()),
        _ => Err(AppError::BadCredentials),
    }
}

async fn logout<S: Store>(State(state): State<AppState<S>>, auth: AuthUser) -> AppResult<StatusCode> {
    // Forget the cached token before and after revoking, so no request can
    // re-cache it in between and no cancelled request can leave it cached.
    state.tokens.remove(&auth.digest);
    state.store.revoke_token(auth.digest).await?;
    state.tokens.remove(&auth.digest);
    Ok(StatusCode::NO_CONTENT)
}

async fn me(auth: AuthUser) -> axum::Json<User> {
    axum::Json(auth.user)
}

async fn profile<S: Store>(State(state): State<AppState<S>>, Path(name): Path<String>) -> AppResult<Response> {
    if name.len() > 64 {
        return Err(AppError::not_found("user"));
    }
    Ok(axum::Json(state.store.profile(name).await?).into_response())
}
