//! Read queries, run on reader connections.

use rusqlite::{Connection, OptionalExtension, Row, params};

use super::conn::map_err;
use crate::model::{Community, Post, Profile, Timestamp, Topic, User};
use crate::store::{Cursor, ListTopics, PostSort, StoreError, StoreResult, TimeWindow, TopicPage, TopicSort};

pub const USER_COLS: &str = "u.id, u.name, u.is_admin, u.created_at";

pub fn user_row(r: &Row<'_>) -> rusqlite::Result<User> {
    Ok(User { id: r.get(0)?, name: r.get(1)?, is_admin: r.get(2)?, created_at: Timestamp(r.get(3)?) })
}

/// A deleted account's name is shown nowhere (its row keeps it, reserved).
pub const TOPIC_COLS: &str = "t.id, c.name, CASE WHEN u.deleted_at IS NULL THEN u.name END, t.title, t.body, t.url, t.created_at, t.edited_at, \
     t.deleted, t.score, coalesce(n.post_count, 0), t.hot, t.community_id, t.author_id, t.removed, t.locked, t.body_html";
pub const TOPIC_FROM: &str = "FROM topics t JOIN communities c ON c.id = t.community_id JOIN users u ON u.id = t.author_id \
     LEFT JOIN topic_counts n ON n.topic_id = t.id";

pub fn topic_row(r: &Row<'_>) -> rusqlite::Result<Topic> {
    let deleted: bool = r.get(8)?;
    let body: Option<String> = if deleted { None } else { r.get(4)? };
    let body_html = match &body {
        Some(source) => Some(stored_html(r.get(16)?, source)),
        None => None,
    };
    Ok(Topic {
        id: r.get(0)?,
        community: r.get(1)?,
        author: if deleted { None } else { r.get(2)? },
        title: r.get(3)?,
        body,
        body_html,
        url: if deleted { None } else { r.get(5)? },
        created_at: Timestamp(r.get(6)?),
        edited_at: r.get::<_, Option<i64>>(7)?.map(Timestamp),
        deleted,
        removed: r.get(14)?,
        locked: r.get(15)?,
        score: r.get(9)?,
        post_count: r.get(10)?,
        community_id: r.get(12)?,
        author_id: r.get(13)?,
        inbox: Vec::new(),
    })
}

pub const POST_COLS: &str = "p.id, p.topic_id, p.parent_id, CASE WHEN u.deleted_at IS NULL THEN u.name END, p.body, p.created_at, p.edited_at, p.deleted, \
     p.score, p.author_id, p.removed, p.body_html";
pub const POST_FROM: &str = "FROM posts p JOIN users u ON u.id = p.author_id";

pub fn post_row(r: &Row<'_>) -> rusqlite::Result<Post> {
    let deleted: bool = r.get(7)?;
    let body: String = if deleted { String::new() } else { r.get(4)? };
    let body_html = if deleted { String::new() } else { stored_html(r.get(11)?, &body) };
    Ok(Post {
        id: r.get(0)?,
        topic_id: r.get(1)?,
        parent_id: r.get(2)?,
        author: if deleted { None } else { r.get(3)? },
        body,
        body_html,
        created_at: Timestamp(r.get(5)?),
        edited_at: r.get::<_, Option<i64>>(6)?.map(Timestamp),
        deleted,
        removed: r.get(10)?,
        score: r.get(8)?,
        author_id: r.get(9)?,
        notify: None,
        inbox: Vec::new(),
    })
}

/// The stored HTML of `source`. Every row has it once the store has
/// opened the database (`backfill`); rendering here covers only a row
/// written without it behind the store's back since, so that no reader
/// ever shows unrendered or unsanitized text.
fn stored_html(html: Option<String>, source: &str) -> String {
    html.unwrap_or_else(|| crate::markdown::render(source))
}

pub fn topic(conn: &Connection, id: i64) -> StoreResult<Topic> {
    let sql = format!("SELECT {TOPIC_COLS} {TOPIC_FROM} WHERE t.id = ?1");
    conn.prepare_cached(&sql)
        .and_then(|mut s| s.query_row([id], topic_row).optional())
        .map_err(map_err)?
        .ok_or(StoreError::NotFound("topic"))
}

pub fn topic_with_posts(conn: &Connection, id: i64, sort: PostSort) -> StoreResult<(Topic, Vec<Post>)> {
    let topic = topic(conn, id)?;
    let order = match sort {
        PostSort::Best => "p.score DESC, p.id ASC",
        PostSort::New => "p.id DESC",
        PostSort::Old => "p.id ASC",
    };
    let sql = format!("SELECT {POST_COLS} {POST_FROM} WHERE p.topic_id = ?1 ORDER BY {order}");
    let posts = conn
        .prepare_cached(&sql)
        .and_then(|mut s| s.query_map([id], post_row)?.collect::<Result<Vec<_>, _>>())
        .map_err(map_err)?;
    Ok((topic, posts))
}

pub fn list_topics(conn: &Connection, q: &ListTopics, now: Timestamp) -> StoreResult<TopicPage> {
    let mut sql = format!("SELECT {TOPIC_COLS} {TOPIC_FROM} WHERE t.deleted = 0 AND t.removed = 0");
    let mut args: Vec<rusqlite::types::Value> = Vec::new();
    if let Some(name) = &q.community {
        let id: i64 = community_id(conn, name)?;
        args.push(id.into());
        sql += &format!(" AND t.community_id = ?{}", args.len());
    }
    if let Some(user) = q.hide_blocked_by {
        args.push(user.into());
        sql += &format!(
            " AND t.community_id NOT IN (SELECT community_id FROM community_blocks WHERE user_id = ?{})",
            args.len()
        );
    }
    let (key, order) = match q.sort {
        TopicSort::Hot => ("t.hot", "t.hot DESC, t.id DESC"),
        TopicSort::New => ("t.created_at", "t.created_at DESC, t.id DESC"),
        TopicSort::Top(w) => {
            if w != TimeWindow::All {
                args.push(w.since(now).into());
                sql += &format!(" AND t.created_at >= ?{}", args.len());
            }
            ("t.score", "t.score DESC, t.id DESC")
        }
    };
    if let Some(after) = q.after {
        let (k, id): (rusqlite::types::Value, i64) = match (after, q.sort) {
            (Cursor::Hot(h, id), TopicSort::Hot) => (h.into(), id),
            (Cursor::New(t, id), TopicSort::New) => (t.into(), id),
            (Cursor::Top(s, id), TopicSort::Top(_)) => (s.into(), id),
            _ => return Err(StoreError::Invalid("cursor does not belong to this sort order".into())),
        };
        args.push(k);
        args.push(id.into());
        let (a, b) = (args.len() - 1, args.len());
        sql += &format!(" AND ({key} < ?{a} OR ({key} = ?{a} AND t.id < ?{b}))");
    }
    args.push(((q.limit + 1) as i64).into());
    sql += &format!(" ORDER BY {order} LIMIT ?{}", args.len());

    let rows = conn
        .prepare_cached(&sql)
        .and_then(|mut s| {
            s.query_map(rusqlite::params_from_iter(args), |r| Ok((topic_row(r)?, r.get::<_, f64>(11)?)))?
                .collect::<Result<Vec<_>, _>>()
        })
        .map_err(map_err)?;
    Ok(crate::store::common::topic_page(rows, q.limit, q.sort))
}

pub fn community_id(conn: &Connection, name: &str) -> StoreResult<i64> {
    conn.prepare_cached("SELECT id FROM communities WHERE name = ?1")
        .and_then(|mut s| s.query_row([name], |r| r.get(0)).optional())
        .map_err(map_err)?
        .ok_or(StoreError::NotFound("community"))
}

/// `topic_count` is kept by triggers (migrations/sqlite/0016).
const COMMUNITY_SQL: &str = "SELECT c.id, c.name, c.title, c.description, c.created_at, coalesce(a.url, a.actor_id), \
     c.topic_count FROM communities c LEFT JOIN ap_actors a ON a.id = c.actor";

fn community_row(r: &Row<'_>) -> rusqlite::Result<Community> {
    Ok(Community {
        id: r.get(0)?,
        name: r.get(1)?,
        title: r.get(2)?,
        description: r.get(3)?,
        created_at: Timestamp(r.get(4)?),
        home: r.get(5)?,
        topic_count: r.get(6)?,
    })
}

pub fn communities(conn: &Connection) -> StoreResult<Vec<Community>> {
    conn.prepare_cached(&format!("{COMMUNITY_SQL} ORDER BY c.name"))
        .and_then(|mut s| s.query_map([], community_row)?.collect())
        .map_err(map_err)
}

pub fn community(conn: &Connection, name: &str) -> StoreResult<Community> {
    conn.prepare_cached(&format!("{COMMUNITY_SQL} WHERE c.name = ?1"))
        .and_then(|mut s| s.query_row([name], community_row).optional())
        .map_err(map_err)?
        .ok_or(StoreError::NotFound("community"))
}

pub fn topic_community(conn: &Connection, topic_id: i64) -> StoreResult<Community> {
    conn.prepare_cached(&format!("{COMMUNITY_SQL} WHERE c.id = (SELECT community_id FROM topics WHERE id = ?1)"))
        .and_then(|mut s| s.query_row([topic_id], community_row).optional())
        .map_err(map_err)?
        .ok_or(StoreError::NotFound("topic"))
}

pub fn user_credentials(conn: &Connection, name: &str) -> StoreResult<Option<(User, Option<String>)>> {
    conn.prepare_cached(&format!(
        "SELECT {USER_COLS}, u.password_hash FROM users u WHERE u.name = ?1 AND u.deleted_at IS NULL"
    ))
    .and_then(|mut s| s.query_row([name], |r| Ok((user_row(r)?, r.get(4)?))).optional())
    .map_err(map_err)
}

/// How many recent items a profile shows.
const PROFILE_ITEMS: i64 = 25;

pub fn profile(conn: &Connection, name: &str) -> StoreResult<Profile> {
    let (user, home) = conn
        .prepare_cached(&format!(
            "SELECT {USER_COLS}, coalesce(a.url, a.actor_id) FROM users u LEFT JOIN ap_actors a ON a.id = u.actor \
             WHERE u.name = ?1 AND u.deleted_at IS NULL"
        ))
        .and_then(|mut s| s.query_row([name], |r| Ok((user_row(r)?, r.get(4)?))).optional())
        .map_err(map_err)?
        .ok_or(StoreError::NotFound("user"))?;
    let topics = conn
        .prepare_cached(&format!(
            "SELECT {TOPIC_COLS} {TOPIC_FROM} WHERE t.author_id = ?1 AND t.deleted = 0 AND t.removed = 0 \
             ORDER BY t.id DESC LIMIT ?2"
        ))
        .and_then(|mut s| s.query_map(params![user.id, PROFILE_ITEMS], topic_row)?.collect())
        .map_err(map_err)?;
    let posts = conn
        .prepare_cached(&format!(
            // Replies in a removed topic are as hidden as the topic.
            "SELECT {POST_COLS} {POST_FROM} JOIN topics t ON t.id = p.topic_id \
             WHERE p.author_id = ?1 AND p.deleted = 0 AND p.removed = 0 AND t.removed = 0 \
             ORDER BY p.id DESC LIMIT ?2"
        ))
        .and_then(|mut s| s.query_map(params![user.id, PROFILE_ITEMS], post_row)?.collect())
        .map_err(map_err)?;
    Ok(Profile { user, home, topics, posts })
}
