//! `/metrics`: the handler, its place in the router (or on its own
//! listener with `--metrics-listen`), and the request-metrics layer.

use anyhow::Context;
use axum::Router;
use axum::extract::State;
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use tokio::task::JoinHandle;

use crate::app::{AppError, AppState};
use crate::metrics::config::Access;
use crate::metrics::{CONTENT_TYPE, MetricsConfig, Mode, http};
use crate::store::Store;

/// Records the mode on the state (call before the router is built) and,
/// with `--metrics-listen`, binds and serves `/metrics` there until the
/// returned task is aborted.
pub async fn start<S: Store>(cfg: &MetricsConfig, state: &AppState<S>) -> anyhow::Result<Option<JoinHandle<()>>> {
    let mode = cfg.mode();
    state.metrics.set_mode(mode);
    state.metrics.set_public(cfg.metrics_access == Access::Any);
    let Some(addr) = cfg.metrics_listen.filter(|_| mode == Mode::OwnListener) else {
        return Ok(None);
    };
    let listener =
        tokio::net::TcpListener::bind(addr).await.with_context(|| format!("cannot listen for metrics on {addr}"))?;
    tracing::info!(addr = %listener.local_addr()?, "serving /metrics");
    let app = router(state.clone());
    Ok(Some(tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, app).await {
            tracing::warn!(error = %e, "the metrics listener stopped");
        }
    })))
}

/// `GET /metrics`.
pub async fn scrape<S: Store>(State(state): State<AppState<S>>) -> Response {
    match state.metrics.render(&state.cache, &state.live) {
        Ok(body) => ([(header::CONTENT_TYPE, HeaderValue::from_static(CONTENT_TYPE))], body).into_response(),
        Err(_) => AppError::Internal("cannot encode the metrics".into()).into_response(),
    }
}

/// `GET /metrics` on the main listener: for a client on this machine that
/// no proxy forwarded, unless `--metrics-access any`. A reverse proxy on
/// the same machine connects from loopback too, so a request carrying a
/// forwarding header (the ones docs/DEPLOY.md's proxies set, or the
/// configured `--real-ip-header`) is a visitor's, not a local client's.
async fn scrape_main<S: Store>(State(state): State<AppState<S>>, parts: axum::http::request::Parts) -> Response {
    let peer = parts.extensions.get::<axum::extract::ConnectInfo<std::net::SocketAddr>>();
    let headers = &parts.headers;
    let local = peer.is_some_and(|p| p.0.ip().to_canonical().is_loopback())
        && !["forwarded", "x-forwarded-for", "x-real-ip"].iter().any(|h| headers.contains_key(*h))
        && state.limits.real_ip_header().is_none_or(|h| !headers.contains_key(h));
    if !(local || state.metrics.is_public()) {
        return AppError::Rejected(
            axum::http::StatusCode::FORBIDDEN,
            "metrics_local_only",
            "/metrics answers clients on this machine only; see --metrics-access and --metrics-listen".into(),
        )
        .into_response();
    }
    scrape(State(state)).await
}

/// Adds `/metrics` (when served on the main listener) and the route marker
/// to the application's routes; call after every route is added.
pub fn routes<S: Store>(routes: Router<AppState<S>>, state: &AppState<S>) -> Router<AppState<S>> {
    match state.metrics.mode() {
        Mode::Off => routes,
        Mode::OwnListener => routes.route_layer(axum::middleware::from_fn(http::mark_route)),
        Mode::MainListener => {
            routes.route("/metrics", get(scrape_main::<S>)).route_layer(axum::middleware::from_fn(http::mark_route))
        }
    }
}

/// The request metrics to record around the whole application (none
/// when off): `crate::metrics::http::track`, which `server::router` layers.
pub fn http_metrics<S: Store>(state: &AppState<S>) -> Option<crate::metrics::http::HttpMetrics> {
    (state.metrics.mode() != Mode::Off).then(|| state.metrics.http.clone())
}

/// The router of the separate metrics listener (`--metrics-listen`).
pub fn router<S: Store>(state: AppState<S>) -> Router {
    Router::new()
        .route("/metrics", get(scrape::<S>))
        .fallback(|uri: axum::http::Uri| async move { AppError::NotFound(format!("route {}", uri.path())) })
        .with_state(state)
}
