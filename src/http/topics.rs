//! Topic routes: the cached topic page (the benchmark's 99 %), listings
//! with cursors, and creating, editing, deleting and voting on topics.

use std::sync::Arc;

use axum::Router;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde::{Deserialize, Serialize};

use super::extract::{AuthUser, Json, Path, Query};
use super::limits::{Action, ClientIp, Who};
use super::{AppState, commit};
use crate::cache::{Audience, Rendered, Variant, respond};
use crate::error::{AppError, AppResult};
use crate::model::{
    Body, CommunityName, Link, Post, Restricted, Timestamp, Title, Topic, User, Viewer, VoteTarget, redact,
};
use crate::store::{Cursor, ListTopics, NewTopic, PostSort, Store, TimeWindow, TopicSort};

pub fn router<S: Store>() -> Router<AppState<S>> {
    Router::new()
        .route("/topics", get(list_front::<S>))
        .route("/topics/{id}/vote", post(vote_topic::<S>))
        .route("/communities/{name}/topics", get(list_community::<S>).post(api_create_topic::<S>))
}

/// `/api/v1/topics/{id}`, merged by `http::router` at the top level rather
/// than under the `/api/v1` nest (see there). Its body limit is the default.
pub fn item_router<S: Store>() -> Router<AppState<S>> {
    Router::new()
        .route("/api/v1/topics/{id}", get(get_topic::<S>).patch(api_edit_topic::<S>).delete(api_delete_topic::<S>))
}

#[derive(Deserialize)]
pub struct TopicQuery {
    pub sort: Option<String>,
    pub html: Option<String>,
}

/// `?html=`: whether a topic's post list carries `body_html` too.
pub fn parse_html(s: Option<&str>) -> AppResult<bool> {
    match s {
        None | Some("false") => Ok(false),
        Some("true") => Ok(true),
        Some(_) => Err(AppError::BadRequest("invalid_query", "html must be true or false".into())),
    }
}

pub fn parse_post_sort(s: Option<&str>) -> AppResult<PostSort> {
    match s {
        None | Some("best") => Ok(PostSort::Best),
        Some("new") => Ok(PostSort::New),
        Some("old") => Ok(PostSort::Old),
        Some(_) => Err(AppError::BadRequest("invalid_query", "sort must be one of best, new, old".into())),
    }
}

#[derive(Serialize)]
struct TopicResponse<'a> {
    topic: &'a Topic,
    posts: Vec<ListedPost<'a>>,
}

/// A post as a topic's post list carries it: `Post` without what the list
/// already says or what is at its default. The topic's id is the topic's;
/// `parent_id` is there for replies only, `edited_at` once edited, `deleted`
/// and `removed` when true; `body_html` only when asked for (`?html=true`).
/// The post list is what every read sends and what the cache holds, and a
/// realistic post's field names and default values were about half the
/// size of its text; the pages render from the stored HTML without this
/// JSON. `tests/it/api.rs` checks the shape.
#[derive(Serialize)]
struct ListedPost<'a> {
    id: i64,
    #[serde(skip_serializing_if = "Option::is_none")]
    parent_id: Option<i64>,
    author: Option<&'a str>,
    body: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    body_html: Option<&'a str>,
    created_at: Timestamp,
    #[serde(skip_serializing_if = "Option::is_none")]
    edited_at: Option<Timestamp>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    deleted: bool,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    removed: bool,
    score: i64,
}

impl<'a> ListedPost<'a> {
    fn of(p: &'a Post, html: bool) -> ListedPost<'a> {
        ListedPost {
            id: p.id,
            parent_id: p.parent_id,
            author: p.author.as_deref(),
            body: &p.body,
            body_html: html.then_some(p.body_html.as_str()),
            created_at: p.created_at,
            edited_at: p.edited_at,
            deleted: p.deleted,
            removed: p.removed,
            score: p.score,
        }
    }
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
    let rendered = cached_public(&state, id, sort, html).await?;
    if let Some(restricted) = &rendered.restricted {
        let (mut parts, _) = req.into_parts();
        if let Some(viewer) = privileged_viewer(&state, &mut parts, restricted).await {
            let private = render(&state, id, sort, html, viewer).await?;
            private.gzip_ready(&parts.headers).await;
            return Ok(respond(&private, &parts.headers, Audience::Private));
        }
        if restricted.topic_removed {
            return Err(AppError::not_found("topic"));
        }
        rendered.gzip_ready(&parts.headers).await;
        return Ok(respond(&rendered, &parts.headers, Audience::Public));
    }
    rendered.gzip_ready(req.headers()).await;
    Ok(respond(&rendered, req.headers(), Audience::Public))
}

/// Evicts every rendering of `topic` after a write to it committed, and
/// renders again, in the background, the API renderings that were cached:
/// a topic read often enough to be cached is read again soon, and that
/// reader would otherwise wait for the render (the 1 % of reads behind
/// the open-loop p99, docs/BENCHMARKS.md). A topic nobody reads is not
/// rendered; the pages and post fragments render on their next request.
pub fn evict<S: Store>(state: &AppState<S>, topic: i64) {
    let api: Vec<(PostSort, bool)> =
        state.cache.invalidate(topic).into_iter().filter_map(Variant::json_params).collect();
    if api.is_empty() {
        return;
    }
    let state = state.clone();
    tokio::spawn(async move {
        for (sort, html) in api {
            // A failure (the topic deleted meanwhile, say) is the next
            // reader's to see, through the ordinary miss.
            let _ = cached_public(&state, topic, sort, html).await;
        }
    });
}

/// The public API rendering of a topic, from the cache or rendered once
/// for every reader that misses it at the same time.
async fn cached_public<S: Store>(state: &AppState<S>, id: i64, sort: PostSort, html: bool) -> AppResult<Arc<Rendered>> {
    state.cache.get_or_render((id, Variant::json(sort, html)), || render(state, id, sort, html, Viewer::Public)).await
}

/// Reads and renders the topic as `viewer` may see it. The public view of
/// a removed topic is an empty body carrying its restriction: cached like
/// any other, so even its 404s are answered without a query.
async fn render<S: Store>(
    state: &AppState<S>,
    id: i64,
    sort: PostSort,
    html: bool,
    viewer: Viewer,
) -> AppResult<Arc<Rendered>> {
    let (mut topic, mut posts) = state.store.topic_with_posts(id, sort).await?;
    // Serialising a big topic takes milliseconds: keep it off
    // the async workers.
    let rendered = tokio::task::spawn_blocking(move || {
        let restricted = Restricted::of(&topic, &posts);
        let visible = redact(&mut topic, &mut posts, viewer);
        let body = if visible {
            let posts = posts.iter().map(|p| ListedPost::of(p, html)).collect();
            // The cache copies these bytes into an allocation of their
            // size class, without the growth slack of this Vec.
            serde_json::to_vec(&TopicResponse { topic: &topic, posts })
                .map_err(|e| AppError::Internal(e.to_string()))?
        } else if viewer == Viewer::Public {
            Vec::new()
        } else {
            return Err(AppError::not_found("topic"));
        };
        Ok(Arc::new(Rendered::restricted(body, restricted)))
    })
    .await
    .map_err(|e| AppError::Internal(e.to_string()))??;
    Ok(rendered)
}

/// The viewer behind the request's token when they may see more of this
/// topic than the public: a site admin or moderator of its community sees
/// everything, the author of removed content their own. A missing or bad
/// token, or a failed lookup, leaves the request public (it fails closed).
async fn privileged_viewer<S: Store>(
    state: &AppState<S>,
    parts: &mut axum::http::request::Parts,
    restricted: &Restricted,
) -> Option<Viewer> {
    use axum::extract::FromRequestParts;
    if !parts.headers.contains_key(header::AUTHORIZATION) {
        return None;
    }
    let user = AuthUser::from_request_parts(parts, state).await.ok()?.user;
    if user.is_admin {
        return Some(Viewer::Moderator);
    }
    match state.store.is_moderator(user.id, restricted.community_id).await {
        Ok(true) => Some(Viewer::Moderator),
        _ if restricted.concerns(user.id) => Some(Viewer::Author(user.id)),
        _ => None,
    }
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
    Ok(ListTopics { community, sort, after, limit })
}

async fn list(state: &AppState<impl Store>, q: ListTopics) -> AppResult<Response> {
    let page = state.store.list_topics(q).await?;
    let next = page.next.map(|c| c.encode());
    Ok(axum::Json(ListResponse { topics: page.topics, next }).into_response())
}

async fn list_front<S: Store>(
    axum::extract::State(state): axum::extract::State<AppState<S>>,
    Query(q): Query<ListQuery>,
) -> AppResult<Response> {
    list(&state, parse_list(None, q)?).await
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
    let community = CommunityName::parse(&name.to_ascii_lowercase()).map_err(|_| AppError::not_found("community"))?;
    let new = new_topic(community, &req.title, req.body.as_deref(), req.url.as_deref())?;
    let topic = create_topic(&state, auth.user, ip, new).await?;
    Ok((StatusCode::CREATED, [(header::LOCATION, format!("/api/v1/topics/{}", topic.id))], axum::Json(topic))
        .into_response())
}

/// A submitted topic's fields, checked; an empty body or link is none.
pub fn new_topic(community: CommunityName, title: &str, body: Option<&str>, url: Option<&str>) -> AppResult<NewTopic> {
    Ok(NewTopic {
        community,
        title: Title::parse(title)?,
        body: body.filter(|b| !b.trim().is_empty()).map(Body::parse).transpose()?,
        url: url.filter(|u| !u.is_empty()).map(Link::parse).transpose()?,
    })
}

/// Submits a topic for the API and the forms alike: the rate limit, the
/// write and the live event.
pub async fn create_topic<S: Store>(state: &AppState<S>, user: User, ip: ClientIp, new: NewTopic) -> AppResult<Topic> {
    state.limits.check(Action::Post, ip, Who::User(user.id))?;
    commit(state, move |st| async move {
        let topic = st.store.create_topic(&user, new).await?;
        st.live.topic_created(&topic);
        Ok(topic)
    })
    .await
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
    Path(id): Path<i64>,
    Json(req): Json<EditTopic>,
) -> AppResult<Response> {
    let body = req.body.ok_or_else(|| AppError::Validation("body is required (null or \"\" clears it)".into()))?;
    let body = body.as_deref().filter(|b| !b.trim().is_empty()).map(Body::parse).transpose()?;
    Ok(axum::Json(edit_topic(&state, auth.user, id, body).await?).into_response())
}

/// Sets or clears (`None`) a topic's body, then evicts its renderings.
pub async fn edit_topic<S: Store>(state: &AppState<S>, user: User, id: i64, body: Option<Body>) -> AppResult<Topic> {
    commit(state, move |st| async move {
        let topic = st.store.edit_topic(&user, id, body).await?;
        evict(&st, id);
        Ok(topic)
    })
    .await
}

async fn api_delete_topic<S: Store>(
    axum::extract::State(state): axum::extract::State<AppState<S>>,
    auth: AuthUser,
    Path(id): Path<i64>,
) -> AppResult<StatusCode> {
    delete_topic(&state, auth.user, id).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Deletes a topic (its author, or an admin), then evicts its renderings.
pub async fn delete_topic<S: Store>(state: &AppState<S>, user: User, id: i64) -> AppResult<()> {
    commit(state, move |st| async move {
        st.store.delete_topic(&user, id).await?;
        evict(&st, id);
        Ok(())
    })
    .await
}

#[derive(Deserialize)]
pub struct VoteRequest {
    pub value: i8,
}

fn check_vote(v: i8) -> AppResult<i8> {
    if (-1..=1).contains(&v) { Ok(v) } else { Err(AppError::Validation("value must be -1, 0 or 1".into())) }
}

async fn vote_topic<S: Store>(
    axum::extract::State(state): axum::extract::State<AppState<S>>,
    auth: AuthUser,
    ip: ClientIp,
    Path(id): Path<i64>,
    Json(req): Json<VoteRequest>,
) -> AppResult<Response> {
    cast_vote(&state, auth, ip, VoteTarget::Topic(id), req.value).await
}

/// Records a vote on a topic or post, then evicts the topic's render and
/// publishes the new score; shared by both vote routes.
pub async fn cast_vote<S: Store>(
    state: &AppState<S>,
    auth: AuthUser,
    ip: ClientIp,
    target: VoteTarget,
    value: i8,
) -> AppResult<Response> {
    let value = check_vote(value)?;
    state.limits.check(Action::Vote, ip, Who::User(auth.user.id))?;
    let (is_post, id) = match target {
        VoteTarget::Topic(id) => (false, id),
        VoteTarget::Post(id) => (true, id),
    };
    let outcome = commit(state, move |st| async move {
        let outcome = st.store.vote(&auth.user, target, value).await?;
        evict(&st, outcome.topic_id);
        st.live.score(is_post, id, outcome.topic_id, outcome.score);
        Ok(outcome)
    })
    .await?;
    Ok(axum::Json(outcome).into_response())
}
