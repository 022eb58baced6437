//! Post routes: reply to a topic (the benchmark's 1 %), edit, delete, vote.

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{patch, post};
use serde::Deserialize;

use super::extract::{AuthUser, Json, Path};
use super::limits::{Action, ClientIp, Who};
use super::topics::{VoteRequest, cast_vote};
use super::{AppState, commit};
use crate::error::AppResult;
use crate::model::{Body, Post, User, VoteTarget};
use crate::store::{NewPost, Store};

pub fn router<S: Store>() -> Router<AppState<S>> {
    Router::new()
        .route("/topics/{id}/posts", post(api_create_post::<S>))
        .route("/posts/{id}", patch(api_edit_post::<S>).delete(api_delete_post::<S>))
        .route("/posts/{id}/vote", post(vote_post::<S>))
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
    let new = NewPost { topic_id, parent_id: req.parent_id, body: Body::parse(&req.body)? };
    let post = create_post(&state, auth.user, ip, new).await?;
    let location = format!("/api/v1/topics/{topic_id}#post-{}", post.id);
    Ok((StatusCode::CREATED, [(header::LOCATION, location)], axum::Json(post)).into_response())
}

/// Replies to a topic for the API and the forms alike: the rate limit, the
/// write, the eviction of the topic's renderings and the live event.
pub async fn create_post<S: Store>(state: &AppState<S>, user: User, ip: ClientIp, new: NewPost) -> AppResult<Post> {
    state.limits.check(Action::Post, ip, Who::User(user.id))?;
    let topic_id = new.topic_id;
    commit(state, move |st| async move {
        let post = st.store.create_post(&user, new).await?;
        super::topics::evict(&st, topic_id);
        st.live.post_created(&post);
        Ok(post)
    })
    .await
}

#[derive(Deserialize)]
pub struct EditPost {
    body: String,
}

async fn api_edit_post<S: Store>(
    State(state): State<AppState<S>>,
    auth: AuthUser,
    Path(id): Path<i64>,
    Json(req): Json<EditPost>,
) -> AppResult<Response> {
    let body = Body::parse(&req.body)?;
    Ok(axum::Json(edit_post(&state, auth.user, id, body).await?).into_response())
}

/// Replaces a post's body, evicts its topic's renderings and tells live
/// subscribers.
pub async fn edit_post<S: Store>(state: &AppState<S>, user: User, id: i64, body: Body) -> AppResult<Post> {
    commit(state, move |st| async move {
        let post = st.store.edit_post(&user, id, body).await?;
        super::topics::evict(&st, post.topic_id);
        st.live.post_edited(&post);
        Ok(post)
    })
    .await
}

async fn api_delete_post<S: Store>(
    State(state): State<AppState<S>>,
    auth: AuthUser,
    Path(id): Path<i64>,
) -> AppResult<StatusCode> {
    delete_post(&state, auth.user, id).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Deletes a post (its author, or an admin) and returns its topic's id,
/// after evicting that topic's renderings and telling live subscribers.
pub async fn delete_post<S: Store>(state: &AppState<S>, user: User, id: i64) -> AppResult<i64> {
    commit(state, move |st| async move {
        let topic_id = st.store.delete_post(&user, id).await?;
        super::topics::evict(&st, topic_id);
        st.live.post_removed(topic_id, id);
        Ok(topic_id)
    })
    .await
}

async fn vote_post<S: Store>(
    State(state): State<AppState<S>>,
    auth: AuthUser,
    ip: ClientIp,
    Path(id): Path<i64>,
    Json(req): Json<VoteRequest>,
) -> AppResult<Response> {
    cast_vote(&state, auth, ip, VoteTarget::Post(id), req.value).await
}
