//! A fixed pool of reader threads, each owning one read-only connection.
//! Async callers hand a closure over a channel and await the answer, so a
//! slow query never blocks the async runtime. Every read runs in its own
//! transaction, hence sees one consistent snapshot.
//!
//! Hand-written rather than deadpool/r2d2 + spawn_blocking: a job queue in
//! front of long-lived threads needs no checkout, no per-call thread hop and
//! keeps each connection's statement cache warm.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::Path;

use crossbeam_channel::Sender;
use rusqlite::Connection;
use tokio::sync::oneshot;

use super::conn::{Role, open, run_cached};
use crate::store::{StoreError, StoreResult};

type ReadJob = Box<dyn FnOnce(&Connection) + Send>;

pub struct Readers {
    tx: Sender<ReadJob>,
}

impl Readers {
    pub fn start(path: &Path, count: usize) -> StoreResult<Readers> {
        let (tx, rx) = crossbeam_channel::unbounded::<ReadJob>();
        for i in 0..count.max(1) {
            let conn = open(path, Role::Reader)?;
            let rx = rx.clone();
            std::thread::Builder::new()
                .name(format!("pith-reader-{i}"))
                .spawn(move || {
                    // Ends when the store, and with it the sender, is dropped.
                    while let Ok(job) = rx.recv() {
                        job(&conn);
                    }
                })
                .map_err(|e| StoreError::Internal(format!("spawn reader: {e}")))?;
        }
        Ok(Readers { tx })
    }

    pub async fn read<R, F>(&self, f: F) -> StoreResult<R>
    where
        R: Send + 'static,
        F: FnOnce(&Connection) -> StoreResult<R> + Send + 'static,
    {
        let (tx, rx) = oneshot::channel();
        let job: ReadJob = Box::new(move |conn| {
            let _ = tx.send(in_snapshot(conn, f));
        });
        self.tx.send(job).map_err(|_| StoreError::Unavailable("readers stopped".into()))?;
        rx.await.map_err(|_| StoreError::Internal("reader dropped a job".into()))?
    }
}

fn in_snapshot<R>(conn: &Connection, f: impl FnOnce(&Connection) -> StoreResult<R>) -> StoreResult<R> {
    // Cached statements: `execute_batch` would parse BEGIN and COMMIT
    // again on every read.
    run_cached(conn, "BEGIN")?;
    let result = catch_unwind(AssertUnwindSafe(|| f(conn)))
        .unwrap_or_else(|_| Err(StoreError::Internal("a read panicked".into())));
    let _ = run_cached(conn, "COMMIT");
    result
}
