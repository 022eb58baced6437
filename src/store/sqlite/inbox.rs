//! The inbox's SQL: notifications written in the transaction of the write
//! that causes them (on the writer thread), a user's page of them and
//! their unread count (on a reader), and marking them read.

use rusqlite::{Connection, OptionalExtension, Row, params};

use super::conn::map_err;
use crate::model::inbox::MAX_UNREAD;
use crate::model::{InboxPage, MarkRead, NewNotice, Notice, NoticeKind, Notified, Timestamp};
use crate::store::{ListInbox, StoreResult};

/// The ids of the users named (case-insensitively: the column is NOCASE);
/// names of no one are skipped.
pub fn user_ids(conn: &Connection, names: &[String]) -> StoreResult<Vec<i64>> {
    let mut stmt =
        conn.prepare_cached("SELECT id FROM users WHERE name = ?1 AND deleted_at IS NULL").map_err(map_err)?;
    let mut ids = Vec::with_capacity(names.len());
    for name in names {
        if let Some(id) = stmt.query_row([name], |r| r.get(0)).optional().map_err(map_err)? {
            ids.push(id);
        }
    }
    Ok(ids)
}

/// Stores the notifications, but none from a user its recipient blocked;
/// returns what each notified user's live channel is told.
pub fn notify(conn: &Connection, notices: &[NewNotice], now: Timestamp) -> StoreResult<Vec<Notified>> {
    let mut out = Vec::with_capacity(notices.len());
    for n in notices {
        // The block first, then a one-row `INSERT ... VALUES`: as an
        // `INSERT ... SELECT` (rows of a query, so possibly several) SQLite
        // gave it a statement journal, a copy of every page it changed.
        let blocked = conn
            .prepare_cached("SELECT EXISTS (SELECT 1 FROM user_blocks WHERE user_id = ?1 AND blocked_id = ?2)")
            .and_then(|mut s| s.query_row(params![n.user_id, n.from_id], |r| r.get::<_, bool>(0)))
            .map_err(map_err)?;
        if blocked {
            continue;
        }
        conn.prepare_cached(
            "INSERT INTO notifications (user_id, kind, from_id, topic_id, post_id, excerpt, created_at) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
        )
        .and_then(|mut s| {
            s.execute(params![n.user_id, n.kind.as_str(), n.from_id, n.topic_id, n.post_id, n.excerpt, now.0])
        })
        .map_err(map_err)?;
        out.push(Notified {
            user_id: n.user_id,
            kind: Some(n.kind),
            topic_id: n.topic_id,
            post_id: n.post_id,
            unread: add_unread(conn, n.user_id, 1)?,
        });
    }
    Ok(out)
}

/// The user's unread count, up to `MAX_UNREAD`: stored (migration 0018),
/// kept by every change to `notifications` in this file, `messages.rs`
/// and `lifecycle.rs`.
pub fn unread(conn: &Connection, user_id: i64) -> StoreResult<i64> {
    Ok(stored_unread(conn, user_id)?.min(MAX_UNREAD))
}

fn stored_unread(conn: &Connection, user_id: i64) -> StoreResult<i64> {
    conn.prepare_cached("SELECT unread FROM inbox_unread WHERE user_id = ?1")
        .and_then(|mut s| s.query_row([user_id], |r| r.get(0)).optional())
        .map(|n| n.unwrap_or(0))
        .map_err(map_err)
}

/// Adds `n` (negative: notifications read or deleted) to the user's
/// stored count; the count after, up to `MAX_UNREAD`. Two single-row
/// statements, not an upsert with RETURNING, which SQLite runs through a
/// temporary table.
pub fn add_unread(conn: &Connection, user_id: i64, n: i64) -> StoreResult<i64> {
    let mut count = stored_unread(conn, user_id)?;
    if n != 0 {
        count = count.saturating_add(n).max(0);
        conn.prepare_cached("INSERT OR REPLACE INTO inbox_unread (user_id, unread) VALUES (?1, ?2)")
            .and_then(|mut s| s.execute(params![user_id, count]))
            .map_err(map_err)?;
    }
    Ok(count.min(MAX_UNREAD))
}

/// Counts the users' unread notifications again, after a change that
/// touched many users' at once (an account's deletion).
pub fn recount_unread(conn: &Connection, user_ids: &[i64]) -> StoreResult<()> {
    let mut recount = conn
        .prepare_cached(
            "INSERT OR REPLACE INTO inbox_unread (user_id, unread) \
             SELECT ?1, count(*) FROM notifications WHERE user_id = ?1 AND read = 0",
        )
        .map_err(map_err)?;
    for &user_id in user_ids {
        recount.execute([user_id]).map_err(map_err)?;
    }
    Ok(())
}

/// Every user's count from the notifications themselves (`pith migrate`
/// into SQLite, which copies the notifications).
pub fn recount_all_unread(conn: &Connection) -> StoreResult<()> {
    conn.execute_batch(
        "DELETE FROM inbox_unread;
         INSERT INTO inbox_unread (user_id, unread)
             SELECT user_id, count(*) FROM notifications WHERE read = 0 GROUP BY user_id;",
    )
    .map_err(map_err)
}

pub(super) fn notice_row(r: &Row<'_>) -> rusqlite::Result<Notice> {
    let kind: String = r.get(1)?;
    Ok(Notice {
        id: r.get(0)?,
        kind: NoticeKind::parse(&kind).unwrap_or(NoticeKind::Message),
        topic_id: r.get(2)?,
        post_id: r.get(3)?,
        from: r.get(4)?,
        excerpt: r.get(5)?,
        created_at: Timestamp(r.get(6)?),
        read: r.get(7)?,
    })
}

/// One page of the user's notifications, newest first.
pub fn inbox(conn: &Connection, user_id: i64, q: &ListInbox) -> StoreResult<InboxPage> {
    let mut items: Vec<Notice> = conn
        .prepare_cached(
            "SELECT n.id, n.kind, n.topic_id, n.post_id, u.name, n.excerpt, n.created_at, n.read \
             FROM notifications n LEFT JOIN users u ON u.id = n.from_id AND u.deleted_at IS NULL \
             WHERE n.user_id = ?1 AND n.id < ?2 AND (?3 = 0 OR n.read = 0) ORDER BY n.id DESC LIMIT ?4",
        )
        .and_then(|mut s| {
            let after = q.after.unwrap_or(i64::MAX);
            s.query_map(params![user_id, after, q.unread_only, q.limit as i64 + 1], notice_row)?.collect()
        })
        .map_err(map_err)?;
    let next = if items.len() > q.limit {
        items.truncate(q.limit);
        items.last().map(|n| n.id)
    } else {
        None
    };
    Ok(InboxPage { items, unread: unread(conn, user_id)?, next })
}

/// Marks the user's notifications read (ids of others' are ignored);
/// returns their unread count after.
pub fn mark_read(conn: &Connection, user_id: i64, mark: &MarkRead) -> StoreResult<i64> {
    let marked = match mark {
        MarkRead::All => conn
            .prepare_cached("UPDATE notifications SET read = 1 WHERE user_id = ?1 AND read = 0")
            .and_then(|mut s| s.execute([user_id])),
        MarkRead::Ids(ids) => conn
            .prepare_cached("UPDATE notifications SET read = 1 WHERE user_id = ?1 AND id = ?2 AND read = 0")
            .and_then(|mut s| ids.iter().try_fold(0, |n, id| Ok(n + s.execute(params![user_id, id])?))),
    }
    .map_err(map_err)?;
    add_unread(conn, user_id, -(marked as i64))
}
