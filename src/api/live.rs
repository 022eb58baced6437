//! Live routes: `GET /api/v1/live` (a WebSocket) and `GET /api/v1/live/sse`
//! (the same events as Server-Sent Events). docs/LIVE.md is the protocol.
//!
//! The WebSocket handshake is answered here by hand. Once the 101 is sent,
//! `net::idle` gives the connection's stream to `live::Conn` (the raw
//! `TcpStream`; over TLS, with its keys, `crate::tls13`), so no HTTP, TLS or
//! WebSocket-library buffers outlive the handshake.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use axum::Router;
use axum::body::Body;
use axum::extract::{ConnectInfo, Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use base64::Engine;
use serde::Deserialize;

use super::extract::Query;
use crate::app::accounts::user_id;
use crate::app::{AppError, AppResult, AppState};
use crate::live::{Key, Membership, Refused, SseStream, frame, proto};
use crate::net::idle::HandOff;
use crate::store::Store;

pub fn router<S: Store>() -> Router<AppState<S>> {
    Router::new().route("/live", get(websocket::<S>)).route("/live/sse", get(sse::<S>))
}

#[derive(Deserialize)]
pub struct LiveQuery {
    topics: Option<String>,
    communities: Option<String>,
    /// For clients that cannot set `Authorization` (browsers' WebSocket
    /// and EventSource).
    token: Option<String>,
}

async fn websocket<S: Store>(
    State(state): State<AppState<S>>,
    Query(q): Query<LiveQuery>,
    req: Request,
) -> AppResult<Response> {
    let accept = accept_key(req.headers())?;
    // The connection hands its stream over itself (`net::idle`), on
    // HTTP/1.1 only.
    let Some(socket) = req.extensions().get::<HandOff>().and_then(HandOff::take) else {
        return Err(AppError::Rejected(
            StatusCode::UPGRADE_REQUIRED,
            "websocket_required",
            "WebSocket upgrades need HTTP/1.1".into(),
        ));
    };
    let (ip, bearer) = caller(&req);
    let member = join(&state, &q, ip, bearer, own_origin(&state, &req)).await?;
    tokio::spawn(crate::live::conn::handed_off(socket, member));
    Ok((
        StatusCode::SWITCHING_PROTOCOLS,
        [
            (header::UPGRADE, "websocket".to_owned()),
            (header::CONNECTION, "Upgrade".to_owned()),
            (header::SEC_WEBSOCKET_ACCEPT, accept),
        ],
    )
        .into_response())
}

async fn sse<S: Store>(
    State(state): State<AppState<S>>,
    Query(q): Query<LiveQuery>,
    req: Request,
) -> AppResult<Response> {
    let (ip, bearer) = caller(&req);
    let member = join(&state, &q, ip, bearer, own_origin(&state, &req)).await?;
    let headers = [
        (header::CONTENT_TYPE, "text/event-stream"),
        (header::CACHE_CONTROL, "no-cache"),
        (header::HeaderName::from_static("x-accel-buffering"), "no"),
    ];
    Ok((headers, Body::from_stream(SseStream::new(member))).into_response())
}

/// Checks the upgrade request; returns `Sec-WebSocket-Accept`.
fn accept_key(headers: &HeaderMap) -> AppResult<String> {
    let lists = |name: header::HeaderName, token: &str| {
        headers
            .get_all(name)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(','))
            .any(|t| t.trim().eq_ignore_ascii_case(token))
    };
    if !lists(header::UPGRADE, "websocket") || !lists(header::CONNECTION, "upgrade") {
        return Err(AppError::Rejected(
            StatusCode::UPGRADE_REQUIRED,
            "websocket_required",
            "this is a WebSocket endpoint; use a WebSocket client, or GET /api/v1/live/sse".into(),
        ));
    }
    if headers.get(header::SEC_WEBSOCKET_VERSION).map(|v| v.as_bytes()) != Some(b"13") {
        return Err(AppError::Rejected(
            StatusCode::UPGRADE_REQUIRED,
            "unsupported_version",
            "Sec-WebSocket-Version must be 13".into(),
        ));
    }
    let key = headers.get(header::SEC_WEBSOCKET_KEY).map(|v| v.as_bytes()).unwrap_or_default();
    let decoded = base64::engine::general_purpose::STANDARD.decode(key).map(|k| k.len());
    if decoded != Ok(16) {
        return Err(AppError::BadRequest("invalid_handshake", "Sec-WebSocket-Key must be 16 bytes in base64".into()));
    }
    Ok(frame::accept_key(key))
}

/// The client's address (for the per-IP limit) and its bearer token.
fn caller(req: &Request) -> (IpAddr, Option<String>) {
    let ip = req
        .extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map(|c| c.0.ip().to_canonical())
        .unwrap_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED));
    let bearer = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer ").or_else(|| v.strip_prefix("bearer ")))
        .map(str::to_owned);
    (ip, bearer)
}

/// Whether the request comes from no browser page, or from one of the
/// site's own or an allowed origin (`live::origin`): only those may open
/// an inbox.
fn own_origin<S: Store>(state: &AppState<S>, req: &Request) -> bool {
    let header = |name| {
        let mut values = req.headers().get_all(name).iter();
        match (values.next(), values.next()) {
            (Some(v), None) => Ok(Some(v.as_bytes())),
            (None, _) => Ok(None),
            _ => Err(()),
        }
    };
    // HTTP/2 names the host in the URI instead of `Host`.
    let authority = req.uri().authority().map(|a| a.as_str().as_bytes());
    match (header(header::ORIGIN), header(header::HOST)) {
        (Ok(origin), Ok(host)) => state.live.limits().allowed_origins.allow(origin, host.or(authority)),
        _ => false,
    }
}

/// Takes a connection slot and subscribes it to what the query asks for
/// (plus the inbox, with a valid token, unless a foreign page asks).
async fn join<S: Store>(
    state: &AppState<S>,
    q: &LiveQuery,
    ip: IpAddr,
    bearer: Option<String>,
    own_origin: bool,
) -> AppResult<Membership> {
    let hub = &state.live;
    let keys = proto::query_keys(q.topics.as_deref(), q.communities.as_deref(), hub.limits().max_subscriptions)
        .map_err(|m| AppError::BadRequest("invalid_query", m))?;
    let token = q.token.clone().or(bearer);
    if token.is_some() && !own_origin {
        // Refused before the token is looked at: a foreign page learns
        // nothing about it.
        return Err(AppError::Rejected(
            StatusCode::FORBIDDEN,
            "origin_not_allowed",
            "a page of this origin may follow public topics but not open an inbox (see --live-allowed-origins)".into(),
        ));
    }
    let user = match token {
        Some(token) => Some(user_id(&state.0, token.trim()).await?.ok_or(AppError::Unauthorized)?),
        None => None,
    };
    let mut member = Membership::join(hub, ip).map_err(refused)?;
    if !own_origin {
        member.forbid_auth();
    }
    for key in keys.into_iter().chain(user.map(Key::Inbox)) {
        member.add(key).map_err(refused)?;
    }
    Ok(member)
}

fn refused(r: Refused) -> AppError {
    let status = match r {
        Refused::TooManyFromIp => StatusCode::TOO_MANY_REQUESTS,
        _ => StatusCode::SERVICE_UNAVAILABLE,
    };
    AppError::Rejected(status, r.code(), r.message().into())
}
