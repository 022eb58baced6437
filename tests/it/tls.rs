//! TLS with the real binary: a TLS 1.3 handshake, HTTP/2 over ALPN `h2`,
//! HTTP/1.1 parked between requests like cleartext (`net::idle`), a live
//! WebSocket over TLS, the certificate reloaded on SIGHUP (and kept when
//! the new files are bad), and clients' key updates (rustls and OpenSSL's
//! s_client). Certificates are made
//! at test time with rcgen.

use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures_util::{SinkExt, StreamExt};
use http_body_util::Empty;
use hyper::Request;
use hyper_util::rt::{TokioExecutor, TokioIo};
use rustls_pki_types::{CertificateDer, ServerName};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream;
use tokio_rustls::rustls::crypto::CryptoProvider;
use tokio_rustls::rustls::{ClientConfig, ProtocolVersion, RootCertStore};
use tokio_tungstenite::tungstenite::Message;

use crate::support::child::pith;
use crate::support::raw::{GET, responses};

/// A self-signed certificate for `localhost`, written as PEM files.
pub struct Cert {
    pub der: CertificateDer<'static>,
    cert_pem: String,
    key_pem: String,
}

impl Cert {
    pub fn new() -> Cert {
        let made = rcgen::generate_simple_self_signed(vec!["localhost".into()]).expect("rcgen");
        Cert { der: made.cert.der().clone(), cert_pem: made.cert.pem(), key_pem: made.signing_key.serialize_pem() }
    }

    pub fn write(&self, dir: &Path) {
        std::fs::write(dir.join("cert.pem"), &self.cert_pem).expect("write cert");
        std::fs::write(dir.join("key.pem"), &self.key_pem).expect("write key");
    }
}

/// A `pith serve --tls-cert --tls-key` child, killed when dropped.
pub struct TlsServer {
    child: Child,
    pub port: u16,
    log: PathBuf,
}

impl Drop for TlsServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl TlsServer {
    pub async fn start(dir: &Path, trusted: &[&Cert]) -> TlsServer {
        Self::start_with(dir, trusted, &[]).await
    }

    pub async fn start_with(dir: &Path, trusted: &[&Cert], extra: &[&str]) -> TlsServer {
        let port = crate::support::child::free_port();
        let log = dir.join("serve.log");
        let child = pith()
            .args(["serve", "--listen", &format!("127.0.0.1:{port}"), "--data-dir"])
            .arg(dir.join("data"))
            .arg("--tls-cert")
            .arg(dir.join("cert.pem"))
            .arg("--tls-key")
            .arg(dir.join("key.pem"))
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).expect("log"))
            .spawn()
            .expect("spawn pith serve");
        let mut server = TlsServer { child, port, log };
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Ok(stream) = server.try_connect(trusted, b"http/1.1").await
                && h1_get(stream, "/healthz").await.0 == 200
            {
                return server;
            }
            if let Some(status) = server.child.try_wait().expect("try_wait") {
                panic!("pith serve exited with {status}:\n{}", server.log_text());
            }
            assert!(Instant::now() < deadline, "pith serve never answered over TLS:\n{}", server.log_text());
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Open descriptors of the server process.
    pub fn fds(&self) -> usize {
        std::fs::read_dir(format!("/proc/{}/fd", self.child.id())).expect("fd dir").count()
    }

    /// The server's resident memory in bytes.
    pub fn rss(&self) -> u64 {
        crate::support::child::rss_of(self.child.id())
    }

    pub fn sighup(&self) {
        // SAFETY: our own child, not reaped yet.
        assert_eq!(unsafe { libc::kill(self.child.id() as libc::pid_t, libc::SIGHUP) }, 0, "kill(SIGHUP)");
    }

    pub async fn try_connect(&self, trusted: &[&Cert], alpn: &[u8]) -> std::io::Result<TlsStream<TcpStream>> {
        tls_connect(self.port, client_config(trusted, alpn)).await
    }

    pub async fn connect(&self, trusted: &[&Cert], alpn: &[u8]) -> TlsStream<TcpStream> {
        self.try_connect(trusted, alpn).await.expect("TLS handshake")
    }
}

/// A TLS handshake with `localhost` on `port` (owned arguments, so that
/// spawned tasks can open connections).
pub async fn tls_connect(port: u16, config: Arc<ClientConfig>) -> std::io::Result<TlsStream<TcpStream>> {
    let tcp = TcpStream::connect(("127.0.0.1", port)).await?;
    let name = ServerName::try_from("localhost").expect("name");
    TlsConnector::from(config).connect(name, tcp).await
}

pub fn client_config(trusted: &[&Cert], alpn: &[u8]) -> Arc<ClientConfig> {
    client_config_with(tokio_rustls::rustls::crypto::ring::default_provider(), trusted, alpn)
}

/// `client_config` on a provider of the caller's (one cipher suite, say).
pub fn client_config_with(provider: CryptoProvider, trusted: &[&Cert], alpn: &[u8]) -> Arc<ClientConfig> {
    let mut roots = RootCertStore::empty();
    for cert in trusted {
        roots.add(cert.der.clone()).expect("root");
    }
    let mut config = ClientConfig::builder_with_provider(Arc::new(provider))
        .with_safe_default_protocol_versions()
        .expect("versions")
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![alpn.to_vec()];
    Arc::new(config)
}

fn get(path: &str) -> Request<Empty<Bytes>> {
    Request::get(format!("https://localhost{path}")).header("host", "localhost").body(Empty::new()).expect("request")
}

/// One HTTP/1.1 request; returns the status and the connection's sender
/// for more.
async fn h1_get(
    stream: TlsStream<TcpStream>,
    path: &str,
) -> (u16, hyper::client::conn::http1::SendRequest<Empty<Bytes>>) {
    let (mut send, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await.expect("h1 handshake");
    tokio::spawn(conn);
    let res = send.send_request(get(path)).await.expect("h1 request");
    (res.status().as_u16(), send)
}

fn peer_cert(stream: &TlsStream<TcpStream>) -> CertificateDer<'static> {
    stream.get_ref().1.peer_certificates().expect("certificates")[0].clone().into_owned()
}

#[tokio::test]
async fn tls_1_3_serves_http2_by_alpn_and_http1_and_live_websockets() {
    let dir = tempfile::tempdir().expect("tempdir");
    let cert = Cert::new();
    cert.write(dir.path());
    let server = TlsServer::start(dir.path(), &[&cert]).await;

    let h2 = server.connect(&[&cert], b"h2").await;
    assert_eq!(h2.get_ref().1.protocol_version(), Some(ProtocolVersion::TLSv1_3));
    assert_eq!(h2.get_ref().1.alpn_protocol(), Some(&b"h2"[..]));
    let (mut send, conn) =
        hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(h2)).await.expect("h2 handshake");
    tokio::spawn(conn);
    let res = send.send_request(get("/healthz")).await.expect("h2 request");
    assert_eq!(res.status(), 200);
    assert_eq!(res.version(), hyper::Version::HTTP_2);

    let h1 = server.connect(&[&cert], b"http/1.1").await;
    assert_eq!(h1.get_ref().1.protocol_version(), Some(ProtocolVersion::TLSv1_3));
    assert_eq!(h1.get_ref().1.alpn_protocol(), Some(&b"http/1.1"[..]));
    let res = h1_get(h1, "/login").await;
    assert_eq!(res.0, 200);

    // wss: the live socket runs on the same code as ws (crate::tls13).
    let tls = server.connect(&[&cert], b"http/1.1").await;
    let (mut ws, _) = tokio_tungstenite::client_async("wss://localhost/api/v1/live?topics=1", tls)
        .await
        .expect("WebSocket handshake over TLS");
    ws.send(Message::text(r#"{"op": "ping"}"#)).await.expect("send");
    let reply = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            match ws.next().await.expect("a message").expect("frame") {
                // The first message confirms the subscription; then the pong.
                Message::Text(t) if t.contains("\"pong\"") => return t.to_string(),
                _ => continue,
            }
        }
    })
    .await
    .expect("a pong in time");
    assert!(reply.contains("\"pong\""), "{reply}");
}

#[tokio::test]
async fn tls_session_cookies_are_secure() {
    let dir = tempfile::tempdir().expect("tempdir");
    let cert = Cert::new();
    cert.write(dir.path());
    let server = TlsServer::start(dir.path(), &[&cert]).await;
    let stream = server.connect(&[&cert], b"http/1.1").await;
    let (mut send, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await.expect("handshake");
    tokio::spawn(conn);
    let res = send.send_request(get("/login")).await.expect("request");
    let cookie = res.headers().get("set-cookie").expect("a CSRF cookie").to_str().expect("ascii");
    assert!(cookie.contains("; Secure"), "{cookie}");
}

#[tokio::test]
async fn sighup_reloads_the_certificate_and_keeps_it_when_the_new_files_are_bad() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (old, new) = (Cert::new(), Cert::new());
    old.write(dir.path());
    let server = TlsServer::start(dir.path(), &[&old]).await;
    let both = [&old, &new];

    let before = server.connect(&both, b"http/1.1").await;
    assert_eq!(peer_cert(&before), old.der);
    let (status, mut before) = h1_get(before, "/healthz").await;
    assert_eq!(status, 200);

    new.write(dir.path());
    server.sighup();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if peer_cert(&server.connect(&both, b"http/1.1").await) == new.der {
            break;
        }
        assert!(Instant::now() < deadline, "the new certificate was never served:\n{}", server.log_text());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // The connection opened before the reload keeps working.
    let res = before.send_request(get("/healthz")).await.expect("old connection still serves");
    assert_eq!(res.status(), 200);

    std::fs::write(dir.path().join("cert.pem"), "not a certificate").expect("break cert");
    server.sighup();
    let deadline = Instant::now() + Duration::from_secs(10);
    while !server.log_text().contains("not reloaded") {
        assert!(Instant::now() < deadline, "the bad reload was never logged:\n{}", server.log_text());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let after = server.connect(&both, b"http/1.1").await;
    assert_eq!(peer_cert(&after), new.der, "a bad replacement keeps the previous certificate");
    assert_eq!(h1_get(after, "/healthz").await.0, 200);
}

#[tokio::test]
async fn a_certificate_without_a_key_or_a_bad_file_stops_start_up_with_a_clear_error() {
    let dir = tempfile::tempdir().expect("tempdir");
    let cert = Cert::new();
    cert.write(dir.path());
    let data = dir.path().join("data");
    let run = |args: Vec<std::ffi::OsString>| {
        let out = pith().arg("serve").arg("--data-dir").arg(&data).args(args).output().expect("run");
        assert!(!out.status.success());
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let cert_path = dir.path().join("cert.pem").into_os_string();
    let err = run(vec!["--tls-cert".into(), cert_path.clone()]);
    assert!(err.contains("--tls-key"), "{err}");
    let err = run(vec!["--tls-cert".into(), cert_path, "--tls-key".into(), dir.path().join("nope.pem").into()]);
    assert!(err.contains("nope.pem"), "{err}");
}

#[tokio::test]
async fn a_client_that_never_finishes_its_handshake_is_dropped_after_the_header_timeout() {
    use tokio::io::AsyncReadExt;
    let dir = tempfile::tempdir().expect("tempdir");
    let cert = Cert::new();
    cert.write(dir.path());
    let server = TlsServer::start_with(dir.path(), &[&cert], &["--header-timeout-secs", "1"]).await;
    let mut silent = TcpStream::connect(("127.0.0.1", server.port)).await.expect("connect");
    let mut buf = [0u8; 64];
    // Generous bound: the point is that the server hangs up at all.
    let read = tokio::time::timeout(Duration::from_secs(15), silent.read(&mut buf)).await;
    assert!(matches!(read, Ok(Ok(0)) | Ok(Err(_))), "the silent client was not dropped: {read:?}");
}

/// A TLS keep-alive connection is parked between requests (`net::idle`)
/// with its rustls state kept: it serves requests after pauses, a request
/// whose head is split by a pause, and pipelined requests.
#[tokio::test]
async fn tls_keep_alive_connections_serve_after_pauses_split_and_pipelined_requests() {
    use tokio::io::AsyncWriteExt;
    let dir = tempfile::tempdir().expect("tempdir");
    let cert = Cert::new();
    cert.write(dir.path());
    let server = TlsServer::start(dir.path(), &[&cert]).await;
    let mut tls = server.connect(&[&cert], b"http/1.1").await;
    let ok = ("HTTP/1.1 200 OK".to_owned(), "ok\n".to_owned());
    for _ in 0..5 {
        tls.write_all(GET).await.expect("write");
        tls.flush().await.expect("flush");
        assert_eq!(responses(&mut tls, 1).await, vec![ok.clone()]);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let (head, rest) = GET.split_at(12);
    tls.write_all(head).await.expect("write");
    tls.flush().await.expect("flush");
    tokio::time::sleep(Duration::from_millis(300)).await;
    tls.write_all(rest).await.expect("write");
    tls.flush().await.expect("flush");
    assert_eq!(responses(&mut tls, 1).await, vec![ok.clone()]);
    tls.write_all(&[GET, GET].concat()).await.expect("write");
    tls.flush().await.expect("flush");
    assert_eq!(responses(&mut tls, 2).await, vec![ok.clone(), ok]);
}

/// Key updates (RFC 8446, 4.6.3) from rustls, over each cipher suite
/// (SHA-256 and SHA-384 key schedules): a client that refreshes its keys
/// between requests, asking for the server's, is answered under the new
/// keys each time, whether the KeyUpdate comes on its own to a parked
/// connection or just before a request.
#[tokio::test]
async fn a_rustls_client_that_updates_its_keys_between_requests_is_answered_with_each_suite() {
    use tokio::io::AsyncWriteExt;
    use tokio_rustls::rustls::crypto::ring::cipher_suite::{
        TLS13_AES_128_GCM_SHA256, TLS13_AES_256_GCM_SHA384, TLS13_CHACHA20_POLY1305_SHA256,
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let cert = Cert::new();
    cert.write(dir.path());
    let server = TlsServer::start(dir.path(), &[&cert]).await;
    let ok = ("HTTP/1.1 200 OK".to_owned(), "ok\n".to_owned());
    for suite in [TLS13_AES_128_GCM_SHA256, TLS13_AES_256_GCM_SHA384, TLS13_CHACHA20_POLY1305_SHA256] {
        let mut provider = tokio_rustls::rustls::crypto::ring::default_provider();
        provider.cipher_suites = vec![suite];
        let mut tls =
            tls_connect(server.port, client_config_with(provider, &[&cert], b"http/1.1")).await.expect("handshake");
        for round in 0..4 {
            tls.get_mut().1.refresh_traffic_keys().expect("key update");
            if round % 2 == 1 {
                tls.flush().await.expect("flush");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            tls.write_all(GET).await.expect("write");
            tls.flush().await.expect("flush");
            assert_eq!(responses(&mut tls, 1).await, vec![ok.clone()], "{:?}, round {round}", suite.suite());
        }
    }
}

/// Key updates from OpenSSL's `s_client`, a TLS implementation that is
/// neither rustls nor Pith's record layer: `K` sends a KeyUpdate asking for
/// the server's, `k` one that does not. The server's own KeyUpdate comes
/// back for the first only, before its next answer, and every request
/// after either is answered.
#[tokio::test]
async fn openssl_s_client_key_updates_are_answered_as_rfc_8446_asks() {
    use std::io::{BufRead, Write};
    let dir = tempfile::tempdir().expect("tempdir");
    let cert = Cert::new();
    cert.write(dir.path());
    let server = TlsServer::start(dir.path(), &[&cert]).await;
    let mut client = std::process::Command::new("openssl")
        .args(["s_client", "-connect", &format!("127.0.0.1:{}", server.port), "-servername", "localhost"])
        .args(["-tls1_3", "-crlf", "-msg", "-CAfile"])
        .arg(dir.path().join("cert.pem"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("openssl s_client (apt-get install openssl)");
    let mut stdin = client.stdin.take().expect("stdin");
    let (lines_tx, lines) = std::sync::mpsc::channel::<String>();
    let stdout = client.stdout.take().expect("stdout");
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = lines_tx.send(line);
        }
    });
    // The lines up to and including the next answer's body.
    let answer = || -> Vec<String> {
        let mut seen = Vec::new();
        loop {
            let line = lines.recv_timeout(Duration::from_secs(10)).unwrap_or_else(|_| panic!("no answer: {seen:#?}"));
            let done = line == "ok";
            seen.push(line);
            if done {
                return seen;
            }
        }
    };
    let request = "GET /healthz HTTP/1.1\nhost: localhost\n\n";
    let key_update =
        |seen: &[String], way: &str| seen.iter().filter(|l| l.starts_with(way) && l.ends_with("KeyUpdate")).count();
    stdin.write_all(request.as_bytes()).expect("write");
    let first = answer();
    assert!(first.iter().any(|l| l == "HTTP/1.1 200 OK"), "{first:#?}");
    // s_client takes a command only at the start of what it reads, and
    // drops the rest of that read: the request goes after a pause.
    let mut command = |c: &str| {
        stdin.write_all(c.as_bytes()).expect("write");
        stdin.flush().expect("flush");
        std::thread::sleep(Duration::from_millis(300));
        stdin.write_all(request.as_bytes()).expect("write");
    };
    // `K`: ours comes back before the answer, and the answer opens under it.
    command("K\n");
    let second = answer();
    assert_eq!((key_update(&second, ">>>"), key_update(&second, "<<<")), (1, 1), "{second:#?}");
    assert!(second.iter().any(|l| l == "HTTP/1.1 200 OK"), "{second:#?}");
    // `k`: none comes back.
    command("k\n");
    let third = answer();
    assert_eq!((key_update(&third, ">>>"), key_update(&third, "<<<")), (1, 0), "{third:#?}");
    assert!(third.iter().any(|l| l == "HTTP/1.1 200 OK"), "{third:#?}");
    stdin.write_all(b"Q\n").expect("quit");
    drop(stdin);
    let _ = client.wait();
}

/// Idle TLS keep-alive connections hold neither hyper's buffers nor
/// rustls's state: after the handshake only the socket, the parked task
/// and the record layer's keys as bytes (`crate::tls13`). ~3.4 KB each in
/// this build; ~26 KB when hyper kept its buffers, ~11 KB with rustls's
/// state kept.
#[tokio::test]
async fn idle_tls_keep_alive_connections_hold_no_hyper_buffers() {
    use tokio::io::AsyncWriteExt;
    const N: usize = 600;
    let dir = tempfile::tempdir().expect("tempdir");
    let cert = Cert::new();
    cert.write(dir.path());
    let server = TlsServer::start_with(dir.path(), &[&cert], &["--header-timeout-secs", "120"]).await;
    let config = client_config(&[&cert], b"http/1.1");
    let open = |server: &TlsServer| {
        let (port, config) = (server.port, config.clone());
        async move {
            let mut tls = tls_connect(port, config).await.expect("handshake");
            tls.write_all(GET).await.expect("write");
            tls.flush().await.expect("flush");
            assert_eq!(responses(&mut tls, 1).await[0].0, "HTTP/1.1 200 OK");
            tls
        }
    };
    // Warm up: the runtime's threads and the first connections' allocations.
    for _ in 0..20 {
        drop(open(&server).await);
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let before = server.rss();
    let mut held = hold(N, || open(&server)).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let after = server.rss();
    let per_connection = after.saturating_sub(before) / N as u64;
    eprintln!("server RSS {before} -> {after} bytes: {per_connection} bytes per idle TLS connection");
    assert!(per_connection < 6_000, "{per_connection} bytes per idle TLS connection");
    // Parked, they still serve.
    for tls in held.iter_mut().step_by(37) {
        tls.write_all(GET).await.expect("write");
        tls.flush().await.expect("flush");
        assert_eq!(responses(tls, 1).await[0].0, "HTTP/1.1 200 OK");
    }
}

/// `n` connections made by `open`, 50 at a time.
async fn hold<T, F>(n: usize, open: impl Fn() -> F) -> Vec<T>
where
    T: Send + 'static,
    F: Future<Output = T> + Send + 'static,
{
    let mut held = Vec::with_capacity(n);
    for _ in 0..n.div_ceil(50) {
        let mut set = tokio::task::JoinSet::new();
        for _ in 0..50.min(n - held.len()) {
            set.spawn(open());
        }
        while let Some(c) = set.join_next().await {
            held.push(c.expect("join"));
        }
    }
    held
}

/// An admin's token, made in `dir`'s data before the server starts.
async fn admin_token(dir: &Path) -> String {
    let out = pith()
        .args(["user", "add", "admin", "--admin", "--data-dir"])
        .arg(dir.join("data"))
        .output()
        .expect("pith user add");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).lines().last().expect("token").trim().to_owned()
}

/// One JSON POST over its own HTTPS connection; returns status line and body.
async fn h1_post(server: &TlsServer, cert: &Cert, path: &str, token: &str, body: &str) -> (String, String) {
    use tokio::io::AsyncWriteExt;
    let mut tls = server.connect(&[cert], b"http/1.1").await;
    let req = format!(
        "POST {path} HTTP/1.1\r\nhost: localhost\r\nauthorization: Bearer {token}\r\n\
         content-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    );
    tls.write_all(req.as_bytes()).await.expect("write");
    tls.flush().await.expect("flush");
    responses(&mut tls, 1).await.remove(0)
}

async fn make_topic(server: &TlsServer, cert: &Cert, token: &str) -> i64 {
    let (status, _) = h1_post(server, cert, "/api/v1/communities", token, r#"{"name":"wss","title":"wss"}"#).await;
    assert!(status.contains("201"), "{status}");
    let (status, body) =
        h1_post(server, cert, "/api/v1/communities/wss/topics", token, r#"{"title":"live","body":"first"}"#).await;
    assert!(status.contains("201"), "{status}: {body}");
    serde_json::from_str::<serde_json::Value>(&body).expect("json")["id"].as_i64().expect("topic id")
}

/// The next text message of `ws` whose JSON `type` is `kind`.
async fn next_of<S>(ws: &mut tokio_tungstenite::WebSocketStream<S>, kind: &str) -> serde_json::Value
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            if let Message::Text(t) = ws.next().await.expect("a message").expect("frame") {
                let v: serde_json::Value = serde_json::from_str(&t).expect("json");
                if v["type"] == kind {
                    return v;
                }
            }
        }
    })
    .await
    .unwrap_or_else(|_| panic!("no {kind} message in time"))
}

/// The cipher suite is the server's choice among the client's: AES-128-GCM
/// before AES-256-GCM where the machine has AES instructions, whatever the
/// client's order, but ChaCha20-Poly1305 for a client that lists it first
/// (or everywhere, on a machine without them).
#[tokio::test]
async fn the_server_orders_the_cipher_suites_by_its_hardware_and_the_clients_first_choice() {
    use tokio_rustls::rustls::crypto::ring::cipher_suite::{
        TLS13_AES_128_GCM_SHA256 as AES128, TLS13_AES_256_GCM_SHA384 as AES256,
        TLS13_CHACHA20_POLY1305_SHA256 as CHACHA,
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let cert = Cert::new();
    cert.write(dir.path());
    let server = TlsServer::start(dir.path(), &[&cert]).await;
    let aes = pith::net::tls::aes_hardware();
    for (offered, expected) in [
        (vec![AES256, CHACHA, AES128], if aes { AES128 } else { CHACHA }),
        (vec![AES128, AES256, CHACHA], if aes { AES128 } else { CHACHA }),
        (vec![CHACHA, AES256, AES128], CHACHA),
        (vec![AES256], AES256),
        (vec![AES256, CHACHA], if aes { AES256 } else { CHACHA }),
    ] {
        let mut provider = tokio_rustls::rustls::crypto::ring::default_provider();
        provider.cipher_suites = offered.clone();
        let tls =
            tls_connect(server.port, client_config_with(provider, &[&cert], b"http/1.1")).await.expect("handshake");
        let suites = |s: &[tokio_rustls::rustls::SupportedCipherSuite]| s.iter().map(|s| s.suite()).collect::<Vec<_>>();
        assert_eq!(
            tls.get_ref().1.negotiated_cipher_suite().map(|s| s.suite()),
            Some(expected.suite()),
            "offered {:?}",
            suites(&offered)
        );
        let (status, _) = h1_get(tls, "/api/v1/topics/1").await;
        assert_eq!(status, 404, "a request answered over the chosen suite");
    }
}

/// `wss` sockets run in the server's process on one descriptor each, with
/// every TLS 1.3 cipher suite: the greeting, answers to messages (one of
/// them larger than a TLS record, one after a key update), events, and a close answered with a
/// close and the socket's end; held idle, they cost little memory, and an
/// event reaches every one.
#[tokio::test]
async fn wss_sockets_run_in_process_on_one_descriptor_with_each_cipher_suite() {
    use tokio_rustls::rustls::crypto::ring::cipher_suite;
    const IDLE: usize = 300;
    let dir = tempfile::tempdir().expect("tempdir");
    let cert = Cert::new();
    cert.write(dir.path());
    let token = admin_token(dir.path()).await;
    let server = TlsServer::start_with(
        dir.path(),
        &[&cert],
        &["--live-max-sockets-per-ip", "10000", "--live-max-message-bytes", "65536"],
    )
    .await;
    let topic = make_topic(&server, &cert, &token).await;
    let url = format!("wss://localhost/api/v1/live?topics={topic}");

    for suite in [
        cipher_suite::TLS13_AES_128_GCM_SHA256,
        cipher_suite::TLS13_AES_256_GCM_SHA384,
        cipher_suite::TLS13_CHACHA20_POLY1305_SHA256,
    ] {
        let mut provider = tokio_rustls::rustls::crypto::ring::default_provider();
        provider.cipher_suites = vec![suite];
        let tls =
            tls_connect(server.port, client_config_with(provider, &[&cert], b"http/1.1")).await.expect("handshake");
        assert_eq!(tls.get_ref().1.negotiated_cipher_suite().map(|s| s.suite()), Some(suite.suite()));
        let (mut ws, _) = tokio_tungstenite::client_async(url.as_str(), tls).await.expect("WebSocket over TLS");
        let hello = next_of(&mut ws, "subscribed").await;
        assert_eq!(hello["topics"], serde_json::json!([topic]), "{hello}");
        ws.send(Message::text(r#"{"op": "ping"}"#)).await.expect("send");
        next_of(&mut ws, "pong").await;
        // A key update asking for the server's, with the next message: what
        // follows both ways is under the new keys.
        ws.get_mut().get_mut().1.refresh_traffic_keys().expect("key update");
        ws.send(Message::text(r#"{"op": "ping"}"#)).await.expect("send");
        next_of(&mut ws, "pong").await;
        // Larger than one TLS record (16 KB), inside the message limit set above.
        let big = format!(r#"{{"op": "ping", "pad": "{}"}}"#, "x".repeat(40_000));
        ws.send(Message::text(big)).await.expect("send big");
        let err = next_of(&mut ws, "error").await;
        assert_eq!(err["error"]["code"], "invalid_message", "{err}");
        assert!(err["error"]["message"].as_str().is_some_and(|m| m.contains("`pad`")), "{err}");
        let body = format!(r#"{{"body": "over {suite:?}"}}"#);
        let (status, _) = h1_post(&server, &cert, &format!("/api/v1/topics/{topic}/posts"), &token, &body).await;
        assert!(status.contains("201"), "{status}");
        let event = next_of(&mut ws, "post").await;
        assert_eq!(event["post"]["body"], format!("over {suite:?}"), "{event}");
        ws.close(None).await.expect("close");
        let ended = tokio::time::timeout(Duration::from_secs(10), async {
            while let Some(m) = ws.next().await {
                if m.is_err() {
                    break;
                }
            }
        })
        .await;
        assert!(ended.is_ok(), "the server ends the socket after the close");
    }

    // Held idle: one descriptor each (no relay), and little memory.
    let config = client_config(&[&cert], b"http/1.1");
    let open = || {
        let (port, config, url) = (server.port, config.clone(), url.clone());
        async move {
            let tls = tls_connect(port, config).await.expect("handshake");
            let (mut ws, _) = tokio_tungstenite::client_async(url.as_str(), tls).await.expect("upgrade");
            next_of(&mut ws, "subscribed").await;
            ws
        }
    };
    for _ in 0..20 {
        drop(open().await);
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let (fds, rss) = (server.fds(), server.rss());
    let mut held = hold(IDLE, open).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let (fds_after, rss_after) = (server.fds(), server.rss());
    let per_socket = rss_after.saturating_sub(rss) / IDLE as u64;
    eprintln!("{IDLE} idle wss sockets: {} descriptors, {per_socket} bytes of RSS each", fds_after - fds);
    assert!(fds_after - fds <= IDLE + 8, "{} descriptors for {IDLE} wss sockets", fds_after - fds);
    // The benchmark has the figure (docs/BENCHMARKS.md); this catches
    // rustls's buffers (~10 KB each) coming back.
    assert!(per_socket < 6_000, "{per_socket} bytes per idle wss socket");
    let (status, _) =
        h1_post(&server, &cert, &format!("/api/v1/topics/{topic}/posts"), &token, r#"{"body": "to all"}"#).await;
    assert!(status.contains("201"), "{status}");
    for ws in held.iter_mut() {
        assert_eq!(next_of(ws, "post").await["post"]["body"], "to all");
    }
}

/// A `wss` client on OpenSSL (Python's ssl module): Pith's record code
/// against a TLS implementation it did not write.
#[tokio::test]
async fn a_wss_client_on_openssl_is_greeted_answered_sent_events_and_closed_cleanly() {
    use tokio::io::AsyncBufReadExt;
    let dir = tempfile::tempdir().expect("tempdir");
    let cert = Cert::new();
    cert.write(dir.path());
    let token = admin_token(dir.path()).await;
    let server = TlsServer::start(dir.path(), &[&cert]).await;
    let topic = make_topic(&server, &cert, &token).await;
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/it/support/wss_openssl.py");
    let mut child = tokio::process::Command::new("python3")
        .arg(script)
        .arg(server.port.to_string())
        .arg(dir.path().join("cert.pem"))
        .arg(topic.to_string())
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("python3");
    let mut lines = tokio::io::BufReader::new(child.stdout.take().expect("stdout")).lines();
    let mut next = async || {
        tokio::time::timeout(Duration::from_secs(20), lines.next_line())
            .await
            .expect("a line in time")
            .expect("read")
            .unwrap_or_else(|| panic!("the client ended early:\n{}", server.log_text()))
    };
    // OpenSSL lists AES-256-GCM first; the server takes AES-128-GCM on a
    // machine with AES instructions, ChaCha20-Poly1305 on one without.
    let cipher = next().await;
    let expected = if pith::net::tls::aes_hardware() { "AES_128_GCM" } else { "CHACHA20_POLY1305" };
    assert_eq!(cipher, format!("cipher TLS_{expected}_SHA256"), "TLS 1.3");
    assert_eq!(next().await, "greeted");
    assert_eq!(next().await, "pong");
    assert_eq!(next().await, "ready");
    let (status, _) =
        h1_post(&server, &cert, &format!("/api/v1/topics/{topic}/posts"), &token, r#"{"body": "to openssl"}"#).await;
    assert!(status.contains("201"), "{status}");
    let event = next().await;
    assert!(event.starts_with("event ") && event.contains("to openssl"), "{event}");
    assert_eq!(next().await, "closed 1000");
    assert_eq!(next().await, "eof", "close_notify, then the end");
    assert!(child.wait().await.expect("wait").success());
}

/// curl on OpenSSL, a TLS implementation that is neither rustls nor Pith's
/// record layer, keeps one connection for a run of requests over HTTP/1.1
/// and over HTTP/2: a cached topic (the parked fast path), a post whose
/// body spans several TLS records, and the topic again with the post in it.
#[tokio::test]
async fn curl_on_openssl_runs_requests_on_one_tls_connection_over_http1_and_http2() {
    let dir = tempfile::tempdir().expect("tempdir");
    let cert = Cert::new();
    cert.write(dir.path());
    let token = admin_token(dir.path()).await;
    let server = TlsServer::start(dir.path(), &[&cert]).await;
    let topic = make_topic(&server, &cert, &token).await;
    for (version, post) in [("--http1.1", "a"), ("--http2", "b")] {
        // ~35 KB: three TLS records.
        let text = format!("{post}{}", "word ".repeat(7_000));
        std::fs::write(dir.path().join("post.json"), serde_json::json!({ "body": text }).to_string()).expect("body");
        let url = format!("https://localhost:{}/api/v1/topics/{topic}", server.port);
        let out = tokio::process::Command::new("curl")
            .args(["--silent", "--show-error", version, "--cacert"])
            .arg(dir.path().join("cert.pem"))
            .args(["--resolve", &format!("localhost:{}:127.0.0.1", server.port)])
            .args(["--write-out", "\n%{http_code} %{num_connects} %{http_version}\n", &url])
            .args(["--next", "--silent", "--show-error", version, "--cacert"])
            .arg(dir.path().join("cert.pem"))
            .args(["--header", &format!("authorization: Bearer {token}"), "--header", "content-type: application/json"])
            .arg("--data-binary")
            .arg(format!("@{}", dir.path().join("post.json").display()))
            .args(["--write-out", "\n%{http_code} %{num_connects} %{http_version}\n", &format!("{url}/posts")])
            .args(["--next", "--silent", "--show-error", version, "--cacert"])
            .arg(dir.path().join("cert.pem"))
            .args(["--write-out", "\n%{http_code} %{num_connects} %{http_version}\n", &url])
            .output()
            .await
            .expect("curl");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{version}: {}\n{}", String::from_utf8_lossy(&out.stderr), server.log_text());
        let summaries: Vec<&str> = stdout.lines().filter(|l| l.len() < 16 && l.contains(' ')).collect();
        let http = if version == "--http2" { "2" } else { "1.1" };
        assert_eq!(summaries, [format!("200 1 {http}"), format!("201 0 {http}"), format!("200 0 {http}")], "{stdout}");
        let last = stdout.lines().rev().find(|l| l.starts_with('{')).expect("the topic's JSON");
        assert!(last.contains(&text[..200]) && last.len() > text.len(), "the topic holds the new post");
    }
}

/// A client that sends its first request in the same segment as its
/// `Finished` (rustls does, once its handshake is done) is answered: the
/// handshake reads record by record and leaves the request for the
/// connection's record layer.
#[tokio::test]
async fn a_request_in_the_same_segment_as_the_clients_finished_is_answered() {
    use std::io::{Read, Write};
    let dir = tempfile::tempdir().expect("tempdir");
    let cert = Cert::new();
    cert.write(dir.path());
    let server = TlsServer::start(dir.path(), &[&cert]).await;
    let (config, port) = (client_config(&[&cert], b"http/1.1"), server.port);
    let (writes, answer) = tokio::task::spawn_blocking(move || {
        let mut tcp = std::net::TcpStream::connect(("127.0.0.1", port)).expect("connect");
        tcp.set_read_timeout(Some(Duration::from_secs(10))).expect("timeout");
        let name = ServerName::try_from("localhost").expect("name");
        let mut tls = tokio_rustls::rustls::ClientConnection::new(config, name).expect("client");
        let mut writes = Vec::new();
        while tls.is_handshaking() {
            if tls.wants_write() {
                let mut out = Vec::new();
                tls.write_tls(&mut out).expect("write_tls");
                tcp.write_all(&out).expect("send");
                writes.push(out.len());
                continue;
            }
            tls.read_tls(&mut tcp).expect("read_tls");
            tls.process_new_packets().expect("handshake");
        }
        // The handshake is done on this side and `Finished` is queued: the
        // request joins it in one write.
        tls.writer().write_all(GET).expect("request");
        let mut out = Vec::new();
        while tls.wants_write() {
            tls.write_tls(&mut out).expect("write_tls");
        }
        tcp.write_all(&out).expect("send");
        let mut answer = Vec::new();
        let mut buf = [0u8; 4096];
        while !answer.ends_with(b"ok\n") {
            match tls.reader().read(&mut buf) {
                Ok(0) => break,
                Ok(n) => answer.extend_from_slice(&buf[..n]),
                Err(_) if tls.read_tls(&mut tcp).expect("read_tls") == 0 => break,
                Err(_) => drop(tls.process_new_packets().expect("records")),
            }
        }
        (writes, String::from_utf8_lossy(&answer).into_owned())
    })
    .await
    .expect("client");
    assert_eq!(writes.len(), 1, "one flight before Finished: ClientHello");
    assert!(answer.starts_with("HTTP/1.1 200 OK") && answer.ends_with("ok\n"), "{answer}");
}
