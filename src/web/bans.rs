//! Bans: a community's (its moderators, at `/c/{name}/bans`) and the
//! site's (administrators, on `/admin`), each with a reason and an
//! optional duration, through the API's own `ban` and `unban`.

use askama::Template;
use axum::extract::rejection::FormRejection;
use axum::extract::{Form, Path, Query, State};
use axum::http::{StatusCode, Uri};
use axum::response::Response;
use serde::Deserialize;

use super::forms::{accept, login_first};
use super::view::Time;
use super::{Ctx, Session, capitalise, error_page, see_other};
use crate::app::AppState;
use crate::app::moderation::{self, BanRequest};
use crate::app::{AppError, AppResult};
use crate::model::Ban;
use crate::store::Store;

/// A ban in force, as a list shows it.
pub struct BanRow {
    pub user: String,
    pub reason: String,
    pub banned_by: String,
    pub created: Time,
    /// `None`: permanent.
    pub expires: Option<Time>,
}

impl BanRow {
    pub fn of(b: &Ban) -> BanRow {
        BanRow {
            user: b.user.clone(),
            reason: b.reason.clone(),
            banned_by: b.banned_by.clone(),
            created: Time::of(b.created_at),
            expires: b.expires_at.map(Time::of),
        }
    }
}

/// The ban form's durations, in seconds ("" is permanent).
pub const DURATIONS: [(&str, &str); 5] =
    [("86400", "1 day"), ("604800", "1 week"), ("2592000", "30 days"), ("31536000", "1 year"), ("", "Permanent")];

#[derive(Template)]
#[template(path = "bans.html")]
struct BansPage {
    ctx: Ctx,
    community: String,
    bans: Vec<BanRow>,
    /// What the form shows (a name to ban, from `?user=`, or what was sent).
    ban_user: String,
    ban_reason: String,
    ban_error: Option<String>,
    durations: [(&'static str, &'static str); 5],
    ban_action: String,
    unban_action: String,
}

#[derive(Deserialize)]
pub struct BanParams {
    #[serde(default)]
    user: String,
}

/// `GET /c/{name}/bans?user=NAME`: the community's bans and the ban form;
/// its moderators only (the store refuses anyone else: 403).
pub async fn community<S: Store>(
    State(state): State<AppState<S>>,
    session: Session,
    uri: Uri,
    Path(name): Path<String>,
    Query(q): Query<BanParams>,
) -> Response {
    let ctx = Ctx::new(&session, &uri);
    if ctx.user.is_none() {
        return login_first(&ctx.here);
    }
    bans_page(&state, &ctx, &name, q.user, String::new(), None).await.unwrap_or_else(|e| error_page(&ctx, e))
}

async fn bans_page<S: Store>(
    state: &AppState<S>,
    ctx: &Ctx,
    name: &str,
    user: String,
    reason: String,
    error: Option<AppError>,
) -> AppResult<Response> {
    let viewer = ctx.user.as_ref().ok_or(AppError::Unauthorized)?;
    if name.len() > 64 {
        return Err(AppError::not_found("community"));
    }
    let bans = state.store.bans(viewer, Some(name.to_owned())).await?;
    let status = error.as_ref().map_or(StatusCode::OK, AppError::status);
    let page = BansPage {
        ctx: ctx.clone(),
        community: name.to_owned(),
        bans: bans.iter().map(BanRow::of).collect(),
        ban_user: user,
        ban_reason: reason,
        ban_error: error.map(|e| capitalise(&e.to_string())),
        durations: DURATIONS,
        ban_action: format!("/c/{name}/bans"),
        unban_action: format!("/c/{name}/unban"),
    };
    Ok(ctx.page(status, &page))
}

#[derive(Deserialize)]
pub struct BanForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    username: String,
    #[serde(default)]
    reason: String,
    /// Seconds; empty: permanent.
    #[serde(default)]
    duration: String,
}

impl BanForm {
    fn request(&self) -> AppResult<BanRequest> {
        let duration_secs = match self.duration.trim() {
            "" => None,
            d => Some(d.parse().map_err(|_| AppError::Validation("choose how long the ban lasts".into()))?),
        };
        Ok(BanRequest { username: self.username.trim().to_owned(), reason: Some(self.reason.clone()), duration_secs })
    }
}

/// Errors the ban form shows next to itself (a mistyped name, say);
/// a refusal gets the 403 page.
fn shown_on_ban_form(e: &AppError) -> bool {
    matches!(e, AppError::Validation(_) | AppError::NotFound(_) | AppError::Conflict(_) | AppError::Rejected(..))
}

/// `POST /c/{name}/bans`.
pub async fn ban_in_community<S: Store>(
    State(state): State<AppState<S>>,
    session: Session,
    uri: Uri,
    Path(name): Path<String>,
    form: Result<Form<BanForm>, FormRejection>,
) -> Response {
    let back = format!("/c/{name}/bans");
    let (ctx, user, form) = match accept(&session, &uri, form, &back, |f| &f.csrf) {
        Ok(accepted) => accepted,
        Err(res) => return *res,
    };
    let done = async { moderation::ban(&state, &user, Some(name.clone()), form.request()?).await };
    match done.await {
        Ok(_) => see_other(&back),
        Err(e) if shown_on_ban_form(&e) => bans_page(&state, &ctx, &name, form.username, form.reason, Some(e))
            .await
            .unwrap_or_else(|e| error_page(&ctx, e)),
        Err(e) => error_page(&ctx, e),
    }
}

#[derive(Deserialize)]
pub struct UnbanForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    username: String,
}

/// `POST /c/{name}/unban`.
pub async fn unban_in_community<S: Store>(
    State(state): State<AppState<S>>,
    session: Session,
    uri: Uri,
    Path(name): Path<String>,
    form: Result<Form<UnbanForm>, FormRejection>,
) -> Response {
    let back = format!("/c/{name}/bans");
    unban(state, session, uri, Some(name), form, &back).await
}

async fn unban<S: Store>(
    state: AppState<S>,
    session: Session,
    uri: Uri,
    community: Option<String>,
    form: Result<Form<UnbanForm>, FormRejection>,
    back: &str,
) -> Response {
    let (ctx, user, form) = match accept(&session, &uri, form, back, |f| &f.csrf) {
        Ok(accepted) => accepted,
        Err(res) => return *res,
    };
    match moderation::unban(&state, &user, community, form.username.trim().to_owned()).await {
        Ok(_) => see_other(back),
        Err(e) => error_page(&ctx, e),
    }
}

/// `POST /admin/bans`: a site-wide ban (the store allows administrators only).
pub async fn ban_site<S: Store>(
    State(state): State<AppState<S>>,
    session: Session,
    uri: Uri,
    form: Result<Form<BanForm>, FormRejection>,
) -> Response {
    let (ctx, user, form) = match accept(&session, &uri, form, "/admin", |f| &f.csrf) {
        Ok(accepted) => accepted,
        Err(res) => return *res,
    };
    let done = async { moderation::ban(&state, &user, None, form.request()?).await };
    match done.await {
        Ok(_) => see_other("/admin#bans"),
        Err(e) if shown_on_ban_form(&e) => {
            super::admin::page(&state, &ctx, None, Some((form.username, form.reason, e))).await
        }
        Err(e) => error_page(&ctx, e),
    }
}

/// `POST /admin/unban`.
pub async fn unban_site<S: Store>(
    State(state): State<AppState<S>>,
    session: Session,
    uri: Uri,
    form: Result<Form<UnbanForm>, FormRejection>,
) -> Response {
    unban(state, session, uri, None, form, "/admin#bans").await
}
