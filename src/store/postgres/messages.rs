//! Private messages, their reports and user blocks (see
//! `sqlite::messages`), each call one transaction.

use deadpool_postgres::GenericClient;
use tokio_postgres::Row;

use super::conn::{all, col, exec, opt};
use super::moderation::page as cut;
use crate::model::messages::{EXCERPT_CHARS, pair};
use crate::model::policy;
use crate::model::{
    Blocks, Conversation, ConversationPage, Message, MessagePage, MessageReport, MessageReportPage, NewNotice,
    NoticeKind, Notified, Reason, ReportStatus, Text, Timestamp, User,
};
use crate::store::{IdPage, StoreError, StoreResult};

/// The id and name (as spelt) of the user named `name`, any case.
async fn user_named(c: &impl GenericClient, name: &str) -> StoreResult<(i64, String)> {
    match opt(c, "SELECT id, name FROM users WHERE lower(name) = lower($1)", &[&name]).await? {
        Some(r) => Ok((col(&r, 0)?, col(&r, 1)?)),
        None => Err(StoreError::NotFound("user")),
    }
}

async fn blocks_user(c: &impl GenericClient, user_id: i64, blocked_id: i64) -> StoreResult<bool> {
    let sql = "SELECT 1 FROM user_blocks WHERE user_id = $1 AND blocked_id = $2";
    Ok(opt(c, sql, &[&user_id, &blocked_id]).await?.is_some())
}

/// Records `message` as the last of the conversation on `user_id`'s side,
/// adding `unread` to their count.
async fn touch_conversation(
    c: &impl GenericClient,
    user_id: i64,
    other_id: i64,
    message: i64,
    unread: i64,
) -> StoreResult<()> {
    exec(
        c,
        "INSERT INTO conversations (user_id, other_id, last_message_id, unread) VALUES ($1, $2, $3, $4) \
         ON CONFLICT (user_id, other_id) DO UPDATE SET last_message_id = excluded.last_message_id, \
         unread = conversations.unread + excluded.unread",
        &[&user_id, &other_id, &message, &unread],
    )
    .await?;
    Ok(())
}

pub async fn send_message(
    c: &impl GenericClient,
    sender: &User,
    to: &str,
    body: &Text,
    now: Timestamp,
) -> StoreResult<(Message, Vec<Notified>)> {
    let (recipient, to) = user_named(c, to).await?;
    // Community 0 is none: only the site-wide ban is read.
    let bans = super::moderation::ban_facts(c, sender, 0).await?;
    policy::may_message(sender, recipient, blocks_user(c, recipient, sender.id).await?, &bans, now)?;
    let (low, high) = pair(sender.id, recipient);
    let row = opt(
        c,
        "INSERT INTO messages (sender_id, recipient_id, low_id, high_id, body, body_html, created_at) \
         VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING id",
        &[&sender.id, &recipient, &low, &high, &body.as_str(), &body.html(), &now.0],
    )
    .await?
    .ok_or_else(|| StoreError::Internal("INSERT returned no id".into()))?;
    let id: i64 = col(&row, 0)?;
    touch_conversation(c, sender.id, recipient, id, 0).await?;
    touch_conversation(c, recipient, sender.id, id, 1).await?;
    let notice = NewNotice {
        user_id: recipient,
        kind: NoticeKind::Message,
        from_id: Some(sender.id),
        topic_id: None,
        post_id: None,
        excerpt: body.excerpt().to_owned(),
    };
    let notified = super::inbox::notify(c, &[notice], now).await?;
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

pub async fn conversations(c: &impl GenericClient, user_id: i64, page: IdPage) -> StoreResult<ConversationPage> {
    let after = page.after.unwrap_or(i64::MAX);
    let take = page.limit as i64 + 1;
    let rows = all(
        c,
        "SELECT u.name, c.last_message_id, s.name, substr(m.body, 1, 600), m.created_at, c.unread \
         FROM conversations c JOIN users u ON u.id = c.other_id \
         JOIN messages m ON m.id = c.last_message_id JOIN users s ON s.id = m.sender_id \
         WHERE c.user_id = $1 AND c.last_message_id < $2 ORDER BY c.last_message_id DESC LIMIT $3",
        &[&user_id, &after, &take],
    )
    .await?;
    let mut conversations = rows
        .iter()
        .map(|r| {
            let body: String = col(r, 3)?;
            Ok(Conversation {
                with: col(r, 0)?,
                last_id: col(r, 1)?,
                last_from: col(r, 2)?,
                excerpt: crate::markdown::excerpt(&body, EXCERPT_CHARS),
                last_at: Timestamp(col(r, 4)?),
                unread: col(r, 5)?,
            })
        })
        .collect::<StoreResult<Vec<_>>>()?;
    let next = cut(&mut conversations, page.limit, |c| c.last_id);
    Ok(ConversationPage { conversations, next })
}

/// A message's columns, from `messages m` and its two users `s` and `t`.
const MESSAGE_COLS: &str = "m.id, s.name, t.name, m.body, m.body_html, m.created_at, m.read";
const MESSAGE_FROM: &str = "FROM messages m JOIN users s ON s.id = m.sender_id JOIN users t ON t.id = m.recipient_id";

fn message_row(r: &Row, at: usize) -> StoreResult<Message> {
    Ok(Message {
        id: col(r, at)?,
        from: col(r, at + 1)?,
        to: col(r, at + 2)?,
        body: col(r, at + 3)?,
        body_html: col(r, at + 4)?,
        created_at: Timestamp(col(r, at + 5)?),
        read: col(r, at + 6)?,
    })
}

pub async fn conversation(c: &impl GenericClient, user_id: i64, with: &str, page: IdPage) -> StoreResult<MessagePage> {
    let (with_id, with) = user_named(c, with).await?;
    let (low, high) = pair(user_id, with_id);
    let after = page.after.unwrap_or(i64::MAX);
    let take = page.limit as i64 + 1;
    let sql = format!(
        "SELECT {MESSAGE_COLS} {MESSAGE_FROM} WHERE m.low_id = $1 AND m.high_id = $2 AND m.id < $3 \
         ORDER BY m.id DESC LIMIT $4"
    );
    let rows = all(c, &sql, &[&low, &high, &after, &take]).await?;
    let mut messages = rows.iter().map(|r| message_row(r, 0)).collect::<StoreResult<Vec<_>>>()?;
    let next = cut(&mut messages, page.limit, |m| m.id);
    Ok(MessagePage { with, with_id, messages, next })
}

pub async fn mark_conversation_read(c: &impl GenericClient, user_id: i64, other_id: i64) -> StoreResult<Option<i64>> {
    let (low, high) = pair(user_id, other_id);
    exec(
        c,
        "UPDATE messages SET read = true WHERE low_id = $1 AND high_id = $2 AND recipient_id = $3 AND NOT read",
        &[&low, &high, &user_id],
    )
    .await?;
    exec(
        c,
        "UPDATE conversations SET unread = 0 WHERE user_id = $1 AND other_id = $2 AND unread > 0",
        &[&user_id, &other_id],
    )
    .await?;
    let notices = exec(
        c,
        "UPDATE notifications SET read = true WHERE user_id = $1 AND kind = 'message' AND from_id = $2 AND NOT read",
        &[&user_id, &other_id],
    )
    .await?;
    if notices == 0 {
        return Ok(None);
    }
    super::inbox::unread(c, user_id).await.map(Some)
}

/// A report's columns, then its message's (`MESSAGE_COLS` at 7).
const REPORT_SQL: &str = "SELECT r.id, p.name, r.reason, r.status, r.created_at, b.name, r.resolved_at, \
     m.id, s.name, t.name, m.body, m.body_html, m.created_at, m.read \
     FROM message_reports r JOIN users p ON p.id = r.reporter_id LEFT JOIN users b ON b.id = r.resolved_by \
     JOIN messages m ON m.id = r.message_id JOIN users s ON s.id = m.sender_id \
     JOIN users t ON t.id = m.recipient_id";

fn report_row(r: &Row) -> StoreResult<MessageReport> {
    let status: String = col(r, 3)?;
    Ok(MessageReport {
        id: col(r, 0)?,
        reporter: col(r, 1)?,
        reason: col(r, 2)?,
        status: ReportStatus::parse(&status).unwrap_or(ReportStatus::Open),
        created_at: Timestamp(col(r, 4)?),
        resolved_by: col(r, 5)?,
        resolved_at: col::<Option<i64>>(r, 6)?.map(Timestamp),
        message: message_row(r, 7)?,
    })
}

async fn report(c: &impl GenericClient, id: i64) -> StoreResult<MessageReport> {
    match opt(c, &format!("{REPORT_SQL} WHERE r.id = $1"), &[&id]).await? {
        Some(r) => report_row(&r),
        None => Err(StoreError::NotFound("report")),
    }
}

pub async fn report_message(
    c: &impl GenericClient,
    reporter: &User,
    message_id: i64,
    reason: &Reason,
    now: Timestamp,
) -> StoreResult<MessageReport> {
    let recipient = opt(c, "SELECT recipient_id FROM messages WHERE id = $1", &[&message_id]).await?;
    // Only its recipient may report a message; to anyone else it is not there.
    if recipient.map(|r| col::<i64>(&r, 0)).transpose()? != Some(reporter.id) {
        return Err(StoreError::NotFound("message"));
    }
    let row = opt(
        c,
        "INSERT INTO message_reports (message_id, reporter_id, reason, created_at) VALUES ($1, $2, $3, $4) \
         ON CONFLICT (message_id) DO NOTHING RETURNING id",
        &[&message_id, &reporter.id, &reason.as_str(), &now.0],
    )
    .await?;
    match row {
        Some(r) => report(c, col(&r, 0)?).await,
        None => Err(StoreError::Conflict("you reported this message already".into())),
    }
}

pub async fn message_reports(
    c: &impl GenericClient,
    status: Option<ReportStatus>,
    page: IdPage,
) -> StoreResult<MessageReportPage> {
    let after = page.after.unwrap_or(i64::MAX);
    let take = page.limit as i64 + 1;
    let status = status.map(|s| s.as_str());
    let sql =
        format!("{REPORT_SQL} WHERE r.id < $1 AND ($2::text IS NULL OR r.status = $2) ORDER BY r.id DESC LIMIT $3");
    let rows = all(c, &sql, &[&after, &status, &take]).await?;
    let mut reports = rows.iter().map(report_row).collect::<StoreResult<Vec<_>>>()?;
    let next = cut(&mut reports, page.limit, |r| r.id);
    Ok(MessageReportPage { reports, next })
}

pub async fn resolve_message_report(
    c: &impl GenericClient,
    actor: &User,
    id: i64,
    status: ReportStatus,
    now: Timestamp,
) -> StoreResult<MessageReport> {
    if !actor.is_admin {
        return Err(StoreError::Forbidden("site administrators only"));
    }
    let changed = exec(
        c,
        "UPDATE message_reports SET status = $1, resolved_by = $2, resolved_at = $3 WHERE id = $4",
        &[&status.as_str(), &actor.id, &now.0, &id],
    )
    .await?;
    if changed == 0 {
        return Err(StoreError::NotFound("report"));
    }
    report(c, id).await
}

pub async fn set_user_blocked(
    c: &impl GenericClient,
    user: &User,
    name: &str,
    blocked: bool,
    now: Timestamp,
) -> StoreResult<bool> {
    let (target, _) = user_named(c, name).await?;
    policy::may_block(user.id, target)?;
    let changed = if blocked {
        exec(
            c,
            "INSERT INTO user_blocks (user_id, blocked_id, created_at) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING",
            &[&user.id, &target, &now.0],
        )
        .await?
    } else {
        exec(c, "DELETE FROM user_blocks WHERE user_id = $1 AND blocked_id = $2", &[&user.id, &target]).await?
    };
    Ok(changed > 0)
}

pub async fn blocks(c: &impl GenericClient, user_id: i64) -> StoreResult<Blocks> {
    let rows = all(
        c,
        "SELECT u.name FROM user_blocks b JOIN users u ON u.id = b.blocked_id WHERE b.user_id = $1 ORDER BY u.name",
        &[&user_id],
    )
    .await?;
    let users = rows.iter().map(|r| col(r, 0)).collect::<StoreResult<Vec<String>>>()?;
    Ok(Blocks { users, communities: super::saves::blocked(c, user_id).await? })
}
