//! The inbox's SQL (see `sqlite::inbox`): notifications written in the
//! transaction of the write that causes them, a user's page of them and
//! their unread count, and marking them read.

use deadpool_postgres::GenericClient;
use tokio_postgres::Row;

use super::conn::{all, col, exec, one, opt};
use super::moderation::page;
use crate::model::inbox::MAX_UNREAD;
use crate::model::{InboxPage, MarkRead, NewNotice, Notice, NoticeKind, Notified, Timestamp};
use crate::store::{ListInbox, StoreResult};

/// The ids of the users named (case-insensitively); names of no one are
/// skipped.
pub async fn user_ids(c: &impl GenericClient, names: &[String]) -> StoreResult<Vec<i64>> {
    let mut ids = Vec::with_capacity(names.len());
    for name in names {
        if let Some(r) =
            opt(c, "SELECT id FROM users WHERE lower(name) = lower($1) AND deleted_at IS NULL", &[name]).await?
        {
            ids.push(col(&r, 0)?);
        }
    }
    Ok(ids)
}

/// Stores the notifications, but none from a user its recipient blocked;
/// returns what each notified user's live channel is told.
pub async fn notify(c: &impl GenericClient, notices: &[NewNotice], now: Timestamp) -> StoreResult<Vec<Notified>> {
    let mut out = Vec::with_capacity(notices.len());
    for n in notices {
        let stored = exec(
            c,
            "INSERT INTO notifications (user_id, kind, from_id, topic_id, post_id, excerpt, created_at) \
             SELECT $1::bigint, $2::text, $3::bigint, $4::bigint, $5::bigint, $6::text, $7::bigint WHERE NOT EXISTS \
             (SELECT 1 FROM user_blocks WHERE user_id = $1 AND blocked_id = $3)",
            &[&n.user_id, &n.kind.as_str(), &n.from_id, &n.topic_id, &n.post_id, &n.excerpt, &now.0],
        )
        .await?;
        if stored == 0 {
            continue;
        }
        out.push(Notified {
            user_id: n.user_id,
            kind: Some(n.kind),
            topic_id: n.topic_id,
            post_id: n.post_id,
            unread: unread(c, n.user_id).await?,
        });
    }
    Ok(out)
}

/// The user's unread count, up to `MAX_UNREAD`.
pub async fn unread(c: &impl GenericClient, user_id: i64) -> StoreResult<i64> {
    let sql = "SELECT count(*) FROM (SELECT 1 FROM notifications WHERE user_id = $1 AND NOT read LIMIT $2) AS u";
    col(&one(c, sql, &[&user_id, &MAX_UNREAD]).await?, 0)
}

pub(super) fn notice_row(r: &Row) -> StoreResult<Notice> {
    let kind: String = col(r, 1)?;
    Ok(Notice {
        id: col(r, 0)?,
        kind: NoticeKind::parse(&kind).unwrap_or(NoticeKind::Message),
        topic_id: col(r, 2)?,
        post_id: col(r, 3)?,
        from: col(r, 4)?,
        excerpt: col(r, 5)?,
        created_at: Timestamp(col(r, 6)?),
        read: col(r, 7)?,
    })
}

/// One page of the user's notifications, newest first.
pub async fn inbox(c: &impl GenericClient, user_id: i64, q: &ListInbox) -> StoreResult<InboxPage> {
    let after = q.after.unwrap_or(i64::MAX);
    let limit = q.limit as i64 + 1;
    let rows = all(
        c,
        "SELECT n.id, n.kind, n.topic_id, n.post_id, u.name, n.excerpt, n.created_at, n.read \
         FROM notifications n LEFT JOIN users u ON u.id = n.from_id AND u.deleted_at IS NULL \
         WHERE n.user_id = $1 AND n.id < $2 AND (NOT $3 OR NOT n.read) ORDER BY n.id DESC LIMIT $4",
        &[&user_id, &after, &q.unread_only, &limit],
    )
    .await?;
    let mut items = rows.iter().map(notice_row).collect::<StoreResult<Vec<_>>>()?;
    let next = page(&mut items, q.limit, |n: &Notice| n.id);
    Ok(InboxPage { items, unread: unread(c, user_id).await?, next })
}

/// Marks the user's notifications read (ids of others' are ignored);
/// returns their unread count after.
pub async fn mark_read(c: &impl GenericClient, user_id: i64, mark: &MarkRead) -> StoreResult<i64> {
    match mark {
        MarkRead::All => {
            exec(c, "UPDATE notifications SET read = true WHERE user_id = $1 AND NOT read", &[&user_id]).await?
        }
        MarkRead::Ids(ids) => {
            let sql = "UPDATE notifications SET read = true WHERE user_id = $1 AND id = ANY($2) AND NOT read";
            exec(c, sql, &[&user_id, ids]).await?
        }
    };
    unread(c, user_id).await
}
