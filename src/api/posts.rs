//! Post routes: reply to a topic (the benchmark's 1 %), edit, delete, vote.

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{patch, post};
use serde::Deserialize;

use super::extract::{Json, Path};
use super::topics::{VoteRequest, vote};
use crate::app::posts::{Reply, create_post, delete_post, edit_post};
use crate::app::{AppError, AppResult, AppState, AuthUser, ClientIp};
use crate::model::{Body, Post, VoteTarget};
use crate::store::Store;

pub fn router<S: Store>() -> Router<AppState<S>> {
    Router::new()
        .route("/posts/{id}", patch(api_edit_post::<S>).delete(api_delete_post::<S>))
        .route("/posts/{id}/vote", post(vote_post::<S>))
}

/// The benchmark's write route, merged outside the `/api/v1` nest under
/// its full path (as `topics::item_router` is): a nested router rebuilds
/// every request's URI to strip its prefix, and the nest's body-limit
/// layer boxes the routes behind it, for nothing here (`body_limit` gives
/// this route `MAX_BODY_BYTES`, which the router's own limit enforces).
pub fn create_router<S: Store>() -> Router<AppState<S>> {
    Router::new().route("/api/v1/topics/{id}/posts", post(api_create_post::<S>))
}

#[derive(Deserialize)]
pub struct CreatePost {
    body: String,
    parent_id: Option<i64>,
}

async fn api_create_post<S: Store>(
    State(state): State<AppState<S>>,
    auth: AuthUser,
    ip: ClientIp,
    Path(topic_id): Path<i64>,
    Json(req): Json<CreatePost>,
) -> AppResult<Response> {
    let new = Reply { topic_id, parent_id: req.parent_id, body: Body::parse(&req.body)?, remote_id: None };
    let post = create_post(&state, auth.user, ip, new).await?;
    let location = format!("/api/v1/topics/{topic_id}#post-{}", post.id);
    Ok((StatusCode::CREATED, [(header::LOCATION, location)], post_json(&post)?).into_response())
}

/// The new post as a JSON body, serialized into a buffer sized for it
/// first: axum's `Json` starts at 128 bytes and grows by reallocation,
/// three or four times for a post, which carries its text twice (Markdown
/// and HTML); on the benchmark's write route that was ~2 % of the runtime
/// threads' CPU, most of it in malloc.
fn post_json(post: &Post) -> AppResult<Response> {
    let text = post.body.len() + post.body_html.len();
    let mut buf = Vec::with_capacity(256 + text + text / 8);
    serde_json::to_writer(&mut buf, post).map_err(|e| AppError::Internal(format!("cannot serialize a post: {e}")))?;
    Ok(([(header::CONTENT_TYPE, HeaderValue::from_static("application/json"))], buf).into_response())
}

#[derive(Deserialize)]
pub struct EditPost {
    body: String,
}

async fn api_edit_post<S: Store>(
    State(state): State<AppState<S>>,
    auth: AuthUser,
    ip: ClientIp,
    Path(id): Path<i64>,
    Json(req): Json<EditPost>,
) -> AppResult<Response> {
    let body = Body::parse(&req.body)?;
    Ok(axum::Json(edit_post(&state, auth.user, ip, id, body).await?).into_response())
}

async fn api_delete_post<S: Store>(
    State(state): State<AppState<S>>,
    auth: AuthUser,
    Path(id): Path<i64>,
) -> AppResult<StatusCode> {
    delete_post(&state, auth.user, id).await?;
    Ok(StatusCode::NO_CONTENT)
}

async fn vote_post<S: Store>(
    State(state): State<AppState<S>>,
    auth: AuthUser,
    ip: ClientIp,
    Path(id): Path<i64>,
    Json(req): Json<VoteRequest>,
) -> AppResult<Response> {
    vote(&state, auth, ip, VoteTarget::Post(id), req.value).await
}
