//! The administrators' rules for other servers: the SQL of
//! `store::sqlite::instances`, for PostgreSQL.

use deadpool_postgres::GenericClient;

use super::conn::{all, col, exec};
use crate::model::Timestamp;
use crate::model::instances::{InstanceEntry, InstanceRule};
use crate::store::{StoreError, StoreResult};

pub async fn rules(c: &impl GenericClient) -> StoreResult<Vec<InstanceEntry>> {
    let rows = all(c, "SELECT host, rule, reason, created_at FROM ap_instances ORDER BY host", &[]).await?;
    rows.iter()
        .map(|r| {
            let rule = InstanceRule::from_code(col(r, 1)?)
                .ok_or_else(|| StoreError::Internal("ap_instances.rule holds an unknown rule".into()))?;
            Ok(InstanceEntry { host: col(r, 0)?, rule, reason: col(r, 2)?, created_at: Timestamp(col(r, 3)?) })
        })
        .collect()
}

pub async fn set_rule(c: &impl GenericClient, host: &str, rule: Option<&(InstanceRule, String)>) -> StoreResult<bool> {
    let had = exec(c, "DELETE FROM ap_instances WHERE host = $1", &[&host]).await? > 0;
    if let Some((rule, reason)) = rule {
        exec(
            c,
            "INSERT INTO ap_instances (host, rule, reason, created_at) VALUES ($1, $2, $3, $4)",
            &[&host, &rule.code(), reason, &Timestamp::now().0],
        )
        .await?;
    }
    Ok(had)
}
