//! Request ids: each request gets one (the client's `x-request-id` when it
//! is sane, else a fresh one), echoed in the response header and carried in
//! the request's tracing span, so every log line of the request names it.

use axum::extract::Request;
use axum::http::{HeaderName, HeaderValue};
use axum::middleware::Next;
use axum::response::Response;
use tracing::Instrument;

pub static HEADER: HeaderName = HeaderName::from_static("x-request-id");

/// Longest incoming id kept; a longer one is replaced.
const MAX_LEN: usize = 64;

/// Runs the request inside a `request` span with its id, and logs its end at
/// debug level (route, status, time).
pub async fn layer(req: Request, next: Next) -> Response {
    let id = of(req.headers());
    let span = tracing::info_span!("request", request_id = %id.to_str().unwrap_or(""));
    let started = std::time::Instant::now();
    // Copied only when the line will be written: this runs on every request.
    let what = logs_requests().then(|| (req.method().clone(), req.uri().path().to_owned()));
    async move {
        let mut res = next.run(req).await;
        if let Some((method, path)) = what {
            let micros = started.elapsed().as_micros() as u64;
            tracing::debug!(%method, path, status = res.status().as_u16(), micros, "request");
        }
        res.headers_mut().insert(HEADER.clone(), id);
        res
    }
    .instrument(span)
    .await
}

/// Whether each request's end is logged (debug level for this module).
pub fn logs_requests() -> bool {
    tracing::enabled!(tracing::Level::DEBUG)
}

/// The id of a request with these headers: the client's when sane, else a
/// fresh one.
pub fn of(headers: &axum::http::HeaderMap) -> HeaderValue {
    headers.get(&HEADER).filter(|v| is_sane(v.as_bytes())).cloned().unwrap_or_else(fresh)
}

/// `of` for the raw value of the client's `x-request-id`, if it sent one.
pub fn of_value(sent: Option<&[u8]>) -> HeaderValue {
    sent.filter(|v| is_sane(v)).and_then(|v| HeaderValue::from_bytes(v).ok()).unwrap_or_else(fresh)
}

/// 1-64 characters of letters, digits and `-_.:@` (UUIDs, ULIDs, the hex
/// of proxies and tracers), so a client cannot inject anything into logs.
fn is_sane(id: &[u8]) -> bool {
    (1..=MAX_LEN).contains(&id.len()) && id.iter().all(|b| b.is_ascii_alphanumeric() || b"-_.:@".contains(b))
}

/// 16 random hex digits: unique enough to find one request in the logs.
fn fresh() -> HeaderValue {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let n: u64 = rand::random();
    let mut out = [0u8; 16];
    for (i, b) in out.iter_mut().enumerate() {
        *b = HEX[((n >> (60 - 4 * i)) & 0xf) as usize];
    }
    HeaderValue::from_bytes(&out).unwrap_or_else(|_| HeaderValue::from_static("0"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_short_plain_ids_are_accepted() {
        assert!(is_sane(b"3f2a-9c1b_req.7:edge@lb"));
        assert!(!is_sane(b""));
        assert!(!is_sane(b"has space"));
        assert!(!is_sane(b"new\nline"));
        assert!(!is_sane("é".as_bytes()));
        assert!(!is_sane(&[b'a'; 65]));
    }

    #[test]
    fn fresh_ids_are_16_hex_digits_and_differ() {
        let (a, b) = (fresh(), fresh());
        assert_eq!(a.len(), 16);
        assert!(a.as_bytes().iter().all(u8::is_ascii_hexdigit));
        assert_ne!(a, b);
    }
}
