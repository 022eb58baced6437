//! First-run setup: is there an administrator yet, and creating the first
//! one in the same transaction that checks there is none (two setup forms
//! sent at once cannot both succeed).

use rusqlite::Connection;

use super::conn::map_err;
use super::writes;
use crate::model::policy;
use crate::model::{Timestamp, User, Username};
use crate::store::StoreResult;

pub fn has_admin(conn: &Connection) -> StoreResult<bool> {
    conn.prepare_cached("SELECT EXISTS (SELECT 1 FROM users WHERE is_admin)")
        .and_then(|mut s| s.query_row([], |r| r.get(0)))
        .map_err(map_err)
}

pub fn create_first_admin(conn: &Connection, name: &Username, hash: &str, now: Timestamp) -> StoreResult<User> {
    policy::may_create_first_admin(has_admin(conn)?)?;
    writes::create_user(conn, name, Some(hash), true, now)
}
