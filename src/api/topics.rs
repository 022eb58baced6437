//! Topic routes: the cached topic page (the benchmark's 99 %), listings
//! with cursors, and creating, editing, deleting and voting on topics.

use axum::Router;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde::{Deserialize, Serialize};

use super::extract::{Json, Path, Query};
use crate::app::read::{
    cached_public, parse_html, parse_post_cursor, parse_post_sort, privileged_viewer, public_key, render,
};
use crate::app::topics::{create_topic, delete_topic, edit_topic, new_topic};
use crate::app::{AppError, AppResult, AppState, AuthUser, ClientIp, votes};
use crate::cache::{Audience, respond};
use crate::model::{Body, CommunityName, Topic, VoteTarget};
use crate::store::{Cursor, ListTopics, Store, TimeWindow, TopicSort};

pub fn router<S: Store>() -> Router<AppState<S>> {
    Router::new()
        .route("/topics", get(list_front::<S>))
        .route("/topics/{id}/vote", post(vote_topic::<S>))
        .route("/communities/{name}/topics", get(list_community::<S>).post(api_create_topic::<S>))
}

/// `/api/v1/topics/{id}`, merged by `server::router` at the top level rather
/// than under the `/api/v1` nest (see there). Its body limit is the default.
pub fn item_router<S: Store>() -> Router<AppState<S>> {
    Router::new()
        .route("/api/v1/topics/{id}", get(get_topic::<S>).patch(api_edit_topic::<S>).delete(api_delete_topic::<S>))
}

#[derive(Deserialize)]
pub struct TopicQuery {
    pub sort: Option<String>,
    pub html: Option<String>,
    /// A huge topic's next page: the previous page's `next`.
    pub after: Option<String>,
}

/// The benchmark's hot path: a cache hit costs a map lookup and an `Arc`
/// clone. The request is taken whole so its headers are read in place
/// rather than copied.
///
/// The cache holds the public view. Only a topic with removed content in
/// it looks different to anyone, and only to a signed-in admin, moderator
/// or author of removed content; so a request without a token, or for a
/// topic with nothing removed, never costs more than the lookup.
async fn get_topic<S: Store>(
    axum::extract::State(state): axum::extract::State<AppState<S>>,
    Path(id): Path<i64>,
    Query(q): Query<TopicQuery>,
    req: axum::extract::Request,
) -> AppResult<Response> {
    let sort = parse_post_sort(q.sort.as_deref())?;
    let html = parse_html(q.html.as_deref())?;
    let after = parse_post_cursor(q.after.as_deref(), sort)?;
    let rendered = cached_public(&state, id, sort, html, after).await?;
    if let Some(restricted) = &rendered.restricted {
        let (mut parts, _) = req.into_parts();
        if let Some(viewer) = privileged_viewer(&state, &mut parts, restricted).await {
            let private = render(&state, id, sort, html, after, viewer).await?;
            private.gzip_ready(&parts.headers).await;
            return Ok(respond(&private, &parts.headers, Audience::Private));
        }
        if restricted.topic_removed {
            return Err(AppError::not_found("topic"));
        }
        state.cache.prepare(public_key(id, sort, html, after), &rendered, &parts.headers).await;
        return Ok(respond(&rendered, &parts.headers, Audience::Public));
    }
    state.cache.prepare(public_key(id, sort, html, after), &rendered, req.headers()).await;
    Ok(respond(&rendered, req.headers(), Audience::Public))
}

#[derive(Deserialize)]
pub struct ListQuery {
    sort: Option<String>,
    t: Option<String>,
    after: Option<String>,
    limit: Option<usize>,
}

#[derive(Serialize)]
struct ListResponse {
    topics: Vec<Topic>,
    /// Pass as `after` to get the next page; null on the last page.
    next: Option<String>,
}

/// Validates a listing query; pure, so the `query` fuzz target runs it too.
pub fn parse_list(community: Option<String>, q: ListQuery) -> AppResult<ListTopics> {
    let bad = |m: &str| AppError::BadRequest("invalid_query", m.to_owned());
    let window = match q.t.as_deref() {
        None | Some("day") => TimeWindow::Day,
        Some("week") => TimeWindow::Week,
        Some("month") => TimeWindow::Month,
        Some("year") => TimeWindow::Year,
        Some("all") => TimeWindow::All,
        Some(_) => return Err(bad("t must be one of day, week, month, year, all")),
    };
    let sort = match q.sort.as_deref() {
        None | Some("hot") => TopicSort::Hot,
        Some("new") => TopicSort::New,
        Some("top") => TopicSort::Top(window),
        Some(_) => return Err(bad("sort must be one of hot, new, top")),
    };
    let after = match q.after.as_deref() {
        None | Some("") => None,
        Some(c) => Some(Cursor::decode(c).ok_or_else(|| bad("after is not a valid cursor"))?),
    };
    let matches_sort = matches!(
        (after, sort),
        (None, _)
            | (Some(Cursor::Hot(..)), TopicSort::Hot)
            | (Some(Cursor::New(..)), TopicSort::New)
            | (Some(Cursor::Top(..)), TopicSort::Top(_))
    );
    if !matches_sort {
        return Err(bad("after is a cursor of another sort order"));
    }
    let limit = q.limit.unwrap_or(25);
    if !(1..=100).contains(&limit) {
        return Err(bad("limit must be between 1 and 100"));
    }
    Ok(ListTopics { community, sort, after, limit, hide_blocked_by: None })
}

async fn list(state: &AppState<impl Store>, q: ListTopics) -> AppResult<Response> {
    let page = state.store.list_topics(q).await?;
    let next = page.next.map(|c| c.encode());
    Ok(axum::Json(ListResponse { topics: page.topics, next }).into_response())
}

/// The front page. With a valid bearer token it leaves out the
/// communities the token's user blocked; without one (or with one that is
/// not valid) it is the public listing, as before blocks existed.
async fn list_front<S: Store>(
    axum::extract::State(state): axum::extract::State<AppState<S>>,
    Query(q): Query<ListQuery>,
    mut parts: axum::http::request::Parts,
) -> AppResult<Response> {
    use axum::extract::FromRequestParts;
    let mut listing = parse_list(None, q)?;
    if parts.headers.contains_key(header::AUTHORIZATION) {
        listing.hide_blocked_by = AuthUser::from_request_parts(&mut parts, &state).await.ok().map(|a| a.user.id);
    }
    list(&state, listing).await
}

async fn list_community<S: Store>(
    axum::extract::State(state): axum::extract::State<AppState<S>>,
    Path(name): Path<String>,
    Query(q): Query<ListQuery>,
) -> AppResult<Response> {
    list(&state, parse_list(Some(name), q)?).await
}

#[derive(Deserialize)]
pub struct CreateTopic {
    title: String,
    body: Option<String>,
    url: Option<String>,
}

async fn api_create_topic<S: Store>(
    axum::extract::State(state): axum::extract::State<AppState<S>>,
    auth: AuthUser,
    ip: ClientIp,
    Path(name): Path<String>,
    Json(req): Json<CreateTopic>,
) -> AppResult<Response> {
    let community = CommunityName::named(&name.to_ascii_lowercase()).map_err(|_| AppError::not_found("community"))?;
    let new = new_topic(community, &req.title, req.body.as_deref(), req.url.as_deref())?;
    let topic = create_topic(&state, auth.user, ip, new).await?;
    Ok((StatusCode::CREATED, [(header::LOCATION, format!("/api/v1/topics/{}", topic.id))], axum::Json(topic))
        .into_response())
}

#[derive(Deserialize)]
pub struct EditTopic {
    /// Absent: 422 (there is nothing else to edit); null or "": clear it.
    #[serde(default, deserialize_with = "present")]
    body: Option<Option<String>>,
}

/// Tells a field sent as `null` (`Some(None)`) from one left out (`None`).
fn present<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Option<String>>, D::Error> {
    Option::<String>::deserialize(d).map(Some)
}

async fn api_edit_topic<S: Store>(
    axum::extract::State(state): axum::extract::State<AppState<S>>,
    auth: AuthUser,
    ip: ClientIp,
    Path(id): Path<i64>,
    Json(req): Json<EditTopic>,
) -> AppResult<Response> {
    let body = req.body.ok_or_else(|| AppError::Validation("body is required (null or \"\" clears it)".into()))?;
    let body = body.as_deref().filter(|b| !b.trim().is_empty()).map(Body::parse).transpose()?;
    Ok(axum::Json(edit_topic(&state, auth.user, ip, id, body, None).await?).into_response())
}

async fn api_delete_topic<S: Store>(
    axum::extract::State(state): axum::extract::State<AppState<S>>,
    auth: AuthUser,
    Path(id): Path<i64>,
) -> AppResult<StatusCode> {
    delete_topic(&state, auth.user, id).await?;
    Ok(StatusCode::NO_CONTENT)
}

#[derive(Deserialize)]
pub struct VoteRequest {
    pub value: i8,
}

async fn vote_topic<S: Store>(
    axum::extract::State(state): axum::extract::State<AppState<S>>,
    auth: AuthUser,
    ip: ClientIp,
    Path(id): Path<i64>,
    Json(req): Json<VoteRequest>,
) -> AppResult<Response> {
    vote(&state, auth, ip, VoteTarget::Topic(id), req.value).await
}

/// Votes through `app::votes` and answers the new total; shared by both
/// vote routes.
pub async fn vote<S: Store>(
    state: &AppState<S>,
    auth: AuthUser,
    ip: ClientIp,
    target: VoteTarget,
    value: i8,
) -> AppResult<Response> {
    Ok(axum::Json(votes::cast_vote(state, auth.user, ip, target, value).await?).into_response())
}
