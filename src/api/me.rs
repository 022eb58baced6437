//! The signed-in user's own account: changing the password, and the list
//! of their sessions and API tokens with revoking one, or all the others
//! ("sign out everywhere else").

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::{delete, get, post};
use serde::{Deserialize, Serialize};

use super::extract::{Json, Path};
use crate::app::sessions::{self, SessionInfo};
use crate::app::{AppError, AppResult, AppState, AuthUser, ClientIp};
use crate::store::Store;

pub fn router<S: Store>() -> Router<AppState<S>> {
    Router::new()
        .route("/me/password", post(change_password::<S>))
        .route("/me/sessions", get(list_sessions::<S>))
        .route("/me/sessions/revoke-others", post(revoke_others::<S>))
        .route("/me/sessions/{id}", delete(revoke_session::<S>))
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
