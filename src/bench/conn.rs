//! One keep-alive connection's request loop: pick read or write, send when
//! due, time the answer, record it in this connection's own results.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1::SendRequest;
use hyper::header::{ACCEPT_ENCODING, AUTHORIZATION, CONTENT_TYPE, HOST, HeaderValue, USER_AGENT};
use hyper::{Method, Request, Uri};
use hyper_util::rt::TokioIo;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use tokio::net::TcpStream;

use super::pacer::Pacer;
use super::results::WorkerResults;
use super::schedule::{Schedule, Window};

/// Length of a POST body's text, from WORKLOAD.md.
pub const POST_CHARS: usize = 150;

/// The server under test.
#[derive(Debug, Clone)]
pub struct Target {
    pub addr: SocketAddr,
    /// `Host` header: the URL's authority.
    pub host: HeaderValue,
}

impl Target {
    /// Resolves an `http://host:port` URL (cleartext only; any path is ignored).
    pub async fn resolve(url: &str) -> anyhow::Result<Target> {
        let uri: Uri = url.parse().with_context(|| format!("`{url}` is not a URL"))?;
        if uri.scheme_str() != Some("http") {
            anyhow::bail!("`{url}`: only http:// URLs are supported");
        }
        let authority = uri.authority().with_context(|| format!("`{url}` has no host"))?;
        let port = authority.port_u16().unwrap_or(80);
        let addr = tokio::net::lookup_host((authority.host(), port))
            .await
            .with_context(|| format!("cannot resolve {}", authority.host()))?
            .next()
            .with_context(|| format!("{} resolves to no address", authority.host()))?;
        Ok(Target { addr, host: HeaderValue::from_str(authority.as_str())? })
    }
}

/// What every connection of a run shares.
#[derive(Debug)]
pub struct Plan {
    pub target: Target,
    /// Topic ids are drawn uniformly from 1..=topics.
    pub topics: u64,
    /// Share of requests that are posts; 0 without a token.
    pub write_ratio: f64,
    /// `Bearer TOKEN`, when writes are on.
    pub auth: Option<HeaderValue>,
    pub accept_gzip: bool,
    /// Total requests per second over all connections (open loop), or none
    /// for a closed loop at full speed.
    pub rate: Option<f64>,
    pub connections: usize,
    pub window: Window,
    /// Longest wait for one answer before it counts as an error.
    pub timeout: Duration,
    pub seed: u64,
    /// Live counters for the progress line.
    pub progress: super::monitor::Progress,
}

impl Plan {
    fn get(&self, topic: u64) -> Request<Full<Bytes>> {
        let mut req = self.request(Method::GET, format!("/api/v1/topics/{topic}"), Bytes::new());
        if self.accept_gzip {
            req.headers_mut().insert(ACCEPT_ENCODING, HeaderValue::from_static("gzip"));
        }
        req
    }

    fn post(&self, topic: u64, auth: &HeaderValue, body: String) -> Request<Full<Bytes>> {
        let mut req = self.request(Method::POST, format!("/api/v1/topics/{topic}/posts"), Bytes::from(body));
        req.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        req.headers_mut().insert(AUTHORIZATION, auth.clone());
        req
    }

    fn request(&self, method: Method, path: String, body: Bytes) -> Request<Full<Bytes>> {
        let mut req = Request::new(Full::new(body));
        *req.method_mut() = method;
        *req.uri_mut() = Uri::try_from(path).expect("a topic path is a valid URI");
        req.headers_mut().insert(HOST, self.host());
        req.headers_mut().insert(USER_AGENT, HeaderValue::from_static("pith-bench"));
        req
    }

    fn host(&self) -> HeaderValue {
        self.target.host.clone()
    }
}

/// The JSON of a post: `{"body": "..."}` with exactly [`POST_CHARS`]
/// characters of text, unique per connection and count.
pub fn post_body(conn: usize, n: u64) -> String {
    const FILLER: &str = "a post written by the pith load generator to measure the cost of a durable write ";
    let mut text = format!("bench {conn}-{n}: ");
    while text.len() < POST_CHARS {
        text.push_str(FILLER);
    }
    text.truncate(POST_CHARS);
    serde_json::json!({ "body": text }).to_string()
}

/// Runs connection `index` from `start` until the window closes; an open
/// loop sends each request when `pacer` says it is due.
pub async fn run(plan: Arc<Plan>, index: usize, start: Instant, pacer: Option<Pacer>) -> WorkerResults {
    let mut out = WorkerResults::default();
    let mut rng = ChaCha8Rng::seed_from_u64(plan.seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ index as u64);
    let schedule = plan.rate.map(|r| Schedule::new(r, plan.connections, index));
    let end = start + plan.window.end;
    let mut sender = None;
    let mut sent: u64 = 0;
    loop {
        let due = match schedule {
            Some(s) => start + s.due(sent),
            None => Instant::now(),
        };
        if due >= end {
            break;
        }
        if let Some(pacer) = &pacer {
            pacer.sleep_until(due).await;
        }
        sent += 1;
        let write = plan.auth.is_some() && rng.random_bool(plan.write_ratio);
        let topic = rng.random_range(1..=plan.topics);
        let req = match &plan.auth {
            Some(auth) if write => plan.post(topic, auth, post_body(index, sent)),
            _ => plan.get(topic),
        };
        let deadline = (Instant::now() + plan.timeout).min(end);
        let outcome = tokio::time::timeout_at(deadline.into(), attempt(&plan.target, &mut sender, req)).await;
        let done = Instant::now();
        let counted = plan.window.records(due - start, done - start);
        if write {
            count_post(&mut out, &outcome);
        }
        let results = if write { &mut out.writes } else { &mut out.reads };
        match &outcome {
            Ok(Ok(_)) => plan.progress.answered(),
            _ => plan.progress.failed(),
        }
        // An answer that came in time but was read after the window
        // closed (this task ran late: a busy machine): the window owes it,
        // and it had no answer when the window closed.
        let late = schedule.is_some() && due - start >= plan.window.warmup && done - start > plan.window.end;
        match outcome {
            Ok(Ok((status, bytes))) if counted => results.record(done - due, status, bytes),
            Ok(_) if late => out.unfinished += 1,
            Ok(Ok(_)) => {}
            Ok(Err(failure)) => {
                sender = None;
                if counted {
                    results.record_error(&failure);
                }
                if failure.starts_with("connect") {
                    // Don't spin on a server that refuses connections.
                    tokio::time::sleep_until((Instant::now() + Duration::from_millis(10)).min(end).into()).await;
                }
            }
            Err(_) if deadline >= end => {
                // In a closed loop the last request is always cut off: only
                // an open loop owes an answer for it.
                if schedule.is_some() && due - start >= plan.window.warmup {
                    out.unfinished += 1;
                }
                break;
            }
            Err(_) => {
                // HTTP/1 cannot abandon a request: drop the connection.
                sender = None;
                if counted {
                    results.record_error("timeout");
                }
            }
        }
    }
    if let Some(s) = schedule {
        // Requests due in the window that the connection never got to send.
        let first_unsent = sent.max(s.due_before(plan.window.warmup));
        out.unfinished += s.due_before(plan.window.end).saturating_sub(first_unsent);
    }
    out
}

/// A request's fate: its status and body size, a failure, or (`T`) no
/// answer in time.
type Outcome<T> = Result<Result<(u16, u64), String>, T>;

/// Counts a post's fate over the whole run (not only the window), for the
/// check that every acknowledged post is stored: a 2xx is acknowledged; no
/// answer after it may have reached the server (anything but a failed
/// connect) leaves it unknown.
fn count_post<T>(out: &mut WorkerResults, outcome: &Outcome<T>) {
    match outcome {
        Ok(Ok((status, _))) if (200..300).contains(status) => out.posts_acknowledged += 1,
        Ok(Ok(_)) => {}
        Ok(Err(failure)) if failure.starts_with("connect") => {}
        _ => out.posts_unanswered += 1,
    }
}

/// Sends one request on the connection, opening a new one when there is
/// none or the server closed it. Returns the status and body size.
async fn attempt(
    target: &Target,
    sender: &mut Option<SendRequest<Full<Bytes>>>,
    req: Request<Full<Bytes>>,
) -> Result<(u16, u64), String> {
    let s = match sender {
        Some(s) if !s.is_closed() => s,
        slot => slot.insert(connect(target).await?),
    };
    s.ready().await.map_err(|e| format!("send: {e}"))?;
    let resp = s.send_request(req).await.map_err(|e| format!("send: {e}"))?;
    let status = resp.status().as_u16();
    let mut body = resp.into_body();
    let mut bytes = 0u64;
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| format!("body: {e}"))?;
        if let Some(data) = frame.data_ref() {
            bytes += data.len() as u64;
        }
    }
    Ok((status, bytes))
}

/// Opens a keep-alive HTTP/1.1 connection; its driver runs as its own task
/// and ends when the returned sender is dropped.
pub async fn connect(target: &Target) -> Result<SendRequest<Full<Bytes>>, String> {
    let tcp = TcpStream::connect(target.addr).await.map_err(|e| format!("connect: {e}"))?;
    let _ = tcp.set_nodelay(true);
    let (sender, conn) =
        hyper::client::conn::http1::handshake(TokioIo::new(tcp)).await.map_err(|e| format!("connect: {e}"))?;
    tokio::spawn(async move {
        let _ = conn.await;
    });
    Ok(sender)
}

/// One GET on an open connection: the status, or an error message.
pub async fn get_status(
    target: &Target,
    sender: &mut Option<SendRequest<Full<Bytes>>>,
    path: &str,
) -> Result<u16, String> {
    let mut req = Request::new(Full::new(Bytes::new()));
    *req.uri_mut() = Uri::try_from(path).map_err(|e| format!("bad path {path}: {e}"))?;
    req.headers_mut().insert(HOST, target.host.clone());
    let result = attempt(target, sender, req).await;
    if result.is_err() {
        *sender = None;
    }
    result.map(|(status, _)| status)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_post_body_is_json_with_150_characters_of_text() {
        for (conn, n) in [(0, 1), (399, 123_456_789), (7, u64::MAX)] {
            let json: serde_json::Value = serde_json::from_str(&post_body(conn, n)).expect("valid JSON");
            let text = json["body"].as_str().expect("a body string");
            assert_eq!(text.chars().count(), POST_CHARS);
            assert!(text.starts_with(&format!("bench {conn}-{n}: ")));
        }
        assert_ne!(post_body(1, 1), post_body(1, 2));
    }

    #[test]
    fn a_post_counts_as_acknowledged_on_2xx_and_as_unknown_when_its_answer_may_be_lost() {
        let mut out = WorkerResults::default();
        let outcomes: [Outcome<()>; 6] = [
            Ok(Ok((201, 10))),
            Ok(Ok((429, 10))),
            Ok(Err("connect: refused".into())),
            Ok(Err("send: connection reset".into())),
            Ok(Err("body: unexpected end".into())),
            Err(()),
        ];
        for o in &outcomes {
            count_post(&mut out, o);
        }
        assert_eq!((out.posts_acknowledged, out.posts_unanswered), (1, 3));
    }

    #[tokio::test]
    async fn a_target_is_resolved_from_an_http_url() {
        let t = Target::resolve("http://127.0.0.1:8080").await.expect("resolves");
        assert_eq!(t.addr, "127.0.0.1:8080".parse().expect("an address"));
        assert_eq!(t.host, "127.0.0.1:8080");
        let t = Target::resolve("http://127.0.0.1/").await.expect("resolves");
        assert_eq!(t.addr.port(), 80);
        assert!(Target::resolve("https://127.0.0.1:8443").await.is_err());
        assert!(Target::resolve("not a url").await.is_err());
    }

    #[test]
    fn requests_carry_the_headers_of_the_mix() {
        let plan = Plan {
            target: Target { addr: "127.0.0.1:1".parse().expect("an address"), host: HeaderValue::from_static("h:1") },
            topics: 10,
            write_ratio: 0.01,
            auth: Some(HeaderValue::from_static("Bearer t")),
            accept_gzip: true,
            rate: None,
            connections: 1,
            window: Window::new(Duration::ZERO, Duration::from_secs(1)),
            timeout: Duration::from_secs(1),
            seed: 1,
            progress: Default::default(),
        };
        let get = plan.get(7);
        assert_eq!(get.uri(), "/api/v1/topics/7");
        assert_eq!(get.headers()[ACCEPT_ENCODING], "gzip");
        assert_eq!(get.headers()[HOST], "h:1");
        let post = plan.post(7, &HeaderValue::from_static("Bearer t"), post_body(0, 1));
        assert_eq!(post.method(), Method::POST);
        assert_eq!(post.uri(), "/api/v1/topics/7/posts");
        assert_eq!(post.headers()[AUTHORIZATION], "Bearer t");
        assert_eq!(post.headers()[CONTENT_TYPE], "application/json");
    }
}
