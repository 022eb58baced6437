//! The JSON API: each route module builds its own `router()`, merged here
//! under `/api/v1` with each route's body limit. Handlers parse requests
//! into validated input, call the application core (`app`), and shape its
//! results as JSON; no handler calls another door's handler.

mod admin;
mod communities;
mod email;
pub mod extract;
mod inbox;
pub mod live;
mod me;
mod media;
mod messages;
pub mod metrics;
pub mod moderation;
mod openapi;
pub mod posts;
mod saves;
pub mod search;
pub mod topics;
pub mod users;

use axum::Router;

use crate::app::{AppError, AppState};
use crate::net::MAX_BODY_BYTES;
use crate::store::Store;

/// The body limit of each route, smaller than `MAX_BODY_BYTES` where the
/// route's fields are small, so no route reads more than it could use.
/// One table, so the policy can be read in one place; a route not listed
/// gets `MAX_BODY_BYTES`. Sizes allow every character JSON-escaped.
pub fn body_limit(route: &str) -> usize {
    const KIB: usize = 1024;
    match route.strip_prefix("/api/v1").unwrap_or(route) {
        // {"value": -1}
        r if r.ends_with("/vote") => KIB,
        // Saving and blocking read no body.
        r if r.ends_with("/save") || r.ends_with("/block") => KIB,
        // A username (20) and a password (256), plus an invite code; or two
        // passwords.
        "/auth/register" | "/auth/login" | "/auth/logout" | "/me/password" => 8 * KIB,
        // A token, an address (254) and a password.
        r if r.starts_with("/auth/password-reset") || r.starts_with("/me/email") || r == "/auth/verify-email" => {
            8 * KIB
        }
        // A password and a word; a code; a password and a code.
        "/me" | "/me/two-factor" | "/me/two-factor/confirm" | "/me/two-factor/disable" => 8 * KIB,
        // At most 100 ids, or {"all": true}.
        "/inbox/read" => 8 * KIB,
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
        // A picture: limited by --media-max-bytes as it streams in
        // (`app::media::read_file`), not here.
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

/// The routes under `/api/v1`, each with its body limit.
pub fn router<S: Store>() -> Router<AppState<S>> {
    let api = Router::new()
        .merge(topics::router())
        .merge(posts::router())
        .merge(communities::router())
        .merge(users::router())
        .merge(me::router())
        .merge(email::router())
        .merge(inbox::router())
        .merge(messages::router())
        .merge(media::router())
        .merge(moderation::router())
        .merge(admin::router())
        .merge(search::router())
        .merge(saves::router())
        .merge(openapi::router())
        .merge(live::router());
    api.route_layer(axum::middleware::from_fn(route_body_limit))
}
