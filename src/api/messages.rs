//! Private messages: `POST /messages` (send), `GET /messages` (the user's
//! conversations), `GET /messages/{name}` (one conversation, newest first;
//! reading it marks it read), `POST /messages/{id}/report` (its recipient
//! reports it), and the administrators' `GET /admin/message-reports` and
//! `PATCH /admin/message-reports/{id}`: no route lets anyone else read a
//! message that was not reported.

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, patch, post};
use serde::Deserialize;

use super::extract::{Json, Path, Query};
use crate::app::messages::{self, PageQuery};
use crate::app::{AppResult, AppState, AuthUser, ClientIp};
use crate::model::{Body, ConversationPage, MessagePage, MessageReport, MessageReportPage};
use crate::store::Store;

pub fn router<S: Store>() -> Router<AppState<S>> {
    Router::new()
        .route("/messages", post(send::<S>).get(list_conversations::<S>))
        .route("/messages/{name}", get(conversation::<S>))
        .route("/messages/{id}/report", post(report::<S>))
        .route("/admin/message-reports", get(list_reports::<S>))
        .route("/admin/message-reports/{id}", patch(resolve_report::<S>))
}

#[derive(Deserialize)]
pub struct SendRequest {
    to: String,
    body: String,
}

async fn send<S: Store>(
    State(state): State<AppState<S>>,
    auth: AuthUser,
    ip: ClientIp,
    Json(req): Json<SendRequest>,
) -> AppResult<Response> {
    let body = Body::parse(&req.body)?;
    let message = messages::send(&state, auth.user, ip, req.to, body).await?;
    let location = format!("/api/v1/messages/{}", message.to);
    Ok((StatusCode::CREATED, [(header::LOCATION, location)], axum::Json(message)).into_response())
}

async fn list_conversations<S: Store>(
    State(state): State<AppState<S>>,
    auth: AuthUser,
    Query(q): Query<PageQuery>,
) -> AppResult<axum::Json<ConversationPage>> {
    Ok(axum::Json(messages::conversations(&state, &auth.user, q.parse()?).await?))
}

async fn conversation<S: Store>(
    State(state): State<AppState<S>>,
    auth: AuthUser,
    Path(name): Path<String>,
    Query(q): Query<PageQuery>,
) -> AppResult<axum::Json<MessagePage>> {
    Ok(axum::Json(messages::conversation(&state, &auth.user, name, q.parse()?).await?))
}

#[derive(Deserialize)]
pub struct ReportRequest {
    reason: String,
}

async fn report<S: Store>(
    State(state): State<AppState<S>>,
    auth: AuthUser,
    ip: ClientIp,
    Path(id): Path<i64>,
    Json(req): Json<ReportRequest>,
) -> AppResult<(StatusCode, axum::Json<MessageReport>)> {
    let report = messages::report(&state, &auth.user, ip, id, &req.reason).await?;
    Ok((StatusCode::CREATED, axum::Json(report)))
}

#[derive(Deserialize)]
pub struct ReportsQuery {
    status: Option<String>,
    after: Option<i64>,
    limit: Option<usize>,
}

async fn list_reports<S: Store>(
    State(state): State<AppState<S>>,
    auth: AuthUser,
    Query(q): Query<ReportsQuery>,
) -> AppResult<axum::Json<MessageReportPage>> {
    let page = PageQuery { after: q.after, limit: q.limit }.parse()?;
    Ok(axum::Json(messages::reports(&state, &auth.user, q.status.as_deref(), page).await?))
}

async fn resolve_report<S: Store>(
    State(state): State<AppState<S>>,
    auth: AuthUser,
    Path(id): Path<i64>,
    Json(req): Json<super::moderation::ResolveRequest>,
) -> AppResult<axum::Json<MessageReport>> {
    Ok(axum::Json(messages::resolve(&state, &auth.user, id, &req.status).await?))
}
