//! Federation's phase 2 rows (migration 0015): communities on other
//! servers, stored as communities of their own linked to their `Group`,
//! and local users' follows of them.

use rusqlite::{Connection, OptionalExtension, params};

use super::conn::map_err;
use super::federation::{ACTOR_COLS, actor_row, put_remote_actor, remote_user};
use super::reads;
use crate::model::federation::{RemoteActor, remote_user_name};
use crate::model::{Community, Timestamp};
use crate::store::{StoreError, StoreResult};

pub fn remote_actor(conn: &Connection, actor_id: &str) -> StoreResult<Option<RemoteActor>> {
    conn.prepare_cached(&format!("SELECT {ACTOR_COLS} FROM ap_actors WHERE actor_id = ?1"))
        .and_then(|mut s| s.query_row([actor_id], actor_row).optional())
        .map_err(map_err)
}

/// `Store::put_remote_community`, in the writer's transaction.
pub fn put_remote_community(
    conn: &Connection,
    group: &RemoteActor,
    name: &str,
    title: &str,
    description: &str,
    now: Timestamp,
) -> StoreResult<Community> {
    put_remote_actor(conn, group)?;
    let (actor, community): (i64, Option<i64>) = conn
        .prepare_cached(
            "SELECT a.id, c.id FROM ap_actors a LEFT JOIN communities c ON c.actor = a.id WHERE a.actor_id = ?1",
        )
        .and_then(|mut s| s.query_row([&group.id], |r| Ok((r.get(0)?, r.get(1)?))))
        .map_err(map_err)?;
    if let Some(id) = community {
        conn.prepare_cached("UPDATE communities SET title = ?2, description = ?3 WHERE id = ?1")
            .and_then(|mut s| s.execute(params![id, title, description]))
            .map_err(map_err)?;
        return community_by_id(conn, id);
    }
    let taken = conn
        .prepare_cached("SELECT 1 FROM communities WHERE name = ?1")
        .and_then(|mut s| s.exists([name]))
        .map_err(map_err)?;
    let name = match (taken, name.split_once('@')) {
        (true, Some((local, host))) => remote_user_name(&format!("{local}-{actor}"), host),
        _ => name.to_owned(),
    };
    // Its creator and only moderator is the user its Group acts as: the
    // removals its Group announces are made by it; no local user
    // moderates it.
    let creator = remote_user(conn, &group.id, &group.user_name(), now)?;
    conn.prepare_cached(
        "INSERT INTO communities (name, title, description, created_by, created_at, actor) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
    )
    .and_then(|mut s| s.execute(params![name, title, description, creator.id, now.0, actor]))
    .map_err(map_err)?;
    let id = conn.last_insert_rowid();
    conn.prepare_cached("INSERT INTO moderators (community_id, user_id, created_at) VALUES (?1, ?2, ?3)")
        .and_then(|mut s| s.execute(params![id, creator.id, now.0]))
        .map_err(map_err)?;
    community_by_id(conn, id)
}

fn community_by_id(conn: &Connection, id: i64) -> StoreResult<Community> {
    let name: String = conn
        .prepare_cached("SELECT name FROM communities WHERE id = ?1")
        .and_then(|mut s| s.query_row([id], |r| r.get(0)))
        .map_err(map_err)?;
    reads::community(conn, &name)
}

pub fn community_actor(conn: &Connection, name: &str) -> StoreResult<Option<RemoteActor>> {
    let cols = crate::store::common::actor_cols_of_a();
    conn.prepare_cached(&format!(
        "SELECT {cols} FROM communities c JOIN ap_actors a ON a.id = c.actor WHERE c.name = ?1"
    ))
    .and_then(|mut s| s.query_row([name], actor_row).optional())
    .map_err(map_err)
}

pub fn community_of_actor(conn: &Connection, actor_id: &str) -> StoreResult<Option<Community>> {
    let name: Option<String> = conn
        .prepare_cached("SELECT c.name FROM communities c JOIN ap_actors a ON a.id = c.actor WHERE a.actor_id = ?1")
        .and_then(|mut s| s.query_row([actor_id], |r| r.get(0)).optional())
        .map_err(map_err)?;
    name.map(|n| reads::community(conn, &n)).transpose()
}

pub fn follow_remote(conn: &Connection, community_id: i64, user_id: i64, follow_id: &str) -> StoreResult<()> {
    let remote = conn
        .prepare_cached("SELECT actor IS NOT NULL FROM communities WHERE id = ?1")
        .and_then(|mut s| s.query_row([community_id], |r| r.get::<_, bool>(0)).optional())
        .map_err(map_err)?
        .ok_or(StoreError::NotFound("community"))?;
    if !remote {
        return Err(StoreError::Invalid("only a community on another server is followed".into()));
    }
    conn.prepare_cached(
        "INSERT INTO ap_following (community_id, user_id, follow_id, accepted, created_at) VALUES (?1, ?2, ?3, 0, ?4) \
         ON CONFLICT (community_id, user_id) DO UPDATE SET follow_id = excluded.follow_id, accepted = 0",
    )
    .and_then(|mut s| s.execute(params![community_id, user_id, follow_id, Timestamp::now().0]))
    .map_err(map_err)?;
    Ok(())
}

pub fn unfollow_remote(conn: &Connection, community_id: i64, user_id: i64) -> StoreResult<Option<String>> {
    conn.prepare_cached("DELETE FROM ap_following WHERE community_id = ?1 AND user_id = ?2 RETURNING follow_id")
        .and_then(|mut s| s.query_row([community_id, user_id], |r| r.get(0)).optional())
        .map_err(map_err)
}

pub fn settle_remote_follow(
    conn: &Connection,
    community_id: i64,
    follow_id: &str,
    accepted: bool,
) -> StoreResult<bool> {
    let sql = if accepted {
        "UPDATE ap_following SET accepted = 1 WHERE community_id = ?1 AND follow_id = ?2"
    } else {
        "DELETE FROM ap_following WHERE community_id = ?1 AND follow_id = ?2"
    };
    let n = conn.prepare_cached(sql).and_then(|mut s| s.execute(params![community_id, follow_id])).map_err(map_err)?;
    Ok(n > 0)
}

pub fn remote_follow(conn: &Connection, community_id: i64, user_id: i64) -> StoreResult<Option<bool>> {
    conn.prepare_cached("SELECT accepted FROM ap_following WHERE community_id = ?1 AND user_id = ?2")
        .and_then(|mut s| s.query_row([community_id, user_id], |r| r.get(0)).optional())
        .map_err(map_err)
}

pub fn remote_follow_count(conn: &Connection, community_id: i64) -> StoreResult<i64> {
    conn.prepare_cached("SELECT count(*) FROM ap_following WHERE community_id = ?1")
        .and_then(|mut s| s.query_row([community_id], |r| r.get(0)))
        .map_err(map_err)
}
