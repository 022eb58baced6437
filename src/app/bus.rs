//! The application's side of the cluster bus: which bus, this node's id,
//! and what a message from another node does (a `Change` goes through
//! `apply_here`, a flush drops the whole cache, the token cache and what
//! federation keeps of remote actors).

use std::sync::Arc;

use super::{App, AppState};
use crate::cluster::{self, Apply, Bus, ClusterConfig, Msg, Sink};
use crate::store::Store;

/// Applies a message from another node on this one.
pub fn receive<S: Store>(app: Arc<App<S>>, msg: Msg) {
    let state = AppState(app);
    match msg {
        Msg::Change { change } => super::apply::apply_here(&state, &change),
        Msg::Flush => {
            state.cache.clear();
            // A revocation may be among what was lost.
            state.tokens.clear();
            if let Some(fed) = state.federation.get() {
                fed.known.clear();
            }
        }
        // Resolved by the PostgreSQL transport before it gets here.
        Msg::Spilled { .. } => {}
    }
}

/// Connects `state` to the other nodes through `bus`: from now on its
/// Changes go out and theirs come in. Returns at once (the transport
/// connects in the background) with the sink, which tells whether it is
/// connected; `None` without a bus.
pub fn attach<S: Store>(state: &AppState<S>, bus: &Bus, node: &str) -> Option<Arc<Sink>> {
    let weak = Arc::downgrade(&state.0);
    let apply: Apply = Arc::new(move |msg| {
        if let Some(app) = weak.upgrade() {
            receive(app, msg);
        }
    });
    let sink = cluster::attach(bus, node, apply)?;
    let _ = state.bus.set(sink.clone());
    Some(sink)
}

/// `pith serve`'s part: resolves and logs the settings, then attaches.
pub fn start<S: Store>(state: &AppState<S>, cfg: &ClusterConfig, database: Option<&str>) -> anyhow::Result<()> {
    let bus = Bus::resolve(&cfg.bus, database).map_err(anyhow::Error::msg)?;
    let node = if cfg.node_id.trim().is_empty() { cluster::new_node_id() } else { cfg.node_id.trim().to_owned() };
    tracing::info!(bus = %bus.describe(), node_id = %node, "cluster");
    if matches!(bus, Bus::Nats(_)) && !database.is_some_and(crate::settings::is_postgres_url) {
        tracing::warn!(
            "a bus with SQLite: each node has its own database, so the bus only carries live events and evictions"
        );
    }
    attach(state, &bus, &node);
    Ok(())
}
