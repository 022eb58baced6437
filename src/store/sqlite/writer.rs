//! The single writer: one thread owns the only read-write connection and
//! commits concurrent writes together (group commit), so a burst of N
//! writes costs one fsync, not N. A write's caller is answered only after
//! the transaction holding it has committed.
//!
//! Hand-written because no crate offers group commit over rusqlite; pools
//! such as deadpool or r2d2 would hand out a connection per write instead.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::thread::JoinHandle;

use crossbeam_channel::{Receiver, Sender};
use rusqlite::Connection;
use tokio::sync::oneshot;

use super::conn::map_err;
use crate::store::{StoreError, StoreResult};

/// Runs after the batch's COMMIT (or its failure) to answer the caller.
type Completion = Box<dyn FnOnce(&Result<(), StoreError>) + Send>;
/// Runs inside the batch transaction, within its own savepoint; given the
/// error instead when the transaction could not even begin.
type Job = Box<dyn FnOnce(Result<&Connection, &StoreError>) -> Completion + Send>;

enum Msg {
    Job(Job),
    /// Finish what is queued, checkpoint, and stop.
    Shutdown(oneshot::Sender<()>),
}

pub struct Writer {
    tx: Sender<Msg>,
    thread: std::sync::Mutex<Option<JoinHandle<()>>>,
}

impl Writer {
    pub fn start(conn: Connection, max_batch: usize, wal: WalBound) -> Writer {
        let (tx, rx) = crossbeam_channel::unbounded();
        let thread = std::thread::Builder::new()
            .name("pith-writer".into())
            .spawn(move || run(conn, rx, max_batch.max(1), wal))
            .expect("spawn writer thread");
        Writer { tx, thread: std::sync::Mutex::new(Some(thread)) }
    }

    /// Runs `f` in the next group transaction and returns its result once
    /// that transaction is durable. An error from `f` rolls back only `f`.
    pub async fn write<R, F>(&self, f: F) -> StoreResult<R>
    where
        R: Send + 'static,
        F: FnOnce(&Connection) -> StoreResult<R> + Send + 'static,
    {
        let (job, rx) = job(f);
        self.tx.send(Msg::Job(job)).map_err(|_| StoreError::Unavailable("the writer has stopped".into()))?;
        rx.await.map_err(|_| StoreError::Internal("writer dropped a job".into()))?
    }

    /// Drains queued writes, checkpoints and joins the thread.
    pub async fn shutdown(&self) {
        let (tx, rx) = oneshot::channel();
        if self.tx.send(Msg::Shutdown(tx)).is_ok() {
            let _ = rx.await;
        }
        let handle = self.thread.lock().ok().and_then(|mut t| t.take());
        if let Some(h) = handle {
            let _ = tokio::task::spawn_blocking(move || h.join()).await;
        }
    }
}

/// Wraps `f` as a batch job; the receiver gets its result once the batch's
/// fate is known.
fn job<R, F>(f: F) -> (Job, oneshot::Receiver<StoreResult<R>>)
where
    R: Send + 'static,
    F: FnOnce(&Connection) -> StoreResult<R> + Send + 'static,
{
    let (tx, rx) = oneshot::channel();
    let job: Job = Box::new(move |conn| {
        let result = match conn {
            Ok(conn) => in_savepoint(conn, f),
            Err(e) => Err(e.clone()),
        };
        Box::new(move |commit: &Result<(), StoreError>| {
            let out = match commit {
                Ok(()) => result,
                Err(e) => Err(e.clone()),
            };
            let _ = tx.send(out);
        })
    });
    (job, rx)
}

fn in_savepoint<R>(conn: &Connection, f: impl FnOnce(&Connection) -> StoreResult<R>) -> StoreResult<R> {
    conn.execute_batch("SAVEPOINT job").map_err(map_err)?;
    let result = catch_unwind(AssertUnwindSafe(|| f(conn)))
        .unwrap_or_else(|_| Err(StoreError::Internal("a write panicked".into())));
    let end = if result.is_ok() { "RELEASE job" } else { "ROLLBACK TO job; RELEASE job" };
    conn.execute_batch(end).map_err(map_err)?;
    result
}

/// The WAL's size limit, enforced by the writer as a last resort.
///
/// The checkpointer normally keeps the WAL small, but a checkpoint can only
/// reset the file when it gets the write lock between commits, and a writer
/// that commits back to back never lets go of it. So when the file has
/// grown past its limit anyway, the writer itself runs a TRUNCATE
/// checkpoint between two batches: writes wait a moment (backpressure)
/// instead of the WAL, and every later read, growing without bound.
pub struct WalBound {
    pub path: std::path::PathBuf,
    pub limit_bytes: u64,
    /// Shared with the checkpointer: SQLite refuses (SQLITE_BUSY, without
    /// waiting) a checkpoint while another one runs, so under load the
    /// writer's TRUNCATE kept losing to the checkpointer's PASSIVE and the
    /// WAL grew. Taking turns on this lock makes the writer wait instead.
    pub lock: std::sync::Arc<std::sync::Mutex<()>>,
    /// Where the writer records its batches, commits and checkpoints.
    pub metrics: crate::metrics::StoreMetrics,
}

impl WalBound {
    /// Past the limit, resets the WAL before the next batch. Writes wait for
    /// it: a bounded WAL needs that backpressure. Readers still using old
    /// frames are waited for by SQLite's busy handler (`busy_timeout`).
    fn enforce(&self, conn: &Connection) {
        let size = std::fs::metadata(&self.path).map(|m| m.len()).unwrap_or(0);
        if size <= self.limit_bytes {
            return;
        }
        let _turn = self.lock.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let started = std::time::Instant::now();
        let r = conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |r| r.get::<_, i64>(0));
        self.metrics.checkpoint("TRUNCATE", "writer", started.elapsed());
        match r {
            Ok(0) => tracing::debug!(size, "WAL over its limit: truncated by the writer"),
            Ok(_) => tracing::debug!(size, "WAL over its limit: readers kept the checkpoint from finishing"),
            Err(e) => tracing::warn!(error = %e, "WAL checkpoint by the writer failed"),
        }
    }
}

fn run(conn: Connection, rx: Receiver<Msg>, max_batch: usize, wal: WalBound) {
    let mut batch: Vec<Job> = Vec::with_capacity(max_batch);
    let mut stop: Option<oneshot::Sender<()>> = None;
    while stop.is_none() {
        match rx.recv() {
            Ok(Msg::Job(job)) => batch.push(job),
            Ok(Msg::Shutdown(done)) => stop = Some(done),
            Err(_) => break,
        }
        // Everything that queued while the last commit was syncing joins
        // this batch.
        while batch.len() < max_batch && stop.is_none() {
            match rx.try_recv() {
                Ok(Msg::Job(job)) => batch.push(job),
                Ok(Msg::Shutdown(done)) => stop = Some(done),
                Err(_) => break,
            }
        }
        if !batch.is_empty() {
            commit_batch(&conn, &mut batch, &wal.metrics);
            wal.enforce(&conn);
        }
    }
    // Jobs still queued behind the shutdown request are committed too.
    while let Ok(Msg::Job(job)) = rx.try_recv() {
        batch.push(job);
    }
    if !batch.is_empty() {
        commit_batch(&conn, &mut batch, &wal.metrics);
    }
    let _turn = wal.lock.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    if let Err(e) = conn.execute_batch("PRAGMA wal_checkpoint(TRUNCATE)") {
        tracing::warn!(error = %e, "final checkpoint failed");
    }
    if let Some(done) = stop {
        let _ = done.send(());
    }
}

fn commit_batch(conn: &Connection, batch: &mut Vec<Job>, metrics: &crate::metrics::StoreMetrics) {
    let (writes, started) = (batch.len(), std::time::Instant::now());
    // A ROLLBACK that failed after the last batch (an I/O error on a full
    // disk) must not leave the connection inside that transaction for good:
    // every later BEGIN would fail and the writer would be wedged.
    if !conn.is_autocommit() {
        tracing::warn!("the previous write transaction is still open; rolling it back");
        let _ = conn.execute_batch("ROLLBACK");
    }
    let began = conn.execute_batch("BEGIN IMMEDIATE").map_err(map_err);
    if let Err(e) = began {
        tracing::error!(error = %e, "cannot begin write transaction");
        let failed = Err(e.clone());
        for job in batch.drain(..) {
            job(Err(&e))(&failed);
        }
        return;
    }
    // After SQLITE_FULL, SQLITE_IOERR or SQLITE_NOMEM in a statement, SQLite
    // may roll the whole transaction back by itself: the jobs before are
    // undone, and the jobs after would run in autocommit mode, each
    // committed by its own RELEASE while its caller is told the batch
    // failed. So once the transaction is gone, the rest of the batch does
    // not run and every caller gets the error.
    let mut lost: Option<StoreError> = None;
    let mut completions: Vec<Completion> = Vec::with_capacity(batch.len());
    for job in batch.drain(..) {
        match &lost {
            Some(e) => completions.push(job(Err(e))),
            None => {
                completions.push(job(Ok(conn)));
                if conn.is_autocommit() {
                    lost = Some(StoreError::Unavailable(
                        "SQLite rolled the write transaction back after an I/O error (disk full?)".into(),
                    ));
                }
            }
        }
    }
    let committed = match lost {
        Some(e) => Err(e),
        None => conn.execute_batch("COMMIT").map_err(map_err),
    };
    if let Err(e) = &committed {
        tracing::error!(error = %e, "group commit failed; rolling back");
        let _ = conn.execute_batch("ROLLBACK");
    }
    // Recorded before the callers hear back, so a scrape after a write sees it.
    metrics.commit(writes, started.elapsed());
    for done in completions {
        done(&committed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn metrics() -> crate::metrics::StoreMetrics {
        crate::metrics::StoreMetrics::new(std::path::Path::new("unused.db"))
    }

    fn count(conn: &Connection) -> i64 {
        conn.query_row("SELECT count(*) FROM t", [], |r| r.get(0)).expect("count")
    }

    fn insert(x: i64) -> impl FnOnce(&Connection) -> StoreResult<()> + Send + 'static {
        move |c| c.execute("INSERT INTO t VALUES (?1)", [x]).map(drop).map_err(map_err)
    }

    /// SQLite may abandon the whole transaction after SQLITE_FULL in a
    /// statement; a job that ends it the same way stands in for that here.
    #[test]
    fn a_transaction_sqlite_rolled_back_fails_the_whole_batch_and_runs_nothing_after_it() {
        let conn = Connection::open_in_memory().expect("open");
        conn.execute_batch("CREATE TABLE t (x INTEGER)").expect("schema");
        let (first, first_rx) = job(insert(1));
        let (abandon, abandon_rx) = job(|c: &Connection| -> StoreResult<()> {
            c.execute_batch("INSERT INTO t VALUES (2); ROLLBACK").map_err(map_err)?;
            Err(StoreError::Unavailable("database or disk is full".into()))
        });
        let (after, after_rx) = job(insert(3));
        commit_batch(&conn, &mut vec![first, abandon, after], &metrics());
        for (name, rx) in [("first", first_rx), ("abandon", abandon_rx), ("after", after_rx)] {
            let out = rx.blocking_recv().expect("answered");
            assert!(matches!(out, Err(StoreError::Unavailable(_))), "{name}: {out:?}");
        }
        assert_eq!(count(&conn), 0, "nothing of a failed batch is stored");

        // The writer is not wedged: the next batch commits.
        let (next, next_rx) = job(insert(4));
        commit_batch(&conn, &mut vec![next], &metrics());
        assert!(next_rx.blocking_recv().expect("answered").is_ok());
        assert_eq!(count(&conn), 1);
    }

    #[test]
    fn a_transaction_left_open_is_rolled_back_before_the_next_batch() {
        let conn = Connection::open_in_memory().expect("open");
        conn.execute_batch("CREATE TABLE t (x INTEGER); BEGIN; INSERT INTO t VALUES (1);").expect("setup");
        let (next, next_rx) = job(insert(2));
        commit_batch(&conn, &mut vec![next], &metrics());
        assert!(next_rx.blocking_recv().expect("answered").is_ok());
        let stored: Vec<i64> =
            conn.prepare("SELECT x FROM t").and_then(|mut s| s.query_map([], |r| r.get(0))?.collect()).expect("select");
        assert_eq!(stored, [2]);
    }
}
