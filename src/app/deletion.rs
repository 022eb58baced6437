//! Deleting an account: by its owner (with their password) or by a site
//! administrator (a purge). Both do the same: the store deletes it in one
//! transaction (`Store::delete_user`), then `apply` forgets its tokens on
//! every node and evicts the renderings of every topic it wrote or
//! replied in.
//!
//! The account's row stays, marked deleted: its name stays reserved, so
//! no one can register it (or a look-alike) and speak as the person who
//! left.

use super::limits::ClientIp;
use super::{AppError, AppResult, AppState, AuthUser};
use crate::model::{Change, ContentFate};
use crate::store::Store;

/// The signed-in user deletes their own account. `content` is checked
/// first (422), then the password (403 `wrong_password`; counted as a
/// login attempt), then, with two-factor login on, `code` (403
/// `totp_required` or `totp_invalid`; a wrong one counts as an attempt too).
pub async fn delete_own<S: Store>(
    state: &AppState<S>,
    ip: ClientIp,
    auth: &AuthUser,
    password: String,
    code: Option<&str>,
    content: &str,
) -> AppResult<()> {
    let fate = ContentFate::parse(content)?;
    super::sessions::check_password(state, ip, &auth.user, password).await?;
    super::two_factor::check_signed_in(state, ip, &auth.user, code).await?;
    purge(state, auth.user.id, fate).await
}

/// A site administrator deletes the account `name` (404 when there is
/// none). Deleting oneself this way needs no password: an administrator
/// could purge any account anyway.
pub async fn delete_by_admin<S: Store>(
    state: &AppState<S>,
    actor: &crate::model::User,
    name: String,
    content: &str,
) -> AppResult<()> {
    if !actor.is_admin {
        return Err(AppError::Forbidden("site administrators only".into()));
    }
    let fate = ContentFate::parse(content)?;
    if name.len() > 64 {
        return Err(AppError::not_found("user"));
    }
    let Some((user, _)) = state.store.user_credentials(name).await? else {
        return Err(AppError::not_found("user"));
    };
    purge(state, user.id, fate).await
}

/// Deletes the account and applies what that changed, as a task of its
/// own so a client hanging up cannot cancel the eviction.
pub async fn purge<S: Store>(state: &AppState<S>, user_id: i64, fate: ContentFate) -> AppResult<()> {
    super::commit(state, move |state| async move {
        // The cached tokens are forgotten before and after: none can be
        // cached again in between and still answer once the rows are gone.
        let tokens = state.store.user_tokens(user_id).await?;
        tokens.iter().for_each(|t| state.tokens.remove(&t.hash));
        let topics = state.store.delete_user(user_id, fate).await?;
        tokens.iter().for_each(|t| state.tokens.remove(&t.hash));
        super::apply::apply(&state, Change::AccountDeleted { user_id, topics });
        // Its pictures nothing else shows go.
        super::media::sweep(&state).await;
        Ok(())
    })
    .await
}
