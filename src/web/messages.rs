//! Private messages in pages: `/messages` (the viewer's conversations),
//! `/messages/{name}` (one conversation, oldest of the page first, and a
//! form to send; opening it marks it read), reporting a received message
//! (`/messages/{name}/report`), and the administrators' list of reported
//! messages (`/admin/message-reports`). Every form posts and redirects;
//! none needs the script.

use askama::Template;
use axum::extract::rejection::FormRejection;
use axum::extract::{Form, Path, Query, State};
use axum::http::{StatusCode, Uri};
use axum::response::Response;
use serde::Deserialize;

use super::forms::{accept, id_of, login_first, shown_on_form};
use super::view::Time;
use super::{Ctx, Session, error_page, see_other};
use crate::app::limits::ClientIp;
use crate::app::messages::{self, PageQuery};
use crate::app::{AppError, AppState, inbox};
use crate::model::{Body, Conversation, Message, MessageReport, User};
use crate::store::Store;

/// A conversation as the list shows it.
pub struct ConversationRow {
    pub c: Conversation,
    pub at: Time,
}

#[derive(Template)]
#[template(path = "messages.html")]
struct ConversationsPage {
    ctx: Ctx,
    rows: Vec<ConversationRow>,
    next: Option<String>,
}

#[derive(Deserialize, Default)]
pub struct PageParams {
    #[serde(default)]
    after: Option<String>,
    /// Set after a report, to say it was sent.
    #[serde(default)]
    reported: Option<String>,
}

impl PageParams {
    /// The page asked for; a cursor that is not one names nothing.
    fn page(&self) -> Result<crate::store::IdPage, AppError> {
        let after = match self.after.as_deref() {
            None | Some("") => None,
            Some(s) => Some(s.parse::<i64>().map_err(|_| AppError::not_found("page"))?),
        };
        PageQuery { after, limit: None }.parse()
    }
}

/// `GET /messages`.
pub async fn list<S: Store>(
    State(state): State<AppState<S>>,
    session: Session,
    uri: Uri,
    Query(p): Query<PageParams>,
) -> Response {
    let ctx = Ctx::new(&session, &uri);
    let Some(user) = &ctx.user else { return login_first(&ctx.here) };
    let found = async { messages::conversations(&state, user, p.page()?).await };
    let page = match found.await {
        Ok(page) => page,
        Err(e) => return error_page(&ctx, e),
    };
    let rows = page.conversations.into_iter().map(|c| ConversationRow { at: Time::of(c.last_at), c }).collect();
    let next = page.next.map(|n| format!("/messages?after={n}"));
    ctx.page(StatusCode::OK, &ConversationsPage { ctx: ctx.clone(), rows, next })
}

/// A message as its conversation's page shows it.
pub struct MessageRow {
    pub m: Message,
    pub at: Time,
    /// Sent by the viewer.
    pub mine: bool,
}

#[derive(Template)]
#[template(path = "conversation.html")]
struct ConversationPage {
    ctx: Ctx,
    with: String,
    /// Oldest first.
    rows: Vec<MessageRow>,
    /// The older messages' page.
    older: Option<String>,
    draft: String,
    error: Option<String>,
    reported: bool,
}

/// The conversation with `with` for `user`, with a draft and an error to
/// show next to the form; reading it marks it read.
async fn conversation<S: Store>(
    state: &AppState<S>,
    ctx: &Ctx,
    user: &User,
    with: String,
    p: &PageParams,
    (draft, error): (String, Option<AppError>),
) -> Response {
    let found = async { messages::conversation(state, user, with, p.page()?).await };
    let page = match found.await {
        Ok(page) => page,
        Err(e) => return error_page(ctx, e),
    };
    // Reading may have marked notifications read: the header counts again.
    let mut ctx = ctx.clone();
    ctx.unread = inbox::unread(state, user).await.unwrap_or(ctx.unread);
    let rows = page
        .messages
        .into_iter()
        .rev()
        .map(|m| MessageRow { at: Time::of(m.created_at), mine: m.from == user.name, m })
        .collect();
    let status = error.as_ref().map_or(StatusCode::OK, AppError::status);
    let older = page.next.map(|n| format!("/messages/{}?after={n}", page.with));
    let t = ConversationPage {
        ctx: ctx.clone(),
        with: page.with,
        rows,
        older,
        draft,
        error: error.map(|e| e.to_string()),
        reported: p.reported.is_some(),
    };
    ctx.page(status, &t)
}

/// `GET /messages/{name}`.
pub async fn show<S: Store>(
    State(state): State<AppState<S>>,
    session: Session,
    uri: Uri,
    Path(name): Path<String>,
    Query(p): Query<PageParams>,
) -> Response {
    let ctx = Ctx::new(&session, &uri);
    let Some(user) = ctx.user.clone() else { return login_first(&ctx.here) };
    conversation(&state, &ctx, &user, name, &p, (String::new(), None)).await
}

#[derive(Deserialize)]
pub struct SendForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    body: String,
}

/// `POST /messages/{name}`: sends, then back to the conversation; a
/// refusal shows next to the form with the text kept.
pub async fn send<S: Store>(
    State(state): State<AppState<S>>,
    session: Session,
    uri: Uri,
    ip: ClientIp,
    Path(name): Path<String>,
    form: Result<Form<SendForm>, FormRejection>,
) -> Response {
    let here = format!("/messages/{name}");
    let (ctx, user, form) = match accept(&session, &uri, form, &here, |f: &SendForm| &f.csrf) {
        Ok(accepted) => accepted,
        Err(res) => return *res,
    };
    let sent = match Body::parse(&form.body) {
        Ok(body) => messages::send(&state, user.clone(), ip, name.clone(), body).await,
        Err(e) => Err(e.into()),
    };
    match sent {
        Ok(m) => see_other(&format!("/messages/{}#m{}", m.to, m.id)),
        Err(e) if shown_on_form(&e) => {
            let ctx = Ctx { here: here.clone(), ..ctx };
            conversation(&state, &ctx, &user, name, &PageParams::default(), (form.body, Some(e))).await
        }
        Err(e) => error_page(&ctx, e),
    }
}

#[derive(Deserialize)]
pub struct ReportForm {
    #[serde(default)]
    csrf: String,
    /// The message's id.
    #[serde(default)]
    message: String,
    #[serde(default)]
    reason: String,
}

/// `POST /messages/{name}/report`: the viewer reports a message `name`
/// sent them, then back to the conversation.
pub async fn report<S: Store>(
    State(state): State<AppState<S>>,
    session: Session,
    uri: Uri,
    ip: ClientIp,
    Path(name): Path<String>,
    form: Result<Form<ReportForm>, FormRejection>,
) -> Response {
    let back = format!("/messages/{name}");
    let (ctx, user, form) = match accept(&session, &uri, form, &back, |f: &ReportForm| &f.csrf) {
        Ok(accepted) => accepted,
        Err(res) => return *res,
    };
    let reported = async { messages::report(&state, &user, ip, id_of(&form.message, "message")?, &form.reason).await };
    match reported.await {
        Ok(_) => see_other(&format!("{back}?reported=1")),
        Err(e) => error_page(&ctx, e),
    }
}

#[derive(Template)]
#[template(path = "message_reports.html")]
struct ReportsPage {
    ctx: Ctx,
    reports: Vec<ReportRow>,
    open_only: bool,
    next: Option<String>,
}

/// A reported message as the administrators' page shows it.
pub struct ReportRow {
    pub r: MessageReport,
    pub at: Time,
    pub sent: Time,
}

#[derive(Deserialize, Default)]
pub struct ReportsParams {
    #[serde(default)]
    after: Option<String>,
    /// `all` shows closed reports too.
    #[serde(default)]
    show: Option<String>,
}

/// `GET /admin/message-reports`: open reports (`?show=all`: every one),
/// each with the message reported; administrators only.
pub async fn reports<S: Store>(
    State(state): State<AppState<S>>,
    session: Session,
    uri: Uri,
    Query(p): Query<ReportsParams>,
) -> Response {
    let ctx = Ctx::new(&session, &uri);
    let Some(user) = &ctx.user else { return login_first(&ctx.here) };
    let open_only = p.show.as_deref() != Some("all");
    let found = async {
        let page = PageParams { after: p.after.clone(), reported: None }.page()?;
        messages::reports(&state, user, open_only.then_some("open"), page).await
    };
    let page = match found.await {
        Ok(page) => page,
        Err(e) => return error_page(&ctx, e),
    };
    let reports = page
        .reports
        .into_iter()
        .map(|r| ReportRow { at: Time::of(r.created_at), sent: Time::of(r.message.created_at), r })
        .collect();
    let show = if open_only { "" } else { "&show=all" };
    let next = page.next.map(|n| format!("/admin/message-reports?after={n}{show}"));
    ctx.page(StatusCode::OK, &ReportsPage { ctx: ctx.clone(), reports, open_only, next })
}

/// `POST /admin/message-reports/{id}`: resolves or dismisses a report.
pub async fn resolve<S: Store>(
    State(state): State<AppState<S>>,
    session: Session,
    uri: Uri,
    Path(id): Path<String>,
    form: Result<Form<super::moderate::ResolveForm>, FormRejection>,
) -> Response {
    let back = "/admin/message-reports";
    let (ctx, user, form) = match accept(&session, &uri, form, back, |f| &f.csrf) {
        Ok(accepted) => accepted,
        Err(res) => return *res,
    };
    let resolved = async { messages::resolve(&state, &user, id_of(&id, "report")?, &form.status).await };
    match resolved.await {
        Ok(_) => see_other(back),
        Err(e) => error_page(&ctx, e),
    }
}
