//! The cluster bus: several `pith serve` nodes on one PostgreSQL tell each
//! other about every committed write. What travels is the write's `Change`
//! (one message per write); a node that receives one hands it to the
//! callback it was attached with (`app::bus`), which applies it through the
//! same path as its own writes, without sending it on. This module knows
//! nothing of the cache or the live hub.
//!
//! - `wire`: the messages and their JSON encoding.
//! - `postgres`: the default transport, LISTEN/NOTIFY on a dedicated
//!   connection (big messages spill into a table; see there).
//! - `nats`: the optional transport, a NATS subject.
//! - `settings`: `--bus` and `--node-id`.
//!
//! A node ignores its own messages, by node id, since both transports
//! deliver them back. When a transport reconnects, Changes may have been
//! missed both ways, so the node's callback gets `Msg::Flush` (drop the
//! whole cache) and every other node is asked to do the same.
//! docs/SCALING.md describes what a client may see.

pub mod nats;
pub mod postgres;
pub mod settings;
pub mod wire;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use tokio::sync::mpsc;

use crate::model::Change;

pub use settings::{Bus, ClusterConfig};
pub use wire::{Envelope, Msg};

/// Messages queued for the transport before new ones are dropped (and a
/// flush of every node's cache is sent instead, once it drains).
const QUEUE: usize = 65_536;

/// The sending end `app::apply` holds.
pub struct Sink {
    tx: mpsc::Sender<Msg>,
    /// Set when a message could not be queued: other nodes may then hold
    /// stale entries, so the transport sends a `Flush` next.
    overflowed: AtomicBool,
    /// True while the transport is connected and listening.
    connected: AtomicBool,
}

impl Sink {
    /// A write committed on this node, for the others to apply.
    pub fn change(&self, change: Change) {
        self.send(Msg::Change { change: Box::new(change) });
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

/// Starts the transport for `bus` in the background (it connects and
/// reconnects by itself) and returns the sink to send on; what other nodes
/// send reaches `apply`. `None` without a bus.
pub fn attach(bus: &Bus, node: &str, apply: Apply) -> Option<Arc<Sink>> {
    let (tx, rx) = mpsc::channel(QUEUE);
    let sink = Arc::new(Sink { tx, overflowed: AtomicBool::new(false), connected: AtomicBool::new(false) });
    match bus {
        Bus::None => return None,
        Bus::Postgres(url) => {
            tokio::spawn(postgres::run(url.clone(), node.to_owned(), rx, sink.clone(), apply));
        }
        Bus::Nats(url) => {
            tokio::spawn(nats::run(url.clone(), node.to_owned(), rx, sink.clone(), apply));
        }
    }
    Some(sink)
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
