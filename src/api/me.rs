//! The signed-in user's own account: changing the password, the list of
//! their sessions and API tokens with revoking one, or all the others
//! ("sign out everywhere else"); their data's export, deleting the
//! account, and two-factor login.

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::{delete, get, post};
use serde::{Deserialize, Serialize};

use super::extract::{Json, Path};
use crate::app::sessions::{self, SessionInfo};
use crate::app::{AppError, AppResult, AppState, AuthUser, ClientIp};
use crate::app::{deletion, export as exporting, two_factor};
use crate::store::Store;

pub fn router<S: Store>() -> Router<AppState<S>> {
    Router::new()
        .route("/me/password", post(change_password::<S>))
        .route("/me/sessions", get(list_sessions::<S>))
        .route("/me/sessions/revoke-others", post(revoke_others::<S>))
        .route("/me/sessions/{id}", delete(revoke_session::<S>))
        .route("/me", delete(delete_account::<S>))
        .route("/me/export", get(export::<S>))
        .route("/me/two-factor", get(two_factor_state::<S>).post(two_factor_start::<S>))
        .route("/me/two-factor/confirm", post(two_factor_confirm::<S>))
        .route("/me/two-factor/disable", post(two_factor_disable::<S>))
}

#[derive(Deserialize)]
pub struct PasswordChange {
    current: String,
    new: String,
}

/// How many sessions and tokens a request revoked.
#[derive(Serialize)]
struct Revoked {
    revoked: usize,
}

#[derive(Serialize)]
struct Sessions {
    sessions: Vec<SessionInfo>,
}

async fn change_password<S: Store>(
    State(state): State<AppState<S>>,
    ip: ClientIp,
    auth: AuthUser,
    Json(req): Json<PasswordChange>,
) -> AppResult<axum::Json<Revoked>> {
    let revoked = sessions::change_password(&state, ip, &auth, req.current, &req.new).await?;
    Ok(axum::Json(Revoked { revoked }))
}

async fn list_sessions<S: Store>(State(state): State<AppState<S>>, auth: AuthUser) -> AppResult<axum::Json<Sessions>> {
    Ok(axum::Json(Sessions { sessions: sessions::list(&state, &auth).await? }))
}

async fn revoke_session<S: Store>(
    State(state): State<AppState<S>>,
    auth: AuthUser,
    Path(id): Path<String>,
) -> AppResult<StatusCode> {
    if id.len() > 64 {
        return Err(AppError::not_found("session"));
    }
    sessions::revoke(&state, &auth, &id).await?;
    Ok(StatusCode::NO_CONTENT)
}

async fn revoke_others<S: Store>(State(state): State<AppState<S>>, auth: AuthUser) -> AppResult<axum::Json<Revoked>> {
    Ok(axum::Json(Revoked { revoked: sessions::revoke_others(&state, &auth).await? }))
}

#[derive(Deserialize)]
pub struct Deletion {
    password: String,
    /// With two-factor login on: a code from the app, or a recovery code.
    #[serde(default)]
    code: Option<String>,
    /// `keep_anonymous` or `remove`.
    content: String,
}

async fn delete_account<S: Store>(
    State(state): State<AppState<S>>,
    ip: ClientIp,
    auth: AuthUser,
    Json(req): Json<Deletion>,
) -> AppResult<StatusCode> {
    deletion::delete_own(&state, ip, &auth, req.password, req.code.as_deref(), &req.content).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// The account's data as one JSON document, streamed (`app::export`).
async fn export<S: Store>(State(state): State<AppState<S>>, auth: AuthUser) -> axum::response::Response {
    exporting::download(state, auth)
}

#[derive(Serialize)]
struct TwoFactorState {
    enabled: bool,
    recovery_codes_left: i64,
}

async fn two_factor_state<S: Store>(
    State(state): State<AppState<S>>,
    auth: AuthUser,
) -> AppResult<axum::Json<TwoFactorState>> {
    let tf = state.store.two_factor(auth.user.id).await?;
    Ok(axum::Json(TwoFactorState { enabled: tf.secret.is_some(), recovery_codes_left: tf.recovery_left }))
}

async fn two_factor_start<S: Store>(
    State(state): State<AppState<S>>,
    auth: AuthUser,
) -> AppResult<axum::Json<two_factor::Enrolment>> {
    Ok(axum::Json(two_factor::start(&state, &auth).await?))
}

#[derive(Deserialize)]
pub struct Code {
    code: String,
}

#[derive(Serialize)]
struct RecoveryCodes {
    recovery_codes: Vec<String>,
}

async fn two_factor_confirm<S: Store>(
    State(state): State<AppState<S>>,
    auth: AuthUser,
    Json(req): Json<Code>,
) -> AppResult<axum::Json<RecoveryCodes>> {
    Ok(axum::Json(RecoveryCodes { recovery_codes: two_factor::confirm(&state, &auth, &req.code).await? }))
}

#[derive(Deserialize)]
pub struct Disable {
    password: String,
    code: String,
}

async fn two_factor_disable<S: Store>(
    State(state): State<AppState<S>>,
    ip: ClientIp,
    auth: AuthUser,
    Json(req): Json<Disable>,
) -> AppResult<StatusCode> {
    two_factor::disable(&state, ip, &auth, req.password, &req.code).await?;
    Ok(StatusCode::NO_CONTENT)
}
