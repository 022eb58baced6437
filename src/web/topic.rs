//! The topic page (`/t/{id}`) and what is done on it: replying at any
//! depth, voting, and the single-post fragment the script fetches when a
//! post arrives live. Forms post and redirect (303); the script sends the
//! same forms with `X-Pith-Fetch: 1` and gets JSON or a fragment instead.

use askama::Template;
use axum::extract::rejection::FormRejection;
use axum::extract::{Form, Path, Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, Uri, header};
use axum::response::{IntoResponse, Redirect, Response};
use serde::Deserialize;

use super::view::{Item, PostView, TopicRow, post_html, thread};
use super::{Ctx, Session, error_page, local_path, see_other};
use crate::error::{AppError, AppResult};
use crate::http::extract::AuthUser;
use crate::http::limits::{Action, ClientIp, Who};
use crate::http::{AppState, commit};
use crate::model::{Body, Post, Restricted, Topic, User, Viewer, VoteTarget, redact};
use crate::store::{NewPost, PostSort, Store};

pub use super::write::{
    delete_post, delete_topic, edit_post, edit_post_form, edit_topic, edit_topic_form, submit, submit_form,
};

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
}

impl TopicView {
    fn of(t: &Topic, viewer: Option<&User>) -> TopicView {
        TopicView {
            row: TopicRow::of(t),
            body_html: t.body.as_deref().map(post_html).unwrap_or_default(),
            edited: t.edited_at.is_some(),
            removed: t.removed,
            deleted: t.deleted,
            mine: !t.deleted && viewer.is_some_and(|u| u.is_admin || u.id == t.author_id),
        }
    }
}

#[derive(Template)]
#[template(path = "topic.html")]
struct TopicPage {
    ctx: Ctx,
    t: TopicView,
    items: Vec<Item>,
    tabs: Vec<super::pages::Tab>,
    can_reply: bool,
}

#[derive(Deserialize)]
pub struct SortParams {
    sort: Option<String>,
}

/// Whether the request comes from the script rather than a form post.
fn is_fetch(headers: &HeaderMap) -> bool {
    headers.contains_key("x-pith-fetch")
}

fn parse_id(s: &str) -> AppResult<i64> {
    s.parse::<i64>().ok().filter(|id| *id > 0).ok_or_else(|| AppError::not_found("topic"))
}

pub async fn show<S: Store>(
    State(state): State<AppState<S>>,
    session: Session,
    uri: Uri,
    Path(id): Path<String>,
    Query(q): Query<SortParams>,
) -> Response {
    let ctx = Ctx::new(&session, &uri);
    let sort = crate::http::topics::parse_post_sort(q.sort.as_deref());
    match (parse_id(&id), sort) {
        (Ok(id), Ok(sort)) => match render_topic_page(&state, &ctx, id, sort).await {
            Ok(res) => res,
            Err(e) => error_page(&ctx, e),
        },
        (Err(e), _) | (_, Err(e)) => error_page(&ctx, e),
    }
}

/// Reads a topic and its posts as `user` may see them: moderators (and
/// admins) see removed content, authors their own, everyone else neither.
async fn read_topic<S: Store>(
    state: &AppState<S>,
    id: i64,
    sort: PostSort,
    user: Option<&User>,
) -> AppResult<(Topic, Vec<Post>, Viewer)> {
    let (mut topic, mut posts) = state.store.topic_with_posts(id, sort).await?;
    let viewer = match user {
        None => Viewer::Public,
        Some(u) if u.is_admin => Viewer::Moderator,
        Some(u) => match Restricted::of(&topic, &posts) {
            Some(r) if state.store.is_moderator(u.id, r.community_id).await.unwrap_or(false) => Viewer::Moderator,
            _ => Viewer::Author(u.id),
        },
    };
    if !redact(&mut topic, &mut posts, viewer) {
        return Err(AppError::not_found("topic"));
    }
    Ok((topic, posts, viewer))
}

/// The whole topic page, rendered for this request.
///
/// Uncached for now. The cache hook: for an anonymous viewer the page is
/// the same bytes for everyone, so it can live in `state.cache` under the
/// topic's key (evicted by the same `invalidate(topic_id)` every write
/// already calls). For a signed-in viewer only the layout's CSRF token and
/// user menu and the `mine` controls differ: cache the thread HTML and
/// wrap it per request.
pub async fn render_topic_page<S: Store>(
    state: &AppState<S>,
    ctx: &Ctx,
    id: i64,
    sort: PostSort,
) -> AppResult<Response> {
    let user = ctx.user.as_ref();
    let (topic, posts, viewer) = read_topic(state, id, sort, user).await?;
    let can_reply = user.is_some() && !topic.deleted && (!topic.locked || viewer == Viewer::Moderator);
    let sort_key = match sort {
        PostSort::Best => "best",
        PostSort::New => "new",
        PostSort::Old => "old",
    };
    let tabs = [("best", "Best"), ("new", "New"), ("old", "Old")]
        .into_iter()
        .map(|(key, label)| super::pages::Tab {
            href: format!("/t/{id}?sort={key}#comments"),
            label,
            current: key == sort_key,
        })
        .collect();
    let page =
        TopicPage { ctx: ctx.clone(), t: TopicView::of(&topic, user), items: thread(&posts, user), tabs, can_reply };
    let mut res = ctx.page(StatusCode::OK, &page);
    res.headers_mut().insert(header::LINK, link_canonical(id));
    Ok(res)
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
    let (Ok(id), Ok(post)) = (parse_id(&id), parse_id(&post)) else {
        return error_page(&ctx, AppError::not_found("post"));
    };
    if !is_fetch(&headers) {
        return see_other(&format!("/t/{id}#p{post}"));
    }
    match fragment(&state, ctx.user.as_ref(), id, post).await {
        Ok(res) => res,
        Err(e) => (e.status(), e.to_string()).into_response(),
    }
}

async fn fragment<S: Store>(state: &AppState<S>, user: Option<&User>, id: i64, post: i64) -> AppResult<Response> {
    let (_, posts, _) = read_topic(state, id, PostSort::Old, user).await?;
    let p = posts.iter().find(|p| p.id == post).ok_or_else(|| AppError::not_found("post"))?;
    let depth = depth_of(&posts, p);
    render_fragment(PostView::of(p, user, depth))
}

fn render_fragment(p: PostView) -> AppResult<Response> {
    let html = PostFragment { p }.render().map_err(|e| AppError::Internal(e.to_string()))?;
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
    let id = parse_id(id)?;
    let (topic, posts, _) = read_topic(state, id, PostSort::Old, ctx.user.as_ref()).await?;
    let parent = match to {
        Some(pid) => {
            let p = posts.iter().find(|p| p.id == pid).ok_or_else(|| AppError::not_found("post"))?;
            Some(PostView::of(p, None, 0))
        }
        None => None,
    };
    let (status, error) = match error {
        Some((s, m)) => (s, Some(m)),
        None => (StatusCode::OK, None),
    };
    let page = ReplyPage { ctx: ctx.clone(), topic_id: id, title: topic.title, parent, body, error };
    Ok(ctx.page(status, &page))
}

/// Sends a visitor who must sign in to the login page, and back after.
pub fn login_first(here: &str) -> Response {
    let next: String = url_encode(here);
    see_other(&format!("/login?next={next}"))
}

fn url_encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' | b'/' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// The user of a form post, after its CSRF token is checked; otherwise the
/// answer to give (login redirect, or 403).
pub fn authorise(session: &Session, ctx: &Ctx, csrf: &str, back: &str) -> Result<User, Box<Response>> {
    let Some(user) = session.user.clone() else {
        return Err(Box::new(login_first(local_path(back))));
    };
    if !session.csrf_ok(csrf) {
        return Err(Box::new(csrf_refused(ctx)));
    }
    Ok(user)
}

/// 403 for a form without this session's CSRF token.
pub fn csrf_refused(ctx: &Ctx) -> Response {
    error_page(
        ctx,
        AppError::Forbidden(
            "this form has expired or did not come from this site (CSRF check failed); reload the page and try again"
                .into(),
        ),
    )
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
    form: Result<Form<ReplyForm>, FormRejection>,
) -> Response {
    let ctx = Ctx::new(&session, &uri);
    let fetch = is_fetch(&headers);
    let Ok(Form(form)) = form else {
        return error_page(&ctx, AppError::BadRequest("invalid_form", "the form could not be read".into()));
    };
    let topic_id = match parse_id(&id) {
        Ok(id) => id,
        Err(e) => return error_page(&ctx, e),
    };
    let user = match authorise(&session, &ctx, &form.csrf, &format!("/t/{topic_id}")) {
        Ok(u) => u,
        Err(_) if fetch => return (StatusCode::FORBIDDEN, "log in again to reply").into_response(),
        Err(res) => return *res,
    };
    let parent = form.parent.trim().parse::<i64>().ok();
    match create_reply(&state, user.clone(), ip, topic_id, parent, &form.body).await {
        Ok(post) if fetch => {
            let depth = parent.map_or(0, |_| 1);
            render_fragment(PostView::of(&post, Some(&user), depth))
                .map(|mut r| {
                    *r.status_mut() = StatusCode::CREATED;
                    r
                })
                .unwrap_or_else(|e| (e.status(), e.to_string()).into_response())
        }
        Ok(post) => see_other(&format!("/t/{topic_id}#p{}", post.id)),
        Err(e) if fetch => (e.status(), super::capitalise(&e.to_string())).into_response(),
        Err(e @ (AppError::Validation(_) | AppError::TooManyRequests(..) | AppError::Rejected(..))) => {
            let error = Some((e.status(), super::capitalise(&e.to_string())));
            reply_page(&state, &ctx, &id, parent, form.body, error).await.unwrap_or_else(|e| error_page(&ctx, e))
        }
        Err(e) => error_page(&ctx, e),
    }
}

/// What `POST /api/v1/topics/{id}/posts` does: the same limit, write,
/// eviction and live event.
async fn create_reply<S: Store>(
    state: &AppState<S>,
    user: User,
    ip: ClientIp,
    topic_id: i64,
    parent_id: Option<i64>,
    body: &str,
) -> AppResult<Post> {
    let new = NewPost { topic_id, parent_id, body: Body::parse(body)? };
    state.limits.check(Action::Post, ip, Who::User(user.id))?;
    commit(state, move |st| async move {
        let post = st.store.create_post(&user, new).await?;
        st.cache.invalidate(topic_id);
        st.live.post_created(&post);
        Ok(post)
    })
    .await
}

#[derive(Deserialize)]
pub struct VoteForm {
    #[serde(default)]
    csrf: String,
    value: i8,
    #[serde(default)]
    back: String,
}

pub async fn vote_topic<S: Store>(
    State(state): State<AppState<S>>,
    session: Session,
    uri: Uri,
    headers: HeaderMap,
    ip: ClientIp,
    Path(id): Path<String>,
    form: Result<Form<VoteForm>, FormRejection>,
) -> Response {
    let target = parse_id(&id).map(VoteTarget::Topic);
    vote(state, session, uri, headers, ip, target, form).await
}

pub async fn vote_post<S: Store>(
    State(state): State<AppState<S>>,
    session: Session,
    uri: Uri,
    headers: HeaderMap,
    ip: ClientIp,
    Path(id): Path<String>,
    form: Result<Form<VoteForm>, FormRejection>,
) -> Response {
    let target = parse_id(&id).map(VoteTarget::Post);
    vote(state, session, uri, headers, ip, target, form).await
}

/// Casts the vote through the API's own `cast_vote` (limits, eviction,
/// live score); the script gets its JSON, a form goes back where it was.
async fn vote<S: Store>(
    state: AppState<S>,
    session: Session,
    uri: Uri,
    headers: HeaderMap,
    ip: ClientIp,
    target: AppResult<VoteTarget>,
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
    let user = match authorise(&session, &ctx, &form.csrf, &back) {
        Ok(u) => u,
        Err(_) if fetch => return (StatusCode::UNAUTHORIZED, "log in to vote").into_response(),
        Err(res) => return *res,
    };
    let auth = AuthUser { user, digest: session.token_digest().unwrap_or_default() };
    match crate::http::topics::cast_vote(&state, auth, ip, target, form.value).await {
        Ok(json) if fetch => json,
        Ok(_) => see_other(&back),
        Err(e) if fetch => (e.status(), super::capitalise(&e.to_string())).into_response(),
        Err(e) => error_page(&ctx, e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn login_redirects_keep_the_path_and_query_encoded() {
        assert_eq!(url_encode("/t/1?sort=new&x=ü"), "/t/1%3Fsort%3Dnew%26x%3D%C3%BC");
    }
}
