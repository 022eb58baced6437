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
//! gave them at once. Both run inside the caller's transaction: nothing is
//! queued once it commits, and other connections never see the flag set.

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

/// Applies and empties the queue, and the triggers index at once again;
/// how many changes SQLite counted. Call it before COMMIT.
pub fn apply(conn: &Connection) -> StoreResult<usize> {
    let applied = run_cached(conn, TOPICS)? + run_cached(conn, POSTS)?;
    run_cached(conn, EMPTY)?;
    run_cached(conn, RESUME)?;
    Ok(applied)
}
