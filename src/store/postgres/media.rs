//! Pictures' rows and the references bodies make to them: the SQL of
//! `store::sqlite::media`, which explains each function, for PostgreSQL.
//! Two uploads of one picture at once meet on the primary key (`ON
//! CONFLICT DO NOTHING`, then the row is read). The quota sums and the
//! insert run under one transaction-scoped advisory lock: under READ
//! COMMITTED, uploads racing each other (on one node or several) would
//! otherwise each read the sums without the others' pictures and pass a
//! quota together. On SQLite the one writer thread orders them.

use deadpool_postgres::GenericClient;
use tokio_postgres::Row;

use super::conn::{all, col, exec, one, opt};
use crate::model::Timestamp;
use crate::model::media::{Media, MediaQuota, MediaUsage, Recorded, over_quota};
use crate::store::{MediaRow, StoreResult};

/// Any number fixed for "recording a picture against the quotas"; advisory
/// locks are keyed by integers. One lock for all accounts, since the
/// site's quota sums everyone's pictures; recording is one short
/// transaction per upload.
const MEDIA_QUOTA_LOCK: i64 = 0x7069_7468_0003;

const COLS: &str = "name, owner_id, bytes, width, height, content_type, created_at";

fn media_row(r: &Row) -> StoreResult<Media> {
    Ok(Media {
        name: col(r, 0)?,
        owner_id: col(r, 1)?,
        bytes: col(r, 2)?,
        width: u32::try_from(col::<i64>(r, 3)?).unwrap_or(0),
        height: u32::try_from(col::<i64>(r, 4)?).unwrap_or(0),
        content_type: col(r, 5)?,
        created_at: Timestamp(col(r, 6)?),
    })
}

async fn existing(c: &impl GenericClient, name: &str) -> StoreResult<Option<Media>> {
    match opt(c, &format!("SELECT {COLS} FROM media WHERE name = $1"), &[&name]).await? {
        Some(r) => Ok(Some(media_row(&r)?)),
        None => Ok(None),
    }
}

pub async fn record_media(c: &impl GenericClient, media: &Media, quota: MediaQuota) -> StoreResult<Recorded> {
    // Taken first: each statement after it sees every upload committed by
    // the holders before (READ COMMITTED reads each statement's own
    // snapshot), the same picture's among them.
    exec(c, "SELECT pg_advisory_xact_lock($1)", &[&MEDIA_QUOTA_LOCK]).await?;
    if let Some(found) = existing(c, &media.name).await? {
        exec(c, "UPDATE media SET freed_at = NULL WHERE name = $1", &[&media.name]).await?;
        return Ok(Recorded::Existing(found));
    }
    let user_used: i64 = col(
        &one(c, "SELECT coalesce(sum(bytes), 0)::BIGINT FROM media WHERE owner_id = $1", &[&media.owner_id]).await?,
        0,
    )?;
    let total_used: i64 = col(&one(c, "SELECT coalesce(sum(bytes), 0)::BIGINT FROM media", &[]).await?, 0)?;
    if let Some(refused) = over_quota(quota, user_used, total_used, media.bytes) {
        return Ok(refused);
    }
    let (width, height) = (i64::from(media.width), i64::from(media.height));
    let inserted = exec(
        c,
        &format!("INSERT INTO media ({COLS}) VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (name) DO NOTHING"),
        &[&media.name, &media.owner_id, &media.bytes, &width, &height, &media.content_type, &media.created_at.0],
    )
    .await?;
    if inserted == 0 {
        // Another node's upload of the same picture committed first.
        if let Some(found) = existing(c, &media.name).await? {
            return Ok(Recorded::Existing(found));
        }
    }
    Ok(Recorded::New(media.clone()))
}

pub async fn usage(c: &impl GenericClient, owner: Option<i64>) -> StoreResult<MediaUsage> {
    let row = match owner {
        Some(id) => {
            one(c, "SELECT count(*), coalesce(sum(bytes), 0)::BIGINT FROM media WHERE owner_id = $1", &[&id]).await?
        }
        None => one(c, "SELECT count(*), coalesce(sum(bytes), 0)::BIGINT FROM media", &[]).await?,
    };
    Ok(MediaUsage { files: col(&row, 0)?, bytes: col(&row, 1)? })
}

pub async fn take_freed(c: &impl GenericClient) -> StoreResult<Vec<String>> {
    let rows = all(
        c,
        "DELETE FROM media WHERE freed_at IS NOT NULL \
         AND NOT EXISTS (SELECT 1 FROM media_refs r WHERE r.media = media.name) RETURNING name",
        &[],
    )
    .await?;
    rows.iter().map(|r| col(r, 0)).collect()
}

pub async fn rows(c: &impl GenericClient, after: &str, limit: usize) -> StoreResult<Vec<MediaRow>> {
    let limit = limit as i64;
    let rows = all(
        c,
        "SELECT name, created_at, EXISTS (SELECT 1 FROM media_refs r WHERE r.media = m.name) \
         FROM media m WHERE name > $1 ORDER BY name LIMIT $2",
        &[&after, &limit],
    )
    .await?;
    rows.iter()
        .map(|r| Ok(MediaRow { name: col(r, 0)?, created_at: Timestamp(col(r, 1)?), referenced: col(r, 2)? }))
        .collect()
}

pub async fn forget(c: &impl GenericClient, names: &[String]) -> StoreResult<usize> {
    let mut n = 0;
    for name in names {
        exec(c, "DELETE FROM media_refs WHERE media = $1", &[name]).await?;
        n += exec(c, "DELETE FROM media WHERE name = $1", &[name]).await? as usize;
    }
    Ok(n)
}

pub async fn set_refs(c: &impl GenericClient, kind: i64, id: i64, names: &[String]) -> StoreResult<()> {
    exec(c, "DELETE FROM media_refs WHERE kind = $1 AND target_id = $2", &[&kind, &id]).await?;
    for name in names {
        exec(
            c,
            "INSERT INTO media_refs (media, kind, target_id) SELECT name, $2, $3 FROM media WHERE name = $1 \
             ON CONFLICT DO NOTHING",
            &[name, &kind, &id],
        )
        .await?;
        exec(c, "UPDATE media SET freed_at = NULL WHERE name = $1", &[name]).await?;
    }
    Ok(())
}

pub async fn drop_refs(c: &impl GenericClient, kind: i64, id: i64, now: Timestamp) -> StoreResult<()> {
    exec(
        c,
        "UPDATE media SET freed_at = $3 WHERE name IN \
         (SELECT media FROM media_refs WHERE kind = $1 AND target_id = $2)",
        &[&kind, &id, &now.0],
    )
    .await?;
    exec(c, "DELETE FROM media_refs WHERE kind = $1 AND target_id = $2", &[&kind, &id]).await?;
    Ok(())
}

pub async fn drop_user(c: &impl GenericClient, user_id: i64, erased: bool, now: Timestamp) -> StoreResult<()> {
    const THEIRS: &str = "(kind = 0 AND target_id IN (SELECT id FROM topics WHERE author_id = $1)) \
         OR (kind = 1 AND target_id IN (SELECT id FROM posts WHERE author_id = $1))";
    if erased {
        let free =
            format!("UPDATE media SET freed_at = $2 WHERE name IN (SELECT media FROM media_refs WHERE {THEIRS})");
        exec(c, &free, &[&user_id, &now.0]).await?;
        exec(c, &format!("DELETE FROM media_refs WHERE {THEIRS}"), &[&user_id]).await?;
    }
    exec(c, "UPDATE media SET freed_at = $2, owner_id = NULL WHERE owner_id = $1", &[&user_id, &now.0]).await?;
    Ok(())
}

pub async fn moderated(c: &impl GenericClient, kind: i64, id: i64, removed: bool, now: Timestamp) -> StoreResult<()> {
    if removed {
        return drop_refs(c, kind, id, now).await;
    }
    let sql = if kind == 0 { "SELECT body FROM topics WHERE id = $1" } else { "SELECT body FROM posts WHERE id = $1" };
    let body: Option<String> = match opt(c, sql, &[&id]).await? {
        Some(r) => col(&r, 0)?,
        None => None,
    };
    set_refs(c, kind, id, &crate::markdown::media(body.as_deref().unwrap_or(""))).await
}
