//! The checkpointer: a thread that copies the WAL back into the database
//! once a second, so no request ever pays for a checkpoint. A PASSIVE
//! checkpoint never blocks a reader or the writer. Past its limit the WAL
//! is the writer's job while writes keep coming (see `writer::WalBound`:
//! only the writer can find a gap between its own commits); once writes
//! pause, a TRUNCATE checkpoint here resets the file. The two take turns
//! on one lock, because SQLite refuses a checkpoint while another runs.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use crossbeam_channel::{RecvTimeoutError, Sender};

use super::conn::{Role, open};
use crate::store::StoreResult;

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
    ) -> StoreResult<Checkpointer> {
        let conn = open(&db, Role::Checkpointer)?;
        let wal = PathBuf::from(format!("{}-wal", db.display()));
        let (stop, rx) = crossbeam_channel::bounded::<()>(1);
        let thread = std::thread::Builder::new()
            .name("pith-checkpoint".into())
            .spawn(move || {
                let mut last_size = 0;
                while let Err(RecvTimeoutError::Timeout) = rx.recv_timeout(every) {
                    let size = std::fs::metadata(&wal).map(|m| m.len()).unwrap_or(0);
                    let growing = size > last_size;
                    last_size = size;
                    let mode = match (size > wal_limit_bytes, growing) {
                        (false, _) => "PASSIVE",
                        (true, true) => continue,
                        (true, false) => "TRUNCATE",
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
