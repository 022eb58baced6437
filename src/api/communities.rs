//! Community routes: list, show, create (site admins only); with
//! federation on, finding a community on another server (`/resolve`) and
//! following it (`/communities/{name}/follow`), docs/FEDERATION.md phase 2.

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde::{Deserialize, Serialize};

use super::extract::{Json, Path};
use crate::app::federation::join;
use crate::app::{AppError, AppResult, AppState, AuthUser, ClientIp, communities};
use crate::model::Community;
use crate::store::Store;

pub fn router<S: Store>() -> Router<AppState<S>> {
    Router::new()
        .route("/communities", get(list_communities::<S>).post(create_community::<S>))
        .route("/communities/{name}", get(get_community::<S>))
        .route("/communities/{name}/follow", get(get_following::<S>).post(follow::<S>).delete(unfollow::<S>))
        .route("/resolve", post(resolve::<S>))
}

#[derive(Deserialize)]
pub struct Resolve {
    /// `!name@host`, `name@host` or the Group's URL.
    q: String,
}

/// Finds a community on another server and keeps it here (fetching its
/// `Group`), or one of ours named with our host.
async fn resolve<S: Store>(
    State(state): State<AppState<S>>,
    auth: AuthUser,
    ip: ClientIp,
    Json(req): Json<Resolve>,
) -> AppResult<Response> {
    let fed = state.federation.required()?;
    let community = join::resolve(&state, &fed, &auth.user, ip, &req.q).await?;
    Ok(axum::Json(community).into_response())
}

#[derive(Serialize)]
struct FollowState {
    following: join::Following,
}

async fn get_following<S: Store>(
    State(state): State<AppState<S>>,
    auth: AuthUser,
    Path(name): Path<String>,
) -> AppResult<Response> {
    state.federation.required()?;
    let community = state.store.community(name).await?;
    let following = join::following(&state, &auth.user, &community).await?;
    Ok(axum::Json(FollowState { following }).into_response())
}

/// Sends a `Follow` to the remote community's Group: `pending` until it
/// accepts. 400 `not_remote` for a community of this server.
async fn follow<S: Store>(
    State(state): State<AppState<S>>,
    auth: AuthUser,
    Path(name): Path<String>,
) -> AppResult<Response> {
    let fed = state.federation.required()?;
    let following = join::follow(&state, &fed, &auth.user, &name).await?;
    Ok((StatusCode::ACCEPTED, axum::Json(FollowState { following })).into_response())
}

async fn unfollow<S: Store>(
    State(state): State<AppState<S>>,
    auth: AuthUser,
    Path(name): Path<String>,
) -> AppResult<Response> {
    let fed = state.federation.required()?;
    join::unfollow(&state, &fed, &auth.user, &name).await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

#[derive(Serialize)]
struct CommunityList {
    communities: Vec<Community>,
}

async fn list_communities<S: Store>(State(state): State<AppState<S>>) -> AppResult<Response> {
    let communities = state.store.list_communities().await?;
    Ok(axum::Json(CommunityList { communities }).into_response())
}

async fn get_community<S: Store>(State(state): State<AppState<S>>, Path(name): Path<String>) -> AppResult<Response> {
    if name.len() > 64 {
        return Err(AppError::not_found("community"));
    }
    Ok(axum::Json(state.store.community(name).await?).into_response())
}

#[derive(Deserialize)]
pub struct CreateCommunity {
    name: String,
    title: String,
    #[serde(default)]
    description: String,
}

async fn create_community<S: Store>(
    State(state): State<AppState<S>>,
    auth: AuthUser,
    Json(req): Json<CreateCommunity>,
) -> AppResult<Response> {
    let community = communities::create_community(&state, &auth.user, &req.name, &req.title, req.description).await?;
    let location = format!("/api/v1/communities/{}", community.name);
    Ok((StatusCode::CREATED, [(header::LOCATION, location)], axum::Json(community)).into_response())
}
