//! The site: its settings (registration mode) and invite codes, for site
//! administrators; the first run's administrator.

use super::auth::{hash_password, new_token, token_digest};
use super::{AppError, AppResult, AppState, accounts::blocking};
use crate::model::{Invite, Password, SiteSettings, Timestamp, User, Username};
use crate::store::Store;

/// Longest an invite may stay valid: a year.
pub const MAX_INVITE_SECS: u64 = 366 * 86_400;

/// Sets the site's settings; site administrators only.
pub async fn set_settings<S: Store>(
    state: &AppState<S>,
    actor: &User,
    settings: SiteSettings,
) -> AppResult<SiteSettings> {
    Ok(state.store.set_site_settings(actor, settings).await?)
}

/// Makes an invite code valid for `expires_in_secs` (`None`: until used)
/// and returns it with the stored invite: the code is shown only now, as
/// random as a session token (256 bits); the server keeps its digest.
pub async fn create_invite<S: Store>(
    state: &AppState<S>,
    actor: &User,
    expires_in_secs: Option<u64>,
) -> AppResult<(String, Invite)> {
    let expires_at = match expires_in_secs {
        None => None,
        Some(secs) if (1..=MAX_INVITE_SECS).contains(&secs) => Some(Timestamp(Timestamp::now().0 + secs as i64)),
        Some(_) => {
            return Err(AppError::Validation(format!("expires_in_secs must be between 1 and {MAX_INVITE_SECS}")));
        }
    };
    let code = new_token();
    let invite = state.store.create_invite(Some(actor), token_digest(&code), expires_at).await?;
    Ok((code, invite))
}

/// Creates the first administrator (the setup link's form); a conflict
/// once one exists.
pub async fn create_first_admin<S: Store>(state: &AppState<S>, username: &str, password: &str) -> AppResult<User> {
    let name = Username::parse(username)?;
    let password = Password::parse(password)?;
    let hash = blocking(move || hash_password(password.as_str())).await?.map_err(AppError::Internal)?;
    Ok(state.store.create_first_admin(name, hash).await?)
}
