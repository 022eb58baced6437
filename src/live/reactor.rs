//! Where WebSocket connections run: a few driver tasks, each owning an
//! epoll set (mio) and a slab of connections, instead of one tokio task and
//! one tokio I/O registration per socket.
//!
//! Why by hand: on x86_64 and aarch64 tokio aligns each task and each I/O
//! registration to 128 bytes (to keep them on cache lines of their own), so
//! an idle subscriber cost two 256-byte aligned blocks plus what glibc's
//! `memalign` wastes around them: ~870 bytes of the ~870 measured. Here a
//! socket is an entry in its driver's slab (the connection itself), a
//! 48-byte waker and what its subscription holds; its readiness comes from
//! the driver's epoll set, and a wake from a channel, the heartbeat clock
//! or a token check puts its slot on the driver's run queue. No library
//! runs many futures off one epoll set without a task each (tokio, smol
//! and glommio all spawn a task per connection). docs/LIVE.md, "Footprint".
//!
//! Each driver is one ordinary tokio task, so the connections still run on
//! the server's workers, inside its runtime, between HTTP requests: a
//! driver polls at most `BUDGET` connections a turn and then yields. Its
//! epoll set is watched by tokio's own reactor (`AsyncFd` on the epoll fd).

use std::cell::Cell;
use std::io::{self, ErrorKind, IoSlice, Read, Write};
use std::net::Shutdown;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;

use bytes::Bytes;
use futures_util::task::AtomicWaker;
use mio::{Events, Interest, Token};
use slab::Slab;
use tokio::io::unix::AsyncFd;

use super::conn::Conn;
use super::hub::lock;
use super::subs::Membership;
use crate::tls13::Records;

/// Connections polled per turn of a driver before it yields to the
/// runtime's other tasks (HTTP requests share these workers).
const BUDGET: usize = 512;
/// epoll events taken per `epoll_wait`.
const EVENTS: usize = 1024;

const READABLE: u8 = 1;
const WRITABLE: u8 = 2;

/// A connection's socket, with the readiness its driver's epoll set last
/// reported, and over `wss` its TLS records (`crate::tls13`).
/// Edge-triggered: a flag is set by an event and cleared only by a read or
/// write that would block, so nothing is missed between them.
pub struct Socket {
    tcp: mio::net::TcpStream,
    ready: Cell<u8>,
    tls: Option<Box<Records>>,
}

fn would_block(ready: &Cell<u8>, flag: u8, r: io::Result<usize>) -> io::Result<usize> {
    if r.as_ref().is_err_and(|e| e.kind() == ErrorKind::WouldBlock) {
        ready.set(ready.get() & !flag);
    }
    r
}

impl Socket {
    fn new(tcp: mio::net::TcpStream, tls: Option<Box<Records>>) -> Socket {
        Socket { tcp, ready: Cell::new(READABLE | WRITABLE), tls }
    }

    pub fn readable(&self) -> bool {
        self.ready.get() & READABLE != 0
    }

    pub fn writable(&self) -> bool {
        self.ready.get() & WRITABLE != 0
    }

    /// Reads plaintext: the socket's bytes, or over TLS what its records hold.
    pub fn try_read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let Socket { tcp, ready, tls } = self;
        let mut recv = |b: &mut [u8]| would_block(ready, READABLE, (&*tcp).read(b));
        match tls {
            None => recv(buf),
            Some(records) => records.read(buf, &mut recv),
        }
    }

    pub fn try_write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.try_write_vectored(&[IoSlice::new(buf)])
    }

    /// Writes plaintext; over TLS, sealed into one record (see
    /// `Records::write` for what counts as written).
    pub fn try_write_vectored(&mut self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
        let Socket { tcp, ready, tls } = self;
        match tls {
            None => would_block(ready, WRITABLE, (&*tcp).write_vectored(bufs)),
            Some(records) => records.write(bufs, &mut |b: &[u8]| would_block(ready, WRITABLE, (&*tcp).write(b))),
        }
    }

    /// Sends the rest of a TLS record the kernel took part of; true when
    /// nothing is left (always, in cleartext).
    pub fn flush(&mut self) -> io::Result<bool> {
        let Socket { tcp, ready, tls } = self;
        match tls {
            None => Ok(true),
            Some(records) => records.flush(&mut |b: &[u8]| would_block(ready, WRITABLE, (&*tcp).write(b))),
        }
    }

    /// Bytes the socket itself still holds to send (a TLS record's tail).
    pub fn pending(&self) -> bool {
        self.tls.as_ref().is_some_and(|r| r.pending())
    }

    /// Ends the write side, after a TLS `close_notify`.
    pub fn shutdown_write(&mut self) {
        let Socket { tcp, ready, tls } = self;
        if let Some(records) = tls {
            records.close_notify(&mut |b: &[u8]| would_block(ready, WRITABLE, (&*tcp).write(b)));
        }
        let _ = tcp.shutdown(Shutdown::Write);
    }

    pub fn sock_ref(&self) -> socket2::SockRef<'_> {
        socket2::SockRef::from(&self.tcp)
    }
}

/// What a driver is handed: a socket fresh from its 101 and its hub slot.
struct New {
    tcp: std::net::TcpStream,
    tls: Option<Box<Records>>,
    member: Membership,
    leftover: Bytes,
}

/// The part of a driver other threads reach: new connections, and the
/// slots woken since its last turn.
struct Shared {
    new: Mutex<Vec<New>>,
    woken: Mutex<Vec<u32>>,
    waker: AtomicWaker,
    /// The hub is gone: the driver ends once its connections have.
    closed: AtomicBool,
}

/// The waker of one slot: puts the slot on its driver's run queue once
/// until the driver polls it. One small block per connection, reused for
/// every wake (a clone is a reference count).
struct SlotWaker {
    shared: Arc<Shared>,
    slot: u32,
    queued: AtomicBool,
}

impl Wake for SlotWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        if !self.queued.swap(true, Ordering::AcqRel) {
            lock(&self.shared.woken).push(self.slot);
            self.shared.waker.wake();
        }
    }
}

struct Slot {
    conn: Conn,
    waker: Arc<SlotWaker>,
}

/// The hub's drivers, started on the first WebSocket.
#[derive(Default)]
pub struct Reactors {
    drivers: OnceLock<Box<[Arc<Shared>]>>,
    next: AtomicUsize,
}

impl Reactors {
    /// Runs `member`'s connection over `tcp` (and `tls`, for `wss`) on one
    /// of the drivers, taken in turn; `leftover` is the plaintext read past
    /// the handshake. Must be called inside the runtime that serves.
    pub fn adopt(&self, tcp: tokio::net::TcpStream, tls: Option<Box<Records>>, member: Membership, leftover: Bytes) {
        let tcp = match tcp.into_std() {
            Ok(tcp) => tcp,
            Err(e) => return tracing::warn!("live: could not take a WebSocket's socket from tokio: {e}"),
        };
        let drivers = self.drivers.get_or_init(start);
        if drivers.is_empty() {
            return tracing::warn!("live: no driver for WebSockets");
        }
        let shared = &drivers[self.next.fetch_add(1, Ordering::Relaxed) % drivers.len()];
        lock(&shared.new).push(New { tcp, tls, member, leftover });
        shared.waker.wake();
    }
}

impl Drop for Reactors {
    fn drop(&mut self) {
        for shared in self.drivers.get().into_iter().flatten() {
            shared.closed.store(true, Ordering::Release);
            shared.waker.wake();
        }
    }
}

/// One driver per core, up to four: fan-out to many sockets is mostly
/// the kernel's work on the writing thread, which this spreads.
fn start() -> Box<[Arc<Shared>]> {
    let n = std::thread::available_parallelism().map_or(1, |n| n.get()).clamp(1, 4);
    let Ok(rt) = tokio::runtime::Handle::try_current() else { return Box::new([]) };
    let mut drivers = Vec::with_capacity(n);
    for _ in 0..n {
        match Driver::new() {
            Ok(driver) => {
                drivers.push(driver.shared.clone());
                rt.spawn(driver);
            }
            Err(e) => tracing::warn!("live: could not start a WebSocket driver: {e}"),
        }
    }
    drivers.into_boxed_slice()
}

struct Driver {
    shared: Arc<Shared>,
    /// The driver's epoll set, itself watched by tokio's reactor.
    poll: AsyncFd<mio::Poll>,
    events: Events,
    slots: Slab<Slot>,
    /// Slots to poll, left over from a turn that ran out of budget.
    run: Vec<u32>,
}

impl Driver {
    fn new() -> io::Result<Driver> {
        // SAFETY: the `AsyncFd` owns the `Poll`, so the descriptor stays
        // open and the same for as long as it is registered.
        let poll = unsafe { AsyncFd::register_with_interest(mio::Poll::new()?, tokio::io::Interest::READABLE) }
            .map_err(io::Error::from)?;
        let shared = Arc::new(Shared {
            new: Mutex::new(Vec::new()),
            woken: Mutex::new(Vec::new()),
            waker: AtomicWaker::new(),
            closed: AtomicBool::new(false),
        });
        Ok(Driver { shared, poll, events: Events::with_capacity(EVENTS), slots: Slab::new(), run: Vec::new() })
    }

    fn adopt(&mut self, new: New) {
        let New { tcp, tls, member, leftover } = new;
        let mut tcp = mio::net::TcpStream::from_std(tcp);
        let entry = self.slots.vacant_entry();
        let slot = entry.key();
        if let Err(e) =
            self.poll.get_ref().registry().register(&mut tcp, Token(slot), Interest::READABLE | Interest::WRITABLE)
        {
            return tracing::warn!("live: could not watch a WebSocket: {e}");
        }
        let waker =
            Arc::new(SlotWaker { shared: self.shared.clone(), slot: slot as u32, queued: AtomicBool::new(true) });
        entry.insert(Slot { conn: Conn::new(Socket::new(tcp, tls), member, &leftover), waker });
        self.run.push(slot as u32);
    }

    /// Takes the events `poll` holds into the slots' readiness and the run
    /// list; false when it held none.
    fn take_events(poll: &mut mio::Poll, events: &mut Events, slots: &Slab<Slot>, run: &mut Vec<u32>) -> bool {
        if let Err(e) = poll.poll(events, Some(Duration::ZERO))
            && e.kind() != ErrorKind::Interrupted
        {
            tracing::warn!("live: epoll_wait failed: {e}");
        }
        let mut any = false;
        for ev in events.iter() {
            any = true;
            let Some(slot) = slots.get(ev.token().0) else { continue };
            let mut flags = 0;
            if ev.is_readable() || ev.is_read_closed() || ev.is_error() {
                flags |= READABLE;
            }
            if ev.is_writable() || ev.is_write_closed() || ev.is_error() {
                flags |= WRITABLE;
            }
            let ready = &slot.conn.socket().ready;
            ready.set(ready.get() | flags);
            // Send space comes back after every ACK: news only to a
            // connection with output waiting (a fan-out would otherwise
            // poll every socket twice).
            let news = flags & READABLE != 0 || slot.conn.waits_to_write();
            if news && !slot.waker.queued.swap(true, Ordering::AcqRel) {
                run.push(ev.token().0 as u32);
            }
        }
        any
    }

    fn turn(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        self.shared.waker.register(cx.waker());
        let new = std::mem::take(&mut *lock(&self.shared.new));
        new.into_iter().for_each(|n| self.adopt(n));
        loop {
            match self.poll.poll_read_ready_mut(cx) {
                Poll::Pending => break,
                Poll::Ready(Err(e)) => {
                    tracing::warn!("live: the WebSocket driver lost its epoll set: {e}");
                    break;
                }
                Poll::Ready(Ok(mut ready)) => {
                    if !Driver::take_events(ready.get_inner_mut(), &mut self.events, &self.slots, &mut self.run) {
                        ready.clear_ready();
                    }
                    if self.run.len() >= BUDGET {
                        break;
                    }
                }
            }
        }
        self.run.append(&mut lock(&self.shared.woken));
        let take = self.run.len().min(BUDGET);
        let mut run = std::mem::take(&mut self.run);
        for &slot in &run[..take] {
            self.poll_slot(slot as usize);
        }
        run.drain(..take);
        self.run = run;
        if !self.run.is_empty() {
            cx.waker().wake_by_ref();
        } else if self.shared.closed.load(Ordering::Acquire) && self.slots.is_empty() {
            return Poll::Ready(());
        }
        Poll::Pending
    }

    fn poll_slot(&mut self, slot: usize) {
        let Some(s) = self.slots.get_mut(slot) else { return };
        s.waker.queued.store(false, Ordering::Release);
        let waker = Waker::from(s.waker.clone());
        let done = Pin::new(&mut s.conn).poll(&mut Context::from_waker(&waker)).is_ready();
        if done {
            let mut s = self.slots.remove(slot);
            let _ = self.poll.get_ref().registry().deregister(&mut s.conn.socket_mut().tcp);
            // A wake still held by a channel or the clock finds the slot
            // empty, or polls its next tenant once for nothing.
            s.waker.queued.store(true, Ordering::Release);
        }
    }
}

impl Future for Driver {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        self.get_mut().turn(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wake_queues_a_slot_once_until_it_is_polled() {
        let shared = Arc::new(Shared {
            new: Mutex::new(Vec::new()),
            woken: Mutex::new(Vec::new()),
            waker: AtomicWaker::new(),
            closed: AtomicBool::new(false),
        });
        let w = Arc::new(SlotWaker { shared: shared.clone(), slot: 7, queued: AtomicBool::new(false) });
        let waker = Waker::from(w.clone());
        waker.wake_by_ref();
        waker.wake_by_ref();
        Waker::from(w.clone()).wake();
        assert_eq!(*lock(&shared.woken), vec![7]);
        w.queued.store(false, Ordering::Release);
        waker.wake_by_ref();
        assert_eq!(*lock(&shared.woken), vec![7, 7]);
    }
}
