//! Reads of a bounded part of a topic: a page of its posts, one post with
//! its depth, the thread under one post, as `store::sqlite::parts` does
//! them. None holds a whole topic in memory: the rows are chosen by their
//! ids and sizes first, then only the chosen ones are read whole.

use deadpool_postgres::GenericClient;
use tokio_postgres::types::ToSql;

use super::conn::{all, col, opt};
use super::reads::{POST_COLS, POST_FROM, post_row, topic};
use crate::model::paging::PageLimit;
use crate::model::{Post, Topic};
use crate::store::{PostCursor, PostPage, PostSort, StoreError, StoreResult};

/// What a post weighs against `PageLimit::bytes`: its text as stored
/// (`octet_length` of a TOASTed value reads its header, not the text).
const SIZE: &str = "(octet_length(p.body) + coalesce(octet_length(p.body_html), 0))::int8";

fn order(sort: PostSort) -> &'static str {
    match sort {
        PostSort::Best => "p.score DESC, p.id ASC",
        PostSort::New => "p.id DESC",
        PostSort::Old => "p.id ASC",
    }
}

/// (id, size) rows, as the key queries select them.
async fn keys(c: &impl GenericClient, sql: &str, params: &[&(dyn ToSql + Sync)]) -> StoreResult<Vec<(i64, i64)>> {
    all(c, sql, params).await?.iter().map(|r| Ok((col(r, 0)?, col(r, 1)?))).collect()
}

/// How many of `keys` (in order) `limit` takes, and whether any are left.
fn cut(keys: &[(i64, i64)], limit: PageLimit) -> (usize, bool) {
    limit.cut(keys.iter().map(|&(_, size)| usize::try_from(size).unwrap_or(0)))
}

/// The posts with these ids, whole, in `sort` order.
async fn posts_by_id(c: &impl GenericClient, ids: Vec<i64>, sort: PostSort) -> StoreResult<Vec<Post>> {
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let sql = format!("SELECT {POST_COLS} {POST_FROM} WHERE p.id = ANY($1) ORDER BY {}", order(sort));
    all(c, &sql, &[&ids]).await?.iter().map(post_row).collect()
}

fn room(limit: PageLimit) -> usize {
    limit.posts.max(1) + 1
}

pub async fn topic_page(
    c: &impl GenericClient,
    id: i64,
    sort: PostSort,
    after: Option<PostCursor>,
    limit: PageLimit,
) -> StoreResult<PostPage> {
    let topic = topic(c, id).await?;
    let room = i64::try_from(room(limit)).unwrap_or(i64::MAX);
    let order = order(sort);
    let keys = match after {
        None => {
            let sql = format!("SELECT p.id, {SIZE} FROM posts p WHERE p.topic_id = $1 ORDER BY {order} LIMIT $2");
            keys(c, &sql, &[&id, &room]).await?
        }
        Some(cursor) if cursor.sort() != sort => {
            return Err(StoreError::Invalid("cursor of another sort order".into()));
        }
        Some(PostCursor::Old(last) | PostCursor::New(last)) => {
            let op = if sort == PostSort::Old { ">" } else { "<" };
            let sql = format!(
                "SELECT p.id, {SIZE} FROM posts p WHERE p.topic_id = $1 AND p.id {op} $2 ORDER BY {order} LIMIT $3"
            );
            keys(c, &sql, &[&id, &last, &room]).await?
        }
        Some(PostCursor::Best(score, last)) => {
            let sql = format!(
                "SELECT p.id, {SIZE} FROM posts p WHERE p.topic_id = $1 \
                 AND (p.score < $2 OR (p.score = $2 AND p.id > $3)) ORDER BY {order} LIMIT $4"
            );
            keys(c, &sql, &[&id, &score, &last, &room]).await?
        }
    };
    let (count, more) = cut(&keys, limit);
    let posts = posts_by_id(c, keys[..count].iter().map(|k| k.0).collect(), sort).await?;
    let next = if more { posts.last().map(|p| PostCursor::after(sort, p)) } else { None };
    let bytes = keys[..count].iter().map(|&(_, size)| usize::try_from(size).unwrap_or(0)).sum();
    Ok(PostPage { topic, posts, next, bytes })
}

/// Counts a post's ancestors, up the primary key, `$2` at most.
const ANCESTORS: &str = "WITH RECURSIVE up(id, n) AS ( \
     SELECT $1::int8, 0 \
     UNION ALL \
     SELECT p.parent_id, up.n + 1 FROM posts p JOIN up ON p.id = up.id WHERE p.parent_id IS NOT NULL AND up.n < $2 \
     ) SELECT max(n)::int8 FROM up";

pub async fn topic_post(
    c: &impl GenericClient,
    topic_id: i64,
    post: i64,
    max_depth: usize,
) -> StoreResult<(Topic, Post, usize)> {
    let topic = topic(c, topic_id).await?;
    let sql = format!("SELECT {POST_COLS} {POST_FROM} WHERE p.id = $1 AND p.topic_id = $2");
    let p = match opt(c, &sql, &[&post, &topic_id]).await? {
        Some(r) => post_row(&r)?,
        None => return Err(StoreError::NotFound("post")),
    };
    let max = i32::try_from(max_depth).unwrap_or(i32::MAX);
    let depth: i64 = match opt(c, ANCESTORS, &[&post, &max]).await? {
        Some(r) => col(&r, 0)?,
        None => 0,
    };
    Ok((topic, p, usize::try_from(depth).unwrap_or(0)))
}

pub async fn thread(
    c: &impl GenericClient,
    topic_id: i64,
    root: i64,
    depth: usize,
    sort: PostSort,
    limit: PageLimit,
) -> StoreResult<(Topic, Vec<Post>, bool)> {
    let topic = topic(c, topic_id).await?;
    let sql = format!("SELECT {SIZE} FROM posts p WHERE p.id = $1 AND p.topic_id = $2");
    let size: i64 = match opt(c, &sql, &[&root, &topic_id]).await? {
        Some(r) => col(&r, 0)?,
        None => return Err(StoreError::NotFound("post")),
    };
    // Level by level, as on SQLite: one query per level, `limit.posts + 1`
    // keys at most, so the cut can tell if any were left out.
    let room = room(limit);
    let mut keys = vec![(root, size)];
    let mut level = vec![root];
    let sql = format!(
        "SELECT p.id, {SIZE} FROM posts p WHERE p.topic_id = $1 AND p.parent_id = ANY($2) ORDER BY p.id LIMIT $3"
    );
    for _ in 0..depth {
        if level.is_empty() || keys.len() >= room {
            break;
        }
        let left = i64::try_from(room - keys.len()).unwrap_or(i64::MAX);
        let found = self::keys(c, &sql, &[&topic_id, &level, &left]).await?;
        level = found.iter().map(|k| k.0).collect();
        keys.extend(found);
    }
    let (count, more) = cut(&keys, limit);
    let posts = posts_by_id(c, keys[..count].iter().map(|k| k.0).collect(), sort).await?;
    Ok((topic, posts, more))
}
