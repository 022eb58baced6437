//! A reader's own things: saving topics and posts (`/topics/{id}/save`,
//! `/posts/{id}/save`, `/saved`) and blocking communities from their front
//! page (`/communities/{name}/block`), blocking users
//! (`/users/{name}/block`), and the list of both (`/me/blocks`). Each
//! write is idempotent and answers 204 whether or not it changed anything.

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde::{Deserialize, Serialize};

use super::extract::{Path, Query};
use crate::app::{AppResult, AppState, AuthUser, ClientIp, saves};
use crate::model::{Blocks, Saved, VoteTarget};
use crate::store::Store;

pub fn router<S: Store>() -> Router<AppState<S>> {
    Router::new()
        .route("/topics/{id}/save", post(save_topic::<S>).delete(unsave_topic::<S>))
        .route("/posts/{id}/save", post(save_post::<S>).delete(unsave_post::<S>))
        .route("/saved", get(list_saved::<S>))
        .route("/communities/{name}/block", post(block::<S>).delete(unblock::<S>))
        .route("/users/{name}/block", post(block_user::<S>).delete(unblock_user::<S>))
        .route("/me/blocks", get(list_blocks::<S>))
}

async fn save<S: Store>(
    state: &AppState<S>,
    auth: AuthUser,
    ip: ClientIp,
    target: VoteTarget,
    on: bool,
) -> AppResult<StatusCode> {
    saves::set_saved(state, &auth.user, ip, target, on).await?;
    Ok(StatusCode::NO_CONTENT)
}

async fn save_topic<S: Store>(
    State(state): State<AppState<S>>,
    auth: AuthUser,
    ip: ClientIp,
    Path(id): Path<i64>,
) -> AppResult<StatusCode> {
    save(&state, auth, ip, VoteTarget::Topic(id), true).await
}

async fn unsave_topic<S: Store>(
    State(state): State<AppState<S>>,
    auth: AuthUser,
    ip: ClientIp,
    Path(id): Path<i64>,
) -> AppResult<StatusCode> {
    save(&state, auth, ip, VoteTarget::Topic(id), false).await
}

async fn save_post<S: Store>(
    State(state): State<AppState<S>>,
    auth: AuthUser,
    ip: ClientIp,
    Path(id): Path<i64>,
) -> AppResult<StatusCode> {
    save(&state, auth, ip, VoteTarget::Post(id), true).await
}

async fn unsave_post<S: Store>(
    State(state): State<AppState<S>>,
    auth: AuthUser,
    ip: ClientIp,
    Path(id): Path<i64>,
) -> AppResult<StatusCode> {
    save(&state, auth, ip, VoteTarget::Post(id), false).await
}

#[derive(Deserialize)]
pub struct SavedQuery {
    after: Option<String>,
}

#[derive(Serialize)]
struct SavedList {
    items: Vec<Saved>,
    /// Pass as `after` to get the next page; null on the last page.
    next: Option<String>,
}

async fn list_saved<S: Store>(
    State(state): State<AppState<S>>,
    auth: AuthUser,
    Query(q): Query<SavedQuery>,
) -> AppResult<Response> {
    let after = saves::parse_cursor(q.after.as_deref())?;
    let (items, next) = saves::saved(&state, &auth.user, after).await?;
    Ok(axum::Json(SavedList { items, next: next.map(|c| c.encode()) }).into_response())
}

async fn block<S: Store>(
    State(state): State<AppState<S>>,
    auth: AuthUser,
    ip: ClientIp,
    Path(name): Path<String>,
) -> AppResult<StatusCode> {
    saves::set_blocked(&state, &auth.user, ip, &name, true).await?;
    Ok(StatusCode::NO_CONTENT)
}

async fn unblock<S: Store>(
    State(state): State<AppState<S>>,
    auth: AuthUser,
    ip: ClientIp,
    Path(name): Path<String>,
) -> AppResult<StatusCode> {
    saves::set_blocked(&state, &auth.user, ip, &name, false).await?;
    Ok(StatusCode::NO_CONTENT)
}

async fn block_user<S: Store>(
    State(state): State<AppState<S>>,
    auth: AuthUser,
    ip: ClientIp,
    Path(name): Path<String>,
) -> AppResult<StatusCode> {
    saves::set_user_blocked(&state, &auth.user, ip, &name, true).await?;
    Ok(StatusCode::NO_CONTENT)
}

async fn unblock_user<S: Store>(
    State(state): State<AppState<S>>,
    auth: AuthUser,
    ip: ClientIp,
    Path(name): Path<String>,
) -> AppResult<StatusCode> {
    saves::set_user_blocked(&state, &auth.user, ip, &name, false).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// The users and communities the user blocked, for clients that collapse
/// and hide on their own: the shared topic JSON is the same for everyone.
async fn list_blocks<S: Store>(State(state): State<AppState<S>>, auth: AuthUser) -> AppResult<axum::Json<Blocks>> {
    Ok(axum::Json(saves::blocks(&state, &auth.user).await?))
}
