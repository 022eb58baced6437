//! Keep-alive connections parked between requests (`net::idle`): a
//! cleartext connection gives hyper's buffers back whenever it waits for
//! its client, and must still serve everything a client may send (TLS
//! connections park too: tests/it/tls.rs).

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Duration;

use http_body_util::{BodyExt, Empty};
use hyper_util::rt::{TokioExecutor, TokioIo};
use pith::net::server::ConnLimits;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};

use crate::support::raw::{GET, HEALTH, responses, serve};

#[tokio::test]
async fn pipelined_requests_in_one_write_are_all_answered_in_order() {
    let server = serve(ConnLimits::default()).await;
    let mut tcp = TcpStream::connect(server.addr).await.expect("connect");
    let mut three = Vec::new();
    three.extend_from_slice(GET);
    three.extend_from_slice(b"GET /api/v1/topics/999 HTTP/1.1\r\nhost: x\r\n\r\n");
    three.extend_from_slice(GET);
    tcp.write_all(&three).await.expect("write");
    let got = responses(&mut tcp, 3).await;
    assert_eq!(got[0], ("HTTP/1.1 200 OK".into(), "ok\n".into()));
    assert!(got[1].0.starts_with("HTTP/1.1 404"), "{got:?}");
    assert!(got[1].1.contains("\"error\""), "{got:?}");
    assert_eq!(got[2], ("HTTP/1.1 200 OK".into(), "ok\n".into()));
}

#[tokio::test]
async fn one_connection_serves_request_after_request_with_pauses_between_them() {
    let server = serve(ConnLimits::default()).await;
    let mut tcp = TcpStream::connect(server.addr).await.expect("connect");
    for i in 0..20 {
        tcp.write_all(GET).await.expect("write");
        assert_eq!(responses(&mut tcp, 1).await[0].1, "ok\n", "request {i}");
        tokio::time::sleep(Duration::from_millis(if i % 5 == 0 { 50 } else { 1 })).await;
    }
}

#[tokio::test]
async fn a_request_split_by_pauses_is_answered_whole() {
    let server = serve(ConnLimits::default()).await;
    let mut tcp = TcpStream::connect(server.addr).await.expect("connect");
    tcp.write_all(GET).await.expect("write");
    assert_eq!(responses(&mut tcp, 1).await[0].1, "ok\n");
    // The next head in three pieces, the connection idle in between.
    for piece in [&b"GET /heal"[..], b"thz HTTP/1.1\r\nho", b"st: x\r\n\r\n"] {
        tcp.write_all(piece).await.expect("write");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(responses(&mut tcp, 1).await[0], ("HTTP/1.1 200 OK".into(), "ok\n".into()));
    // A body that arrives after a pause (a login with wrong credentials).
    let body = br#"{"username":"nobody","password":"not the password"}"#;
    let head = format!(
        "POST /api/v1/auth/login HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
        body.len()
    );
    tcp.write_all(head.as_bytes()).await.expect("write");
    tcp.write_all(&body[..10]).await.expect("write");
    tokio::time::sleep(Duration::from_millis(150)).await;
    tcp.write_all(&body[10..]).await.expect("write");
    let got = responses(&mut tcp, 1).await;
    assert!(got[0].0.starts_with("HTTP/1.1 401"), "{got:?}");
    assert!(got[0].1.contains("\"error\""), "{got:?}");
    // And the connection still serves.
    tcp.write_all(GET).await.expect("write");
    assert_eq!(responses(&mut tcp, 1).await[0].1, "ok\n");
}

#[tokio::test]
async fn http2_with_prior_knowledge_is_served_on_the_cleartext_port() {
    let server = serve(ConnLimits::default()).await;
    let tcp = TcpStream::connect(server.addr).await.expect("connect");
    let (mut send, conn) =
        hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(tcp)).await.expect("h2c handshake");
    tokio::spawn(conn);
    for _ in 0..3 {
        let req = hyper::Request::get(format!("http://{}/healthz", server.addr))
            .body(Empty::<bytes::Bytes>::new())
            .expect("request");
        let res = send.send_request(req).await.expect("h2 response");
        assert_eq!(res.status(), 200);
        assert_eq!(res.version(), hyper::Version::HTTP_2);
        assert_eq!(&res.into_body().collect().await.expect("body").to_bytes()[..], b"ok\n");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn stopping_closes_idle_connections_at_once_and_finishes_a_request_in_flight() {
    let server = serve(ConnLimits::default()).await;
    let mut idle = TcpStream::connect(server.addr).await.expect("connect");
    idle.write_all(GET).await.expect("write");
    assert_eq!(responses(&mut idle, 1).await[0].1, "ok\n");
    // A login whose body is still on its way when the server stops.
    let mut busy = TcpStream::connect(server.addr).await.expect("connect");
    let body = br#"{"username":"nobody","password":"not the password"}"#;
    let head = format!(
        "POST /api/v1/auth/login HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
        body.len()
    );
    busy.write_all(head.as_bytes()).await.expect("write");
    busy.write_all(&body[..10]).await.expect("write");
    tokio::time::sleep(Duration::from_millis(100)).await;

    let _ = server.stop.send(());
    let mut byte = [0u8; 1];
    let closed = tokio::time::timeout(Duration::from_secs(2), idle.read(&mut byte)).await;
    assert!(matches!(closed, Ok(Ok(0)) | Ok(Err(_))), "the idle connection was not closed: {closed:?}");
    busy.write_all(&body[10..]).await.expect("write the rest");
    let got = responses(&mut busy, 1).await;
    assert!(got[0].0.starts_with("HTTP/1.1 401"), "{got:?}");
    // The drain waits for nothing else (its limit is 30 s).
    let drained = tokio::time::timeout(Duration::from_secs(5), server.task).await;
    assert!(matches!(drained, Ok(Ok(Ok(())))), "the server did not stop within 5 s: {drained:?}");
    // Nothing is served after the stop.
    if let Ok(mut tcp) = TcpStream::connect(server.addr).await {
        let _ = tcp.write_all(HEALTH).await;
        let mut out = Vec::new();
        let _ = tokio::time::timeout(Duration::from_secs(2), tcp.read_to_end(&mut out)).await;
        assert!(out.is_empty(), "served after the stop: {}", String::from_utf8_lossy(&out));
    }
}

/// Two thousand keep-alive connections, each idle after one request. With
/// hyper's buffers held they cost ~25 KB each; parked, a few hundred bytes.
#[tokio::test]
async fn two_thousand_idle_keep_alive_connections_cost_the_server_little_memory() {
    const N: usize = 2_000;
    let dir = tempfile::tempdir().expect("tempdir");
    let log = dir.path().join("serve.log");
    let server = crate::support::child::Server::start(&dir.path().join("data"), log, Duration::from_secs(20)).await;
    let addr: SocketAddr = server.base.trim_start_matches("http://").parse().expect("addr");
    // Warm up: the runtime's threads and the first connections' allocations.
    for _ in 0..20 {
        let mut tcp = TcpStream::connect(addr).await.expect("connect");
        tcp.write_all(GET).await.expect("write");
        responses(&mut tcp, 1).await;
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let before = server.rss();

    let mut held = Vec::with_capacity(N);
    for batch in 0..N / 50 {
        let mut set = tokio::task::JoinSet::new();
        for i in 0..50 {
            let source = Ipv4Addr::new(127, 0, 0, 2 + ((batch * 50 + i) % 8) as u8);
            set.spawn(async move {
                let socket = TcpSocket::new_v4().expect("socket");
                socket.bind(SocketAddr::new(IpAddr::V4(source), 0)).expect("bind");
                let mut tcp = socket.connect(addr).await.expect("connect");
                tcp.write_all(GET).await.expect("write");
                assert_eq!(responses(&mut tcp, 1).await[0].1, "ok\n");
                tcp
            });
        }
        while let Some(tcp) = set.join_next().await {
            held.push(tcp.expect("join"));
        }
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let after = server.rss();
    let per_connection = after.saturating_sub(before) / N as u64;
    eprintln!("server RSS {before} -> {after} bytes: {per_connection} bytes per idle keep-alive connection");
    assert!(per_connection < 4096, "{per_connection} bytes per idle connection");
    // Parked, they still serve.
    for tcp in held.iter_mut().step_by(97) {
        tcp.write_all(GET).await.expect("write");
        assert_eq!(responses(tcp, 1).await[0].1, "ok\n");
    }
}
