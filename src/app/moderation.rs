//! Moderation: remove, restore, lock and unlock; appoint and dismiss
//! moderators; ban and unban, in a community or site-wide; report, and
//! resolve reports. Who may do what
//! is `model::policy`'s, over facts the store reads in the transaction
//! that acts.

use serde::Deserialize;

use super::limits::{Action, ClientIp, Who};
use super::{AppError, AppResult, AppState, apply::apply, commit};
use crate::model::change::{Acted, How};
use crate::model::{
    Ban, Change, ModAction, Moderated, Reason, Report, ReportStatus, Timestamp, User, Username, VoteTarget, policy,
};
use crate::store::{NewBan, Store};

/// Names in paths longer than this name nothing (community names are at
/// most 21 characters, usernames 20), so they are not worth a query.
const MAX_NAME: usize = 64;

pub fn check_name(name: &str, what: &str) -> AppResult<()> {
    if name.len() > MAX_NAME { Err(AppError::not_found(what)) } else { Ok(()) }
}

#[derive(Deserialize)]
pub struct ModRequest {
    /// Optional; shown in the public moderation log.
    #[serde(default)]
    pub reason: Option<String>,
}

/// Runs a moderator's action; a change goes to `apply` only when something
/// changed.
pub async fn act<S: Store>(state: &AppState<S>, actor: User, action: ModAction, req: ModRequest) -> AppResult<()> {
    let reason = Reason::parse(req.reason.as_deref().unwrap_or(""), false)?;
    commit(state, move |st| async move {
        let given = Some(reason.as_str().to_owned()).filter(|r| !r.is_empty());
        let mut done = st.store.moderate(&actor, action, reason).await?;
        let notified = done.notified.take();
        if let Some(change) = change_of(action, done, &actor, given) {
            apply(&st, change);
        }
        if let Some(n) = notified {
            apply(&st, Change::Inbox { notified: vec![n] });
        }
        // A removal's pictures that nothing else shows go.
        super::media::sweep(&st).await;
        Ok(())
    })
    .await
}

/// What a moderator's action changed, as the rest of the system hears it
/// (with who did it, for federation: `Acted`).
fn change_of(action: ModAction, done: Moderated, actor: &User, reason: Option<String>) -> Option<Change> {
    if !done.changed {
        return None;
    }
    let topic_id = done.topic_id;
    let by = |how| Some(Acted::by(actor, how, reason.clone()));
    Some(match (action, done.post) {
        (ModAction::RemovePost(post_id), _) => Change::PostRemoved { topic_id, post_id, by: by(How::Removed) },
        // The live protocol has no "restored": the post comes back as an
        // edit carrying its body, unless its topic is hidden.
        (ModAction::RestorePost(_), Some(post)) if !done.topic_removed && !post.deleted => {
            Change::PostEdited { post, by: by(How::Restored) }
        }
        (ModAction::RemoveTopic(_), _) => Change::TopicChanged { topic_id, by: by(How::Removed) },
        (ModAction::LockTopic(_), _) => Change::TopicChanged { topic_id, by: by(How::Locked) },
        (ModAction::UnlockTopic(_), _) => Change::TopicChanged { topic_id, by: by(How::Unlocked) },
        (ModAction::RestoreTopic(_), _) => Change::TopicChanged { topic_id, by: by(How::Restored) },
        _ => Change::TopicChanged { topic_id, by: None },
    })
}

/// Appoints (`appoint`) or dismisses a community's moderator.
pub async fn set_moderator<S: Store>(
    state: &AppState<S>,
    actor: User,
    community: String,
    username: String,
    appoint: bool,
) -> AppResult<()> {
    check_name(&community, "community")?;
    check_name(&username, "user")?;
    // Gives the administrator-only answer before any lookup.
    policy::may_appoint_moderators(&actor)?;
    // A remote user never signs in here, so a seat would be empty; and
    // the Group's moderators collection names local actors only.
    if appoint && crate::model::federation::is_remote_name(&username) {
        return Err(AppError::Rejected(
            axum::http::StatusCode::UNPROCESSABLE_ENTITY,
            "remote_user",
            "a user of another instance cannot moderate here".into(),
        ));
    }
    state.store.set_moderator(&actor, community, username, appoint).await?;
    Ok(())
}

#[derive(Deserialize)]
pub struct BanRequest {
    pub username: String,
    #[serde(default)]
    pub reason: Option<String>,
    /// Absent or null: permanent.
    #[serde(default)]
    pub duration_secs: Option<u64>,
}

/// Longest temporary ban: ten years (longer is what permanent is for).
pub const MAX_BAN_SECS: u64 = 10 * 366 * 86_400;

/// Bans a user from `community` (`None`: the site).
pub async fn ban<S: Store>(
    state: &AppState<S>,
    actor: &User,
    community: Option<String>,
    req: BanRequest,
) -> AppResult<Ban> {
    // A remote user (`name@host`) is banned by its name as it is stored;
    // a local name is checked as registration checks it.
    let username = if crate::model::federation::is_remote_name(&req.username) {
        check_name(&req.username, "user")?;
        req.username
    } else {
        Username::parse(&req.username)?.into_inner()
    };
    let reason = Reason::parse(req.reason.as_deref().unwrap_or(""), false)?;
    let expires_at = match req.duration_secs {
        None => None,
        Some(secs) if (1..=MAX_BAN_SECS).contains(&secs) => Some(Timestamp(Timestamp::now().0 + secs as i64)),
        Some(_) => return Err(AppError::Validation(format!("duration_secs must be between 1 and {MAX_BAN_SECS}"))),
    };
    Ok(state.store.ban(actor, NewBan { community, username, reason, expires_at }).await?)
}

/// The bans in force in `community` (`None`: site-wide); moderators only.
pub async fn bans<S: Store>(state: &AppState<S>, actor: &User, community: Option<String>) -> AppResult<Vec<Ban>> {
    Ok(state.store.bans(actor, community).await?)
}

pub async fn unban<S: Store>(
    state: &AppState<S>,
    actor: &User,
    community: Option<String>,
    user: String,
) -> AppResult<()> {
    check_name(&user, "user")?;
    state.store.unban(actor, community, user).await?;
    Ok(())
}

/// Reports a topic or post to its community's moderators; the reason is
/// required, and reports are rate-limited.
pub async fn report<S: Store>(
    state: &AppState<S>,
    reporter: &User,
    ip: ClientIp,
    target: VoteTarget,
    reason: &str,
) -> AppResult<Report> {
    let reason = Reason::parse(reason, true)?;
    state.limits.check(Action::Report, ip, Who::User(reporter.id))?;
    Ok(state.store.report(reporter, target, reason).await?)
}

/// Closes a report as resolved or dismissed; moderators only.
pub async fn resolve_report<S: Store>(state: &AppState<S>, actor: &User, id: i64, status: &str) -> AppResult<Report> {
    let status = match ReportStatus::parse(status) {
        Some(s @ (ReportStatus::Resolved | ReportStatus::Dismissed)) => s,
        _ => return Err(AppError::Validation("status must be resolved or dismissed".into())),
    };
    Ok(state.store.resolve_report(actor, id, status).await?)
}
