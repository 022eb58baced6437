//! Renders the bodies stored without their HTML: every row once migration
//! 0003 adds `body_html`, and the rows `pith seed` writes straight into the
//! tables. Runs when the database is opened, before serving, on the writer
//! connection, in batches: each batch is rendered on every core, then
//! stored in one transaction. A database with nothing to render costs two
//! lookups in empty partial indexes.

use std::time::Instant;

use rusqlite::Connection;

use super::conn::map_err;
use crate::store::{StoreError, StoreResult};

/// Rows per batch: enough to keep every core busy, few enough that a batch
/// of 40,000-character bodies stays a few hundred MB at worst.
const BATCH: usize = 2048;

/// Renders and stores every missing `body_html`.
pub fn render_missing(conn: &mut Connection) -> StoreResult<()> {
    let started = Instant::now();
    // Each batch need not reach the disk on its own: a crash loses nothing
    // that the next start would not render again. The final checkpoint
    // syncs it all.
    conn.execute_batch("PRAGMA synchronous = NORMAL").map_err(map_err)?;
    let filled = fill_all(conn);
    conn.execute_batch("PRAGMA synchronous = FULL").map_err(map_err)?;
    let (posts, topics) = filled?;
    if posts + topics > 0 {
        let ms = started.elapsed().as_millis() as u64;
        tracing::info!(posts, topics, ms, "rendered the stored bodies that had no HTML yet");
        // The writer never checkpoints by itself: start serving with a
        // small WAL rather than one holding every rendered page.
        conn.execute_batch("PRAGMA wal_checkpoint(TRUNCATE)").map_err(map_err)?;
    }
    Ok(())
}

/// Renders the posts, then the topics; how many of each.
fn fill_all(conn: &mut Connection) -> StoreResult<(usize, usize)> {
    let posts = fill(
        conn,
        "SELECT id, body FROM posts WHERE body_html IS NULL ORDER BY id LIMIT ?1",
        "UPDATE posts SET body_html = ?2 WHERE id = ?1",
    )?;
    let topics = fill(
        conn,
        "SELECT id, body FROM topics WHERE body_html IS NULL AND body IS NOT NULL ORDER BY id LIMIT ?1",
        "UPDATE topics SET body_html = ?2 WHERE id = ?1",
    )?;
    Ok((posts, topics))
}

/// Renders what `select` finds, a batch at a time, until it finds nothing;
/// returns how many rows it rendered.
fn fill(conn: &mut Connection, select: &str, update: &str) -> StoreResult<usize> {
    let mut done = 0;
    loop {
        let rows: Vec<(i64, String)> = conn
            .prepare_cached(select)
            .and_then(|mut s| s.query_map([BATCH as i64], |r| Ok((r.get(0)?, r.get(1)?)))?.collect())
            .map_err(map_err)?;
        if rows.is_empty() {
            return Ok(done);
        }
        let rendered = render_all(&rows)?;
        let tx = conn.transaction().map_err(map_err)?;
        {
            let mut stmt = tx.prepare_cached(update).map_err(map_err)?;
            for (id, html) in &rendered {
                stmt.execute(rusqlite::params![id, html]).map_err(map_err)?;
            }
        }
        tx.commit().map_err(map_err)?;
        done += rows.len();
    }
}

/// Renders `rows` on every core, keeping their ids.
fn render_all(rows: &[(i64, String)]) -> StoreResult<Vec<(i64, String)>> {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let chunk = rows.len().div_ceil(threads).max(1);
    std::thread::scope(|s| {
        let workers: Vec<_> = rows
            .chunks(chunk)
            .map(|part| {
                s.spawn(move || part.iter().map(|(id, body)| (*id, crate::markdown::render(body))).collect::<Vec<_>>())
            })
            .collect();
        let mut out = Vec::with_capacity(rows.len());
        for w in workers {
            // A lost batch would be selected again forever: fail instead.
            out.extend(w.join().map_err(|_| StoreError::Internal("rendering a stored body panicked".into()))?);
        }
        Ok(out)
    })
}
