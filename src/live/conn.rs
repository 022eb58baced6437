//! One WebSocket connection: a hand-written future that is the whole task.
//!
//! It holds the socket, its subscriptions (with its slot on the heartbeat
//! clock) and one
//! optional box for what is needed only while something is in flight: a
//! partly received frame, a fragmented message, output the kernel would
//! not take yet, a token being checked. An idle socket holds no buffer.
//! Reads go through a small stack buffer inside `poll`; events are written
//! straight from the shared frame with `try_write`, and only the part the
//! kernel refuses is queued (as `Bytes` clones, not copies).

use std::collections::VecDeque;
use std::future::Future;
use std::io::ErrorKind;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use bytes::Bytes;
use tokio::sync::oneshot;

use super::frame::{self, OP_CLOSE};
use super::proto;
use super::reactor::Socket;
use super::subs::Membership;
use super::{Stream, Upgraded};
use output::write_now;

mod input;
mod output;

/// WebSocket close codes this server sends (docs/LIVE.md lists them).
pub mod close {
    pub const NORMAL: u16 = 1000;
    /// The server is shutting down.
    pub const GOING_AWAY: u16 = 1001;
    /// A frame broke RFC 6455 (unmasked, reserved bits, bad continuation).
    pub const PROTOCOL: u16 = 1002;
    /// A text message that is not UTF-8.
    pub const INVALID_DATA: u16 = 1007;
    /// A message longer than the server's limit.
    pub const TOO_BIG: u16 = 1009;
    /// No pong came back for the last heartbeat ping.
    pub const HEARTBEAT_TIMEOUT: u16 = 4000;
    /// The client did not read fast enough: its queued output passed the
    /// limit, or it fell behind a channel's buffer.
    pub const TOO_SLOW: u16 = 4001;
}

/// Stack buffer for one read.
const READ_CHUNK: usize = 1024;
/// Reads, and events, handled in one poll before yielding to other tasks.
const READS_PER_POLL: usize = 16;
const EVENTS_PER_POLL: usize = 64;

/// A frame other than a pong arrived since the last heartbeat.
const ACTIVE: u8 = 1;
/// A heartbeat ping is unanswered.
const PINGED: u8 = 2;
/// A close frame is queued; the connection only drains now.
const CLOSING: u8 = 4;
/// The `subscribed` greeting and any bytes read during the handshake are
/// still to be handled.
const FRESH: u8 = 8;
/// The write side is shut down.
const SHUT: u8 = 16;

pub struct Conn {
    tcp: Socket,
    member: Membership,
    extra: Option<Box<Extra>>,
    flags: u8,
}

/// Per-connection state that exists only while something is in flight;
/// freed as soon as it is all empty again.
#[derive(Default)]
struct Extra {
    /// Bytes of a frame that has not fully arrived.
    partial: Vec<u8>,
    /// A fragmented message being reassembled; `message_op` is 0 when none.
    message: Vec<u8>,
    message_op: u8,
    /// Frames (or their unwritten tails) the kernel would not take yet.
    out: VecDeque<Bytes>,
    out_bytes: usize,
    /// A token from an `auth` message being checked.
    auth: Option<Pin<Box<dyn Future<Output = Option<i64>> + Send>>>,
}

impl Extra {
    fn idle(&self) -> bool {
        self.partial.is_empty() && self.message_op == 0 && self.out.is_empty() && self.auth.is_none()
    }
}

/// How a connection ends.
enum Stop {
    /// Send a close frame, stop listening, let output drain, then hang up.
    Close(u16, &'static str),
    /// Hang up now (the peer is gone or a close exchange is done).
    Hangup,
}

type Step = Result<(), Stop>;

impl Conn {
    /// A connection over the socket hyper handed back, with `leftover`
    /// bytes it had already read past the handshake; run by a driver of
    /// `live::reactor`, which reports the socket's readiness.
    pub(super) fn new(tcp: Socket, member: Membership, leftover: &[u8]) -> Conn {
        let sndbuf = member.hub().limits().send_buffer;
        if sndbuf > 0 {
            // Bounds the kernel memory a client that stops reading can hold.
            let _ = tcp.sock_ref().set_send_buffer_size(sndbuf);
        }
        let mut conn = Conn { tcp, member, extra: None, flags: FRESH };
        if !leftover.is_empty() {
            conn.extra_mut().partial.extend_from_slice(leftover);
        }
        conn
    }

    pub(super) fn socket(&self) -> &Socket {
        &self.tcp
    }

    pub(super) fn socket_mut(&mut self) -> &mut Socket {
        &mut self.tcp
    }

    /// Whether a writable socket is news to this connection: it has
    /// output waiting, or is closing. Otherwise the driver need not poll
    /// it when the kernel frees send space (after every ACK).
    pub(super) fn waits_to_write(&self) -> bool {
        self.flags & CLOSING != 0 || self.output_waiting()
    }

    /// Output not sent yet: queued frames, or the tail of a TLS record.
    fn output_waiting(&self) -> bool {
        self.tcp.pending() || self.extra.as_ref().is_some_and(|e| !e.out.is_empty())
    }

    fn extra_mut(&mut self) -> &mut Extra {
        self.extra.get_or_insert_with(Default::default)
    }

    fn step(&mut self, cx: &mut Context<'_>) -> Step {
        if self.flags & FRESH != 0 {
            self.flags &= !FRESH;
            self.send_opt(proto::subscribed(&self.member))?;
            if self.extra.as_ref().is_some_and(|e| !e.partial.is_empty()) {
                self.received(&mut [])?;
            }
        }
        self.heartbeat(cx)?;
        self.read(cx)?;
        self.poll_auth(cx)?;
        self.events(cx)?;
        self.flush()
    }

    /// On each heartbeat: close when the last ping went unanswered, ping
    /// when the client said nothing since the previous heartbeat.
    fn heartbeat(&mut self, cx: &mut Context<'_>) -> Step {
        let tick = self.member.poll_beat(cx);
        if self.member.hub().is_closing() {
            return Err(Stop::Close(close::GOING_AWAY, "server shutting down"));
        }
        if !tick {
            return Ok(());
        }
        if self.flags & PINGED != 0 {
            return Err(Stop::Close(close::HEARTBEAT_TIMEOUT, "no pong"));
        }
        if self.flags & ACTIVE == 0 {
            self.send(Bytes::from_static(frame::PING))?;
            self.flags |= PINGED;
        }
        self.flags &= !ACTIVE;
        Ok(())
    }

    /// Stops listening to the hub and queues a close frame after whatever
    /// output is still waiting.
    fn start_close(&mut self, code: u16, reason: &str) {
        self.flags |= CLOSING;
        self.member.clear();
        if let Some(ex) = self.extra.as_mut() {
            ex.auth = None;
            ex.partial = Vec::new();
            ex.message = Vec::new();
            ex.message_op = 0;
            if code == close::TOO_SLOW {
                // Keep only the frame that may be half written, so the close
                // frame can follow it, and free the rest now.
                let dropped: usize = ex.out.drain(1.min(ex.out.len())..).map(|b| b.len()).sum();
                ex.out_bytes -= dropped;
                self.member.hub().release_pending(dropped);
            }
        }
        let (payload, n) = frame::close_payload(code, reason);
        let close = frame::frame(OP_CLOSE, &payload[..n], None);
        if self.extra.as_ref().is_some_and(|e| !e.out.is_empty()) {
            let _ = self.enqueue(close, true);
        } else if let Ok(w) = write_now(&mut self.tcp, &close)
            && w < close.len()
        {
            let _ = self.enqueue(close.slice(w..), true);
        }
    }

    /// After a close frame: flush, shut the write side, discard input until
    /// the peer hangs up. The next heartbeat ends the wait regardless.
    fn drain(&mut self, cx: &mut Context<'_>) -> Step {
        if self.member.poll_beat(cx) {
            return Err(Stop::Hangup);
        }
        self.flush()?;
        if self.output_waiting() {
            return Ok(());
        }
        if self.flags & SHUT == 0 {
            self.flags |= SHUT;
            self.tcp.shutdown_write();
        }
        for _ in 0..READS_PER_POLL {
            if !self.tcp.readable() {
                return Ok(());
            }
            let mut buf = [0u8; READ_CHUNK];
            match self.tcp.try_read(&mut buf) {
                Ok(0) => return Err(Stop::Hangup),
                Ok(_) => {}
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::Interrupted) => {}
                Err(_) => return Err(Stop::Hangup),
            }
        }
        cx.waker().wake_by_ref();
        Ok(())
    }

    fn tidy(&mut self) {
        if self.extra.as_ref().is_some_and(|e| e.idle()) {
            self.extra = None;
        }
    }
}

/// A WebSocket between its 101 and its driver: waits for the connection
/// (`net::idle`) to hand the stream over once hyper has sent the 101, then
/// gives it to one of the hub's drivers (`live::reactor`), over TLS with its
/// keys. Written by hand to keep this short-lived task small.
pub struct Upgrade {
    socket: oneshot::Receiver<Upgraded>,
    member: Option<Membership>,
}

pub fn handed_off(socket: oneshot::Receiver<Upgraded>, member: Membership) -> Upgrade {
    Upgrade { socket, member: Some(member) }
}

impl Future for Upgrade {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = &mut *self;
        match (ready!(Pin::new(&mut this.socket).poll(cx)), this.member.take()) {
            (Ok((Stream::Tcp(tcp), leftover)), Some(member)) => member.hub().clone().adopt(tcp, None, member, leftover),
            (Ok((Stream::Tls(tcp, records), leftover)), Some(member)) => {
                member.hub().clone().adopt(tcp, Some(records), member, leftover)
            }
            // The connection closed before the 101 went out.
            _ => {}
        }
        Poll::Ready(())
    }
}

impl Future for Conn {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let conn = &mut *self;
        let result = if conn.flags & CLOSING != 0 { conn.drain(cx) } else { conn.step(cx) };
        let result = match result {
            Err(Stop::Close(code, reason)) => {
                conn.start_close(code, reason);
                conn.drain(cx)
            }
            other => other,
        };
        match result {
            Ok(()) => {
                conn.tidy();
                Poll::Pending
            }
            Err(_) => Poll::Ready(()),
        }
    }
}

impl Drop for Conn {
    fn drop(&mut self) {
        if let Some(ex) = &self.extra {
            self.member.hub().release_pending(ex.out_bytes);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A connection lives in its driver's slab beside an 8-byte waker
    /// pointer; this keeps an idle subscriber within ~400 bytes in all
    /// (docs/LIVE.md, "Footprint").
    const CONN_BUDGET: usize = 128;

    #[tokio::test]
    async fn the_connection_is_small_and_a_failed_upgrade_frees_its_slot() {
        assert!(std::mem::size_of::<Conn>() <= CONN_BUDGET, "Conn is {} bytes", std::mem::size_of::<Conn>());
        let hub = crate::live::Hub::new(&crate::live::LiveConfig::default(), None);
        let member = Membership::join(&hub, std::net::Ipv4Addr::LOCALHOST.into()).expect("join");
        let (socket, rx) = oneshot::channel();
        let task = handed_off(rx, member);
        drop(socket);
        task.await;
        assert_eq!(hub.sockets(), 0, "a failed upgrade frees the slot");
    }
}
