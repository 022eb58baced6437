//! A reader's own things: saving topics and posts, blocking communities
//! from their front page, blocking users (their posts collapse, their
//! messages and notifications stop), and their marks (votes, saves,
//! blocked authors) on a topic page.
//! None of it touches a cached rendering: each is read per request, by
//! the signed-in reader alone.

use super::limits::{Action, ClientIp, Who};
use super::{AppError, AppResult, AppState};
use crate::model::{Blocks, Marks, Saved, SavedCursor, User, VoteTarget};
use crate::store::Store;

/// Saved items per page of the saved list.
pub const PAGE: usize = 25;

/// `?after=`: where a page of the saved list starts (the previous page's
/// `next`); empty or absent is the first page.
pub fn parse_cursor(s: Option<&str>) -> AppResult<Option<SavedCursor>> {
    match s {
        None | Some("") => Ok(None),
        Some(s) => SavedCursor::decode(s)
            .map(Some)
            .ok_or_else(|| AppError::BadRequest("invalid_query", "after is not a valid cursor".into())),
    }
}

/// Saves (`saved`) or unsaves a topic or post; idempotent. Counts against
/// the vote budget: it is as small a write. Returns whether anything
/// changed.
pub async fn set_saved<S: Store>(
    state: &AppState<S>,
    user: &User,
    ip: ClientIp,
    target: VoteTarget,
    saved: bool,
) -> AppResult<bool> {
    state.limits.check(Action::Vote, ip, Who::User(user.id))?;
    Ok(state.store.set_saved(user, target, saved).await?)
}

/// One page of `user`'s saved items, newest first, each shown as the
/// public sees it (removed or deleted: no text), and the next page's
/// cursor.
pub async fn saved<S: Store>(
    state: &AppState<S>,
    user: &User,
    after: Option<SavedCursor>,
) -> AppResult<(Vec<Saved>, Option<SavedCursor>)> {
    let page = state.store.saved(user.id, after, PAGE).await?;
    Ok((page.items.into_iter().map(Saved::redact).collect(), page.next))
}

/// Blocks (`blocked`) or unblocks a community by name; idempotent.
/// Returns whether anything changed.
pub async fn set_blocked<S: Store>(
    state: &AppState<S>,
    user: &User,
    ip: ClientIp,
    community: &str,
    blocked: bool,
) -> AppResult<bool> {
    if community.len() > 64 {
        return Err(AppError::not_found("community"));
    }
    state.limits.check(Action::Vote, ip, Who::User(user.id))?;
    Ok(state.store.set_blocked(user, community.to_ascii_lowercase(), blocked).await?)
}

/// The names of the communities `user` blocked.
pub async fn blocked<S: Store>(state: &AppState<S>, user: &User) -> AppResult<Vec<String>> {
    Ok(state.store.blocked(user.id).await?)
}

/// Blocks (`blocked`) or unblocks the user named `name`; idempotent.
/// Blocking oneself is refused (422 `block_self`). Returns whether
/// anything changed.
pub async fn set_user_blocked<S: Store>(
    state: &AppState<S>,
    user: &User,
    ip: ClientIp,
    name: &str,
    blocked: bool,
) -> AppResult<bool> {
    if name.eq_ignore_ascii_case(&user.name) {
        let message = "you cannot block yourself".to_owned();
        return Err(AppError::Rejected(axum::http::StatusCode::UNPROCESSABLE_ENTITY, "block_self", message));
    }
    if name.len() > 64 {
        return Err(AppError::not_found("user"));
    }
    state.limits.check(Action::Vote, ip, Who::User(user.id))?;
    Ok(state.store.set_user_blocked(user, name.to_owned(), blocked).await?)
}

/// The users and communities `user` blocked.
pub async fn blocks<S: Store>(state: &AppState<S>, user: &User) -> AppResult<Blocks> {
    Ok(state.store.blocks(user.id).await?)
}

/// `user`'s votes and saves on a topic and the posts of the page shown.
/// A failed read shows no marks rather than no page: they are a layer over
/// the page, not its content.
pub async fn marks<S: Store>(state: &AppState<S>, user: &User, topic: i64, posts: Vec<i64>) -> Marks {
    match state.store.marks(user.id, topic, posts).await {
        Ok(m) => m,
        Err(e) => {
            AppError::from(e).report();
            Marks::default()
        }
    }
}

/// `user`'s votes on the listed topics, as (topic, vote); none when the
/// read fails, as with `marks`.
pub async fn topic_votes<S: Store>(state: &AppState<S>, user: &User, topics: Vec<i64>) -> Vec<(i64, i8)> {
    if topics.is_empty() {
        return Vec::new();
    }
    state.store.topic_votes(user.id, topics).await.unwrap_or_else(|e| {
        AppError::from(e).report();
        Vec::new()
    })
}
