//! Housekeeping: rows that have expired are deleted in the background, so
//! the tables of sessions and email links do not grow by every sign-in and
//! every reset asked for, for ever. An expired token or link is already
//! refused where it is used (and deleted if it is presented); this takes
//! away the ones nobody presents again. Every node of a cluster may run it:
//! the deletes are idempotent.

use std::time::Duration;

use tokio::task::JoinHandle;
use tokio::time::{Instant, MissedTickBehavior};

use super::AppState;
use crate::model::Timestamp;
use crate::store::{Store, StoreResult};

/// How often: expiry is counted in days, so hourly is prompt enough.
const EVERY: Duration = Duration::from_secs(3600);
/// The first sweep waits this long, off the start-up path.
const FIRST_AFTER: Duration = Duration::from_secs(60);
/// Rows deleted per write, so no one write holds the writer long.
const BATCH: usize = 500;

/// Starts the hourly sweep.
pub fn start<S: Store>(state: &AppState<S>) -> JoinHandle<()> {
    let state = state.clone();
    tokio::spawn(async move {
        let mut tick = tokio::time::interval_at(Instant::now() + FIRST_AFTER, EVERY);
        tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            // A full or read-only disk: the rows wait for the next hour.
            if let Err(e) = sweep(&state, Timestamp::now()).await {
                tracing::warn!(error = %e, "could not delete expired sessions and email links");
            }
        }
    })
}

/// Deletes what has expired by `now`, a batch at a time; returns how many
/// rows went.
pub async fn sweep<S: Store>(state: &AppState<S>, now: Timestamp) -> StoreResult<usize> {
    let limits = state.sessions.limits();
    let mut total = 0;
    loop {
        let n = state.store.sweep_expired(now, limits, BATCH).await?;
        total += n;
        if n < BATCH {
            break;
        }
    }
    if total > 0 {
        tracing::info!(deleted = total, "expired sessions, tokens and email links deleted");
    }
    Ok(total)
}
