//! Moderation routes: remove, restore, lock and unlock topics and posts;
//! community moderators; community bans; reports; the public moderation
//! log. Who may do what is decided by the store, in the transaction that
//! acts (site admins everywhere, moderators in their communities).

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, patch, post, put};
use serde::{Deserialize, Serialize};

use super::extract::{AuthUser, Json, Path, Query};
use super::{AppState, commit};
use crate::error::{AppError, AppResult};
use crate::model::{Ban, ModAction, ModLogEntry, Reason, Report, ReportStatus, Timestamp, User, Username, VoteTarget};
use crate::store::{ListModLog, ListReports, NewBan, Store};

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

/// Names in paths longer than this name nothing (community names are at
/// most 21 characters, usernames 20), so they are not worth a query.
const MAX_NAME: usize = 64;

fn check_name(name: &str, what: &str) -> AppResult<()> {
    if name.len() > MAX_NAME { Err(AppError::not_found(what)) } else { Ok(()) }
}

// ---------------------------------------------------------------------------
// Remove, restore, lock, unlock.

#[derive(Deserialize)]
pub struct ModRequest {
    /// Optional; shown in the public moderation log.
    #[serde(default)]
    pub reason: Option<String>,
}

/// Runs a moderator's action, then evicts the topic's renderings and tells
/// live subscribers, only when something changed.
pub async fn act<S: Store>(
    state: &AppState<S>,
    auth: AuthUser,
    action: ModAction,
    req: ModRequest,
) -> AppResult<StatusCode> {
    let reason = Reason::parse(req.reason.as_deref().unwrap_or(""), false)?;
    commit(state, move |st| async move {
        let done = st.store.moderate(&auth.user, action, reason).await?;
        if done.changed {
            super::topics::evict(&st, done.topic_id);
            match (action, &done.post) {
                (ModAction::RemovePost(id), _) => st.live.post_removed(done.topic_id, id),
                // The live protocol has no "restored": the post comes back
                // as an edit carrying its body, unless its topic is hidden.
                (ModAction::RestorePost(_), Some(post)) if !done.topic_removed && !post.deleted => {
                    st.live.post_edited(post)
                }
                _ => {}
            }
        }
        Ok(())
    })
    .await?;
    Ok(StatusCode::NO_CONTENT)
}

macro_rules! action_route {
    ($name:ident, $action:ident) => {
        async fn $name<S: Store>(
            State(state): State<AppState<S>>,
            auth: AuthUser,
            Path(id): Path<i64>,
            Json(req): Json<ModRequest>,
        ) -> AppResult<StatusCode> {
            act(&state, auth, ModAction::$action(id), req).await
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

async fn set_moderator<S: Store>(
    state: &AppState<S>,
    auth: AuthUser,
    name: String,
    user: String,
    appoint: bool,
) -> AppResult<StatusCode> {
    check_name(&name, "community")?;
    check_name(&user, "user")?;
    // Gives the administrator-only answer before any lookup.
    if !auth.user.is_admin {
        return Err(AppError::Forbidden("only site administrators may appoint or remove moderators".into()));
    }
    state.store.set_moderator(&auth.user, name, user, appoint).await?;
    Ok(StatusCode::NO_CONTENT)
}

async fn appoint<S: Store>(
    State(state): State<AppState<S>>,
    auth: AuthUser,
    Path((name, user)): Path<(String, String)>,
) -> AppResult<StatusCode> {
    set_moderator(&state, auth, name, user, true).await
}

async fn dismiss<S: Store>(
    State(state): State<AppState<S>>,
    auth: AuthUser,
    Path((name, user)): Path<(String, String)>,
) -> AppResult<StatusCode> {
    set_moderator(&state, auth, name, user, false).await
}

// ---------------------------------------------------------------------------
// Bans (community bans here; site bans in `admin`, through the same code).

#[derive(Deserialize)]
pub struct BanRequest {
    pub username: String,
    #[serde(default)]
    pub reason: Option<String>,
    /// Absent or null: permanent.
    #[serde(default)]
    pub duration_secs: Option<u64>,
}

/// Longest temporary ban: ten years (longer is what permanent is for).
pub const MAX_BAN_SECS: u64 = 10 * 366 * 86_400;

#[derive(Serialize)]
pub struct BanList {
    bans: Vec<Ban>,
}

/// Bans a user from `community` (`None`: the site).
pub async fn ban<S: Store>(
    state: &AppState<S>,
    auth: AuthUser,
    community: Option<String>,
    req: BanRequest,
) -> AppResult<Response> {
    let username = Username::parse(&req.username)?.into_inner();
    let reason = Reason::parse(req.reason.as_deref().unwrap_or(""), false)?;
    let expires_at = match req.duration_secs {
        None => None,
        Some(secs) if (1..=MAX_BAN_SECS).contains(&secs) => Some(Timestamp(Timestamp::now().0 + secs as i64)),
        Some(_) => return Err(AppError::Validation(format!("duration_secs must be between 1 and {MAX_BAN_SECS}"))),
    };
    let ban = state.store.ban(&auth.user, NewBan { community, username, reason, expires_at }).await?;
    Ok((StatusCode::CREATED, axum::Json(ban)).into_response())
}

pub async fn bans<S: Store>(state: &AppState<S>, auth: AuthUser, community: Option<String>) -> AppResult<Response> {
    let bans = state.store.bans(&auth.user, community).await?;
    Ok(axum::Json(BanList { bans }).into_response())
}

pub async fn unban<S: Store>(
    state: &AppState<S>,
    auth: AuthUser,
    community: Option<String>,
    user: String,
) -> AppResult<StatusCode> {
    check_name(&user, "user")?;
    state.store.unban(&auth.user, community, user).await?;
    Ok(StatusCode::NO_CONTENT)
}

async fn list_bans<S: Store>(
    State(state): State<AppState<S>>,
    auth: AuthUser,
    Path(name): Path<String>,
) -> AppResult<Response> {
    check_name(&name, "community")?;
    bans(&state, auth, Some(name)).await
}

async fn ban_user<S: Store>(
    State(state): State<AppState<S>>,
    auth: AuthUser,
    Path(name): Path<String>,
    Json(req): Json<BanRequest>,
) -> AppResult<Response> {
    check_name(&name, "community")?;
    ban(&state, auth, Some(name), req).await
}

async fn unban_user<S: Store>(
    State(state): State<AppState<S>>,
    auth: AuthUser,
    Path((name, user)): Path<(String, String)>,
) -> AppResult<StatusCode> {
    check_name(&name, "community")?;
    unban(&state, auth, Some(name), user).await
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
    target: VoteTarget,
    req: ReportRequest,
) -> AppResult<Response> {
    let reason = Reason::parse(&req.reason, true)?;
    let report = state.store.report(&auth.user, target, reason).await?;
    Ok((StatusCode::CREATED, axum::Json(report)).into_response())
}

async fn report_topic<S: Store>(
    State(state): State<AppState<S>>,
    auth: AuthUser,
    Path(id): Path<i64>,
    Json(req): Json<ReportRequest>,
) -> AppResult<Response> {
    report(&state, auth, VoteTarget::Topic(id), req).await
}

async fn report_post<S: Store>(
    State(state): State<AppState<S>>,
    auth: AuthUser,
    Path(id): Path<i64>,
    Json(req): Json<ReportRequest>,
) -> AppResult<Response> {
    report(&state, auth, VoteTarget::Post(id), req).await
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
    status: String,
}

async fn resolve_report<S: Store>(
    State(state): State<AppState<S>>,
    auth: AuthUser,
    Path(id): Path<i64>,
    Json(req): Json<ResolveRequest>,
) -> AppResult<Response> {
    let status = match ReportStatus::parse(&req.status) {
        Some(s @ (ReportStatus::Resolved | ReportStatus::Dismissed)) => s,
        _ => return Err(AppError::Validation("status must be resolved or dismissed".into())),
    };
    Ok(axum::Json(state.store.resolve_report(&auth.user, id, status).await?).into_response())
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
