//! Saved items, community blocks and a reader's marks on a topic.

use deadpool_postgres::GenericClient;
use tokio_postgres::Row;

use super::conn::{all, col, exec, opt};
use super::reads::community_id;
use crate::model::{EXCERPT_CHARS, Marks, Saved, SavedCursor, Timestamp, User, VoteTarget};
use crate::store::{SavedPage, StoreError, StoreResult};

/// The store's (kind, id) of a target, as `votes` names them.
fn key(target: VoteTarget) -> (i64, i64) {
    match target {
        VoteTarget::Topic(id) => (0, id),
        VoteTarget::Post(id) => (1, id),
    }
}

async fn exists(c: &impl GenericClient, target: VoteTarget) -> StoreResult<()> {
    let (sql, what) = match target {
        VoteTarget::Topic(_) => ("SELECT 1 FROM topics WHERE id = $1", "topic"),
        VoteTarget::Post(_) => ("SELECT 1 FROM posts WHERE id = $1", "post"),
    };
    match opt(c, sql, &[&key(target).1]).await? {
        Some(_) => Ok(()),
        None => Err(StoreError::NotFound(what)),
    }
}

pub async fn set_saved(
    c: &impl GenericClient,
    user: &User,
    target: VoteTarget,
    saved: bool,
    now: Timestamp,
) -> StoreResult<bool> {
    exists(c, target).await?;
    let (kind, id) = key(target);
    let changed = if saved {
        exec(
            c,
            "INSERT INTO saves (user_id, kind, target_id, saved_at) VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING",
            &[&user.id, &kind, &id, &now.0],
        )
        .await?
    } else {
        exec(c, "DELETE FROM saves WHERE user_id = $1 AND kind = $2 AND target_id = $3", &[&user.id, &kind, &id])
            .await?
    };
    Ok(changed > 0)
}

/// A saved item's columns: the save, the topic (the item or the post's),
/// and the post when the item is one.
const SAVED_SQL: &str = "SELECT s.kind, s.target_id, s.saved_at, t.id, t.title, c.name, t.deleted, t.removed, \
     substr(t.body, 1, $3), p.deleted, p.removed, substr(p.body, 1, $3) \
     FROM saves s \
     LEFT JOIN posts p ON s.kind = 1 AND p.id = s.target_id \
     JOIN topics t ON t.id = CASE WHEN s.kind = 0 THEN s.target_id ELSE p.topic_id END \
     JOIN communities c ON c.id = t.community_id \
     WHERE s.user_id = $1";

fn saved_row(r: &Row) -> StoreResult<Saved> {
    let kind: i64 = col(r, 0)?;
    let topic_removed: bool = col(r, 7)?;
    let (post_id, deleted, removed, excerpt) = if kind == 0 {
        (None, col(r, 6)?, topic_removed, col(r, 8)?)
    } else {
        (Some(col(r, 1)?), col(r, 9)?, col(r, 10)?, col(r, 11)?)
    };
    Ok(Saved {
        kind: if kind == 0 { "topic" } else { "post" },
        topic_id: col(r, 3)?,
        post_id,
        title: Some(col(r, 4)?),
        community: col(r, 5)?,
        excerpt,
        saved_at: Timestamp(col(r, 2)?),
        deleted,
        removed,
        topic_removed,
    })
}

pub async fn saved(
    c: &impl GenericClient,
    user_id: i64,
    after: Option<SavedCursor>,
    limit: usize,
) -> StoreResult<SavedPage> {
    let order = " ORDER BY s.saved_at DESC, s.kind DESC, s.target_id DESC LIMIT $2";
    let chars = EXCERPT_CHARS as i32;
    let take = (limit + 1) as i64;
    let rows = match after {
        None => all(c, &format!("{SAVED_SQL}{order}"), &[&user_id, &take, &chars]).await?,
        Some(k) => {
            let sql = format!("{SAVED_SQL} AND (s.saved_at, s.kind, s.target_id) < ($4, $5, $6){order}");
            all(c, &sql, &[&user_id, &take, &chars, &k.saved_at, &k.kind, &k.id]).await?
        }
    };
    let mut items = rows.iter().map(saved_row).collect::<StoreResult<Vec<_>>>()?;
    let next = if items.len() > limit {
        items.truncate(limit);
        items.last().map(SavedCursor::of)
    } else {
        None
    };
    Ok(SavedPage { items, next })
}

pub async fn set_blocked(
    c: &impl GenericClient,
    user: &User,
    community: &str,
    blocked: bool,
    now: Timestamp,
) -> StoreResult<bool> {
    let community = community_id(c, community).await?;
    let changed = if blocked {
        exec(
            c,
            "INSERT INTO community_blocks (user_id, community_id, created_at) VALUES ($1, $2, $3) \
             ON CONFLICT DO NOTHING",
            &[&user.id, &community, &now.0],
        )
        .await?
    } else {
        exec(c, "DELETE FROM community_blocks WHERE user_id = $1 AND community_id = $2", &[&user.id, &community])
            .await?
    };
    Ok(changed > 0)
}

pub async fn blocked(c: &impl GenericClient, user_id: i64) -> StoreResult<Vec<String>> {
    let rows = all(
        c,
        "SELECT c.name FROM community_blocks b JOIN communities c ON c.id = b.community_id \
         WHERE b.user_id = $1 ORDER BY c.name",
        &[&user_id],
    )
    .await?;
    rows.iter().map(|r| col(r, 0)).collect()
}

pub async fn marks(c: &impl GenericClient, user_id: i64, topic: i64, posts: &[i64]) -> StoreResult<Marks> {
    let sql = "SELECT 0::bigint, v.kind, v.target_id, v.value FROM votes v \
         WHERE v.user_id = $1 AND ((v.kind = 0 AND v.target_id = $2) OR (v.kind = 1 AND v.target_id = ANY($3))) \
         UNION ALL SELECT 1::bigint, s.kind, s.target_id, 0::bigint FROM saves s \
         WHERE s.user_id = $1 AND ((s.kind = 0 AND s.target_id = $2) OR (s.kind = 1 AND s.target_id = ANY($3))) \
         UNION ALL SELECT 2::bigint, 1::bigint, b.blocked_id, 0::bigint FROM user_blocks b \
         WHERE b.user_id = $1 AND b.blocked_id IN (SELECT author_id FROM posts WHERE id = ANY($3))";
    let posts = posts.to_vec();
    let rows = all(c, sql, &[&user_id, &topic, &posts]).await?;
    let rows: Vec<(i64, i64, i64, i64)> =
        rows.iter().map(|r| Ok((col(r, 0)?, col(r, 1)?, col(r, 2)?, col(r, 3)?))).collect::<StoreResult<_>>()?;
    Ok(Marks::from_rows(rows))
}

pub async fn topic_votes(c: &impl GenericClient, user_id: i64, topics: &[i64]) -> StoreResult<Vec<(i64, i8)>> {
    let topics = topics.to_vec();
    let rows = all(
        c,
        "SELECT target_id, value FROM votes WHERE user_id = $1 AND kind = 0 AND target_id = ANY($2)",
        &[&user_id, &topics],
    )
    .await?;
    rows.iter().map(|r| Ok((col(r, 0)?, col::<i64>(r, 1)?.clamp(-1, 1) as i8))).collect()
}
