//! Email pages: "Forgot password?" (ask for a link by mail), the page a
//! reset link opens (choose a new password), the page a confirmation link
//! opens, and `/settings/email` (the address and the digest setting).
//! The same operations as `/api/v1/auth/password-reset*`,
//! `/api/v1/auth/verify-email` and `/api/v1/me/email*`.

use askama::Template;
use axum::extract::rejection::FormRejection;
use axum::extract::{Form, Path, Query, State};
use axum::http::{StatusCode, Uri};
use axum::response::Response;
use serde::Deserialize;

use super::forms::{accept, as_api, csrf_refused, login_first, shown_on_form};
use super::{Ctx, Session, capitalise, error_page, see_other};
use crate::app::email;
use crate::app::limits::ClientIp;
use crate::app::{AppError, AppState};
use crate::model::mail::EmailSettings;
use crate::store::Store;

/// What the signed-out email page shows.
#[derive(PartialEq, Eq)]
enum Step {
    /// The form that asks for a reset link.
    Ask,
    /// The link is on its way (whether or not the address is anyone's).
    Asked,
    /// The form a reset link opens.
    Choose,
    /// The password is changed.
    Changed,
    /// An address is confirmed.
    Verified,
    /// A new account must follow its mailed link before logging in.
    CheckMail,
}

#[derive(Template)]
#[template(path = "email.html")]
struct EmailPage {
    ctx: Ctx,
    step: Step,
    /// The reset token, for the form a reset link opens.
    token: String,
    error: Option<String>,
}

fn show(ctx: &Ctx, status: StatusCode, step: Step, token: String, error: Option<String>) -> Response {
    ctx.page(status, &EmailPage { ctx: ctx.clone(), step, token, error })
}

/// The page a registration under `--require-email` ends on.
pub fn check_mail(ctx: &Ctx) -> Response {
    show(ctx, StatusCode::ACCEPTED, Step::CheckMail, String::new(), None)
}

#[derive(Deserialize)]
pub struct AskForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    email: String,
}

#[derive(Deserialize)]
pub struct ChooseForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    password: String,
}

/// `GET /reset`.
pub async fn ask_form(session: Session, uri: Uri) -> Response {
    show(&Ctx::with_anon_csrf(&session, &uri), StatusCode::OK, Step::Ask, String::new(), None)
}

/// `POST /reset`: the same answer whether or not the address is anyone's.
pub async fn ask<S: Store>(
    State(state): State<AppState<S>>,
    session: Session,
    uri: Uri,
    ip: ClientIp,
    form: Result<Form<AskForm>, FormRejection>,
) -> Response {
    let ctx = Ctx::with_anon_csrf(&session, &uri);
    let Ok(Form(form)) = form else { return error_page(&ctx, super::forms::bad_form()) };
    if !session.csrf_ok(&form.csrf) {
        return csrf_refused(&ctx);
    }
    match email::request_reset(&state, ip, &form.email).await {
        Ok(()) => show(&ctx, StatusCode::OK, Step::Asked, String::new(), None),
        Err(e) => refused(&ctx, Step::Ask, String::new(), e),
    }
}

fn refused(ctx: &Ctx, step: Step, token: String, e: AppError) -> Response {
    if shown_on_form(&e) {
        return show(ctx, e.status_logged(), step, token, Some(capitalise(&e.to_string())));
    }
    error_page(ctx, e)
}

/// `GET /reset/{token}`: the form; the link is used up only when it is sent.
pub async fn choose_form(session: Session, uri: Uri, Path(token): Path<String>) -> Response {
    show(&Ctx::with_anon_csrf(&session, &uri), StatusCode::OK, Step::Choose, token, None)
}

/// `POST /reset/{token}`: sets the new password; every session of the
/// account ends, so the page asks to log in.
pub async fn choose<S: Store>(
    State(state): State<AppState<S>>,
    session: Session,
    uri: Uri,
    ip: ClientIp,
    Path(token): Path<String>,
    form: Result<Form<ChooseForm>, FormRejection>,
) -> Response {
    let ctx = Ctx::with_anon_csrf(&session, &uri);
    let Ok(Form(form)) = form else { return error_page(&ctx, super::forms::bad_form()) };
    if !session.csrf_ok(&form.csrf) {
        return csrf_refused(&ctx);
    }
    match email::confirm_reset(&state, ip, &token, &form.password).await {
        Ok(_) => show(&ctx, StatusCode::OK, Step::Changed, String::new(), None),
        Err(e) => refused(&ctx, Step::Choose, token, e),
    }
}

/// `GET /verify/{token}`: following the mailed link confirms the address.
pub async fn verify<S: Store>(
    State(state): State<AppState<S>>,
    session: Session,
    uri: Uri,
    Path(token): Path<String>,
) -> Response {
    let ctx = Ctx::new(&session, &uri);
    match email::verify(&state, &token).await {
        Ok(_) => show(&ctx, StatusCode::OK, Step::Verified, String::new(), None),
        Err(e) => error_page(&ctx, e),
    }
}

#[derive(Template)]
#[template(path = "settings_email.html")]
struct SettingsPage {
    ctx: Ctx,
    settings: EmailSettings,
    mail_on: bool,
    notice: Option<&'static str>,
    error: Option<String>,
}

#[derive(Deserialize, Default)]
pub struct NoticeParam {
    #[serde(default)]
    done: String,
}

fn notice(done: &str) -> Option<&'static str> {
    match done {
        "email" => Some("A confirmation link is on its way to the new address; follow it to confirm."),
        "digest" => Some("Your notification mail setting is saved."),
        _ => None,
    }
}

/// `GET /settings/email`.
pub async fn settings<S: Store>(
    State(state): State<AppState<S>>,
    session: Session,
    uri: Uri,
    Query(q): Query<NoticeParam>,
) -> Response {
    let ctx = Ctx::new(&session, &uri);
    if ctx.user.is_none() {
        return login_first(&ctx.here);
    }
    settings_page(&state, &ctx, notice(&q.done), None).await
}

async fn settings_page<S: Store>(
    state: &AppState<S>,
    ctx: &Ctx,
    notice: Option<&'static str>,
    error: Option<AppError>,
) -> Response {
    let Some(user) = &ctx.user else { return error_page(ctx, AppError::Unauthorized) };
    let settings = match state.store.email_settings(user.id).await {
        Ok(s) => s,
        Err(e) => return error_page(ctx, e.into()),
    };
    let status = error.as_ref().map_or(StatusCode::OK, AppError::status_logged);
    let error = error.map(|e| capitalise(&e.to_string()));
    ctx.page(status, &SettingsPage { ctx: ctx.clone(), settings, mail_on: state.mail.enabled(), notice, error })
}

#[derive(Deserialize)]
pub struct AddressForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    email: String,
    #[serde(default)]
    password: String,
}

#[derive(Deserialize)]
pub struct DigestForm {
    #[serde(default)]
    csrf: String,
    /// Present (`on`) when the box is ticked.
    #[serde(default)]
    digest: Option<String>,
}

/// `POST /settings/email`: a new address, pending until its link is followed.
pub async fn set_address<S: Store>(
    State(state): State<AppState<S>>,
    session: Session,
    uri: Uri,
    ip: ClientIp,
    form: Result<Form<AddressForm>, FormRejection>,
) -> Response {
    let (ctx, user, form) = match accept(&session, &uri, form, "/settings/email", |f| &f.csrf) {
        Ok(accepted) => accepted,
        Err(res) => return *res,
    };
    match email::set_email(&state, ip, &as_api(&session, user), &form.email, form.password).await {
        Ok(_) => see_other("/settings/email?done=email"),
        Err(e) if shown_on_form(&e) => settings_page(&state, &ctx, None, Some(e)).await,
        Err(e) => error_page(&ctx, e),
    }
}

/// `POST /settings/email/digest`: the checkbox.
pub async fn set_digest<S: Store>(
    State(state): State<AppState<S>>,
    session: Session,
    uri: Uri,
    form: Result<Form<DigestForm>, FormRejection>,
) -> Response {
    let (ctx, user, form) = match accept(&session, &uri, form, "/settings/email", |f| &f.csrf) {
        Ok(accepted) => accepted,
        Err(res) => return *res,
    };
    match email::set_digest(&state, &as_api(&session, user), form.digest.is_some()).await {
        Ok(_) => see_other("/settings/email?done=digest"),
        Err(e) if shown_on_form(&e) => settings_page(&state, &ctx, None, Some(e)).await,
        Err(e) => error_page(&ctx, e),
    }
}
