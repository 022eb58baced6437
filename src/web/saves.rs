//! Saving topics and comments (`/t/{id}/save`, `/p/{post}/save`), the
//! saved list (`/saved`), blocking a community from the front page
//! (`/c/{name}/block`) or a user (`/u/{name}/block`), and the list of
//! both with unblock buttons (`/blocks`). Forms post and redirect back;
//! none needs the script.

use askama::Template;
use axum::extract::rejection::FormRejection;
use axum::extract::{Form, Path, Query, State};
use axum::http::{StatusCode, Uri};
use axum::response::Response;
use serde::Deserialize;

use super::forms::{VotePath, accept, login_first};
use super::view::Time;
use super::{Ctx, Session, error_page, local_path, see_other};
use crate::app::limits::ClientIp;
use crate::app::{AppState, saves};
use crate::model::{Blocks, Saved};
use crate::store::Store;

#[derive(Deserialize)]
pub struct SaveForm {
    #[serde(default)]
    csrf: String,
    /// 1 saves (blocks), 0 unsaves (unblocks).
    #[serde(default)]
    on: String,
    #[serde(default)]
    back: String,
}

/// What the form asks: anything but "0" sets.
fn wants(on: &str) -> bool {
    on != "0"
}

/// `/t/{id}/save` and `/p/{post}/save`: back where the form was.
pub async fn save<S: Store>(
    State(state): State<AppState<S>>,
    session: Session,
    uri: Uri,
    ip: ClientIp,
    VotePath(target): VotePath,
    form: Result<Form<SaveForm>, FormRejection>,
) -> Response {
    let back = form.as_ref().map(|Form(f)| local_path(&f.back).to_owned()).unwrap_or_else(|_| "/".into());
    let (ctx, user, form) = match accept(&session, &uri, form, &back, |f: &SaveForm| &f.csrf) {
        Ok(accepted) => accepted,
        Err(res) => return *res,
    };
    let target = match target {
        Ok(t) => t,
        Err(e) => return error_page(&ctx, e),
    };
    match saves::set_saved(&state, &user, ip, target, wants(&form.on)).await {
        Ok(_) => see_other(&back),
        Err(e) => error_page(&ctx, e),
    }
}

/// `/c/{name}/block` (a community) and `/u/{name}/block` (a user): back
/// to the page the form was on.
pub async fn block<S: Store>(
    State(state): State<AppState<S>>,
    session: Session,
    uri: Uri,
    ip: ClientIp,
    Path(name): Path<String>,
    form: Result<Form<SaveForm>, FormRejection>,
) -> Response {
    let back = form.as_ref().map(|Form(f)| local_path(&f.back).to_owned()).unwrap_or_else(|_| "/".into());
    let (ctx, user, form) = match accept(&session, &uri, form, &back, |f: &SaveForm| &f.csrf) {
        Ok(accepted) => accepted,
        Err(res) => return *res,
    };
    let on = wants(&form.on);
    let done = if uri.path().starts_with("/u/") {
        saves::set_user_blocked(&state, &user, ip, &name, on).await
    } else {
        saves::set_blocked(&state, &user, ip, &name, on).await
    };
    match done {
        Ok(_) => see_other(&back),
        Err(e) => error_page(&ctx, e),
    }
}

#[derive(Template)]
#[template(path = "blocks.html")]
struct BlocksPage {
    ctx: Ctx,
    blocks: Blocks,
}

/// `/blocks`: the users and communities the viewer blocked.
pub async fn blocks<S: Store>(State(state): State<AppState<S>>, session: Session, uri: Uri) -> Response {
    let ctx = Ctx::new(&session, &uri);
    let Some(user) = &ctx.user else { return login_first(&ctx.here) };
    match saves::blocks(&state, user).await {
        Ok(blocks) => ctx.page(StatusCode::OK, &BlocksPage { ctx: ctx.clone(), blocks }),
        Err(e) => error_page(&ctx, e),
    }
}

/// A saved item as the saved page shows it.
pub struct SavedRow {
    pub item: Saved,
    pub saved: Time,
    /// Where it is: the topic, or the comment in its thread.
    pub href: String,
}

#[derive(Template)]
#[template(path = "saved.html")]
struct SavedPage {
    ctx: Ctx,
    rows: Vec<SavedRow>,
    next: Option<String>,
}

#[derive(Deserialize)]
pub struct SavedParams {
    after: Option<String>,
}

/// `/saved`: the viewer's saved topics and comments, newest first, in
/// pages; signed-out visitors log in first.
pub async fn page<S: Store>(
    State(state): State<AppState<S>>,
    session: Session,
    uri: Uri,
    Query(p): Query<SavedParams>,
) -> Response {
    let ctx = Ctx::new(&session, &uri);
    let Some(user) = &ctx.user else { return login_first(&ctx.here) };
    let found = async {
        let after = saves::parse_cursor(p.after.as_deref())?;
        saves::saved(&state, user, after).await
    };
    let (items, next) = match found.await {
        Ok(found) => found,
        Err(e) => return error_page(&ctx, e),
    };
    let rows = items
        .into_iter()
        .map(|item| SavedRow {
            saved: Time::of(item.saved_at),
            href: match item.post_id {
                Some(p) => format!("/t/{}?thread={p}#p{p}", item.topic_id),
                None => format!("/t/{}", item.topic_id),
            },
            item,
        })
        .collect();
    let next = next.map(|c| format!("/saved?after={}", c.encode()));
    ctx.page(StatusCode::OK, &SavedPage { ctx: ctx.clone(), rows, next })
}
