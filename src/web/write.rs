//! Forms that write: submit a topic, edit and delete one's topics and
//! posts. An edit form is shown only to whom the edit would be allowed
//! (`app::read::edit_source`). Each re-renders its form with the error (4xx) when refused, and
//! redirects (303) when done.

use askama::Template;
use axum::extract::rejection::FormRejection;
use axum::extract::{Form, Path, Query, State};
use axum::http::{StatusCode, Uri};
use axum::response::Response;
use serde::Deserialize;

use super::forms::{CsrfForm, authorise, bad_form, id_of, login_first, shown_on_form};
use super::picture_form::{PictureForm, attach};
use super::{Ctx, Session, capitalise, error_page, see_other};
use crate::app::limits::ClientIp;
use crate::app::{AppError, AppResult};
use crate::app::{AppState, posts, read, topics};
use crate::model::{Body, Community, CommunityName, User};
use crate::store::Store;

#[derive(Template)]
#[template(path = "submit.html")]
struct SubmitPage {
    ctx: Ctx,
    communities: Vec<Community>,
    community: String,
    title: String,
    url: String,
    body: String,
    error: Option<String>,
}

#[derive(Deserialize, Default)]
pub struct SubmitForm {
    #[serde(default)]
    csrf: String,
    #[serde(default, alias = "c")]
    community: String,
    #[serde(default)]
    title: String,
    #[serde(default)]
    url: String,
    #[serde(default)]
    body: String,
}

async fn submit_page<S: Store>(
    state: &AppState<S>,
    ctx: &Ctx,
    form: SubmitForm,
    error: Option<(StatusCode, String)>,
) -> Response {
    let communities = match state.store.list_communities().await {
        Ok(c) => c,
        Err(e) => return error_page(ctx, e.into()),
    };
    let (status, error) = error.map_or((StatusCode::OK, None), |(s, m)| (s, Some(m)));
    let page = SubmitPage {
        ctx: ctx.clone(),
        communities,
        community: form.community,
        title: form.title,
        url: form.url,
        body: form.body,
        error,
    };
    ctx.page(status, &page)
}

/// `/submit?c=NAME`: the new-topic form, with a community chosen.
pub async fn submit_form<S: Store>(
    State(state): State<AppState<S>>,
    session: Session,
    uri: Uri,
    Query(q): Query<SubmitForm>,
) -> Response {
    let ctx = Ctx::new(&session, &uri);
    if ctx.user.is_none() {
        return login_first(&ctx.here);
    }
    submit_page(&state, &ctx, SubmitForm { community: q.community, ..SubmitForm::default() }, None).await
}

/// `POST /submit`: the topic, with the picture its form carried (with
/// JavaScript off) uploaded and linked at the end of its text.
pub async fn submit<S: Store>(
    State(state): State<AppState<S>>,
    session: Session,
    uri: Uri,
    ip: ClientIp,
    form: Result<PictureForm<SubmitForm>, AppError>,
) -> Response {
    let ctx = Ctx::new(&session, &uri);
    let PictureForm { fields: mut form, picture } = match form {
        Ok(form) => form,
        Err(e) => return error_page(&ctx, e),
    };
    let user = match authorise(&session, &ctx, &form.csrf, "/submit") {
        Ok(u) => u,
        Err(res) => return *res,
    };
    let created = match attach(&state, &user, ip, picture, form.body.clone()).await {
        Ok(body) => {
            form.body = body;
            create_topic(&state, user, ip, &form).await
        }
        Err(e) => Err(e),
    };
    match created {
        Ok(id) => see_other(&format!("/t/{id}")),
        Err(e) if shown_on_form(&e) || matches!(e, AppError::NotFound(_) | AppError::PayloadTooLarge(_)) => {
            let error = Some((e.status(), capitalise(&e.to_string())));
            submit_page(&state, &ctx, form, error).await
        }
        Err(e) => error_page(&ctx, e),
    }
}

/// What `POST /api/v1/communities/{name}/topics` does, through the same
/// function.
async fn create_topic<S: Store>(state: &AppState<S>, user: User, ip: ClientIp, f: &SubmitForm) -> AppResult<i64> {
    let community = CommunityName::named(&f.community.to_ascii_lowercase())
        .map_err(|_| AppError::Validation("choose a community".into()))?;
    let new = topics::new_topic(community, &f.title, Some(&f.body), Some(f.url.trim()))?;
    Ok(topics::create_topic(state, user, ip, new).await?.id)
}

#[derive(Template)]
#[template(path = "edit.html")]
struct EditPage {
    ctx: Ctx,
    heading: &'static str,
    action: String,
    cancel: String,
    body: String,
    /// A topic's body may be emptied; a post's may not.
    required: bool,
    error: Option<String>,
}

#[derive(Deserialize)]
pub struct EditForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    body: String,
}

pub async fn edit_topic_form<S: Store>(
    State(state): State<AppState<S>>,
    session: Session,
    uri: Uri,
    Path(id): Path<String>,
) -> Response {
    let ctx = Ctx::new(&session, &uri);
    let Some(user) = &ctx.user else { return login_first(&ctx.here) };
    let found = async {
        let id = id_of(&id, "topic")?;
        Ok::<_, AppError>((id, read::edit_source(&state, user, id, None).await?))
    };
    match found.await {
        Ok((id, body)) => ctx.page(StatusCode::OK, &edit_topic_page(&ctx, id, body, None)),
        Err(e) => error_page(&ctx, e),
    }
}

fn edit_topic_page(ctx: &Ctx, id: i64, body: String, error: Option<String>) -> EditPage {
    EditPage {
        ctx: ctx.clone(),
        heading: "Edit topic",
        action: format!("/t/{id}/edit"),
        cancel: format!("/t/{id}"),
        body,
        required: false,
        error,
    }
}

pub async fn edit_topic<S: Store>(
    State(state): State<AppState<S>>,
    session: Session,
    ip: ClientIp,
    uri: Uri,
    Path(id): Path<String>,
    form: Result<Form<EditForm>, FormRejection>,
) -> Response {
    let ctx = Ctx::new(&session, &uri);
    let (Ok(id), Ok(Form(form))) = (id_of(&id, "topic"), form) else { return error_page(&ctx, bad_form()) };
    let user = match authorise(&session, &ctx, &form.csrf, &format!("/t/{id}")) {
        Ok(u) => u,
        Err(res) => return *res,
    };
    let done = async {
        let body = Some(form.body.as_str()).filter(|b| !b.trim().is_empty()).map(Body::parse).transpose()?;
        topics::edit_topic(&state, user, ip, id, body, None).await
    };
    match done.await {
        Ok(_) => see_other(&format!("/t/{id}")),
        Err(e) if shown_on_form(&e) => {
            let page = edit_topic_page(&ctx, id, form.body, Some(capitalise(&e.to_string())));
            ctx.page(e.status_logged(), &page)
        }
        Err(e) => error_page(&ctx, e),
    }
}

pub async fn delete_topic<S: Store>(
    State(state): State<AppState<S>>,
    session: Session,
    uri: Uri,
    Path(id): Path<String>,
    form: Result<Form<CsrfForm>, FormRejection>,
) -> Response {
    let ctx = Ctx::new(&session, &uri);
    let (Ok(id), Ok(Form(form))) = (id_of(&id, "topic"), form) else { return error_page(&ctx, bad_form()) };
    let user = match authorise(&session, &ctx, &form.csrf, &format!("/t/{id}")) {
        Ok(u) => u,
        Err(res) => return *res,
    };
    let done = async {
        // Read first: where to go afterwards.
        let topic = state.store.topic(id).await?;
        topics::delete_topic(&state, user, id).await?;
        Ok::<_, AppError>(topic.community)
    };
    match done.await {
        Ok(community) => see_other(&format!("/c/{community}")),
        Err(e) => error_page(&ctx, e),
    }
}

fn edit_post_page(ctx: &Ctx, topic: i64, post: i64, body: String, error: Option<String>) -> EditPage {
    EditPage {
        ctx: ctx.clone(),
        heading: "Edit comment",
        action: format!("/t/{topic}/p/{post}/edit"),
        cancel: format!("/t/{topic}#p{post}"),
        body,
        required: true,
        error,
    }
}

pub async fn edit_post_form<S: Store>(
    State(state): State<AppState<S>>,
    session: Session,
    uri: Uri,
    Path((topic, post)): Path<(String, String)>,
) -> Response {
    let ctx = Ctx::new(&session, &uri);
    let Some(user) = &ctx.user else { return login_first(&ctx.here) };
    let found = async {
        let (topic, post) = (id_of(&topic, "topic")?, id_of(&post, "post")?);
        Ok::<_, AppError>((topic, post, read::edit_source(&state, user, topic, Some(post)).await?))
    };
    match found.await {
        Ok((topic, post, body)) => ctx.page(StatusCode::OK, &edit_post_page(&ctx, topic, post, body, None)),
        Err(e) => error_page(&ctx, e),
    }
}

pub async fn edit_post<S: Store>(
    State(state): State<AppState<S>>,
    session: Session,
    ip: ClientIp,
    uri: Uri,
    Path((topic, post)): Path<(String, String)>,
    form: Result<Form<EditForm>, FormRejection>,
) -> Response {
    let ctx = Ctx::new(&session, &uri);
    let (Ok(topic), Ok(post), Ok(Form(form))) = (id_of(&topic, "topic"), id_of(&post, "post"), form) else {
        return error_page(&ctx, bad_form());
    };
    let user = match authorise(&session, &ctx, &form.csrf, &format!("/t/{topic}")) {
        Ok(u) => u,
        Err(res) => return *res,
    };
    let done =
        async { Ok::<_, AppError>(posts::edit_post(&state, user, ip, post, Body::parse(&form.body)?).await?.topic_id) };
    match done.await {
        Ok(topic) => see_other(&format!("/t/{topic}#p{post}")),
        Err(e) if shown_on_form(&e) => {
            let page = edit_post_page(&ctx, topic, post, form.body, Some(capitalise(&e.to_string())));
            ctx.page(e.status_logged(), &page)
        }
        Err(e) => error_page(&ctx, e),
    }
}

pub async fn delete_post<S: Store>(
    State(state): State<AppState<S>>,
    session: Session,
    uri: Uri,
    Path((topic, post)): Path<(String, String)>,
    form: Result<Form<CsrfForm>, FormRejection>,
) -> Response {
    let ctx = Ctx::new(&session, &uri);
    let (Ok(topic), Ok(post), Ok(Form(form))) = (id_of(&topic, "topic"), id_of(&post, "post"), form) else {
        return error_page(&ctx, bad_form());
    };
    let user = match authorise(&session, &ctx, &form.csrf, &format!("/t/{topic}")) {
        Ok(u) => u,
        Err(res) => return *res,
    };
    match posts::delete_post(&state, user, post).await {
        Ok(topic_id) => see_other(&format!("/t/{topic_id}#p{post}")),
        Err(e) => error_page(&ctx, e),
    }
}
