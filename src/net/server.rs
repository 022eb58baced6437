//! The accept loop. It replaces `axum::serve` because that offers no
//! connection hygiene: here every connection gets a header read timeout
//! (which in hyper also bounds how long an idle keep-alive connection may
//! wait for its next request), a maximum header size, and a place under a
//! cap on open connections; over the cap a client is refused politely with
//! a 503 instead of the server running out of file descriptors. Cleartext
//! connections are served by `idle`, which parks them without hyper's
//! buffers between requests. With TLS (`ConnLimits::tls`) the handshake
//! runs in the connection's task, under the header timeout, after the
//! connection has taken its place, and `idle` then serves it the same way.

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use axum::extract::{ConnectInfo, Request};
use axum::http::{Version, header};
use axum::response::Response;
use axum::routing::future::RouteFuture;
use futures_util::future::{Either, Ready, ready};
use hyper::body::Incoming;
use hyper::server::conn::{http1, http2};
use hyper_util::rt::{TokioExecutor, TokioTimer};
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Semaphore, watch};

use super::hot::Answer;
use super::idle::{self, Activity, Busy, Tracked};
use super::tls_stream::TlsStream;

/// Limits applied to every HTTP connection.
#[derive(Debug, Clone)]
pub struct ConnLimits {
    /// Open HTTP connections served at once (upgraded WebSockets leave the
    /// count; the live hub has its own limits).
    pub max_connections: usize,
    /// Time allowed to send a request's headers, and to start the next
    /// request on a keep-alive connection.
    pub header_timeout: Duration,
    /// Largest request head (request line and headers) accepted.
    pub max_header_bytes: usize,
    /// How long shutdown waits for in-flight requests before giving up.
    pub drain_timeout: Duration,
    /// Terminate TLS on every connection (`--tls-cert`, `--tls-key`).
    pub tls: Option<super::tls::Tls>,
}

impl Default for ConnLimits {
    fn default() -> Self {
        ConnLimits {
            max_connections: 10_000,
            header_timeout: Duration::from_secs(10),
            max_header_bytes: 16 * 1024,
            drain_timeout: Duration::from_secs(30),
            tls: None,
        }
    }
}

const REFUSAL: &[u8] = b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\nretry-after: 1\r\n\
connection: close\r\ncontent-length: 84\r\n\r\n\
{\"error\":{\"code\":\"too_many_connections\",\"message\":\"server busy, retry in a second\"}}";

/// Serves `app` on `listener` until `shutdown` resolves, then waits (up to
/// `drain_timeout`) for in-flight requests to finish.
pub async fn serve(
    listener: TcpListener,
    app: Router,
    hot: Option<Arc<dyn Answer>>,
    limits: ConnLimits,
    shutdown: impl Future<Output = ()>,
) {
    let slots = Arc::new(Semaphore::new(limits.max_connections));
    // Every connection watches this; it changes (or closes) on shutdown.
    let (stop, stopping) = watch::channel(());
    let settings = Arc::new(idle::Settings {
        h1: {
            let mut h1 = http1::Builder::new();
            h1.timer(TokioTimer::new())
                .header_read_timeout(limits.header_timeout)
                .max_buf_size(limits.max_header_bytes.max(8192))
                .keep_alive(true);
            h1
        },
        h2: {
            let mut h2 = http2::Builder::new(TokioExecutor::new());
            h2.timer(TokioTimer::new()).max_header_list_size(limits.max_header_bytes as u32);
            h2
        },
        idle_timeout: limits.header_timeout,
    });
    tokio::pin!(shutdown);
    loop {
        let (tcp, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(conn) => conn,
                Err(e) => {
                    // EMFILE/ENFILE and friends: back off instead of spinning.
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            _ = &mut shutdown => break,
        };
        let _ = tcp.set_nodelay(true);
        let Ok(slot) = slots.clone().try_acquire_owned() else {
            tokio::spawn(refuse(tcp));
            continue;
        };
        let front = Front::new(app.clone(), hot.clone(), peer);
        let (settings, stopping) = (settings.clone(), stopping.clone());
        let Some(tls) = limits.tls.clone() else {
            tokio::spawn(async move {
                idle::serve(tcp, front, settings, stopping).await;
                drop(slot);
            });
            continue;
        };
        let handshake_timeout = limits.header_timeout;
        tokio::spawn(async move {
            // A client that never finishes its handshake must not keep its
            // slot for longer than one that never sends its headers.
            // Boxed, both: the handshake's state is freed once it is done,
            // and the parked connection's task stays small (`idle::serve_tls`).
            let accepted = Box::pin(tokio::time::timeout(
                handshake_timeout,
                crate::tls13::accept(&tcp, |hello| tls.config_for(hello)),
            ))
            .await;
            match accepted {
                Ok(Ok(crate::tls13::Accepted { records, h2 })) => {
                    idle::serve_tls(TlsStream::new(tcp, records), h2, front, settings, stopping).await
                }
                Ok(Err(e)) => tracing::debug!(%peer, error = %e, "TLS handshake failed"),
                Err(_) => tracing::debug!(%peer, "TLS handshake timed out"),
            }
            drop(slot);
        });
    }
    drop(listener);
    drop(stop);
    // Every connection gives its slot back when it ends.
    let all = u32::try_from(limits.max_connections).unwrap_or(u32::MAX);
    if tokio::time::timeout(limits.drain_timeout, slots.acquire_many(all)).await.is_err() {
        tracing::warn!("in-flight requests did not finish within {:?}", limits.drain_timeout);
    }
}

/// A connection's service: the hot path when it answers, else the router
/// (with the peer address for `ConnectInfo`). Each response keeps its
/// request counted in the connection's `Activity` until it is sent; the
/// clones HTTP/2 serves its streams with share that `Activity`, which only
/// HTTP/1 connections read.
#[derive(Clone)]
pub struct Front {
    app: Router,
    hot: Option<Arc<dyn Answer>>,
    peer: SocketAddr,
    activity: Arc<Activity>,
}

impl Front {
    pub(crate) fn new(app: Router, hot: Option<Arc<dyn Answer>>, peer: SocketAddr) -> Front {
        Front { app, hot, peer, activity: Activity::new() }
    }

    pub fn activity(&self) -> &Arc<Activity> {
        &self.activity
    }

    /// The hot path, when the server has one.
    pub fn hot(&self) -> Option<&Arc<dyn Answer>> {
        self.hot.as_ref()
    }
}

impl hyper::service::Service<Request<Incoming>> for Front {
    type Response = Response<Tracked>;
    type Error = Infallible;
    type Future = Counted<Either<Ready<Result<Response, Infallible>>, RouteFuture<Infallible>>>;

    fn call(&self, mut req: Request<Incoming>) -> Self::Future {
        let busy = Some(Busy::new(&self.activity));
        if let Some(hot) = &self.hot {
            let no_body = hyper::body::Body::is_end_stream(req.body());
            if let Some(res) = hot.answer(req.method(), req.uri(), req.headers(), no_body) {
                return Counted { inner: Either::Left(ready(Ok(res))), busy };
            }
        }
        req.extensions_mut().insert(ConnectInfo(self.peer));
        // WebSocket upgrades take the socket from `idle` (`idle::HandOff`).
        if req.version() == Version::HTTP_11 && req.headers().contains_key(header::UPGRADE) {
            req.extensions_mut().insert(self.activity.hand_off());
        }
        // A `Router` is always ready (its `poll_ready` returns at once).
        Counted { inner: Either::Right(tower::Service::call(&mut self.app.clone(), req)), busy }
    }
}

/// A response future whose response body carries its request's `Busy`.
pub struct Counted<F> {
    inner: F,
    busy: Option<Busy>,
}

impl<F: Future<Output = Result<Response, Infallible>> + Unpin> Future for Counted<F> {
    type Output = Result<Response<Tracked>, Infallible>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        let Poll::Ready(Ok(res)) = Pin::new(&mut this.inner).poll(cx) else { return Poll::Pending };
        let busy = this.busy.take();
        Poll::Ready(Ok(res.map(|body| Tracked::new(body, busy))))
    }
}

async fn refuse(mut tcp: TcpStream) {
    let _ = tokio::time::timeout(Duration::from_secs(1), tcp.write_all(REFUSAL)).await;
    let _ = tcp.shutdown().await;
}

/// The peer address as `ConnectInfo` gives it; used by handlers through
/// `axum::extract::ConnectInfo<SocketAddr>`.
pub type Peer = ConnectInfo<SocketAddr>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_refusal_is_a_complete_http_response_with_the_error_shape() {
        let text = std::str::from_utf8(REFUSAL).expect("ascii");
        let (head, body) = text.split_once("\r\n\r\n").expect("head and body");
        let len: usize = head
            .lines()
            .find_map(|l| l.strip_prefix("content-length: "))
            .and_then(|v| v.parse().ok())
            .expect("content-length");
        assert_eq!(len, body.len());
        let json: serde_json::Value = serde_json::from_str(body).expect("json");
        assert_eq!(json["error"]["code"], "too_many_connections");
    }
}
