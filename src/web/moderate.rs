//! Moderation in the forum: removing, restoring, locking and unlocking
//! from the topic page, reporting (any signed-in user), the reports queue
//! of a community's moderators, and the public moderation log. Every
//! action goes through the API's own functions, so the store decides who
//! may act (a 403 page otherwise), and caches and live pages follow.

use askama::Template;
use axum::extract::rejection::FormRejection;
use axum::extract::{Form, Path, Query, State};
use axum::http::{StatusCode, Uri};
use axum::response::Response;
use serde::Deserialize;

use super::forms::{accept, authorise, authorise_api, bad_form, id_of, login_first, shown_on_form};
use super::pages::Tab;
use super::topic::read_post;
use super::view::{PostView, Time};
use super::{Ctx, Session, capitalise, error_page, see_other};
use crate::app::AppState;
use crate::app::moderation::{self, ModRequest};
use crate::app::{AppError, AppResult, ClientIp};
use crate::model::{ModAction, ModLogEntry, Report, ReportStatus, VoteTarget};
use crate::store::{ListModLog, ListReports, Store};

/// Entries per page of the queue and the log.
const PAGE: usize = 50;

#[derive(Deserialize)]
pub struct ModForm {
    #[serde(default)]
    csrf: String,
    /// `remove`, `restore`, `lock` or `unlock`.
    #[serde(default)]
    action: String,
    /// Optional; shown in the public log.
    #[serde(default)]
    reason: String,
}

/// `POST /t/{id}/moderate`: remove, restore, lock or unlock a topic.
pub async fn topic<S: Store>(
    State(state): State<AppState<S>>,
    session: Session,
    uri: Uri,
    Path(id): Path<String>,
    form: Result<Form<ModForm>, FormRejection>,
) -> Response {
    let ctx = Ctx::new(&session, &uri);
    let (Ok(id), Ok(Form(form))) = (id_of(&id, "topic"), form) else { return error_page(&ctx, bad_form()) };
    let action = match form.action.as_str() {
        "remove" => ModAction::RemoveTopic(id),
        "restore" => ModAction::RestoreTopic(id),
        "lock" => ModAction::LockTopic(id),
        "unlock" => ModAction::UnlockTopic(id),
        _ => return error_page(&ctx, bad_form()),
    };
    act(&state, &session, &ctx, form, action, format!("/t/{id}")).await
}

/// `POST /t/{id}/p/{post}/moderate`: remove or restore a comment.
pub async fn post<S: Store>(
    State(state): State<AppState<S>>,
    session: Session,
    uri: Uri,
    Path((id, post)): Path<(String, String)>,
    form: Result<Form<ModForm>, FormRejection>,
) -> Response {
    let ctx = Ctx::new(&session, &uri);
    let (Ok(id), Ok(post), Ok(Form(form))) = (id_of(&id, "topic"), id_of(&post, "post"), form) else {
        return error_page(&ctx, bad_form());
    };
    let action = match form.action.as_str() {
        "remove" => ModAction::RemovePost(post),
        "restore" => ModAction::RestorePost(post),
        _ => return error_page(&ctx, bad_form()),
    };
    act(&state, &session, &ctx, form, action, format!("/t/{id}#p{post}")).await
}

/// What `POST /api/v1/{topics,posts}/{id}/{action}` does, through the same
/// function: the store's permission check, the log, eviction, live events.
async fn act<S: Store>(
    state: &AppState<S>,
    session: &Session,
    ctx: &Ctx,
    form: ModForm,
    action: ModAction,
    back: String,
) -> Response {
    let auth = match authorise_api(session, ctx, &form.csrf, &back) {
        Ok(a) => a,
        Err(res) => return *res,
    };
    match moderation::act(state, auth.user, action, ModRequest { reason: Some(form.reason) }).await {
        Ok(_) => see_other(&back),
        Err(e) => error_page(ctx, e),
    }
}

// ---------------------------------------------------------------------------
// Reporting.

#[derive(Template)]
#[template(path = "report.html")]
struct ReportPage {
    ctx: Ctx,
    topic_id: i64,
    title: String,
    community: String,
    /// The comment reported; `None`: the topic.
    post: Option<PostView>,
    reason: String,
    error: Option<String>,
    /// The report was sent (the page after the redirect).
    sent: bool,
}

#[derive(Deserialize)]
pub struct ReportParams {
    post: Option<i64>,
    sent: Option<String>,
}

/// `GET /t/{id}/report?post={post}`: the report form, or its thanks.
pub async fn report_form<S: Store>(
    State(state): State<AppState<S>>,
    session: Session,
    uri: Uri,
    Path(id): Path<String>,
    Query(q): Query<ReportParams>,
) -> Response {
    let ctx = Ctx::new(&session, &uri);
    if ctx.user.is_none() {
        return login_first(&ctx.here);
    }
    let page = report_page(&state, &ctx, &id, q.post, String::new(), None, q.sent.is_some()).await;
    page.unwrap_or_else(|e| error_page(&ctx, e))
}

async fn report_page<S: Store>(
    state: &AppState<S>,
    ctx: &Ctx,
    id: &str,
    post: Option<i64>,
    reason: String,
    error: Option<AppError>,
    sent: bool,
) -> AppResult<Response> {
    let id = id_of(id, "topic")?;
    let (topic, post, _) = read_post(state, id, post, ctx.user.as_ref()).await?;
    let status = error.as_ref().map_or(StatusCode::OK, AppError::status);
    let page = ReportPage {
        ctx: ctx.clone(),
        topic_id: id,
        title: topic.title,
        community: topic.community,
        post: post.map(|(p, _)| PostView::of(&p, None, 0)),
        reason,
        error: error.map(|e| capitalise(&e.to_string())),
        sent,
    };
    Ok(ctx.page(status, &page))
}

#[derive(Deserialize)]
pub struct ReportForm {
    #[serde(default)]
    csrf: String,
    /// Empty: the topic itself.
    #[serde(default)]
    post: String,
    #[serde(default)]
    reason: String,
}

/// `POST /t/{id}/report`: what `POST /api/v1/{topics,posts}/{id}/report`
/// does; then the thanks page.
pub async fn report<S: Store>(
    State(state): State<AppState<S>>,
    session: Session,
    ip: ClientIp,
    uri: Uri,
    Path(id): Path<String>,
    form: Result<Form<ReportForm>, FormRejection>,
) -> Response {
    let ctx = Ctx::new(&session, &uri);
    let (Ok(topic), Ok(Form(form))) = (id_of(&id, "topic"), form) else { return error_page(&ctx, bad_form()) };
    let post = form.post.trim().parse::<i64>().ok();
    let here = match post {
        Some(p) => format!("/t/{topic}/report?post={p}"),
        None => format!("/t/{topic}/report"),
    };
    let user = match authorise(&session, &ctx, &form.csrf, &here) {
        Ok(u) => u,
        Err(res) => return *res,
    };
    let target = post.map_or(VoteTarget::Topic(topic), VoteTarget::Post);
    let sent = async {
        moderation::report(&state, &user, ip, target, &form.reason).await?;
        Ok::<_, AppError>(())
    };
    match sent.await {
        Ok(()) => see_other(&format!("{here}{}sent=1", if post.is_some() { "&" } else { "?" })),
        Err(e) if shown_on_form(&e) => report_page(&state, &ctx, &id, post, form.reason, Some(e), false)
            .await
            .unwrap_or_else(|e| error_page(&ctx, e)),
        Err(e) => error_page(&ctx, e),
    }
}

// ---------------------------------------------------------------------------
// The reports queue.

/// A report as the queue shows it.
pub struct ReportRow {
    pub id: i64,
    /// The reported topic or comment.
    pub href: String,
    pub what: String,
    pub reporter: String,
    pub reason: String,
    pub created: Time,
    pub status: &'static str,
    pub resolved_by: Option<String>,
}

impl ReportRow {
    fn of(r: &Report) -> ReportRow {
        let (href, what) = match r.post_id {
            Some(p) => (format!("/t/{}#p{p}", r.topic_id), format!("comment {p} in topic {}", r.topic_id)),
            None => (format!("/t/{}", r.topic_id), format!("topic {}", r.topic_id)),
        };
        ReportRow {
            id: r.id,
            href,
            what,
            reporter: r.reporter.clone(),
            reason: r.reason.clone(),
            created: Time::of(r.created_at),
            status: r.status.as_str(),
            resolved_by: r.resolved_by.clone(),
        }
    }

    pub fn open(&self) -> bool {
        self.status == "open"
    }
}

#[derive(Template)]
#[template(path = "reports.html")]
struct ReportsPage {
    ctx: Ctx,
    community: String,
    tabs: Vec<Tab>,
    reports: Vec<ReportRow>,
    next: Option<String>,
}

#[derive(Deserialize)]
pub struct QueueParams {
    status: Option<String>,
    after: Option<i64>,
}

/// `GET /c/{name}/reports?status=open|resolved|dismissed|all`: for the
/// community's moderators (the store refuses anyone else: 403).
pub async fn reports<S: Store>(
    State(state): State<AppState<S>>,
    session: Session,
    uri: Uri,
    Path(name): Path<String>,
    Query(q): Query<QueueParams>,
) -> Response {
    let ctx = Ctx::new(&session, &uri);
    let Some(user) = ctx.user.clone() else { return login_first(&ctx.here) };
    let page = async {
        if name.len() > 64 {
            return Err(AppError::not_found("community"));
        }
        let key = q.status.as_deref().unwrap_or("open");
        let status = match key {
            "all" => None,
            s => Some(ReportStatus::parse(s).ok_or_else(|| {
                AppError::BadRequest("invalid_query", "status must be one of open, resolved, dismissed, all".into())
            })?),
        };
        let list = ListReports { community: name.clone(), status, after: q.after, limit: PAGE };
        let found = state.store.reports(&user, list).await?;
        let base = format!("/c/{name}/reports");
        let tabs = ["open", "resolved", "dismissed", "all"]
            .into_iter()
            .map(|s| Tab { href: format!("{base}?status={s}"), label: capitalised(s), current: s == key })
            .collect();
        Ok(ReportsPage {
            ctx: ctx.clone(),
            community: name.clone(),
            tabs,
            reports: found.reports.iter().map(ReportRow::of).collect(),
            next: found.next.map(|n| format!("{base}?status={key}&after={n}")),
        })
    };
    match page.await {
        Ok(page) => ctx.page(StatusCode::OK, &page),
        Err(e) => error_page(&ctx, e),
    }
}

fn capitalised(s: &'static str) -> &'static str {
    match s {
        "open" => "Open",
        "resolved" => "Resolved",
        "dismissed" => "Dismissed",
        _ => "All",
    }
}

#[derive(Deserialize)]
pub struct ResolveForm {
    #[serde(default)]
    pub(super) csrf: String,
    /// `resolved` or `dismissed`.
    #[serde(default)]
    pub(super) status: String,
}

/// `POST /c/{name}/reports/{id}`: resolve or dismiss a report.
pub async fn resolve<S: Store>(
    State(state): State<AppState<S>>,
    session: Session,
    uri: Uri,
    Path((name, id)): Path<(String, String)>,
    form: Result<Form<ResolveForm>, FormRejection>,
) -> Response {
    let back = format!("/c/{name}/reports");
    let (ctx, user, form) = match accept(&session, &uri, form, &back, |f| &f.csrf) {
        Ok(accepted) => accepted,
        Err(res) => return *res,
    };
    let Ok(id) = id_of(&id, "report") else { return error_page(&ctx, bad_form()) };
    match moderation::resolve_report(&state, &user, id, &form.status).await {
        Ok(_) => see_other(&back),
        Err(e) => error_page(&ctx, e),
    }
}

// ---------------------------------------------------------------------------
// The public moderation log.

/// A line of the log as its page shows it.
pub struct LogRow {
    pub created: Time,
    pub community: Option<String>,
    pub actor: String,
    /// "removed a comment", "banned"...
    pub did: &'static str,
    /// The topic or comment acted on: its link.
    pub target: Option<String>,
    pub target_user: Option<String>,
    pub reason: String,
    /// For bans: when it ends; `None` with `is_ban`: permanent.
    pub expires: Option<Time>,
    pub is_ban: bool,
}

impl LogRow {
    fn of(e: &ModLogEntry) -> LogRow {
        let did = match e.action.as_str() {
            "remove_topic" => "removed the topic",
            "restore_topic" => "restored the topic",
            "lock_topic" => "locked the topic",
            "unlock_topic" => "unlocked the topic",
            "remove_post" => "removed a comment",
            "restore_post" => "restored a comment",
            "ban" => "banned",
            "unban" => "lifted the ban of",
            "appoint_moderator" => "appointed as moderator",
            "remove_moderator" => "removed as moderator",
            _ => "acted on",
        };
        let target = match (e.topic_id, e.post_id) {
            (Some(t), Some(p)) => Some(format!("/t/{t}#p{p}")),
            (Some(t), None) => Some(format!("/t/{t}")),
            _ => None,
        };
        LogRow {
            created: Time::of(e.created_at),
            community: e.community.clone(),
            actor: e.actor.clone(),
            did,
            target,
            target_user: e.target_user.clone(),
            reason: e.reason.clone(),
            expires: e.expires_at.map(Time::of),
            is_ban: e.action == "ban",
        }
    }
}

#[derive(Template)]
#[template(path = "modlog.html")]
struct LogPage {
    ctx: Ctx,
    community: Option<String>,
    entries: Vec<LogRow>,
    next: Option<String>,
}

#[derive(Deserialize)]
pub struct LogParams {
    after: Option<i64>,
}

/// `GET /c/{name}/modlog`: a community's moderation log, public.
pub async fn community_log<S: Store>(
    State(state): State<AppState<S>>,
    session: Session,
    uri: Uri,
    Path(name): Path<String>,
    Query(q): Query<LogParams>,
) -> Response {
    log_page(&state, &session, &uri, Some(name), q).await
}

/// `GET /modlog`: the whole site's, site bans included.
pub async fn site_log<S: Store>(
    State(state): State<AppState<S>>,
    session: Session,
    uri: Uri,
    Query(q): Query<LogParams>,
) -> Response {
    log_page(&state, &session, &uri, None, q).await
}

async fn log_page<S: Store>(
    state: &AppState<S>,
    session: &Session,
    uri: &Uri,
    community: Option<String>,
    q: LogParams,
) -> Response {
    let ctx = Ctx::new(session, uri);
    if community.as_ref().is_some_and(|c| c.len() > 64) {
        return error_page(&ctx, AppError::not_found("community"));
    }
    let list = ListModLog { community: community.clone(), after: q.after, limit: PAGE };
    match state.store.mod_log(list).await {
        Ok(found) => {
            let base = community.as_ref().map_or("/modlog".to_owned(), |c| format!("/c/{c}/modlog"));
            let page = LogPage {
                ctx: ctx.clone(),
                community,
                entries: found.entries.iter().map(LogRow::of).collect(),
                next: found.next.map(|n| format!("{base}?after={n}")),
            };
            ctx.page(StatusCode::OK, &page)
        }
        Err(e) => error_page(&ctx, e.into()),
    }
}
