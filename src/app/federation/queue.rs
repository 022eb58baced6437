//! The delivery queue's sender: takes due deliveries from the store a
//! bounded batch at a time (so memory is bounded by `IN_FLIGHT`, whatever
//! the queue holds on disk), signs and posts each with its actor's key,
//! at most `PER_HOST` at once to any one host, and records the outcome:
//! delivered (gone), retried later with backoff (`retry_at`), or given up
//! two days after it was queued; one for a server the administrators have
//! since refused (`instances`) is dropped unsent. Rows survive a restart; a crash leaves
//! the ones in flight leased for `LEASE_SECS`, then taken again.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{Notify, Semaphore};

use super::client::Signer;
use super::{Federation, keys};
use crate::app::{AppResult, AppState};
use crate::model::Timestamp;
use crate::model::federation::{NewDelivery, QueuedDelivery, host_of, retry_at};
use crate::model::mail::Delivery;
use crate::store::Store;

/// Deliveries held in memory at once, across all hosts.
pub const IN_FLIGHT: usize = 32;
/// Deliveries to one host at once.
pub const PER_HOST: usize = 4;
/// How long a claimed delivery is held before another sender may take
/// it: longer than a delivery may take.
pub const LEASE_SECS: i64 = 120;
/// How often an idle sender looks for due deliveries (new ones wake it).
const POLL: Duration = Duration::from_secs(5);

/// Wakes the sender when something is queued.
#[derive(Default)]
pub struct Wake(Notify);

/// Queues `deliveries` and wakes the sender.
pub async fn enqueue<S: Store>(state: &AppState<S>, fed: &Federation, deliveries: Vec<NewDelivery>) -> AppResult<()> {
    if deliveries.is_empty() {
        return Ok(());
    }
    state.store.queue_deliveries(deliveries, Timestamp::now()).await?;
    fed.wake.0.notify_one();
    Ok(())
}

/// Starts the sender; it runs until the runtime stops.
pub fn start<S: Store>(state: &AppState<S>, fed: Arc<Federation>) -> tokio::task::JoinHandle<()> {
    let state = state.clone();
    tokio::spawn(async move {
        let slots = Arc::new(Semaphore::new(IN_FLIGHT));
        let hosts: Arc<Mutex<HashMap<String, Arc<Semaphore>>>> = Arc::default();
        loop {
            // Wait for a free slot, then claim as many as are free.
            let first = match slots.clone().acquire_owned().await {
                Ok(permit) => permit,
                Err(_) => return,
            };
            let free = slots.available_permits() + 1;
            let batch = match state.store.claim_deliveries(Timestamp::now(), LEASE_SECS, free).await {
                Ok(batch) => batch,
                Err(e) => {
                    tracing::warn!(error = %e, "federation: cannot read the delivery queue");
                    Vec::new()
                }
            };
            if batch.is_empty() {
                drop(first);
                let _ = tokio::time::timeout(POLL, fed.wake.0.notified()).await;
                continue;
            }
            let mut first = Some(first);
            for d in batch {
                let permit = match first.take() {
                    Some(p) => p,
                    None => match slots.clone().acquire_owned().await {
                        Ok(p) => p,
                        Err(_) => return,
                    },
                };
                let host = host_of(&d.delivery.inbox).unwrap_or("").to_ascii_lowercase();
                let gate = {
                    let mut hosts = hosts.lock().unwrap_or_else(|e| e.into_inner());
                    // Idle hosts' gates go, so the map stays as small as
                    // the set of hosts in flight.
                    hosts.retain(|_, g| g.available_permits() < PER_HOST);
                    hosts.entry(host).or_insert_with(|| Arc::new(Semaphore::new(PER_HOST))).clone()
                };
                let (state, fed) = (state.clone(), fed.clone());
                tokio::spawn(async move {
                    let _slot = permit;
                    let Ok(_host) = gate.acquire_owned().await else { return };
                    let outcome = deliver(&state, &fed, &d).await;
                    if let Err(e) = state.store.finish_delivery(d.id, outcome).await {
                        tracing::warn!(error = %e, "federation: cannot record a delivery");
                    }
                });
            }
        }
    })
}

/// One try of one delivery.
async fn deliver<S: Store>(state: &AppState<S>, fed: &Federation, d: &QueuedDelivery) -> Delivery {
    // A server blocked since this was queued gets nothing: dropped.
    if let Err(e) = super::instances::admit_url(state, &d.delivery.inbox).await {
        tracing::info!(inbox = %d.delivery.inbox, error = %e, "federation: delivery to a refused server dropped");
        return Delivery::Failed { error: e.to_string() };
    }
    let key = match keys::key_for(state, d.delivery.signer, d.delivery.signer_id).await {
        Ok(key) => key,
        Err(e) => return Delivery::Failed { error: format!("no key: {e}") },
    };
    let signer = Signer { key_id: d.delivery.key_id.clone(), private_pem: key.private_pem };
    let now = Timestamp::now().0;
    let error = match fed.client.post(&d.delivery.inbox, d.delivery.body.clone().into_bytes(), &signer).await {
        Ok(status) if (200..300).contains(&status) => return Delivery::Sent,
        // A refusal that trying again will not change: given up now.
        Ok(status) if (400..500).contains(&status) && status != 408 && status != 429 => {
            tracing::info!(inbox = %d.delivery.inbox, status, "federation: delivery refused; dropped");
            return Delivery::Failed { error: format!("answered {status}") };
        }
        Ok(status) => format!("answered {status}"),
        Err(e) => e.to_string(),
    };
    match retry_at(now, d.created_at, d.attempts + 1) {
        Some(at) => Delivery::Retry { at: Timestamp(at), error },
        None => {
            tracing::warn!(inbox = %d.delivery.inbox, %error, "federation: delivery given up after two days");
            Delivery::Failed { error }
        }
    }
}
