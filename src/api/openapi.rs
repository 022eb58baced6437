//! `GET /api/v1/openapi.json`: the OpenAPI 3.1 document of the JSON API.
//!
//! The document is written by hand in `docs/openapi.json` and compiled in.
//! `tests/it/openapi.rs` keeps it honest: every operation it lists must be
//! routed, every route under `/api/v1` (scanned from `src/api/**/*.rs` and `src/server.rs`) must be
//! in it unless explicitly excluded, and real responses must match its
//! schemas. `tests/fuzz/schemathesis.sh` fuzzes the server from it.

use axum::Router;
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

use crate::app::AppState;
use crate::store::Store;

/// The document, byte for byte as in `docs/openapi.json`.
pub const OPENAPI_JSON: &str = include_str!("../../docs/openapi.json");

pub fn router<S: Store>() -> Router<AppState<S>> {
    Router::new().route("/openapi.json", get(openapi))
}

async fn openapi() -> Response {
    (
        [
            (header::CONTENT_TYPE, HeaderValue::from_static("application/json")),
            (header::CACHE_CONTROL, HeaderValue::from_static("no-cache")),
        ],
        OPENAPI_JSON,
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::OPENAPI_JSON;

    #[test]
    fn the_document_is_json_of_openapi_3_1() {
        let doc: serde_json::Value = serde_json::from_str(OPENAPI_JSON).expect("docs/openapi.json is JSON");
        assert_eq!(doc["openapi"], "3.1.0");
        assert!(doc["paths"].as_object().is_some_and(|p| !p.is_empty()));
    }
}
