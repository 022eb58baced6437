//! The hub: a map from key (topic, community, a user's inbox) to its
//! broadcast channel (`live::channel`), created on the first subscribe and
//! removed when the last subscriber leaves, plus the counters behind every
//! limit, the heartbeat clock, and score coalescing.
//!
//! Publishing clones the channel out of the map and sends outside the
//! map's lock, so waking thousands of subscribers never blocks a
//! subscribe. A receiver that lags (the channel pushed out frames it had
//! not taken) is dropped by its connection: its client missed events and
//! must reload, which it can only know if it is told, so the hub never
//! skips silently.

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::future::Future;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::{Duration, Instant};

use bytes::Bytes;

use super::beat::{BUCKETS, Clock};
use super::channel::{Channel, Receiver};

use super::LiveConfig;
use super::origin::Origins;
use super::reactor::Reactors;
use super::subs::Membership;
use crate::tls13::Records;

/// Most often a `score` event goes out for one post or topic.
pub const SCORE_EVERY: Duration = Duration::from_secs(1);

/// Where events go.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Key {
    Topic(i64),
    Community(Box<str>),
    /// Replies to a user's posts and topics.
    Inbox(i64),
}

/// Why the hub refused a socket or a subscription.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    ShuttingDown,
    TooManySockets,
    TooManyFromIp,
    TooManyChannels,
}

impl Refused {
    pub fn code(self) -> &'static str {
        match self {
            Refused::ShuttingDown => "shutting_down",
            Refused::TooManySockets | Refused::TooManyChannels => "server_busy",
            Refused::TooManyFromIp => "too_many_connections",
        }
    }

    pub fn message(self) -> &'static str {
        match self {
            Refused::ShuttingDown => "the server is shutting down",
            Refused::TooManySockets => "the server holds as many live connections as it allows",
            Refused::TooManyFromIp => "too many live connections from this address",
            Refused::TooManyChannels => "the server has as many live channels as it allows",
        }
    }
}

/// Checks a bearer token for a socket that authenticates by message;
/// resolves to the user's id. Set by the HTTP layer, which owns the store.
pub type Resolver = Box<dyn Fn(String) -> Pin<Box<dyn Future<Output = Option<i64>> + Send>> + Send + Sync>;

/// Validated runtime limits, built from `LiveConfig`.
#[derive(Debug, Clone)]
pub struct Limits {
    pub ping_interval: Duration,
    pub max_sockets: usize,
    pub max_sockets_per_ip: u32,
    pub max_subscriptions: usize,
    pub max_message: usize,
    pub max_pending: usize,
    pub max_pending_total: usize,
    /// SO_SNDBUF for live sockets; 0 leaves the kernel's autotuning.
    pub send_buffer: usize,
    pub channel_capacity: usize,
    pub max_channels: usize,
    /// Origins besides the site's own whose pages may open an inbox.
    pub allowed_origins: Origins,
}

impl Limits {
    pub fn new(cfg: &LiveConfig) -> Limits {
        Limits {
            ping_interval: cfg.ping_interval.max(Duration::from_millis(16)),
            max_sockets: cfg.max_sockets,
            max_sockets_per_ip: cfg.max_sockets_per_ip,
            max_subscriptions: cfg.max_subscriptions,
            max_message: cfg.max_message_bytes.clamp(125, 1 << 20),
            max_pending: cfg.max_pending_kb.max(1) << 10,
            max_pending_total: cfg.max_pending_total_mb.max(1) << 20,
            send_buffer: cfg.send_buffer_kb << 10,
            channel_capacity: cfg.channel_capacity.clamp(1, 1 << 16),
            max_channels: cfg.max_channels,
            allowed_origins: Origins::parse(&cfg.allowed_origins),
        }
    }
}

/// Cheap to clone: one `Arc`.
#[derive(Clone)]
pub struct Hub(Arc<Inner>);

struct Inner {
    limits: Limits,
    channels: Mutex<HashMap<Key, Arc<Channel>>>,
    /// Live connections per client address.
    per_ip: Mutex<HashMap<IpAddr, u32>>,
    sockets: AtomicUsize,
    /// Bytes queued on sockets the kernel would not take, all together.
    pending: AtomicUsize,
    clock: Clock,
    closing: AtomicBool,
    ticking: AtomicBool,
    scores: Mutex<HashMap<(bool, i64), ScoreSlot>>,
    resolver: Option<Resolver>,
    /// Where the WebSockets run, started on the first one.
    reactors: Reactors,
}

/// When an item's score last went out, and the newest total held back.
struct ScoreSlot {
    sent: Instant,
    held: Option<(i64, i64)>,
}

pub(super) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Hub {
    pub fn new(cfg: &LiveConfig, resolver: Option<Resolver>) -> Hub {
        Hub(Arc::new(Inner {
            limits: Limits::new(cfg),
            channels: Mutex::new(HashMap::new()),
            per_ip: Mutex::new(HashMap::new()),
            sockets: AtomicUsize::new(0),
            pending: AtomicUsize::new(0),
            clock: Clock::default(),
            closing: AtomicBool::new(false),
            ticking: AtomicBool::new(false),
            scores: Mutex::new(HashMap::new()),
            resolver,
            reactors: Reactors::default(),
        }))
    }

    pub fn limits(&self) -> &Limits {
        &self.0.limits
    }

    /// Counts a new live connection from `ip`, or says why not.
    pub fn join(&self, ip: IpAddr) -> Result<(), Refused> {
        if self.is_closing() {
            return Err(Refused::ShuttingDown);
        }
        let l = &self.0.limits;
        let mut per_ip = lock(&self.0.per_ip);
        if self.0.sockets.load(Ordering::Relaxed) >= l.max_sockets {
            return Err(Refused::TooManySockets);
        }
        let n = per_ip.entry(ip).or_insert(0);
        if *n >= l.max_sockets_per_ip {
            return Err(Refused::TooManyFromIp);
        }
        *n += 1;
        self.0.sockets.fetch_add(1, Ordering::Relaxed);
        drop(per_ip);
        self.start_ticking();
        Ok(())
    }

    /// Undoes one `join`.
    pub fn leave(&self, ip: IpAddr) {
        let mut per_ip = lock(&self.0.per_ip);
        if let Entry::Occupied(mut e) = per_ip.entry(ip) {
            *e.get_mut() -= 1;
            if *e.get() == 0 {
                e.remove();
            }
        }
        self.0.sockets.fetch_sub(1, Ordering::Relaxed);
    }

    /// Live connections now (WebSocket and SSE).
    pub fn sockets(&self) -> usize {
        self.0.sockets.load(Ordering::Relaxed)
    }

    /// Channels that have subscribers now.
    pub fn channels(&self) -> usize {
        lock(&self.0.channels).len()
    }

    /// Subscriptions now, over all channels (a walk of the map: for
    /// `/metrics` scrapes, not for hot paths).
    pub fn subscriptions(&self) -> usize {
        lock(&self.0.channels).values().map(|c| c.receivers()).sum()
    }

    pub fn subscribe(&self, key: Key) -> Result<Receiver, Refused> {
        let mut map = lock(&self.0.channels);
        let len = map.len();
        match map.entry(key) {
            Entry::Occupied(e) => Ok(e.get().subscribe()),
            Entry::Vacant(_) if len >= self.0.limits.max_channels => Err(Refused::TooManyChannels),
            Entry::Vacant(e) => {
                let chan = Channel::new(e.key().clone(), self.0.limits.channel_capacity);
                Ok(e.insert(Arc::new(chan)).subscribe())
            }
        }
    }

    /// Removes `key`'s channel once its last receiver is gone; call after
    /// dropping a receiver.
    pub fn release(&self, key: &Key) {
        let mut map = lock(&self.0.channels);
        if map.get(key).is_some_and(|c| c.receivers() == 0) {
            map.remove(key);
        }
    }

    /// Receivers on `key`'s channel now.
    pub fn subscribers(&self, key: &Key) -> usize {
        lock(&self.0.channels).get(key).map_or(0, |c| c.receivers())
    }

    pub fn has_subscribers(&self, key: &Key) -> bool {
        lock(&self.0.channels).get(key).is_some_and(|c| c.receivers() > 0)
    }

    /// Sends a frame built by `build` to `key`'s subscribers; `build` runs
    /// only when someone listens, once for all of them.
    pub fn publish_with(&self, key: &Key, build: impl FnOnce() -> Option<Bytes>) {
        let Some(chan) = lock(&self.0.channels).get(key).cloned() else { return };
        let Some(frame) = build() else { return };
        chan.send(frame);
    }

    /// Runs `member`'s WebSocket over `tcp` (with `tls`'s records for
    /// `wss`) from here on; `leftover` is the plaintext read past the
    /// handshake.
    pub fn adopt(&self, tcp: tokio::net::TcpStream, tls: Option<Box<Records>>, member: Membership, leftover: Bytes) {
        self.0.reactors.adopt(tcp, tls, member, leftover);
    }

    /// Books `n` bytes of queued output against the server-wide cap.
    pub fn reserve_pending(&self, n: usize) -> bool {
        let cap = self.0.limits.max_pending_total;
        self.0.pending.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |p| (p + n <= cap).then_some(p + n)).is_ok()
    }

    /// Books `n` bytes whatever the cap (a final close frame).
    pub fn add_pending(&self, n: usize) {
        self.0.pending.fetch_add(n, Ordering::Relaxed);
    }

    pub fn release_pending(&self, n: usize) {
        self.0.pending.fetch_sub(n, Ordering::Relaxed);
    }

    /// Bytes queued on slow sockets now.
    pub fn pending(&self) -> usize {
        self.0.pending.load(Ordering::Relaxed)
    }

    /// The heartbeat clock connections wait on.
    pub fn clock(&self) -> &Clock {
        &self.0.clock
    }

    pub fn is_closing(&self) -> bool {
        self.0.closing.load(Ordering::Relaxed)
    }

    /// Wakes every connection to close (1001 for WebSockets; SSE streams
    /// end) and refuses new ones.
    pub fn shutdown(&self) {
        self.0.closing.store(true, Ordering::Relaxed);
        self.0.clock.tick_all();
    }

    /// A future resolving a bearer token to a user id, when this hub can.
    pub fn resolve(&self, token: String) -> Option<Pin<Box<dyn Future<Output = Option<i64>> + Send>>> {
        self.0.resolver.as_ref().map(|r| r(token))
    }

    /// Publishes a score now, or holds it so that an item gets at most one
    /// `score` event per `SCORE_EVERY`; the ticker sends the last one held.
    pub fn score(&self, is_post: bool, id: i64, topic_id: i64, score: i64) {
        if !self.has_subscribers(&Key::Topic(topic_id)) {
            return;
        }
        let now = Instant::now();
        let send_now = match lock(&self.0.scores).entry((is_post, id)) {
            Entry::Vacant(e) => {
                e.insert(ScoreSlot { sent: now, held: None });
                true
            }
            Entry::Occupied(mut e) if now.duration_since(e.get().sent) >= SCORE_EVERY => {
                *e.get_mut() = ScoreSlot { sent: now, held: None };
                true
            }
            Entry::Occupied(mut e) => {
                e.get_mut().held = Some((topic_id, score));
                false
            }
        };
        if send_now {
            super::events::publish_score(self, is_post, id, topic_id, score);
        }
        self.start_ticking();
    }

    /// Sends held scores that are due and forgets idle items.
    fn flush_scores(&self) {
        let now = Instant::now();
        let mut due = Vec::new();
        lock(&self.0.scores).retain(|&(is_post, id), slot| {
            let age = now.duration_since(slot.sent);
            if age >= SCORE_EVERY
                && let Some((topic_id, score)) = slot.held.take()
            {
                due.push((is_post, id, topic_id, score));
                slot.sent = now;
                return true;
            }
            slot.held.is_some() || age < SCORE_EVERY * 2
        });
        for (is_post, id, topic_id, score) in due {
            super::events::publish_score(self, is_post, id, topic_id, score);
        }
    }

    /// Starts the one background task (heartbeats, held scores) on first
    /// use, inside the runtime that serves. It stops when the hub is dropped.
    fn start_ticking(&self) {
        if self.0.ticking.swap(true, Ordering::Relaxed) {
            return;
        }
        let weak = Arc::downgrade(&self.0);
        let Ok(rt) = tokio::runtime::Handle::try_current() else {
            self.0.ticking.store(false, Ordering::Relaxed);
            return;
        };
        rt.spawn(tick(weak, self.0.limits.ping_interval));
    }
}

async fn tick(hub: Weak<Inner>, ping_interval: Duration) {
    let wave = ping_interval / BUCKETS as u32;
    let step = wave.min(Duration::from_millis(250));
    let mut clock = tokio::time::interval(step);
    clock.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut next_wave = Instant::now() + wave;
    let mut bucket = 0;
    loop {
        clock.tick().await;
        let Some(inner) = hub.upgrade() else { return };
        let hub = Hub(inner);
        hub.flush_scores();
        let now = Instant::now();
        while now >= next_wave {
            hub.0.clock.tick(bucket);
            bucket = (bucket + 1) % BUCKETS;
            next_wave += wave;
        }
        drop(hub);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn recv(rx: &mut Receiver) -> Result<Bytes, crate::live::channel::Lagged> {
        std::future::poll_fn(|cx| rx.poll_recv(cx)).await
    }

    fn hub(f: impl FnOnce(&mut LiveConfig)) -> Hub {
        let mut cfg = LiveConfig::default();
        f(&mut cfg);
        Hub::new(&cfg, None)
    }

    #[test]
    fn a_channel_exists_only_while_it_has_subscribers() {
        let hub = hub(|_| {});
        let rx = hub.subscribe(Key::Topic(1)).expect("subscribe");
        assert!(hub.has_subscribers(&Key::Topic(1)));
        drop(rx);
        hub.release(&Key::Topic(1));
        assert_eq!(hub.channels(), 0);
    }

    #[test]
    fn per_ip_and_total_socket_limits_hold() {
        let hub = hub(|c| {
            c.max_sockets = 3;
            c.max_sockets_per_ip = 2;
        });
        let (a, b): (IpAddr, IpAddr) = ("10.0.0.1".parse().expect("ip"), "10.0.0.2".parse().expect("ip"));
        assert_eq!(hub.join(a), Ok(()));
        assert_eq!(hub.join(a), Ok(()));
        assert_eq!(hub.join(a), Err(Refused::TooManyFromIp));
        assert_eq!(hub.join(b), Ok(()));
        assert_eq!(hub.join(b), Err(Refused::TooManySockets));
        hub.leave(a);
        assert_eq!(hub.join(b), Ok(()));
    }

    #[test]
    fn the_channel_limit_refuses_new_channels_but_not_existing_ones() {
        let hub = hub(|c| c.max_channels = 1);
        let _a = hub.subscribe(Key::Topic(1)).expect("first");
        assert!(hub.subscribe(Key::Topic(1)).is_ok());
        assert_eq!(hub.subscribe(Key::Topic(2)).err(), Some(Refused::TooManyChannels));
    }

    #[test]
    fn pending_bytes_are_capped_server_wide() {
        let hub = hub(|c| c.max_pending_total_mb = 1);
        assert!(hub.reserve_pending(1 << 20));
        assert!(!hub.reserve_pending(1));
        hub.release_pending(1 << 20);
        assert!(hub.reserve_pending(1));
    }

    #[tokio::test]
    async fn a_burst_of_votes_sends_one_score_now_and_the_last_after_a_second() {
        let hub = hub(|_| {});
        let mut rx = hub.subscribe(Key::Topic(7)).expect("subscribe");
        for s in 1..=5 {
            hub.score(true, 70, 7, s);
        }
        let first = recv(&mut rx).await.expect("first");
        let text = |f: &Bytes| String::from_utf8_lossy(&super::super::events::payload(f)).into_owned();
        assert!(text(&first).contains("\"score\":1"), "{}", text(&first));
        let noop = &mut std::task::Context::from_waker(std::task::Waker::noop());
        assert!(rx.poll_recv(noop).is_pending(), "the rest are held");
        let last = tokio::time::timeout(Duration::from_secs(3), recv(&mut rx)).await.expect("flushed").expect("event");
        assert!(text(&last).contains("\"score\":5"), "{}", text(&last));
    }
}
