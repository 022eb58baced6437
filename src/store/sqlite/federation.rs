//! Federation's rows (migrations 0012, 0013): local actors' keys, remote
//! actors as fetched, communities' remote followers, the delivery queue,
//! remote users and the map of remote objects to topics and posts.

use rusqlite::{Connection, OptionalExtension, Row, params};

use super::conn::map_err;
use super::reads::{USER_COLS, user_row};
use crate::model::federation::remote_user_name;
use crate::model::federation::{
    ActorKey, ActorKind, KnownActor, LocalObject, NewDelivery, QueuedDelivery, RemoteActor,
};
use crate::model::mail::Delivery;
use crate::model::{NameKeys, Timestamp, User, VoteTarget};
use crate::store::{StoreError, StoreResult};

pub use crate::store::common::ACTOR_COLS;
use crate::store::common::{actor_cols_of_a, known_actor_sql};

pub fn actor_row(r: &Row<'_>) -> rusqlite::Result<RemoteActor> {
    Ok(RemoteActor {
        id: r.get(0)?,
        inbox: r.get(1)?,
        shared_inbox: r.get(2)?,
        key_id: r.get(3)?,
        public_key_pem: r.get(4)?,
        name: r.get(5)?,
        fetched_at: r.get(6)?,
        url: r.get(7)?,
    })
}

pub fn actor_key(conn: &Connection, kind: ActorKind, local_id: i64) -> StoreResult<Option<ActorKey>> {
    conn.prepare_cached("SELECT private_pem, public_pem FROM ap_keys WHERE kind = ?1 AND local_id = ?2")
        .and_then(|mut s| {
            s.query_row([kind.code(), local_id], |r| Ok(ActorKey { private_pem: r.get(0)?, public_pem: r.get(1)? }))
                .optional()
        })
        .map_err(map_err)
}

pub fn put_actor_key(conn: &Connection, kind: ActorKind, local_id: i64, key: &ActorKey) -> StoreResult<ActorKey> {
    conn.prepare_cached(
        "INSERT INTO ap_keys (kind, local_id, private_pem, public_pem, created_at) VALUES (?1, ?2, ?3, ?4, ?5) \
         ON CONFLICT DO NOTHING",
    )
    .and_then(|mut s| s.execute(params![kind.code(), local_id, key.private_pem, key.public_pem, Timestamp::now().0]))
    .map_err(map_err)?;
    actor_key(conn, kind, local_id)?.ok_or(StoreError::NotFound("actor key"))
}

/// Every activity's one read: its SQL formatted once.
static BY_KEY: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| known_actor_sql("a.key_id = ?1"));

pub fn remote_actor_by_key(conn: &Connection, key_id: &str) -> StoreResult<Option<KnownActor>> {
    conn.prepare_cached(&BY_KEY)
        .and_then(|mut s| {
            s.query_row([key_id], |r| {
                let user = match r.get::<_, Option<i64>>(8)? {
                    Some(id) => {
                        Some(User { id, name: r.get(9)?, is_admin: r.get(10)?, created_at: Timestamp(r.get(11)?) })
                    }
                    None => None,
                };
                Ok(KnownActor { actor: actor_row(r)?, user })
            })
            .optional()
        })
        .map_err(map_err)
}

pub fn put_remote_actor(conn: &Connection, a: &RemoteActor) -> StoreResult<()> {
    conn.prepare_cached(&format!(
        "INSERT INTO ap_actors ({ACTOR_COLS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8) \
         ON CONFLICT (actor_id) DO UPDATE SET inbox = excluded.inbox, shared_inbox = excluded.shared_inbox, \
         key_id = excluded.key_id, public_key_pem = excluded.public_key_pem, name = excluded.name, \
         fetched_at = excluded.fetched_at, url = excluded.url"
    ))
    .and_then(|mut s| {
        s.execute(params![a.id, a.inbox, a.shared_inbox, a.key_id, a.public_key_pem, a.name, a.fetched_at, a.url])
    })
    .map_err(map_err)?;
    Ok(())
}

pub fn add_follower(conn: &Connection, community_id: i64, actor_id: &str, follow_id: &str) -> StoreResult<()> {
    let n = conn
        .prepare_cached(
            "INSERT INTO ap_followers (community_id, actor, follow_id, created_at) \
             SELECT ?1, id, ?3, ?4 FROM ap_actors WHERE actor_id = ?2 \
             ON CONFLICT (community_id, actor) DO UPDATE SET follow_id = excluded.follow_id",
        )
        .and_then(|mut s| s.execute(params![community_id, actor_id, follow_id, Timestamp::now().0]))
        .map_err(map_err)?;
    if n == 0 {
        return Err(StoreError::NotFound("remote actor"));
    }
    Ok(())
}

pub fn remove_follower(conn: &Connection, community_id: i64, actor_id: &str) -> StoreResult<bool> {
    let n = conn
        .prepare_cached(
            "DELETE FROM ap_followers WHERE community_id = ?1 \
             AND actor = (SELECT id FROM ap_actors WHERE actor_id = ?2)",
        )
        .and_then(|mut s| s.execute(params![community_id, actor_id]))
        .map_err(map_err)?;
    Ok(n > 0)
}

pub fn followers(conn: &Connection, community_id: i64) -> StoreResult<Vec<RemoteActor>> {
    let cols = actor_cols_of_a();
    conn.prepare_cached(&format!(
        "SELECT {cols} FROM ap_followers f JOIN ap_actors a ON a.id = f.actor \
         WHERE f.community_id = ?1 ORDER BY f.created_at, a.id"
    ))
    .and_then(|mut s| s.query_map([community_id], actor_row)?.collect())
    .map_err(map_err)
}

pub fn queue_deliveries(conn: &Connection, new: &[NewDelivery], now: Timestamp) -> StoreResult<()> {
    for d in new {
        conn.prepare_cached(
            "INSERT INTO ap_deliveries (inbox, body, signer_kind, signer_id, key_id, next_at, created_at) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?6)",
        )
        .and_then(|mut s| s.execute(params![d.inbox, d.body, d.signer.code(), d.signer_id, d.key_id, now.0]))
        .map_err(map_err)?;
    }
    Ok(())
}

/// A queue row's columns: id, inbox, body, signer kind, signer id,
/// key id, attempts, created_at.
pub type QueuedRow = (i64, String, String, i64, i64, String, i64, i64);

fn queued_row(r: &Row<'_>) -> rusqlite::Result<QueuedRow> {
    Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?, r.get(5)?, r.get(6)?, r.get(7)?))
}

pub fn claim_deliveries(
    conn: &Connection,
    now: Timestamp,
    lease_secs: i64,
    limit: usize,
) -> StoreResult<Vec<QueuedDelivery>> {
    let rows = conn
        .prepare_cached(
            "UPDATE ap_deliveries SET next_at = ?2 WHERE id IN \
             (SELECT id FROM ap_deliveries WHERE next_at <= ?1 ORDER BY next_at, id LIMIT ?3) \
             RETURNING id, inbox, body, signer_kind, signer_id, key_id, attempts, created_at",
        )
        .and_then(|mut s| {
            s.query_map(params![now.0, now.0 + lease_secs, limit as i64], queued_row)?.collect::<Result<Vec<_>, _>>()
        })
        .map_err(map_err)?;
    Ok(rows.into_iter().filter_map(queued).collect())
}

/// A row as a delivery; `None` for a signer kind this build does not know.
pub fn queued((id, inbox, body, kind, signer_id, key_id, attempts, created_at): QueuedRow) -> Option<QueuedDelivery> {
    let signer = ActorKind::from_code(kind)?;
    Some(QueuedDelivery { id, delivery: NewDelivery { inbox, body, signer, signer_id, key_id }, attempts, created_at })
}

pub fn finish_delivery(conn: &Connection, id: i64, outcome: &Delivery) -> StoreResult<()> {
    match outcome {
        Delivery::Sent | Delivery::Failed { .. } => {
            conn.prepare_cached("DELETE FROM ap_deliveries WHERE id = ?1").and_then(|mut s| s.execute([id]))
        }
        Delivery::Retry { at, error } => conn
            .prepare_cached(
                "UPDATE ap_deliveries SET attempts = attempts + 1, next_at = ?2, last_error = ?3 WHERE id = ?1",
            )
            .and_then(|mut s| s.execute(params![id, at.0, error])),
    }
    .map_err(map_err)?;
    Ok(())
}

pub fn queued_count(conn: &Connection) -> StoreResult<i64> {
    conn.prepare_cached("SELECT count(*) FROM ap_deliveries")
        .and_then(|mut s| s.query_row([], |r| r.get(0)))
        .map_err(map_err)
}

/// The user a stored remote actor acts as, if it has one yet: the read
/// `Store::remote_user` tries before it writes.
/// `Denied("banned")` once an administrator deleted it: it posts no more.
pub fn actor_user(conn: &Connection, actor_id: &str) -> StoreResult<Option<User>> {
    let found: Option<(User, bool)> = conn
        .prepare_cached(&format!(
            "SELECT {USER_COLS}, u.deleted_at IS NOT NULL FROM users u JOIN ap_actors a ON a.id = u.actor \
             WHERE a.actor_id = ?1"
        ))
        .and_then(|mut s| s.query_row([actor_id], |r| Ok((user_row(r)?, r.get(4)?))).optional())
        .map_err(map_err)?;
    match found {
        Some((_, true)) => Err(deleted_here(actor_id)),
        other => Ok(other.map(|(user, _)| user)),
    }
}

/// The refusal of a remote actor whose user an administrator deleted.
pub fn deleted_here(actor_id: &str) -> StoreError {
    StoreError::Denied("banned", format!("the account of {actor_id} was deleted here"))
}

/// `store::Store::remote_user`, in the writer's transaction.
pub fn remote_user(conn: &Connection, actor_id: &str, name: &str, now: Timestamp) -> StoreResult<User> {
    let actor: (i64, Option<i64>) = conn
        .prepare_cached("SELECT a.id, u.id FROM ap_actors a LEFT JOIN users u ON u.actor = a.id WHERE a.actor_id = ?1")
        .and_then(|mut s| s.query_row([actor_id], |r| Ok((r.get(0)?, r.get(1)?))).optional())
        .map_err(map_err)?
        .ok_or(StoreError::NotFound("remote actor"))?;
    if actor.1.is_some() {
        return actor_user(conn, actor_id)?.ok_or(StoreError::NotFound("user"));
    }
    let taken = conn
        .prepare_cached("SELECT 1 FROM users WHERE name = ?1")
        .and_then(|mut s| s.exists([name]))
        .map_err(map_err)?;
    let name = match (taken, name.split_once('@')) {
        (true, Some((local, host))) => remote_user_name(&format!("{local}-{}", actor.0), host),
        _ => name.to_owned(),
    };
    // No look-alike check: the host tells remote users apart, and no
    // local name can hold the '@'.
    let keys = NameKeys::of(&name);
    conn.prepare_cached(
        "INSERT INTO users (name, password_hash, is_admin, created_at, skeleton, skeleton_folded, actor) \
         VALUES (?1, NULL, 0, ?2, ?3, ?4, ?5)",
    )
    .and_then(|mut s| s.execute(params![name, now.0, keys.written, keys.folded, actor.0]))
    .map_err(map_err)?;
    Ok(User { id: conn.last_insert_rowid(), name, is_admin: false, created_at: now })
}

fn target_code(target: VoteTarget) -> (i64, i64) {
    match target {
        VoteTarget::Topic(id) => (0, id),
        VoteTarget::Post(id) => (1, id),
    }
}

pub fn remote_object(conn: &Connection, object_id: &str) -> StoreResult<Option<LocalObject>> {
    let row: Option<(i64, i64, i64)> = conn
        .prepare_cached("SELECT kind, local_id, topic_id FROM ap_objects WHERE object_id = ?1")
        .and_then(|mut s| s.query_row([object_id], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?))).optional())
        .map_err(map_err)?;
    Ok(row.map(|(kind, id, topic_id)| LocalObject {
        target: if kind == 0 { VoteTarget::Topic(id) } else { VoteTarget::Post(id) },
        topic_id,
    }))
}

pub fn remote_object_id(conn: &Connection, target: VoteTarget) -> StoreResult<Option<String>> {
    let (kind, id) = target_code(target);
    conn.prepare_cached("SELECT object_id FROM ap_objects WHERE kind = ?1 AND local_id = ?2")
        .and_then(|mut s| s.query_row([kind, id], |r| r.get(0)).optional())
        .map_err(map_err)
}

/// Refuses a remote object already mapped: run before the write's first
/// change, so a repeated `Create` changes nothing.
pub fn check_unmapped(conn: &Connection, object_id: Option<&str>) -> StoreResult<()> {
    match object_id {
        Some(id) if remote_object(conn, id)?.is_some() => {
            Err(StoreError::Conflict(format!("the object {id} was received already")))
        }
        _ => Ok(()),
    }
}

/// Maps a remote object to the topic or post it became.
pub fn map_object(conn: &Connection, object_id: Option<&str>, target: VoteTarget, topic_id: i64) -> StoreResult<()> {
    let Some(object_id) = object_id else { return Ok(()) };
    let (kind, id) = target_code(target);
    conn.prepare_cached("INSERT INTO ap_objects (object_id, kind, local_id, topic_id) VALUES (?1, ?2, ?3, ?4)")
        .and_then(|mut s| s.execute(params![object_id, kind, id, topic_id]))
        .map_err(map_err)?;
    Ok(())
}
