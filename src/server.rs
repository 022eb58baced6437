//! The server: the whole router (the JSON API, the pages, `/metrics`,
//! the fallbacks and the layers around them all) and `run`, the entry
//! point that takes a bound listener and a shutdown future, so tests
//! supply both.

use std::future::Future;
use std::time::Duration;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::http::{Method, Uri};
use axum::routing::get;
use tokio::net::TcpListener;

use crate::app::{AppError, AppState};
use crate::net::MAX_BODY_BYTES;
use crate::store::Store;
use crate::{api, net};

pub fn router<S: Store>(state: AppState<S>, request_timeout: Duration) -> Router {
    let routes = Router::new()
        // The benchmark's hot routes sit outside the nest: a nested router
        // rebuilds every request's URI to strip its prefix.
        .merge(api::topics::item_router())
        .merge(api::posts::create_router())
        .nest("/api/v1", api::router())
        .merge(crate::web::router())
        .route("/healthz", get(|| async { "ok\n" }));
    // Federation's routes exist only when it is on: off, they are unknown
    // paths, answered exactly as before it was built.
    let routes = match state.federation.get() {
        Some(_) => routes.merge(crate::activitypub::router()),
        None => routes,
    };
    let routes = api::metrics::routes(routes, &state)
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .with_state(state.clone());
    // HSTS on every answer that goes through the router (pages, API,
    // redirects) of a site served over HTTPS; browsers ignore it over
    // plain HTTP, so one header value, fixed at start-up, does.
    let hsts = state.web.hsts().map(|hsts| {
        axum::middleware::map_response(move |mut res: axum::response::Response| {
            res.headers_mut().insert(axum::http::header::STRICT_TRANSPORT_SECURITY, hsts.clone());
            std::future::ready(res)
        })
    });
    // The layers wrap the whole router once, as one service of concrete
    // types that a single route holds. `Router::layer` wraps and boxes each
    // layer around every route, and a request cloned those boxes one inside
    // the other: ~20 of the ~90 allocations of a POST.
    let app = tower::ServiceBuilder::new()
        .layer(axum::middleware::from_fn(crate::logging::request_id::layer))
        .option_layer(hsts)
        .option_layer(api::metrics::http_metrics(&state).map(|metrics| {
            axum::middleware::from_fn(move |req, next| crate::metrics::http::track(metrics.clone(), req, next))
        }))
        .layer(net::deadline::DeadlineLayer { limit: request_timeout })
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .service(routes);
    Router::new().fallback_service(app)
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
    run_with_limits(listener, state, request_timeout, net::server::ConnLimits::default(), shutdown).await
}

/// `run` with explicit connection limits (header timeout, header size,
/// connection cap).
pub async fn run_with_limits<S: Store>(
    listener: TcpListener,
    state: AppState<S>,
    request_timeout: Duration,
    limits: net::server::ConnLimits,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let app = router(state.clone(), request_timeout);
    let live = state.live.clone();
    let shutdown = async move {
        shutdown.await;
        live.shutdown();
    };
    let hot = std::sync::Arc::new(net::hot::Hot::new(state.clone()));
    net::server::serve(listener, app, Some(hot), limits, shutdown).await;
    state.store.shutdown().await;
    Ok(())
}
