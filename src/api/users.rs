//! Account routes: register, log in, log out, who am I, and profiles.

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde::{Deserialize, Serialize};

use super::extract::{Json, Path};
use crate::app::accounts::{check_login, create_account, issue_token, revoke_token};
use crate::app::sessions::UserAgent;
use crate::app::{AppError, AppResult, AppState, AuthUser, ClientIp};
use crate::model::{TokenKind, User};
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
    /// With two-factor login on: a code from the app, or a recovery code.
    #[serde(default)]
    totp: Option<String>,
}

/// A registration: credentials and, when the site admits by invitation
/// only, an invite code.
#[derive(Deserialize)]
pub struct Registration {
    username: String,
    password: String,
    #[serde(default)]
    invite: Option<String>,
    /// Required under `--require-email`; verified by a mailed link.
    #[serde(default)]
    email: Option<String>,
}

#[derive(Serialize)]
struct Session {
    token: String,
    user: User,
}

async fn register<S: Store>(
    State(state): State<AppState<S>>,
    ip: ClientIp,
    UserAgent(ua): UserAgent,
    Json(req): Json<Registration>,
) -> AppResult<Response> {
    let mode = state.store.site_settings().await?.registration;
    let user = create_account(&state, ip, mode, &req.username, &req.password, req.invite, req.email.as_deref()).await?;
    if state.mail.require_email() {
        // Held until the mailed link is followed: no session yet.
        let body = serde_json::json!({ "user": user, "email_verification": "sent" });
        return Ok((StatusCode::ACCEPTED, axum::Json(body)).into_response());
    }
    let token = issue_token(&state, &user, TokenKind::Api, &ua).await?;
    Ok((StatusCode::CREATED, axum::Json(Session { token, user })).into_response())
}

async fn login<S: Store>(
    State(state): State<AppState<S>>,
    ip: ClientIp,
    UserAgent(ua): UserAgent,
    Json(req): Json<Credentials>,
) -> AppResult<Response> {
    let user = check_login(&state, ip, &req.username, req.password, req.totp.as_deref()).await?;
    let token = issue_token(&state, &user, TokenKind::Api, &ua).await?;
    Ok(axum::Json(Session { token, user }).into_response())
}

async fn logout<S: Store>(State(state): State<AppState<S>>, auth: AuthUser) -> AppResult<StatusCode> {
    revoke_token(&state, auth.user.id, auth.digest).await?;
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
