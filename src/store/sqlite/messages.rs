//! Private messages, their reports and user blocks: each write on the
//! writer thread in one transaction, each list on a reader.

use rusqlite::{Connection, OptionalExtension, Row, params};

use super::conn::{is_unique_violation, map_err};
use super::moderation::page as cut;
use crate::model::messages::{EXCERPT_CHARS, pair};
use crate::model::policy;
use crate::model::{
    Blocks, Conversation, ConversationPage, Message, MessagePage, MessageReport, MessageReportPage, NewNotice,
    NoticeKind, Notified, Reason, ReportStatus, Text, Timestamp, User,
};
use crate::store::{IdPage, StoreError, StoreResult};

/// The id and name (as spelt) of the user named `name`, any case.
fn user_named(conn: &Connection, name: &str) -> StoreResult<(i64, String)> {
    conn.prepare_cached("SELECT id, name FROM users WHERE name = ?1")
        .and_then(|mut s| s.query_row([name], |r| Ok((r.get(0)?, r.get(1)?))).optional())
        .map_err(map_err)?
        .ok_or(StoreError::NotFound("user"))
}

fn blocks_user(conn: &Connection, user_id: i64, blocked_id: i64) -> StoreResult<bool> {
    conn.prepare_cached("SELECT 1 FROM user_blocks WHERE user_id = ?1 AND blocked_id = ?2")
        .and_then(|mut s| s.query_row([user_id, blocked_id], |_| Ok(())).optional())
        .map(|found| found.is_some())
        .map_err(map_err)
}

/// Records `message` as the last of the conversation on `user_id`'s side,
/// adding `unread` to their count.
fn touch_conversation(conn: &Connection, user_id: i64, other_id: i64, message: i64, unread: i64) -> StoreResult<()> {
    conn.prepare_cached(
        "INSERT INTO conversations (user_id, other_id, last_message_id, unread) VALUES (?1, ?2, ?3, ?4) \
         ON CONFLICT (user_id, other_id) DO UPDATE SET last_message_id = excluded.last_message_id, \
         unread = conversations.unread + excluded.unread",
    )
    .and_then(|mut s| s.execute(params![user_id, other_id, message, unread]))
    .map_err(map_err)?;
    Ok(())
}

pub fn send_message(
    conn: &Connection,
    sender: &User,
    to: &str,
    body: &Text,
    now: Timestamp,
) -> StoreResult<(Message, Vec<Notified>)> {
    let (recipient, to) = user_named(conn, to)?;
    // Community 0 is none: only the site-wide ban is read.
    let bans = super::moderation::ban_facts(conn, sender, 0)?;
    policy::may_message(sender, recipient, blocks_user(conn, recipient, sender.id)?, &bans, now)?;
    let (low, high) = pair(sender.id, recipient);
    conn.prepare_cached(
        "INSERT INTO messages (sender_id, recipient_id, low_id, high_id, body, body_html, created_at) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
    )
    .and_then(|mut s| s.execute(params![sender.id, recipient, low, high, body.as_str(), body.html(), now.0]))
    .map_err(map_err)?;
    let id = conn.last_insert_rowid();
    touch_conversation(conn, sender.id, recipient, id, 0)?;
    touch_conversation(conn, recipient, sender.id, id, 1)?;
    let notice = NewNotice {
        user_id: recipient,
        kind: NoticeKind::Message,
        from_id: Some(sender.id),
        topic_id: None,
        post_id: None,
        excerpt: body.excerpt().to_owned(),
    };
    let notified = super::inbox::notify(conn, &[notice], now)?;
    let message = Message {
        id,
        from: sender.name.clone(),
        to,
        body: body.as_str().to_owned(),
        body_html: body.html().to_owned(),
        created_at: now,
        read: false,
    };
    Ok((message, notified))
}

pub fn conversations(conn: &Connection, user_id: i64, page: IdPage) -> StoreResult<ConversationPage> {
    let mut conversations: Vec<Conversation> = conn
        .prepare_cached(
            "SELECT u.name, c.last_message_id, s.name, substr(m.body, 1, 600), m.created_at, c.unread \
             FROM conversations c JOIN users u ON u.id = c.other_id \
             JOIN messages m ON m.id = c.last_message_id JOIN users s ON s.id = m.sender_id \
             WHERE c.user_id = ?1 AND c.last_message_id < ?2 ORDER BY c.last_message_id DESC LIMIT ?3",
        )
        .and_then(|mut s| {
            let after = page.after.unwrap_or(i64::MAX);
            s.query_map(params![user_id, after, page.limit as i64 + 1], |r| {
                let body: String = r.get(3)?;
                Ok(Conversation {
                    with: r.get(0)?,
                    last_id: r.get(1)?,
                    last_from: r.get(2)?,
                    excerpt: crate::markdown::excerpt(&body, EXCERPT_CHARS),
                    last_at: Timestamp(r.get(4)?),
                    unread: r.get(5)?,
                })
            })?
            .collect()
        })
        .map_err(map_err)?;
    let next = cut(&mut conversations, page.limit, |c| c.last_id);
    Ok(ConversationPage { conversations, next })
}

/// A message's columns, from `messages m` and its two users `s` and `t`.
const MESSAGE_COLS: &str = "m.id, s.name, t.name, m.body, m.body_html, m.created_at, m.read";
const MESSAGE_FROM: &str = "FROM messages m JOIN users s ON s.id = m.sender_id JOIN users t ON t.id = m.recipient_id";

fn message_row(r: &Row<'_>, at: usize) -> rusqlite::Result<Message> {
    Ok(Message {
        id: r.get(at)?,
        from: r.get(at + 1)?,
        to: r.get(at + 2)?,
        body: r.get(at + 3)?,
        body_html: r.get(at + 4)?,
        created_at: Timestamp(r.get(at + 5)?),
        read: r.get(at + 6)?,
    })
}

pub fn conversation(conn: &Connection, user_id: i64, with: &str, page: IdPage) -> StoreResult<MessagePage> {
    let (with_id, with) = user_named(conn, with)?;
    let (low, high) = pair(user_id, with_id);
    let mut messages: Vec<Message> = conn
        .prepare_cached(&format!(
            "SELECT {MESSAGE_COLS} {MESSAGE_FROM} WHERE m.low_id = ?1 AND m.high_id = ?2 AND m.id < ?3 \
             ORDER BY m.id DESC LIMIT ?4"
        ))
        .and_then(|mut s| {
            let after = page.after.unwrap_or(i64::MAX);
            s.query_map(params![low, high, after, page.limit as i64 + 1], |r| message_row(r, 0))?.collect()
        })
        .map_err(map_err)?;
    let next = cut(&mut messages, page.limit, |m| m.id);
    Ok(MessagePage { with, with_id, messages, next })
}

pub fn mark_conversation_read(conn: &Connection, user_id: i64, other_id: i64) -> StoreResult<Option<i64>> {
    let (low, high) = pair(user_id, other_id);
    conn.prepare_cached(
        "UPDATE messages SET read = 1 WHERE low_id = ?1 AND high_id = ?2 AND recipient_id = ?3 AND read = 0",
    )
    .and_then(|mut s| s.execute(params![low, high, user_id]))
    .map_err(map_err)?;
    conn.prepare_cached("UPDATE conversations SET unread = 0 WHERE user_id = ?1 AND other_id = ?2 AND unread > 0")
        .and_then(|mut s| s.execute(params![user_id, other_id]))
        .map_err(map_err)?;
    let notices = conn
        .prepare_cached(
            "UPDATE notifications SET read = 1 \
             WHERE user_id = ?1 AND kind = 'message' AND from_id = ?2 AND read = 0",
        )
        .and_then(|mut s| s.execute(params![user_id, other_id]))
        .map_err(map_err)?;
    if notices == 0 {
        return Ok(None);
    }
    super::inbox::add_unread(conn, user_id, -(notices as i64)).map(Some)
}

/// A report's columns, then its message's (`MESSAGE_COLS` at 7).
const REPORT_SQL: &str = "SELECT r.id, p.name, r.reason, r.status, r.created_at, b.name, r.resolved_at, \
     m.id, s.name, t.name, m.body, m.body_html, m.created_at, m.read \
     FROM message_reports r JOIN users p ON p.id = r.reporter_id LEFT JOIN users b ON b.id = r.resolved_by \
     JOIN messages m ON m.id = r.message_id JOIN users s ON s.id = m.sender_id \
     JOIN users t ON t.id = m.recipient_id";

fn report_row(r: &Row<'_>) -> rusqlite::Result<MessageReport> {
    let status: String = r.get(3)?;
    Ok(MessageReport {
        id: r.get(0)?,
        reporter: r.get(1)?,
        reason: r.get(2)?,
        status: ReportStatus::parse(&status).unwrap_or(ReportStatus::Open),
        created_at: Timestamp(r.get(4)?),
        resolved_by: r.get(5)?,
        resolved_at: r.get::<_, Option<i64>>(6)?.map(Timestamp),
        message: message_row(r, 7)?,
    })
}

fn report(conn: &Connection, id: i64) -> StoreResult<MessageReport> {
    conn.prepare_cached(&format!("{REPORT_SQL} WHERE r.id = ?1"))
        .and_then(|mut s| s.query_row([id], report_row).optional())
        .map_err(map_err)?
        .ok_or(StoreError::NotFound("report"))
}

pub fn report_message(
    conn: &Connection,
    reporter: &User,
    message_id: i64,
    reason: &Reason,
    now: Timestamp,
) -> StoreResult<MessageReport> {
    let recipient: Option<i64> = conn
        .prepare_cached("SELECT recipient_id FROM messages WHERE id = ?1")
        .and_then(|mut s| s.query_row([message_id], |r| r.get(0)).optional())
        .map_err(map_err)?;
    // Only its recipient may report a message; to anyone else it is not there.
    if recipient != Some(reporter.id) {
        return Err(StoreError::NotFound("message"));
    }
    let inserted = conn
        .prepare_cached(
            "INSERT INTO message_reports (message_id, reporter_id, reason, created_at) VALUES (?1, ?2, ?3, ?4)",
        )
        .and_then(|mut s| s.execute(params![message_id, reporter.id, reason.as_str(), now.0]));
    match inserted {
        Ok(_) => report(conn, conn.last_insert_rowid()),
        Err(e) if is_unique_violation(&e) => Err(StoreError::Conflict("you reported this message already".into())),
        Err(e) => Err(map_err(e)),
    }
}

pub fn message_reports(
    conn: &Connection,
    status: Option<ReportStatus>,
    page: IdPage,
) -> StoreResult<MessageReportPage> {
    let mut reports: Vec<MessageReport> = conn
        .prepare_cached(&format!(
            "{REPORT_SQL} WHERE r.id < ?1 AND (?2 IS NULL OR r.status = ?2) ORDER BY r.id DESC LIMIT ?3"
        ))
        .and_then(|mut s| {
            let after = page.after.unwrap_or(i64::MAX);
            s.query_map(params![after, status.map(|s| s.as_str()), page.limit as i64 + 1], report_row)?.collect()
        })
        .map_err(map_err)?;
    let next = cut(&mut reports, page.limit, |r| r.id);
    Ok(MessageReportPage { reports, next })
}

pub fn resolve_message_report(
    conn: &Connection,
    actor: &User,
    id: i64,
    status: ReportStatus,
    now: Timestamp,
) -> StoreResult<MessageReport> {
    if !actor.is_admin {
        return Err(StoreError::Forbidden("site administrators only"));
    }
    let changed = conn
        .prepare_cached("UPDATE message_reports SET status = ?1, resolved_by = ?2, resolved_at = ?3 WHERE id = ?4")
        .and_then(|mut s| s.execute(params![status.as_str(), actor.id, now.0, id]))
        .map_err(map_err)?;
    if changed == 0 {
        return Err(StoreError::NotFound("report"));
    }
    report(conn, id)
}

pub fn set_user_blocked(
    conn: &Connection,
    user: &User,
    name: &str,
    blocked: bool,
    now: Timestamp,
) -> StoreResult<bool> {
    let (target, _) = user_named(conn, name)?;
    policy::may_block(user.id, target)?;
    let changed = if blocked {
        conn.prepare_cached(
            "INSERT INTO user_blocks (user_id, blocked_id, created_at) VALUES (?1, ?2, ?3) ON CONFLICT DO NOTHING",
        )
        .and_then(|mut s| s.execute(params![user.id, target, now.0]))
    } else {
        conn.prepare_cached("DELETE FROM user_blocks WHERE user_id = ?1 AND blocked_id = ?2")
            .and_then(|mut s| s.execute(params![user.id, target]))
    }
    .map_err(map_err)?;
    Ok(changed > 0)
}

pub fn blocks(conn: &Connection, user_id: i64) -> StoreResult<Blocks> {
    let users = conn
        .prepare_cached(
            "SELECT u.name FROM user_blocks b JOIN users u ON u.id = b.blocked_id WHERE b.user_id = ?1 ORDER BY u.name",
        )
        .and_then(|mut s| s.query_map([user_id], |r| r.get(0))?.collect())
        .map_err(map_err)?;
    Ok(Blocks { users, communities: super::saves::blocked(conn, user_id)? })
}
