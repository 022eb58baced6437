//! The settings page's forms for an account's lifecycle: two-factor login
//! (start, confirm, turn off), downloading the export, and deleting the
//! account. Each calls the operation `/api/v1/me/*` calls; a refusal is
//! shown beside its form on the settings page.

use axum::extract::rejection::FormRejection;
use axum::extract::{Form, State};
use axum::http::{Uri, header};
use axum::response::Response;
use serde::Deserialize;

use super::forms::{CsrfForm, accept, as_api, login_first, shown_on_form};
use super::settings::{Section, Shown, page};
use super::{Ctx, Session, error_page, see_other};
use crate::app::limits::ClientIp;
use crate::app::{AppState, deletion, export, two_factor};
use crate::store::Store;

/// `GET /settings/export`: the account's data as a JSON download.
pub async fn export<S: Store>(State(state): State<AppState<S>>, session: Session, uri: Uri) -> Response {
    let ctx = Ctx::new(&session, &uri);
    match ctx.user.clone() {
        Some(user) => export::download(state, as_api(&session, user)),
        None => login_first(&ctx.here),
    }
}

/// `POST /settings/two-factor/start`: shows the QR code and the secret,
/// with the form that confirms them.
pub async fn two_factor_start<S: Store>(
    State(state): State<AppState<S>>,
    session: Session,
    uri: Uri,
    form: Result<Form<CsrfForm>, FormRejection>,
) -> Response {
    let (ctx, user, _) = match accept(&session, &uri, form, "/settings", |f| &f.csrf) {
        Ok(accepted) => accepted,
        Err(res) => return *res,
    };
    match two_factor::start(&state, &as_api(&session, user)).await {
        Ok(_) => see_other("/settings#two-factor"),
        Err(e) if shown_on_form(&e) => page(&state, &session, &ctx, None, Shown::error(Section::TwoFactor, e)).await,
        Err(e) => error_page(&ctx, e),
    }
}

#[derive(Deserialize)]
pub struct CodeForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    code: String,
    #[serde(default)]
    password: String,
}

/// `POST /settings/two-factor/confirm`: turns 2FA on and shows the
/// recovery codes, this once.
pub async fn two_factor_confirm<S: Store>(
    State(state): State<AppState<S>>,
    session: Session,
    uri: Uri,
    form: Result<Form<CodeForm>, FormRejection>,
) -> Response {
    let (ctx, user, form) = match accept(&session, &uri, form, "/settings", |f| &f.csrf) {
        Ok(accepted) => accepted,
        Err(res) => return *res,
    };
    match two_factor::confirm(&state, &as_api(&session, user), &form.code).await {
        Ok(recovery_codes) => {
            let shown = Shown { recovery_codes, ..Shown::default() };
            page(&state, &session, &ctx, Some("Two-factor login is on."), shown).await
        }
        Err(e) if shown_on_form(&e) => page(&state, &session, &ctx, None, Shown::error(Section::TwoFactor, e)).await,
        Err(e) => error_page(&ctx, e),
    }
}

/// `POST /settings/two-factor/disable`: with the password and a code.
pub async fn two_factor_disable<S: Store>(
    State(state): State<AppState<S>>,
    session: Session,
    uri: Uri,
    ip: ClientIp,
    form: Result<Form<CodeForm>, FormRejection>,
) -> Response {
    let (ctx, user, form) = match accept(&session, &uri, form, "/settings", |f| &f.csrf) {
        Ok(accepted) => accepted,
        Err(res) => return *res,
    };
    match two_factor::disable(&state, ip, &as_api(&session, user), form.password, &form.code).await {
        Ok(()) => see_other("/settings?done=2fa-off"),
        Err(e) if shown_on_form(&e) => page(&state, &session, &ctx, None, Shown::error(Section::TwoFactor, e)).await,
        Err(e) => error_page(&ctx, e),
    }
}

#[derive(Deserialize)]
pub struct DeleteForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    password: String,
    #[serde(default)]
    code: String,
    #[serde(default)]
    content: String,
}

/// `POST /settings/delete`: deletes the account and signs this browser
/// out.
pub async fn delete<S: Store>(
    State(state): State<AppState<S>>,
    session: Session,
    uri: Uri,
    ip: ClientIp,
    form: Result<Form<DeleteForm>, FormRejection>,
) -> Response {
    let (ctx, user, form) = match accept(&session, &uri, form, "/settings", |f| &f.csrf) {
        Ok(accepted) => accepted,
        Err(res) => return *res,
    };
    match deletion::delete_own(&state, ip, &as_api(&session, user), form.password, Some(&form.code), &form.content)
        .await
    {
        Ok(()) => {
            let mut res = see_other("/");
            res.headers_mut().append(header::SET_COOKIE, session.logout_cookie());
            res
        }
        Err(e) if shown_on_form(&e) => page(&state, &session, &ctx, None, Shown::error(Section::Delete, e)).await,
        Err(e) => error_page(&ctx, e),
    }
}
