//! ActivityPub's routes (docs/FEDERATION.md): discovery (`discovery`:
//! WebFinger, NodeInfo), the documents of local actors and objects
//! (`objects`, under stable `/ap/...` ids) and the inboxes (`inbox`).
//! Beside `api` and `web`: it calls `app` (`app::federation` holds the
//! keys, signatures, outbound HTTP and follows), never them. With
//! federation off every route here answers 404, as an unknown path.

pub mod discovery;
pub mod inbox;
pub mod objects;

use axum::Router;
use axum::http::{HeaderMap, HeaderValue, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};

use crate::app::federation::Federation;
use crate::app::{AppResult, AppState};
use crate::store::Store;

/// The media type of every ActivityPub document served.
pub const AP_CONTENT_TYPE: &str = "application/activity+json";

pub fn router<S: Store>() -> Router<AppState<S>> {
    Router::new()
        .route("/.well-known/webfinger", get(discovery::webfinger::<S>))
        .route("/.well-known/nodeinfo", get(discovery::nodeinfo_links::<S>))
        .route("/nodeinfo/2.1", get(discovery::nodeinfo::<S>))
        .route("/ap/site", get(objects::site::<S>))
        .route("/ap/inbox", post(inbox::shared::<S>))
        .route("/ap/c/{name}", get(objects::group::<S>))
        .route("/ap/c/{name}/inbox", post(inbox::community::<S>))
        .route("/ap/c/{name}/outbox", get(objects::outbox::<S>))
        .route("/ap/c/{name}/followers", get(objects::followers::<S>))
        .route("/ap/c/{name}/moderators", get(objects::moderators::<S>))
        .route("/ap/u/{name}", get(objects::person::<S>))
        .route("/ap/u/{name}/inbox", post(inbox::user::<S>))
        .route("/ap/t/{id}", get(objects::page::<S>))
        .route("/ap/t/{topic}/p/{post}", get(objects::note::<S>))
}

/// Federation, or the 404 an unknown route answers when it is off.
pub fn federation<S: Store>(state: &AppState<S>) -> AppResult<std::sync::Arc<Federation>> {
    state.federation.required()
}

/// A JSON document with the ActivityPub media type, `Vary: Accept` (a
/// browser asking the same URL is sent to the HTML page instead).
pub fn ap_json(doc: serde_json::Value) -> Response {
    let mut res = axum::Json(doc).into_response();
    res.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static(AP_CONTENT_TYPE));
    res.headers_mut().insert(header::VARY, HeaderValue::from_static("Accept"));
    res
}

/// Whether a request asks for a web page rather than a document: its
/// Accept names HTML and neither ActivityPub type.
pub fn wants_page(headers: &HeaderMap) -> bool {
    let accept = headers.get(header::ACCEPT).and_then(|v| v.to_str().ok()).unwrap_or("");
    accept.contains("text/html")
        && !accept.contains("application/activity+json")
        && !accept.contains("application/ld+json")
}

/// A browser sent from an id to its page (303), `Vary: Accept`.
pub fn to_page(path: &str) -> Response {
    let mut res = axum::response::Redirect::to(path).into_response();
    res.headers_mut().insert(header::VARY, HeaderValue::from_static("Accept"));
    res
}
