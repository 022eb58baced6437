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
use crate::model::{Body, VoteTarget};
use crate::store::{NewPost, Store};

pub fn router<S: Store>() -> Router<AppState<S>> {
    Router::new()
        .route("/topics/{id}/posts", post(create_post::<S>))
        .route("/posts/{id}", patch(edit_post::<S>).delete(delete_post::<S>))
        .route("/posts/{id}/vote", post(vote_post::<S>))
}

#[derive(Deserialize)]
pub struct CreatePost {
    body: String,
    parent_id: Option<i64>,
}

async fn create_post<S: Store>(
    State(state): State<AppState<S>>,
    auth: AuthUser,
    ip: ClientIp,
    Path(topic_id): Path<i64>,
    Json(req): Json<CreatePost>,
) -> AppResult<Response> {
    let new = NewPost { topic_id, parent_id: req.parent_id, body: Body::parse(&req.body)? };
    state.limits.check(Action::Post, ip, Who::User(auth.user.id))?;
    let post = commit(&state, move |st| async move {
        let post = st.store.create_post(&auth.user, new).await?;
        st.cache.invalidate(topic_id);
        st.live.post_created(&post);
        Ok(post)
    })
    .await?;
    let location = format!("/api/v1/topics/{topic_id}#post-{}", post.id);
    Ok((StatusCode::CREATED, [(header::LOCATION, location)], axum::Json(post)).into_response())
}

#[derive(Deserialize)]
pub struct EditPost {
    body: String,
}

async fn edit_post<S: Store>(
    State(state): State<AppState<S>>,
    auth: AuthUser,
    Path(id): Path<i64>,
    Json(req): Json<EditPost>,
) -> AppResult<Response> {
    let body = Body::parse(&req.body)?;
    let post = commit(&state, move |st| async move {
        let post = st.store.edit_post(&auth.user, id, body).await?;
        st.cache.invalidate(post.topic_id);
        st.live.post_edited(&post);
        Ok(post)
    })
    .await?;
    Ok(axum::Json(post).into_response())
}

async fn delete_post<S: Store>(
    State(state): State<AppState<S>>,
    auth: AuthUser,
    Path(id): Path<i64>,
) -> AppResult<StatusCode> {
    commit(&state, move |st| async move {
        let topic_id = st.store.delete_post(&auth.user, id).await?;
        st.cache.invalidate(topic_id);
        st.live.post_removed(topic_id, id);
        Ok(())
    })
    .await?;
    Ok(StatusCode::NO_CONTENT)
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
