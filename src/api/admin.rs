//! Site administration routes: the registration setting, invite codes,
//! site-wide bans and deleting (purging) an account. Site administrators only (`users.is_admin`).

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post};
use serde::{Deserialize, Serialize};

use super::extract::{Json, Path};
use super::moderation::BanList;
use crate::app::AppState;
use crate::app::AuthUser;
use crate::app::moderation::{self, BanRequest};
use crate::app::site;
use crate::app::{AppError, AppResult};
use crate::model::{SiteSettings, Timestamp};
use crate::store::Store;

pub fn router<S: Store>() -> Router<AppState<S>> {
    Router::new()
        .route("/admin/settings", get(get_settings::<S>).put(put_settings::<S>))
        .route("/admin/invites", post(create_invite::<S>))
        .route("/admin/bans", get(list_site_bans::<S>).post(site_ban::<S>))
        .route("/admin/bans/{username}", delete(site_unban::<S>))
        .route("/admin/users/{name}", delete(purge_user::<S>))
}

/// Refuses anyone but a site administrator, before anything else is read.
fn admin_only(auth: &AuthUser) -> AppResult<()> {
    if auth.user.is_admin { Ok(()) } else { Err(AppError::Forbidden("site administrators only".into())) }
}

async fn get_settings<S: Store>(State(state): State<AppState<S>>, auth: AuthUser) -> AppResult<Response> {
    admin_only(&auth)?;
    Ok(axum::Json(state.store.site_settings().await?).into_response())
}

async fn put_settings<S: Store>(
    State(state): State<AppState<S>>,
    auth: AuthUser,
    Json(settings): Json<SiteSettings>,
) -> AppResult<Response> {
    admin_only(&auth)?;
    Ok(axum::Json(site::set_settings(&state, &auth.user, settings).await?).into_response())
}

#[derive(Deserialize)]
pub struct InviteRequest {
    /// Absent or null: the code never expires (it still works only once).
    #[serde(default)]
    expires_in_secs: Option<u64>,
}

#[derive(Serialize)]
struct NewInvite {
    /// Shown only now: the server keeps just its SHA-256.
    code: String,
    created_at: Timestamp,
    expires_at: Option<Timestamp>,
}

async fn create_invite<S: Store>(
    State(state): State<AppState<S>>,
    auth: AuthUser,
    Json(req): Json<InviteRequest>,
) -> AppResult<Response> {
    admin_only(&auth)?;
    let (code, invite) = site::create_invite(&state, &auth.user, req.expires_in_secs).await?;
    let body = NewInvite { code, created_at: invite.created_at, expires_at: invite.expires_at };
    Ok((StatusCode::CREATED, axum::Json(body)).into_response())
}

async fn list_site_bans<S: Store>(State(state): State<AppState<S>>, auth: AuthUser) -> AppResult<Response> {
    admin_only(&auth)?;
    let bans = moderation::bans(&state, &auth.user, None).await?;
    Ok(axum::Json(BanList { bans }).into_response())
}

async fn site_ban<S: Store>(
    State(state): State<AppState<S>>,
    auth: AuthUser,
    Json(req): Json<BanRequest>,
) -> AppResult<Response> {
    admin_only(&auth)?;
    let ban = moderation::ban(&state, &auth.user, None, req).await?;
    Ok((StatusCode::CREATED, axum::Json(ban)).into_response())
}

async fn site_unban<S: Store>(
    State(state): State<AppState<S>>,
    auth: AuthUser,
    Path(user): Path<String>,
) -> AppResult<StatusCode> {
    admin_only(&auth)?;
    moderation::unban(&state, &auth.user, None, user).await?;
    Ok(StatusCode::NO_CONTENT)
}

#[derive(Deserialize)]
pub struct Purge {
    /// `keep_anonymous` or `remove`.
    content: String,
}

async fn purge_user<S: Store>(
    State(state): State<AppState<S>>,
    auth: AuthUser,
    Path(name): Path<String>,
    Json(req): Json<Purge>,
) -> AppResult<StatusCode> {
    admin_only(&auth)?;
    crate::app::deletion::delete_by_admin(&state, &auth.user, name, &req.content).await?;
    Ok(StatusCode::NO_CONTENT)
}
