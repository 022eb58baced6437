//! Picture routes: upload one (`POST /media`, multipart/form-data with the
//! field `file`, a bearer token), and the administrators' view of what is
//! stored. The pages upload through `web::media` with their session and
//! CSRF token; `/media/{name}` itself is served there too.

use axum::Router;
use axum::extract::{DefaultBodyLimit, FromRequest, Multipart, Request, State};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde::Serialize;

use crate::app::media::{
    self, check_length, check_rate, declared_length, not_multipart, read_file, upload, upload_slot,
};
use crate::app::{AppError, AppResult, AppState, AuthUser, ClientIp};
use crate::model::media::MediaUsage;
use crate::store::Store;

pub fn router<S: Store>() -> Router<AppState<S>> {
    Router::new()
        // The body is counted as it streams (`app::media::read_file`),
        // against --media-max-bytes, not the JSON routes' limit.
        .route("/media", post(api_upload::<S>).layer(DefaultBodyLimit::disable()))
        .route("/admin/media", get(admin_usage::<S>))
}

async fn api_upload<S: Store>(
    State(state): State<AppState<S>>,
    auth: AuthUser,
    ip: ClientIp,
    req: Request,
) -> AppResult<Response> {
    check_rate(&state, &auth.user, ip)?;
    let declared = declared_length(req.headers());
    check_length(&state, declared)?;
    let form = Multipart::from_request(req, &state).await.map_err(|rej| not_multipart(rej.body_text()))?;
    let _slot = upload_slot(&state).await?;
    let file = read_file(&state, form, declared).await?;
    let uploaded = upload(&state, auth.user, file.bytes).await?;
    Ok(uploaded.created())
}

#[derive(Serialize)]
struct Usage {
    /// Every picture stored, and their bytes (thumbnails included).
    stored: MediaUsage,
    /// `--media-quota-total-mb` in bytes; 0: no limit.
    quota_total_bytes: u64,
    /// `--media-quota-user-mb` in bytes; 0: no limit.
    quota_user_bytes: u64,
}

async fn admin_usage<S: Store>(State(state): State<AppState<S>>, auth: AuthUser) -> AppResult<Response> {
    if !auth.user.is_admin {
        return Err(AppError::Forbidden("site administrators only".into()));
    }
    let stored = media::usage(&state, None).await?;
    let (quota_total_bytes, quota_user_bytes) =
        state.media.get().map_or((0, 0), |p| (p.quota.total_bytes, p.quota.user_bytes));
    Ok(axum::Json(Usage { stored, quota_total_bytes, quota_user_bytes }).into_response())
}
