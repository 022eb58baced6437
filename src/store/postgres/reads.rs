//! Read queries and the mapping of rows to the model, shared by every
//! other module here. Names match ignoring case, as SQLite's NOCASE
//! columns do: `lower(name) = lower($1)`, served by the unique indexes on
//! `lower(name)`.

use deadpool_postgres::GenericClient;
use tokio_postgres::Row;
use tokio_postgres::types::ToSql;

use super::conn::{all, col, opt};
use crate::model::{Community, Post, Profile, Timestamp, Topic, User};
use crate::store::{Cursor, ListTopics, PostSort, StoreError, StoreResult, TimeWindow, TopicPage, TopicSort};

pub const USER_COLS: &str = "u.id, u.name, u.is_admin, u.created_at";

pub fn user_row(r: &Row) -> StoreResult<User> {
    Ok(User { id: col(r, 0)?, name: col(r, 1)?, is_admin: col(r, 2)?, created_at: Timestamp(col(r, 3)?) })
}

/// A deleted account's name is shown nowhere (its row keeps it, reserved).
pub const TOPIC_COLS: &str = "t.id, c.name, CASE WHEN u.deleted_at IS NULL THEN u.name END, t.title, t.body, t.url, t.created_at, t.edited_at, \
     t.deleted, t.score, coalesce(n.post_count, 0), t.hot, t.community_id, t.author_id, t.removed, t.locked, t.body_html";
pub const TOPIC_FROM: &str = "FROM topics t JOIN communities c ON c.id = t.community_id JOIN users u ON u.id = t.author_id \
     LEFT JOIN topic_counts n ON n.topic_id = t.id";

pub fn topic_row(r: &Row) -> StoreResult<Topic> {
    let deleted: bool = col(r, 8)?;
    let body: Option<String> = if deleted { None } else { col(r, 4)? };
    let body_html = match &body {
        Some(source) => Some(stored_html(col(r, 16)?, source)),
        None => None,
    };
    Ok(Topic {
        id: col(r, 0)?,
        community: col(r, 1)?,
        author: if deleted { None } else { col(r, 2)? },
        title: col(r, 3)?,
        body,
        body_html,
        url: if deleted { None } else { col(r, 5)? },
        created_at: Timestamp(col(r, 6)?),
        edited_at: col::<Option<i64>>(r, 7)?.map(Timestamp),
        deleted,
        removed: col(r, 14)?,
        locked: col(r, 15)?,
        score: col(r, 9)?,
        post_count: col(r, 10)?,
        community_id: col(r, 12)?,
        author_id: col(r, 13)?,
        inbox: Vec::new(),
    })
}

pub const POST_COLS: &str = "p.id, p.topic_id, p.parent_id, CASE WHEN u.deleted_at IS NULL THEN u.name END, p.body, p.created_at, p.edited_at, p.deleted, \
     p.score, p.author_id, p.removed, p.body_html";
pub const POST_FROM: &str = "FROM posts p JOIN users u ON u.id = p.author_id";
/// How many columns `POST_COLS` selects.
pub const POST_WIDTH: usize = 12;

pub fn post_row(r: &Row) -> StoreResult<Post> {
    let deleted: bool = col(r, 7)?;
    let body: String = if deleted { String::new() } else { col(r, 4)? };
    let body_html = if deleted { String::new() } else { stored_html(col(r, 11)?, &body) };
    Ok(Post {
        id: col(r, 0)?,
        topic_id: col(r, 1)?,
        parent_id: col(r, 2)?,
        author: if deleted { None } else { col(r, 3)? },
        body,
        body_html,
        created_at: Timestamp(col(r, 5)?),
        edited_at: col::<Option<i64>>(r, 6)?.map(Timestamp),
        deleted,
        removed: col(r, 10)?,
        score: col(r, 8)?,
        author_id: col(r, 9)?,
        notify: None,
        inbox: Vec::new(),
    })
}

/// The stored HTML of `source`. The store writes it with every body and
/// `pith seed` renders as it loads; rendering here covers a row copied in
/// without it, so no reader ever shows unrendered or unsanitized text.
fn stored_html(html: Option<String>, source: &str) -> String {
    html.unwrap_or_else(|| crate::markdown::render(source))
}

pub async fn topic(c: &impl GenericClient, id: i64) -> StoreResult<Topic> {
    let sql = format!("SELECT {TOPIC_COLS} {TOPIC_FROM} WHERE t.id = $1");
    match opt(c, &sql, &[&id]).await? {
        Some(r) => topic_row(&r),
        None => Err(StoreError::NotFound("topic")),
    }
}

pub async fn topic_with_posts(c: &impl GenericClient, id: i64, sort: PostSort) -> StoreResult<(Topic, Vec<Post>)> {
    let topic = topic(c, id).await?;
    let order = match sort {
        PostSort::Best => "p.score DESC, p.id ASC",
        PostSort::New => "p.id DESC",
        PostSort::Old => "p.id ASC",
    };
    let sql = format!("SELECT {POST_COLS} {POST_FROM} WHERE p.topic_id = $1 ORDER BY {order}");
    let posts = all(c, &sql, &[&id]).await?.iter().map(post_row).collect::<StoreResult<Vec<_>>>()?;
    Ok((topic, posts))
}

pub async fn list_topics(c: &impl GenericClient, q: &ListTopics, now: Timestamp) -> StoreResult<TopicPage> {
    let mut sql = format!("SELECT {TOPIC_COLS} {TOPIC_FROM} WHERE NOT t.deleted AND NOT t.removed");
    let mut args: Vec<Box<dyn ToSql + Sync + Send>> = Vec::new();
    if let Some(name) = &q.community {
        args.push(Box::new(community_id(c, name).await?));
        sql += &format!(" AND t.community_id = ${}", args.len());
    }
    if let Some(user) = q.hide_blocked_by {
        args.push(Box::new(user));
        sql += &format!(
            " AND t.community_id NOT IN (SELECT community_id FROM community_blocks WHERE user_id = ${})",
            args.len()
        );
    }
    let (key, order) = match q.sort {
        TopicSort::Hot => ("t.hot", "t.hot DESC, t.id DESC"),
        TopicSort::New => ("t.created_at", "t.created_at DESC, t.id DESC"),
        TopicSort::Top(w) => {
            if w != TimeWindow::All {
                args.push(Box::new(w.since(now)));
                sql += &format!(" AND t.created_at >= ${}", args.len());
            }
            ("t.score", "t.score DESC, t.id DESC")
        }
    };
    if let Some(after) = q.after {
        let (k, id): (Box<dyn ToSql + Sync + Send>, i64) = match (after, q.sort) {
            (Cursor::Hot(h, id), TopicSort::Hot) => (Box::new(h), id),
            (Cursor::New(t, id), TopicSort::New) => (Box::new(t), id),
            (Cursor::Top(s, id), TopicSort::Top(_)) => (Box::new(s), id),
            _ => return Err(StoreError::Invalid("cursor does not belong to this sort order".into())),
        };
        args.push(k);
        args.push(Box::new(id));
        let (a, b) = (args.len() - 1, args.len());
        // A row comparison: PostgreSQL walks the (key DESC, id DESC) index from it.
        sql += &format!(" AND ({key}, t.id) < (${a}, ${b})");
    }
    args.push(Box::new((q.limit + 1) as i64));
    sql += &format!(" ORDER BY {order} LIMIT ${}", args.len());

    let params: Vec<&(dyn ToSql + Sync)> = args.iter().map(|a| a.as_ref() as &(dyn ToSql + Sync)).collect();
    let rows = all(c, &sql, &params).await?;
    let rows = rows.iter().map(|r| Ok((topic_row(r)?, col::<f64>(r, 11)?))).collect::<StoreResult<Vec<_>>>()?;
    Ok(crate::store::common::topic_page(rows, q.limit, q.sort))
}

pub async fn community_id(c: &impl GenericClient, name: &str) -> StoreResult<i64> {
    match opt(c, "SELECT id FROM communities WHERE lower(name) = lower($1)", &[&name]).await? {
        Some(r) => col(&r, 0),
        None => Err(StoreError::NotFound("community")),
    }
}

/// `topic_count` is kept by a trigger (migrations/postgres/0015).
const COMMUNITY_SQL: &str = "SELECT c.id, c.name, c.title, c.description, c.created_at, coalesce(a.url, a.actor_id), \
     c.topic_count FROM communities c LEFT JOIN ap_actors a ON a.id = c.actor";

fn community_row(r: &Row) -> StoreResult<Community> {
    Ok(Community {
        id: col(r, 0)?,
        name: col(r, 1)?,
        title: col(r, 2)?,
        description: col(r, 3)?,
        created_at: Timestamp(col(r, 4)?),
        home: col(r, 5)?,
        topic_count: col(r, 6)?,
    })
}

pub async fn communities(c: &impl GenericClient) -> StoreResult<Vec<Community>> {
    let sql = format!("{COMMUNITY_SQL} ORDER BY lower(c.name), c.name");
    all(c, &sql, &[]).await?.iter().map(community_row).collect()
}

pub async fn community(c: &impl GenericClient, name: &str) -> StoreResult<Community> {
    let sql = format!("{COMMUNITY_SQL} WHERE lower(c.name) = lower($1)");
    match opt(c, &sql, &[&name]).await? {
        Some(r) => community_row(&r),
        None => Err(StoreError::NotFound("community")),
    }
}

pub async fn topic_community(c: &impl GenericClient, topic_id: i64) -> StoreResult<Community> {
    let sql = format!("{COMMUNITY_SQL} WHERE c.id = (SELECT community_id FROM topics WHERE id = $1)");
    match opt(c, &sql, &[&topic_id]).await? {
        Some(r) => community_row(&r),
        None => Err(StoreError::NotFound("topic")),
    }
}

pub async fn user_credentials(c: &impl GenericClient, name: &str) -> StoreResult<Option<(User, Option<String>)>> {
    let sql = format!(
        "SELECT {USER_COLS}, u.password_hash FROM users u WHERE lower(u.name) = lower($1) AND u.deleted_at IS NULL"
    );
    match opt(c, &sql, &[&name]).await? {
        Some(r) => Ok(Some((user_row(&r)?, col(&r, 4)?))),
        None => Ok(None),
    }
}

/// How many recent items a profile shows.
const PROFILE_ITEMS: i64 = 25;

pub async fn profile(c: &impl GenericClient, name: &str) -> StoreResult<Profile> {
    let sql = format!(
        "SELECT {USER_COLS}, coalesce(a.url, a.actor_id) FROM users u LEFT JOIN ap_actors a ON a.id = u.actor \
         WHERE lower(u.name) = lower($1) AND u.deleted_at IS NULL"
    );
    let (user, home) = match opt(c, &sql, &[&name]).await? {
        Some(r) => (user_row(&r)?, col(&r, 4)?),
        None => return Err(StoreError::NotFound("user")),
    };
    let sql = format!(
        "SELECT {TOPIC_COLS} {TOPIC_FROM} WHERE t.author_id = $1 AND NOT t.deleted AND NOT t.removed \
         ORDER BY t.id DESC LIMIT $2"
    );
    let topics = all(c, &sql, &[&user.id, &PROFILE_ITEMS]).await?.iter().map(topic_row).collect::<StoreResult<_>>()?;
    let sql = format!(
        // Replies in a removed topic are as hidden as the topic.
        "SELECT {POST_COLS} {POST_FROM} JOIN topics t ON t.id = p.topic_id \
         WHERE p.author_id = $1 AND NOT p.deleted AND NOT p.removed AND NOT t.removed \
         ORDER BY p.id DESC LIMIT $2"
    );
    let posts = all(c, &sql, &[&user.id, &PROFILE_ITEMS]).await?.iter().map(post_row).collect::<StoreResult<_>>()?;
    Ok(Profile { user, home, topics, posts })
}
