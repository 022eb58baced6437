//! Pictures' rows and the references bodies make to them (migration
//! 0011): recording an upload within its quotas, the references written
//! with each body, and the rows freed when the last body showing them is
//! deleted. The files are the app's (`app::media`).

use rusqlite::{Connection, OptionalExtension, Row, params};

use super::conn::map_err;
use crate::model::Timestamp;
use crate::model::media::{Media, MediaQuota, MediaUsage, Recorded, over_quota};
use crate::store::{MediaRow, StoreResult};

const COLS: &str = "name, owner_id, bytes, width, height, content_type, created_at";

fn media_row(r: &Row<'_>) -> rusqlite::Result<Media> {
    Ok(Media {
        name: r.get(0)?,
        owner_id: r.get(1)?,
        bytes: r.get(2)?,
        width: r.get(3)?,
        height: r.get(4)?,
        content_type: r.get(5)?,
        created_at: Timestamp(r.get(6)?),
    })
}

fn sum(conn: &Connection, sql: &str, p: impl rusqlite::Params) -> StoreResult<i64> {
    conn.prepare_cached(sql).and_then(|mut s| s.query_row(p, |r| r.get(0))).map_err(map_err)
}

pub fn record_media(conn: &Connection, media: &Media, quota: MediaQuota) -> StoreResult<Recorded> {
    let existing = conn
        .prepare_cached(&format!("SELECT {COLS} FROM media WHERE name = ?1"))
        .and_then(|mut s| s.query_row([&media.name], media_row).optional())
        .map_err(map_err)?;
    if let Some(existing) = existing {
        // Uploaded again: kept, even if its last showing was just deleted.
        conn.prepare_cached("UPDATE media SET freed_at = NULL WHERE name = ?1")
            .and_then(|mut s| s.execute([&media.name]))
            .map_err(map_err)?;
        return Ok(Recorded::Existing(existing));
    }
    let user_used = sum(conn, "SELECT coalesce(sum(bytes), 0) FROM media WHERE owner_id = ?1", [media.owner_id])?;
    let total_used = sum(conn, "SELECT coalesce(sum(bytes), 0) FROM media", [])?;
    if let Some(refused) = over_quota(quota, user_used, total_used, media.bytes) {
        return Ok(refused);
    }
    conn.prepare_cached(&format!("INSERT INTO media ({COLS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)"))
        .and_then(|mut s| {
            s.execute(params![
                media.name,
                media.owner_id,
                media.bytes,
                media.width,
                media.height,
                media.content_type,
                media.created_at.0
            ])
        })
        .map_err(map_err)?;
    Ok(Recorded::New(media.clone()))
}

pub fn usage(conn: &Connection, owner: Option<i64>) -> StoreResult<MediaUsage> {
    let (sql, owner) = match owner {
        Some(id) => ("SELECT count(*), coalesce(sum(bytes), 0) FROM media WHERE owner_id = ?1", id),
        None => ("SELECT count(*), coalesce(sum(bytes), 0) FROM media WHERE ?1 = ?1", 0),
    };
    conn.prepare_cached(sql)
        .and_then(|mut s| s.query_row([owner], |r| Ok(MediaUsage { files: r.get(0)?, bytes: r.get(1)? })))
        .map_err(map_err)
}

/// Deletes the rows freed (`freed_at`) that nothing shows any more.
pub fn take_freed(conn: &Connection) -> StoreResult<Vec<String>> {
    conn.prepare_cached(
        "DELETE FROM media WHERE freed_at IS NOT NULL \
         AND NOT EXISTS (SELECT 1 FROM media_refs r WHERE r.media = media.name) RETURNING name",
    )
    .and_then(|mut s| s.query_map([], |r| r.get(0))?.collect())
    .map_err(map_err)
}

/// A page of every row, by name, for `pith media gc`.
pub fn rows(conn: &Connection, after: &str, limit: usize) -> StoreResult<Vec<MediaRow>> {
    conn.prepare_cached(
        "SELECT name, created_at, EXISTS (SELECT 1 FROM media_refs r WHERE r.media = m.name) \
         FROM media m WHERE name > ?1 ORDER BY name LIMIT ?2",
    )
    .and_then(|mut s| {
        s.query_map(params![after, limit as i64], |r| {
            Ok(MediaRow { name: r.get(0)?, created_at: Timestamp(r.get(1)?), referenced: r.get(2)? })
        })?
        .collect()
    })
    .map_err(map_err)
}

/// Deletes these rows and their references.
pub fn forget(conn: &Connection, names: &[String]) -> StoreResult<usize> {
    let mut n = 0;
    for name in names {
        conn.prepare_cached("DELETE FROM media_refs WHERE media = ?1")
            .and_then(|mut s| s.execute([name]))
            .map_err(map_err)?;
        n += conn
            .prepare_cached("DELETE FROM media WHERE name = ?1")
            .and_then(|mut s| s.execute([name]))
            .map_err(map_err)?;
    }
    Ok(n)
}

/// The body of topic (`kind` 0) or post (1) `id` now shows `names`: its
/// references are replaced (names with no row are no reference), and a
/// picture it shows is no longer freed.
pub fn set_refs(conn: &Connection, kind: i64, id: i64, names: &[String]) -> StoreResult<()> {
    conn.prepare_cached("DELETE FROM media_refs WHERE kind = ?1 AND target_id = ?2")
        .and_then(|mut s| s.execute([kind, id]))
        .map_err(map_err)?;
    add_refs(conn, kind, id, names)
}

/// `set_refs` for a topic or post just inserted, which has none to drop:
/// their rows are never deleted (only marked), so a new id was never used
/// before. The `DELETE` was ~3 % of the server's CPU per post (perf,
/// docs/PERFORMANCE.md "Writes over HTTP").
pub fn add_refs(conn: &Connection, kind: i64, id: i64, names: &[String]) -> StoreResult<()> {
    for name in names {
        conn.prepare_cached(
            "INSERT INTO media_refs (media, kind, target_id) SELECT name, ?2, ?3 FROM media WHERE name = ?1 \
             ON CONFLICT DO NOTHING",
        )
        .and_then(|mut s| s.execute(params![name, kind, id]))
        .map_err(map_err)?;
        conn.prepare_cached("UPDATE media SET freed_at = NULL WHERE name = ?1")
            .and_then(|mut s| s.execute([name]))
            .map_err(map_err)?;
    }
    Ok(())
}

/// The topic or post was deleted: its pictures are freed, to go once
/// nothing else shows them (`take_freed`).
pub fn drop_refs(conn: &Connection, kind: i64, id: i64, now: Timestamp) -> StoreResult<()> {
    conn.prepare_cached(
        "UPDATE media SET freed_at = ?3 WHERE name IN \
         (SELECT media FROM media_refs WHERE kind = ?1 AND target_id = ?2)",
    )
    .and_then(|mut s| s.execute([kind, id, now.0]))
    .map_err(map_err)?;
    conn.prepare_cached("DELETE FROM media_refs WHERE kind = ?1 AND target_id = ?2")
        .and_then(|mut s| s.execute([kind, id]))
        .map_err(map_err)?;
    Ok(())
}

/// The account is deleted: with `erased` content, its bodies' references
/// go (their pictures freed); its own pictures are freed and no longer
/// its, so those that other bodies show stay.
pub fn drop_user(conn: &Connection, user_id: i64, erased: bool, now: Timestamp) -> StoreResult<()> {
    const THEIRS: &str = "(kind = 0 AND target_id IN (SELECT id FROM topics WHERE author_id = ?1)) \
         OR (kind = 1 AND target_id IN (SELECT id FROM posts WHERE author_id = ?1))";
    let mut statements = Vec::new();
    if erased {
        statements.push(format!(
            "UPDATE media SET freed_at = ?2 WHERE name IN (SELECT media FROM media_refs WHERE {THEIRS})"
        ));
        statements.push(format!("DELETE FROM media_refs WHERE ({THEIRS}) AND ?2 = ?2"));
    }
    statements.push("UPDATE media SET freed_at = ?2, owner_id = NULL WHERE owner_id = ?1".into());
    for sql in statements {
        conn.prepare_cached(&sql).and_then(|mut s| s.execute([user_id, now.0])).map_err(map_err)?;
    }
    Ok(())
}

/// A moderator removed (`removed`) or restored the topic (`kind` 0) or
/// post (1) `id`: a removal frees its pictures as a deletion does; a
/// restore records its body's pictures again (those still stored).
pub fn moderated(conn: &Connection, kind: i64, id: i64, removed: bool, now: Timestamp) -> StoreResult<()> {
    if removed {
        return drop_refs(conn, kind, id, now);
    }
    let sql = if kind == 0 { "SELECT body FROM topics WHERE id = ?1" } else { "SELECT body FROM posts WHERE id = ?1" };
    let body: Option<String> = conn
        .prepare_cached(sql)
        .and_then(|mut s| s.query_row([id], |r| r.get(0)).optional())
        .map_err(map_err)?
        .flatten();
    set_refs(conn, kind, id, &crate::markdown::media(body.as_deref().unwrap_or("")))
}
