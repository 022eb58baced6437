//! The HTTP layer: shared state, the router assembled from each route
//! module's `router()`, and `run`, the server entry point that takes a bound
//! listener and a shutdown future (so tests supply both).

mod admin;
mod communities;
mod deadline;
pub mod extract;
pub mod fast;
pub mod hot;
pub mod idle;
pub mod limits;
pub mod live;
pub mod moderation;
mod openapi;
pub mod posts;
pub mod search;
pub mod server;
pub mod tls;
pub mod topics;
pub mod users;

use std::future::Future;
use std::ops::Deref;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::http::{Method, Uri};
use axum::routing::get;
use tokio::net::TcpListener;

use crate::auth::TokenCache;
use crate::cache::TopicCache;
use crate::config::{LiveConfig, RateConfig};
use crate::error::AppError;
use crate::store::Store;

/// Largest request body accepted: a 40,000-character post fits even when
/// every character is escaped as a surrogate pair (`\uXXXX\uXXXX`, 12 bytes).
pub const MAX_BODY_BYTES: usize = 512 * 1024;

/// The body limit of each route, smaller than `MAX_BODY_BYTES` where the
/// route's fields are small, so no route reads more than it could use.
/// One table, so the policy can be read in one place; a route not listed
/// gets `MAX_BODY_BYTES`. Sizes allow every character JSON-escaped.
pub fn body_limit(route: &str) -> usize {
    const KIB: usize = 1024;
    match route.strip_prefix("/api/v1").unwrap_or(route) {
        // {"value": -1}
        r if r.ends_with("/vote") => KIB,
        // A username (20) and a password (256), plus an invite code.
        "/auth/register" | "/auth/login" | "/auth/logout" => 8 * KIB,
        // A community's name, title and a 10,000-character description.
        "/communities" => 128 * KIB,
        // Moderation: a 500-character reason, a username, a duration.
        r if r.ends_with("/remove")
            || r.ends_with("/restore")
            || r.ends_with("/lock")
            || r.ends_with("/unlock")
            || r.ends_with("/report")
            || r.ends_with("/bans")
            || r.starts_with("/reports/")
            || r.starts_with("/admin/") =>
        {
            16 * KIB
        }
        _ => MAX_BODY_BYTES,
    }
}

/// Enforces `body_limit` for the matched route: a declared length over it
/// is refused at once, and a body that runs over it while being read stops
/// there (the JSON extractor answers 413 either way).
async fn route_body_limit(req: axum::extract::Request, next: axum::middleware::Next) -> axum::response::Response {
    use axum::response::IntoResponse;
    let limit = req.extensions().get::<axum::extract::MatchedPath>().map_or(MAX_BODY_BYTES, |m| body_limit(m.as_str()));
    if limit >= MAX_BODY_BYTES {
        return next.run(req).await;
    }
    let declared = req
        .headers()
        .get(axum::http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > limit as u64) {
        return AppError::PayloadTooLarge(limit).into_response();
    }
    let req = req.map(|body| axum::body::Body::new(http_body_util::Limited::new(body, limit)));
    next.run(req).await
}

pub struct App<S> {
    pub store: S,
    /// Rendered topic responses; evicted by writes to their topic.
    pub cache: TopicCache,
    /// Token digest -> user, so authenticated writes skip a read.
    pub tokens: TokenCache,
    /// Live subscribers; writes publish their events here.
    pub live: crate::live::Hub,
    /// Per-account and per-address rate limits (429 with Retry-After).
    pub limits: limits::RateLimits,
    /// The HTML forum's settings (secure cookies).
    pub web: crate::web::Settings,
    /// Prometheus metrics and where `/metrics` is served.
    pub metrics: crate::metrics::Metrics,
}

/// Cheap to clone: one `Arc`.
pub struct AppState<S>(pub Arc<App<S>>);

impl<S> Clone for AppState<S> {
    fn clone(&self) -> Self {
        AppState(self.0.clone())
    }
}

impl<S> Deref for AppState<S> {
    type Target = App<S>;
    fn deref(&self) -> &App<S> {
        &self.0
    }
}

impl<S: Store> AppState<S> {
    pub fn new(store: S, cache_bytes: usize) -> Self {
        Self::with_live(store, cache_bytes, &LiveConfig::default())
    }

    pub fn with_live(store: S, cache_bytes: usize, live: &LiveConfig) -> Self {
        Self::with_config(store, cache_bytes, live, &RateConfig::default())
    }

    pub fn with_config(store: S, cache_bytes: usize, live: &LiveConfig, rate: &RateConfig) -> Self {
        let cache = TopicCache::new(cache_bytes);
        let metrics = crate::metrics::Metrics::new(store.metrics(), &cache);
        AppState(Arc::new_cyclic(|app| App {
            store,
            cache,
            metrics,
            tokens: TokenCache::new(),
            live: crate::live::Hub::new(live, Some(live::token_resolver(app.clone()))),
            limits: limits::RateLimits::new(rate),
            web: crate::web::Settings::default(),
        }))
    }
}

pub fn router<S: Store>(state: AppState<S>, request_timeout: Duration) -> Router {
    let api = Router::new()
        .merge(topics::router())
        .merge(posts::router())
        .merge(communities::router())
        .merge(users::router())
        .merge(moderation::router())
        .merge(admin::router())
        .merge(search::router())
        .merge(openapi::router())
        .merge(live::router());
    let api = api.route_layer(axum::middleware::from_fn(route_body_limit));
    let routes = Router::new()
        // The benchmark's hot route sits outside the nest: a nested router
        // rebuilds every request's URI to strip its prefix.
        .merge(topics::item_router())
        .nest("/api/v1", api)
        .merge(crate::web::router())
        .route("/healthz", get(|| async { "ok\n" }));
    let app = crate::metrics::routes(routes, &state)
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .layer(deadline::DeadlineLayer { limit: request_timeout });
    crate::metrics::layer(app, &state)
        .layer(axum::middleware::from_fn(crate::logging::request_id::layer))
        .with_state(state)
}

/// A browser gets an HTML 404 page; API clients the JSON error.
async fn not_found(uri: Uri, headers: axum::http::HeaderMap) -> axum::response::Response {
    use axum::response::IntoResponse;
    if !uri.path().starts_with("/api/") && crate::web::wants_html(&headers) {
        return crate::web::not_found_page(&uri);
    }
    AppError::NotFound(format!("route {}", uri.path())).into_response()
}

async fn method_not_allowed(method: Method, uri: Uri) -> AppError {
    AppError::Rejected(
        axum::http::StatusCode::METHOD_NOT_ALLOWED,
        "method_not_allowed",
        format!("{method} is not allowed on {}", uri.path()),
    )
}

/// Runs a write and what must follow it (cache eviction, live events) as
/// its own task, so a client that hangs up mid-request cannot cancel the
/// eviction after the write has committed.
pub async fn commit<S, T, Fut>(state: &AppState<S>, f: impl FnOnce(AppState<S>) -> Fut) -> Result<T, AppError>
where
    S: Store,
    T: Send + 'static,
    Fut: Future<Output = Result<T, AppError>> + Send + 'static,
{
    tokio::spawn(f(state.clone())).await.map_err(|e| AppError::Internal(format!("write task failed: {e}")))?
}

/// Serves until `shutdown` resolves, then lets in-flight requests finish
/// and stops the store (committing queued writes and checkpointing). Live
/// sockets are told to close as soon as `shutdown` resolves, since they
/// would otherwise hold the graceful shutdown open.
pub async fn run<S: Store>(
    listener: TcpListener,
    state: AppState<S>,
    request_timeout: Duration,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    run_with_limits(listener, state, request_timeout, server::ConnLimits::default(), shutdown).await
}

/// `run` with explicit connection limits (header timeout, header size,
/// connection cap).
pub async fn run_with_limits<S: Store>(
    listener: TcpListener,
    state: AppState<S>,
    request_timeout: Duration,
    limits: server::ConnLimits,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let app = router(state.clone(), request_timeout);
    let live = state.live.clone();
    let shutdown = async move {
        shutdown.await;
        live.shutdown();
    };
    let hot = std::sync::Arc::new(hot::Hot::new(state.clone()));
    server::serve(listener, app, Some(hot), limits, shutdown).await;
    state.store.shutdown().await;
    Ok(())
}
