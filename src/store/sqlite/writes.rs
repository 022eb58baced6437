//! Write operations, each run by the writer thread inside the current
//! group transaction. The facts a rule of `model::policy` decides on (is
//! this the author? is the topic locked?) are read here, in the same
//! transaction as the write the rule allows.

use rusqlite::{Connection, OptionalExtension, Row, params};

use super::conn::{is_unique_violation, map_err};
use super::moderation::{ban_facts, is_moderator};
use super::reads;
use crate::model::policy::{self, ItemFacts, Kind, Standing, TopicFacts};
use crate::model::{
    Community, NameKeys, Notified, Post, Text, Timestamp, Topic, User, Username, VoteOutcome, VoteTarget, hot_rank,
};
use crate::store::{NewCommunity, NewPost, NewTopic, StoreError, StoreResult, common};

pub fn create_user(
    conn: &Connection,
    name: &Username,
    password_hash: Option<&str>,
    is_admin: bool,
    now: Timestamp,
) -> StoreResult<User> {
    let keys = NameKeys::of(name.as_str());
    policy::may_take_name(super::accounts::similar_name(conn, name.as_str(), &keys)?.as_deref())?;
    let inserted = conn
        .prepare_cached(
            "INSERT INTO users (name, password_hash, is_admin, created_at, skeleton, skeleton_folded) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
        )
        .and_then(|mut s| s.execute(params![name.as_str(), password_hash, is_admin, now.0, keys.written, keys.folded]));
    match inserted {
        Ok(_) => Ok(User { id: conn.last_insert_rowid(), name: name.as_str().to_owned(), is_admin, created_at: now }),
        Err(e) if is_unique_violation(&e) => Err(StoreError::Conflict("username is already taken".into())),
        Err(e) => Err(map_err(e)),
    }
}

pub fn revoke_token(conn: &Connection, hash: &[u8; 32]) -> StoreResult<()> {
    conn.prepare_cached("DELETE FROM tokens WHERE hash = ?1")
        .and_then(|mut s| s.execute([&hash[..]]))
        .map_err(map_err)?;
    Ok(())
}

pub fn create_community(
    conn: &Connection,
    creator: &User,
    new: &NewCommunity,
    now: Timestamp,
) -> StoreResult<Community> {
    policy::may_create_community(creator)?;
    let inserted = conn
        .prepare_cached(
            "INSERT INTO communities (name, title, description, created_by, created_at) VALUES (?1, ?2, ?3, ?4, ?5)",
        )
        .and_then(|mut s| {
            s.execute(params![new.name.as_str(), new.title.as_str(), new.description, creator.id, now.0])
        });
    match inserted {
        Ok(_) => {
            // The creator is the community's first moderator.
            conn.prepare_cached("INSERT INTO moderators (community_id, user_id, created_at) VALUES (?1, ?2, ?3)")
                .and_then(|mut s| s.execute(params![conn.last_insert_rowid(), creator.id, now.0]))
                .map_err(map_err)?;
            reads::community(conn, new.name.as_str())
        }
        Err(e) if is_unique_violation(&e) => Err(StoreError::Conflict("a community with that name exists".into())),
        Err(e) => Err(map_err(e)),
    }
}

/// `html` is the body rendered (`None` without a body); the caller renders
/// it before the write reaches this thread.
pub fn create_topic(
    conn: &Connection,
    author: &User,
    new: &NewTopic,
    html: Option<&str>,
    now: Timestamp,
) -> StoreResult<Topic> {
    let community_id = reads::community_id(conn, new.community.as_str())?;
    policy::may_create_topic(author, &ban_facts(conn, author, community_id)?, now)?;
    super::federation::check_unmapped(conn, new.remote_id.as_deref())?;
    conn.prepare_cached(
        "INSERT INTO topics (community_id, author_id, title, body, body_html, url, created_at, hot) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
    )
    .and_then(|mut s| {
        s.execute(params![
            community_id,
            author.id,
            new.title.as_str(),
            new.body.as_ref().map(|b| b.as_str()),
            html,
            new.url.as_ref().map(|u| u.as_str()),
            now.0,
            hot_rank(0, now.0)
        ])
    })
    .map_err(map_err)?;
    let id = conn.last_insert_rowid();
    super::federation::map_object(conn, new.remote_id.as_deref(), VoteTarget::Topic(id), id)?;
    // Its mentions' notifications and its pictures, in this transaction.
    let mut notified = Vec::new();
    if let Some(body) = &new.body {
        super::media::add_refs(conn, 0, id, body.media())?;
        let mentioned = super::inbox::user_ids(conn, common::mentioned_names(body))?;
        notified = super::inbox::notify(conn, &common::new_notices(author, (id, None), body, None, &mentioned), now)?;
    }
    Ok(Topic { inbox: notified, ..reads::topic(conn, id)? })
}

/// A topic's facts from its columns `deleted, removed, locked, author_id,
/// community_id`, the first at `at`.
fn topic_facts(r: &Row<'_>, at: usize) -> rusqlite::Result<TopicFacts> {
    Ok(TopicFacts {
        deleted: r.get(at)?,
        removed: r.get(at + 1)?,
        locked: r.get(at + 2)?,
        author_id: r.get(at + 3)?,
        community_id: r.get(at + 4)?,
    })
}

/// A topic or post as the rules see it, with what its writer needs besides.
pub(super) struct Item {
    pub id: i64,
    pub topic_id: i64,
    pub created_at: i64,
    pub facts: ItemFacts,
}

/// An item's columns: its topic's id, its creation time, its topic's
/// facts (`topic_facts`), then for a post its author, deleted and removed.
const TOPIC_ITEM: &str =
    "SELECT id, created_at, deleted, removed, locked, author_id, community_id FROM topics WHERE id = ?1";
const POST_ITEM: &str = "SELECT p.topic_id, p.created_at, t.deleted, t.removed, t.locked, t.author_id, \
     t.community_id, p.author_id, p.deleted, p.removed FROM posts p JOIN topics t ON t.id = p.topic_id WHERE p.id = ?1";

/// The topic or post `target` names; `NotFound` when there is none.
pub(super) fn item(conn: &Connection, target: VoteTarget) -> StoreResult<Item> {
    let (id, kind, sql) = match target {
        VoteTarget::Topic(id) => (id, Kind::Topic, TOPIC_ITEM),
        VoteTarget::Post(id) => (id, Kind::Post, POST_ITEM),
    };
    conn.prepare_cached(sql)
        .and_then(|mut s| s.query_row([id], |r| item_row(r, id, kind)).optional())
        .map_err(map_err)?
        .ok_or(StoreError::NotFound(kind.name()))
}

fn item_row(r: &Row<'_>, id: i64, kind: Kind) -> rusqlite::Result<Item> {
    let topic = topic_facts(r, 2)?;
    let facts = match kind {
        Kind::Topic => ItemFacts::of_topic(topic),
        Kind::Post => ItemFacts { kind, author_id: r.get(7)?, deleted: r.get(8)?, removed: r.get(9)?, topic },
    };
    Ok(Item { id, topic_id: r.get(0)?, created_at: r.get(1)?, facts })
}

/// Refuses an edit of `target` that `actor` may not make.
fn check_edit(conn: &Connection, actor: &User, target: VoteTarget, now: Timestamp) -> StoreResult<()> {
    let item = item(conn, target)?;
    let bans = ban_facts(conn, actor, item.facts.community_id())?;
    Ok(policy::may_edit(actor, &item.facts, &bans, now)?)
}

/// Refuses a deletion of `target` that `actor` may not make.
fn check_delete(conn: &Connection, actor: &User, target: VoteTarget) -> StoreResult<()> {
    Ok(policy::may_delete(actor, &item(conn, target)?.facts)?)
}

/// `body` is the source and its rendered HTML, `None` to clear it;
/// `title` a new title, if any; `media` the pictures it shows.
pub fn edit_topic(
    conn: &Connection,
    actor: &User,
    id: i64,
    body: Option<(&str, &str)>,
    title: Option<&str>,
    media: &[String],
    now: Timestamp,
) -> StoreResult<Topic> {
    check_edit(conn, actor, VoteTarget::Topic(id), now)?;
    super::media::set_refs(conn, 0, id, media)?;
    let (source, html) = body.unzip();
    conn.prepare_cached(
        "UPDATE topics SET body = ?1, body_html = ?2, edited_at = ?3, title = coalesce(?5, title) WHERE id = ?4",
    )
    .and_then(|mut s| s.execute(params![source, html, now.0, id, title]))
    .map_err(map_err)?;
    reads::topic(conn, id)
}

pub fn delete_topic(conn: &Connection, actor: &User, id: i64, now: Timestamp) -> StoreResult<()> {
    check_delete(conn, actor, VoteTarget::Topic(id))?;
    super::media::drop_refs(conn, 0, id, now)?;
    conn.prepare_cached("UPDATE topics SET deleted = 1, body = NULL, body_html = NULL, url = NULL WHERE id = ?1")
        .and_then(|mut s| s.execute([id]))
        .map_err(map_err)?;
    Ok(())
}

/// `html` is `new.body` rendered, before the write reached this thread.
/// Every refusal comes before the first change: the writer runs it without
/// a savepoint (`Writer::write_checked_first`), so keep it that way.
/// Returns the new post's id, whom it replies to (see `new_reply`) and
/// the notifications it wrote, in the same transaction.
pub fn create_post(
    conn: &Connection,
    author: &User,
    new: &NewPost,
    html: &str,
    now: Timestamp,
) -> StoreResult<(i64, Option<i64>, Vec<Notified>)> {
    let topic: Option<TopicFacts> = conn
        .prepare_cached("SELECT deleted, removed, locked, author_id, community_id FROM topics WHERE id = ?1")
        .and_then(|mut s| s.query_row([new.topic_id], |r| topic_facts(r, 0)).optional())
        .map_err(map_err)?;
    let topic = topic.ok_or(StoreError::NotFound("topic"))?;
    let bans = ban_facts(conn, author, topic.community_id)?;
    let is_moderator =
        policy::reply_needs_is_moderator(author, &topic) && is_moderator(conn, author.id, topic.community_id)?;
    policy::may_reply(author, &topic, &Standing { is_moderator, bans }, now)?;
    // Whose reply this is: the parent post's author, else the topic's.
    let mut replied_to = Some(topic.author_id);
    if let Some(parent) = new.parent_id {
        let parent_row: Option<(i64, i64, bool)> = conn
            .prepare_cached("SELECT topic_id, author_id, deleted FROM posts WHERE id = ?1")
            .and_then(|mut s| s.query_row([parent], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?))).optional())
            .map_err(map_err)?;
        policy::valid_parent(new.topic_id, parent, parent_row.map(|(topic_id, ..)| topic_id))?;
        replied_to = parent_row.filter(|&(.., deleted)| !deleted).map(|(_, author, _)| author);
    }
    // Checked before the first change (the caller has no savepoint), so
    // mapping it below cannot fail on this single writer.
    super::federation::check_unmapped(conn, new.remote_id.as_deref())?;
    conn.prepare_cached(
        "INSERT INTO posts (topic_id, parent_id, author_id, body, body_html, created_at) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
    )
    .and_then(|mut s| s.execute(params![new.topic_id, new.parent_id, author.id, new.body.as_str(), html, now.0]))
    .map_err(map_err)?;
    let id = conn.last_insert_rowid();
    super::search_queue::post_added(conn, id, new.body.as_str())?;
    super::federation::map_object(conn, new.remote_id.as_deref(), VoteTarget::Post(id), new.topic_id)?;
    super::media::add_refs(conn, 1, id, new.body.media())?;
    count_post(conn, new.topic_id)?;
    let mentioned = super::inbox::user_ids(conn, common::mentioned_names(&new.body))?;
    let notices = common::new_notices(author, (new.topic_id, Some(id)), &new.body, replied_to, &mentioned);
    let notified = super::inbox::notify(conn, &notices, now)?;
    Ok((id, replied_to, notified))
}

/// One more post in the topic's count (migration 0019), the row made with
/// its first post. Two single-row statements rather than an upsert: each
/// is one write that cannot abort halfway, so neither needs a statement
/// journal.
fn count_post(conn: &Connection, topic_id: i64) -> StoreResult<()> {
    let counted = conn
        .prepare_cached("UPDATE topic_counts SET post_count = post_count + 1 WHERE topic_id = ?1")
        .and_then(|mut s| s.execute([topic_id]))
        .map_err(map_err)?;
    if counted == 0 {
        conn.prepare_cached("INSERT INTO topic_counts (topic_id, post_count) VALUES (?1, 1)")
            .and_then(|mut s| s.execute([topic_id]))
            .map_err(map_err)?;
    }
    Ok(())
}

pub fn post(conn: &Connection, id: i64) -> StoreResult<Post> {
    conn.prepare_cached(&format!("SELECT {} {} WHERE p.id = ?1", reads::POST_COLS, reads::POST_FROM))
        .and_then(|mut s| s.query_row([id], reads::post_row).optional())
        .map_err(map_err)?
        .ok_or(StoreError::NotFound("post"))
}

pub fn edit_post(conn: &Connection, actor: &User, id: i64, body: &Text, now: Timestamp) -> StoreResult<Post> {
    check_edit(conn, actor, VoteTarget::Post(id), now)?;
    super::media::set_refs(conn, 1, id, body.media())?;
    conn.prepare_cached("UPDATE posts SET body = ?1, body_html = ?2, edited_at = ?3 WHERE id = ?4")
        .and_then(|mut s| s.execute(params![body.as_str(), body.html(), now.0, id]))
        .map_err(map_err)?;
    post(conn, id)
}

pub fn delete_post(conn: &Connection, actor: &User, id: i64, now: Timestamp) -> StoreResult<i64> {
    check_delete(conn, actor, VoteTarget::Post(id))?;
    super::media::drop_refs(conn, 1, id, now)?;
    conn.prepare_cached("UPDATE posts SET deleted = 1, body = '', body_html = '' WHERE id = ?1")
        .and_then(|mut s| s.execute([id]))
        .map_err(map_err)?;
    Ok(post(conn, id)?.topic_id)
}

/// Every refusal comes before the first change (the item and the rules
/// are read first, and the rows it changes are there): the writer runs it
/// without a savepoint (`Writer::write_checked_first`), so keep it that way.
pub fn vote(
    conn: &Connection,
    voter: &User,
    target: VoteTarget,
    value: i8,
    now: Timestamp,
) -> StoreResult<VoteOutcome> {
    let (kind, id, table) = match target {
        VoteTarget::Topic(id) => (0, id, "topics"),
        VoteTarget::Post(id) => (1, id, "posts"),
    };
    let item = item(conn, target)?;
    policy::may_vote(voter, &item.facts, &ban_facts(conn, voter, item.facts.community_id())?, now)?;
    let (topic_id, created_at) = (item.topic_id, item.created_at);
    let old: i64 = conn
        .prepare_cached("SELECT value FROM votes WHERE user_id = ?1 AND kind = ?2 AND target_id = ?3")
        .and_then(|mut s| s.query_row(params![voter.id, kind, id], |r| r.get(0)).optional())
        .map_err(map_err)?
        .unwrap_or(0);
    let change = if value == 0 {
        conn.prepare_cached("DELETE FROM votes WHERE user_id = ?1 AND kind = ?2 AND target_id = ?3")
            .and_then(|mut s| s.execute(params![voter.id, kind, id]))
    } else {
        conn.prepare_cached(
            "INSERT INTO votes (user_id, kind, target_id, value) VALUES (?1, ?2, ?3, ?4) \
             ON CONFLICT (user_id, kind, target_id) DO UPDATE SET value = excluded.value",
        )
        .and_then(|mut s| s.execute(params![voter.id, kind, id, value]))
    };
    change.map_err(map_err)?;
    let delta = i64::from(value) - old;
    let score: i64 = conn
        .prepare_cached(&format!("UPDATE {table} SET score = score + ?1 WHERE id = ?2 RETURNING score"))
        .and_then(|mut s| s.query_row(params![delta, id], |r| r.get(0)))
        .map_err(map_err)?;
    if kind == 0 {
        conn.prepare_cached("UPDATE topics SET hot = ?1 WHERE id = ?2")
            .and_then(|mut s| s.execute(params![hot_rank(score, created_at), id]))
            .map_err(map_err)?;
    }
    Ok(VoteOutcome { score, vote: value, topic_id, seq: None })
}
