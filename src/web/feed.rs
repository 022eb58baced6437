//! Atom 1.0 feeds (RFC 4287) of the newest topics: `/feed.atom` for the
//! whole site, `/c/{name}/feed.atom` for one community. Absolute links are
//! built from the site's configured address (`--public-url`, else the
//! listen address), never from the request: a forged `Host` would
//! otherwise point a publicly cacheable feed's links at another site.

use askama::Template;
use axum::extract::{Path, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};

use crate::app::{AppError, AppResult, AppState};
use crate::model::Timestamp;
use crate::store::{ListTopics, Store, TopicSort};

/// Entries per feed.
const ENTRIES: usize = 25;

struct Entry {
    id: i64,
    title: String,
    author: String,
    community: String,
    published: String,
    updated: String,
    /// Escaped by the template: Atom `type="html"` content.
    html: String,
    url: Option<String>,
}

#[derive(Template)]
#[template(path = "feed.xml")]
struct Feed {
    base: String,
    /// Path of the HTML page this feed follows.
    page: String,
    /// Path of the feed itself.
    this: String,
    title: String,
    updated: String,
    entries: Vec<Entry>,
}

pub async fn front<S: Store>(State(state): State<AppState<S>>) -> Response {
    answer(feed(&state, None).await)
}

pub async fn community<S: Store>(State(state): State<AppState<S>>, Path(name): Path<String>) -> Response {
    answer(feed(&state, Some(name)).await)
}

fn answer(feed: AppResult<String>) -> Response {
    match feed {
        Ok(xml) => (
            [
                (header::CONTENT_TYPE, "application/atom+xml; charset=utf-8"),
                (header::CACHE_CONTROL, "public, max-age=60"),
            ],
            xml,
        )
            .into_response(),
        Err(e) => {
            let status = e.status_logged();
            let status = if status == StatusCode::INTERNAL_SERVER_ERROR { status } else { StatusCode::NOT_FOUND };
            (status, [(header::CONTENT_TYPE, "text/plain; charset=utf-8")], format!("{e}\n")).into_response()
        }
    }
}

async fn feed<S: Store>(state: &AppState<S>, name: Option<String>) -> AppResult<String> {
    let (title, page) = match &name {
        Some(n) if n.len() <= 64 => {
            let c = state.store.community(n.clone()).await?;
            (format!("{} (c/{})", c.title, c.name), format!("/c/{}", c.name))
        }
        Some(_) => return Err(AppError::not_found("community")),
        None => ("Pith".to_owned(), "/".to_owned()),
    };
    let community = name.map(|n| n.to_ascii_lowercase());
    let q = ListTopics { community, sort: TopicSort::New, after: None, limit: ENTRIES, hide_blocked_by: None };
    let topics = state.store.list_topics(q).await?.topics;
    let newest = topics.iter().map(|t| t.edited_at.unwrap_or(t.created_at)).max().unwrap_or(Timestamp(0));
    let entries = topics
        .iter()
        .map(|t| Entry {
            id: t.id,
            title: t.title.clone(),
            author: t.author.clone().unwrap_or_else(|| "[deleted]".into()),
            community: t.community.clone(),
            published: t.created_at.rfc3339(),
            updated: t.edited_at.unwrap_or(t.created_at).rfc3339(),
            // Rendered and sanitized once, when the topic was written.
            html: t.body_html.clone().unwrap_or_default(),
            url: t.url.clone(),
        })
        .collect();
    let this = if page == "/" { "/feed.atom".to_owned() } else { format!("{page}/feed.atom") };
    let feed = Feed { base: state.web.public_url(), page, this, title, updated: newest.rfc3339(), entries };
    feed.render().map_err(|e| AppError::Internal(e.to_string()))
}
