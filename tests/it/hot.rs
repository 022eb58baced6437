//! The hot path (`pith::net::hot`): which requests it answers before the
//! router, and that its answers are the router's, byte for byte and
//! header for header, over a real socket.

use axum::http::{HeaderMap, HeaderValue, Method, Uri};
use pith::net::hot::{Answer, Hot};
use reqwest::Method as ReqMethod;
use serde_json::json;

use crate::support::helpers::{Reply, TestApp, app_with_a_long_topic, fetch};

fn answer(app: &TestApp, method: Method, uri: &str, headers: &HeaderMap, no_body: bool) -> Option<u16> {
    let hot = Hot::new(app.state.clone());
    let uri: Uri = uri.parse().expect("uri");
    hot.answer(&method, &uri, headers, no_body).map(|r| r.status().as_u16())
}

async fn get(app: &TestApp, path: &str, headers: &[(&str, &str)]) -> Reply {
    let mut req = app.req(ReqMethod::GET, path);
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    fetch(req).await
}

#[tokio::test]
async fn it_answers_cached_public_topics_only() {
    let (app, topic, alice) = app_with_a_long_topic().await;
    let path = format!("/api/v1/topics/{topic}");
    let none = HeaderMap::new();
    assert_eq!(answer(&app, Method::GET, &path, &none, true), None, "not rendered yet: the router renders it");
    assert_eq!(get(&app, &path, &[]).await.status, 200);
    assert_eq!(answer(&app, Method::GET, &path, &none, true), Some(200), "now cached");
    assert_eq!(answer(&app, Method::GET, &format!("{path}?sort=best&html=false"), &none, true), Some(200));
    for (method, uri, no_body) in [
        (Method::GET, format!("{path}?sort=new"), true), // another rendering, not cached yet
        (Method::GET, format!("{path}?sort=best&x=1"), true),
        (Method::GET, format!("{path}?sort=bogus"), true),
        (Method::GET, format!("{path}/"), true),
        (Method::GET, path.clone(), false),
        (Method::HEAD, path.clone(), true),
        (Method::DELETE, path.clone(), true),
    ] {
        assert_eq!(answer(&app, method.clone(), &uri, &none, no_body), None, "{method} {uri} (body: {})", !no_body);
    }
    let mut inm = HeaderMap::new();
    let etag = get(&app, &path, &[]).await.header("etag").expect("etag").to_owned();
    inm.insert("if-none-match", HeaderValue::from_str(&etag).expect("header"));
    assert_eq!(answer(&app, Method::GET, &path, &inm, true), Some(304));

    // A write evicts it (and renders it again in the background); what
    // the hot path answers next is the new rendering.
    let before = get(&app, &path, &[]).await.bytes;
    app.reply(topic, &alice, None, "one more").await;
    let after = get(&app, &path, &[]).await;
    assert!(String::from_utf8_lossy(&after.bytes).contains("one more"));
    assert_ne!(after.bytes, before);
    assert_eq!(answer(&app, Method::GET, &path, &none, true), Some(200));

    // Removed content makes the view depend on who asks: the router decides.
    let admin = app.admin_token.clone();
    let first = app.read_topic(topic, "best").await["posts"][0]["id"].as_i64().expect("a post");
    let (status, _) = app.post(&format!("/api/v1/posts/{first}/remove"), Some(&admin), json!({"reason": "spam"})).await;
    assert_eq!(status, 204);
    assert_eq!(get(&app, &path, &[]).await.status, 200);
    assert!(app.state.cache.get((topic, pith::cache::Variant::Json(pith::store::PostSort::Best))).is_some());
    assert_eq!(answer(&app, Method::GET, &path, &none, true), None, "restricted: not the hot path's");
    app.stop().await;
}

/// The same cached rendering asked for through the hot path (plain query)
/// and through the router (an unknown parameter sends it there).
#[tokio::test]
async fn its_answers_are_the_routers() {
    let (app, topic, _) = app_with_a_long_topic().await;
    let hot = format!("/api/v1/topics/{topic}?sort=best");
    let routed = format!("/api/v1/topics/{topic}?sort=best&via=router");
    assert_eq!(get(&app, &hot, &[]).await.status, 200, "rendered and cached");
    let etag = get(&app, &hot, &[]).await.header("etag").expect("etag").to_owned();
    let variants: [&[(&str, &str)]; 4] = [
        &[],
        &[("accept-encoding", "gzip")],
        &[("if-none-match", etag.as_str())],
        &[("x-request-id", "trace-me-1234")],
    ];
    for headers in variants {
        assert!(answer(&app, Method::GET, &hot, &to_map(headers), true).is_some(), "{headers:?}");
        let (a, b) = (get(&app, &hot, headers).await, get(&app, &routed, headers).await);
        assert_eq!(a.status, b.status, "{headers:?}");
        assert_eq!(a.bytes, b.bytes, "{headers:?}");
        for name in ["content-type", "content-encoding", "etag", "vary", "cache-control", "content-length"] {
            assert_eq!(a.header(name), b.header(name), "{name} with {headers:?}");
        }
        let id = a.header("x-request-id").expect("a request id");
        match headers.iter().find(|(k, _)| *k == "x-request-id") {
            Some((_, sent)) => assert_eq!(id, *sent, "a sane client id is echoed"),
            None => assert!(id.len() == 16 && id != b.header("x-request-id").expect("id"), "fresh: {id}"),
        }
    }
    let bad = get(&app, &hot, &[("x-request-id", "no spaces allowed")]).await;
    assert_ne!(bad.header("x-request-id"), Some("no spaces allowed"));
    app.stop().await;
}

fn to_map(headers: &[(&str, &str)]) -> HeaderMap {
    let mut map = HeaderMap::new();
    for (k, v) in headers {
        map.insert(
            axum::http::HeaderName::from_bytes(k.as_bytes()).expect("name"),
            HeaderValue::from_str(v).expect("value"),
        );
    }
    map
}

/// A raw keep-alive connection, over a socket or TLS (`tls_fast`): what
/// goes on the wire, both ways.
pub struct Raw<S = tokio::net::TcpStream>(pub S, pub Vec<u8>);

/// A response as read off the wire: status, headers in order, body.
#[derive(Debug)]
pub struct Wire {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Wire {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
    }

    /// The headers but `date` (and the request id when it is a fresh one).
    pub fn comparable(&self, keep_id: bool) -> Vec<(String, String)> {
        let mut h: Vec<_> =
            self.headers.iter().filter(|(n, _)| n != "date" && (keep_id || n != "x-request-id")).cloned().collect();
        h.sort();
        h
    }
}

impl Raw {
    async fn connect(app: &TestApp) -> Raw {
        let tcp = tokio::net::TcpStream::connect(app.addr.trim_start_matches("http://")).await.expect("connect");
        Raw(tcp, Vec::new())
    }
}

impl<S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin> Raw<S> {
    /// Writes `bytes` and flushes them (a TLS stream's records go out then).
    pub async fn send(&mut self, bytes: &[u8]) {
        use tokio::io::AsyncWriteExt;
        self.0.write_all(bytes).await.expect("send");
        self.0.flush().await.expect("flush");
    }

    pub async fn get(&mut self, path: &str, extra: &str) -> Wire {
        self.send(format!("GET {path} HTTP/1.1\r\nhost: pith\r\n{extra}\r\n").as_bytes()).await;
        self.response().await
    }

    pub async fn response(&mut self) -> Wire {
        loop {
            let mut headers = [httparse::EMPTY_HEADER; 32];
            let mut res = httparse::Response::new(&mut headers);
            if let httparse::Status::Complete(len) = res.parse(&self.1).expect("a valid response head") {
                let headers: Vec<(String, String)> = res
                    .headers
                    .iter()
                    .map(|h| (h.name.to_ascii_lowercase(), String::from_utf8_lossy(h.value).into_owned()))
                    .collect();
                let status = res.code.expect("status");
                let wire = Wire { status, headers, body: Vec::new() };
                let length: usize = wire.header("content-length").map_or(0, |v| v.parse().expect("length"));
                while self.1.len() < len + length {
                    self.read_more().await;
                }
                let body = self.1[len..len + length].to_vec();
                self.1.drain(..len + length);
                return Wire { body, ..wire };
            }
            self.read_more().await;
        }
    }

    async fn read_more(&mut self) {
        use tokio::io::AsyncReadExt;
        let mut buf = [0u8; 16384];
        let n = tokio::time::timeout(std::time::Duration::from_secs(10), self.0.read(&mut buf))
            .await
            .expect("an answer within 10 s")
            .expect("read");
        assert!(n > 0, "the server closed the connection");
        self.1.extend_from_slice(&buf[..n]);
    }
}

/// Once a connection is parked, a cached topic is answered without hyper
/// (`pith::net::fast`): the same status, headers and bytes as hyper's
/// answer through the hot path and as the router's, on the same socket.
#[tokio::test]
async fn a_parked_connection_answers_cached_topics_itself_as_hyper_and_the_router_would() {
    let (app, topic, alice) = app_with_a_long_topic().await;
    let hot = format!("/api/v1/topics/{topic}?sort=best");
    let routed = format!("{hot}&via=router");
    assert_eq!(get(&app, &hot, &[]).await.status, 200, "rendered and cached");
    let etag = get(&app, &hot, &[]).await.header("etag").expect("etag").to_owned();
    // zstd and Brotli made (off the request path), for the rounds that take them.
    get(&app, &hot, &[("accept-encoding", "br")]).await;
    get(&app, &hot, &[("accept-encoding", "zstd")]).await;
    app.state.cache.encoded().await;
    let fast = || app.state.metrics.http.fast_answers.get();
    for (extra, coding) in [
        (String::new(), None),
        ("Accept-Encoding: gzip\r\n".to_owned(), Some("gzip")),
        ("Accept-Encoding: gzip, deflate, br\r\n".to_owned(), Some("br")),
        ("Accept-Encoding: zstd;q=1, br;q=0.5\r\n".to_owned(), Some("zstd")),
        (format!("If-None-Match: {etag}\r\n"), None),
        ("X-Request-Id: trace-me-1234\r\nConnection: keep-alive\r\n".to_owned(), None),
    ] {
        let mut conn = Raw::connect(&app).await;
        // A connection's first request is hyper's (its first bytes are read
        // to tell HTTP/2 prior knowledge); then the connection parks.
        let before = fast();
        let by_hyper = conn.get(&hot, &extra).await;
        assert_eq!(fast(), before, "{extra:?}: the first request is hyper's");
        let parked = conn.get(&hot, &extra).await;
        assert_eq!(fast(), before + 1, "{extra:?}: the fast path answered the second");
        for n in 2..=3 {
            assert_eq!(conn.get(&hot, &extra).await.body, parked.body);
            assert_eq!(fast(), before + n, "{extra:?}: the fast path answers one request after another");
        }
        let before = before + 2;
        let by_router = conn.get(&routed, &extra).await;
        assert_eq!(fast(), before + 1, "{extra:?}: not the fast path's");
        let sent_id = extra.contains("X-Request-Id");
        assert_eq!(parked.status, by_hyper.status, "{extra:?}");
        assert_eq!(parked.body, by_hyper.body, "{extra:?}");
        assert_eq!(parked.comparable(sent_id), by_hyper.comparable(sent_id), "{extra:?}");
        assert_eq!(parked.status, by_router.status, "{extra:?}");
        assert_eq!(parked.body, by_router.body, "{extra:?}");
        for name in ["content-type", "content-encoding", "etag", "vary", "cache-control", "content-length"] {
            assert_eq!(parked.header(name), by_router.header(name), "{name} with {extra:?}");
        }
        let date = parked.header("date").expect("a date");
        assert!(httpdate::parse_http_date(date).is_ok(), "{date}");
        match sent_id {
            true => assert_eq!(parked.header("x-request-id"), Some("trace-me-1234")),
            false => assert_eq!(parked.header("x-request-id").map(str::len), Some(16)),
        }
        let expected = if extra.starts_with("If-None-Match") { 304 } else { 200 };
        assert_eq!(parked.status, expected, "{extra:?}");
        assert_eq!(parked.header("content-encoding"), coding, "{extra:?}");
    }

    // Still parked on the fast path: a write is seen by the next answer.
    let mut conn = Raw::connect(&app).await;
    conn.get(&hot, "").await;
    let before = fast();
    app.reply(topic, &alice, None, "seen on the fast path").await;
    // Cached again (a connection's first request is always hyper's, so
    // this one is not counted, whoever renders the topic).
    Raw::connect(&app).await.get(&hot, "").await;
    let after = conn.get(&hot, "").await;
    assert_eq!(fast(), before + 1);
    assert!(String::from_utf8_lossy(&after.body).contains("seen on the fast path"));

    // Two requests in one write are hyper's, answered in order.
    let before = fast();
    let two = format!("GET {hot} HTTP/1.1\r\nhost: pith\r\n\r\nGET {routed} HTTP/1.1\r\nhost: pith\r\n\r\n");
    conn.send(two.as_bytes()).await;
    let (first, second) = (conn.response().await, conn.response().await);
    assert_eq!((first.status, second.status), (200, 200));
    assert_eq!(first.body, second.body);
    assert_eq!(fast(), before, "pipelined: hyper's");

    // A head longer than the fast path reads is hyper's too, and whole.
    let long = format!("x-padding: {}\r\n", "p".repeat(4000));
    let answer = conn.get(&hot, &long).await;
    assert_eq!(answer.status, 200);
    assert_eq!(answer.body, after.body);
    assert_eq!(fast(), before);
    // And the connection parks again after it.
    conn.get(&hot, "").await;
    assert_eq!(fast(), before + 1);
    let t = std::time::Instant::now();
    // A parked connection that was answered on the fast path still closes
    // at once when the server stops (not after its idle timeout).
    app.stop().await;
    assert!(t.elapsed() < std::time::Duration::from_secs(5), "stopping took {:?}", t.elapsed());
}
