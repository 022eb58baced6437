//! Moderation's SQL: the facts its rules ask for (`model::policy`: who
//! moderates, bans on record), moderators, removals and locks, bans and the
//! public log (reports are in `reports`). Writes run on the writer thread
//! inside the group transaction, so a rule's facts and the action it allows
//! see the same state; reads run on a reader.

use rusqlite::{Connection, OptionalExtension, Row, params};

use super::conn::map_err;
use super::{reads, writes};
use crate::model::policy::{self, BanFacts, BanTarget, BanTerm, Standing};
use crate::model::{Ban, ModAction, ModLogEntry, Moderated, Reason, Timestamp, User};
use crate::store::{ListModLog, ModLogPage, NewBan, StoreError, StoreResult, common};

pub fn is_moderator(conn: &Connection, user_id: i64, community_id: i64) -> StoreResult<bool> {
    conn.prepare_cached("SELECT 1 FROM moderators WHERE community_id = ?1 AND user_id = ?2")
        .and_then(|mut s| s.exists(params![community_id, user_id]))
        .map_err(map_err)
}

/// Whether `user` is an appointed moderator of the community, read only
/// when a rule asks (`policy::needs_is_moderator`).
pub(super) fn appointed(conn: &Connection, user: &User, community_id: i64) -> StoreResult<bool> {
    Ok(policy::needs_is_moderator(user) && is_moderator(conn, user.id, community_id)?)
}

/// What the moderation rules ask of `user` in the community: appointed
/// there, and their bans.
pub(super) fn standing(conn: &Connection, user: &User, community_id: i64) -> StoreResult<Standing> {
    Ok(Standing { is_moderator: appointed(conn, user, community_id)?, bans: ban_facts(conn, user, community_id)? })
}

/// The bans on record against `user` from the site and from the community,
/// in force or expired (`policy::not_banned` compares expiry with `now`);
/// none read when bans do not matter (`policy::needs_bans`).
pub fn ban_facts(conn: &Connection, user: &User, community_id: i64) -> StoreResult<BanFacts> {
    let mut facts = BanFacts::default();
    if !policy::needs_bans(user) {
        return Ok(facts);
    }
    let mut stmt = conn
        .prepare_cached(
            "SELECT c.name, b.expires_at, b.reason FROM bans b LEFT JOIN communities c ON c.id = b.community_id \
             WHERE b.user_id = ?1 AND (b.community_id IS NULL OR b.community_id = ?2)",
        )
        .map_err(map_err)?;
    let rows = stmt
        .query_map(params![user.id, community_id], |r| {
            let term = BanTerm { expires_at: r.get::<_, Option<i64>>(1)?.map(Timestamp), reason: r.get(2)? };
            Ok((r.get::<_, Option<String>>(0)?, term))
        })
        .map_err(map_err)?;
    for row in rows {
        match row.map_err(map_err)? {
            (None, term) => facts.site = Some(term),
            (Some(community), term) => facts.community = Some((community, term)),
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
    fn write(&self, conn: &Connection, actor: &User, now: Timestamp) -> StoreResult<()> {
        conn.prepare_cached(
            "INSERT INTO mod_log (community_id, actor_id, action, target_user_id, topic_id, post_id, reason, \
             expires_at, created_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
        )
        .and_then(|mut s| {
            s.execute(params![
                self.community_id,
                actor.id,
                self.action,
                self.target_user,
                self.topic_id,
                self.post_id,
                self.reason,
                self.expires_at,
                now.0
            ])
        })
        .map_err(map_err)?;
        Ok(())
    }
}

/// A user's id and admin flag, by name.
fn user_by_name(conn: &Connection, name: &str) -> StoreResult<(i64, bool)> {
    conn.prepare_cached("SELECT id, is_admin FROM users WHERE name = ?1 AND deleted_at IS NULL")
        .and_then(|mut s| s.query_row([name], |r| Ok((r.get(0)?, r.get(1)?))).optional())
        .map_err(map_err)?
        .ok_or(StoreError::NotFound("user"))
}

// ---------------------------------------------------------------------------
// Moderators.

pub fn moderators(conn: &Connection, community: &str) -> StoreResult<Vec<User>> {
    let community_id = reads::community_id(conn, community)?;
    conn.prepare_cached(&format!(
        "SELECT {} FROM moderators m JOIN users u ON u.id = m.user_id WHERE m.community_id = ?1 \
         ORDER BY m.created_at, u.id",
        reads::USER_COLS
    ))
    .and_then(|mut s| s.query_map([community_id], reads::user_row)?.collect())
    .map_err(map_err)
}

pub fn set_moderator(
    conn: &Connection,
    actor: &User,
    community: &str,
    username: &str,
    appoint: bool,
    now: Timestamp,
) -> StoreResult<bool> {
    policy::may_appoint_moderators(actor)?;
    let community_id = reads::community_id(conn, community)?;
    let (user_id, _) = user_by_name(conn, username)?;
    let changed = if appoint {
        conn.prepare_cached("INSERT OR IGNORE INTO moderators (community_id, user_id, created_at) VALUES (?1, ?2, ?3)")
            .and_then(|mut s| s.execute(params![community_id, user_id, now.0]))
    } else {
        conn.prepare_cached("DELETE FROM moderators WHERE community_id = ?1 AND user_id = ?2")
            .and_then(|mut s| s.execute(params![community_id, user_id]))
    }
    .map_err(map_err)?
        > 0;
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
        .write(conn, actor, now)?;
    }
    Ok(changed)
}

// ---------------------------------------------------------------------------
// Removing, restoring, locking.

pub fn moderate(
    conn: &Connection,
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
    let (topic_id, target_user) = match action {
        RemoveTopic(id) | RestoreTopic(id) | LockTopic(id) | UnlockTopic(id) => {
            let t: Option<i64> = conn
                .prepare_cached("SELECT author_id FROM topics WHERE id = ?1")
                .and_then(|mut s| s.query_row([id], |r| r.get(0)).optional())
                .map_err(map_err)?;
            (id, t.ok_or(StoreError::NotFound("topic"))?)
        }
        RemovePost(id) | RestorePost(id) => conn
            .prepare_cached("SELECT topic_id, author_id FROM posts WHERE id = ?1")
            .and_then(|mut s| s.query_row([id], |r| Ok((r.get(0)?, r.get(1)?))).optional())
            .map_err(map_err)?
            .ok_or(StoreError::NotFound("post"))?,
    };
    let community_id: i64 = conn
        .prepare_cached("SELECT community_id FROM topics WHERE id = ?1")
        .and_then(|mut s| s.query_row([topic_id], |r| r.get(0)))
        .map_err(map_err)?;
    policy::may_moderate(actor, &standing(conn, actor, community_id)?, now)?;
    let (table, id) = match post_id {
        Some(id) => ("posts", id),
        None => ("topics", topic_id),
    };
    // Only a real change is logged: removing a removed post is a no-op.
    let changed = conn
        .prepare_cached(&format!("UPDATE {table} SET {column} = ?1 WHERE id = ?2 AND {column} != ?1"))
        .and_then(|mut s| s.execute(params![value, id]))
        .map_err(map_err)?
        > 0;
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
        .write(conn, actor, now)?;
        // Removed content's pictures stop being served (nothing else
        // showing them); a restore shows again those still stored.
        match action {
            RemoveTopic(id) | RestoreTopic(id) => super::media::moderated(conn, 0, id, value, now)?,
            RemovePost(id) | RestorePost(id) => super::media::moderated(conn, 1, id, value, now)?,
            LockTopic(_) | UnlockTopic(_) => {}
        }
    }
    let notice = common::moderation_notice(actor, action, reason, (topic_id, post_id), target_user, changed);
    let notified = super::inbox::notify(conn, notice.as_slice(), now)?.pop();
    let post = post_id.map(|id| writes::post(conn, id)).transpose()?;
    let topic_removed: bool = conn
        .prepare_cached("SELECT removed FROM topics WHERE id = ?1")
        .and_then(|mut s| s.query_row([topic_id], |r| r.get(0)))
        .map_err(map_err)?;
    Ok(Moderated { topic_id, topic_removed, post, changed, notified })
}

// ---------------------------------------------------------------------------
// Bans.

/// The community a ban concerns (`None`: the site), once `actor` is shown
/// to be allowed to ban there.
fn ban_scope(conn: &Connection, actor: &User, community: Option<&str>, now: Timestamp) -> StoreResult<Option<i64>> {
    let community_id = community.map(|name| reads::community_id(conn, name)).transpose()?;
    let in_community = community_id.map(|id| standing(conn, actor, id)).transpose()?;
    policy::may_ban(actor, in_community.as_ref(), now)?;
    Ok(community_id)
}

pub fn ban(conn: &Connection, actor: &User, new: &NewBan, now: Timestamp) -> StoreResult<Ban> {
    let community_id = ban_scope(conn, actor, new.community.as_deref(), now)?;
    let (user_id, is_admin) = user_by_name(conn, &new.username)?;
    let is_moderator = match community_id {
        Some(c) => is_moderator(conn, user_id, c)?,
        None => false,
    };
    policy::may_be_banned(BanTarget { is_admin, is_moderator })?;
    // Banning again replaces the ban (a new reason or expiry).
    conn.prepare_cached("DELETE FROM bans WHERE user_id = ?1 AND ifnull(community_id, 0) = ifnull(?2, 0)")
        .and_then(|mut s| s.execute(params![user_id, community_id]))
        .map_err(map_err)?;
    let expires_at = new.expires_at.map(|t| t.0);
    conn.prepare_cached(
        "INSERT INTO bans (user_id, community_id, reason, banned_by, created_at, expires_at) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
    )
    .and_then(|mut s| s.execute(params![user_id, community_id, new.reason.as_str(), actor.id, now.0, expires_at]))
    .map_err(map_err)?;
    let id = conn.last_insert_rowid();
    LogLine {
        community_id,
        action: "ban",
        target_user: Some(user_id),
        topic_id: None,
        post_id: None,
        reason: new.reason.as_str(),
        expires_at,
    }
    .write(conn, actor, now)?;
    conn.prepare_cached(&format!("{BAN_SQL} WHERE b.id = ?1"))
        .and_then(|mut s| s.query_row([id], ban_row))
        .map_err(map_err)
}

pub fn unban(
    conn: &Connection,
    actor: &User,
    community: Option<&str>,
    username: &str,
    now: Timestamp,
) -> StoreResult<()> {
    let community_id = ban_scope(conn, actor, community, now)?;
    let (user_id, _) = user_by_name(conn, username)?;
    let ban: Option<BanTerm> = conn
        .prepare_cached(
            "SELECT expires_at, reason FROM bans WHERE user_id = ?1 AND ifnull(community_id, 0) = ifnull(?2, 0)",
        )
        .and_then(|mut s| {
            s.query_row(params![user_id, community_id], |r| {
                Ok(BanTerm { expires_at: r.get::<_, Option<i64>>(0)?.map(Timestamp), reason: r.get(1)? })
            })
            .optional()
        })
        .map_err(map_err)?;
    policy::may_lift(ban.as_ref(), now)?;
    conn.prepare_cached("DELETE FROM bans WHERE user_id = ?1 AND ifnull(community_id, 0) = ifnull(?2, 0)")
        .and_then(|mut s| s.execute(params![user_id, community_id]))
        .map_err(map_err)?;
    LogLine {
        community_id,
        action: "unban",
        target_user: Some(user_id),
        topic_id: None,
        post_id: None,
        reason: "",
        expires_at: None,
    }
    .write(conn, actor, now)
}

const BAN_SQL: &str = "SELECT u.name, c.name, b.reason, a.name, b.created_at, b.expires_at FROM bans b \
     JOIN users u ON u.id = b.user_id JOIN users a ON a.id = b.banned_by \
     LEFT JOIN communities c ON c.id = b.community_id";

fn ban_row(r: &Row<'_>) -> rusqlite::Result<Ban> {
    Ok(Ban {
        user: r.get(0)?,
        community: r.get(1)?,
        reason: r.get(2)?,
        banned_by: r.get(3)?,
        created_at: Timestamp(r.get(4)?),
        expires_at: r.get::<_, Option<i64>>(5)?.map(Timestamp),
    })
}

/// Bans in force, newest first (read-only: runs on a reader).
pub fn bans(conn: &Connection, actor: &User, community: Option<&str>, now: Timestamp) -> StoreResult<Vec<Ban>> {
    let community_id = community.map(|name| reads::community_id(conn, name)).transpose()?;
    let moderates = community_id.map(|id| appointed(conn, actor, id)).transpose()?;
    policy::may_see_bans(actor, moderates)?;
    let scope = if community_id.is_some() { "b.community_id = ?1" } else { "b.community_id IS NULL AND ?1 IS NULL" };
    conn.prepare_cached(&format!(
        "{BAN_SQL} WHERE {scope} AND (b.expires_at IS NULL OR b.expires_at > ?2) ORDER BY b.id DESC"
    ))
    .and_then(|mut s| s.query_map(params![community_id, now.0], ban_row)?.collect())
    .map_err(map_err)
}

// ---------------------------------------------------------------------------
// The public log.

const LOG_SQL: &str = "SELECT l.id, c.name, a.name, l.action, t.name, l.topic_id, l.post_id, l.reason, \
     l.expires_at, l.created_at FROM mod_log l JOIN users a ON a.id = l.actor_id \
     LEFT JOIN communities c ON c.id = l.community_id LEFT JOIN users t ON t.id = l.target_user_id";

fn log_row(r: &Row<'_>) -> rusqlite::Result<ModLogEntry> {
    Ok(ModLogEntry {
        id: r.get(0)?,
        community: r.get(1)?,
        actor: r.get(2)?,
        action: r.get(3)?,
        target_user: r.get(4)?,
        topic_id: r.get(5)?,
        post_id: r.get(6)?,
        reason: r.get(7)?,
        expires_at: r.get::<_, Option<i64>>(8)?.map(Timestamp),
        created_at: Timestamp(r.get(9)?),
    })
}

pub fn mod_log(conn: &Connection, q: &ListModLog) -> StoreResult<ModLogPage> {
    let community_id = q.community.as_deref().map(|name| reads::community_id(conn, name)).transpose()?;
    let filter = if community_id.is_some() { "l.community_id = ?1" } else { "?1 IS NULL" };
    let after = q.after.unwrap_or(i64::MAX);
    let mut entries = conn
        .prepare_cached(&format!("{LOG_SQL} WHERE {filter} AND l.id < ?2 ORDER BY l.id DESC LIMIT ?3"))
        .and_then(|mut s| s.query_map(params![community_id, after, (q.limit + 1) as i64], log_row)?.collect())
        .map_err(map_err)?;
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
