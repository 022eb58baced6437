//! Moderation routes: remove, restore, lock and unlock topics and posts;
//! community moderators; community bans; reports; the public moderation
//! log. The operations are `app::moderation`'s; who may do what is
//! `model::policy`'s, over facts the store reads in the transaction that
//! acts (site admins everywhere, moderators in their communities).

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, patch, post, put};
use serde::{Deserialize, Serialize};

use super::extract::{Json, Path, Query};
use crate::app::moderation::{self, BanRequest, ModRequest, check_name};
use crate::app::{AppError, AppResult, AppState, AuthUser, ClientIp};
use crate::model::{Ban, ModAction, ModLogEntry, Report, ReportStatus, User, VoteTarget};
use crate::store::{ListModLog, ListReports, Store};

pub fn router<S: Store>() -> Router<AppState<S>> {
    Router::new()
        .route("/topics/{id}/remove", post(remove_topic::<S>))
        .route("/topics/{id}/restore", post(restore_topic::<S>))
        .route("/topics/{id}/lock", post(lock_topic::<S>))
        .route("/topics/{id}/unlock", post(unlock_topic::<S>))
        .route("/posts/{id}/remove", post(remove_post::<S>))
        .route("/posts/{id}/restore", post(restore_post::<S>))
        .route("/communities/{name}/moderators", get(list_moderators::<S>))
        .route("/communities/{name}/moderators/{username}", put(appoint::<S>).delete(dismiss::<S>))
        .route("/communities/{name}/bans", get(list_bans::<S>).post(ban_user::<S>))
        .route("/communities/{name}/bans/{username}", axum::routing::delete(unban_user::<S>))
        .route("/topics/{id}/report", post(report_topic::<S>))
        .route("/posts/{id}/report", post(report_post::<S>))
        .route("/communities/{name}/reports", get(list_reports::<S>))
        .route("/reports/{id}", patch(resolve_report::<S>))
        .route("/communities/{name}/modlog", get(community_log::<S>))
        .route("/modlog", get(site_log::<S>))
}

// ---------------------------------------------------------------------------
// Remove, restore, lock, unlock.

macro_rules! action_route {
    ($name:ident, $action:ident) => {
        async fn $name<S: Store>(
            State(state): State<AppState<S>>,
            auth: AuthUser,
            Path(id): Path<i64>,
            Json(req): Json<ModRequest>,
        ) -> AppResult<StatusCode> {
            moderation::act(&state, auth.user, ModAction::$action(id), req).await?;
            Ok(StatusCode::NO_CONTENT)
        }
    };
}

action_route!(remove_topic, RemoveTopic);
action_route!(restore_topic, RestoreTopic);
action_route!(lock_topic, LockTopic);
action_route!(unlock_topic, UnlockTopic);
action_route!(remove_post, RemovePost);
action_route!(restore_post, RestorePost);

// ---------------------------------------------------------------------------
// Moderators.

#[derive(Serialize)]
struct ModeratorList {
    moderators: Vec<User>,
}

async fn list_moderators<S: Store>(State(state): State<AppState<S>>, Path(name): Path<String>) -> AppResult<Response> {
    check_name(&name, "community")?;
    let moderators = state.store.moderators(name).await?;
    Ok(axum::Json(ModeratorList { moderators }).into_response())
}

async fn appoint<S: Store>(
    State(state): State<AppState<S>>,
    auth: AuthUser,
    Path((name, user)): Path<(String, String)>,
) -> AppResult<StatusCode> {
    moderation::set_moderator(&state, auth.user, name, user, true).await?;
    Ok(StatusCode::NO_CONTENT)
}

async fn dismiss<S: Store>(
    State(state): State<AppState<S>>,
    auth: AuthUser,
    Path((name, user)): Path<(String, String)>,
) -> AppResult<StatusCode> {
    moderation::set_moderator(&state, auth.user, name, user, false).await?;
    Ok(StatusCode::NO_CONTENT)
}

// ---------------------------------------------------------------------------
// Bans (community bans here; site bans in `admin`, through the same code).

#[derive(Serialize)]
pub struct BanList {
    pub bans: Vec<Ban>,
}

async fn list_bans<S: Store>(
    State(state): State<AppState<S>>,
    auth: AuthUser,
    Path(name): Path<String>,
) -> AppResult<Response> {
    check_name(&name, "community")?;
    let bans = moderation::bans(&state, &auth.user, Some(name)).await?;
    Ok(axum::Json(BanList { bans }).into_response())
}

async fn ban_user<S: Store>(
    State(state): State<AppState<S>>,
    auth: AuthUser,
    Path(name): Path<String>,
    Json(req): Json<BanRequest>,
) -> AppResult<Response> {
    check_name(&name, "community")?;
    let ban = moderation::ban(&state, &auth.user, Some(name), req).await?;
    Ok((StatusCode::CREATED, axum::Json(ban)).into_response())
}

async fn unban_user<S: Store>(
    State(state): State<AppState<S>>,
    auth: AuthUser,
    Path((name, user)): Path<(String, String)>,
) -> AppResult<StatusCode> {
    check_name(&name, "community")?;
    moderation::unban(&state, &auth.user, Some(name), user).await?;
    Ok(StatusCode::NO_CONTENT)
}

// ---------------------------------------------------------------------------
// Reports.

#[derive(Deserialize)]
pub struct ReportRequest {
    reason: String,
}

async fn report<S: Store>(
    state: &AppState<S>,
    auth: AuthUser,
    ip: ClientIp,
    target: VoteTarget,
    req: ReportRequest,
) -> AppResult<Response> {
    let report = moderation::report(state, &auth.user, ip, target, &req.reason).await?;
    Ok((StatusCode::CREATED, axum::Json(report)).into_response())
}

async fn report_topic<S: Store>(
    State(state): State<AppState<S>>,
    auth: AuthUser,
    ip: ClientIp,
    Path(id): Path<i64>,
    Json(req): Json<ReportRequest>,
) -> AppResult<Response> {
    report(&state, auth, ip, VoteTarget::Topic(id), req).await
}

async fn report_post<S: Store>(
    State(state): State<AppState<S>>,
    auth: AuthUser,
    ip: ClientIp,
    Path(id): Path<i64>,
    Json(req): Json<ReportRequest>,
) -> AppResult<Response> {
    report(&state, auth, ip, VoteTarget::Post(id), req).await
}

#[derive(Deserialize)]
pub struct PageQuery {
    status: Option<String>,
    limit: Option<usize>,
    after: Option<i64>,
}

/// Page size: 1-100, 25 by default.
fn limit(q: Option<usize>) -> AppResult<usize> {
    match q.unwrap_or(25) {
        n @ 1..=100 => Ok(n),
        _ => Err(AppError::BadRequest("invalid_query", "limit must be between 1 and 100".into())),
    }
}

#[derive(Serialize)]
struct ReportList {
    reports: Vec<Report>,
    next: Option<i64>,
}

async fn list_reports<S: Store>(
    State(state): State<AppState<S>>,
    auth: AuthUser,
    Path(name): Path<String>,
    Query(q): Query<PageQuery>,
) -> AppResult<Response> {
    check_name(&name, "community")?;
    let status = match q.status.as_deref() {
        None => Some(ReportStatus::Open),
        Some("all") => None,
        Some(s) => Some(ReportStatus::parse(s).ok_or_else(|| {
            AppError::BadRequest("invalid_query", "status must be one of open, resolved, dismissed, all".into())
        })?),
    };
    let q = ListReports { community: name, status, after: q.after, limit: limit(q.limit)? };
    let page = state.store.reports(&auth.user, q).await?;
    Ok(axum::Json(ReportList { reports: page.reports, next: page.next }).into_response())
}

#[derive(Deserialize)]
pub struct ResolveRequest {
    pub(super) status: String,
}

async fn resolve_report<S: Store>(
    State(state): State<AppState<S>>,
    auth: AuthUser,
    Path(id): Path<i64>,
    Json(req): Json<ResolveRequest>,
) -> AppResult<Response> {
    Ok(axum::Json(moderation::resolve_report(&state, &auth.user, id, &req.status).await?).into_response())
}

// ---------------------------------------------------------------------------
// The public moderation log.

#[derive(Serialize)]
struct ModLog {
    entries: Vec<ModLogEntry>,
    next: Option<i64>,
}

#[derive(Deserialize)]
pub struct LogQuery {
    limit: Option<usize>,
    after: Option<i64>,
}

async fn mod_log<S: Store>(state: &AppState<S>, community: Option<String>, q: LogQuery) -> AppResult<Response> {
    let page = state.store.mod_log(ListModLog { community, after: q.after, limit: limit(q.limit)? }).await?;
    // Public and changing: let nobody in between keep a stale copy.
    Ok(([(header::CACHE_CONTROL, "no-cache")], axum::Json(ModLog { entries: page.entries, next: page.next }))
        .into_response())
}

async fn community_log<S: Store>(
    State(state): State<AppState<S>>,
    Path(name): Path<String>,
    Query(q): Query<LogQuery>,
) -> AppResult<Response> {
    check_name(&name, "community")?;
    mod_log(&state, Some(name), q).await
}

async fn site_log<S: Store>(State(state): State<AppState<S>>, Query(q): Query<LogQuery>) -> AppResult<Response> {
    mod_log(&state, None, q).await
}
