//! The fast path over TLS (`pith::net::fast_tls`): a parked TLS
//! connection answers a cached topic itself, through rustls, with what
//! hyper and the router would send; everything else still reaches hyper
//! whole, in order, on the same connection.

use std::time::Duration;

use pith::net::server::ConnLimits;
use pith::net::tls::{Tls, TlsFiles};
use pith::server as http;
use tokio::net::TcpStream;
use tokio::sync::oneshot;
use tokio_rustls::client::TlsStream;

use crate::hot::Raw;
use crate::support::helpers::{TestApp, app_with_a_long_topic};
use crate::tls::{Cert, client_config, tls_connect};

/// A second, TLS, listener on a test app's state: same cache, same metrics.
struct TlsFront {
    port: u16,
    cert: Cert,
    _dir: tempfile::TempDir,
    _stop: oneshot::Sender<()>,
}

impl TlsFront {
    async fn start(app: &TestApp) -> TlsFront {
        let dir = tempfile::tempdir().expect("tempdir");
        let cert = Cert::new();
        cert.write(dir.path());
        let files = TlsFiles { cert: dir.path().join("cert.pem"), key: dir.path().join("key.pem") };
        let limits = ConnLimits { tls: Some(Tls::new(files).expect("tls")), ..ConnLimits::default() };
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let (stop, stopped) = oneshot::channel::<()>();
        tokio::spawn(http::run_with_limits(listener, app.state.clone(), Duration::from_secs(30), limits, async {
            let _ = stopped.await;
        }));
        TlsFront { port, cert, _dir: dir, _stop: stop }
    }

    async fn connect(&self) -> Raw<TlsStream<TcpStream>> {
        let tls = tls_connect(self.port, client_config(&[&self.cert], b"http/1.1")).await.expect("handshake");
        Raw(tls, Vec::new())
    }
}

#[tokio::test]
async fn a_parked_tls_connection_answers_cached_topics_as_hyper_and_the_router_would() {
    let (app, topic, alice) = app_with_a_long_topic().await;
    // An https site: the router sends HSTS on every answer, so must the
    // fast path and the hot path.
    app.state.web.set_public_url("https://forum.example", 365);
    let front = TlsFront::start(&app).await;
    let hot = format!("/api/v1/topics/{topic}?sort=best");
    let routed = format!("{hot}&via=router");
    let mut first = front.connect().await;
    let etag = first.get(&hot, "").await.header("etag").expect("etag").to_owned();
    let fast = || app.state.metrics.http.fast_answers.get();
    for (extra, status, coding) in [
        (String::new(), 200, None),
        ("Accept-Encoding: gzip\r\n".to_owned(), 200, Some("gzip")),
        (format!("If-None-Match: {etag}\r\n"), 304, None),
        ("X-Request-Id: trace-me-1234\r\nConnection: keep-alive\r\n".to_owned(), 200, None),
    ] {
        let mut conn = front.connect().await;
        let before = fast();
        let by_hyper = conn.get(&hot, &extra).await;
        assert_eq!(fast(), before, "{extra:?}: a connection's first request is hyper's");
        let parked = conn.get(&hot, &extra).await;
        assert_eq!(fast(), before + 1, "{extra:?}: the parked connection answered the second itself");
        assert_eq!(conn.get(&hot, &extra).await.body, parked.body);
        assert_eq!(fast(), before + 2, "{extra:?}: and the next");
        let by_router = conn.get(&routed, &extra).await;
        assert_eq!(fast(), before + 2, "{extra:?}: not the fast path's");
        let sent_id = extra.contains("X-Request-Id");
        assert_eq!(parked.status, status, "{extra:?}");
        assert_eq!((parked.status, &parked.body), (by_hyper.status, &by_hyper.body), "{extra:?}");
        assert_eq!(parked.comparable(sent_id), by_hyper.comparable(sent_id), "{extra:?}");
        assert_eq!((parked.status, &parked.body), (by_router.status, &by_router.body), "{extra:?}");
        for name in [
            "content-type",
            "content-encoding",
            "etag",
            "vary",
            "cache-control",
            "content-length",
            "strict-transport-security",
        ] {
            assert_eq!(parked.header(name), by_router.header(name), "{name} with {extra:?}");
            assert_eq!(by_hyper.header(name), by_router.header(name), "{name} with {extra:?}");
        }
        assert_eq!(parked.header("strict-transport-security"), Some("max-age=31536000"), "{extra:?}");
        assert_eq!(parked.header("content-encoding"), coding, "{extra:?}");
    }

    // Pipelined requests in one record are hyper's, answered in order; a
    // head split across records (with a pause between) is hyper's too.
    let mut conn = front.connect().await;
    let one = conn.get(&hot, "").await;
    let before = fast();
    let two = format!("GET {hot} HTTP/1.1\r\nhost: pith\r\n\r\nGET {routed} HTTP/1.1\r\nhost: pith\r\n\r\n");
    conn.send(two.as_bytes()).await;
    let (a, b) = (conn.response().await, conn.response().await);
    assert_eq!((a.status, b.status), (200, 200));
    assert_eq!((&a.body, &b.body), (&one.body, &one.body));
    let request = format!("GET {hot} HTTP/1.1\r\nhost: pith\r\n\r\n");
    let (head, rest) = request.split_at(9);
    conn.send(head.as_bytes()).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    conn.send(rest.as_bytes()).await;
    assert_eq!(conn.response().await.body, one.body);
    assert_eq!(fast(), before, "neither is the fast path's");
    // Parked again after hyper, the connection is back on the fast path.
    assert_eq!(conn.get(&hot, "").await.body, one.body);
    assert_eq!(fast(), before + 1);

    // An answer larger than rustls's send buffer (64 KB) goes out whole.
    for i in 0..4 {
        app.reply(topic, &alice, None, &format!("{i} {}", "long words ".repeat(3_000))).await;
    }
    let mut conn = front.connect().await;
    let by_hyper = conn.get(&hot, "").await;
    assert!(by_hyper.body.len() > 96 * 1024, "{} bytes", by_hyper.body.len());
    let before = fast();
    for _ in 0..3 {
        let parked = conn.get(&hot, "").await;
        assert_eq!((parked.status, &parked.body), (200, &by_hyper.body));
    }
    assert_eq!(fast(), before + 3);
}

/// A client that closes (with close_notify, or just its socket) while its
/// connection is parked is closed on the server's side too.
#[tokio::test]
async fn a_parked_tls_connection_closes_with_its_client() {
    use tokio::io::AsyncWriteExt;
    let (app, topic, _) = app_with_a_long_topic().await;
    let front = TlsFront::start(&app).await;
    let hot = format!("/api/v1/topics/{topic}");
    let mut polite = front.connect().await;
    polite.get(&hot, "").await;
    polite.get(&hot, "").await;
    polite.0.shutdown().await.expect("close_notify");
    let mut rude = front.connect().await;
    rude.get(&hot, "").await;
    drop(rude);
    // Both ends: a read of the polite one's stream sees the server close.
    let mut buf = [0u8; 16];
    let read =
        tokio::time::timeout(Duration::from_secs(5), tokio::io::AsyncReadExt::read(&mut polite.0, &mut buf)).await;
    assert!(matches!(read, Ok(Ok(0)) | Ok(Err(_))), "the server kept the closed connection: {read:?}");
}
