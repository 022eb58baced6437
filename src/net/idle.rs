//! Connections that hold no hyper buffers while idle.
//!
//! hyper gives every HTTP/1 connection an 8 KB write buffer and an 8-16 KB
//! read buffer when it opens and keeps both until it closes, and no
//! setting gives them back: 400 keep-alive connections cost ~10 MB, 10,000
//! idle ones ~200 MB. So an HTTP/1 connection here alternates between
//! two states, written by hand because hyper has no idle hook:
//!
//! - **parked**: only the socket and this task (under 1 KB) while
//!   waiting for the client's next request;
//! - **serving**: a hyper `http1::Connection` over the socket from the
//!   first byte of a request until hyper is idle again: a response sent,
//!   none in flight, every byte written, nothing more to read. Then
//!   `graceful_shutdown` (which closes an idle hyper connection at once)
//!   and `poll_without_shutdown` hand the socket back untouched, with any
//!   bytes of a next request hyper had read, and the connection parks.
//!
//! TLS connections park the same way, and answer cached reads while
//! parked through their record layer (`fast_tls`); after the handshake
//! rustls is gone and a parked TLS connection holds its socket, this task
//! and its two keys (`crate::tls13`). ALPN `h2` goes to hyper's HTTP/2,
//! over the same records.
//!
//! What hyper decides to close (`connection: close`, errors, its header
//! timeout) it closes as before. A parked connection waits at most the
//! idle timeout for its next first byte, and hyper's header timeout then
//! starts on the new serving spell, so a head trickled across a park is
//! bounded by twice the header timeout. WebSocket upgrades take the socket from
//! here (`HandOff`): hyper's upgrade machinery needs the connection type
//! that shuts the socket down at its end. HTTP/2 with prior knowledge
//! (`h2c`) is recognised by its preface and served by hyper unchanged.

use std::future::{Future, poll_fn};
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::{Buf, Bytes};
use hyper::body::{Body, Frame, SizeHint};
use hyper::rt::{Read, ReadBufCursor, Write};
use hyper::server::conn::{http1, http2};
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use tokio::sync::{oneshot, watch};

use super::fast;
use super::fast_tls;
use super::hot::Answer;
use super::server::Front;
use super::tls_stream::TlsStream;
use crate::live::{Stream, Upgraded};
use crate::tls13::Records;

/// What a connection's service, its socket and its driver share: enough
/// to tell when hyper is idle without looking inside it.
#[derive(Default)]
pub struct Activity {
    /// Requests whose response body hyper still holds.
    in_flight: AtomicU32,
    /// A response finished in this serving spell (until then hyper's
    /// keep-alive state is not idle, and a shutdown would be a close).
    responded: AtomicBool,
    /// The last read returned `Pending`, and nothing was written since:
    /// hyper holds no complete request it has not started.
    read_blocked: AtomicBool,
    /// The last write returned `Pending`: hyper still holds bytes to send.
    write_blocked: AtomicBool,
    upgrade: Mutex<Option<oneshot::Sender<Upgraded>>>,
}

/// A connection's byte stream: a TCP socket, or TLS over one.
pub trait Transport: AsyncRead + AsyncWrite + Unpin + Send + 'static {
    /// Whether a flush can find bytes still to send (TLS records); a TCP
    /// socket's flush does nothing.
    const BUFFERS_WRITES: bool;
    /// Ready once the socket under the stream has something to read (or
    /// has failed). Asked only after a read returned `Pending`, when
    /// nothing readable is buffered above the socket.
    fn poll_socket_ready(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>>;
    /// The connection for a live WebSocket after its 101, with `leftover`
    /// (what hyper read past the request) to be read first; `None` if the
    /// connection cannot go on.
    fn into_upgraded(self, leftover: Bytes) -> Option<Upgraded>;
    /// What the fast path reads and writes while the connection is parked.
    fn parked(&mut self) -> Parked<'_>;
}

/// A parked connection as the fast path drives it: the socket, and for
/// TLS its records.
pub enum Parked<'a> {
    Plain(&'a TcpStream),
    Tls(&'a TcpStream, &'a mut Records),
}

impl Parked<'_> {
    /// `fast::read` or `fast_tls::read`.
    fn read(self, hot: &dyn Answer) -> fast::Read {
        match self {
            Parked::Plain(tcp) => fast::read(tcp, hot),
            Parked::Tls(tcp, tls) => fast_tls::read(tcp, tls, hot),
        }
    }

    /// `fast::send` or `fast_tls::send`.
    async fn send(self, framed: fast::Framed, limit: Duration) -> bool {
        match self {
            Parked::Plain(tcp) => fast::send(tcp, framed, limit).await,
            Parked::Tls(tcp, tls) => fast_tls::send(tcp, tls, framed, limit).await,
        }
    }
}

impl Transport for TcpStream {
    const BUFFERS_WRITES: bool = false;

    fn poll_socket_ready(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.poll_read_ready(cx)
    }

    fn into_upgraded(self, leftover: Bytes) -> Option<Upgraded> {
        Some((Stream::Tcp(self), leftover))
    }

    fn parked(&mut self) -> Parked<'_> {
        Parked::Plain(self)
    }
}

impl Transport for TlsStream {
    const BUFFERS_WRITES: bool = true;

    fn poll_socket_ready(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        // A read returns `Pending` only once the records hold no plaintext
        // and the socket would block, so the socket's readiness is the
        // stream's.
        self.socket().poll_read_ready(cx)
    }

    fn into_upgraded(self, leftover: Bytes) -> Option<Upgraded> {
        TlsStream::into_upgraded(self, leftover)
    }

    fn parked(&mut self) -> Parked<'_> {
        let (tcp, tls) = self.parts();
        Parked::Tls(tcp, tls)
    }
}

impl Activity {
    pub fn new() -> Arc<Activity> {
        Arc::new(Activity::default())
    }

    fn quiet(&self) -> bool {
        self.in_flight.load(Relaxed) == 0
            && self.responded.load(Relaxed)
            && self.read_blocked.load(Relaxed)
            && !self.write_blocked.load(Relaxed)
    }

    /// A request with an `Upgrade` header: its handler may take the socket.
    pub fn hand_off(&self) -> HandOff {
        let (tx, rx) = oneshot::channel();
        *self.upgrade.lock().unwrap_or_else(|p| p.into_inner()) = Some(tx);
        HandOff(Arc::new(Mutex::new(Some(rx))))
    }

    /// Where the socket goes after a 101: a handler that took the
    /// `HandOff` still waits for it.
    fn upgrade_waiter(&self) -> Option<oneshot::Sender<Upgraded>> {
        let tx = self.upgrade.lock().unwrap_or_else(|p| p.into_inner()).take()?;
        (!tx.is_closed()).then_some(tx)
    }
}

/// A request extension on upgrade requests of HTTP/1 connections: the
/// WebSocket handler takes the receiver and gets the socket once hyper
/// has sent the 101. (`Clone` because request extensions must be.)
#[derive(Clone)]
pub struct HandOff(Arc<Mutex<Option<oneshot::Receiver<Upgraded>>>>);

impl HandOff {
    pub fn take(&self) -> Option<oneshot::Receiver<Upgraded>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).take()
    }
}

/// Counts a request in flight from the service call until hyper drops
/// its response body.
pub struct Busy(Arc<Activity>);

impl Busy {
    pub fn new(activity: &Arc<Activity>) -> Busy {
        activity.in_flight.fetch_add(1, Relaxed);
        Busy(activity.clone())
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Relaxed);
        self.0.responded.store(true, Relaxed);
    }
}

/// A response body that keeps its request counted while hyper sends it.
pub struct Tracked {
    body: axum::body::Body,
    _busy: Option<Busy>,
}

impl Tracked {
    pub fn new(body: axum::body::Body, busy: Option<Busy>) -> Tracked {
        Tracked { body, _busy: busy }
    }
}

impl Body for Tracked {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        Pin::new(&mut self.get_mut().body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

/// The stream under one serving spell: first the bytes read before it
/// began, then the stream; records what the last read and write did.
struct Socket<T> {
    io: TokioIo<T>,
    unread: Bytes,
    activity: Arc<Activity>,
}

impl<T: Transport> Read for Socket<T> {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, mut buf: ReadBufCursor<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if !this.unread.is_empty() {
            let n = this.unread.len().min(buf.remaining());
            buf.put_slice(&this.unread[..n]);
            this.unread.advance(n);
            return Poll::Ready(Ok(()));
        }
        let read = Pin::new(&mut this.io).poll_read(cx, buf);
        this.activity.read_blocked.store(read.is_pending(), Relaxed);
        read
    }
}

impl<T> Socket<T> {
    fn wrote<R>(&self, write: Poll<io::Result<R>>) -> Poll<io::Result<R>> {
        self.activity.write_blocked.store(write.is_pending(), Relaxed);
        self.activity.read_blocked.store(false, Relaxed);
        write
    }
}

impl<T: Transport> Write for Socket<T> {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let write = Pin::new(&mut this.io).poll_write(cx, buf);
        this.wrote(write)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let write = Pin::new(&mut this.io).poll_write_vectored(cx, bufs);
        this.wrote(write)
    }

    fn is_write_vectored(&self) -> bool {
        // hyper copies every body into its buffer unless this says yes.
        self.io.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        // TLS keeps records it could not send yet until a flush. hyper
        // flushes after every read too, so this leaves `read_blocked` be.
        let this = self.get_mut();
        let flush = Pin::new(&mut this.io).poll_flush(cx);
        if T::BUFFERS_WRITES {
            this.activity.write_blocked.store(flush.is_pending(), Relaxed);
        }
        flush
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_shutdown(cx)
    }
}

/// hyper's settings for every connection, and how long one stays parked.
pub struct Settings {
    pub h1: http1::Builder,
    pub h2: http2::Builder<TokioExecutor>,
    /// How long a parked connection waits for its next request (hyper's
    /// header timeout, which bounds that wait on a connection it holds).
    pub idle_timeout: Duration,
}

/// How a serving spell ended.
enum Ended {
    /// hyper is idle: the socket is ours again.
    Idle,
    /// hyper sent a 101 and left the socket alone.
    Upgraded,
    /// hyper closed the connection (or it failed).
    Closed,
}

/// The client's opening bytes: HTTP/2 prior knowledge or not.
const H2_PREFACE: &[u8; 24] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// Serves one cleartext connection until it closes, parked between
/// requests. `stop` says the server is shutting down: a parked connection
/// then closes, a serving one closes once its response is sent.
pub async fn serve(tcp: TcpStream, front: Front, settings: Arc<Settings>, mut stop: watch::Receiver<()>) {
    let Some(unread) = opening(&tcp, &settings, &mut stop).await else { return };
    if unread[..] == H2_PREFACE[..] {
        return Box::pin(serve_h2(tcp, unread, front, settings, stop)).await;
    }
    serve_h1(tcp, unread, front, settings, stop).await
}

/// `serve` for a TLS connection after its handshake: HTTP/2 when ALPN
/// chose it, else HTTP/1 parked between requests.
pub async fn serve_tls(tls: TlsStream, h2: bool, front: Front, settings: Arc<Settings>, stop: watch::Receiver<()>) {
    if h2 {
        return Box::pin(serve_h2(tls, Bytes::new(), front, settings, stop)).await;
    }
    serve_h1(tls, Bytes::new(), front, settings, stop).await
}

/// HTTP/1: a hyper connection for each serving spell, parked in between.
async fn serve_h1<T: Transport>(
    mut io: T,
    mut unread: Bytes,
    mut front: Front,
    settings: Arc<Settings>,
    mut stop: watch::Receiver<()>,
) {
    let activity = front.activity().clone();
    loop {
        activity.responded.store(false, Relaxed);
        activity.read_blocked.store(false, Relaxed);
        activity.write_blocked.store(false, Relaxed);
        let socket = Socket { io: TokioIo::new(io), unread, activity: activity.clone() };
        // Boxed, so that a parked connection's task stays under 1 KB
        // instead of the size of a hyper connection.
        let mut conn = Box::new(settings.h1.serve_connection(socket, front));
        match serve_until_idle(&mut conn, &activity).await {
            Ended::Closed => return,
            Ended::Upgraded => {
                let (parts, tx) = (conn.into_parts(), activity.upgrade_waiter());
                let leftover = join(parts.read_buf, parts.io.unread);
                if let Some((tx, upgraded)) = tx.zip(parts.io.io.into_inner().into_upgraded(leftover)) {
                    let _ = tx.send(upgraded);
                }
                return;
            }
            Ended::Idle => {
                let parts = conn.into_parts();
                // A copy, so that a partial next request does not keep
                // hyper's whole read buffer alive.
                (io, unread, front) = (parts.io.io.into_inner(), join(parts.read_buf, parts.io.unread), parts.service);
            }
        }
        // Parked. A whole request the hot path answers is answered here
        // (`fast`), and the connection stays parked; anything else wakes
        // hyper with what was read.
        loop {
            let deadline = tokio::time::Instant::now() + settings.idle_timeout;
            if stop.has_changed().unwrap_or(true) || !readable(&io, deadline, &mut stop).await {
                return;
            }
            let (Some(hot), true) = (front.hot(), unread.is_empty()) else { break };
            match io.parked().read(hot.as_ref()) {
                fast::Read::Answered(framed) => {
                    if !io.parked().send(framed, settings.idle_timeout).await {
                        return;
                    }
                }
                fast::Read::Pass(read) => {
                    unread = read;
                    break;
                }
                fast::Read::Nothing => {}
                fast::Read::Closed => return,
            }
        }
    }
}

/// HTTP/2: hyper's, unchanged.
async fn serve_h2<T: Transport>(
    io: T,
    unread: Bytes,
    front: Front,
    settings: Arc<Settings>,
    mut stop: watch::Receiver<()>,
) {
    let activity = front.activity().clone();
    let conn = settings.h2.serve_connection(Socket { io: TokioIo::new(io), unread, activity }, front);
    tokio::pin!(conn);
    tokio::select! {
        _ = conn.as_mut() => {}
        _ = stop.changed() => {
            conn.as_mut().graceful_shutdown();
            let _ = conn.await;
        }
    }
}

/// Waits until the client sends something: `false` if it stays silent
/// until `deadline`, the socket fails, or the server stops.
async fn readable<T: Transport>(io: &T, deadline: tokio::time::Instant, stop: &mut watch::Receiver<()>) -> bool {
    // By hand rather than `select!` over `timeout(tcp.readable())`: this
    // is what a parked connection's task holds, and these are its bytes.
    let mut timeout = std::pin::pin!(tokio::time::sleep_until(deadline));
    let mut stopped = std::pin::pin!(stop.changed());
    poll_fn(|cx| {
        if let Poll::Ready(ready) = io.poll_socket_ready(cx) {
            return Poll::Ready(ready.is_ok());
        }
        if timeout.as_mut().poll(cx).is_ready() || stopped.as_mut().poll(cx).is_ready() {
            return Poll::Ready(false);
        }
        Poll::Pending
    })
    .await
}

/// Waits for the client's first bytes and reads up to the length of the
/// HTTP/2 preface (less once they cannot be it); `None` if the client
/// closes, stays silent for the idle timeout, or the server stops.
async fn opening(tcp: &TcpStream, settings: &Settings, stop: &mut watch::Receiver<()>) -> Option<Bytes> {
    let deadline = tokio::time::Instant::now() + settings.idle_timeout;
    let mut head = [0u8; H2_PREFACE.len()];
    let mut n = 0;
    while n == 0 || (n < head.len() && H2_PREFACE.starts_with(&head[..n])) {
        if !readable(tcp, deadline, stop).await {
            return None;
        }
        match tcp.try_read(&mut head[n..]) {
            Ok(0) => return None,
            Ok(read) => n += read,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
            Err(_) => return None,
        }
    }
    Some(Bytes::copy_from_slice(&head[..n]))
}

/// Drives hyper until the connection is idle, upgraded or closed.
async fn serve_until_idle<T: Transport>(conn: &mut http1::Connection<Socket<T>, Front>, activity: &Activity) -> Ended {
    // Set once a shutdown found hyper busy after all: it then finishes
    // what it was doing and closes the connection, as it decides.
    let mut closing = false;
    poll_fn(|cx| {
        match Pin::new(&mut *conn).poll(cx) {
            Poll::Ready(_) if activity.upgrade.lock().is_ok_and(|u| u.is_some()) => Poll::Ready(Ended::Upgraded),
            Poll::Ready(_) => Poll::Ready(Ended::Closed),
            Poll::Pending if closing || !activity.quiet() => Poll::Pending,
            Poll::Pending => {
                // hyper closes a connection at once if it is idle, and the
                // socket is left open by `poll_without_shutdown`. If it
                // does not close at once it was not idle, and its shutdown
                // is hyper's ordinary one.
                Pin::new(&mut *conn).graceful_shutdown();
                match conn.poll_without_shutdown(cx) {
                    Poll::Ready(Ok(())) => Poll::Ready(Ended::Idle),
                    Poll::Ready(Err(_)) => Poll::Ready(Ended::Closed),
                    Poll::Pending => {
                        closing = true;
                        Poll::Pending
                    }
                }
            }
        }
    })
    .await
}

/// `first` then `rest` as one small buffer of its own.
fn join(first: Bytes, rest: Bytes) -> Bytes {
    if first.is_empty() && rest.is_empty() {
        return Bytes::new();
    }
    let mut joined = Vec::with_capacity(first.len() + rest.len());
    joined.extend_from_slice(&first);
    joined.extend_from_slice(&rest);
    Bytes::from(joined)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What a parked connection holds besides its socket is this task:
    /// hyper's connection (744 bytes without its buffers) is boxed and gone
    /// while parked, and the task must stay well under a hyper buffer.
    #[tokio::test]
    async fn a_connections_task_is_smaller_than_one_of_hypers_buffers() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let tcp = TcpStream::connect(listener.local_addr().expect("addr")).await.expect("connect");
        let front = Front::new(axum::Router::new(), None, "127.0.0.1:1".parse().expect("addr"));
        let h2 = http2::Builder::new(TokioExecutor::new());
        let settings = Arc::new(Settings { h1: http1::Builder::new(), h2, idle_timeout: Duration::from_secs(1) });
        let (_stop, stopping) = watch::channel(());
        let task = serve(tcp, front, settings, stopping);
        assert!(std::mem::size_of_val(&task) <= 1024, "the task's future is {} bytes", std::mem::size_of_val(&task));
    }
}
