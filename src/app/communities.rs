//! Communities: creating one (site administrators), with its creator as
//! its first moderator.

use super::{AppError, AppResult, AppState};
use crate::model::{Community, CommunityName, Title, User, policy};
use crate::store::{NewCommunity, Store};

/// Longest community description, in characters.
pub const MAX_DESCRIPTION: usize = 10_000;

/// Creates a community; the administrator-only answer comes before any
/// field is checked.
pub async fn create_community<S: Store>(
    state: &AppState<S>,
    actor: &User,
    name: &str,
    title: &str,
    description: String,
) -> AppResult<Community> {
    policy::may_create_community(actor)?;
    if description.chars().count() > MAX_DESCRIPTION {
        return Err(AppError::Validation(format!("description must be at most {MAX_DESCRIPTION} characters")));
    }
    let new = NewCommunity { name: CommunityName::parse(name)?, title: Title::parse(title)?, description };
    Ok(state.store.create_community(actor, new).await?)
}
