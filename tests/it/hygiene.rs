//! Connection hygiene: header timeouts, header size, the connection cap,
//! and slowloris (many half-sent requests) against a real listener.

use std::time::{Duration, Instant};

use crate::support::raw::{HEALTH, exchange, serve};
use pith::net::server::ConnLimits;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};

#[tokio::test]
async fn a_client_that_never_finishes_its_headers_is_disconnected_after_the_header_timeout() {
    let server = serve(ConnLimits { header_timeout: Duration::from_millis(500), ..ConnLimits::default() }).await;
    let mut tcp = TcpStream::connect(server.addr).await.expect("connect");
    tcp.write_all(b"GET /healthz HTTP/1.1\r\nhost: x\r\n").await.expect("write");
    let started = Instant::now();
    let mut buf = [0u8; 256];
    let read = tokio::time::timeout(Duration::from_secs(5), tcp.read(&mut buf)).await;
    let n = read.expect("the server closed the connection").unwrap_or(0);
    assert!(started.elapsed() >= Duration::from_millis(400), "closed too early: {:?}", started.elapsed());
    // hyper answers 408 or just closes; either way nothing is served.
    let answer = String::from_utf8_lossy(&buf[..n]);
    assert!(n == 0 || answer.starts_with("HTTP/1.1 408"), "{answer}");
}

#[tokio::test]
async fn an_idle_keep_alive_connection_is_closed_after_the_header_timeout() {
    let server = serve(ConnLimits { header_timeout: Duration::from_millis(500), ..ConnLimits::default() }).await;
    let mut tcp = TcpStream::connect(server.addr).await.expect("connect");
    tcp.write_all(b"GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n").await.expect("write");
    let mut buf = vec![0u8; 4096];
    let n = tcp.read(&mut buf).await.expect("response");
    assert!(String::from_utf8_lossy(&buf[..n]).starts_with("HTTP/1.1 200"));
    let closed = tokio::time::timeout(Duration::from_secs(5), async {
        loop {
            match tcp.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(_) => continue,
            }
        }
    })
    .await;
    assert!(closed.is_ok(), "the idle connection stayed open");
}

#[tokio::test]
async fn a_header_larger_than_the_limit_is_refused_with_a_4xx() {
    let server = serve(ConnLimits { max_header_bytes: 8 * 1024, ..ConnLimits::default() }).await;
    let big =
        format!("GET /healthz HTTP/1.1\r\nhost: x\r\nx-junk: {}\r\nconnection: close\r\n\r\n", "a".repeat(64 * 1024));
    let answer = exchange(server.addr, big.as_bytes()).await;
    assert!(answer.is_empty() || answer.starts_with("HTTP/1.1 431"), "{}", &answer[..answer.len().min(200)]);
    // A normal request still works.
    assert!(exchange(server.addr, HEALTH).await.starts_with("HTTP/1.1 200"));
}

#[tokio::test]
async fn connections_over_the_cap_get_a_503_with_the_error_shape_and_the_cap_frees_up() {
    let server = serve(ConnLimits { max_connections: 20, ..ConnLimits::default() }).await;
    let mut held = Vec::new();
    for _ in 0..20 {
        let mut tcp = TcpStream::connect(server.addr).await.expect("connect");
        // A full request keeps each connection in use and proves it was served.
        tcp.write_all(b"GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n").await.expect("write");
        let mut buf = [0u8; 512];
        let n = tcp.read(&mut buf).await.expect("read");
        assert!(String::from_utf8_lossy(&buf[..n]).starts_with("HTTP/1.1 200"));
        held.push(tcp);
    }
    let refused = exchange(server.addr, HEALTH).await;
    assert!(refused.starts_with("HTTP/1.1 503"), "{refused}");
    let body = refused.split("\r\n\r\n").nth(1).expect("body");
    let json: serde_json::Value = serde_json::from_str(body).expect("json body");
    assert_eq!(json["error"]["code"], "too_many_connections");
    drop(held);
    let mut served = false;
    for _ in 0..50 {
        if exchange(server.addr, HEALTH).await.starts_with("HTTP/1.1 200") {
            served = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(served, "the cap never freed up after the held connections closed");
}

/// Thousands of slow, half-sent requests (slowloris) spread over several
/// source addresses must not stop a normal client from being served within
/// a second.
#[tokio::test]
async fn a_normal_client_is_served_within_a_second_during_a_slowloris_attack() {
    let server = serve(ConnLimits::default()).await;
    let mut attackers = Vec::new();
    for i in 0..2_000u32 {
        let source = std::net::SocketAddr::from(([127, 0, 0, 2 + (i % 8) as u8], 0));
        let socket = TcpSocket::new_v4().expect("socket");
        socket.bind(source).expect("bind source address");
        let mut tcp = socket.connect(server.addr).await.expect("connect");
        tcp.write_all(b"POST /api/v1/auth/login HTTP/1.1\r\nhost: x\r\ncontent-le").await.expect("write");
        attackers.push(tcp);
    }
    let started = Instant::now();
    let answer = tokio::time::timeout(Duration::from_secs(1), exchange(server.addr, HEALTH)).await;
    let answer = answer.expect("a normal request took longer than a second");
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(started.elapsed() < Duration::from_secs(1));
    drop(attackers);
}
