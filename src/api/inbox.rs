//! The signed-in user's inbox: `GET /inbox` (a page of notifications,
//! newest first, with the unread count) and `POST /inbox/read` (marks
//! notifications read).

use axum::Router;
use axum::extract::State;
use axum::routing::{get, post};
use serde::Serialize;

use super::extract::{Json, Query};
use crate::app::inbox::{self, InboxQuery, MarkRequest};
use crate::app::{AppResult, AppState, AuthUser};
use crate::model::InboxPage;
use crate::store::Store;

pub fn router<S: Store>() -> Router<AppState<S>> {
    Router::new().route("/inbox", get(list::<S>)).route("/inbox/read", post(mark_read::<S>))
}

#[derive(Serialize)]
struct Unread {
    unread: i64,
}

async fn list<S: Store>(
    State(state): State<AppState<S>>,
    auth: AuthUser,
    Query(q): Query<InboxQuery>,
) -> AppResult<axum::Json<InboxPage>> {
    Ok(axum::Json(inbox::list(&state, &auth.user, q).await?))
}

async fn mark_read<S: Store>(
    State(state): State<AppState<S>>,
    auth: AuthUser,
    Json(req): Json<MarkRequest>,
) -> AppResult<axum::Json<Unread>> {
    let mark = req.parse()?;
    Ok(axum::Json(Unread { unread: inbox::mark_read(&state, &auth.user, mark).await? }))
}
