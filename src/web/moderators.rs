//! `/c/{name}/moderators`: a community's moderators, and for site
//! administrators the forms that appoint and dismiss them, through the
//! operation `PUT`/`DELETE /api/v1/communities/{name}/moderators/{user}`
//! call.

use askama::Template;
use axum::extract::rejection::FormRejection;
use axum::extract::{Form, Path, State};
use axum::http::{StatusCode, Uri};
use axum::response::Response;
use serde::Deserialize;

use super::forms::accept;
use super::{Ctx, Session, capitalise, error_page, see_other};
use crate::app::moderation;
use crate::app::{AppError, AppResult, AppState};
use crate::store::Store;

#[derive(Template)]
#[template(path = "moderators.html")]
struct ModeratorsPage {
    ctx: Ctx,
    community: String,
    moderators: Vec<String>,
    /// The viewer may appoint and dismiss (a site administrator).
    manage: bool,
    /// The name the appoint form shows (what was sent, after an error).
    name: String,
    error: Option<String>,
}

/// `GET /c/{name}/moderators`.
pub async fn show<S: Store>(
    State(state): State<AppState<S>>,
    session: Session,
    uri: Uri,
    Path(name): Path<String>,
) -> Response {
    let ctx = Ctx::new(&session, &uri);
    moderators_page(&state, &ctx, name, String::new(), None).await.unwrap_or_else(|e| error_page(&ctx, e))
}

async fn moderators_page<S: Store>(
    state: &AppState<S>,
    ctx: &Ctx,
    community: String,
    name: String,
    error: Option<AppError>,
) -> AppResult<Response> {
    if community.len() > 64 {
        return Err(AppError::not_found("community"));
    }
    let moderators = state.store.moderators(community.clone()).await?.into_iter().map(|u| u.name).collect();
    let status = error.as_ref().map_or(StatusCode::OK, AppError::status);
    let page = ModeratorsPage {
        ctx: ctx.clone(),
        manage: ctx.user.as_ref().is_some_and(|u| u.is_admin),
        community,
        moderators,
        name,
        error: error.map(|e| capitalise(&e.to_string())),
    };
    Ok(ctx.page(status, &page))
}

#[derive(Deserialize)]
pub struct ModeratorForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    username: String,
    /// "appoint" or "dismiss".
    #[serde(default)]
    action: String,
}

/// `POST /c/{name}/moderators`: appoints or dismisses `username`; a name
/// of no one is shown beside the form.
pub async fn set<S: Store>(
    State(state): State<AppState<S>>,
    session: Session,
    uri: Uri,
    Path(community): Path<String>,
    form: Result<Form<ModeratorForm>, FormRejection>,
) -> Response {
    let back = format!("/c/{community}/moderators");
    let (ctx, user, form) = match accept(&session, &uri, form, &back, |f| &f.csrf) {
        Ok(accepted) => accepted,
        Err(res) => return *res,
    };
    let username = form.username.trim().to_owned();
    let appoint = form.action != "dismiss";
    match moderation::set_moderator(&state, user, community.clone(), username.clone(), appoint).await {
        Ok(()) => see_other(&back),
        Err(e @ (AppError::NotFound(_) | AppError::Validation(_))) => {
            moderators_page(&state, &ctx, community, username, Some(e)).await.unwrap_or_else(|e| error_page(&ctx, e))
        }
        Err(e) => error_page(&ctx, e),
    }
}
