//! Reports: users flag a topic or post to its community's moderators, who
//! list them and resolve or dismiss them. Only moderators (and site
//! admins) read reports.

use rusqlite::{Connection, OptionalExtension, Row, params};

use super::conn::{is_unique_violation, map_err};
use super::moderation::{appointed, ban_facts, page, standing};
use super::{reads, writes};
use crate::model::policy::{self, Kind};
use crate::model::{Reason, Report, ReportStatus, Timestamp, User, VoteTarget};
use crate::store::{ListReports, ReportPage, StoreError, StoreResult};

const REPORT_SQL: &str = "SELECT r.id, c.name, r.topic_id, r.post_id, u.name, r.reason, r.status, r.created_at, \
     v.name, r.resolved_at FROM reports r JOIN communities c ON c.id = r.community_id \
     JOIN users u ON u.id = r.reporter_id LEFT JOIN users v ON v.id = r.resolved_by";

fn report_row(r: &Row<'_>) -> rusqlite::Result<Report> {
    let status: String = r.get(6)?;
    Ok(Report {
        id: r.get(0)?,
        community: r.get(1)?,
        topic_id: r.get(2)?,
        post_id: r.get(3)?,
        reporter: r.get(4)?,
        reason: r.get(5)?,
        // The column's CHECK allows only these three.
        status: ReportStatus::parse(&status).unwrap_or(ReportStatus::Open),
        created_at: Timestamp(r.get(7)?),
        resolved_by: r.get(8)?,
        resolved_at: r.get::<_, Option<i64>>(9)?.map(Timestamp),
    })
}

fn report_by_id(conn: &Connection, id: i64) -> StoreResult<Report> {
    conn.prepare_cached(&format!("{REPORT_SQL} WHERE r.id = ?1"))
        .and_then(|mut s| s.query_row([id], report_row).optional())
        .map_err(map_err)?
        .ok_or(StoreError::NotFound("report"))
}

pub fn report(
    conn: &Connection,
    reporter: &User,
    target: VoteTarget,
    reason: &Reason,
    now: Timestamp,
) -> StoreResult<Report> {
    let item = writes::item(conn, target)?;
    let community_id = item.facts.community_id();
    policy::may_report(reporter, &item.facts, &ban_facts(conn, reporter, community_id)?, now)?;
    let (topic_id, what) = (item.topic_id, item.facts.kind.name());
    let post_id = (item.facts.kind == Kind::Post).then_some(item.id);
    let inserted = conn
        .prepare_cached(
            "INSERT INTO reports (community_id, topic_id, post_id, reporter_id, reason, created_at) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
        )
        .and_then(|mut s| s.execute(params![community_id, topic_id, post_id, reporter.id, reason.as_str(), now.0]));
    match inserted {
        Ok(_) => report_by_id(conn, conn.last_insert_rowid()),
        Err(e) if is_unique_violation(&e) => {
            Err(StoreError::Conflict(format!("you have already reported this {what}; moderators will look at it")))
        }
        Err(e) => Err(map_err(e)),
    }
}

/// A community's reports for its moderators (read-only).
pub fn reports(conn: &Connection, actor: &User, q: &ListReports) -> StoreResult<ReportPage> {
    let community_id = reads::community_id(conn, &q.community)?;
    policy::may_see_reports(actor, appointed(conn, actor, community_id)?)?;
    // Without a status, `?2` matches nothing and is unused; each shape is a
    // plain index walk from the cursor (no OR for the planner to trip on).
    let (filter, status) = match q.status {
        Some(s) => ("r.status = ?2", s.as_str()),
        None => ("?2 = ?2", ""),
    };
    let after = q.after.unwrap_or(i64::MAX);
    let mut reports = conn
        .prepare_cached(&format!(
            "{REPORT_SQL} WHERE r.community_id = ?1 AND {filter} AND r.id < ?3 ORDER BY r.id DESC LIMIT ?4"
        ))
        .and_then(|mut s| {
            s.query_map(params![community_id, status, after, (q.limit + 1) as i64], report_row)?.collect()
        })
        .map_err(map_err)?;
    let next = page(&mut reports, q.limit, |r: &Report| r.id);
    Ok(ReportPage { reports, next })
}

pub fn resolve_report(
    conn: &Connection,
    actor: &User,
    id: i64,
    status: ReportStatus,
    now: Timestamp,
) -> StoreResult<Report> {
    policy::valid_resolution(status)?;
    let community_id: i64 = conn
        .prepare_cached("SELECT community_id FROM reports WHERE id = ?1")
        .and_then(|mut s| s.query_row([id], |r| r.get(0)).optional())
        .map_err(map_err)?
        .ok_or(StoreError::NotFound("report"))?;
    policy::may_moderate(actor, &standing(conn, actor, community_id)?, now)?;
    conn.prepare_cached("UPDATE reports SET status = ?1, resolved_by = ?2, resolved_at = ?3 WHERE id = ?4")
        .and_then(|mut s| s.execute(params![status.as_str(), actor.id, now.0, id]))
        .map_err(map_err)?;
    report_by_id(conn, id)
}
