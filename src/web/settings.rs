//! `/settings`: the signed-in user's account page. Changing the password
//! (which signs out every other session and token), the sessions and API
//! tokens signed in with a button to revoke each, "sign out everywhere
//! else", two-factor login, the export of their data and deleting the
//! account: the same operations as `/api/v1/me/*`. The forms of the last
//! three are in `web::lifecycle`.

use askama::Template;
use axum::extract::rejection::FormRejection;
use axum::extract::{Form, Path, Query, State};
use axum::http::{StatusCode, Uri, header};
use axum::response::Response;
use serde::Deserialize;

use super::forms::{CsrfForm, accept, as_api, login_first};
use super::view::Time;
use super::{Ctx, Session, capitalise, error_page, see_other};
use crate::app::auth::token_id;
use crate::app::limits::ClientIp;
use crate::app::{AppError, AppState};
use crate::app::{sessions, two_factor};
use crate::store::Store;

#[derive(Template)]
#[template(path = "settings.html")]
struct SettingsPage {
    ctx: Ctx,
    notice: Option<&'static str>,
    /// The password form's error.
    error: Option<String>,
    /// The two-factor forms' error.
    tf_error: Option<String>,
    /// The deletion form's error.
    delete_error: Option<String>,
    sessions: Vec<SessionRow>,
    session_idle: String,
    api_idle: String,
    two_factor: two_factor::View,
    /// Recovery codes just made: shown once, on this page only.
    recovery_codes: Vec<String>,
}

/// Which form of the page an error belongs beside.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Section {
    Password,
    TwoFactor,
    Delete,
}

/// What a form's answer adds to the page.
#[derive(Default)]
pub struct Shown {
    pub error: Option<(Section, AppError)>,
    pub recovery_codes: Vec<String>,
}

impl Shown {
    pub fn error(section: Section, e: AppError) -> Shown {
        Shown { error: Some((section, e)), ..Shown::default() }
    }
}

struct SessionRow {
    id: String,
    kind: &'static str,
    label: String,
    created: Time,
    last_used: Time,
    current: bool,
}

#[derive(Deserialize, Default)]
pub struct NoticeParam {
    #[serde(default)]
    done: String,
}

/// What the page says after a form succeeded: fixed texts, chosen by the
/// redirect's `done`, so no text from a URL reaches the page.
fn notice(done: &str) -> Option<&'static str> {
    match done {
        "password" => Some("Your password is changed, and you are signed out everywhere else."),
        "others" => Some("You are signed out everywhere else."),
        "revoked" => Some("That session is signed out."),
        "2fa-off" => Some("Two-factor login is off."),
        _ => None,
    }
}

/// `GET /settings`.
pub async fn show<S: Store>(
    State(state): State<AppState<S>>,
    session: Session,
    uri: Uri,
    Query(q): Query<NoticeParam>,
) -> Response {
    let ctx = Ctx::new(&session, &uri);
    if ctx.user.is_none() {
        return login_first(&ctx.here);
    }
    page(&state, &session, &ctx, notice(&q.done), Shown::default()).await
}

/// The page, with what a form's answer adds (`shown`).
pub async fn page<S: Store>(
    state: &AppState<S>,
    session: &Session,
    ctx: &Ctx,
    notice: Option<&'static str>,
    shown: Shown,
) -> Response {
    let Some(user) = ctx.user.clone() else { return error_page(ctx, AppError::Unauthorized) };
    let two_factor = match two_factor::view(state, &user).await {
        Ok(view) => view,
        Err(e) => return error_page(ctx, e),
    };
    let list = match sessions::list(state, &as_api(session, user)).await {
        Ok(list) => list,
        Err(e) => return error_page(ctx, e),
    };
    let limits = state.sessions.limits();
    let status = shown.error.as_ref().map_or(StatusCode::OK, |(_, e)| e.status());
    let error_at = |at: Section| match &shown.error {
        Some((section, e)) if *section == at => Some(capitalise(&e.to_string())),
        _ => None,
    };
    let page = SettingsPage {
        ctx: ctx.clone(),
        notice,
        error: error_at(Section::Password),
        tf_error: error_at(Section::TwoFactor),
        delete_error: error_at(Section::Delete),
        two_factor,
        recovery_codes: shown.recovery_codes,
        sessions: list
            .into_iter()
            .map(|s| SessionRow {
                id: s.id,
                kind: s.kind.as_str(),
                label: s.label,
                created: Time::of(s.created_at),
                last_used: Time::of(s.last_used_at),
                current: s.current,
            })
            .collect(),
        session_idle: idle(limits.session_days),
        api_idle: idle(limits.api_days),
    };
    ctx.page(status, &page)
}

/// "30 days unused", or "never" for no limit.
fn idle(days: u32) -> String {
    match days {
        0 => "never, until signed out".into(),
        1 => "a day unused".into(),
        n => format!("{n} days unused"),
    }
}

#[derive(Deserialize)]
pub struct PasswordForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    current: String,
    #[serde(default)]
    new: String,
}

/// `POST /settings/password`: as `POST /api/v1/me/password`; a refusal
/// (wrong current password, a new one too short, too many tries) is shown
/// on the page.
pub async fn change_password<S: Store>(
    State(state): State<AppState<S>>,
    session: Session,
    uri: Uri,
    ip: ClientIp,
    form: Result<Form<PasswordForm>, FormRejection>,
) -> Response {
    let (ctx, user, form) = match accept(&session, &uri, form, "/settings", |f| &f.csrf) {
        Ok(accepted) => accepted,
        Err(res) => return *res,
    };
    let auth = as_api(&session, user);
    match sessions::change_password(&state, ip, &auth, form.current, &form.new).await {
        Ok(_) => see_other("/settings?done=password"),
        Err(e) if super::forms::shown_on_form(&e) => {
            page(&state, &session, &ctx, None, Shown::error(Section::Password, e)).await
        }
        Err(e) => error_page(&ctx, e),
    }
}

/// `POST /settings/sessions/{id}/revoke`: signs one session or token out;
/// this browser's own signs it out here too.
pub async fn revoke<S: Store>(
    State(state): State<AppState<S>>,
    session: Session,
    uri: Uri,
    Path(id): Path<String>,
    form: Result<Form<CsrfForm>, FormRejection>,
) -> Response {
    let (ctx, user, _) = match accept(&session, &uri, form, "/settings", |f| &f.csrf) {
        Ok(accepted) => accepted,
        Err(res) => return *res,
    };
    let auth = as_api(&session, user);
    if let Err(e) = sessions::revoke(&state, &auth, &id).await {
        return error_page(&ctx, e);
    }
    if token_id(&auth.digest) == id {
        let mut res = see_other("/");
        res.headers_mut().append(header::SET_COOKIE, session.logout_cookie());
        return res;
    }
    see_other("/settings?done=revoked")
}

/// `POST /settings/sessions/revoke-others`: "sign out everywhere else".
pub async fn revoke_others<S: Store>(
    State(state): State<AppState<S>>,
    session: Session,
    uri: Uri,
    form: Result<Form<CsrfForm>, FormRejection>,
) -> Response {
    let (ctx, user, _) = match accept(&session, &uri, form, "/settings", |f| &f.csrf) {
        Ok(accepted) => accepted,
        Err(res) => return *res,
    };
    match sessions::revoke_others(&state, &as_api(&session, user)).await {
        Ok(_) => see_other("/settings?done=others"),
        Err(e) => error_page(&ctx, e),
    }
}
