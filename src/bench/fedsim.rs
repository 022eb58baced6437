//! Simulated remote ActivityPub servers on loopback, for `pith bench
//! deliver` and `pith bench inbound`: each host listens on an address of
//! its own (127.0.0.2, 127.0.0.3, ...: another host to the server under
//! test), has its own RSA key, serves its users' actor documents
//! (`/users/N`, with a shared inbox `/inbox` when asked) and counts what
//! their inboxes get, checking each request's HTTP signature against the
//! key of the Group that should have signed it. Also the child `pith
//! serve` the benches drive, and the signed POSTs they send it.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context;
use axum::extract::{Path as UrlPath, State};
use axum::http::{HeaderMap, StatusCode};
use axum::routing::{get, post};
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client as HttpClient;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use ring::signature::{RSA_PKCS1_2048_8192_SHA256, UnparsedPublicKey};
use serde_json::{Value, json};

use crate::app::federation::keys::{self, SigningKey};
use crate::app::federation::signature;

pub type Client = HttpClient<HttpConnector, Full<Bytes>>;

pub fn client() -> Client {
    let mut connector = HttpConnector::new();
    connector.set_nodelay(true);
    HttpClient::builder(TokioExecutor::new()).pool_max_idle_per_host(256).build(connector)
}

/// What the simulated inboxes got, reset for each run.
pub struct Tally {
    /// Users per host: an inbox's slot is `host * (users + 1) + user`,
    /// and the shared inbox's `host * (users + 1) + users`.
    users: usize,
    /// Deliveries of each kind, by inbox slot.
    accepts: Vec<AtomicU32>,
    announces: Vec<AtomicU32>,
    /// Inboxes that got at least one `Announce`.
    pub announced_inboxes: AtomicUsize,
    pub accepted: AtomicUsize,
    /// Requests whose signature did not verify with the Group's key.
    pub bad_signatures: AtomicUsize,
    /// The Group's public key (PKCS#1 DER), which signs every delivery.
    group_key: Mutex<Option<Arc<Vec<u8>>>>,
    /// Whether actors advertise their host's shared inbox.
    pub shared: AtomicBool,
    /// How long an inbox takes to answer, in milliseconds: a server
    /// across the Internet, rather than on loopback.
    pub latency_ms: std::sync::atomic::AtomicU64,
    last: Mutex<Option<Instant>>,
}

impl Tally {
    fn new(hosts: usize, users: usize) -> Tally {
        let slots = hosts * (users + 1);
        Tally {
            users,
            accepts: (0..slots).map(|_| AtomicU32::new(0)).collect(),
            announces: (0..slots).map(|_| AtomicU32::new(0)).collect(),
            announced_inboxes: AtomicUsize::new(0),
            accepted: AtomicUsize::new(0),
            bad_signatures: AtomicUsize::new(0),
            group_key: Mutex::new(None),
            shared: AtomicBool::new(false),
            latency_ms: std::sync::atomic::AtomicU64::new(0),
            last: Mutex::new(None),
        }
    }

    /// Zeroes the counts for a run against the Group whose key is `pem`.
    pub fn reset(&self, group_pem: Option<&str>, shared: bool) -> anyhow::Result<()> {
        for c in self.accepts.iter().chain(&self.announces) {
            c.store(0, Ordering::Relaxed);
        }
        self.announced_inboxes.store(0, Ordering::Relaxed);
        self.accepted.store(0, Ordering::Relaxed);
        self.bad_signatures.store(0, Ordering::Relaxed);
        let der = group_pem.map(keys::public_der).transpose().map_err(anyhow::Error::msg)?;
        *self.group_key.lock().unwrap_or_else(|e| e.into_inner()) = der.map(Arc::new);
        self.shared.store(shared, Ordering::Relaxed);
        *self.last.lock().unwrap_or_else(|e| e.into_inner()) = None;
        Ok(())
    }

    async fn answer_late(&self) {
        let ms = self.latency_ms.load(Ordering::Relaxed);
        if ms > 0 {
            tokio::time::sleep(Duration::from_millis(ms)).await;
        }
    }

    /// When the last delivery arrived.
    pub fn last(&self) -> Option<Instant> {
        *self.last.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Most deliveries of `Announce` any one inbox got (1 when none twice).
    pub fn most_announces(&self) -> u32 {
        self.announces.iter().map(|c| c.load(Ordering::Relaxed)).max().unwrap_or(0)
    }

    fn record(&self, slot: usize, path: &str, headers: &HeaderMap, body: &[u8]) {
        if !self.signed_by_group(path, headers, body) {
            self.bad_signatures.fetch_add(1, Ordering::Relaxed);
        }
        let kind = serde_json::from_slice::<Value>(body).ok().and_then(|v| v["type"].as_str().map(str::to_owned));
        // Each inbox's count, and the count of inboxes reached, per kind.
        let counts = match kind.as_deref() {
            Some("Accept") => Some((&self.accepts, &self.accepted)),
            Some("Announce") => Some((&self.announces, &self.announced_inboxes)),
            _ => None,
        };
        if let Some((per_inbox, reached)) = counts
            && per_inbox[slot].fetch_add(1, Ordering::Relaxed) == 0
        {
            reached.fetch_add(1, Ordering::Relaxed);
        }
        *self.last.lock().unwrap_or_else(|e| e.into_inner()) = Some(Instant::now());
    }

    /// What a receiving server checks: the signature covers the request
    /// and verifies with the Group's key, and the digest is the body's.
    fn signed_by_group(&self, path: &str, headers: &HeaderMap, body: &[u8]) -> bool {
        let Some(key) = self.group_key.lock().unwrap_or_else(|e| e.into_inner()).clone() else { return true };
        let header = |n: &str| headers.get(n).and_then(|v| v.to_str().ok()).map(str::to_owned);
        let Some(sig) = header("signature").and_then(|s| signature::parse(&s).ok()) else { return false };
        let now = time::OffsetDateTime::now_utc().unix_timestamp();
        if signature::check(&sig, header("date").as_deref(), header("digest").as_deref(), Some(body), now).is_err() {
            return false;
        }
        let Ok(text) = signature::signing_string(&sig.headers, "POST", path, header) else { return false };
        UnparsedPublicKey::new(&RSA_PKCS1_2048_8192_SHA256, key.as_slice())
            .verify(text.as_bytes(), &sig.signature)
            .is_ok()
    }
}

/// One simulated server.
pub struct Host {
    pub base: String,
    pub key: Arc<SigningKey>,
}

impl Host {
    pub fn actor(&self, user: usize) -> String {
        format!("{}/users/{user}", self.base)
    }

    /// The headers that sign a POST of `body` by `user` to `path` on `authority`.
    pub fn sign(
        &self,
        user: usize,
        authority: &str,
        path: &str,
        body: &[u8],
    ) -> anyhow::Result<Vec<(&'static str, String)>> {
        let key_id = format!("{}#main-key", self.actor(user));
        signature::sign_request_with(&key_id, &self.key, "POST", authority, path, Some(body))
            .map_err(anyhow::Error::msg)
    }
}

/// The simulated servers and what their inboxes got.
pub struct Sim {
    pub hosts: Arc<Vec<Host>>,
    pub users: usize,
    pub tally: Arc<Tally>,
}

#[derive(Clone)]
struct HostState {
    index: usize,
    base: String,
    public_pem: Arc<str>,
    tally: Arc<Tally>,
}

/// The address of host `i`: 127.0.0.2 upwards (all of 127/8 is loopback
/// on Linux), on a port of its own.
fn host_ip(i: usize) -> std::net::Ipv4Addr {
    std::net::Ipv4Addr::new(127, 0, (i / 250) as u8, (2 + i % 250) as u8)
}

impl Sim {
    /// Starts `hosts` servers with `users` actors each; makes their keys
    /// on every core (RSA key generation takes a while).
    pub async fn start(hosts: usize, users: usize) -> anyhow::Result<Sim> {
        let made = Instant::now();
        let threads = std::thread::available_parallelism().map_or(2, |n| n.get());
        let per = hosts.div_ceil(threads).max(1);
        let mut jobs = Vec::new();
        for chunk in (0..hosts).collect::<Vec<_>>().chunks(per) {
            let n = chunk.len();
            jobs.push(tokio::task::spawn_blocking(move || (0..n).map(|_| keys::generate()).collect::<Vec<_>>()));
        }
        let mut made_keys = Vec::new();
        for j in jobs {
            for k in j.await? {
                made_keys.push(k.map_err(anyhow::Error::msg)?);
            }
        }
        eprintln!("{hosts} host keys made in {:.1} s", made.elapsed().as_secs_f64());
        let tally = Arc::new(Tally::new(hosts, users));
        let mut out = Vec::new();
        for (i, key) in made_keys.into_iter().enumerate() {
            let listener = tokio::net::TcpListener::bind(SocketAddr::from((host_ip(i), 0)))
                .await
                .with_context(|| format!("binding {}", host_ip(i)))?;
            let base = format!("http://{}", listener.local_addr()?);
            let state = HostState {
                index: i,
                base: base.clone(),
                public_pem: key.public_pem.clone().into(),
                tally: tally.clone(),
            };
            let router = axum::Router::new()
                .route("/users/{n}", get(actor))
                .route("/users/{n}/inbox", post(user_inbox))
                .route("/inbox", post(shared_inbox))
                .with_state(state);
            tokio::spawn(async move { axum::serve(listener, router).await });
            let key = SigningKey::from_pem(&key.private_pem).map_err(anyhow::Error::msg)?;
            out.push(Host { base, key: Arc::new(key) });
        }
        Ok(Sim { hosts: Arc::new(out), users, tally })
    }
}

async fn actor(State(s): State<HostState>, UrlPath(n): UrlPath<usize>) -> axum::response::Response {
    use axum::response::IntoResponse;
    if n >= s.tally.users {
        return StatusCode::NOT_FOUND.into_response();
    }
    let id = format!("{}/users/{n}", s.base);
    let mut doc = json!({
        "@context": ["https://www.w3.org/ns/activitystreams", "https://w3id.org/security/v1"],
        "id": id, "type": "Person", "preferredUsername": format!("u{n}"),
        "inbox": format!("{id}/inbox"),
        "publicKey": {"id": format!("{id}#main-key"), "owner": id, "publicKeyPem": &*s.public_pem},
    });
    if s.tally.shared.load(Ordering::Relaxed) {
        doc["endpoints"] = json!({"sharedInbox": format!("{}/inbox", s.base)});
    }
    ([("content-type", "application/activity+json")], axum::Json(doc)).into_response()
}

async fn user_inbox(
    State(s): State<HostState>,
    UrlPath(n): UrlPath<usize>,
    headers: HeaderMap,
    body: Bytes,
) -> StatusCode {
    if n >= s.tally.users {
        return StatusCode::NOT_FOUND;
    }
    let slot = s.index * (s.tally.users + 1) + n;
    s.tally.answer_late().await;
    s.tally.record(slot, &format!("/users/{n}/inbox"), &headers, &body);
    StatusCode::ACCEPTED
}

async fn shared_inbox(State(s): State<HostState>, headers: HeaderMap, body: Bytes) -> StatusCode {
    let slot = s.index * (s.tally.users + 1) + s.tally.users;
    s.tally.answer_late().await;
    s.tally.record(slot, "/inbox", &headers, &body);
    StatusCode::ACCEPTED
}

/// A `pith serve` started for a bench, over a data directory of its own;
/// killed, and its directory removed, when dropped.
pub struct Child {
    pub child: std::process::Child,
    pub base: String,
    pub authority: String,
    pub token: String,
    dir: PathBuf,
}

impl Drop for Child {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl Child {
    /// Starts `pith` (the binary `exe`) with federation on, an admin user
    /// (whose token it keeps) and `extra` arguments; waits until it serves.
    pub async fn start(exe: &Path, extra: &[String]) -> anyhow::Result<Child> {
        static RUN: AtomicUsize = AtomicUsize::new(0);
        let dir = std::env::temp_dir().join(format!(
            "pith-bench-fed-{}-{}",
            std::process::id(),
            RUN.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir)?;
        let out = std::process::Command::new(exe)
            .args(["user", "add", "bench", "--admin", "--data-dir"])
            .arg(&dir)
            .env("PITH_LOG", "warn")
            .output()
            .context("pith user add")?;
        anyhow::ensure!(out.status.success(), "pith user add: {}", String::from_utf8_lossy(&out.stderr));
        let token = String::from_utf8_lossy(&out.stdout).lines().last().unwrap_or("").trim().to_owned();
        let port = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
        let authority = format!("127.0.0.1:{port}");
        let base = format!("http://{authority}");
        let child = std::process::Command::new(exe)
            .args(["serve", "--federation", "on", "--federation-allow-private", "--listen", &authority])
            .args(["--public-url", &base, "--data-dir"])
            .arg(&dir)
            .args(extra)
            .env("PITH_LOG", "warn")
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .spawn()
            .context("pith serve")?;
        let mut me = Child { child, base, authority, token, dir };
        let probe = client();
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let healthy = match probe.get(format!("{}/healthz", me.base).parse()?).await {
                Ok(res) => res.status() == 200,
                Err(_) => false,
            };
            if healthy {
                return Ok(me);
            }
            if let Some(status) = me.child.try_wait()? {
                anyhow::bail!("pith serve exited with {status} before serving");
            }
            anyhow::ensure!(Instant::now() < deadline, "pith serve did not serve within 30 s");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// A request to the child: `body` as JSON with the admin's token.
    pub async fn api(
        &self,
        client: &Client,
        method: &str,
        path: &str,
        body: Option<Value>,
    ) -> anyhow::Result<(u16, Value)> {
        let req = hyper::Request::builder()
            .method(method)
            .uri(format!("{}{path}", self.base))
            .header("authorization", format!("Bearer {}", self.token))
            .header("content-type", "application/json")
            .body(Full::new(Bytes::from(body.map(|b| b.to_string()).unwrap_or_default())))?;
        let res = client.request(req).await?;
        let status = res.status().as_u16();
        let bytes = res.into_body().collect().await?.to_bytes();
        Ok((status, serde_json::from_slice(&bytes).unwrap_or(Value::Null)))
    }

    /// POSTs a signed activity (headers from `Host::sign`); the status.
    pub async fn post_signed(
        &self,
        client: &Client,
        path: &str,
        body: Bytes,
        signed: &[(&'static str, String)],
    ) -> anyhow::Result<u16> {
        let mut req = hyper::Request::builder()
            .method("POST")
            .uri(format!("{}{path}", self.base))
            .header("content-type", "application/activity+json");
        for (name, value) in signed {
            req = req.header(*name, value);
        }
        let res = client.request(req.body(Full::new(body))?).await?;
        let status = res.status().as_u16();
        let _ = res.into_body().collect().await?;
        Ok(status)
    }
}

/// Samples a process's resident memory every 10 ms until stopped; the peak.
pub struct PeakRss {
    peak: Arc<std::sync::atomic::AtomicU64>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl PeakRss {
    pub fn watch(pid: u32) -> PeakRss {
        let peak = Arc::new(std::sync::atomic::AtomicU64::new(rss(pid)));
        let stop = Arc::new(AtomicBool::new(false));
        let (p, s) = (peak.clone(), stop.clone());
        let thread = std::thread::spawn(move || {
            while !s.load(Ordering::Relaxed) {
                p.fetch_max(rss(pid), Ordering::Relaxed);
                std::thread::sleep(Duration::from_millis(10));
            }
        });
        PeakRss { peak, stop, thread: Some(thread) }
    }

    /// Stops sampling; the peak in bytes.
    pub fn stop(mut self) -> u64 {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        self.peak.load(Ordering::Relaxed)
    }
}

/// A process's resident memory in bytes (0 when unknown).
pub fn rss(pid: u32) -> u64 {
    super::procstat::sample(Some(pid)).map_or(0, |s| s.rss)
}

pub fn mb(bytes: u64) -> f64 {
    bytes as f64 / 1e6
}
