//! The topic page (`/t/{id}`) and the single-post fragment the script
//! fetches when a post arrives live.
//!
//! Signed-out readers (the common case) share one rendering per post
//! order, kept in `state.cache` next to the API's JSON and evicted by the
//! same `invalidate(topic_id)` every write calls; it is answered with its
//! own ETag (304) and gzip variant. A signed-in reader gets a page of
//! their own (their CSRF token, menu, edit and moderation controls, and
//! what `redact` lets them see), rendered per request: see docs/WEB.md
//! ("Page cache") for the measurements behind that choice.

use std::sync::Arc;

use askama::Template;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, Uri, header};
use axum::response::{IntoResponse, Redirect, Response};
use serde::Deserialize;

use super::forms::{id_of, is_fetch};
use super::pages::Tab;
use super::view::{Item, PostView, TopicRow, thread};
use super::{Ctx, Session, error_page, see_other};
use crate::app::AppState;
use crate::app::accounts::blocking;
use crate::app::{AppError, AppResult};
use crate::cache::{Audience, Rendered, Variant, respond};
use crate::model::{Post, Restricted, Topic, User, Viewer, redact};
use crate::store::{PostSort, Store};

/// The topic as its page shows it.
pub struct TopicView {
    pub row: TopicRow,
    pub body_html: String,
    pub edited: bool,
    pub removed: bool,
    /// Deleted by its author: the title and comments stay, as on Reddit.
    pub deleted: bool,
    /// The viewer may edit and delete it.
    pub mine: bool,
    /// The viewer may report it (signed in, someone else's).
    pub report: bool,
}

impl TopicView {
    fn of(t: &Topic, viewer: Option<&User>) -> TopicView {
        TopicView {
            row: TopicRow::of(t),
            body_html: t.body_html.clone().unwrap_or_default(),
            edited: t.edited_at.is_some(),
            removed: t.removed,
            deleted: t.deleted,
            mine: !t.deleted && viewer.is_some_and(|u| u.is_admin || u.id == t.author_id),
            report: !t.deleted && !t.removed && viewer.is_some_and(|u| u.id != t.author_id),
        }
    }
}

#[derive(Template)]
#[template(path = "topic.html")]
struct TopicPage {
    ctx: Ctx,
    t: TopicView,
    items: Vec<Item>,
    tabs: Vec<Tab>,
    can_reply: bool,
    /// The viewer moderates the topic's community (or is an admin).
    moderator: bool,
    /// A comment as this viewer would see a new one, for the script to
    /// fill in from a live event (`<template id="post-proto">`).
    proto: PostView,
    max_indent: usize,
}

/// Stand for the id and author in `proto`; the script replaces them. The
/// id is beyond any real one, and the name is no valid username.
const PROTO_ID: i64 = 9_007_199_254_740_991;
const PROTO_AUTHOR: &str = "~author~";

/// A new comment by someone else, with the controls `user` gets on it.
fn proto(topic_id: i64, user: Option<&User>, moderating: Option<&str>) -> PostView {
    let p = PostView {
        id: PROTO_ID,
        topic_id,
        author: Some(PROTO_AUTHOR.to_owned()),
        // Not empty, or the template would show "[removed]" instead.
        body_html: "<p></p>".to_owned(),
        created: super::view::Time { iso: String::new(), text: String::new() },
        edited: false,
        deleted: false,
        removed: false,
        score: 0,
        mine: false,
        report: user.is_some(),
        moderate: None,
        depth: 0,
    };
    p.moderated(moderating)
}

#[derive(Deserialize)]
pub struct SortParams {
    sort: Option<String>,
}

pub async fn show<S: Store>(
    State(state): State<AppState<S>>,
    session: Session,
    uri: Uri,
    headers: HeaderMap,
    Path(id): Path<String>,
    Query(q): Query<SortParams>,
) -> Response {
    let ctx = Ctx::new(&session, &uri);
    let found = async {
        let id = id_of(&id, "topic")?;
        let sort = crate::app::read::parse_post_sort(q.sort.as_deref())?;
        match ctx.user {
            None => public_page(&state, id, sort, &headers).await,
            Some(_) => render_topic_page(&state, &ctx, id, sort).await,
        }
    };
    found.await.unwrap_or_else(|e| error_page(&ctx, e))
}

/// The signed-out page: from the cache, 304 when the browser has it.
async fn public_page<S: Store>(
    state: &AppState<S>,
    id: i64,
    sort: PostSort,
    headers: &HeaderMap,
) -> AppResult<Response> {
    let key = (id, Variant::Page(sort));
    let rendered = state.cache.get_or_render(key, || render_public_page(state, id, sort)).await?;
    if rendered.body.is_empty() {
        return Err(AppError::not_found("topic")); // removed: hidden from the public
    }
    rendered.gzip_ready(headers).await;
    let mut res = respond(&rendered, headers, Audience::Public);
    res.headers_mut().insert(header::LINK, link_canonical(id));
    Ok(res)
}

/// Renders the public view. A removed topic's is an empty body carrying
/// its restriction, cached like the API's, so even its 404s cost no query.
async fn render_public_page<S: Store>(state: &AppState<S>, id: i64, sort: PostSort) -> AppResult<Arc<Rendered>> {
    let (mut topic, mut posts) = state.store.topic_with_posts(id, sort).await?;
    // Markdown and the template take milliseconds on a long thread: keep
    // them off the async workers.
    blocking(move || {
        let restricted = Restricted::of(&topic, &posts);
        if !redact(&mut topic, &mut posts, Viewer::Public) {
            return Ok(Arc::new(Rendered::html(Vec::new(), restricted)));
        }
        // The same bytes for every visitor, whatever query they came with.
        let here = match sort {
            PostSort::Best => format!("/t/{id}"),
            _ => format!("/t/{id}?sort={}", sort_key(sort)),
        };
        let html = page_html(Ctx::public(here), &topic, &posts, sort, false)?;
        Ok(Arc::new(Rendered::html(html.into_bytes(), restricted)))
    })
    .await?
}

/// The whole topic page for a signed-in viewer, rendered for this request.
pub async fn render_topic_page<S: Store>(
    state: &AppState<S>,
    ctx: &Ctx,
    id: i64,
    sort: PostSort,
) -> AppResult<Response> {
    let (topic, posts, viewer) = read_topic(state, id, sort, ctx.user.as_ref()).await?;
    let page_ctx = ctx.clone();
    let html = blocking(move || page_html(page_ctx, &topic, &posts, sort, viewer == Viewer::Moderator)).await??;
    let mut res = ctx.html(StatusCode::OK, html);
    res.headers_mut().insert(header::LINK, link_canonical(id));
    Ok(res)
}

fn sort_key(sort: PostSort) -> &'static str {
    match sort {
        PostSort::Best => "best",
        PostSort::New => "new",
        PostSort::Old => "old",
    }
}

/// The page's HTML for `ctx`'s viewer, from a topic already redacted for
/// them.
fn page_html(ctx: Ctx, topic: &Topic, posts: &[Post], sort: PostSort, moderator: bool) -> AppResult<String> {
    let id = topic.id;
    let user = ctx.user.as_ref();
    let tabs = [("best", "Best"), ("new", "New"), ("old", "Old")]
        .into_iter()
        .map(|(key, label)| Tab { href: format!("/t/{id}?sort={key}#comments"), label, current: key == sort_key(sort) })
        .collect();
    let moderating = moderator.then_some(topic.community.as_str());
    let page = TopicPage {
        t: TopicView::of(topic, user),
        items: thread(posts, user, moderating),
        tabs,
        can_reply: user.is_some() && !topic.deleted && (!topic.locked || moderator),
        moderator,
        proto: proto(id, user, moderating),
        max_indent: super::view::MAX_INDENT,
        ctx,
    };
    page.render().map_err(|e| AppError::Internal(e.to_string()))
}

/// Reads a topic and its posts as `user` may see them: moderators (and
/// admins) see removed content, authors their own, everyone else neither.
pub async fn read_topic<S: Store>(
    state: &AppState<S>,
    id: i64,
    sort: PostSort,
    user: Option<&User>,
) -> AppResult<(Topic, Vec<Post>, Viewer)> {
    let (mut topic, mut posts) = state.store.topic_with_posts(id, sort).await?;
    let viewer = match user {
        None => Viewer::Public,
        Some(u) if u.is_admin => Viewer::Moderator,
        // A failed lookup shows no more than to anyone (fails closed).
        Some(u) => match state.store.is_moderator(u.id, topic.community_id).await {
            Ok(true) => Viewer::Moderator,
            _ => Viewer::Author(u.id),
        },
    };
    if !redact(&mut topic, &mut posts, viewer) {
        return Err(AppError::not_found("topic"));
    }
    Ok((topic, posts, viewer))
}

fn link_canonical(id: i64) -> HeaderValue {
    HeaderValue::from_str(&format!("</t/{id}>; rel=\"canonical\"")).unwrap_or_else(|_| HeaderValue::from_static(""))
}

/// `/t/{id}/{slug}`: links may carry the title; the page lives at `/t/{id}`.
pub async fn slug_redirect(Path((id, _slug)): Path<(String, String)>) -> Response {
    match id.parse::<i64>() {
        Ok(id) if id > 0 => Redirect::permanent(&format!("/t/{id}")).into_response(),
        _ => super::not_found_page(&Uri::from_static("/t")),
    }
}

#[derive(Template)]
#[template(path = "post_fragment.html")]
struct PostFragment {
    p: PostView,
}

/// `/t/{id}/p/{post}`: the post alone, as HTML, for the script (which asks
/// with `X-Pith-Fetch`); a browser is sent to the post in its topic.
pub async fn post_fragment<S: Store>(
    State(state): State<AppState<S>>,
    session: Session,
    uri: Uri,
    headers: HeaderMap,
    Path((id, post)): Path<(String, String)>,
) -> Response {
    let ctx = Ctx::new(&session, &uri);
    let (Ok(id), Ok(post)) = (id_of(&id, "topic"), id_of(&post, "post")) else {
        return error_page(&ctx, AppError::not_found("post"));
    };
    if !is_fetch(&headers) {
        return see_other(&format!("/t/{id}#p{post}"));
    }
    let found = match &ctx.user {
        // Every signed-out page open on the topic asks for the same new
        // post at once: one render, then the cache, until the next write.
        None => state
            .cache
            .get_or_render((id, Variant::Post(post)), || public_fragment(&state, id, post))
            .await
            .map(|r| respond(&r, &headers, Audience::Public)),
        Some(user) => fragment(&state, user, id, post).await,
    };
    found.unwrap_or_else(|e| (e.status(), e.to_string()).into_response())
}

async fn public_fragment<S: Store>(state: &AppState<S>, id: i64, post: i64) -> AppResult<Arc<Rendered>> {
    let (_, posts, _) = read_topic(state, id, PostSort::Old, None).await?;
    let p = posts.iter().find(|p| p.id == post).ok_or_else(|| AppError::not_found("post"))?;
    let html = render_html(PostView::of(p, None, depth_of(&posts, p)))?;
    Ok(Arc::new(Rendered::html(html.into_bytes(), None)))
}

/// The post as `user` sees it: their own controls, and a moderator's.
async fn fragment<S: Store>(state: &AppState<S>, user: &User, id: i64, post: i64) -> AppResult<Response> {
    let (topic, posts, viewer) = read_topic(state, id, PostSort::Old, Some(user)).await?;
    let p = posts.iter().find(|p| p.id == post).ok_or_else(|| AppError::not_found("post"))?;
    let moderating = (viewer == Viewer::Moderator).then_some(topic.community.as_str());
    render_fragment(PostView::of(p, Some(user), depth_of(&posts, p)).moderated(moderating))
}

fn render_html(p: PostView) -> AppResult<String> {
    PostFragment { p }.render().map_err(|e| AppError::Internal(e.to_string()))
}

pub fn render_fragment(p: PostView) -> AppResult<Response> {
    let html = render_html(p)?;
    Ok(([(header::CONTENT_TYPE, "text/html; charset=utf-8"), (header::CACHE_CONTROL, "private, no-cache")], html)
        .into_response())
}

/// How deep `p` sits in its thread (its ancestors that exist).
fn depth_of(posts: &[Post], p: &Post) -> usize {
    let parent = |id: i64| posts.iter().find(|q| q.id == id).and_then(|q| q.parent_id);
    let mut depth = 0;
    let mut at = p.parent_id;
    while let Some(id) = at {
        if depth > posts.len() || !posts.iter().any(|q| q.id == id) {
            break;
        }
        depth += 1;
        at = parent(id);
    }
    depth
}
