//! Hands the search indexes a whole transaction's changes at once
//! (migration 0004): `defer` makes the FTS triggers queue their changes
//! instead of applying them, `apply` applies the queue with one statement
//! per index and stops deferring. The writer brackets each group commit
//! with them, so the batch's new text becomes one FTS5 segment instead of
//! one per write (FTS5 flushes its in-memory terms at every savepoint, and
//! each write of a batch runs in its own).
//!
//! The queue holds the exact text each change indexes or forgets, in
//! order, so applying it later gives the indexes what the triggers of 0003
//! gave them at once. Both run inside the caller's transaction, and other
//! connections never see the flag set. The writer may commit with changes
//! still queued (`finish`, `Backlog`): it indexes them within `MAX_AGE`,
//! at `MAX_QUEUED`, before any search and when it stops; the queue is a
//! table, so a crash loses nothing of it.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use rusqlite::Connection;

use super::conn::run_cached;
use crate::store::StoreResult;

const DEFER: &str = "UPDATE fts_defer SET deferred = 1";
const TOPICS: &str = "INSERT INTO topics_fts (topics_fts, rowid, title, body) \
     SELECT command, item, title, body FROM fts_queue WHERE posts = 0 ORDER BY seq";
const POSTS: &str = "INSERT INTO posts_fts (posts_fts, rowid, body) \
     SELECT command, item, body FROM fts_queue WHERE posts = 1 ORDER BY seq";
const EMPTY: &str = "DELETE FROM fts_queue";
const RESUME: &str = "UPDATE fts_defer SET deferred = 0";

/// From now until `apply`, in this transaction, the FTS triggers queue.
pub fn defer(conn: &Connection) -> StoreResult<()> {
    run_cached(conn, DEFER).map(drop)
}

/// Indexes a new post's words, or queues them while deferred: what the
/// AFTER INSERT triggers on posts did until migration 0017, which dropped
/// them to spare every post a statement journal. Call it after each
/// `INSERT INTO posts` of a visible post, in the same transaction.
pub fn post_added(conn: &Connection, id: i64, body: &str) -> StoreResult<()> {
    let deferred = conn
        .prepare_cached("SELECT deferred FROM fts_defer")
        .and_then(|mut s| s.query_row([], |r| r.get::<_, bool>(0)))
        .map_err(super::conn::map_err)?;
    let sql = if deferred {
        "INSERT INTO fts_queue (posts, command, item, body) VALUES (1, NULL, ?1, ?2)"
    } else {
        "INSERT INTO posts_fts (rowid, body) VALUES (?1, ?2)"
    };
    conn.prepare_cached(sql)
        .and_then(|mut s| s.execute(rusqlite::params![id, body]))
        .map(drop)
        .map_err(super::conn::map_err)
}

/// Indexes the visible posts above the index's highest one: those another
/// program inserted into the file while Pith was not running, which no
/// trigger indexes since 0017. Applies the queue first, so nothing is
/// indexed twice. Runs in the caller's transaction when the database is
/// opened, and in `pith migrate`'s copy; how many it indexed.
/// The index is external-content (reading `posts_fts` reads `posts`), so
/// what it holds is read from its shadow table `posts_fts_docsize`, one
/// row per indexed post (https://sqlite.org/fts5.html, "Appendix B").
pub fn index_unindexed_posts(conn: &Connection) -> StoreResult<usize> {
    if queued(conn)? > 0 {
        apply(conn)?;
    }
    conn.execute(
        "INSERT INTO posts_fts (rowid, body) SELECT id, body FROM posts \
         WHERE id > (SELECT coalesce(max(id), 0) FROM posts_fts_docsize) \
         AND deleted = 0 AND removed = 0 ORDER BY id",
        [],
    )
    .map_err(super::conn::map_err)
}

/// Applies and empties the queue, and the triggers index at once again;
/// how many changes SQLite counted. Call it before COMMIT.
pub fn apply(conn: &Connection) -> StoreResult<usize> {
    let applied = run_cached(conn, TOPICS)? + run_cached(conn, POSTS)?;
    run_cached(conn, EMPTY)?;
    run_cached(conn, RESUME)?;
    Ok(applied)
}

/// Indexes the queue from inside a writer's batch (a search asked for
/// it), and keeps deferring: the batch's later writes still queue rather
/// than make FTS5 flush at each of their savepoints.
pub fn apply_in_batch(conn: &Connection) -> StoreResult<()> {
    apply(conn)?;
    defer(conn)
}

/// How long the writer keeps changes queued before it indexes them, and
/// how many it lets pile up. Indexing at every commit cost ~200 µs of the
/// writer's CPU per post when posts come one per commit: FTS5 writes a
/// segment and merges at each (the sixth session in `git show 8141355:docs/BENCHMARKS.md`). A
/// search never waits for this: it has the queue applied first
/// (`SqliteStore::search`), so what was acknowledged is always found.
pub const MAX_AGE: Duration = Duration::from_secs(1);
pub const MAX_QUEUED: i64 = 1000;

/// The writer's account of the changes it left queued between batches.
pub struct Backlog {
    /// When the oldest change still queued was committed.
    since: Option<Instant>,
    /// Whether anything is queued, for searches to read without a query.
    pending: Arc<AtomicBool>,
    max_age: Duration,
}

impl Backlog {
    /// Reads what an earlier process left queued (it stopped before
    /// indexing it): that is due a `max_age` from now.
    pub fn open(conn: &Connection, pending: Arc<AtomicBool>, max_age: Duration) -> StoreResult<Backlog> {
        let mut backlog = Backlog { since: None, pending, max_age };
        backlog.committed(queued(conn)? > 0);
        Ok(backlog)
    }

    /// When the queue must be indexed even if no write comes.
    pub fn deadline(&self) -> Option<Instant> {
        self.since.map(|t| t + self.max_age)
    }

    /// Records what a committed transaction left queued. Call before its
    /// writers are answered, so a search after any of them sees it.
    pub fn committed(&mut self, left_queued: bool) {
        if left_queued {
            self.since.get_or_insert_with(Instant::now);
        } else {
            self.since = None;
        }
        self.pending.store(left_queued, Ordering::Release);
    }

    /// After a failed attempt to index: the next try a `max_age` from now.
    pub fn postpone(&mut self) {
        if self.since.is_some() {
            self.since = Some(Instant::now());
        }
    }

    /// Whether `queued` changes must be indexed now. Those this very
    /// transaction queued count from now.
    fn due(&self, queued: i64) -> bool {
        let now = Instant::now();
        queued >= MAX_QUEUED || self.since.unwrap_or(now) + self.max_age <= now
    }
}

/// Ends a transaction's deferral before its COMMIT: indexes the queue when
/// it is due (or `now`), else leaves it for a later transaction. Returns
/// whether changes are left queued.
pub fn finish(conn: &Connection, backlog: &Backlog, now: bool) -> StoreResult<bool> {
    let queued = queued(conn)?;
    if queued > 0 && (now || backlog.due(queued)) {
        apply(conn)?;
        return Ok(false);
    }
    run_cached(conn, RESUME)?;
    Ok(queued > 0)
}

/// How many changes are queued: `seq` counts from 1 again after `apply`
/// empties the queue, so its maximum is the count, found in the index.
fn queued(conn: &Connection) -> StoreResult<i64> {
    conn.prepare_cached("SELECT coalesce(max(seq), 0) FROM fts_queue")
        .and_then(|mut s| s.query_row([], |r| r.get(0)))
        .map_err(super::conn::map_err)
}
