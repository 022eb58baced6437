//! Moderation's SQL: the facts its rules ask for (`model::policy`: who
//! moderates, bans on record), moderators, removals and locks, bans and the
//! public log (reports are in `reports`). A rule's facts and the action it
//! allows are read and written in one transaction.

use deadpool_postgres::GenericClient;
use tokio_postgres::Row;

use super::conn::{all, col, exec, one, opt};
use super::{reads, writes};
use crate::model::policy::{self, BanFacts, BanTarget, BanTerm, Standing};
use crate::model::{Ban, ModAction, ModLogEntry, Moderated, Reason, Timestamp, User};
use crate::store::{ListModLog, ModLogPage, NewBan, StoreError, StoreResult, common};

pub async fn is_moderator(c: &impl GenericClient, user_id: i64, community_id: i64) -> StoreResult<bool> {
    let sql = "SELECT 1 FROM moderators WHERE community_id = $1 AND user_id = $2";
    Ok(opt(c, sql, &[&community_id, &user_id]).await?.is_some())
}

/// Whether `user` is an appointed moderator of the community, read only
/// when a rule asks (`policy::needs_is_moderator`).
pub(super) async fn appointed(c: &impl GenericClient, user: &User, community_id: i64) -> StoreResult<bool> {
    Ok(policy::needs_is_moderator(user) && is_moderator(c, user.id, community_id).await?)
}

/// What the moderation rules ask of `user` in the community: appointed
/// there, and their bans.
pub(super) async fn standing(c: &impl GenericClient, user: &User, community_id: i64) -> StoreResult<Standing> {
    let is_moderator = appointed(c, user, community_id).await?;
    Ok(Standing { is_moderator, bans: ban_facts(c, user, community_id).await? })
}

/// The bans on record against `user` from the site and from the community,
/// in force or expired (`policy::not_banned` compares expiry with `now`);
/// none read when bans do not matter (`policy::needs_bans`).
pub async fn ban_facts(c: &impl GenericClient, user: &User, community_id: i64) -> StoreResult<BanFacts> {
    let mut facts = BanFacts::default();
    if !policy::needs_bans(user) {
        return Ok(facts);
    }
    let rows = all(
        c,
        "SELECT c.name, b.expires_at, b.reason FROM bans b LEFT JOIN communities c ON c.id = b.community_id \
         WHERE b.user_id = $1 AND (b.community_id IS NULL OR b.community_id = $2)",
        &[&user.id, &community_id],
    )
    .await?;
    for row in &rows {
        let term = BanTerm { expires_at: col::<Option<i64>>(row, 1)?.map(Timestamp), reason: col(row, 2)? };
        match col::<Option<String>>(row, 0)? {
            None => facts.site = Some(term),
            Some(community) => facts.community = Some((community, term)),
        }
    }
    Ok(facts)
}

/// One line for the moderation log.
struct LogLine<'a> {
    community_id: Option<i64>,
    action: &'a str,
    target_user: Option<i64>,
    topic_id: Option<i64>,
    post_id: Option<i64>,
    reason: &'a str,
    expires_at: Option<i64>,
}

impl LogLine<'_> {
    async fn write(&self, c: &impl GenericClient, actor: &User, now: Timestamp) -> StoreResult<()> {
        exec(
            c,
            "INSERT INTO mod_log (community_id, actor_id, action, target_user_id, topic_id, post_id, reason, \
             expires_at, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
            &[
                &self.community_id,
                &actor.id,
                &self.action,
                &self.target_user,
                &self.topic_id,
                &self.post_id,
                &self.reason,
                &self.expires_at,
                &now.0,
            ],
        )
        .await?;
        Ok(())
    }
}

/// A user's id and admin flag, by name.
async fn user_by_name(c: &impl GenericClient, name: &str) -> StoreResult<(i64, bool)> {
    match opt(c, "SELECT id, is_admin FROM users WHERE lower(name) = lower($1) AND deleted_at IS NULL", &[&name])
        .await?
    {
        Some(r) => Ok((col(&r, 0)?, col(&r, 1)?)),
        None => Err(StoreError::NotFound("user")),
    }
}

// ---------------------------------------------------------------------------
// Moderators.

pub async fn moderators(c: &impl GenericClient, community: &str) -> StoreResult<Vec<User>> {
    let community_id = reads::community_id(c, community).await?;
    let sql = format!(
        "SELECT {} FROM moderators m JOIN users u ON u.id = m.user_id WHERE m.community_id = $1 \
         ORDER BY m.created_at, u.id",
        reads::USER_COLS
    );
    all(c, &sql, &[&community_id]).await?.iter().map(reads::user_row).collect()
}

pub async fn set_moderator(
    c: &impl GenericClient,
    actor: &User,
    community: &str,
    username: &str,
    appoint: bool,
    now: Timestamp,
) -> StoreResult<bool> {
    policy::may_appoint_moderators(actor)?;
    let community_id = reads::community_id(c, community).await?;
    let (user_id, _) = user_by_name(c, username).await?;
    let changed = if appoint {
        exec(
            c,
            "INSERT INTO moderators (community_id, user_id, created_at) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING",
            &[&community_id, &user_id, &now.0],
        )
        .await?
    } else {
        exec(c, "DELETE FROM moderators WHERE community_id = $1 AND user_id = $2", &[&community_id, &user_id]).await?
    } > 0;
    if !appoint && !changed {
        return Err(StoreError::NotFound("moderator"));
    }
    if changed {
        let action = if appoint { "appoint_moderator" } else { "remove_moderator" };
        LogLine {
            community_id: Some(community_id),
            action,
            target_user: Some(user_id),
            topic_id: None,
            post_id: None,
            reason: "",
            expires_at: None,
        }
        .write(c, actor, now)
        .await?;
    }
    Ok(changed)
}

// ---------------------------------------------------------------------------
// Removing, restoring, locking.

pub async fn moderate(
    c: &impl GenericClient,
    actor: &User,
    action: ModAction,
    reason: &Reason,
    now: Timestamp,
) -> StoreResult<Moderated> {
    use ModAction::*;
    let (post_id, column, value) = match action {
        RemoveTopic(_) => (None, "removed", true),
        RestoreTopic(_) => (None, "removed", false),
        LockTopic(_) => (None, "locked", true),
        UnlockTopic(_) => (None, "locked", false),
        RemovePost(id) => (Some(id), "removed", true),
        RestorePost(id) => (Some(id), "removed", false),
    };
    let (topic_id, target_user): (i64, i64) = match action {
        RemoveTopic(id) | RestoreTopic(id) | LockTopic(id) | UnlockTopic(id) => {
            match opt(c, "SELECT author_id FROM topics WHERE id = $1", &[&id]).await? {
                Some(r) => (id, col(&r, 0)?),
                None => return Err(StoreError::NotFound("topic")),
            }
        }
        RemovePost(id) | RestorePost(id) => {
            match opt(c, "SELECT topic_id, author_id FROM posts WHERE id = $1", &[&id]).await? {
                Some(r) => (col(&r, 0)?, col(&r, 1)?),
                None => return Err(StoreError::NotFound("post")),
            }
        }
    };
    let community_id: i64 = col(&one(c, "SELECT community_id FROM topics WHERE id = $1", &[&topic_id]).await?, 0)?;
    policy::may_moderate(actor, &standing(c, actor, community_id).await?, now)?;
    let (table, id) = match post_id {
        Some(id) => ("posts", id),
        None => ("topics", topic_id),
    };
    // Only a real change is logged: removing a removed post is a no-op.
    let sql = format!("UPDATE {table} SET {column} = $1 WHERE id = $2 AND {column} <> $1");
    let changed = exec(c, &sql, &[&value, &id]).await? > 0;
    if changed {
        LogLine {
            community_id: Some(community_id),
            action: action.name(),
            target_user: Some(target_user),
            topic_id: Some(topic_id),
            post_id,
            reason: reason.as_str(),
            expires_at: None,
        }
        .write(c, actor, now)
        .await?;
        // As in store::sqlite::moderation.
        match action {
            RemoveTopic(id) | RestoreTopic(id) => super::media::moderated(c, 0, id, value, now).await?,
            RemovePost(id) | RestorePost(id) => super::media::moderated(c, 1, id, value, now).await?,
            LockTopic(_) | UnlockTopic(_) => {}
        }
    }
    let notice = common::moderation_notice(actor, action, reason, (topic_id, post_id), target_user, changed);
    let notified = super::inbox::notify(c, notice.as_slice(), now).await?.pop();
    let post = match post_id {
        Some(id) => Some(writes::post(c, id).await?),
        None => None,
    };
    let topic_removed: bool = col(&one(c, "SELECT removed FROM topics WHERE id = $1", &[&topic_id]).await?, 0)?;
    Ok(Moderated { topic_id, topic_removed, post, changed, notified })
}

// ---------------------------------------------------------------------------
// Bans.

/// The community a ban concerns (`None`: the site), once `actor` is shown
/// to be allowed to ban there.
async fn ban_scope(
    c: &impl GenericClient,
    actor: &User,
    community: Option<&str>,
    now: Timestamp,
) -> StoreResult<Option<i64>> {
    let Some(name) = community else {
        policy::may_ban(actor, None, now)?;
        return Ok(None);
    };
    let id = reads::community_id(c, name).await?;
    policy::may_ban(actor, Some(&standing(c, actor, id).await?), now)?;
    Ok(Some(id))
}

pub async fn ban(c: &impl GenericClient, actor: &User, new: &NewBan, now: Timestamp) -> StoreResult<Ban> {
    let community_id = ban_scope(c, actor, new.community.as_deref(), now).await?;
    let (user_id, is_admin) = user_by_name(c, &new.username).await?;
    let is_moderator = match community_id {
        Some(community) => is_moderator(c, user_id, community).await?,
        None => false,
    };
    policy::may_be_banned(BanTarget { is_admin, is_moderator })?;
    // Banning again replaces the ban (a new reason or expiry).
    exec(
        c,
        "DELETE FROM bans WHERE user_id = $1 AND coalesce(community_id, 0) = coalesce($2::bigint, 0)",
        &[&user_id, &community_id],
    )
    .await?;
    let expires_at = new.expires_at.map(|t| t.0);
    let row = one(
        c,
        "INSERT INTO bans (user_id, community_id, reason, banned_by, created_at, expires_at) \
         VALUES ($1, $2, $3, $4, $5, $6) RETURNING id",
        &[&user_id, &community_id, &new.reason.as_str(), &actor.id, &now.0, &expires_at],
    )
    .await?;
    let id: i64 = col(&row, 0)?;
    LogLine {
        community_id,
        action: "ban",
        target_user: Some(user_id),
        topic_id: None,
        post_id: None,
        reason: new.reason.as_str(),
        expires_at,
    }
    .write(c, actor, now)
    .await?;
    ban_row(&one(c, &format!("{BAN_SQL} WHERE b.id = $1"), &[&id]).await?)
}

pub async fn unban(
    c: &impl GenericClient,
    actor: &User,
    community: Option<&str>,
    username: &str,
    now: Timestamp,
) -> StoreResult<()> {
    let community_id = ban_scope(c, actor, community, now).await?;
    let (user_id, _) = user_by_name(c, username).await?;
    // FOR UPDATE: of two unbans at once, the second waits, then finds the
    // ban gone.
    let row = opt(
        c,
        "SELECT expires_at, reason FROM bans \
         WHERE user_id = $1 AND coalesce(community_id, 0) = coalesce($2::bigint, 0) FOR UPDATE",
        &[&user_id, &community_id],
    )
    .await?;
    let ban = match row {
        Some(r) => Some(BanTerm { expires_at: col::<Option<i64>>(&r, 0)?.map(Timestamp), reason: col(&r, 1)? }),
        None => None,
    };
    policy::may_lift(ban.as_ref(), now)?;
    exec(
        c,
        "DELETE FROM bans WHERE user_id = $1 AND coalesce(community_id, 0) = coalesce($2::bigint, 0)",
        &[&user_id, &community_id],
    )
    .await?;
    LogLine {
        community_id,
        action: "unban",
        target_user: Some(user_id),
        topic_id: None,
        post_id: None,
        reason: "",
        expires_at: None,
    }
    .write(c, actor, now)
    .await
}

const BAN_SQL: &str = "SELECT u.name, c.name, b.reason, a.name, b.created_at, b.expires_at FROM bans b \
     JOIN users u ON u.id = b.user_id JOIN users a ON a.id = b.banned_by \
     LEFT JOIN communities c ON c.id = b.community_id";

fn ban_row(r: &Row) -> StoreResult<Ban> {
    Ok(Ban {
        user: col(r, 0)?,
        community: col(r, 1)?,
        reason: col(r, 2)?,
        banned_by: col(r, 3)?,
        created_at: Timestamp(col(r, 4)?),
        expires_at: col::<Option<i64>>(r, 5)?.map(Timestamp),
    })
}

/// Bans in force, newest first.
pub async fn bans(
    c: &impl GenericClient,
    actor: &User,
    community: Option<&str>,
    now: Timestamp,
) -> StoreResult<Vec<Ban>> {
    let community_id = match community {
        Some(name) => Some(reads::community_id(c, name).await?),
        None => None,
    };
    let moderates = match community_id {
        Some(id) => Some(appointed(c, actor, id).await?),
        None => None,
    };
    policy::may_see_bans(actor, moderates)?;
    let scope =
        if community_id.is_some() { "b.community_id = $1" } else { "b.community_id IS NULL AND $1::bigint IS NULL" };
    let sql = format!("{BAN_SQL} WHERE {scope} AND (b.expires_at IS NULL OR b.expires_at > $2) ORDER BY b.id DESC");
    all(c, &sql, &[&community_id, &now.0]).await?.iter().map(ban_row).collect()
}

// ---------------------------------------------------------------------------
// The public log.

const LOG_SQL: &str = "SELECT l.id, c.name, a.name, l.action, t.name, l.topic_id, l.post_id, l.reason, \
     l.expires_at, l.created_at FROM mod_log l JOIN users a ON a.id = l.actor_id \
     LEFT JOIN communities c ON c.id = l.community_id LEFT JOIN users t ON t.id = l.target_user_id";

fn log_row(r: &Row) -> StoreResult<ModLogEntry> {
    Ok(ModLogEntry {
        id: col(r, 0)?,
        community: col(r, 1)?,
        actor: col(r, 2)?,
        action: col(r, 3)?,
        target_user: col(r, 4)?,
        topic_id: col(r, 5)?,
        post_id: col(r, 6)?,
        reason: col(r, 7)?,
        expires_at: col::<Option<i64>>(r, 8)?.map(Timestamp),
        created_at: Timestamp(col(r, 9)?),
    })
}

pub async fn mod_log(c: &impl GenericClient, q: &ListModLog) -> StoreResult<ModLogPage> {
    let community_id = match q.community.as_deref() {
        Some(name) => Some(reads::community_id(c, name).await?),
        None => None,
    };
    let filter = if community_id.is_some() { "l.community_id = $1" } else { "$1::bigint IS NULL" };
    let after = q.after.unwrap_or(i64::MAX);
    let limit = (q.limit + 1) as i64;
    let sql = format!("{LOG_SQL} WHERE {filter} AND l.id < $2 ORDER BY l.id DESC LIMIT $3");
    let mut entries =
        all(c, &sql, &[&community_id, &after, &limit]).await?.iter().map(log_row).collect::<StoreResult<Vec<_>>>()?;
    let next = page(&mut entries, q.limit, |e: &ModLogEntry| e.id);
    Ok(ModLogPage { entries, next })
}

/// Trims a `limit + 1` query to `limit`; the next page's cursor when there
/// is one.
pub(super) fn page<T>(items: &mut Vec<T>, limit: usize, id: impl Fn(&T) -> i64) -> Option<i64> {
    if items.len() <= limit {
        return None;
    }
    items.truncate(limit);
    items.last().map(id)
}
