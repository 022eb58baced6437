//! The cluster bus: several `pith serve` nodes on one PostgreSQL tell each
//! other about every committed write, so each drops the cached renderings
//! of a changed topic and hands the live event to its own subscribers.
//!
//! - `wire`: the messages and their JSON encoding.
//! - `postgres`: the default transport, LISTEN/NOTIFY on a dedicated
//!   connection (big events spill into a table; see there).
//! - `nats`: the optional transport, a NATS subject.
//! - `settings`: `--bus` and `--node-id`.
//!
//! The hooks sit in `TopicCache::invalidate` and `Hub::publish_with`, so
//! every handler that evicts or publishes after a write is covered without
//! knowing about the bus. What arrives from other nodes is applied with the
//! local-only paths (`invalidate_local`, `publish_local`, `clear`), which
//! never forward: nothing echoes or loops. A node also ignores its own
//! messages, by node id, since both transports deliver them back.
//!
//! When a transport reconnects, invalidations may have been missed both
//! ways, so the node drops its whole cache and asks every other node to do
//! the same (`Msg::Flush`). docs/SCALING.md describes what a client may see.

pub mod nats;
pub mod postgres;
pub mod settings;
pub mod wire;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use bytes::Bytes;
use tokio::sync::mpsc;

use crate::http::{App, AppState};
use crate::live::Key;
use crate::store::Store;

pub use settings::{Bus, ClusterConfig};
pub use wire::{Envelope, Msg};

/// Messages queued for the transport before new ones are dropped (and a
/// flush of every node's cache is sent instead, once it drains).
const QUEUE: usize = 65_536;

/// The sending end the cache and the hub hold.
pub struct Sink {
    tx: mpsc::Sender<Msg>,
    /// Set when a message could not be queued: other nodes may then hold
    /// stale entries, so the transport sends a `Flush` next.
    overflowed: AtomicBool,
    /// True while the transport is connected and listening.
    connected: AtomicBool,
}

impl Sink {
    pub fn invalidate(&self, topic: i64) {
        self.send(Msg::Invalidate { topic });
    }

    /// An event frame published on this node, for other nodes' subscribers.
    pub fn event(&self, key: &Key, frame: &Bytes) {
        let payload = crate::live::events::payload(frame);
        // Events are serialised by serde_json, so always UTF-8.
        let Ok(payload) = String::from_utf8(payload.to_vec()) else { return };
        self.send(Msg::Event { key: key.into(), payload });
    }

    fn send(&self, msg: Msg) {
        if self.tx.try_send(msg).is_err() {
            self.overflowed.store(true, Ordering::Relaxed);
        }
    }

    /// True while the transport is connected and hears other nodes.
    pub fn connected(&self) -> bool {
        self.connected.load(Ordering::Relaxed)
    }

    pub(crate) fn set_connected(&self, up: bool) {
        self.connected.store(up, Ordering::Relaxed);
    }

    /// True once after messages were lost since the last call.
    pub fn take_overflow(&self) -> bool {
        self.overflowed.swap(false, Ordering::Relaxed)
    }
}

/// What a transport calls with each message from another node.
pub type Apply = Arc<dyn Fn(Msg) + Send + Sync>;

/// Applies a message from another node with the local-only paths.
pub fn apply_to<S: Store>(app: &App<S>, msg: Msg) {
    match msg {
        Msg::Invalidate { topic } => app.cache.invalidate_local(topic),
        Msg::Event { key, payload } => {
            let frame = crate::live::frame::frame(crate::live::frame::OP_TEXT, payload.as_bytes(), None);
            app.live.publish_local(&key.into(), frame);
        }
        Msg::Flush => app.cache.clear(),
        // Resolved by the PostgreSQL transport before it gets here.
        Msg::Spilled { .. } => {}
    }
}

/// Connects `state` to the other nodes through `bus`: from now on its
/// invalidations and events go out, and theirs come in. Returns at once;
/// the transport connects (and reconnects) in the background; the sink
/// returned tells whether it is connected (`None`: no bus).
pub fn attach<S: Store>(state: &AppState<S>, bus: &Bus, node: &str) -> Option<Arc<Sink>> {
    let (tx, rx) = mpsc::channel(QUEUE);
    let sink = Arc::new(Sink { tx, overflowed: AtomicBool::new(false), connected: AtomicBool::new(false) });
    let weak = Arc::downgrade(&state.0);
    let apply: Apply = Arc::new(move |msg| {
        if let Some(app) = weak.upgrade() {
            apply_to(&app, msg);
        }
    });
    match bus {
        Bus::None => return None,
        Bus::Postgres(url) => {
            tokio::spawn(postgres::run(url.clone(), node.to_owned(), rx, sink.clone(), apply));
        }
        Bus::Nats(url) => {
            tokio::spawn(nats::run(url.clone(), node.to_owned(), rx, sink.clone(), apply));
        }
    }
    state.cache.set_bus(sink.clone());
    state.live.set_bus(sink.clone());
    Some(sink)
}

/// `pith serve`'s part: resolves and logs the settings, then attaches.
pub fn start<S: Store>(state: &AppState<S>, cfg: &ClusterConfig, database: Option<&str>) -> anyhow::Result<()> {
    let bus = Bus::resolve(&cfg.bus, database).map_err(anyhow::Error::msg)?;
    let node = if cfg.node_id.trim().is_empty() { new_node_id() } else { cfg.node_id.trim().to_owned() };
    tracing::info!(bus = %bus.describe(), node_id = %node, "cluster");
    if matches!(bus, Bus::Nats(_)) && !database.is_some_and(settings::is_postgres_url) {
        tracing::warn!(
            "a bus with SQLite: each node has its own database, so the bus only carries live events and evictions"
        );
    }
    attach(state, &bus, &node);
    Ok(())
}

/// A fresh node id: random, so restarted nodes never share one.
pub fn new_node_id() -> String {
    format!("{:016x}", rand::random::<u64>())
}

/// Doubling reconnect delay, 100 ms up to 10 s.
pub(crate) struct Backoff(std::time::Duration);

impl Backoff {
    pub(crate) fn new() -> Backoff {
        Backoff(std::time::Duration::from_millis(100))
    }

    pub(crate) fn reset(&mut self) {
        *self = Backoff::new();
    }

    pub(crate) async fn wait(&mut self) {
        tokio::time::sleep(self.0).await;
        self.0 = (self.0 * 2).min(std::time::Duration::from_secs(10));
    }
}
