//! Request metrics: a counter and a latency histogram per route template
//! (`/api/v1/topics/{id}`, never the raw path, so the label values stay
//! bounded), method and status class.
//!
//! The route is known only inside the router, the status only outside it:
//! `mark_route` (a route layer) hands the matched route out on the
//! response, and `track` (the outermost layer but one) times the whole
//! request, 408s and 404s included. Requests no route handled are labelled
//! `unmatched`.

use std::hash::{Hash, Hasher};
use std::time::Instant;

use axum::extract::{MatchedPath, Request};
use axum::http::Method;
use axum::middleware::Next;
use axum::response::Response;
use prometheus_client::encoding::{EncodeLabelSet, EncodeLabelValue, LabelValueEncoder};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::Histogram;

/// The route label for requests that matched no route.
pub const UNMATCHED: &str = "unmatched";

/// A route template as a label value, without copying it: `MatchedPath`
/// shares the router's string; the hot path (`net::hot`), which answers
/// before the router, names its route with a constant. Labels compare by
/// the string, so both land in the same series.
#[derive(Clone, Debug)]
pub enum Route {
    Matched(MatchedPath),
    Fixed(&'static str),
}

impl Route {
    pub fn as_str(&self) -> &str {
        match self {
            Route::Matched(m) => m.as_str(),
            Route::Fixed(s) => s,
        }
    }
}

impl PartialEq for Route {
    fn eq(&self, other: &Self) -> bool {
        self.as_str() == other.as_str()
    }
}

impl Eq for Route {}

impl Hash for Route {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.as_str().hash(state)
    }
}

impl EncodeLabelValue for Route {
    fn encode(&self, encoder: &mut LabelValueEncoder) -> Result<(), std::fmt::Error> {
        std::fmt::Write::write_str(encoder, self.as_str())
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RequestLabels {
    pub route: Route,
    pub method: &'static str,
    /// `2xx`, `3xx`, `4xx` or `5xx`.
    pub status: &'static str,
}

/// Cheap to clone: each family is an `Arc`.
#[derive(Clone)]
pub struct HttpMetrics {
    pub requests: Family<RequestLabels, Counter>,
    pub duration: Family<RequestLabels, Histogram>,
    /// Of `requests`, those the parked fast path answered (`net::fast`).
    pub fast_answers: Counter,
}

/// From 50 µs (a cached topic on a fast machine) to 10 s (a slow search on a Pi).
fn latency_buckets() -> Histogram {
    Histogram::new([
        0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
    ])
}

impl HttpMetrics {
    pub fn new() -> HttpMetrics {
        HttpMetrics {
            requests: Family::default(),
            duration: Family::new_with_constructor(latency_buckets),
            fast_answers: Counter::default(),
        }
    }

    fn record(&self, labels: &RequestLabels, seconds: f64) {
        self.requests.get_or_create(labels).inc();
        self.duration.get_or_create(labels).observe(seconds);
    }

    /// The counter and histogram of one fixed series, looked up once, for
    /// a caller that records into it on every request (the hot path).
    pub fn series(&self, route: &'static str, method: &'static str, status: &'static str) -> Series {
        let labels = RequestLabels { route: Route::Fixed(route), method, status };
        Series {
            requests: self.requests.get_or_create(&labels).clone(),
            duration: self.duration.get_or_create(&labels).clone(),
        }
    }
}

/// One series' metrics, shared with the family (counters and histograms
/// are handles to the same values).
#[derive(Clone)]
pub struct Series {
    requests: Counter,
    duration: Histogram,
}

impl Series {
    pub fn record(&self, started: Instant) {
        self.requests.inc();
        self.duration.observe(started.elapsed().as_secs_f64());
    }
}

impl Default for HttpMetrics {
    fn default() -> Self {
        HttpMetrics::new()
    }
}

/// Times a request and records it under the route `mark_route` found.
pub async fn track(metrics: HttpMetrics, req: Request, next: Next) -> Response {
    let started = Instant::now();
    let method = method_label(req.method());
    let res = next.run(req).await;
    let route = res.extensions().get::<MatchedPath>().cloned().map_or(Route::Fixed(UNMATCHED), Route::Matched);
    let labels = RequestLabels { route, method, status: status_class(res.status().as_u16()) };
    metrics.record(&labels, started.elapsed().as_secs_f64());
    res
}

/// Copies the matched route template onto the response for `track`.
pub async fn mark_route(req: Request, next: Next) -> Response {
    let route = req.extensions().get::<MatchedPath>().cloned();
    let mut res = next.run(req).await;
    if let Some(route) = route {
        res.extensions_mut().insert(route);
    }
    res
}

/// The standard methods by name; anything else as `OTHER`, so a client
/// cannot mint label values.
fn method_label(m: &Method) -> &'static str {
    match *m {
        Method::GET => "GET",
        Method::POST => "POST",
        Method::PUT => "PUT",
        Method::PATCH => "PATCH",
        Method::DELETE => "DELETE",
        Method::HEAD => "HEAD",
        Method::OPTIONS => "OPTIONS",
        _ => "OTHER",
    }
}

fn status_class(code: u16) -> &'static str {
    match code {
        100..=199 => "1xx",
        200..=299 => "2xx",
        300..=399 => "3xx",
        400..=499 => "4xx",
        _ => "5xx",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_methods_and_statuses_fall_into_fixed_labels() {
        assert_eq!(method_label(&Method::from_bytes(b"BREW").expect("method")), "OTHER");
        assert_eq!(status_class(101), "1xx");
        assert_eq!(status_class(304), "3xx");
        assert_eq!(status_class(429), "4xx");
        assert_eq!(status_class(503), "5xx");
    }
}
