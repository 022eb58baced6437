//! Log in, register and log out with forms. The same password rules,
//! rate limits, argon2id hashing and token table as `/api/v1/auth/*`; the
//! token goes into an HttpOnly cookie instead of a JSON body.

use askama::Template;
use axum::extract::rejection::FormRejection;
use axum::extract::{Form, Query, State};
use axum::http::{StatusCode, Uri, header};
use axum::response::Response;
use serde::Deserialize;

use super::forms::csrf_refused;
use super::{Ctx, Session, capitalise, error_page, local_path, see_other};
use crate::app::AppState;
use crate::app::accounts::{self as users, check_login, issue_token};
use crate::app::limits::ClientIp;
use crate::app::sessions::UserAgent;
use crate::app::{AppError, AppResult};
use crate::model::{RegistrationMode, TokenKind, User};
use crate::store::Store;

#[derive(Template)]
#[template(path = "login.html")]
struct LoginPage {
    ctx: Ctx,
    username: String,
    next: String,
    error: Option<String>,
}

#[derive(Template)]
#[template(path = "register.html")]
struct RegisterPage {
    ctx: Ctx,
    username: String,
    email: String,
    /// `--require-email`: the address is required, and confirmed by mail.
    require_email: bool,
    /// Mail goes out: the address field is offered.
    mail_on: bool,
    invite_only: bool,
    closed: bool,
    error: Option<String>,
}

#[derive(Deserialize, Default)]
pub struct NextParam {
    #[serde(default)]
    next: String,
}

#[derive(Deserialize)]
pub struct LoginForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    username: String,
    #[serde(default)]
    password: String,
    /// A two-factor code; empty when the account has none.
    #[serde(default)]
    totp: String,
    #[serde(default)]
    next: String,
}

#[derive(Deserialize)]
pub struct RegisterForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    username: String,
    #[serde(default)]
    password: String,
    #[serde(default)]
    invite: String,
    #[serde(default)]
    email: String,
}

pub async fn login_form(session: Session, uri: Uri, Query(q): Query<NextParam>) -> Response {
    let ctx = Ctx::with_anon_csrf(&session, &uri);
    let next = local_path(&q.next).to_owned();
    ctx.page(StatusCode::OK, &LoginPage { ctx: ctx.clone(), username: String::new(), next, error: None })
}

pub async fn login<S: Store>(
    State(state): State<AppState<S>>,
    session: Session,
    uri: Uri,
    ip: ClientIp,
    UserAgent(ua): UserAgent,
    form: Result<Form<LoginForm>, FormRejection>,
) -> Response {
    let ctx = Ctx::with_anon_csrf(&session, &uri);
    let Ok(Form(form)) = form else {
        return error_page(&ctx, AppError::BadRequest("invalid_form", "the form could not be read".into()));
    };
    if !session.csrf_ok(&form.csrf) {
        return csrf_refused(&ctx);
    }
    let next = local_path(&form.next).to_owned();
    match check_login(&state, ip, &form.username, form.password, Some(&form.totp)).await {
        Ok(user) => match start_session(&state, &session, &user, &ua, &next).await {
            Ok(res) => res,
            Err(e) => error_page(&ctx, e),
        },
        Err(e) => {
            let page =
                LoginPage { ctx: ctx.clone(), username: form.username, next, error: Some(capitalise(&e.to_string())) };
            ctx.page(e.status_logged(), &page)
        }
    }
}

/// Stores a new session token for `user` (labelled with the browser's
/// User-Agent `ua`) and sets it as the session cookie.
pub(super) async fn start_session<S: Store>(
    state: &AppState<S>,
    session: &Session,
    user: &User,
    ua: &str,
    to: &str,
) -> AppResult<Response> {
    let token = issue_token(state, user, TokenKind::Session, ua).await?;
    let mut res = see_other(to);
    res.headers_mut().append(header::SET_COOKIE, session.login_cookie(&token));
    Ok(res)
}

pub async fn register_form<S: Store>(State(state): State<AppState<S>>, session: Session, uri: Uri) -> Response {
    let ctx = Ctx::with_anon_csrf(&session, &uri);
    let mode = state.store.site_settings().await.map(|s| s.registration).unwrap_or_default();
    ctx.page(StatusCode::OK, &register_page(&state, &ctx, mode, (String::new(), String::new()), None))
}

fn register_page<S: Store>(
    state: &AppState<S>,
    ctx: &Ctx,
    mode: RegistrationMode,
    (username, email): (String, String),
    error: Option<String>,
) -> RegisterPage {
    RegisterPage {
        ctx: ctx.clone(),
        username,
        email,
        require_email: state.mail.require_email(),
        mail_on: state.mail.enabled(),
        invite_only: mode == RegistrationMode::Invite,
        closed: mode == RegistrationMode::Closed,
        error,
    }
}

pub async fn register<S: Store>(
    State(state): State<AppState<S>>,
    session: Session,
    uri: Uri,
    ip: ClientIp,
    UserAgent(ua): UserAgent,
    form: Result<Form<RegisterForm>, FormRejection>,
) -> Response {
    let ctx = Ctx::with_anon_csrf(&session, &uri);
    let Ok(Form(form)) = form else {
        return error_page(&ctx, AppError::BadRequest("invalid_form", "the form could not be read".into()));
    };
    if !session.csrf_ok(&form.csrf) {
        return csrf_refused(&ctx);
    }
    let mode = state.store.site_settings().await.map(|s| s.registration).unwrap_or_default();
    let created = create_account(&state, ip, mode, &form).await;
    match created {
        // Held until the mailed link is followed: no session yet.
        Ok(_) if state.mail.require_email() => super::email::check_mail(&ctx),
        Ok(user) => start_session(&state, &session, &user, &ua, "/").await.unwrap_or_else(|e| error_page(&ctx, e)),
        Err(e) => {
            let shown = (form.username, form.email);
            let page = register_page(&state, &ctx, mode, shown, Some(capitalise(&e.to_string())));
            ctx.page(e.status_logged(), &page)
        }
    }
}

/// The API's registration; the form has no `invite` field to name.
async fn create_account<S: Store>(
    state: &AppState<S>,
    ip: ClientIp,
    mode: RegistrationMode,
    form: &RegisterForm,
) -> AppResult<User> {
    let invite = Some(form.invite.trim().to_owned());
    let email = Some(form.email.as_str());
    users::create_account(state, ip, mode, form.username.trim(), &form.password, invite, email).await.map_err(|e| {
        match e {
            AppError::Rejected(status, code, message) => {
                AppError::Rejected(status, code, message.replace(" (`invite`)", "").replace(" (`email`)", ""))
            }
            other => other,
        }
    })
}

#[derive(Deserialize)]
pub struct LogoutForm {
    #[serde(default)]
    csrf: String,
}

/// Revokes the session's token (as `POST /api/v1/auth/logout` does) and
/// clears the cookie.
pub async fn logout<S: Store>(
    State(state): State<AppState<S>>,
    session: Session,
    uri: Uri,
    form: Result<Form<LogoutForm>, FormRejection>,
) -> Response {
    let ctx = Ctx::with_anon_csrf(&session, &uri);
    let (Some(digest), Some(user_id)) = (session.token_digest(), session.user.as_ref().map(|u| u.id)) else {
        return see_other("/");
    };
    let csrf = form.map(|Form(f)| f.csrf).unwrap_or_default();
    if !session.csrf_ok(&csrf) {
        return csrf_refused(&ctx);
    }
    if let Err(e) = users::revoke_token(&state, user_id, digest).await {
        return error_page(&ctx, e);
    }
    let mut res = see_other("/");
    res.headers_mut().append(header::SET_COOKIE, session.logout_cookie());
    res
}
