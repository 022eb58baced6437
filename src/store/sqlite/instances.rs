//! The administrators' rules for other servers (migration 0013,
//! `model::instances`).

use rusqlite::{Connection, Row, params};

use super::conn::map_err;
use crate::model::Timestamp;
use crate::model::instances::{InstanceEntry, InstanceRule};
use crate::store::{StoreError, StoreResult};

fn entry(r: &Row<'_>) -> rusqlite::Result<(String, i64, String, i64)> {
    Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?))
}

pub fn rules(conn: &Connection) -> StoreResult<Vec<InstanceEntry>> {
    let rows: Vec<(String, i64, String, i64)> = conn
        .prepare_cached("SELECT host, rule, reason, created_at FROM ap_instances ORDER BY host")
        .and_then(|mut s| s.query_map([], entry)?.collect())
        .map_err(map_err)?;
    rows.into_iter()
        .map(|(host, rule, reason, at)| {
            let rule = InstanceRule::from_code(rule)
                .ok_or_else(|| StoreError::Internal("ap_instances.rule holds an unknown rule".into()))?;
            Ok(InstanceEntry { host, rule, reason, created_at: Timestamp(at) })
        })
        .collect()
}

pub fn set_rule(conn: &Connection, host: &str, rule: Option<&(InstanceRule, String)>) -> StoreResult<bool> {
    let had = conn
        .prepare_cached("DELETE FROM ap_instances WHERE host = ?1")
        .and_then(|mut s| s.execute([host]))
        .map_err(map_err)?
        > 0;
    if let Some((rule, reason)) = rule {
        conn.prepare_cached("INSERT INTO ap_instances (host, rule, reason, created_at) VALUES (?1, ?2, ?3, ?4)")
            .and_then(|mut s| s.execute(params![host, rule.code(), reason, Timestamp::now().0]))
            .map_err(map_err)?;
    }
    Ok(had)
}
