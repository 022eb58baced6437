//! Joining communities on other servers from the pages (docs/FEDERATION.md,
//! phase 2): the communities page's "find" form (`/join`: `!name@host`,
//! then that community's page here) and the follow button on a remote
//! community's page (`/c/{name}/follow`). Forms post and redirect back.

use axum::extract::rejection::FormRejection;
use axum::extract::{Form, Path, State};
use axum::http::Uri;
use axum::response::Response;
use serde::Deserialize;

use super::forms::accept;
use super::{Session, error_page, see_other};
use crate::app::AppState;
use crate::app::federation::join;
use crate::app::limits::ClientIp;
use crate::store::Store;

#[derive(Deserialize)]
pub struct FindForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    q: String,
}

/// `/join`: finds the community and shows its page here.
pub async fn find<S: Store>(
    State(state): State<AppState<S>>,
    session: Session,
    uri: Uri,
    ip: ClientIp,
    form: Result<Form<FindForm>, FormRejection>,
) -> Response {
    let (ctx, user, form) = match accept(&session, &uri, form, "/c", |f: &FindForm| &f.csrf) {
        Ok(accepted) => accepted,
        Err(res) => return *res,
    };
    let fed = match state.federation.required() {
        Ok(fed) => fed,
        Err(e) => return error_page(&ctx, e),
    };
    match join::resolve(&state, &fed, &user, ip, &form.q).await {
        Ok(community) => see_other(&format!("/c/{}", community.name)),
        Err(e) => error_page(&ctx, e),
    }
}

#[derive(Deserialize)]
pub struct FollowForm {
    #[serde(default)]
    csrf: String,
    /// 1 follows, 0 stops.
    #[serde(default)]
    on: String,
}

/// `/c/{name}/follow`: back to the community's page.
pub async fn follow<S: Store>(
    State(state): State<AppState<S>>,
    session: Session,
    uri: Uri,
    Path(name): Path<String>,
    form: Result<Form<FollowForm>, FormRejection>,
) -> Response {
    let back = format!("/c/{name}");
    let (ctx, user, form) = match accept(&session, &uri, form, &back, |f: &FollowForm| &f.csrf) {
        Ok(accepted) => accepted,
        Err(res) => return *res,
    };
    let fed = match state.federation.required() {
        Ok(fed) => fed,
        Err(e) => return error_page(&ctx, e),
    };
    let done = if form.on == "0" {
        join::unfollow(&state, &fed, &user, &name).await.map(|_| ())
    } else {
        join::follow(&state, &fed, &user, &name).await.map(|_| ())
    };
    match done {
        Ok(()) => see_other(&back),
        Err(e) => error_page(&ctx, e),
    }
}
