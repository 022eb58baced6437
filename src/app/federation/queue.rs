//! The delivery queue's sender: takes due deliveries from the store a
//! bounded batch at a time (so memory is bounded by `HELD`, whatever the
//! queue holds on disk), signs and posts each with its actor's key, at
//! most `PER_HOST` at once to any one host and `IN_FLIGHT` at once in
//! all, and records the outcome: delivered (gone), retried later with
//! backoff (`retry_at`), or given up two days after it was queued; one for
//! a server the administrators have since refused (`instances`) is dropped
//! unsent. Rows survive a restart; a crash leaves the ones held leased
//! for `LEASE_SECS`, then taken again.
//!
//! A held delivery waits for its host's turn without taking one of the
//! `IN_FLIGHT` sending slots, so deliveries queued host by host (a
//! community's followers, in the order they followed) keep every slot
//! busy across hosts rather than queueing behind the first few hosts.
//! Keys are read and parsed once per signer (`Signers`), not once per
//! delivery.
//!
//! A host whose delivery failed (no answer in time, no connection, a 5xx,
//! 408 or 429) is left alone for a while (`Down`: 30 s, doubling with each
//! failed round up to an hour, over at its first success): its other
//! deliveries are put back in the queue for then without being tried,
//! the ones waiting for its turn included. Otherwise a host that takes
//! connections and never answers holds each of its deliveries for the
//! client's whole time limit, `PER_HOST` at a time, and its due deliveries
//! fill the `HELD` places while every other host waits.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::{Notify, Semaphore};

use super::client::Signer;
use super::keys::SigningKey;
use super::{Federation, keys};
use crate::app::{AppError, AppResult, AppState};
use crate::model::Timestamp;
use crate::model::federation::{ActorKind, DELIVERY_GIVE_UP_SECS, NewDelivery, QueuedDelivery, host_of, retry_at};
use crate::model::mail::Delivery;
use crate::store::Store;

/// Deliveries held in memory at once, across all hosts: claimed from
/// the store, waiting for their host's turn or being sent.
pub const HELD: usize = 256;
/// Deliveries being sent at once, across all hosts. Remote servers take
/// 100 ms or more to answer, so this, not the CPU, bounds a fan-out: 64
/// sent 1,000 deliveries to inboxes answering in 100 ms in 1.8 s, 32 in
/// 3.4 s, for 1 MB more at the peak (`pith bench deliver`,
/// docs/BENCHMARKS.md).
pub const IN_FLIGHT: usize = 64;
/// Deliveries to one host at once.
pub const PER_HOST: usize = 4;
/// How long a claimed delivery is held before another sender may take
/// it: longer than a delivery may take.
pub const LEASE_SECS: i64 = 120;
/// How often an idle sender looks for due deliveries (new ones wake it).
const POLL: Duration = Duration::from_secs(5);
/// Free places a claim waits for while others are held, so the queue is
/// read in batches rather than a row at a time.
const CLAIM_BATCH: u32 = 32;
/// A held delivery whose turn comes later than this after its claim is
/// let go unsent: its lease could end while it is being sent, and another
/// sender take it too. It is taken again when its lease ends.
const STALE: Duration = Duration::from_secs(LEASE_SECS as u64 - 2 * super::FETCH_TIMEOUT.as_secs());
/// Signers' keys kept parsed at most; past it the cache starts again.
const SIGNERS: usize = 1024;
/// How long a host is left alone after its first failed round, doubled
/// with each failed round after it, up to `DOWN_LONGEST`.
const DOWN_FIRST: Duration = Duration::from_secs(30);
const DOWN_LONGEST: Duration = Duration::from_secs(3600);
/// Hosts remembered as down at most; past it the ones whose pause is
/// over are forgotten first, then all.
const DOWN_HOSTS: usize = 4096;

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

/// What the sender's tasks share.
struct Sender<S: Store> {
    state: AppState<S>,
    fed: Arc<Federation>,
    sending: Semaphore,
    /// Each host in flight's gate of `PER_HOST`.
    hosts: Mutex<HashMap<String, Arc<Semaphore>>>,
    /// Hosts whose last delivery failed.
    down: Mutex<HashMap<String, Down>>,
    signers: Signers,
}

/// A host left alone after failed deliveries.
struct Down {
    /// Until when its deliveries are not tried.
    until: Instant,
    /// The same, as the queue's clock (`next_at`).
    until_ts: i64,
    /// Failed rounds in a row: a failure after `until` is a new round;
    /// the deliveries already in flight when the first failed are not.
    rounds: u32,
    /// The last failure, for the deliveries put back.
    error: String,
}

/// A new pause of a host, for the log.
struct Paused {
    pause: Duration,
    rounds: u32,
}

/// Records that a delivery to `host` failed at `now`: the host is left
/// alone for a while, longer for each failed round in a row. A new pause
/// when this failure starts a round, `None` when it is one more of the
/// deliveries already in flight when the round's first failed.
fn host_failed(
    down: &mut HashMap<String, Down>,
    host: &str,
    error: &str,
    now: Instant,
    ts: Timestamp,
) -> Option<Paused> {
    if down.len() >= DOWN_HOSTS && !down.contains_key(host) {
        down.retain(|_, h| h.until > now);
        if down.len() >= DOWN_HOSTS {
            down.clear();
        }
    }
    let h = down.entry(host.to_owned()).or_insert(Down { until: now, until_ts: 0, rounds: 0, error: String::new() });
    h.error = error.to_owned();
    if h.until > now {
        return None;
    }
    h.rounds += 1;
    let pause = pause(h.rounds);
    h.until = now + pause;
    h.until_ts = ts.0 + pause.as_secs() as i64;
    Some(Paused { pause, rounds: h.rounds })
}

/// How long a host is left alone after `rounds` failed rounds in a row.
fn pause(rounds: u32) -> Duration {
    DOWN_FIRST.saturating_mul(1 << rounds.saturating_sub(1).min(10)).min(DOWN_LONGEST)
}

/// Local actors' keys, parsed: a fan-out signs once per inbox, with one key.
#[derive(Default)]
struct Signers(Mutex<HashMap<(i64, i64), Arc<SigningKey>>>);

impl Signers {
    async fn get<S: Store>(&self, state: &AppState<S>, kind: ActorKind, id: i64) -> AppResult<Arc<SigningKey>> {
        if let Some(key) = self.0.lock().unwrap_or_else(|e| e.into_inner()).get(&(kind.code(), id)) {
            return Ok(key.clone());
        }
        let pem = keys::key_for(state, kind, id).await?.private_pem;
        let key = Arc::new(SigningKey::from_pem(&pem).map_err(AppError::Internal)?);
        let mut map = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if map.len() >= SIGNERS {
            map.clear();
        }
        map.insert((kind.code(), id), key.clone());
        Ok(key)
    }
}

/// Starts the sender; it runs until the runtime stops.
pub fn start<S: Store>(state: &AppState<S>, fed: Arc<Federation>) -> tokio::task::JoinHandle<()> {
    let sender = Arc::new(Sender {
        state: state.clone(),
        fed,
        sending: Semaphore::new(IN_FLIGHT),
        hosts: Mutex::default(),
        down: Mutex::default(),
        signers: Signers::default(),
    });
    tokio::spawn(async move {
        let held = Arc::new(Semaphore::new(HELD));
        loop {
            // Wait for free places (a batch of them while others are
            // held), then claim as many as are free.
            let want = if held.available_permits() == HELD { 1 } else { CLAIM_BATCH };
            let Ok(mut places) = held.clone().acquire_many_owned(want).await else { return };
            if let Ok(more) = held.clone().try_acquire_many_owned(held.available_permits() as u32) {
                places.merge(more);
            }
            let free = places.num_permits();
            // Taken before the claim: the lease runs from the time the claim names.
            let claimed = Instant::now();
            let batch = match sender.state.store.claim_deliveries(Timestamp::now(), LEASE_SECS, free).await {
                Ok(batch) => batch,
                Err(e) => {
                    tracing::warn!(error = %e, "federation: cannot read the delivery queue");
                    Vec::new()
                }
            };
            if batch.is_empty() {
                drop(places);
                let _ = tokio::time::timeout(POLL, sender.fed.wake.0.notified()).await;
                continue;
            }
            for d in batch {
                let Some(place) = places.split(1) else { break };
                let sender = sender.clone();
                tokio::spawn(async move {
                    let _place = place;
                    sender.send(d, claimed).await;
                });
            }
        }
    })
}

impl<S: Store> Sender<S> {
    /// Waits for the host's turn, then a sending slot; sends and records.
    /// A delivery to a host that is down is put back for when it is up.
    async fn send(&self, d: QueuedDelivery, claimed: Instant) {
        let host = host_of(&d.delivery.inbox).unwrap_or("").to_ascii_lowercase();
        if self.postponed(&host, &d).await {
            return;
        }
        let gate = {
            let mut hosts = self.hosts.lock().unwrap_or_else(|e| e.into_inner());
            // Idle hosts' gates go, so the map stays as small as the set
            // of hosts held.
            hosts.retain(|_, g| Arc::strong_count(g) > 1);
            hosts.entry(host.clone()).or_insert_with(|| Arc::new(Semaphore::new(PER_HOST))).clone()
        };
        let Ok(_host) = gate.acquire().await else { return };
        // The host may have failed while this waited for its turn.
        if self.postponed(&host, &d).await {
            return;
        }
        let Ok(_slot) = self.sending.acquire().await else { return };
        if claimed.elapsed() > STALE {
            return;
        }
        let outcome = deliver(&self.state, &self.fed, &self.signers, &d).await;
        match &outcome {
            Delivery::Sent => {
                self.down.lock().unwrap_or_else(|e| e.into_inner()).remove(&host);
            }
            Delivery::Retry { error, .. } => self.failed(&host, error),
            // Refused for good (a 4xx answer: the host is up), or not sent
            // at all (a refused server, no key): nothing about the host.
            Delivery::Failed { .. } => {}
        }
        self.record(d.id, outcome).await;
    }

    /// When `host` is down: `d` back in the queue for when it is up (or
    /// given up, two days after it was queued), and true.
    async fn postponed(&self, host: &str, d: &QueuedDelivery) -> bool {
        let (until, error) = {
            let down = self.down.lock().unwrap_or_else(|e| e.into_inner());
            match down.get(host) {
                Some(h) if h.until > Instant::now() => (h.until_ts, h.error.clone()),
                _ => return false,
            }
        };
        let error = format!("not tried: {host} failed and is left alone until its pause is over ({error})");
        // Due again when the pause ends (not after a try's backoff: it was
        // not tried), unless that is past its two days.
        let outcome = if until - d.created_at <= DELIVERY_GIVE_UP_SECS {
            Delivery::Retry { at: Timestamp(until), error }
        } else {
            tracing::warn!(inbox = %d.delivery.inbox, %error, "federation: delivery given up after two days");
            Delivery::Failed { error }
        };
        self.record(d.id, outcome).await;
        true
    }

    /// A delivery to `host` failed.
    fn failed(&self, host: &str, error: &str) {
        let mut down = self.down.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(h) = host_failed(&mut down, host, error, Instant::now(), Timestamp::now()) {
            tracing::warn!(
                host,
                error,
                pause_secs = h.pause.as_secs(),
                rounds = h.rounds,
                "federation: a host failed; its deliveries wait"
            );
        }
    }

    async fn record(&self, id: i64, outcome: Delivery) {
        if let Err(e) = self.state.store.finish_delivery(id, outcome).await {
            tracing::warn!(error = %e, "federation: cannot record a delivery");
        }
    }
}

/// One try of one delivery.
async fn deliver<S: Store>(state: &AppState<S>, fed: &Federation, signers: &Signers, d: &QueuedDelivery) -> Delivery {
    // A server blocked since this was queued gets nothing: dropped.
    if let Err(e) = super::instances::admit_url(state, &d.delivery.inbox).await {
        tracing::info!(inbox = %d.delivery.inbox, error = %e, "federation: delivery to a refused server dropped");
        return Delivery::Failed { error: e.to_string() };
    }
    let key = match signers.get(state, d.delivery.signer, d.delivery.signer_id).await {
        Ok(key) => key,
        Err(e) => return Delivery::Failed { error: format!("no key: {e}") },
    };
    let signer = Signer { key_id: d.delivery.key_id.clone(), key };
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_host_is_paused_longer_for_each_failed_round_up_to_an_hour() {
        let secs: Vec<u64> = (1..=9).map(|r| pause(r).as_secs()).collect();
        assert_eq!(secs, [30, 60, 120, 240, 480, 960, 1920, 3600, 3600]);
        assert_eq!(pause(u32::MAX), DOWN_LONGEST);
    }

    #[test]
    fn failures_in_flight_together_are_one_round_and_a_later_one_a_new_round() {
        let mut down = HashMap::new();
        let (t0, ts) = (Instant::now(), Timestamp(1_000_000));
        let first = host_failed(&mut down, "dead.example", "timed out", t0, ts).expect("a new round");
        assert_eq!((first.pause, first.rounds), (DOWN_FIRST, 1));
        assert_eq!(down["dead.example"].until_ts, 1_000_030);
        // The other deliveries that were in flight fail within the pause.
        let later = t0 + Duration::from_secs(2);
        assert!(host_failed(&mut down, "dead.example", "refused", later, ts).is_none());
        assert_eq!((down["dead.example"].rounds, down["dead.example"].error.as_str()), (1, "refused"));
        // Tried again after the pause, and failed again: twice as long.
        let after = t0 + Duration::from_secs(31);
        let second = host_failed(&mut down, "dead.example", "timed out", after, Timestamp(1_000_031)).expect("round 2");
        assert_eq!((second.pause.as_secs(), second.rounds), (60, 2));
        assert_eq!(down["dead.example"].until_ts, 1_000_091);
        // Other hosts are their own.
        assert_eq!(host_failed(&mut down, "other.example", "503", after, ts).expect("round 1").rounds, 1);
    }

    #[test]
    fn the_hosts_remembered_are_bounded() {
        let mut down = HashMap::new();
        let now = Instant::now();
        for i in 0..DOWN_HOSTS + 10 {
            host_failed(&mut down, &format!("h{i}.example"), "x", now, Timestamp(0));
        }
        assert!(down.len() <= DOWN_HOSTS, "{}", down.len());
        // Past the bound, the hosts whose pause is over go first.
        let later = now + DOWN_LONGEST + Duration::from_secs(1);
        host_failed(&mut down, "fresh.example", "x", later, Timestamp(0));
        assert!(down.len() <= DOWN_HOSTS && down.contains_key("fresh.example"));
    }
}
