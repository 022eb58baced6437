//! The checkpointer: a thread that copies the WAL back into the database
//! once a second, so no request ever pays for a checkpoint. A PASSIVE
//! checkpoint never blocks a reader or the writer. Past its limit the WAL
//! is the writer's job while writes keep coming (see `writer::WalBound`:
//! only the writer can find a gap between its own commits); once writes
//! pause, a TRUNCATE checkpoint here gives the file's space back. The two
//! take turns on one lock, because SQLite refuses a checkpoint while
//! another runs. Both go by `WalLog`, what the writer's commits left in
//! the WAL, not by the file's size: the writer resets the WAL without
//! truncating it, so the file keeps the size it had.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use crossbeam_channel::{RecvTimeoutError, Sender};

use super::conn::{Role, open};
use crate::store::StoreResult;

/// What the writer's commits left in the WAL, as SQLite's WAL hook tells
/// the writer after each commit; read by the checkpointer and the writer's
/// bound.
#[derive(Debug, Default)]
pub struct WalLog {
    /// Frames in the WAL after the last commit (from its start, so small
    /// again after the log restarted).
    frames: AtomicU64,
    /// Commits so far: unchanged between two looks means writes paused.
    commits: AtomicU64,
}

impl WalLog {
    /// Called by the WAL hook after each commit, with the log's frame count.
    pub fn committed(&self, frames: u64) {
        self.frames.store(frames, Ordering::Relaxed);
        self.commits.fetch_add(1, Ordering::Relaxed);
    }

    /// Bytes of the WAL in use: its frames of `page_size` bytes plus their
    /// 24-byte headers.
    pub fn bytes(&self, page_size: u64) -> u64 {
        self.frames.load(Ordering::Relaxed) * (page_size + 24)
    }

    pub fn commits(&self) -> u64 {
        self.commits.load(Ordering::Relaxed)
    }
}

pub struct Checkpointer {
    stop: Sender<()>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl Checkpointer {
    pub fn start(
        db: PathBuf,
        wal_limit_bytes: u64,
        every: Duration,
        lock: Arc<Mutex<()>>,
        metrics: crate::store::StoreMetrics,
        log: Arc<WalLog>,
        page_size: u64,
    ) -> StoreResult<Checkpointer> {
        let conn = open(&db, Role::Checkpointer)?;
        let wal = PathBuf::from(format!("{}-wal", db.display()));
        let (stop, rx) = crossbeam_channel::bounded::<()>(1);
        let thread = std::thread::Builder::new()
            .name("pith-checkpoint".into())
            .spawn(move || {
                let mut last_commits = log.commits();
                while let Err(RecvTimeoutError::Timeout) = rx.recv_timeout(every) {
                    let commits = log.commits();
                    let quiet = commits == last_commits;
                    last_commits = commits;
                    let size = std::fs::metadata(&wal).map(|m| m.len()).unwrap_or(0);
                    let mode = if quiet && size > wal_limit_bytes {
                        "TRUNCATE"
                    } else if log.bytes(page_size) > wal_limit_bytes {
                        // Writes keep coming: the writer bounds the WAL.
                        continue;
                    } else {
                        "PASSIVE"
                    };
                    let _turn = lock.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
                    let started = std::time::Instant::now();
                    if let Err(e) = conn.execute_batch(&format!("PRAGMA wal_checkpoint({mode})")) {
                        tracing::warn!(error = %e, mode, "checkpoint failed");
                    }
                    metrics.checkpoint(mode, "checkpointer", started.elapsed());
                }
            })
            .map_err(|e| crate::store::StoreError::Internal(format!("spawn checkpointer: {e}")))?;
        Ok(Checkpointer { stop, thread: Mutex::new(Some(thread)) })
    }

    pub fn stop(&self) {
        let _ = self.stop.try_send(());
        if let Some(h) = self.thread.lock().ok().and_then(|mut t| t.take()) {
            let _ = h.join();
        }
    }
}
