//! Email routes: following a verification link, asking for a password
//! reset by mail and using its link, and the signed-in user's address and
//! digest setting.

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::{get, post, put};
use serde::{Deserialize, Serialize};
use serde_json::json;

use super::extract::Json;
use crate::app::email;
use crate::app::{AppResult, AppState, AuthUser, ClientIp};
use crate::model::User;
use crate::model::mail::EmailSettings;
use crate::store::Store;

pub fn router<S: Store>() -> Router<AppState<S>> {
    Router::new()
        .route("/auth/verify-email", post(verify::<S>))
        .route("/auth/password-reset", post(request_reset::<S>))
        .route("/auth/password-reset/confirm", post(confirm_reset::<S>))
        .route("/me/email", get(settings::<S>).put(set_email::<S>))
        .route("/me/email/digest", put(set_digest::<S>))
}

#[derive(Deserialize)]
pub struct TokenBody {
    token: String,
}

#[derive(Deserialize)]
pub struct ResetRequest {
    email: String,
}

#[derive(Deserialize)]
pub struct ResetConfirm {
    token: String,
    password: String,
}

#[derive(Deserialize)]
pub struct EmailChange {
    email: String,
    password: String,
}

#[derive(Deserialize)]
pub struct DigestChange {
    digest: bool,
}

#[derive(Serialize)]
struct Verified {
    user: User,
}

async fn verify<S: Store>(
    State(state): State<AppState<S>>,
    Json(req): Json<TokenBody>,
) -> AppResult<axum::Json<Verified>> {
    Ok(axum::Json(Verified { user: email::verify(&state, &req.token).await? }))
}

/// 202 whether or not an account has the address.
async fn request_reset<S: Store>(
    State(state): State<AppState<S>>,
    ip: ClientIp,
    Json(req): Json<ResetRequest>,
) -> AppResult<(StatusCode, axum::Json<serde_json::Value>)> {
    email::request_reset(&state, ip, &req.email).await?;
    let message = "if an account has this address, a reset link is on its way";
    Ok((StatusCode::ACCEPTED, axum::Json(json!({ "message": message }))))
}

async fn confirm_reset<S: Store>(
    State(state): State<AppState<S>>,
    ip: ClientIp,
    Json(req): Json<ResetConfirm>,
) -> AppResult<StatusCode> {
    email::confirm_reset(&state, ip, &req.token, &req.password).await?;
    Ok(StatusCode::NO_CONTENT)
}

async fn settings<S: Store>(State(state): State<AppState<S>>, auth: AuthUser) -> AppResult<axum::Json<EmailSettings>> {
    Ok(axum::Json(state.store.email_settings(auth.user.id).await?))
}

/// 202: the address is pending until its mailed link is followed.
async fn set_email<S: Store>(
    State(state): State<AppState<S>>,
    ip: ClientIp,
    auth: AuthUser,
    Json(req): Json<EmailChange>,
) -> AppResult<(StatusCode, axum::Json<EmailSettings>)> {
    let settings = email::set_email(&state, ip, &auth, &req.email, req.password).await?;
    Ok((StatusCode::ACCEPTED, axum::Json(settings)))
}

async fn set_digest<S: Store>(
    State(state): State<AppState<S>>,
    auth: AuthUser,
    Json(req): Json<DigestChange>,
) -> AppResult<axum::Json<EmailSettings>> {
    Ok(axum::Json(email::set_digest(&state, &auth, req.digest).await?))
}
