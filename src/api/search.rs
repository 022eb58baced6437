//! Full-text search: `GET /search?q=...&type=topics|posts`, ranked best
//! first, with highlighted snippets; paged by position.

use axum::Router;
use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde::{Deserialize, Serialize};

use super::extract::Query;
use crate::app::AppState;
use crate::app::limits::{Action, ClientIp, Who};
use crate::app::{AppError, AppResult};
use crate::model::SearchHit;
use crate::store::search::{MAX_OFFSET, MAX_QUERY_CHARS};
use crate::store::{Search, SearchKind, Store};

pub fn router<S: Store>() -> Router<AppState<S>> {
    Router::new().route("/search", get(search::<S>))
}

#[derive(Deserialize)]
pub struct SearchQuery {
    q: Option<String>,
    #[serde(rename = "type")]
    kind: Option<String>,
    community: Option<String>,
    limit: Option<usize>,
    after: Option<usize>,
}

#[derive(Serialize)]
struct SearchResponse {
    hits: Vec<SearchHit>,
    /// Pass as `after` for the next page; null on the last one.
    next: Option<usize>,
}

/// Validates a search query; pure, so a fuzz target can run it too.
pub fn parse_search(q: SearchQuery) -> AppResult<Search> {
    let bad = |m: String| AppError::BadRequest("invalid_query", m);
    let text = q.q.ok_or_else(|| bad("q is required".into()))?;
    if text.chars().count() > MAX_QUERY_CHARS {
        return Err(bad(format!("q must be at most {MAX_QUERY_CHARS} characters")));
    }
    let kind = match q.kind.as_deref() {
        None | Some("topics") => SearchKind::Topics,
        Some("posts") => SearchKind::Posts,
        Some(_) => return Err(bad("type must be one of topics, posts".into())),
    };
    let limit = q.limit.unwrap_or(25);
    if !(1..=100).contains(&limit) {
        return Err(bad("limit must be between 1 and 100".into()));
    }
    let offset = q.after.unwrap_or(0);
    if offset > MAX_OFFSET {
        return Err(bad(format!("after must be at most {MAX_OFFSET}: search pages no deeper")));
    }
    let community = q.community.filter(|c| !c.is_empty());
    Ok(Search { text, kind, community, offset, limit })
}

async fn search<S: Store>(
    State(state): State<AppState<S>>,
    ip: ClientIp,
    Query(q): Query<SearchQuery>,
) -> AppResult<Response> {
    let q = parse_search(q)?;
    state.limits.check(Action::Search, ip, Who::Nobody)?;
    // A name no community could have: answered without a lookup.
    if q.community.as_deref().is_some_and(|c| c.len() > 64) {
        return Err(AppError::not_found("community"));
    }
    let page = state.store.search(q).await?;
    // Public and changing: let nobody in between keep a stale copy.
    Ok(([(header::CACHE_CONTROL, "no-cache")], axum::Json(SearchResponse { hits: page.hits, next: page.next }))
        .into_response())
}
