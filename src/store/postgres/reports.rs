//! Reports: users flag a topic or post to its community's moderators, who
//! list them and resolve or dismiss them. Only moderators (and site
//! admins) read reports.

use deadpool_postgres::GenericClient;
use tokio_postgres::Row;

use super::conn::{all, col, exec, is_unique_violation, map_err, opt};
use super::moderation::{appointed, ban_facts, page, standing};
use super::{reads, writes};
use crate::model::policy::{self, Kind};
use crate::model::{Reason, Report, ReportStatus, Timestamp, User, VoteTarget};
use crate::store::{ListReports, ReportPage, StoreError, StoreResult};

const REPORT_SQL: &str = "SELECT r.id, c.name, r.topic_id, r.post_id, u.name, r.reason, r.status, r.created_at, \
     v.name, r.resolved_at FROM reports r JOIN communities c ON c.id = r.community_id \
     JOIN users u ON u.id = r.reporter_id LEFT JOIN users v ON v.id = r.resolved_by";

fn report_row(r: &Row) -> StoreResult<Report> {
    let status: String = col(r, 6)?;
    Ok(Report {
        id: col(r, 0)?,
        community: col(r, 1)?,
        topic_id: col(r, 2)?,
        post_id: col(r, 3)?,
        reporter: col(r, 4)?,
        reason: col(r, 5)?,
        // The column's CHECK allows only these three.
        status: ReportStatus::parse(&status).unwrap_or(ReportStatus::Open),
        created_at: Timestamp(col(r, 7)?),
        resolved_by: col(r, 8)?,
        resolved_at: col::<Option<i64>>(r, 9)?.map(Timestamp),
    })
}

async fn report_by_id(c: &impl GenericClient, id: i64) -> StoreResult<Report> {
    match opt(c, &format!("{REPORT_SQL} WHERE r.id = $1"), &[&id]).await? {
        Some(r) => report_row(&r),
        None => Err(StoreError::NotFound("report")),
    }
}

pub async fn report(
    c: &impl GenericClient,
    reporter: &User,
    target: VoteTarget,
    reason: &Reason,
    now: Timestamp,
) -> StoreResult<Report> {
    let item = writes::item(c, target, writes::Lock::None).await?;
    let community_id = item.facts.community_id();
    policy::may_report(reporter, &item.facts, &ban_facts(c, reporter, community_id).await?, now)?;
    let (topic_id, what) = (item.topic_id, item.facts.kind.name());
    let post_id = (item.facts.kind == Kind::Post).then_some(item.id);
    let st = c
        .prepare_cached(
            "INSERT INTO reports (community_id, topic_id, post_id, reporter_id, reason, created_at) \
             VALUES ($1, $2, $3, $4, $5, $6) RETURNING id",
        )
        .await
        .map_err(map_err)?;
    let inserted =
        c.query_one(&st, &[&community_id, &topic_id, &post_id, &reporter.id, &reason.as_str(), &now.0]).await;
    match inserted {
        Ok(r) => report_by_id(c, col(&r, 0)?).await,
        Err(e) if is_unique_violation(&e) => {
            Err(StoreError::Conflict(format!("you have already reported this {what}; moderators will look at it")))
        }
        Err(e) => Err(map_err(e)),
    }
}

/// A community's reports for its moderators.
pub async fn reports(c: &impl GenericClient, actor: &User, q: &ListReports) -> StoreResult<ReportPage> {
    let community_id = reads::community_id(c, &q.community).await?;
    policy::may_see_reports(actor, appointed(c, actor, community_id).await?)?;
    let (filter, status) = match q.status {
        Some(s) => ("r.status = $2", s.as_str()),
        None => ("$2::text = $2::text", ""),
    };
    let after = q.after.unwrap_or(i64::MAX);
    let limit = (q.limit + 1) as i64;
    let sql = format!("{REPORT_SQL} WHERE r.community_id = $1 AND {filter} AND r.id < $3 ORDER BY r.id DESC LIMIT $4");
    let mut reports = all(c, &sql, &[&community_id, &status, &after, &limit])
        .await?
        .iter()
        .map(report_row)
        .collect::<StoreResult<Vec<_>>>()?;
    let next = page(&mut reports, q.limit, |r: &Report| r.id);
    Ok(ReportPage { reports, next })
}

pub async fn resolve_report(
    c: &impl GenericClient,
    actor: &User,
    id: i64,
    status: ReportStatus,
    now: Timestamp,
) -> StoreResult<Report> {
    policy::valid_resolution(status)?;
    let community_id: i64 = match opt(c, "SELECT community_id FROM reports WHERE id = $1 FOR UPDATE", &[&id]).await? {
        Some(r) => col(&r, 0)?,
        None => return Err(StoreError::NotFound("report")),
    };
    policy::may_moderate(actor, &standing(c, actor, community_id).await?, now)?;
    exec(
        c,
        "UPDATE reports SET status = $1, resolved_by = $2, resolved_at = $3 WHERE id = $4",
        &[&status.as_str(), &actor.id, &now.0, &id],
    )
    .await?;
    report_by_id(c, id).await
}
