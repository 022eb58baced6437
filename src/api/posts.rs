//! Post routes: reply to a topic (the benchmark's 1 %), edit, delete, vote.

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{patch, post};
use serde::Deserialize;

use super::extract::{Json, Path};
use super::topics::{VoteRequest, vote};
use crate::app::posts::{Reply, create_post, delete_post, edit_post};
use crate::app::{AppResult, AppState, AuthUser, ClientIp};
use crate::model::{Body, VoteTarget};
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
    Ok((StatusCode::CREATED, [(header::LOCATION, location)], axum::Json(post)).into_response())
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
