//! `/inbox`: the signed-in user's notifications (replies, mentions,
//! moderators' actions), newest first, with a link to each post and a
//! "mark all read" form; `/inbox/live`: the Server-Sent Events the script
//! keeps the header's count (and an open topic) current with, the session's
//! inbox included, since a page cannot hand its session to the API's
//! stream.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use askama::Template;
use axum::body::Body;
use axum::extract::rejection::{FormRejection, QueryRejection};
use axum::extract::{ConnectInfo, Form, Query, Request, State};
use axum::http::{StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;

use super::forms::{CsrfForm, accept, login_first};
use super::view::Time;
use super::{Ctx, Session, error_page, see_other};
use crate::app::inbox::{self, InboxQuery};
use crate::app::{AppError, AppState};
use crate::live::{Key, Membership, SseStream, proto};
use crate::model::{MarkRead, Notice, NoticeKind};
use crate::store::Store;

#[derive(Template)]
#[template(path = "inbox.html")]
struct InboxPage {
    ctx: Ctx,
    items: Vec<Item>,
    unread: i64,
    unread_only: bool,
    /// The next page's link, when there is one.
    older: Option<String>,
}

/// One notification as the page shows it.
struct Item {
    what: &'static str,
    from: Option<String>,
    excerpt: String,
    /// Where it happened: the post's thread, or the topic.
    href: Option<String>,
    time: Time,
    read: bool,
}

impl Item {
    fn of(n: Notice) -> Item {
        let what = match n.kind {
            NoticeKind::Reply => "replied to you",
            NoticeKind::Mention => "mentioned you",
            NoticeKind::Message => "sent you a message",
            NoticeKind::Moderation => "Moderation",
        };
        let href = match (n.topic_id, n.post_id, &n.from) {
            (Some(t), Some(p), _) => Some(format!("/t/{t}?thread={p}#p{p}")),
            (Some(t), None, _) => Some(format!("/t/{t}")),
            // A message: its conversation.
            (None, _, Some(from)) if n.kind == NoticeKind::Message => Some(format!("/messages/{from}")),
            _ => None,
        };
        Item { what, from: n.from, excerpt: n.excerpt, href, time: Time::of(n.created_at), read: n.read }
    }
}

#[derive(Deserialize, Default)]
pub struct PageQuery {
    #[serde(default)]
    after: Option<String>,
    #[serde(default)]
    unread: Option<String>,
}

/// `GET /inbox`.
pub async fn show<S: Store>(
    State(state): State<AppState<S>>,
    session: Session,
    uri: Uri,
    q: Result<Query<PageQuery>, QueryRejection>,
) -> Response {
    let ctx = Ctx::new(&session, &uri);
    let Some(user) = ctx.user.clone() else { return login_first(&ctx.here) };
    let q = q.map(|Query(q)| q).unwrap_or_default();
    let after = match q.after.as_deref().map(str::parse::<i64>) {
        None => None,
        Some(Ok(after)) => Some(after),
        Some(Err(_)) => {
            return error_page(&ctx, AppError::BadRequest("invalid_cursor", "that page does not exist".into()));
        }
    };
    let unread_only = q.unread.as_deref() == Some("true");
    let query = InboxQuery { unread: Some(unread_only), after, limit: None };
    let page = match inbox::list(&state, &user, query).await {
        Ok(page) => page,
        Err(e) => return error_page(&ctx, e),
    };
    let older = page.next.map(|n| format!("/inbox?after={n}{}", if unread_only { "&unread=true" } else { "" }));
    let unread = page.unread;
    // The header counts what the page shows: both read in this request.
    let ctx = Ctx { unread, ..ctx };
    let items = page.items.into_iter().map(Item::of).collect();
    ctx.page(StatusCode::OK, &InboxPage { ctx: ctx.clone(), items, unread, unread_only, older })
}

/// `POST /inbox/read`: marks every notification read.
pub async fn mark_read<S: Store>(
    State(state): State<AppState<S>>,
    session: Session,
    uri: Uri,
    form: Result<Form<CsrfForm>, FormRejection>,
) -> Response {
    let (ctx, user, _) = match accept(&session, &uri, form, "/inbox", |f| &f.csrf) {
        Ok(accepted) => accepted,
        Err(res) => return *res,
    };
    match inbox::mark_read(&state, &user, MarkRead::All).await {
        Ok(_) => see_other("/inbox"),
        Err(e) => error_page(&ctx, e),
    }
}

#[derive(Deserialize, Default)]
pub struct LiveQuery {
    #[serde(default)]
    topics: Option<String>,
}

/// `GET /inbox/live?topics=ID`: Server-Sent Events of the session user's
/// inbox and of the topics named (docs/LIVE.md), for the site's own
/// pages: a request from another origin's page is refused, as the API's
/// stream refuses to open an inbox for one.
pub async fn live<S: Store>(
    State(state): State<AppState<S>>,
    session: Session,
    q: Result<Query<LiveQuery>, QueryRejection>,
    req: Request,
) -> Response {
    let Some(user) = session.user else { return AppError::Unauthorized.into_response() };
    let origin = req.headers().get(header::ORIGIN).map(|v| v.as_bytes());
    let host =
        req.headers().get(header::HOST).map(|v| v.as_bytes()).or(req.uri().authority().map(|a| a.as_str().as_bytes()));
    let hub = &state.live;
    if !hub.limits().allowed_origins.allow(origin, host) {
        let why = "a page of this origin may not open an inbox".into();
        return AppError::Rejected(StatusCode::FORBIDDEN, "origin_not_allowed", why).into_response();
    }
    let topics = q.ok().and_then(|Query(q)| q.topics);
    let keys = match proto::query_keys(topics.as_deref(), None, hub.limits().max_subscriptions) {
        Ok(keys) => keys,
        Err(m) => return AppError::BadRequest("invalid_query", m).into_response(),
    };
    let ip = req
        .extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED), |c| c.0.ip().to_canonical());
    let joined = Membership::join(hub, ip).and_then(|mut member| {
        keys.into_iter().chain([Key::Inbox(user.id)]).try_for_each(|key| member.add(key))?;
        Ok(member)
    });
    let member = match joined {
        Ok(member) => member,
        Err(r) => {
            let status = if r.code() == "too_many_connections" {
                StatusCode::TOO_MANY_REQUESTS
            } else {
                StatusCode::SERVICE_UNAVAILABLE
            };
            return AppError::Rejected(status, r.code(), r.message().into()).into_response();
        }
    };
    let headers = [
        (header::CONTENT_TYPE, "text/event-stream"),
        (header::CACHE_CONTROL, "no-cache"),
        (header::HeaderName::from_static("x-accel-buffering"), "no"),
    ];
    (headers, Body::from_stream(SseStream::new(member))).into_response()
}
