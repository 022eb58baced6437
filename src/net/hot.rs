//! The hot path: a cached public topic (`GET /api/v1/topics/{id}`, 99 % of
//! the benchmark's requests) answered as soon as hyper has parsed the
//! request, before the router and its layers.
//!
//! Written by hand because no layer of axum can be skipped per request:
//! for a cache hit, routing, the extractors and the request-id, metrics
//! and deadline layers cost more than the lookup and the answer together
//! (each `from_fn` layer clones and boxes the router behind it, and the
//! extensions, matched path, span and boxed futures add about twenty
//! allocations). the history of docs/BENCHMARKS.md (`git show 8141355:docs/BENCHMARKS.md`), "The hot path", has the before and
//! after.
//!
//! It answers only what it answers exactly as the router would: a GET
//! without a body, of a topic id in plain digits, with no query or only
//! `sort` and `html` with valid values, whose public rendering is cached,
//! has nothing removed in it (so no viewer sees more) and needs no large
//! gzip compression first; and only while request logging (debug level,
//! from the request span) is off. Like the router, it asks the cache's
//! maker for the zstd and Brotli variants the client would rather have. The answer is `respond`'s, as the handler's
//! is, with the request-id header, counted in the same metrics series and
//! as a cache hit. Anything else goes to the router unchanged.

use std::sync::Arc;
use std::time::Instant;

use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, Uri, header};
use axum::response::Response;

use super::fast::{self, Framed};
use crate::app::AppState;
use crate::app::read::{parse_html, parse_post_sort};
use crate::cache::{Accepted, Audience, Encoding, Rendered, Variant, respond};
use crate::logging::request_id;
use crate::metrics::http::Series;
use crate::store::Store;

/// The route template the router serves these requests under, and the
/// metrics label of the hot path's answers.
pub const ROUTE: &str = "/api/v1/topics/{id}";

/// Answers a request before the router when it can; object-safe, so the
/// accept loop does not depend on the store type.
pub trait Answer: Send + Sync + 'static {
    /// The response, or `None` for the router to answer. `no_body`: the
    /// request has no body to read.
    fn answer(&self, method: &Method, uri: &Uri, headers: &HeaderMap, no_body: bool) -> Option<Response>;

    /// The same answer, framed for the wire, to a GET without a body that
    /// a parked connection read whole (`net::fast`): `target` and
    /// `headers` as sent.
    fn answer_framed(&self, target: &str, headers: &[httparse::Header<'_>]) -> Option<Framed>;
}

pub struct Hot<S> {
    state: AppState<S>,
    /// The 200 and 304 series of `ROUTE`, looked up once; `None` when
    /// metrics are off.
    series: Option<(Series, Series)>,
    /// Strict-Transport-Security, as the router's layer adds it to every
    /// answer of a site served over https; `None` otherwise.
    hsts: Option<HeaderValue>,
}

impl<S: Store> Hot<S> {
    pub fn new(state: AppState<S>) -> Hot<S> {
        let series = (state.metrics.mode() != crate::metrics::Mode::Off).then(|| {
            let http = &state.metrics.http;
            (http.series(ROUTE, "GET", "2xx"), http.series(ROUTE, "GET", "3xx"))
        });
        let hsts = state.web.hsts();
        Hot { state, series, hsts }
    }

    /// The cached public rendering a GET of `path?query` asks for, when the
    /// hot path may answer it (see the module comment).
    fn rendered(&self, path: &str, query: Option<&str>, accepted: &Accepted) -> Option<Arc<Rendered>> {
        let id = topic_id(path)?;
        let variant = variant(query)?;
        if request_id::logs_requests() {
            return None;
        }
        let rendered = self.state.cache.get((id, variant))?;
        if rendered.restricted.is_some() {
            return None;
        }
        self.state.cache.ask_encodings((id, variant), &rendered, accepted);
        if rendered.gzip_pending_for(accepted) {
            return None;
        }
        self.state.cache.hits.inc();
        Some(rendered)
    }

    fn record(&self, status: StatusCode, started: Instant) {
        if let Some((ok, not_modified)) = &self.series {
            if status == StatusCode::NOT_MODIFIED { not_modified } else { ok }.record(started);
        }
    }
}

impl<S: Store> Answer for Hot<S> {
    fn answer(&self, method: &Method, uri: &Uri, headers: &HeaderMap, no_body: bool) -> Option<Response> {
        if method != Method::GET || !no_body {
            return None;
        }
        let started = Instant::now();
        let accepted = Accepted::parse(headers.get(header::ACCEPT_ENCODING).map(HeaderValue::as_bytes));
        let rendered = self.rendered(uri.path(), uri.query(), &accepted)?;
        let mut res = respond(&rendered, headers, Audience::Public);
        res.headers_mut().insert(request_id::HEADER.clone(), request_id::of(headers));
        if let Some(hsts) = &self.hsts {
            res.headers_mut().insert(header::STRICT_TRANSPORT_SECURITY, hsts.clone());
        }
        self.record(res.status(), started);
        Some(res)
    }

    fn answer_framed(&self, target: &str, headers: &[httparse::Header<'_>]) -> Option<Framed> {
        let header = |name| fast::header(headers, name);
        let started = Instant::now();
        let (path, query) = match target.split_once('?') {
            Some((path, query)) => (path, Some(query)),
            None => (target, None),
        };
        let accepted = Accepted::parse(header("accept-encoding"));
        let rendered = self.rendered(path, query, &accepted)?;
        let a = rendered.answer(header("if-none-match"), &accepted, Audience::Public);
        let id = request_id::of_value(header(request_id::HEADER.as_str()));
        // A 304 has no content type (as `respond`'s), a plain body no
        // encoding, a site without https no HSTS: `frame` leaves out what
        // is empty.
        let coded = a.body.is_some() && a.encoding != Encoding::Identity;
        let lines: [(&str, &[u8]); 7] = [
            ("content-type", if a.body.is_some() { a.content_type.as_bytes() } else { b"" }),
            ("etag", a.etag.as_bytes()),
            ("vary", a.vary.as_bytes()),
            ("cache-control", a.cache_control.as_bytes()),
            ("x-request-id", id.as_bytes()),
            ("strict-transport-security", self.hsts.as_ref().map_or(&b""[..], HeaderValue::as_bytes)),
            ("content-encoding", if coded { a.encoding.name().as_bytes() } else { b"" }),
        ];
        let framed = fast::frame(a.status, &lines, a.body.cloned());
        self.record(a.status, started);
        self.state.metrics.http.fast_answers.inc();
        Some(framed)
    }
}

/// The id in `/api/v1/topics/{id}` when it is plain digits that fit an
/// i64 (what else the router's `Path<i64>` accepts, `+7`, goes to it).
fn topic_id(path: &str) -> Option<i64> {
    let digits = path.strip_prefix("/api/v1/topics/")?;
    if digits.is_empty() || digits.len() > 18 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// The rendering a query asks for, when it holds nothing but `sort` and
/// `html`, each at most once, with valid values (anything else, errors
/// and percent-encoding included, is the router's to answer).
fn variant(query: Option<&str>) -> Option<Variant> {
    let (mut sort, mut html) = (None, None);
    for pair in query.unwrap_or("").split('&').filter(|p| !p.is_empty()) {
        let (key, value) = pair.split_once('=')?;
        let slot = match key {
            "sort" => &mut sort,
            "html" => &mut html,
            _ => return None,
        };
        if slot.replace(value).is_some() {
            return None;
        }
    }
    let sort = parse_post_sort(sort).ok()?;
    Some(Variant::json(sort, parse_html(html).ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::PostSort;

    #[test]
    fn only_plain_topic_ids_are_taken() {
        assert_eq!(topic_id("/api/v1/topics/42"), Some(42));
        assert_eq!(topic_id("/api/v1/topics/007"), Some(7));
        for path in [
            "/api/v1/topics/",
            "/api/v1/topics/+7",
            "/api/v1/topics/-7",
            "/api/v1/topics/7/",
            "/api/v1/topics/7/posts",
            "/api/v1/topics/1234567890123456789",
            "/api/v1/topicsx/7",
            "/api/v1/topics/%37",
        ] {
            assert_eq!(topic_id(path), None, "{path}");
        }
    }

    #[test]
    fn only_known_queries_with_valid_values_are_taken() {
        assert_eq!(variant(None), Some(Variant::Json(PostSort::Best)));
        assert_eq!(variant(Some("")), Some(Variant::Json(PostSort::Best)));
        assert_eq!(variant(Some("sort=new")), Some(Variant::Json(PostSort::New)));
        assert_eq!(variant(Some("html=true&sort=old")), Some(Variant::JsonHtml(PostSort::Old)));
        assert_eq!(variant(Some("html=false")), Some(Variant::Json(PostSort::Best)));
        for query in ["sort=top", "html=yes", "sort=new&sort=old", "sort", "x=1", "sort=%6Eew", "sort=new&x=1"] {
            assert_eq!(variant(Some(query)), None, "{query}");
        }
    }
}
