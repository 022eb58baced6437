//! Replying (on its own page, for replies to a comment without
//! JavaScript, or inline) and voting. Forms post and redirect (303); the
//! script sends the same forms with `X-Pith-Fetch: 1` and gets the new
//! comment's HTML or the vote's JSON instead.

use askama::Template;
use axum::extract::rejection::FormRejection;
use axum::extract::{Form, Path, Query, State};
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;

use super::forms::{VotePath, authorise, authorise_api, id_of, is_fetch, login_first};
use super::picture_form::{PictureForm, attach};
use super::topic::{read_post, render_fragment};
use super::view::PostView;
use super::{Ctx, Session, capitalise, error_page, local_path, see_other};
use crate::app::AppState;
use crate::app::limits::ClientIp;
use crate::app::posts::Reply;
use crate::app::{AppError, AppResult};
use crate::model::{Body, Post, User};
use crate::store::Store;

#[derive(Template)]
#[template(path = "reply.html")]
struct ReplyPage {
    ctx: Ctx,
    topic_id: i64,
    title: String,
    parent: Option<PostView>,
    body: String,
    error: Option<String>,
}

#[derive(Deserialize)]
pub struct ReplyParams {
    to: Option<i64>,
}

/// `/t/{id}/reply?to={post}`: the reply form on its own page, for replies
/// to a post without JavaScript.
pub async fn reply_form<S: Store>(
    State(state): State<AppState<S>>,
    session: Session,
    uri: Uri,
    Path(id): Path<String>,
    Query(q): Query<ReplyParams>,
) -> Response {
    let ctx = Ctx::new(&session, &uri);
    if ctx.user.is_none() {
        return login_first(&ctx.here);
    }
    match reply_page(&state, &ctx, &id, q.to, String::new(), None).await {
        Ok(res) => res,
        Err(e) => error_page(&ctx, e),
    }
}

async fn reply_page<S: Store>(
    state: &AppState<S>,
    ctx: &Ctx,
    id: &str,
    to: Option<i64>,
    body: String,
    error: Option<(StatusCode, String)>,
) -> AppResult<Response> {
    let id = id_of(id, "topic")?;
    let (topic, parent, _) = read_post(state, id, to, ctx.user.as_ref()).await?;
    let parent = parent.map(|(p, _)| PostView::of(&p, None, 0));
    let (status, error) = match error {
        Some((s, m)) => (s, Some(m)),
        None => (StatusCode::OK, None),
    };
    let page = ReplyPage { ctx: ctx.clone(), topic_id: id, title: topic.title, parent, body, error };
    Ok(ctx.page(status, &page))
}

#[derive(Deserialize)]
pub struct ReplyForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    body: String,
    /// Empty for a top-level comment.
    #[serde(default)]
    parent: String,
}

pub async fn reply<S: Store>(
    State(state): State<AppState<S>>,
    session: Session,
    uri: Uri,
    headers: HeaderMap,
    ip: ClientIp,
    Path(id): Path<String>,
    form: Result<PictureForm<ReplyForm>, AppError>,
) -> Response {
    let ctx = Ctx::new(&session, &uri);
    let fetch = is_fetch(&headers);
    let PictureForm { fields: mut form, picture } = match form {
        Ok(form) => form,
        Err(e) => return error_page(&ctx, e),
    };
    let topic_id = match id_of(&id, "topic") {
        Ok(id) => id,
        Err(e) => return error_page(&ctx, e),
    };
    let user = match authorise(&session, &ctx, &form.csrf, &format!("/t/{topic_id}")) {
        Ok(u) => u,
        Err(_) if fetch => return (StatusCode::FORBIDDEN, "log in again to reply").into_response(),
        Err(res) => return *res,
    };
    let parent = form.parent.trim().parse::<i64>().ok();
    // A picture the form carried (JavaScript off) is uploaded and linked
    // at the end of the comment; a refusal shows on the form, text kept.
    let created = match attach(&state, &user, ip, picture, form.body.clone()).await {
        Ok(body) => {
            form.body = body;
            create_reply(&state, user.clone(), ip, topic_id, parent, &form.body).await
        }
        Err(e) => Err(e),
    };
    match created {
        Ok(post) if fetch => {
            let depth = parent.map_or(0, |_| 1);
            render_fragment(PostView::of(&post, Some(&user), depth))
                .map(|mut r| {
                    *r.status_mut() = StatusCode::CREATED;
                    r
                })
                .unwrap_or_else(|e| (e.status_logged(), e.to_string()).into_response())
        }
        Ok(post) => see_other(&format!("/t/{topic_id}#p{}", post.id)),
        Err(e) if fetch => (e.status_logged(), capitalise(&e.to_string())).into_response(),
        Err(
            e @ (AppError::Validation(_)
            | AppError::TooManyRequests(..)
            | AppError::Rejected(..)
            | AppError::PayloadTooLarge(_)),
        ) => {
            let error = Some((e.status(), capitalise(&e.to_string())));
            reply_page(&state, &ctx, &id, parent, form.body, error).await.unwrap_or_else(|e| error_page(&ctx, e))
        }
        Err(e) => error_page(&ctx, e),
    }
}

/// What `POST /api/v1/topics/{id}/posts` does, through the same function.
async fn create_reply<S: Store>(
    state: &AppState<S>,
    user: User,
    ip: ClientIp,
    topic_id: i64,
    parent_id: Option<i64>,
    body: &str,
) -> AppResult<Post> {
    let new = Reply { topic_id, parent_id, body: Body::parse(body)?, remote_id: None };
    crate::app::posts::create_post(state, user, ip, new).await
}

#[derive(Deserialize)]
pub struct VoteForm {
    #[serde(default)]
    csrf: String,
    value: i8,
    #[serde(default)]
    back: String,
}

/// Casts the vote through `app::votes` (limits, eviction, live score),
/// as the API does; the script gets its JSON, a form goes back where it was.
pub async fn vote<S: Store>(
    State(state): State<AppState<S>>,
    session: Session,
    uri: Uri,
    headers: HeaderMap,
    ip: ClientIp,
    VotePath(target): VotePath,
    form: Result<Form<VoteForm>, FormRejection>,
) -> Response {
    let ctx = Ctx::new(&session, &uri);
    let fetch = is_fetch(&headers);
    let (target, Ok(Form(form))) = (target, form) else {
        return error_page(&ctx, AppError::BadRequest("invalid_form", "the vote could not be read".into()));
    };
    let target = match target {
        Ok(t) => t,
        Err(e) => return error_page(&ctx, e),
    };
    let back = local_path(&form.back).to_owned();
    let auth = match authorise_api(&session, &ctx, &form.csrf, &back) {
        Ok(a) => a,
        Err(_) if fetch => return (StatusCode::UNAUTHORIZED, "log in to vote").into_response(),
        Err(res) => return *res,
    };
    match crate::app::votes::cast_vote(&state, auth.user, ip, target, form.value).await {
        Ok(outcome) if fetch => axum::Json(outcome).into_response(),
        Ok(_) => see_other(&back),
        Err(e) if fetch => (e.status_logged(), capitalise(&e.to_string())).into_response(),
        Err(e) => error_page(&ctx, e),
    }
}
