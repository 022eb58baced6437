//! What both storage backends do the same way, apart from their SQL: the
//! `StoreError` a rule's refusal is answered with (the rules themselves are
//! `model::policy`), the `Post` a new reply becomes, and how a listing
//! fetched one row past its limit is cut into a page; the columns of a
//! remote actor's row.

use crate::model::inbox::{MAX_MENTIONS, moderation_excerpt};
use crate::model::policy::{self, Refusal};
use crate::model::{ModAction, NewNotice, NoticeKind, Notified, Post, Reason, Text, Timestamp, Topic, User};
use crate::store::{Cursor, NewPost, StoreError, TopicPage, TopicSort};

/// A refusal is the `StoreError` of the same name, with the same message:
/// the API's answer (code and message) is the rule's.
impl From<Refusal> for StoreError {
    fn from(refusal: Refusal) -> StoreError {
        match refusal {
            Refusal::NotFound(what) => StoreError::NotFound(what),
            Refusal::Conflict(message) => StoreError::Conflict(message.into()),
            Refusal::Forbidden(message) => StoreError::Forbidden(message),
            Refusal::Denied(code, message) => StoreError::Denied(code, message),
            Refusal::Invalid(message) => StoreError::Invalid(message),
            Refusal::Taken(code, message) => StoreError::Taken(code, message),
        }
    }
}

/// The reply just stored as `id`; `replied_to` (the parent's or the
/// topic's author) is notified live when its notification was stored
/// (`inbox`): not the author themself, nor one who blocked the author.
pub fn new_reply(
    id: i64,
    author: &User,
    new: &NewPost,
    html: &str,
    now: Timestamp,
    replied_to: Option<i64>,
    inbox: Vec<Notified>,
) -> Post {
    Post {
        id,
        topic_id: new.topic_id,
        parent_id: new.parent_id,
        author: Some(author.name.clone()),
        body: new.body.as_str().to_owned(),
        body_html: html.to_owned(),
        created_at: now,
        edited_at: None,
        deleted: false,
        removed: false,
        score: 0,
        author_id: author.id,
        notify: replied_to.filter(|&u| u != author.id && inbox.iter().any(|n| n.user_id == u)),
        inbox,
    }
}

/// The names a new body mentions that are worth looking up: the first
/// `MAX_MENTIONS` (`policy::reply_notices` notifies no more).
pub fn mentioned_names(body: &Text) -> &[String] {
    let names = body.mentions();
    &names[..names.len().min(MAX_MENTIONS)]
}

/// The notifications a new post (`post_id`) or topic (`None`) writes
/// (`policy::reply_notices`): `replied_to` is whom a post replies to,
/// `mentioned` the ids of the existing users its body mentions.
pub fn new_notices(
    author: &User,
    (topic_id, post_id): (i64, Option<i64>),
    body: &Text,
    replied_to: Option<i64>,
    mentioned: &[i64],
) -> Vec<NewNotice> {
    let notices = policy::reply_notices(author.id, replied_to, mentioned);
    if notices.is_empty() {
        return Vec::new();
    }
    let excerpt = body.excerpt();
    notices
        .into_iter()
        .map(|(user_id, kind)| NewNotice {
            user_id,
            kind,
            from_id: Some(author.id),
            topic_id: Some(topic_id),
            post_id,
            excerpt: excerpt.to_owned(),
        })
        .collect()
}

/// The notification a moderator's action writes for the author of what it
/// acted on (`policy::moderation_notice`), if any. The moderator is not
/// named.
pub fn moderation_notice(
    actor: &User,
    action: ModAction,
    reason: &Reason,
    (topic_id, post_id): (i64, Option<i64>),
    author_id: i64,
    changed: bool,
) -> Option<NewNotice> {
    let user_id = policy::moderation_notice(actor.id, author_id, changed)?;
    Some(NewNotice {
        user_id,
        kind: NoticeKind::Moderation,
        from_id: None,
        topic_id: Some(topic_id),
        post_id,
        excerpt: moderation_excerpt(action, reason.as_str()),
    })
}

/// A listing read with `limit + 1` rows (each with its hot rank): the first
/// `limit`, and the cursor after the last of them when more follow.
pub fn topic_page(mut rows: Vec<(Topic, f64)>, limit: usize, sort: TopicSort) -> TopicPage {
    let next = if rows.len() > limit {
        rows.truncate(limit);
        rows.last().map(|(t, hot)| match sort {
            TopicSort::Hot => Cursor::Hot(*hot, t.id),
            TopicSort::New => Cursor::New(t.created_at.0, t.id),
            TopicSort::Top(_) => Cursor::Top(t.score, t.id),
        })
    } else {
        None
    };
    TopicPage { topics: rows.into_iter().map(|(t, _)| t).collect(), next }
}

/// The tables whose rows of a deleted account go (`user_id`), whatever
/// becomes of its content: its sessions and tokens, inbox, saves, blocks,
/// the record of its votes (the scores keep them; only who cast them is
/// forgotten), moderator seats and recovery codes.
pub const PURGED: [&str; 7] =
    ["tokens", "notifications", "saves", "community_blocks", "votes", "moderators", "recovery_codes"];

/// A deleted account's private messages, both ways, with what hangs on
/// them (conversations, reports, the other side's `message`
/// notifications), and its user blocks, both ways: (SQLite, PostgreSQL),
/// in an order the foreign keys allow.
pub const PURGED_MESSAGES: [(&str, &str); 5] = [
    (
        "DELETE FROM notifications WHERE from_id = ?1 AND kind = 'message'",
        "DELETE FROM notifications WHERE from_id = $1 AND kind = 'message'",
    ),
    (
        "DELETE FROM message_reports WHERE reporter_id = ?1 OR message_id IN \
         (SELECT id FROM messages WHERE sender_id = ?1 OR recipient_id = ?1)",
        "DELETE FROM message_reports WHERE reporter_id = $1 OR message_id IN \
         (SELECT id FROM messages WHERE sender_id = $1 OR recipient_id = $1)",
    ),
    (
        "DELETE FROM conversations WHERE user_id = ?1 OR other_id = ?1",
        "DELETE FROM conversations WHERE user_id = $1 OR other_id = $1",
    ),
    (
        "DELETE FROM messages WHERE sender_id = ?1 OR recipient_id = ?1",
        "DELETE FROM messages WHERE sender_id = $1 OR recipient_id = $1",
    ),
    (
        "DELETE FROM user_blocks WHERE user_id = ?1 OR blocked_id = ?1",
        "DELETE FROM user_blocks WHERE user_id = $1 OR blocked_id = $1",
    ),
];

/// The refusal to delete the only administrator left: the site would have
/// no one to run it.
pub fn last_admin() -> StoreError {
    StoreError::Denied("last_admin", "the only site administrator cannot be deleted; appoint another first".into())
}

/// A remote actor's columns (`ap_actors`), in the order both backends'
/// `actor_row` read them.
pub const ACTOR_COLS: &str = "actor_id, inbox, shared_inbox, key_id, public_key_pem, name, fetched_at, url";

/// `ACTOR_COLS` of the table aliased `a`, for joins.
pub fn actor_cols_of_a() -> String {
    ACTOR_COLS.split(", ").map(|c| format!("a.{c}")).collect::<Vec<_>>().join(", ")
}

/// The remote actor (`a`) matching `condition` and its live user in one
/// query: `ACTOR_COLS`, then the user's id, name, is_admin and created_at
/// (null without a user, or with one an administrator deleted).
pub fn known_actor_sql(condition: &str) -> String {
    format!(
        "SELECT {}, u.id, u.name, u.is_admin, u.created_at FROM ap_actors a \
         LEFT JOIN users u ON u.actor = a.id AND u.deleted_at IS NULL WHERE {condition}",
        actor_cols_of_a()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refusal_becomes_the_store_error_of_the_same_name_and_message() {
        for refusal in [
            Refusal::NotFound("topic"),
            Refusal::Conflict("taken"),
            Refusal::Forbidden("not yours"),
            Refusal::Denied("banned", "you are banned".into()),
            Refusal::Invalid("bad parent".into()),
            Refusal::Taken("username_too_similar", "too similar".into()),
        ] {
            let message = refusal.to_string();
            let error = StoreError::from(refusal.clone());
            assert_eq!(error.to_string(), message);
            let same = match (&refusal, &error) {
                (Refusal::NotFound(a), StoreError::NotFound(b)) => a == b,
                (Refusal::Conflict(a), StoreError::Conflict(b)) => a == b,
                (Refusal::Forbidden(a), StoreError::Forbidden(b)) => a == b,
                (Refusal::Denied(a, _), StoreError::Denied(b, _)) => a == b,
                (Refusal::Invalid(a), StoreError::Invalid(b)) => a == b,
                (Refusal::Taken(a, _), StoreError::Taken(b, _)) => a == b,
                _ => false,
            };
            assert!(same, "{refusal:?} became {error:?}");
        }
    }
}
