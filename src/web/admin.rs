//! `/admin`: the site administrators' page. The registration mode (open,
//! closed, by invitation), new invite codes (shown once), and site bans.
//! The store refuses anyone but an administrator (403).

use askama::Template;
use axum::extract::rejection::FormRejection;
use axum::extract::{Form, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, Uri, header};
use axum::response::Response;
use serde::Deserialize;

use super::bans::{BanRow, DURATIONS};
use super::forms::{accept, login_first};
use super::session::INVITE_COOKIE;
use super::{Ctx, Session, capitalise, error_page, see_other};
use crate::app::AppError;
use crate::app::AppState;
use crate::app::site;
use crate::model::{RegistrationMode, SiteSettings};
use crate::store::Store;

#[derive(Template)]
#[template(path = "admin.html")]
struct AdminPage {
    ctx: Ctx,
    mode: &'static str,
    /// A code made by the previous request, shown this once.
    invite: Option<String>,
    invite_expiries: [(&'static str, &'static str); 4],
    bans: Vec<BanRow>,
    ban_user: String,
    ban_reason: String,
    ban_error: Option<String>,
    durations: [(&'static str, &'static str); 5],
    ban_action: &'static str,
    unban_action: &'static str,
}

/// `GET /admin`.
pub async fn show<S: Store>(
    State(state): State<AppState<S>>,
    session: Session,
    uri: Uri,
    headers: HeaderMap,
) -> Response {
    let ctx = Ctx::new(&session, &uri);
    if ctx.user.is_none() {
        return login_first(&ctx.here);
    }
    let invite = super::session::cookie(&headers, INVITE_COOKIE).filter(|c| !c.is_empty()).map(str::to_owned);
    let mut res = page(&state, &ctx, invite.clone(), None).await;
    if invite.is_some() {
        // Shown once: forget it in the browser, and let nothing keep the page.
        res.headers_mut().append(header::SET_COOKIE, session.flash_cookie(INVITE_COOKIE, "", "/admin"));
        res.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    }
    res
}

/// The page, with a new invite code or a refused ban to show.
pub async fn page<S: Store>(
    state: &AppState<S>,
    ctx: &Ctx,
    invite: Option<String>,
    ban: Option<(String, String, AppError)>,
) -> Response {
    let Some(user) = ctx.user.as_ref() else { return error_page(ctx, AppError::Unauthorized) };
    if !user.is_admin {
        return error_page(ctx, AppError::Forbidden("site administrators only".into()));
    }
    let found = async { Ok::<_, AppError>((state.store.site_settings().await?, state.store.bans(user, None).await?)) };
    let (settings, bans) = match found.await {
        Ok(f) => f,
        Err(e) => return error_page(ctx, e),
    };
    let (ban_user, ban_reason, ban_error) = match ban {
        Some((u, r, e)) => (u, r, Some(e)),
        None => (String::new(), String::new(), None),
    };
    let status = ban_error.as_ref().map_or(StatusCode::OK, AppError::status);
    let page = AdminPage {
        ctx: ctx.clone(),
        mode: settings.registration.as_str(),
        invite,
        invite_expiries: INVITE_EXPIRIES,
        bans: bans.iter().map(BanRow::of).collect(),
        ban_user,
        ban_reason,
        ban_error: ban_error.map(|e| capitalise(&e.to_string())),
        durations: DURATIONS,
        ban_action: "/admin/bans",
        unban_action: "/admin/unban",
    };
    ctx.page(status, &page)
}

/// How long a new invite code stays valid, in seconds ("" is forever; a
/// code works once either way).
const INVITE_EXPIRIES: [(&str, &str); 4] =
    [("86400", "1 day"), ("604800", "1 week"), ("2592000", "30 days"), ("", "Until used")];

#[derive(Deserialize)]
pub struct SettingsForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    registration: String,
}

/// `POST /admin/settings`: the registration mode.
pub async fn settings<S: Store>(
    State(state): State<AppState<S>>,
    session: Session,
    uri: Uri,
    form: Result<Form<SettingsForm>, FormRejection>,
) -> Response {
    let (ctx, user, form) = match accept(&session, &uri, form, "/admin", |f| &f.csrf) {
        Ok(accepted) => accepted,
        Err(res) => return *res,
    };
    let Some(registration) = RegistrationMode::parse(&form.registration) else {
        return error_page(&ctx, AppError::Validation("registration must be open, closed or invite".into()));
    };
    match site::set_settings(&state, &user, SiteSettings { registration }).await {
        Ok(_) => see_other("/admin"),
        Err(e) => error_page(&ctx, e),
    }
}

#[derive(Deserialize)]
pub struct InviteForm {
    #[serde(default)]
    csrf: String,
    /// Seconds; empty: until used.
    #[serde(default)]
    expires: String,
}

/// `POST /admin/invites`: makes a code, as `POST /api/v1/admin/invites`
/// does (256 random bits; the server keeps only its digest), and hands it
/// to the next `GET /admin` in a short-lived cookie, so the code is shown
/// once and a reload makes no second one.
pub async fn invite<S: Store>(
    State(state): State<AppState<S>>,
    session: Session,
    uri: Uri,
    form: Result<Form<InviteForm>, FormRejection>,
) -> Response {
    let (ctx, user, form) = match accept(&session, &uri, form, "/admin", |f| &f.csrf) {
        Ok(accepted) => accepted,
        Err(res) => return *res,
    };
    let Some((secs, _)) = INVITE_EXPIRIES.iter().find(|(s, _)| *s == form.expires.trim()) else {
        return error_page(&ctx, AppError::Validation("choose how long the code stays valid".into()));
    };
    match site::create_invite(&state, &user, secs.parse::<u64>().ok()).await {
        Ok((code, _)) => {
            let mut res = see_other("/admin#invite");
            res.headers_mut().append(header::SET_COOKIE, session.flash_cookie(INVITE_COOKIE, &code, "/admin"));
            res
        }
        Err(e) => error_page(&ctx, e),
    }
}
