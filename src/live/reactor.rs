//! Where WebSocket connections run: a few driver tasks, each owning an
//! epoll set (mio) and a slab of connections, instead of one tokio task and
//! one tokio I/O registration per socket.
//!
//! Why by hand: on x86_64 and aarch64 tokio aligns each task and each I/O
//! registration to 128 bytes (to keep them on cache lines of their own), so
//! an idle subscriber cost two 256-byte aligned blocks plus what glibc's
//! `memalign` wastes around them: ~870 bytes of the ~870 measured. Here a
//! socket is an entry in its driver's slab (the connection itself), an
//! 8-byte waker entry in one of its driver's pages (`Page`) and what its
//! subscription holds; its readiness comes from the driver's epoll set,
//! and a wake from a channel, the heartbeat clock or a token check puts its
//! slot on the driver's run queue. No library
//! runs many futures off one epoll set without a task each (tokio, smol
//! and glommio all spawn a task per connection). docs/LIVE.md, "Footprint".
//!
//! Each driver is one ordinary tokio task, so the connections still run on
//! the server's workers, inside its runtime, between HTTP requests: a
//! driver polls at most `BUDGET` connections a turn and then yields. Its
//! epoll set is watched by tokio's own reactor (`AsyncFd` on the epoll fd).

use std::cell::Cell;
use std::io::{self, ErrorKind, IoSlice, Read, Write};
use std::mem::{ManuallyDrop, offset_of};
use std::net::Shutdown;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::task::{Context, Poll, RawWaker, RawWakerVTable, Waker};
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

/// Slots per page of wakers.
const PAGE: usize = 256;

/// The wakers of `PAGE` slots in a row, in one block shared by reference
/// count: the driver holds every page it made, and each waker a channel or
/// the clock keeps holds its page, so a late wake never reaches freed memory.
///
/// Why not an `Arc` per connection (as `std::task::Wake` would have it):
/// each of those small blocks, allocated as its socket arrived among the
/// blocks its upgrade had just freed, kept glibc from merging that space
/// and giving it back: ~300 bytes per idle socket (docs/PERFORMANCE.md,
/// "the wakers in pages"). A page is allocated once per `PAGE` sockets.
struct Page {
    shared: Arc<Shared>,
    entries: [Entry; PAGE],
}

/// One slot's waker: puts the slot on its driver's run queue once until
/// the driver polls it. A `Waker`'s data pointer points here; its page is
/// found from the slot number.
struct Entry {
    slot: u32,
    queued: AtomicBool,
}

impl Page {
    fn new(shared: &Arc<Shared>, first: usize) -> Arc<Page> {
        Arc::new(Page {
            shared: shared.clone(),
            entries: std::array::from_fn(|i| Entry { slot: (first + i) as u32, queued: AtomicBool::new(true) }),
        })
    }
}

/// The page holding `entry`.
///
/// # Safety
/// `entry` points into the `entries` of a live `Page` held by an `Arc`,
/// through a pointer derived from that page's.
unsafe fn page_of(entry: *const Entry) -> *const Page {
    // SAFETY: per the caller, `entry` is `entries[slot % PAGE]` of a page,
    // so stepping back by its offset stays inside that one allocation.
    unsafe {
        let index = (*entry).slot as usize % PAGE;
        entry.cast::<u8>().sub(offset_of!(Page, entries) + index * size_of::<Entry>()).cast::<Page>()
    }
}

static VTABLE: RawWakerVTable = RawWakerVTable::new(clone_waker, wake, wake_by_ref, drop_waker);

// For the four functions below: `p` is a waker's data pointer, which only
// `waker_for` makes, pointing at an entry of a page kept alive by the
// driver or by the waker's own count.

unsafe fn clone_waker(p: *const ()) -> RawWaker {
    // SAFETY: see above; the new waker owns the count added here.
    unsafe { Arc::increment_strong_count(page_of(p.cast())) };
    RawWaker::new(p, &VTABLE)
}

unsafe fn wake(p: *const ()) {
    // SAFETY: see above; this consumes the waker and its count.
    unsafe {
        wake_by_ref(p);
        drop_waker(p);
    }
}

unsafe fn wake_by_ref(p: *const ()) {
    // SAFETY: see above.
    let (entry, page) = unsafe { (&*p.cast::<Entry>(), &*page_of(p.cast())) };
    if !entry.queued.swap(true, Ordering::AcqRel) {
        lock(&page.shared.woken).push(entry.slot);
        page.shared.waker.wake();
    }
}

unsafe fn drop_waker(p: *const ()) {
    // SAFETY: see above; the count released is this waker's own.
    unsafe { Arc::decrement_strong_count(page_of(p.cast())) };
}

/// The waker of `slot`, borrowing the driver's count on its page: a clone
/// (a channel keeping it) takes a count of its own.
fn waker_for(pages: &[Arc<Page>], slot: usize) -> ManuallyDrop<Waker> {
    // From the `Arc`'s own pointer, not through a reference to the entry,
    // so that `page_of` may step back to the start of the page.
    let page = Arc::as_ptr(&pages[slot / PAGE]);
    // SAFETY: `page` is live (the driver holds it) and `slot % PAGE` is in bounds.
    let entry = unsafe { (&raw const (*page).entries).cast::<Entry>().add(slot % PAGE) };
    // SAFETY: the vtable's contract holds: `entry` is inside a page the
    // driver holds, derived from the `Arc`'s pointer, and ManuallyDrop
    // keeps this borrowed waker from releasing a count it does not own.
    ManuallyDrop::new(unsafe { Waker::from_raw(RawWaker::new(entry.cast(), &VTABLE)) })
}

fn waker_entry(pages: &[Arc<Page>], slot: usize) -> &Entry {
    &pages[slot / PAGE].entries[slot % PAGE]
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
    slots: Slab<Conn>,
    /// The slots' wakers, `PAGE` to a page, made as the slab grows.
    pages: Vec<Arc<Page>>,
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
        Ok(Driver {
            shared,
            poll,
            events: Events::with_capacity(EVENTS),
            slots: Slab::new(),
            pages: Vec::new(),
            run: Vec::new(),
        })
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
        while self.pages.len() * PAGE <= slot {
            self.pages.push(Page::new(&self.shared, self.pages.len() * PAGE));
        }
        // A wake still held for the slot's last tenant finds it queued.
        waker_entry(&self.pages, slot).queued.store(true, Ordering::Release);
        entry.insert(Conn::new(Socket::new(tcp, tls), member, &leftover));
        self.run.push(slot as u32);
    }

    /// Takes the events `poll` holds into the slots' readiness and the run
    /// list; false when it held none.
    fn take_events(
        poll: &mut mio::Poll,
        events: &mut Events,
        slots: &Slab<Conn>,
        pages: &[Arc<Page>],
        run: &mut Vec<u32>,
    ) -> bool {
        if let Err(e) = poll.poll(events, Some(Duration::ZERO))
            && e.kind() != ErrorKind::Interrupted
        {
            tracing::warn!("live: epoll_wait failed: {e}");
        }
        let mut any = false;
        for ev in events.iter() {
            any = true;
            let Some(conn) = slots.get(ev.token().0) else { continue };
            let mut flags = 0;
            if ev.is_readable() || ev.is_read_closed() || ev.is_error() {
                flags |= READABLE;
            }
            if ev.is_writable() || ev.is_write_closed() || ev.is_error() {
                flags |= WRITABLE;
            }
            let ready = &conn.socket().ready;
            ready.set(ready.get() | flags);
            // Send space comes back after every ACK: news only to a
            // connection with output waiting (a fan-out would otherwise
            // poll every socket twice).
            let news = flags & READABLE != 0 || conn.waits_to_write();
            if news && !waker_entry(pages, ev.token().0).queued.swap(true, Ordering::AcqRel) {
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
                    if !Driver::take_events(
                        ready.get_inner_mut(),
                        &mut self.events,
                        &self.slots,
                        &self.pages,
                        &mut self.run,
                    ) {
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
        let Some(conn) = self.slots.get_mut(slot) else { return };
        waker_entry(&self.pages, slot).queued.store(false, Ordering::Release);
        let waker = waker_for(&self.pages, slot);
        let done = Pin::new(&mut *conn).poll(&mut Context::from_waker(&waker)).is_ready();
        if done {
            let mut conn = self.slots.remove(slot);
            let _ = self.poll.get_ref().registry().deregister(&mut conn.socket_mut().tcp);
            // A wake still held by a channel or the clock finds the slot
            // empty, or polls its next tenant once for nothing.
            waker_entry(&self.pages, slot).queued.store(true, Ordering::Release);
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

    fn shared() -> Arc<Shared> {
        Arc::new(Shared {
            new: Mutex::new(Vec::new()),
            woken: Mutex::new(Vec::new()),
            waker: AtomicWaker::new(),
            closed: AtomicBool::new(false),
        })
    }

    #[test]
    fn a_wake_queues_a_slot_once_until_it_is_polled() {
        let shared = shared();
        let pages = vec![Page::new(&shared, 0), Page::new(&shared, PAGE)];
        let slot = PAGE + 7;
        waker_entry(&pages, slot).queued.store(false, Ordering::Release);
        let waker = waker_for(&pages, slot);
        waker.wake_by_ref();
        waker.wake_by_ref();
        // The owned path: a clone's count, given back by `wake`.
        #[allow(clippy::waker_clone_wake)]
        (*waker).clone().wake();
        assert_eq!(*lock(&shared.woken), vec![slot as u32]);
        waker_entry(&pages, slot).queued.store(false, Ordering::Release);
        waker.wake_by_ref();
        assert_eq!(*lock(&shared.woken), vec![slot as u32, slot as u32]);
        assert_eq!(Arc::strong_count(&pages[1]), 1, "the clone gave its count back");
    }

    #[test]
    fn a_kept_waker_keeps_its_page_after_the_driver_lets_go() {
        let shared = shared();
        let pages = vec![Page::new(&shared, 0)];
        let kept = (*waker_for(&pages, 3)).clone();
        assert_eq!(Arc::strong_count(&pages[0]), 2);
        waker_entry(&pages, 3).queued.store(false, Ordering::Release);
        let weak = Arc::downgrade(&pages[0]);
        drop(pages);
        assert!(weak.upgrade().is_some(), "the page lives while a waker holds it");
        kept.wake();
        assert_eq!(*lock(&shared.woken), vec![3]);
        assert!(weak.upgrade().is_none(), "the last waker frees its page");
    }
}
