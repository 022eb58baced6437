//! Reads of a bounded part of a topic: a page of its posts, one post with
//! its depth, the thread under one post. None holds a whole topic in
//! memory: the rows are chosen by their ids and sizes first, then only
//! the chosen ones are read whole (`temp_store = MEMORY` would otherwise
//! sort a huge topic's every row in RAM).

use rusqlite::types::Value;
use rusqlite::{Connection, OptionalExtension, params, params_from_iter};

use super::conn::map_err;
use super::reads::{POST_COLS, POST_FROM, post_row, topic};
use crate::model::paging::PageLimit;
use crate::model::{Post, Topic};
use crate::store::{PostCursor, PostPage, PostSort, StoreError, StoreResult};

/// What a post weighs against `PageLimit::bytes`: its text as stored.
/// `octet_length` reads the length from the record header, not the text.
const SIZE: &str = "octet_length(p.body) + coalesce(octet_length(p.body_html), 0)";

fn order(sort: PostSort) -> &'static str {
    match sort {
        PostSort::Best => "p.score DESC, p.id ASC",
        PostSort::New => "p.id DESC",
        PostSort::Old => "p.id ASC",
    }
}

/// (id, size) rows, as the key queries select them.
fn keys(conn: &Connection, sql: &str, args: Vec<Value>) -> StoreResult<Vec<(i64, i64)>> {
    conn.prepare_cached(sql)
        .and_then(|mut s| s.query_map(params_from_iter(args), |r| Ok((r.get(0)?, r.get(1)?)))?.collect())
        .map_err(map_err)
}

/// How many of `keys` (in order) `limit` takes, and whether any are left.
fn cut(keys: &[(i64, i64)], limit: PageLimit) -> (usize, bool) {
    limit.cut(keys.iter().map(|&(_, size)| usize::try_from(size).unwrap_or(0)))
}

/// The posts with these ids, whole, in `sort` order.
fn posts_by_id(conn: &Connection, ids: impl Iterator<Item = i64>, sort: PostSort) -> StoreResult<Vec<Post>> {
    let ids: Vec<i64> = ids.collect();
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let json = serde_json::to_string(&ids).map_err(|e| StoreError::Internal(e.to_string()))?;
    let sql = format!(
        "SELECT {POST_COLS} {POST_FROM} WHERE p.id IN (SELECT value FROM json_each(?1)) ORDER BY {}",
        order(sort)
    );
    conn.prepare_cached(&sql).and_then(|mut s| s.query_map([json], post_row)?.collect()).map_err(map_err)
}

pub fn topic_page(
    conn: &Connection,
    id: i64,
    sort: PostSort,
    after: Option<PostCursor>,
    limit: PageLimit,
) -> StoreResult<PostPage> {
    let topic = topic(conn, id)?;
    let mut args: Vec<Value> = vec![id.into()];
    let from = match after {
        None => "",
        Some(cursor) if cursor.sort() != sort => {
            return Err(StoreError::Invalid("cursor of another sort order".into()));
        }
        Some(PostCursor::Old(last)) => {
            args.push(last.into());
            " AND p.id > ?2"
        }
        Some(PostCursor::New(last)) => {
            args.push(last.into());
            " AND p.id < ?2"
        }
        Some(PostCursor::Best(score, last)) => {
            args.extend([score.into(), last.into()]);
            " AND (p.score < ?2 OR (p.score = ?2 AND p.id > ?3))"
        }
    };
    args.push(i64::try_from(limit.posts.max(1) + 1).unwrap_or(i64::MAX).into());
    let sql = format!(
        "SELECT p.id, {SIZE} FROM posts p WHERE p.topic_id = ?1{from} ORDER BY {} LIMIT ?{}",
        order(sort),
        args.len()
    );
    let keys = keys(conn, &sql, args)?;
    let (count, more) = cut(&keys, limit);
    let posts = posts_by_id(conn, keys[..count].iter().map(|k| k.0), sort)?;
    let next = if more { posts.last().map(|p| PostCursor::after(sort, p)) } else { None };
    let bytes = keys[..count].iter().map(|&(_, size)| usize::try_from(size).unwrap_or(0)).sum();
    Ok(PostPage { topic, posts, next, bytes })
}

/// Counts a post's ancestors, up the primary key, `?2` at most.
const ANCESTORS: &str = "WITH RECURSIVE up(id, n) AS ( \
     SELECT ?1, 0 \
     UNION ALL \
     SELECT p.parent_id, up.n + 1 FROM posts p JOIN up ON p.id = up.id WHERE p.parent_id IS NOT NULL AND up.n < ?2 \
     ) SELECT max(n) FROM up";

pub fn topic_post(conn: &Connection, topic_id: i64, post: i64, max_depth: usize) -> StoreResult<(Topic, Post, usize)> {
    let topic = topic(conn, topic_id)?;
    let p = conn
        .prepare_cached(&format!("SELECT {POST_COLS} {POST_FROM} WHERE p.id = ?1 AND p.topic_id = ?2"))
        .and_then(|mut s| s.query_row(params![post, topic_id], post_row).optional())
        .map_err(map_err)?
        .ok_or(StoreError::NotFound("post"))?;
    let max = i64::try_from(max_depth).unwrap_or(i64::MAX);
    let depth: i64 = conn
        .prepare_cached(ANCESTORS)
        .and_then(|mut s| s.query_row(params![post, max], |r| r.get(0)))
        .map_err(map_err)?;
    Ok((topic, p, usize::try_from(depth).unwrap_or(0)))
}

pub fn thread(
    conn: &Connection,
    topic_id: i64,
    root: i64,
    depth: usize,
    sort: PostSort,
    limit: PageLimit,
) -> StoreResult<(Topic, Vec<Post>, bool)> {
    let topic = topic(conn, topic_id)?;
    let size: i64 = conn
        .prepare_cached(&format!("SELECT {SIZE} FROM posts p WHERE p.id = ?1 AND p.topic_id = ?2"))
        .and_then(|mut s| s.query_row(params![root, topic_id], |r| r.get(0)).optional())
        .map_err(map_err)?
        .ok_or(StoreError::NotFound("post"))?;
    // Level by level: no index leads from a post to its replies, so each
    // level is one walk of the topic's posts (its index), never one per
    // post; `limit.posts + 1` keys at most, so the cut can tell if any
    // were left out.
    let room = limit.posts.max(1) + 1;
    let mut keys = vec![(root, size)];
    let mut level = vec![root];
    let sql = format!(
        "SELECT p.id, {SIZE} FROM posts p \
         WHERE p.topic_id = ?1 AND p.parent_id IN (SELECT value FROM json_each(?2)) ORDER BY p.id LIMIT ?3"
    );
    for _ in 0..depth {
        if level.is_empty() || keys.len() >= room {
            break;
        }
        let json = serde_json::to_string(&level).map_err(|e| StoreError::Internal(e.to_string()))?;
        let left = i64::try_from(room - keys.len()).unwrap_or(i64::MAX);
        let found = self::keys(conn, &sql, vec![topic_id.into(), json.into(), left.into()])?;
        level = found.iter().map(|k| k.0).collect();
        keys.extend(found);
    }
    let (count, more) = cut(&keys, limit);
    let posts = posts_by_id(conn, keys[..count].iter().map(|k| k.0), sort)?;
    Ok((topic, posts, more))
}
