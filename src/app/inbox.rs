//! The inbox: a user's stored notifications (written by the writes that
//! cause them, see `store::common::post_notices`), their unread count, and
//! marking them read, which tells the user's other live connections the
//! new count.

use serde::Deserialize;

use super::{AppError, AppResult, AppState, apply::apply, commit};
use crate::model::inbox::MAX_MARK_IDS;
use crate::model::{Change, InboxPage, MarkRead, Notified, User};
use crate::store::{IdPage, ListInbox, Store};

/// Notifications per page unless asked otherwise, and at most.
pub const DEFAULT_LIMIT: usize = 25;
pub const MAX_LIMIT: usize = 100;

/// A page request as a door received it.
#[derive(Debug, Default, Deserialize)]
pub struct InboxQuery {
    /// Only unread notifications.
    #[serde(default)]
    pub unread: Option<bool>,
    /// The previous page's `next`.
    #[serde(default)]
    pub after: Option<i64>,
    #[serde(default)]
    pub limit: Option<usize>,
}

/// A page of a list read newest first by id (the inbox, messages): `after`
/// a previous page's `next`, `limit` 1 to `MAX_LIMIT`.
pub fn id_page(after: Option<i64>, limit: Option<usize>) -> AppResult<IdPage> {
    let limit = match limit.unwrap_or(DEFAULT_LIMIT) {
        n @ 1..=MAX_LIMIT => n,
        _ => return Err(AppError::BadRequest("invalid_query", format!("limit must be between 1 and {MAX_LIMIT}"))),
    };
    if after.is_some_and(|a| a < 1) {
        return Err(AppError::BadRequest("invalid_cursor", "after must be a `next` from a previous page".into()));
    }
    Ok(IdPage { after, limit })
}

/// One page of the user's inbox, newest first.
pub async fn list<S: Store>(state: &AppState<S>, user: &User, q: InboxQuery) -> AppResult<InboxPage> {
    let page = id_page(q.after, q.limit)?;
    let list = ListInbox { unread_only: q.unread.unwrap_or(false), after: page.after, limit: page.limit };
    Ok(state.store.inbox(user.id, list).await?)
}

/// How many of the user's notifications are unread.
pub async fn unread<S: Store>(state: &AppState<S>, user: &User) -> AppResult<i64> {
    Ok(state.store.unread_count(user.id).await?)
}

/// What to mark read: `{"ids": [...]}` or `{"all": true}`.
#[derive(Debug, Default, Deserialize)]
pub struct MarkRequest {
    #[serde(default)]
    pub ids: Option<Vec<i64>>,
    #[serde(default)]
    pub all: Option<bool>,
}

impl MarkRequest {
    /// Exactly one of `ids` (1 to `MAX_MARK_IDS` positive ids) and
    /// `all: true`.
    pub fn parse(self) -> AppResult<MarkRead> {
        let bad = |m: &str| Err(AppError::BadRequest("invalid_ids", m.into()));
        match (self.ids, self.all) {
            (None, Some(true)) => Ok(MarkRead::All),
            (Some(ids), None) => {
                if ids.is_empty() || ids.len() > MAX_MARK_IDS {
                    return bad(&format!("ids must hold 1 to {MAX_MARK_IDS} notification ids"));
                }
                if ids.iter().any(|&id| id < 1) {
                    return bad("ids must be notification ids (positive integers)");
                }
                Ok(MarkRead::Ids(ids))
            }
            _ => bad("send {\"ids\": [...]} or {\"all\": true}"),
        }
    }
}

/// Marks notifications read; ids that are not the user's are ignored
/// (answered as if they were read, so nothing tells whose they are).
/// Returns the unread count after, which the user's live channel hears.
pub async fn mark_read<S: Store>(state: &AppState<S>, user: &User, mark: MarkRead) -> AppResult<i64> {
    let user_id = user.id;
    commit(state, move |st| async move {
        let unread = st.store.mark_read(user_id, mark).await?;
        let notified = Notified { user_id, kind: None, topic_id: None, post_id: None, unread };
        apply(&st, Change::Inbox { notified: vec![notified] });
        Ok(unread)
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(json: &str) -> AppResult<MarkRead> {
        serde_json::from_str::<MarkRequest>(json).map_err(|e| AppError::BadRequest("x", e.to_string()))?.parse()
    }

    #[test]
    fn a_mark_request_names_ids_or_all_but_not_both_nor_neither() {
        assert_eq!(parse(r#"{"ids":[1,2]}"#).ok(), Some(MarkRead::Ids(vec![1, 2])));
        assert_eq!(parse(r#"{"all":true}"#).ok(), Some(MarkRead::All));
        for bad in [r#"{}"#, r#"{"all":false}"#, r#"{"ids":[]}"#, r#"{"ids":[0]}"#, r#"{"ids":[1],"all":true}"#] {
            assert_eq!(parse(bad).err().map(|e| e.code()), Some("invalid_ids"), "{bad}");
        }
        let many: Vec<String> = (1..=101).map(|n| n.to_string()).collect();
        assert!(parse(&format!("{{\"ids\":[{}]}}", many.join(","))).is_err());
    }
}
