//! First-run setup on PostgreSQL: is there an administrator yet, and
//! creating the first one. Several nodes may serve the setup form at once,
//! so the check and the insert run under one transaction-scoped advisory
//! lock: of two concurrent setups only the first creates an admin.

use deadpool_postgres::GenericClient;

use super::conn::{col, exec, one};
use super::writes;
use crate::model::policy;
use crate::model::{Timestamp, User, Username};
use crate::store::StoreResult;

/// Any number fixed for "the first-admin check"; advisory locks are keyed
/// by integers.
const FIRST_ADMIN_LOCK: i64 = 0x7069_7468_0001;

pub async fn has_admin(c: &impl GenericClient) -> StoreResult<bool> {
    let row = one(c, "SELECT EXISTS (SELECT 1 FROM users WHERE is_admin)", &[]).await?;
    col(&row, 0)
}

pub async fn create_first_admin(
    c: &impl GenericClient,
    name: &Username,
    hash: &str,
    now: Timestamp,
) -> StoreResult<User> {
    exec(c, "SELECT pg_advisory_xact_lock($1)", &[&FIRST_ADMIN_LOCK]).await?;
    policy::may_create_first_admin(has_admin(c).await?)?;
    writes::create_user(c, name, Some(hash), true, now).await
}
