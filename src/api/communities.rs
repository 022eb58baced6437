//! Community routes: list, show, create (site admins only).

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde::{Deserialize, Serialize};

use super::extract::{Json, Path};
use crate::app::AppState;
use crate::app::AuthUser;
use crate::app::{AppError, AppResult};
use crate::model::{Community, CommunityName, Title};
use crate::store::{NewCommunity, Store};

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

/// Longest community description, in characters.
const MAX_DESCRIPTION: usize = 10_000;

async fn create_community<S: Store>(
    State(state): State<AppState<S>>,
    auth: AuthUser,
    Json(req): Json<CreateCommunity>,
) -> AppResult<Response> {
    if !auth.user.is_admin {
        return Err(AppError::Forbidden("only site administrators may create communities".into()));
    }
    if req.description.chars().count() > MAX_DESCRIPTION {
        return Err(AppError::Validation(format!("description must be at most {MAX_DESCRIPTION} characters")));
    }
    let new = NewCommunity {
        name: CommunityName::parse(&req.name)?,
        title: Title::parse(&req.title)?,
        description: req.description,
    };
    let community = state.store.create_community(&auth.user, new).await?;
    let location = format!("/api/v1/communities/{}", community.name);
    Ok((StatusCode::CREATED, [(header::LOCATION, location)], axum::Json(community)).into_response())
}
