//! The parked connection's fast path: a cached topic answered without
//! building a hyper connection.
//!
//! A parked cleartext connection (`idle`) builds a hyper `http1::Connection`
//! for every request it serves after a pause: under keep-alive load that is
//! every request, and the connection's allocations (its boxed state, an
//! 8 KB read buffer, the write buffer), the request's `HeaderMap` and URI,
//! the response's `HeaderMap` and the encoding cost more than the answer
//! (perf, docs/PERFORMANCE.md "Cached reads without hyper"). So when a parked
//! connection becomes readable it first reads what is there itself. If that
//! is one whole `GET` head (httparse parses it) that the hot path answers
//! from the cache, the answer is framed here and written with one
//! `writev`; anything else (a partial or longer head, pipelined requests, a
//! body, another method or version, `Connection`, `Upgrade` or `Expect`
//! headers, a miss) goes to hyper with the bytes already read, exactly as
//! if hyper had read them. hyper has no hook for this, hence by hand.
//!
//! The answer is the hot path's (`hot::Answer::answer_framed`), with the
//! `content-length` and `date` headers hyper would add. TLS connections
//! take the same path through rustls (`fast_tls`).

use std::cell::RefCell;
use std::io::{self, IoSlice};
use std::time::{Duration, SystemTime};

use axum::http::StatusCode;
use bytes::Bytes;
use tokio::net::TcpStream;

use super::hot::Answer;

/// A response as it goes on the wire: the head, then the body.
pub struct Framed {
    head: Vec<u8>,
    body: Bytes,
}

impl Framed {
    pub fn head(&self) -> &[u8] {
        &self.head
    }

    pub fn body(&self) -> &Bytes {
        &self.body
    }

    /// Head and body together.
    pub fn wire_len(&self) -> usize {
        self.head.len() + self.body.len()
    }

    /// What is left after the first `from` bytes: the rest of the head,
    /// then the rest of the body.
    pub fn rest(&self, from: usize) -> [IoSlice<'_>; 2] {
        match from.checked_sub(self.head.len()) {
            None => [IoSlice::new(&self.head[from..]), IoSlice::new(&self.body)],
            Some(into_body) => [IoSlice::new(&[]), IoSlice::new(&self.body[into_body..])],
        }
    }
}

/// A response head for `status` with `headers` (those with an empty value
/// left out), then `content-length` when there is a body (a 304 has none,
/// as hyper sends it) and `date`.
pub fn frame(status: StatusCode, headers: &[(&str, &[u8])], body: Option<Bytes>) -> Framed {
    let mut head = Vec::with_capacity(256);
    head.extend_from_slice(b"HTTP/1.1 ");
    head.extend_from_slice(status.as_str().as_bytes());
    head.push(b' ');
    head.extend_from_slice(status.canonical_reason().unwrap_or("").as_bytes());
    head.extend_from_slice(b"\r\n");
    let mut line = |name: &str, value: &[u8]| {
        head.extend_from_slice(name.as_bytes());
        head.extend_from_slice(b": ");
        head.extend_from_slice(value);
        head.extend_from_slice(b"\r\n");
    };
    for (name, value) in headers.iter().filter(|(_, value)| !value.is_empty()) {
        line(name, value);
    }
    if let Some(body) = &body {
        line("content-length", itoa::Buffer::new().format(body.len()).as_bytes());
    }
    DATE.with(|date| line("date", date.borrow_mut().now()));
    head.extend_from_slice(b"\r\n");
    Framed { head, body: body.unwrap_or_default() }
}

/// The `date` header's value, formatted once a second per thread (as
/// hyper does).
struct Date {
    second: u64,
    text: [u8; 29],
}

impl Date {
    fn now(&mut self) -> &[u8] {
        let now = SystemTime::now();
        let second = now.duration_since(SystemTime::UNIX_EPOCH).map_or(0, |d| d.as_secs());
        if second != self.second {
            let text = httpdate::fmt_http_date(now);
            if text.len() == self.text.len() {
                self.text.copy_from_slice(text.as_bytes());
                self.second = second;
            }
        }
        &self.text
    }
}

thread_local! {
    static DATE: RefCell<Date> = const { RefCell::new(Date { second: 0, text: *b"Thu, 01 Jan 1970 00:00:00 GMT" }) };
}

/// What a parked connection's read came to.
pub enum Read {
    /// A request the hot path answered: send this, then park again.
    Answered(Framed),
    /// Bytes hyper must serve.
    Pass(Bytes),
    /// Nothing to read after all (tokio clears a socket's readiness only
    /// when a read would block): park again.
    Nothing,
    /// The client closed, or the socket failed.
    Closed,
}

/// Longest request head the fast path reads; a longer one (a browser's,
/// with cookies) goes to hyper, which reads the rest.
pub const MAX_HEAD: usize = 2048;

/// Most headers the fast path parses; more go to hyper.
const MAX_HEADERS: usize = 24;

/// Reads what a readable parked connection holds and answers it when it
/// is one whole request the hot path answers (see the module comment).
/// Synchronous, so its buffers never become part of the connection's task.
pub fn read(tcp: &TcpStream, hot: &dyn Answer) -> Read {
    let mut buf = [0u8; MAX_HEAD];
    let n = match tcp.try_read(&mut buf) {
        Ok(0) => return Read::Closed,
        Ok(n) => n,
        Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Read::Nothing,
        Err(_) => return Read::Closed,
    };
    match answer(&buf[..n], hot) {
        Some(framed) => Read::Answered(framed),
        None => Read::Pass(Bytes::copy_from_slice(&buf[..n])),
    }
}

/// The hot path's answer to `bytes` when they are exactly one `GET` head
/// of HTTP/1.1 it may answer.
pub fn answer(bytes: &[u8], hot: &dyn Answer) -> Option<Framed> {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut req = httparse::Request::new(&mut headers);
    match req.parse(bytes) {
        Ok(httparse::Status::Complete(len)) if len == bytes.len() => {}
        _ => return None,
    }
    let target = req.path.filter(|t| t.starts_with('/') && !t.contains('#'))?;
    if req.method != Some("GET") || req.version != Some(1) {
        return None;
    }
    for h in req.headers.iter() {
        let name = h.name;
        let framing =
            ["content-length", "transfer-encoding", "upgrade", "expect"].iter().any(|n| name.eq_ignore_ascii_case(n));
        if framing || (name.eq_ignore_ascii_case("connection") && !h.value.eq_ignore_ascii_case(b"keep-alive")) {
            return None;
        }
    }
    hot.answer_framed(target, req.headers)
}

/// The first value of the header `name` among `headers`.
pub fn header<'h>(headers: &[httparse::Header<'h>], name: &str) -> Option<&'h [u8]> {
    headers.iter().find(|h| h.name.eq_ignore_ascii_case(name)).map(|h| h.value)
}

/// Writes `framed`, waiting at most `limit` for the client to take it;
/// `false` if it did not or the socket failed.
pub async fn send(tcp: &TcpStream, framed: Framed, limit: Duration) -> bool {
    send_with(tcp, framed, limit, |framed, sent| write(tcp, framed, sent)).await
}

/// Sends `framed` in turns of `write`, which sends what the socket takes
/// after the first `sent` bytes (`None` once all is sent, else how much
/// is), waiting at most `limit` in all for the socket between turns;
/// `false` if the client did not take it or the socket failed. The TLS
/// fast path sends through rustls with its own `write`.
pub async fn send_with<W>(tcp: &TcpStream, framed: Framed, limit: Duration, mut write: W) -> bool
where
    W: FnMut(&Framed, usize) -> io::Result<Option<usize>>,
{
    match write(&framed, 0) {
        Ok(None) => true,
        // Boxed: the wait is rare, and its timer would make every parked
        // connection's task larger.
        Ok(Some(sent)) => Box::pin(send_rest(tcp, framed, sent, limit, write)).await,
        Err(_) => false,
    }
}

async fn send_rest<W>(tcp: &TcpStream, framed: Framed, mut sent: usize, limit: Duration, mut write: W) -> bool
where
    W: FnMut(&Framed, usize) -> io::Result<Option<usize>>,
{
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        if !matches!(tokio::time::timeout_at(deadline, tcp.writable()).await, Ok(Ok(()))) {
            return false;
        }
        match write(&framed, sent) {
            Ok(None) => return true,
            Ok(Some(now)) => sent = now,
            Err(_) => return false,
        }
    }
}

/// Writes what the socket takes of `framed` after its first `sent` bytes:
/// `None` once all is written, else how much is.
fn write(tcp: &TcpStream, framed: &Framed, mut sent: usize) -> io::Result<Option<usize>> {
    while sent < framed.wire_len() {
        match tcp.try_write_vectored(&framed.rest(sent)) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => sent += n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(Some(sent)),
            Err(e) => return Err(e),
        }
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_framed_answer_is_a_complete_http_response() {
        let body = Bytes::from_static(b"{\"a\":1}");
        let framed = frame(StatusCode::OK, &[("content-type", b"application/json")], Some(body.clone()));
        let head = std::str::from_utf8(framed.head()).expect("ascii");
        assert!(head.starts_with("HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 7\r\ndate: "));
        assert!(head.ends_with(" GMT\r\n\r\n"), "{head}");
        let mut headers = [httparse::EMPTY_HEADER; 8];
        let mut res = httparse::Response::new(&mut headers);
        assert_eq!(res.parse(framed.head()).expect("parses"), httparse::Status::Complete(framed.head().len()));
        assert_eq!(res.code, Some(200));
        assert_eq!(framed.body(), &body);

        let not_modified = frame(StatusCode::NOT_MODIFIED, &[("etag", b"\"x\"")], None);
        let head = std::str::from_utf8(not_modified.head()).expect("ascii");
        assert!(head.starts_with("HTTP/1.1 304 Not Modified\r\netag: \"x\"\r\ndate: "), "{head}");
        assert!(!head.contains("content-length"), "a 304 has no content-length, as hyper sends it");
        assert!(not_modified.body().is_empty());
    }

    #[test]
    fn the_date_is_an_http_date_of_now() {
        let text = DATE.with(|d| d.borrow_mut().now().to_vec());
        let parsed = httpdate::parse_http_date(std::str::from_utf8(&text).expect("ascii")).expect("an HTTP date");
        let off = SystemTime::now().duration_since(parsed).unwrap_or_default();
        assert!(off < Duration::from_secs(5), "{off:?}");
    }

    /// Answers every target it is asked, recording it, to show which heads
    /// reach the hot path at all.
    struct Echo(std::sync::Mutex<Vec<(String, Option<Vec<u8>>)>>);

    impl Answer for Echo {
        fn answer(
            &self,
            _: &axum::http::Method,
            _: &axum::http::Uri,
            _: &axum::http::HeaderMap,
            _: bool,
        ) -> Option<axum::response::Response> {
            None
        }

        fn answer_framed(&self, target: &str, headers: &[httparse::Header<'_>]) -> Option<Framed> {
            let etag = header(headers, "If-None-Match").map(<[u8]>::to_vec);
            self.0.lock().expect("lock").push((target.to_owned(), etag));
            Some(frame(StatusCode::OK, &[], Some(Bytes::new())))
        }
    }

    #[test]
    fn only_one_whole_plain_get_head_reaches_the_hot_path() {
        let echo = Echo(Default::default());
        let ok = b"GET /api/v1/topics/7 HTTP/1.1\r\nHost: x\r\nif-none-match: \"e\"\r\nConnection: Keep-Alive\r\n\r\n";
        assert!(answer(ok, &echo).is_some());
        assert_eq!(echo.0.lock().expect("lock")[0], ("/api/v1/topics/7".to_owned(), Some(b"\"e\"".to_vec())));
        let refused: [&[u8]; 12] = [
            b"GET /api/v1/topics/7 HTTP/1.1\r\nHost: x\r\n",                // partial
            b"GET /api/v1/topics/7 HTTP/1.1\r\n\r\nGET / HTTP/1.1\r\n\r\n", // pipelined
            b"HEAD /api/v1/topics/7 HTTP/1.1\r\n\r\n",
            b"POST /api/v1/topics/7 HTTP/1.1\r\n\r\n",
            b"GET /api/v1/topics/7 HTTP/1.0\r\n\r\n",
            b"GET http://x/api/v1/topics/7 HTTP/1.1\r\n\r\n",
            b"GET /api/v1/topics/7 HTTP/1.1\r\nContent-Length: 0\r\n\r\n",
            b"GET /api/v1/topics/7 HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n",
            b"GET /api/v1/topics/7 HTTP/1.1\r\nConnection: close\r\n\r\n",
            b"GET /api/v1/topics/7 HTTP/1.1\r\nUpgrade: websocket\r\n\r\n",
            b"GET /api/v1/topics/7 HTTP/1.1\r\nExpect: 100-continue\r\n\r\n",
            b"GET /api/v1/topics/7 HTTP/1.1\r\nBad Header: x\r\n\r\n",
        ];
        for head in refused {
            assert!(answer(head, &echo).is_none(), "{}", String::from_utf8_lossy(head));
        }
        let many: String = (0..MAX_HEADERS + 1).map(|i| format!("x-{i}: y\r\n")).collect();
        let many = format!("GET /api/v1/topics/7 HTTP/1.1\r\n{many}\r\n");
        assert!(answer(many.as_bytes(), &echo).is_none(), "too many headers: hyper's");
        assert_eq!(echo.0.lock().expect("lock").len(), 1, "none of the refused reached the hot path");
    }
}
