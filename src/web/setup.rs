//! First run: while the site has no administrator, `pith serve` prints a
//! one-time link `/setup/TOKEN` whose page creates the administrator and
//! signs them in. The token lives only in memory, is compared in constant
//! time, and dies once an administrator exists (the link then answers 404).

use askama::Template;
use axum::extract::rejection::FormRejection;
use axum::extract::{Form, Path, State};
use axum::http::{StatusCode, Uri};
use axum::response::Response;
use serde::Deserialize;

use super::forms::csrf_refused;
use super::{Ctx, Session, capitalise, error_page};
use crate::app::AppState;
use crate::app::{AppError, AppResult};
use crate::model::User;
use crate::store::Store;

#[derive(Template)]
#[template(path = "setup.html")]
struct SetupPage {
    ctx: Ctx,
    action: String,
    username: String,
    error: Option<String>,
}

#[derive(Deserialize)]
pub struct SetupForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    username: String,
    #[serde(default)]
    password: String,
}

/// Whether `token` opens the setup page now; a stale token is dropped.
async fn open<S: Store>(state: &AppState<S>, token: &str) -> AppResult<()> {
    let gone = || AppError::NotFound("setup link (it works once, while the site has no administrator)".into());
    if !state.web.setup.matches(token) {
        return Err(gone());
    }
    if state.store.has_admin().await? {
        state.web.setup.revoke();
        return Err(gone());
    }
    Ok(())
}

pub async fn form<S: Store>(
    State(state): State<AppState<S>>,
    session: Session,
    uri: Uri,
    Path(token): Path<String>,
) -> Response {
    let ctx = Ctx::with_anon_csrf(&session, &uri);
    if let Err(e) = open(&state, &token).await {
        return error_page(&ctx, e);
    }
    let page = SetupPage { ctx: ctx.clone(), action: uri.path().to_owned(), username: String::new(), error: None };
    ctx.page(StatusCode::OK, &page)
}

pub async fn create<S: Store>(
    State(state): State<AppState<S>>,
    session: Session,
    uri: Uri,
    Path(token): Path<String>,
    ua: crate::app::sessions::UserAgent,
    form: Result<Form<SetupForm>, FormRejection>,
) -> Response {
    let ctx = Ctx::with_anon_csrf(&session, &uri);
    if let Err(e) = open(&state, &token).await {
        return error_page(&ctx, e);
    }
    let Ok(Form(form)) = form else {
        return error_page(&ctx, AppError::BadRequest("invalid_form", "the form could not be read".into()));
    };
    if !session.csrf_ok(&form.csrf) {
        return csrf_refused(&ctx);
    }
    match create_admin(&state, &form).await {
        Ok(user) => {
            state.web.setup.revoke();
            tracing::info!(user = %user.name, "first administrator created through the setup link");
            super::account::start_session(&state, &session, &user, &ua.0, "/admin")
                .await
                .unwrap_or_else(|e| error_page(&ctx, e))
        }
        Err(e) => {
            let error = Some(capitalise(&e.to_string()));
            let page = SetupPage { ctx: ctx.clone(), action: uri.path().to_owned(), username: form.username, error };
            ctx.page(e.status_logged(), &page)
        }
    }
}

async fn create_admin<S: Store>(state: &AppState<S>, form: &SetupForm) -> AppResult<User> {
    crate::app::site::create_first_admin(state, form.username.trim(), &form.password).await
}
