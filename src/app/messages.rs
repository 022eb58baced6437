//! Private messages: sending one (its Markdown rendered once, here; its
//! notification stored with it and heard on the recipient's live
//! channel), a user's conversations, one conversation (reading it marks
//! it read), a recipient's report of a message, and the administrators'
//! list of reported messages: the only messages anyone but their two
//! users can read.

use serde::Deserialize;

use super::limits::{Action, ClientIp, Who};
use super::{AppError, AppResult, AppState, apply::apply, commit, text};
use crate::model::{
    Body, Change, ConversationPage, Message, MessagePage, MessageReport, MessageReportPage, Notified, Reason,
    ReportStatus, User,
};
use crate::store::{IdPage, Store};

/// A page request as a door received it: `after` is the previous page's
/// `next`.
#[derive(Debug, Default, Deserialize)]
pub struct PageQuery {
    #[serde(default)]
    pub after: Option<i64>,
    #[serde(default)]
    pub limit: Option<usize>,
}

impl PageQuery {
    /// As the inbox's pages (`inbox::id_page`): 25 by default, 1 to 100.
    pub fn parse(&self) -> AppResult<IdPage> {
        super::inbox::id_page(self.after, self.limit)
    }
}

/// Sends `body` to the user named `to`. Refused: to oneself (422
/// `message_to_self`), over the limit (429), to no one (404), to someone
/// who blocked the sender (403 `blocked`).
pub async fn send<S: Store>(
    state: &AppState<S>,
    sender: User,
    ip: ClientIp,
    to: String,
    body: Body,
) -> AppResult<Message> {
    if to.eq_ignore_ascii_case(&sender.name) {
        return Err(AppError::Rejected(
            axum::http::StatusCode::UNPROCESSABLE_ENTITY,
            "message_to_self",
            "you cannot send a message to yourself".into(),
        ));
    }
    if to.len() > 64 {
        return Err(AppError::not_found("user"));
    }
    // A remote user would never read it: messages do not federate.
    if crate::model::federation::is_remote_name(&to) {
        return Err(AppError::Rejected(
            axum::http::StatusCode::UNPROCESSABLE_ENTITY,
            "remote_user",
            "messages cannot reach users of other instances".into(),
        ));
    }
    state.limits.check(Action::Message, ip, Who::User(sender.id))?;
    let body = text::render(body).await?;
    commit(state, move |st| async move {
        let (message, notified) = st.store.send_message(&sender, to, body).await?;
        if !notified.is_empty() {
            apply(&st, Change::Inbox { notified });
        }
        Ok(message)
    })
    .await
}

/// One page of the user's conversations, the most recent first.
pub async fn conversations<S: Store>(state: &AppState<S>, user: &User, page: IdPage) -> AppResult<ConversationPage> {
    Ok(state.store.conversations(user.id, page).await?)
}

/// One page of the user's conversation with `with`, newest first. A page
/// that shows a message to the user not yet read marks the whole
/// conversation read (and its notifications, which the user's live
/// channel hears).
pub async fn conversation<S: Store>(
    state: &AppState<S>,
    user: &User,
    with: String,
    page: IdPage,
) -> AppResult<MessagePage> {
    if with.len() > 64 {
        return Err(AppError::not_found("user"));
    }
    let found = state.store.conversation(user.id, with, page).await?;
    if found.messages.iter().any(|m| !m.read && m.from == found.with) {
        let (user_id, other_id) = (user.id, found.with_id);
        commit(state, move |st| async move {
            if let Some(unread) = st.store.mark_conversation_read(user_id, other_id).await? {
                let notified = Notified { user_id, kind: None, topic_id: None, post_id: None, unread };
                apply(&st, Change::Inbox { notified: vec![notified] });
            }
            Ok(())
        })
        .await?;
    }
    Ok(found)
}

/// Reports a message to the administrators; its recipient only (anyone
/// else: 404). Counts against the report limit.
pub async fn report<S: Store>(
    state: &AppState<S>,
    reporter: &User,
    ip: ClientIp,
    message_id: i64,
    reason: &str,
) -> AppResult<MessageReport> {
    let reason = Reason::parse(reason, true)?;
    state.limits.check(Action::Report, ip, Who::User(reporter.id))?;
    Ok(state.store.report_message(reporter, message_id, reason).await?)
}

fn admin_only(user: &User) -> AppResult<()> {
    if user.is_admin { Ok(()) } else { Err(AppError::Forbidden("site administrators only".into())) }
}

/// Reported messages with their reports, newest first; site
/// administrators only. `status`: `open`, `resolved`, `dismissed`, or
/// absent for all.
pub async fn reports<S: Store>(
    state: &AppState<S>,
    actor: &User,
    status: Option<&str>,
    page: IdPage,
) -> AppResult<MessageReportPage> {
    admin_only(actor)?;
    let status = match status {
        None | Some("") => None,
        Some(s) => Some(ReportStatus::parse(s).ok_or_else(|| {
            AppError::BadRequest("invalid_query", "status must be open, resolved or dismissed".into())
        })?),
    };
    Ok(state.store.message_reports(status, page).await?)
}

/// Closes a message report as resolved or dismissed; site administrators
/// only.
pub async fn resolve<S: Store>(state: &AppState<S>, actor: &User, id: i64, status: &str) -> AppResult<MessageReport> {
    admin_only(actor)?;
    let status = match ReportStatus::parse(status) {
        Some(s @ (ReportStatus::Resolved | ReportStatus::Dismissed)) => s,
        _ => return Err(AppError::Validation("status must be resolved or dismissed".into())),
    };
    Ok(state.store.resolve_message_report(actor, id, status).await?)
}
