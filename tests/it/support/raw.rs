//! A server over raw sockets, for the tests of what happens below HTTP
//! (`hygiene`, `idle`, `tls`): the real accept loop with explicit
//! connection limits, whole requests written by hand, responses read back.

use std::time::Duration;

use pith::app::AppState;
use pith::net::server::ConnLimits;
use pith::server as http;
use pith::store::sqlite::{SqliteOptions, SqliteStore};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::oneshot;

pub struct Server {
    pub addr: std::net::SocketAddr,
    _dir: tempfile::TempDir,
    pub stop: oneshot::Sender<()>,
    /// The server's task, which ends once it has drained.
    pub task: tokio::task::JoinHandle<std::io::Result<()>>,
}

pub async fn serve(limits: ConnLimits) -> Server {
    let dir = tempfile::tempdir().expect("tempdir");
    let store =
        SqliteStore::open(&dir.path().join("pith.db"), &SqliteOptions { readers: 1, ..SqliteOptions::default() })
            .expect("open store");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let (stop, stopped) = oneshot::channel::<()>();
    let state = AppState::new(store, 1 << 20);
    let task = tokio::spawn(http::run_with_limits(listener, state, Duration::from_secs(30), limits, async {
        let _ = stopped.await;
    }));
    Server { addr, _dir: dir, stop, task }
}

/// Sends a whole request on a fresh connection and returns the raw answer.
pub async fn exchange(addr: std::net::SocketAddr, request: &[u8]) -> String {
    let mut tcp = TcpStream::connect(addr).await.expect("connect");
    tcp.write_all(request).await.expect("write");
    let mut out = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(5), tcp.read_to_end(&mut out)).await;
    String::from_utf8_lossy(&out).into_owned()
}

pub const HEALTH: &[u8] = b"GET /healthz HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n";

pub const GET: &[u8] = b"GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n";

/// Reads `n` whole responses (each with a `content-length`) off `tcp` (a
/// socket or a TLS stream); returns their status lines and bodies.
pub async fn responses<S: AsyncRead + Unpin>(tcp: &mut S, n: usize) -> Vec<(String, String)> {
    let mut buf = Vec::new();
    let mut out = Vec::new();
    let mut chunk = [0u8; 4096];
    while out.len() < n {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]).into_owned();
            let len: usize = head
                .lines()
                .find_map(|l| l.to_ascii_lowercase().strip_prefix("content-length: ").map(str::to_owned))
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or_else(|| panic!("no content-length in {head}"));
            if buf.len() >= end + 4 + len {
                let body = String::from_utf8_lossy(&buf[end + 4..end + 4 + len]).into_owned();
                out.push((head.lines().next().unwrap_or_default().to_owned(), body));
                buf.drain(..end + 4 + len);
                continue;
            }
        }
        let read = tokio::time::timeout(Duration::from_secs(5), tcp.read(&mut chunk)).await;
        let read = read.unwrap_or_else(|_| panic!("no answer within 5 s after {} of {n} responses", out.len()));
        match read.expect("read") {
            0 => panic!("connection closed after {} of {n} responses", out.len()),
            k => buf.extend_from_slice(&chunk[..k]),
        }
    }
    assert!(buf.is_empty(), "more than {n} responses: {}", String::from_utf8_lossy(&buf));
    out
}
