//! Federation's phase 2 rows: the SQL of `store::sqlite::following`, for
//! PostgreSQL.

use deadpool_postgres::GenericClient;

use super::conn::{col, exec, one, opt};
use super::federation::{ACTOR_COLS, actor_row, put_remote_actor, remote_user};
use super::reads;
use crate::model::federation::{RemoteActor, remote_user_name};
use crate::model::{Community, Timestamp};
use crate::store::{StoreError, StoreResult};

pub async fn remote_actor(c: &impl GenericClient, actor_id: &str) -> StoreResult<Option<RemoteActor>> {
    let row = opt(c, &format!("SELECT {ACTOR_COLS} FROM ap_actors WHERE actor_id = $1"), &[&actor_id]).await?;
    row.map(|r| actor_row(&r)).transpose()
}

pub async fn put_remote_community(
    c: &impl GenericClient,
    group: &RemoteActor,
    name: &str,
    title: &str,
    description: &str,
    now: Timestamp,
) -> StoreResult<Community> {
    put_remote_actor(c, group).await?;
    let row = one(
        c,
        "SELECT a.id, c.id FROM ap_actors a LEFT JOIN communities c ON c.actor = a.id WHERE a.actor_id = $1",
        &[&group.id],
    )
    .await?;
    let (actor, community): (i64, Option<i64>) = (col(&row, 0)?, col(&row, 1)?);
    if let Some(id) = community {
        exec(c, "UPDATE communities SET title = $2, description = $3 WHERE id = $1", &[&id, &title, &description])
            .await?;
        return community_by_id(c, id).await;
    }
    let taken = opt(c, "SELECT 1 FROM communities WHERE lower(name) = lower($1)", &[&name]).await?.is_some();
    let name = match (taken, name.split_once('@')) {
        (true, Some((local, host))) => remote_user_name(&format!("{local}-{actor}"), host),
        _ => name.to_owned(),
    };
    // Its creator and only moderator is the user its Group acts as
    // (`store::sqlite::following` says why).
    let creator = remote_user(c, &group.id, &group.user_name(), now).await?;
    let row = one(
        c,
        "INSERT INTO communities (name, title, description, created_by, created_at, actor) \
         VALUES ($1, $2, $3, $4, $5, $6) RETURNING id",
        &[&name, &title, &description, &creator.id, &now.0, &actor],
    )
    .await?;
    let id: i64 = col(&row, 0)?;
    exec(
        c,
        "INSERT INTO moderators (community_id, user_id, created_at) VALUES ($1, $2, $3)",
        &[&id, &creator.id, &now.0],
    )
    .await?;
    community_by_id(c, id).await
}

async fn community_by_id(c: &impl GenericClient, id: i64) -> StoreResult<Community> {
    let name: String = col(&one(c, "SELECT name FROM communities WHERE id = $1", &[&id]).await?, 0)?;
    reads::community(c, &name).await
}

pub async fn community_actor(c: &impl GenericClient, name: &str) -> StoreResult<Option<RemoteActor>> {
    let sql = format!(
        "SELECT {} FROM communities c JOIN ap_actors a ON a.id = c.actor WHERE lower(c.name) = lower($1)",
        crate::store::common::actor_cols_of_a()
    );
    opt(c, &sql, &[&name]).await?.map(|r| actor_row(&r)).transpose()
}

pub async fn community_of_actor(c: &impl GenericClient, actor_id: &str) -> StoreResult<Option<Community>> {
    let sql = "SELECT c.name FROM communities c JOIN ap_actors a ON a.id = c.actor WHERE a.actor_id = $1";
    match opt(c, sql, &[&actor_id]).await? {
        Some(r) => Ok(Some(reads::community(c, &col::<String>(&r, 0)?).await?)),
        None => Ok(None),
    }
}

pub async fn follow_remote(
    c: &impl GenericClient,
    community_id: i64,
    user_id: i64,
    follow_id: &str,
) -> StoreResult<()> {
    let row = opt(c, "SELECT actor IS NOT NULL FROM communities WHERE id = $1", &[&community_id])
        .await?
        .ok_or(StoreError::NotFound("community"))?;
    if !col::<bool>(&row, 0)? {
        return Err(StoreError::Invalid("only a community on another server is followed".into()));
    }
    exec(
        c,
        "INSERT INTO ap_following (community_id, user_id, follow_id, accepted, created_at) \
         VALUES ($1, $2, $3, false, $4) \
         ON CONFLICT (community_id, user_id) DO UPDATE SET follow_id = excluded.follow_id, accepted = false",
        &[&community_id, &user_id, &follow_id, &Timestamp::now().0],
    )
    .await?;
    Ok(())
}

pub async fn unfollow_remote(c: &impl GenericClient, community_id: i64, user_id: i64) -> StoreResult<Option<String>> {
    let sql = "DELETE FROM ap_following WHERE community_id = $1 AND user_id = $2 RETURNING follow_id";
    opt(c, sql, &[&community_id, &user_id]).await?.map(|r| col(&r, 0)).transpose()
}

pub async fn settle_remote_follow(
    c: &impl GenericClient,
    community_id: i64,
    follow_id: &str,
    accepted: bool,
) -> StoreResult<bool> {
    let sql = if accepted {
        "UPDATE ap_following SET accepted = true WHERE community_id = $1 AND follow_id = $2"
    } else {
        "DELETE FROM ap_following WHERE community_id = $1 AND follow_id = $2"
    };
    Ok(exec(c, sql, &[&community_id, &follow_id]).await? > 0)
}

pub async fn remote_follow(c: &impl GenericClient, community_id: i64, user_id: i64) -> StoreResult<Option<bool>> {
    let sql = "SELECT accepted FROM ap_following WHERE community_id = $1 AND user_id = $2";
    opt(c, sql, &[&community_id, &user_id]).await?.map(|r| col(&r, 0)).transpose()
}

pub async fn remote_follow_count(c: &impl GenericClient, community_id: i64) -> StoreResult<i64> {
    col(&one(c, "SELECT count(*) FROM ap_following WHERE community_id = $1", &[&community_id]).await?, 0)
}
