//! The single writer: one thread owns the only read-write connection and
//! commits concurrent writes together (group commit), so a burst of N
//! writes costs one fsync, not N. A write's caller is answered only after
//! the transaction holding it has committed.
//!
//! Hand-written because no crate offers group commit over rusqlite; pools
//! such as deadpool or r2d2 would hand out a connection per write instead.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::JoinHandle;

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender};
use rusqlite::Connection;
use tokio::sync::oneshot;

use super::checkpoint::WalLog;
use super::conn::run_cached;
use super::search_queue::{self, Backlog};
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
    /// Starts the writer thread on `conn`. `search_pending` tells searches
    /// whether changes wait in the search queue (`search_queue::Backlog`).
    pub fn start(
        mut conn: Connection,
        max_batch: usize,
        wal: WalBound,
        search_pending: Arc<AtomicBool>,
    ) -> StoreResult<Writer> {
        let backlog = search_queue::Backlog::open(&conn, search_pending, search_queue::MAX_AGE)?;
        let log = wal.log.clone();
        conn.wal_hook(Some(move |_: &mut rusqlite::hooks::Wal, frames: std::ffi::c_int| {
            log.committed(u64::try_from(frames).unwrap_or(0));
            Ok(())
        }))
        .map_err(super::conn::map_err)?;
        let (tx, rx) = crossbeam_channel::unbounded();
        let thread = std::thread::Builder::new()
            .name("pith-writer".into())
            .spawn(move || run(conn, rx, max_batch.max(1), wal, backlog))
            .map_err(|e| StoreError::Internal(format!("spawn writer thread: {e}")))?;
        Ok(Writer { tx, thread: std::sync::Mutex::new(Some(thread)) })
    }

    /// Runs `f` in the next group transaction and returns its result once
    /// that transaction is durable. An error from `f` rolls back only `f`.
    pub async fn write<R, F>(&self, f: F) -> StoreResult<R>
    where
        R: Send + 'static,
        F: FnOnce(&Connection) -> StoreResult<R> + Send + 'static,
    {
        self.queue(job(f, Undo::Savepoint)).await
    }

    /// As `write`, for a write that checks everything before its first
    /// change: it runs without a savepoint of its own, which costs a copy
    /// of every page it touches. `f` must refuse (any error but `Internal`
    /// and `Unavailable`) only before changing anything; a SQLite error or
    /// a panic, which may come after a change, rolls back the whole batch
    /// and every write in it fails, since nothing can undo just this one.
    pub async fn write_checked_first<R, F>(&self, f: F) -> StoreResult<R>
    where
        R: Send + 'static,
        F: FnOnce(&Connection) -> StoreResult<R> + Send + 'static,
    {
        self.queue(job(f, Undo::Batch)).await
    }

    async fn queue<R>(&self, (job, rx): (Job, oneshot::Receiver<StoreResult<R>>)) -> StoreResult<R> {
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

/// Numbers what asks for it in the order the writer thread runs it,
/// which is the order it commits in (`VoteOutcome::seq`). One count for
/// the process: each store's own numbers still only grow.
static SEQ: AtomicU64 = AtomicU64::new(1);

/// The next number; call from a write job, on the writer thread.
pub fn next_seq() -> u64 {
    SEQ.fetch_add(1, Ordering::Relaxed)
}

/// How a failed job's changes are undone.
#[derive(Clone, Copy)]
enum Undo {
    /// Rolled back to the job's own savepoint.
    Savepoint,
    /// A refusal changed nothing; any other failure rolls back the batch.
    Batch,
}

/// Wraps `f` as a batch job; the receiver gets its result once the batch's
/// fate is known.
fn job<R, F>(f: F, undo: Undo) -> (Job, oneshot::Receiver<StoreResult<R>>)
where
    R: Send + 'static,
    F: FnOnce(&Connection) -> StoreResult<R> + Send + 'static,
{
    let (tx, rx) = oneshot::channel();
    let job: Job = Box::new(move |conn| {
        let result = match (conn, undo) {
            (Ok(conn), Undo::Savepoint) => in_savepoint(conn, f),
            (Ok(conn), Undo::Batch) => checked_first(conn, f),
            (Err(e), _) => Err(e.clone()),
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
    run_cached(conn, "SAVEPOINT job")?;
    let result = catch_unwind(AssertUnwindSafe(|| f(conn)))
        .unwrap_or_else(|_| Err(StoreError::Internal("a write panicked".into())));
    if result.is_err() {
        run_cached(conn, "ROLLBACK TO job")?;
    }
    run_cached(conn, "RELEASE job")?;
    result
}

/// Runs `f` without a savepoint (`Writer::write_checked_first`). After a
/// failure that may have left a change behind, the whole transaction is
/// rolled back: `commit_batch` then fails the batch, as after an I/O error.
fn checked_first<R>(conn: &Connection, f: impl FnOnce(&Connection) -> StoreResult<R>) -> StoreResult<R> {
    let result = catch_unwind(AssertUnwindSafe(|| f(conn)))
        .unwrap_or_else(|_| Err(StoreError::Internal("a write panicked".into())));
    if let Err(StoreError::Internal(_) | StoreError::Unavailable(_)) = &result
        && !conn.is_autocommit()
    {
        tracing::error!("a write failed after it may have changed rows: rolling back its whole batch");
        let _ = conn.execute_batch("ROLLBACK");
    }
    result
}

/// The WAL's size limit, enforced by the writer as a last resort.
///
/// The checkpointer normally keeps the WAL small, but a checkpoint can only
/// reset the WAL when it gets the write lock between commits, and a writer
/// that commits back to back never lets go of it. So when the WAL has
/// grown past its limit anyway, the writer itself runs a RESTART
/// checkpoint between two batches: writes wait a moment (backpressure)
/// instead of the WAL, and every later read, growing without bound.
///
/// RESTART, not TRUNCATE: the next commits write the file again from its
/// start, over pages the kernel still holds. After a truncation every
/// frame was written into a new page of the page cache and new blocks of
/// the file, and under a stream of posts the bound trips about once a
/// second: that, and the truncation itself, took ~14 % of the writer
/// thread (docs/PERFORMANCE.md, "Writes over HTTP"). The file keeps its
/// size (`journal_size_limit` caps it); the checkpointer truncates it once
/// writes pause.
pub struct WalBound {
    pub limit_bytes: u64,
    /// The WAL's frames after the last commit (the WAL hook's count): the
    /// file's own size says nothing once the log restarts inside it.
    pub log: Arc<WalLog>,
    /// The database's page size, for `log`'s bytes.
    pub page_size: u64,
    /// Shared with the checkpointer: SQLite refuses (SQLITE_BUSY, without
    /// waiting) a checkpoint while another one runs, so under load the
    /// writer's TRUNCATE kept losing to the checkpointer's PASSIVE and the
    /// WAL grew. Taking turns on this lock makes the writer wait instead.
    pub lock: std::sync::Arc<std::sync::Mutex<()>>,
    /// Where the writer records its batches, commits and checkpoints.
    pub metrics: crate::store::StoreMetrics,
}

impl WalBound {
    /// Past the limit, resets the WAL before the next batch. Writes wait for
    /// it: a bounded WAL needs that backpressure. Readers still using old
    /// frames are waited for by SQLite's busy handler (`busy_timeout`).
    fn enforce(&self, conn: &Connection) {
        let size = self.log.bytes(self.page_size);
        if size <= self.limit_bytes {
            return;
        }
        let _turn = self.lock.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let started = std::time::Instant::now();
        let r = conn.query_row("PRAGMA wal_checkpoint(RESTART)", [], |r| r.get::<_, i64>(0));
        self.metrics.checkpoint("RESTART", "writer", started.elapsed());
        match r {
            Ok(0) => tracing::debug!(size, "WAL over its limit: restarted by the writer"),
            Ok(_) => tracing::debug!(size, "WAL over its limit: readers kept the checkpoint from finishing"),
            Err(e) => tracing::warn!(error = %e, "WAL checkpoint by the writer failed"),
        }
    }
}

fn run(conn: Connection, rx: Receiver<Msg>, max_batch: usize, wal: WalBound, mut backlog: Backlog) {
    let mut batch: Vec<Job> = Vec::with_capacity(max_batch);
    let mut stop: Option<oneshot::Sender<()>> = None;
    while stop.is_none() {
        let next = match backlog.deadline() {
            Some(deadline) => rx.recv_deadline(deadline),
            None => rx.recv().map_err(|_| RecvTimeoutError::Disconnected),
        };
        match next {
            Ok(Msg::Job(job)) => batch.push(job),
            Ok(Msg::Shutdown(done)) => stop = Some(done),
            Err(RecvTimeoutError::Timeout) => {
                // No write came to carry the search queue along: index it
                // in a transaction of its own (after a failure, try again
                // a while later rather than at once, over and over).
                if !commit_batch(&conn, &mut batch, &wal.metrics, &mut backlog, true) {
                    backlog.postpone();
                }
                continue;
            }
            Err(RecvTimeoutError::Disconnected) => break,
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
            commit_batch(&conn, &mut batch, &wal.metrics, &mut backlog, false);
            wal.enforce(&conn);
        }
    }
    // Jobs still queued behind the shutdown request are committed too, and
    // the search queue is indexed before the process goes.
    while let Ok(Msg::Job(job)) = rx.try_recv() {
        batch.push(job);
    }
    if !batch.is_empty() || backlog.deadline().is_some() {
        commit_batch(&conn, &mut batch, &wal.metrics, &mut backlog, true);
    }
    let _turn = wal.lock.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    if let Err(e) = conn.execute_batch("PRAGMA wal_checkpoint(TRUNCATE)") {
        tracing::warn!(error = %e, "final checkpoint failed");
    }
    if let Some(done) = stop {
        let _ = done.send(());
    }
}

/// Runs `batch` in one transaction and commits it; whether it committed.
/// `index_now`: index the search queue before COMMIT even if it is not due
/// yet (an empty batch with it set is a transaction that only does that).
fn commit_batch(
    conn: &Connection,
    batch: &mut Vec<Job>,
    metrics: &crate::store::StoreMetrics,
    backlog: &mut Backlog,
    index_now: bool,
) -> bool {
    let (writes, started) = (batch.len(), std::time::Instant::now());
    // A ROLLBACK that failed after the last batch (an I/O error on a full
    // disk) must not leave the connection inside that transaction for good:
    // every later BEGIN would fail and the writer would be wedged.
    if !conn.is_autocommit() {
        tracing::warn!("the previous write transaction is still open; rolling it back");
        let _ = conn.execute_batch("ROLLBACK");
    }
    // The batch's search index changes are queued, and the queue applied
    // before COMMIT when it is due (see `search_queue`).
    let began = run_cached(conn, "BEGIN IMMEDIATE").and_then(|_| search_queue::defer(conn));
    if let Err(e) = began {
        tracing::error!(error = %e, "cannot begin write transaction");
        if !conn.is_autocommit() {
            let _ = conn.execute_batch("ROLLBACK");
        }
        let failed = Err(e.clone());
        for job in batch.drain(..) {
            job(Err(&e))(&failed);
        }
        return false;
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
                        "the write transaction was rolled back after an error in one of its writes (disk full?)".into(),
                    ));
                }
            }
        }
    }
    let committed = match lost {
        Some(e) => Err(e),
        None => search_queue::finish(conn, backlog, index_now)
            .and_then(|left_queued| run_cached(conn, "COMMIT").map(|_| left_queued)),
    };
    let committed = match committed {
        Ok(left_queued) => {
            // Before the callers hear back: a search after any of them
            // must know to have the queue indexed first.
            backlog.committed(left_queued);
            Ok(())
        }
        Err(e) => {
            tracing::error!(error = %e, "group commit failed; rolling back");
            let _ = conn.execute_batch("ROLLBACK");
            Err(e)
        }
    };
    // Recorded before the callers hear back, so a scrape after a write sees it.
    if writes > 0 {
        metrics.commit(writes, started.elapsed());
    }
    let ok = committed.is_ok();
    for done in completions {
        done(&committed);
    }
    ok
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::sqlite::conn::map_err;

    fn metrics() -> crate::store::StoreMetrics {
        crate::store::StoreMetrics::new(std::path::Path::new("unused.db"))
    }

    /// A search queue indexed at every batch that leaves anything in it.
    fn eager(conn: &Connection) -> Backlog {
        Backlog::open(conn, Arc::new(AtomicBool::new(false)), std::time::Duration::ZERO).expect("backlog")
    }

    /// A table `t` and the search queue's tables, which every batch uses.
    fn database(setup: &str) -> Connection {
        with_schema(Connection::open_in_memory().expect("open"), setup)
    }

    /// `database`, in a file.
    fn database_at(path: &std::path::Path, setup: &str) -> Connection {
        with_schema(Connection::open(path).expect("open"), setup)
    }

    fn with_schema(conn: Connection, setup: &str) -> Connection {
        conn.execute_batch(
            "CREATE TABLE fts_defer (deferred INTEGER NOT NULL); INSERT INTO fts_defer VALUES (0);
             CREATE TABLE fts_queue (seq INTEGER PRIMARY KEY, posts INTEGER NOT NULL, command TEXT,
                 item INTEGER NOT NULL, title TEXT, body TEXT);
             CREATE VIRTUAL TABLE topics_fts USING fts5(title, body);
             CREATE VIRTUAL TABLE posts_fts USING fts5(body);
             CREATE TABLE t (x INTEGER);",
        )
        .expect("schema");
        conn.execute_batch(setup).expect("setup");
        conn
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
        let conn = database("");
        let (first, first_rx) = job(insert(1), Undo::Savepoint);
        let (abandon, abandon_rx) = job(
            |c: &Connection| -> StoreResult<()> {
                c.execute_batch("INSERT INTO t VALUES (2); ROLLBACK").map_err(map_err)?;
                Err(StoreError::Unavailable("database or disk is full".into()))
            },
            Undo::Savepoint,
        );
        let (after, after_rx) = job(insert(3), Undo::Savepoint);
        commit_batch(&conn, &mut vec![first, abandon, after], &metrics(), &mut eager(&conn), false);
        for (name, rx) in [("first", first_rx), ("abandon", abandon_rx), ("after", after_rx)] {
            let out = rx.blocking_recv().expect("answered");
            assert!(matches!(out, Err(StoreError::Unavailable(_))), "{name}: {out:?}");
        }
        assert_eq!(count(&conn), 0, "nothing of a failed batch is stored");

        // The writer is not wedged: the next batch commits.
        let (next, next_rx) = job(insert(4), Undo::Savepoint);
        commit_batch(&conn, &mut vec![next], &metrics(), &mut eager(&conn), false);
        assert!(next_rx.blocking_recv().expect("answered").is_ok());
        assert_eq!(count(&conn), 1);
    }

    #[test]
    fn a_write_checked_first_that_refuses_leaves_the_rest_of_its_batch_committed() {
        let conn = database("");
        let (first, first_rx) = job(insert(1), Undo::Batch);
        let (refused, refused_rx) =
            job(|_: &Connection| -> StoreResult<()> { Err(StoreError::Invalid("no".into())) }, Undo::Batch);
        let (after, after_rx) = job(insert(3), Undo::Batch);
        commit_batch(&conn, &mut vec![first, refused, after], &metrics(), &mut eager(&conn), false);
        assert!(first_rx.blocking_recv().expect("answered").is_ok());
        assert!(matches!(refused_rx.blocking_recv().expect("answered"), Err(StoreError::Invalid(_))));
        assert!(after_rx.blocking_recv().expect("answered").is_ok());
        assert_eq!(count(&conn), 2);
    }

    /// Without a savepoint, a write that fails after a change cannot be
    /// undone alone: its whole batch fails and nothing of it is stored.
    #[test]
    fn a_write_checked_first_that_fails_after_a_change_fails_its_whole_batch() {
        let conn = database("");
        let (first, first_rx) = job(insert(1), Undo::Batch);
        let (half, half_rx) = job(
            |c: &Connection| -> StoreResult<()> {
                c.execute("INSERT INTO t VALUES (2)", []).map_err(map_err)?;
                c.execute("INSERT INTO missing VALUES (2)", []).map_err(map_err)?;
                Ok(())
            },
            Undo::Batch,
        );
        let (after, after_rx) = job(insert(3), Undo::Savepoint);
        commit_batch(&conn, &mut vec![first, half, after], &metrics(), &mut eager(&conn), false);
        assert!(matches!(first_rx.blocking_recv().expect("answered"), Err(StoreError::Unavailable(_))));
        assert!(matches!(half_rx.blocking_recv().expect("answered"), Err(StoreError::Unavailable(_))));
        assert!(matches!(after_rx.blocking_recv().expect("answered"), Err(StoreError::Unavailable(_))));
        assert_eq!(count(&conn), 0, "nothing of a failed batch is stored");

        let (next, next_rx) = job(insert(4), Undo::Batch);
        commit_batch(&conn, &mut vec![next], &metrics(), &mut eager(&conn), false);
        assert!(next_rx.blocking_recv().expect("answered").is_ok());
        assert_eq!(count(&conn), 1);
    }

    fn queued_and_indexed(conn: &Connection) -> (i64, i64) {
        conn.query_row(
            "SELECT (SELECT count(*) FROM fts_queue), (SELECT count(*) FROM posts_fts WHERE posts_fts MATCH 'zebra')",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .expect("count")
    }

    /// A job whose trigger would queue a post's words for the index.
    fn queue_a_post(c: &Connection) -> StoreResult<()> {
        c.execute("INSERT INTO fts_queue (posts, command, item, body) VALUES (1, NULL, 7, 'a zebra post')", [])
            .map(drop)
            .map_err(map_err)
    }

    #[test]
    fn a_batch_leaves_search_changes_queued_until_they_are_due_and_says_so() {
        let conn = database("");
        let pending = Arc::new(AtomicBool::new(false));
        let mut backlog = Backlog::open(&conn, pending.clone(), std::time::Duration::from_secs(3600)).expect("open");
        let (job, rx) = job(queue_a_post, Undo::Savepoint);
        assert!(commit_batch(&conn, &mut vec![job], &metrics(), &mut backlog, false));
        assert!(rx.blocking_recv().expect("answered").is_ok());
        assert_eq!(queued_and_indexed(&conn), (1, 0), "committed, not yet indexed");
        assert!(pending.load(std::sync::atomic::Ordering::Acquire), "searches must have it indexed first");
        assert!(backlog.deadline().is_some());
        let deferred: i64 = conn.query_row("SELECT deferred FROM fts_defer", [], |r| r.get(0)).expect("flag");
        assert_eq!(deferred, 0, "no other connection ever sees the triggers deferred");

        // A transaction that only indexes (the writer's, once it is due).
        assert!(commit_batch(&conn, &mut Vec::new(), &metrics(), &mut backlog, true));
        assert_eq!(queued_and_indexed(&conn), (0, 1));
        assert!(!pending.load(std::sync::atomic::Ordering::Acquire));
        assert_eq!(backlog.deadline(), None);
    }

    /// A search's request to index, in the middle of a batch: what was
    /// queued is indexed, and the writes after it in the batch still queue.
    #[test]
    fn indexing_for_a_search_inside_a_batch_keeps_the_rest_of_the_batch_deferred() {
        let conn = database("INSERT INTO fts_queue (posts, command, item, body) VALUES (1, NULL, 6, 'zebra')");
        let mut backlog =
            Backlog::open(&conn, Arc::new(AtomicBool::new(true)), std::time::Duration::from_secs(3600)).expect("open");
        let (index, index_rx) = job(search_queue::apply_in_batch, Undo::Savepoint);
        let (deferred, deferred_rx) = job(
            |c: &Connection| c.query_row("SELECT deferred FROM fts_defer", [], |r| r.get::<_, i64>(0)).map_err(map_err),
            Undo::Savepoint,
        );
        let (later, later_rx) = job(queue_a_post, Undo::Savepoint);
        assert!(commit_batch(&conn, &mut vec![index, deferred, later], &metrics(), &mut backlog, false));
        assert!(index_rx.blocking_recv().expect("answered").is_ok());
        assert_eq!(deferred_rx.blocking_recv().expect("answered").expect("read"), 1, "still deferred");
        assert!(later_rx.blocking_recv().expect("answered").is_ok());
        assert_eq!(queued_and_indexed(&conn), (1, 1), "the old change indexed, the later one queued");
    }

    #[test]
    fn the_writer_indexes_a_queue_left_alone_within_its_max_age_and_what_it_finds_at_start() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("w.db");
        drop(database_at(&path, "INSERT INTO fts_queue (posts, command, item, body) VALUES (1, NULL, 6, 'zebra')"));
        let pending = Arc::new(AtomicBool::new(false));
        let wal = WalBound {
            limit_bytes: u64::MAX,
            log: Arc::new(WalLog::default()),
            page_size: 4096,
            lock: Arc::new(std::sync::Mutex::new(())),
            metrics: metrics(),
        };
        let conn = Connection::open(&path).expect("open");
        let writer = Writer::start(conn, 8, wal, pending.clone()).expect("start");
        assert!(pending.load(std::sync::atomic::Ordering::Acquire), "a queue left by an earlier process is pending");
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
        runtime.block_on(writer.write(queue_a_post)).expect("write");
        let reader = Connection::open(&path).expect("reader");
        // No write and no search comes: the writer indexes both by itself.
        let started = std::time::Instant::now();
        while queued_and_indexed(&reader) != (0, 2) {
            assert!(started.elapsed() < std::time::Duration::from_secs(20), "{:?}", queued_and_indexed(&reader));
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        assert!(!pending.load(std::sync::atomic::Ordering::Acquire));
        runtime.block_on(writer.shutdown());
    }

    #[test]
    fn a_transaction_left_open_is_rolled_back_before_the_next_batch() {
        let conn = database("BEGIN; INSERT INTO t VALUES (1);");
        let (next, next_rx) = job(insert(2), Undo::Savepoint);
        commit_batch(&conn, &mut vec![next], &metrics(), &mut eager(&conn), false);
        assert!(next_rx.blocking_recv().expect("answered").is_ok());
        let stored: Vec<i64> =
            conn.prepare("SELECT x FROM t").and_then(|mut s| s.query_map([], |r| r.get(0))?.collect()).expect("select");
        assert_eq!(stored, [2]);
    }
}
