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
use crate::model::{Password, RegistrationMode, User, Username};
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
pub async fn blocking<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> AppResult<T> {
    tokio::task::spawn_blocking(f).await.map_err(|e| AppError::Internal(e.to_string()))
}

/// Stores a new bearer token for `user` and returns it; the API hands it
/// out in JSON, the forms in a cookie.
pub async fn issue_token<S: Store>(state: &AppState<S>, user: &User) -> AppResult<String> {
    let token = new_token();
    state.store.add_token(user.id, token_digest(&token)).await?;
    Ok(token)
}

async fn register<S: Store>(
    State(state): State<AppState<S>>,
    ip: ClientIp,
    Json(req): Json<Registration>,
) -> AppResult<Response> {
    let mode = state.store.site_settings().await?.registration;
    let user = create_account(&state, ip, mode, &req.username, &req.password, req.invite).await?;
    let token = issue_token(&state, &user).await?;
    Ok((StatusCode::CREATED, axum::Json(Session { token, user })).into_response())
}

/// Public registration for the API and the form: the name and password
/// rules, the site's registration `mode`, the per-address limit, then the
/// hash (argon2id, off the async workers).
pub async fn create_account<S: Store>(
    state: &AppState<S>,
    ip: ClientIp,
    mode: RegistrationMode,
    username: &str,
    password: &str,
    invite: Option<String>,
) -> AppResult<User> {
    let name = Username::parse(username)?;
    let password = Password::parse(password)?;
    let invite = invite.filter(|code| !code.is_empty());
    // Refused before the costly hash; the store checks again, in the
    // transaction that creates the account.
    if let Some((code, message)) = mode.refusal(invite.is_some()) {
        return Err(AppError::Rejected(StatusCode::FORBIDDEN, code, message.into()));
    }
    state.limits.check(Action::Register, ip, Who::Nobody)?;
    let hash = blocking(move || hash_password(password.as_str())).await?.map_err(AppError::Internal)?;
    let invite_hash = invite.map(|code| token_digest(&code));
    Ok(state.store.register_user(name, hash, invite_hash).await?)
}

async fn login<S: Store>(
    State(state): State<AppState<S>>,
    ip: ClientIp,
    Json(req): Json<Credentials>,
) -> AppResult<Response> {
    let user = check_login(&state, ip, &req.username, req.password).await?;
    let token = issue_token(&state, &user).await?;
    Ok(axum::Json(Session { token, user }).into_response())
}

/// The user `name` when `password` is theirs, for the API and the form.
pub async fn check_login<S: Store>(state: &AppState<S>, ip: ClientIp, name: &str, password: String) -> AppResult<User> {
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
        (Some(user), true) => Ok(user),
        _ => Err(AppError::BadCredentials),
    }
}

async fn logout<S: Store>(State(state): State<AppState<S>>, auth: AuthUser) -> AppResult<StatusCode> {
    revoke_token(&state, auth.digest).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Ends a session, for the API's logout and the form's.
pub async fn revoke_token<S: Store>(state: &AppState<S>, digest: [u8; 32]) -> AppResult<()> {
    // Forget the cached token before and after revoking, so no request can
    // re-cache it in between and no cancelled request can leave it cached.
    state.tokens.remove(&digest);
    state.store.revoke_token(digest).await?;
    state.tokens.remove(&digest);
    Ok(())
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
