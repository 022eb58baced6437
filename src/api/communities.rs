//! Community routes: list, show, create (site admins only).

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde::{Deserialize, Serialize};

use super::extract::{Json, Path};
use crate::app::{AppError, AppResult, AppState, AuthUser, communities};
use crate::model::Community;
use crate::store::Store;

pub fn router<S: Store>() -> Router<AppState<S>> {
    Router::new()
        .route("/communities", get(list_communities::<S>).post(create_community::<S>))
        .route("/communities/{name}", get(get_community::<S>))
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
