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
//!
//! A page holds one part of its topic (`Part`): the first page of
//! comments, a later one (`?after=`, past `PageLimit::WEB`), or the thread
//! under one comment (`?thread=`, past `view::MAX_DEPTH`); each is cached
//! apart and evicted with the rest of its topic. Nothing here reads a
//! whole topic: a huge one made every view a 50-120 MB render (issue 26).

use std::sync::Arc;

use askama::Template;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, Uri, header};
use axum::response::{IntoResponse, Redirect, Response};
use serde::Deserialize;

use super::forms::{id_of, is_fetch};
use super::pages::Tab;
use super::view::{Item, MAX_DEPTH, MAX_INDENT, PostView, TopicRow, thread};
use super::{Ctx, Session, error_page, see_other};
use crate::app::AppState;
use crate::app::accounts::blocking;
use crate::app::read::parse_post_cursor;
use crate::app::saves;
use crate::app::{AppError, AppResult};
use crate::cache::{Audience, Rendered, Variant, respond};
use crate::model::paging::PageLimit;
use crate::model::{Marks, Post, Restricted, Topic, User, Viewer, redact};
use crate::store::{PostCursor, PostSort, Store};

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
    /// The viewer's own vote on it (-1, 0, 1), from `Marks`.
    pub vote: i8,
    /// The viewer saved it.
    pub saved: bool,
    /// The viewer may save it (signed in).
    pub can_save: bool,
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
            vote: 0,
            saved: false,
            can_save: viewer.is_some(),
        }
    }
}

/// Marks the viewer's own votes and saves on the topic and its posts, and
/// collapses the posts of authors they blocked.
fn mark(t: &mut TopicView, items: &mut [Item], marks: &Marks) {
    t.vote = marks.topic_vote;
    t.saved = marks.topic_saved;
    for p in items.iter_mut().filter_map(|i| i.open.as_mut()) {
        p.vote = marks.vote_on(p.id);
        p.saved = marks.saved(p.id);
        p.blocked = p.author.is_some() && marks.blocked(p.author_id);
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
    /// The names of the users the viewer blocked, space-separated: the
    /// script collapses their comments as `proto` shows blocked ones.
    blocked: String,
    max_indent: usize,
    max_depth: usize,
    /// The link to the next page of comments, when there is one.
    next: Option<String>,
    /// A page past the first: it links back to it.
    later: bool,
    /// A thread page: the comment it shows the thread under.
    root: Option<i64>,
    /// The thread holds more replies than one page shows.
    cut: bool,
}

/// Which part of a topic a page shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    /// The first page of comments: the whole topic unless it is huge.
    First,
    /// A later page: the comments after the cursor, in its order.
    After(PostCursor),
    /// The thread under one comment, `MAX_DEPTH` levels of it.
    Thread(i64),
}

/// A part of a topic as read: the topic, the comments, and where the next
/// page starts or whether the thread was cut short.
struct Read {
    topic: Topic,
    posts: Vec<Post>,
    next: Option<PostCursor>,
    cut: bool,
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
        vote: 0,
        saved: false,
        can_save: user.is_some(),
        author_id: 0,
        blocked: false,
        reply: true,
    };
    p.moderated(moderating)
}

#[derive(Deserialize)]
pub struct PageParams {
    sort: Option<String>,
    /// The next page of a huge topic (`next` of the page before).
    after: Option<String>,
    /// The id of a comment: the page of the thread under it.
    thread: Option<String>,
}

impl PageParams {
    fn part(&self, sort: PostSort) -> AppResult<Part> {
        let after = parse_post_cursor(self.after.as_deref(), sort)?;
        let bad = |m: &str| AppError::BadRequest("invalid_query", m.to_owned());
        match (self.thread.as_deref().filter(|t| !t.is_empty()), after) {
            (None, None) => Ok(Part::First),
            (None, Some(after)) => Ok(Part::After(after)),
            (Some(t), None) => t
                .parse()
                .ok()
                .filter(|id| *id > 0)
                .map(Part::Thread)
                .ok_or_else(|| bad("thread must be a comment's id")),
            (Some(_), Some(_)) => Err(bad("a thread is one page: it takes no after")),
        }
    }
}

pub async fn show<S: Store>(
    State(state): State<AppState<S>>,
    session: Session,
    uri: Uri,
    headers: HeaderMap,
    Path(id): Path<String>,
    Query(q): Query<PageParams>,
) -> Response {
    let ctx = Ctx::new(&session, &uri);
    let found = async {
        let id = id_of(&id, "topic")?;
        let sort = crate::app::read::parse_post_sort(q.sort.as_deref())?;
        let part = q.part(sort)?;
        match ctx.user {
            None => public_page(&state, id, sort, part, &headers).await,
            Some(_) => render_topic_page(&state, &ctx, id, sort, part).await,
        }
    };
    found.await.unwrap_or_else(|e| error_page(&ctx, e))
}

/// Reads one part of a topic, as stored: one page of its comments, or
/// the thread under one of them.
async fn read_part<S: Store>(state: &AppState<S>, id: i64, sort: PostSort, part: Part) -> AppResult<Read> {
    let limit = PageLimit::WEB;
    let after = match part {
        Part::First => None,
        Part::After(c) => Some(c),
        // One level more than is shown: it tells which of the last level
        // shown have replies ("continue this thread").
        Part::Thread(root) => {
            let (topic, posts, cut) = state.store.thread(id, root, MAX_DEPTH, sort, limit).await?;
            return Ok(Read { topic, posts, next: None, cut });
        }
    };
    let page = state.store.topic_page(id, sort, after, limit).await?;
    Ok(Read { topic: page.topic, posts: page.posts, next: page.next, cut: false })
}

/// Where a part of a topic lives, with its order when not the default.
fn path_of(id: i64, sort: PostSort, part: Part) -> String {
    let mut query = Vec::new();
    if sort != PostSort::Best {
        query.push(format!("sort={}", sort_key(sort)));
    }
    match part {
        Part::First => {}
        Part::After(c) => query.push(format!("after={}", c.encode())),
        Part::Thread(root) => query.push(format!("thread={root}")),
    }
    if query.is_empty() { format!("/t/{id}") } else { format!("/t/{id}?{}", query.join("&")) }
}

/// The signed-out page: from the cache, 304 when the browser has it.
async fn public_page<S: Store>(
    state: &AppState<S>,
    id: i64,
    sort: PostSort,
    part: Part,
    headers: &HeaderMap,
) -> AppResult<Response> {
    let variant = match part {
        Part::First => Variant::Page(sort),
        Part::After(c) => Variant::PageAfter(c),
        Part::Thread(root) => Variant::Thread(sort, root),
    };
    let rendered = state.cache.get_or_render((id, variant), || render_public_page(state, id, sort, part)).await?;
    if rendered.body.is_empty() {
        return Err(AppError::not_found("topic")); // removed: hidden from the public
    }
    state.cache.prepare((id, variant), &rendered, headers).await;
    let mut res = respond(&rendered, headers, Audience::Public);
    res.headers_mut().insert(header::LINK, link_canonical(id));
    Ok(res)
}

/// Renders the public view. A removed topic's is an empty body carrying
/// its restriction, cached like the API's, so even its 404s cost no query.
async fn render_public_page<S: Store>(
    state: &AppState<S>,
    id: i64,
    sort: PostSort,
    part: Part,
) -> AppResult<Arc<Rendered>> {
    let mut read = read_part(state, id, sort, part).await?;
    // Markdown and the template take milliseconds on a long thread: keep
    // them off the async workers.
    blocking(move || {
        let restricted = Restricted::of(&read.topic, &read.posts);
        if !redact(&mut read.topic, &mut read.posts, Viewer::Public) {
            return Ok(Arc::new(Rendered::html(Vec::new(), restricted)));
        }
        // The same bytes for every visitor, whatever query they came with.
        let here = path_of(id, sort, part);
        let html = page_html(Ctx::public(here), &read, sort, part, false, None, Vec::new())?;
        Ok(Arc::new(Rendered::html(html.into_bytes(), restricted)))
    })
    .await?
}

/// A topic page for a signed-in viewer, rendered for this request.
pub async fn render_topic_page<S: Store>(
    state: &AppState<S>,
    ctx: &Ctx,
    id: i64,
    sort: PostSort,
    part: Part,
) -> AppResult<Response> {
    let mut read = read_part(state, id, sort, part).await?;
    let viewer = viewer_of(state, &read.topic, ctx.user.as_ref()).await;
    if !redact(&mut read.topic, &mut read.posts, viewer) {
        return Err(AppError::not_found("topic"));
    }
    // The personal layer: this viewer's votes and saves on what the page
    // shows and the authors they blocked, one small read; the shared
    // signed-out page has none.
    // The users they blocked, by name, go to the page's script too, which
    // collapses their comments as they arrive live.
    let (marks, blocked) = match &ctx.user {
        Some(u) => {
            let posts = read.posts.iter().map(|p| p.id).collect();
            let (marks, blocks) = tokio::join!(saves::marks(state, u, id, posts), saves::blocks(state, u));
            (
                Some(marks),
                blocks.map(|b| b.users).unwrap_or_else(|e| {
                    e.report();
                    Vec::new()
                }),
            )
        }
        None => (None, Vec::new()),
    };
    let page_ctx = ctx.clone();
    let moderator = viewer == Viewer::Moderator;
    let html = blocking(move || page_html(page_ctx, &read, sort, part, moderator, marks.as_ref(), blocked)).await??;
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

/// The page's HTML for `ctx`'s viewer, from a part of a topic already
/// redacted for them.
fn page_html(
    ctx: Ctx,
    read: &Read,
    sort: PostSort,
    part: Part,
    moderator: bool,
    marks: Option<&Marks>,
    blocked: Vec<String>,
) -> AppResult<String> {
    let topic = &read.topic;
    let id = topic.id;
    let user = ctx.user.as_ref();
    // A thread keeps its root in every order; a later page's cursor
    // belongs to its own order, so the others start over.
    let tabs = [(PostSort::Best, "Best"), (PostSort::New, "New"), (PostSort::Old, "Old")]
        .into_iter()
        .map(|(tab, label)| {
            let href = match part {
                Part::Thread(root) => format!("/t/{id}?sort={}&thread={root}#comments", sort_key(tab)),
                _ => format!("/t/{id}?sort={}#comments", sort_key(tab)),
            };
            Tab { href, label, current: tab == sort }
        })
        .collect();
    let moderating = moderator.then_some(topic.community.as_str());
    let mut t = TopicView::of(topic, user);
    let mut items = thread(&read.posts, user, moderating, MAX_DEPTH);
    if let Some(marks) = marks {
        mark(&mut t, &mut items, marks);
    }
    let open = !topic.deleted && (!topic.locked || moderator);
    if !open {
        items.iter_mut().filter_map(|item| item.open.as_mut()).for_each(|p| p.reply = false);
    }
    let page = TopicPage {
        t,
        items,
        tabs,
        can_reply: user.is_some() && open,
        moderator,
        proto: PostView { reply: open, ..proto(id, user, moderating) },
        blocked: blocked.join(" "),
        max_indent: MAX_INDENT,
        max_depth: MAX_DEPTH,
        next: read.next.map(|c| path_of(id, sort, Part::After(c)) + "#comments"),
        later: matches!(part, Part::After(_)),
        root: match part {
            Part::Thread(root) => Some(root),
            _ => None,
        },
        cut: read.cut,
        ctx,
    };
    page.render().map_err(|e| AppError::Internal(e.to_string()))
}

/// Who `user` is to this topic: moderators (and admins) see removed
/// content, authors their own, everyone else neither.
async fn viewer_of<S: Store>(state: &AppState<S>, topic: &Topic, user: Option<&User>) -> Viewer {
    match user {
        None => Viewer::Public,
        Some(u) if u.is_admin => Viewer::Moderator,
        // A failed lookup shows no more than to anyone (fails closed).
        Some(u) => match state.store.is_moderator(u.id, topic.community_id).await {
            Ok(true) => Viewer::Moderator,
            _ => Viewer::Author(u.id),
        },
    }
}

/// A topic and, when asked, one of its posts, as `user` may see them (see
/// `viewer_of`), with the post's depth (up to `MAX_INDENT`, all a view of
/// one post needs) and the viewer. For the pages about one post (the
/// fragment, the reply and report forms): never the whole topic.
pub async fn read_post<S: Store>(
    state: &AppState<S>,
    id: i64,
    post: Option<i64>,
    user: Option<&User>,
) -> AppResult<(Topic, Option<(Post, usize)>, Viewer)> {
    let (mut topic, mut post) = match post {
        Some(p) => state.store.topic_post(id, p, MAX_INDENT).await.map(|(t, p, depth)| (t, Some((p, depth))))?,
        None => (state.store.topic(id).await?, None),
    };
    let viewer = viewer_of(state, &topic, user).await;
    let posts = post.as_mut().map(|(p, _)| std::slice::from_mut(p)).unwrap_or_default();
    if !redact(&mut topic, posts, viewer) {
        return Err(AppError::not_found("topic"));
    }
    Ok((topic, post, viewer))
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
/// with `X-Pith-Fetch`); a browser is sent to the thread under the post,
/// where it is shown whatever its depth or page.
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
        return see_other(&format!("/t/{id}?thread={post}#p{post}"));
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
    found.unwrap_or_else(|e| (e.status_logged(), e.to_string()).into_response())
}

async fn public_fragment<S: Store>(state: &AppState<S>, id: i64, post: i64) -> AppResult<Arc<Rendered>> {
    let (_, found, _) = read_post(state, id, Some(post), None).await?;
    let (p, depth) = found.ok_or_else(|| AppError::not_found("post"))?;
    let html = render_html(PostView::of(&p, None, depth))?;
    Ok(Arc::new(Rendered::html(html.into_bytes(), None)))
}

/// The post as `user` sees it: their own controls, and a moderator's.
async fn fragment<S: Store>(state: &AppState<S>, user: &User, id: i64, post: i64) -> AppResult<Response> {
    let (topic, found, viewer) = read_post(state, id, Some(post), Some(user)).await?;
    let (p, depth) = found.ok_or_else(|| AppError::not_found("post"))?;
    let moderating = (viewer == Viewer::Moderator).then_some(topic.community.as_str());
    render_fragment(PostView::of(&p, Some(user), depth).moderated(moderating))
}

fn render_html(p: PostView) -> AppResult<String> {
    PostFragment { p }.render().map_err(|e| AppError::Internal(e.to_string()))
}

pub fn render_fragment(p: PostView) -> AppResult<Response> {
    let html = render_html(p)?;
    Ok(([(header::CONTENT_TYPE, "text/html; charset=utf-8"), (header::CACHE_CONTROL, "private, no-cache")], html)
        .into_response())
}
