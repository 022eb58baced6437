//! Federation's rows: the SQL of `store::sqlite::federation`, for
//! PostgreSQL.

use deadpool_postgres::GenericClient;
use tokio_postgres::Row;

use super::conn::{all, col, exec, one, opt};
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

pub fn actor_row(r: &Row) -> StoreResult<RemoteActor> {
    Ok(RemoteActor {
        id: col(r, 0)?,
        inbox: col(r, 1)?,
        shared_inbox: col(r, 2)?,
        key_id: col(r, 3)?,
        public_key_pem: col(r, 4)?,
        name: col(r, 5)?,
        fetched_at: col(r, 6)?,
        url: col(r, 7)?,
    })
}

pub async fn actor_key(c: &impl GenericClient, kind: ActorKind, local_id: i64) -> StoreResult<Option<ActorKey>> {
    let row = opt(
        c,
        "SELECT private_pem, public_pem FROM ap_keys WHERE kind = $1 AND local_id = $2",
        &[&kind.code(), &local_id],
    )
    .await?;
    row.map(|r| Ok(ActorKey { private_pem: col(&r, 0)?, public_pem: col(&r, 1)? })).transpose()
}

pub async fn put_actor_key(
    c: &impl GenericClient,
    kind: ActorKind,
    local_id: i64,
    key: &ActorKey,
) -> StoreResult<ActorKey> {
    exec(
        c,
        "INSERT INTO ap_keys (kind, local_id, private_pem, public_pem, created_at) VALUES ($1, $2, $3, $4, $5) \
         ON CONFLICT DO NOTHING",
        &[&kind.code(), &local_id, &key.private_pem, &key.public_pem, &Timestamp::now().0],
    )
    .await?;
    actor_key(c, kind, local_id).await?.ok_or(StoreError::NotFound("actor key"))
}

/// Every activity's one read: its SQL formatted once.
static BY_KEY: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| known_actor_sql("a.key_id = $1"));

pub async fn remote_actor_by_key(c: &impl GenericClient, key_id: &str) -> StoreResult<Option<KnownActor>> {
    let Some(r) = opt(c, &BY_KEY, &[&key_id]).await? else { return Ok(None) };
    let user = match col::<Option<i64>>(&r, 8)? {
        Some(id) => Some(User { id, name: col(&r, 9)?, is_admin: col(&r, 10)?, created_at: Timestamp(col(&r, 11)?) }),
        None => None,
    };
    Ok(Some(KnownActor { actor: actor_row(&r)?, user }))
}

pub async fn put_remote_actor(c: &impl GenericClient, a: &RemoteActor) -> StoreResult<()> {
    exec(
        c,
        &format!(
            "INSERT INTO ap_actors ({ACTOR_COLS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8) \
             ON CONFLICT (actor_id) DO UPDATE SET inbox = excluded.inbox, shared_inbox = excluded.shared_inbox, \
             key_id = excluded.key_id, public_key_pem = excluded.public_key_pem, name = excluded.name, \
             fetched_at = excluded.fetched_at, url = excluded.url"
        ),
        &[&a.id, &a.inbox, &a.shared_inbox, &a.key_id, &a.public_key_pem, &a.name, &a.fetched_at, &a.url],
    )
    .await?;
    Ok(())
}

pub async fn add_follower(
    c: &impl GenericClient,
    community_id: i64,
    actor_id: &str,
    follow_id: &str,
) -> StoreResult<()> {
    let n = exec(
        c,
        "INSERT INTO ap_followers (community_id, actor, follow_id, created_at) \
         SELECT $1, id, $3, $4 FROM ap_actors WHERE actor_id = $2 \
         ON CONFLICT (community_id, actor) DO UPDATE SET follow_id = excluded.follow_id",
        &[&community_id, &actor_id, &follow_id, &Timestamp::now().0],
    )
    .await?;
    if n == 0 {
        return Err(StoreError::NotFound("remote actor"));
    }
    Ok(())
}

pub async fn remove_follower(c: &impl GenericClient, community_id: i64, actor_id: &str) -> StoreResult<bool> {
    let n = exec(
        c,
        "DELETE FROM ap_followers WHERE community_id = $1 AND actor = (SELECT id FROM ap_actors WHERE actor_id = $2)",
        &[&community_id, &actor_id],
    )
    .await?;
    Ok(n > 0)
}

pub async fn followers(c: &impl GenericClient, community_id: i64) -> StoreResult<Vec<RemoteActor>> {
    let cols = actor_cols_of_a();
    let rows = all(
        c,
        &format!(
            "SELECT {cols} FROM ap_followers f JOIN ap_actors a ON a.id = f.actor \
             WHERE f.community_id = $1 ORDER BY f.created_at, a.id"
        ),
        &[&community_id],
    )
    .await?;
    rows.iter().map(actor_row).collect()
}

pub async fn queue_deliveries(c: &impl GenericClient, new: &[NewDelivery], now: Timestamp) -> StoreResult<()> {
    for d in new {
        exec(
            c,
            "INSERT INTO ap_deliveries (inbox, body, signer_kind, signer_id, key_id, next_at, created_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $6)",
            &[&d.inbox, &d.body, &d.signer.code(), &d.signer_id, &d.key_id, &now.0],
        )
        .await?;
    }
    Ok(())
}

/// `FOR UPDATE SKIP LOCKED`: nodes claiming at once take different rows.
pub async fn claim_deliveries(
    c: &impl GenericClient,
    now: Timestamp,
    lease_secs: i64,
    limit: usize,
) -> StoreResult<Vec<QueuedDelivery>> {
    let (until, limit) = (now.0 + lease_secs, limit as i64);
    let rows = all(
        c,
        "UPDATE ap_deliveries SET next_at = $2 WHERE id IN \
         (SELECT id FROM ap_deliveries WHERE next_at <= $1 ORDER BY next_at, id LIMIT $3 FOR UPDATE SKIP LOCKED) \
         RETURNING id, inbox, body, signer_kind, signer_id, key_id, attempts, created_at",
        &[&now.0, &until, &limit],
    )
    .await?;
    let mut out = Vec::with_capacity(rows.len());
    for r in &rows {
        let row = (col(r, 0)?, col(r, 1)?, col(r, 2)?, col(r, 3)?, col(r, 4)?, col(r, 5)?, col(r, 6)?, col(r, 7)?);
        out.extend(crate::store::sqlite::federation::queued(row));
    }
    Ok(out)
}

pub async fn finish_delivery(c: &impl GenericClient, id: i64, outcome: &Delivery) -> StoreResult<()> {
    match outcome {
        Delivery::Sent | Delivery::Failed { .. } => exec(c, "DELETE FROM ap_deliveries WHERE id = $1", &[&id]).await?,
        Delivery::Retry { at, error } => {
            exec(
                c,
                "UPDATE ap_deliveries SET attempts = attempts + 1, next_at = $2, last_error = $3 WHERE id = $1",
                &[&id, &at.0, error],
            )
            .await?
        }
    };
    Ok(())
}

pub async fn queued_count(c: &impl GenericClient) -> StoreResult<i64> {
    col(&super::conn::one(c, "SELECT count(*) FROM ap_deliveries", &[]).await?, 0)
}

/// The user a stored remote actor acts as, if it has one yet.
/// `Denied("banned")` once an administrator deleted it: it posts no more.
pub async fn actor_user(c: &impl GenericClient, actor_id: &str) -> StoreResult<Option<User>> {
    let sql = format!(
        "SELECT {USER_COLS}, u.deleted_at IS NOT NULL FROM users u JOIN ap_actors a ON a.id = u.actor \
         WHERE a.actor_id = $1"
    );
    let Some(row) = opt(c, &sql, &[&actor_id]).await? else { return Ok(None) };
    if col::<bool>(&row, 4)? {
        return Err(StoreError::Denied("banned", format!("the account of {actor_id} was deleted here")));
    }
    Ok(Some(user_row(&row)?))
}

/// `store::Store::remote_user` (`store::sqlite::federation::remote_user`).
pub async fn remote_user(c: &impl GenericClient, actor_id: &str, name: &str, now: Timestamp) -> StoreResult<User> {
    let row = opt(
        c,
        "SELECT a.id, u.id FROM ap_actors a LEFT JOIN users u ON u.actor = a.id WHERE a.actor_id = $1",
        &[&actor_id],
    )
    .await?
    .ok_or(StoreError::NotFound("remote actor"))?;
    let (actor, user_id): (i64, Option<i64>) = (col(&row, 0)?, col(&row, 1)?);
    if user_id.is_some() {
        return actor_user(c, actor_id).await?.ok_or(StoreError::NotFound("user"));
    }
    let taken = opt(c, "SELECT 1 FROM users WHERE lower(name) = lower($1)", &[&name]).await?.is_some();
    let name = match (taken, name.split_once('@')) {
        (true, Some((local, host))) => remote_user_name(&format!("{local}-{actor}"), host),
        _ => name.to_owned(),
    };
    let keys = NameKeys::of(&name);
    let row = one(
        c,
        "INSERT INTO users (name, password_hash, is_admin, created_at, skeleton, skeleton_folded, actor) \
         VALUES ($1, NULL, false, $2, $3, $4, $5) RETURNING id",
        &[&name, &now.0, &keys.written, &keys.folded, &actor],
    )
    .await?;
    Ok(User { id: col(&row, 0)?, name, is_admin: false, created_at: now })
}

fn target_code(target: VoteTarget) -> (i64, i64) {
    match target {
        VoteTarget::Topic(id) => (0, id),
        VoteTarget::Post(id) => (1, id),
    }
}

pub async fn remote_object(c: &impl GenericClient, object_id: &str) -> StoreResult<Option<LocalObject>> {
    let sql = "SELECT kind, local_id, topic_id FROM ap_objects WHERE object_id = $1";
    let Some(row) = opt(c, sql, &[&object_id]).await? else {
        return Ok(None);
    };
    let (kind, id): (i64, i64) = (col(&row, 0)?, col(&row, 1)?);
    let target = if kind == 0 { VoteTarget::Topic(id) } else { VoteTarget::Post(id) };
    Ok(Some(LocalObject { target, topic_id: col(&row, 2)? }))
}

pub async fn remote_object_id(c: &impl GenericClient, target: VoteTarget) -> StoreResult<Option<String>> {
    let (kind, id) = target_code(target);
    let row = opt(c, "SELECT object_id FROM ap_objects WHERE kind = $1 AND local_id = $2", &[&kind, &id]).await?;
    row.map(|r| col(&r, 0)).transpose()
}

/// Maps a remote object to the topic or post it became; a repeated one
/// is a unique violation (`Conflict`), which rolls the write back.
pub async fn map_object(
    c: &impl GenericClient,
    object_id: Option<&str>,
    target: VoteTarget,
    topic_id: i64,
) -> StoreResult<()> {
    let Some(object_id) = object_id else { return Ok(()) };
    let (kind, id) = target_code(target);
    let sql = "INSERT INTO ap_objects (object_id, kind, local_id, topic_id) VALUES ($1, $2, $3, $4)";
    exec(c, sql, &[&object_id, &kind, &id, &topic_id]).await?;
    Ok(())
}
