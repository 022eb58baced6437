//! Votes on topics and posts.

use super::limits::{Action, ClientIp, Who};
use super::{AppError, AppResult, AppState, apply::apply, commit};
use crate::model::change::Voter;
use crate::model::{Change, User, VoteOutcome, VoteTarget};
use crate::store::Store;

fn check_vote(v: i8) -> AppResult<i8> {
    if (-1..=1).contains(&v) { Ok(v) } else { Err(AppError::Validation("value must be -1, 0 or 1".into())) }
}

/// Records `user`'s vote (-1, 0 to withdraw, 1); the new total goes live.
pub async fn cast_vote<S: Store>(
    state: &AppState<S>,
    user: User,
    ip: ClientIp,
    target: VoteTarget,
    value: i8,
) -> AppResult<VoteOutcome> {
    let value = check_vote(value)?;
    state.limits.check(Action::Vote, ip, Who::User(user.id))?;
    let post_id = match target {
        VoteTarget::Topic(_) => None,
        VoteTarget::Post(id) => Some(id),
    };
    commit(state, move |st| async move {
        let outcome = st.store.vote(&user, target, value).await?;
        let by = Some(Voter { user_id: user.id, name: user.name, value });
        apply(&st, Change::Scored { topic_id: outcome.topic_id, post_id, score: outcome.score, by, seq: outcome.seq });
        Ok(outcome)
    })
    .await
}
