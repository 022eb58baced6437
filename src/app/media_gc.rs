//! `pith media gc`: the pictures' files and rows brought back in step.
//!
//! - Rows freed by a deletion whose files were not removed (the process
//!   stopped in between): removed now, files and rows.
//! - Files with no row (an upload that wrote its files, then failed or was
//!   refused and could not remove them; a row lost to a restore), older
//!   than `grace` so an upload in flight is left alone: removed.
//! - Temporary files older than `grace` (a crash mid-write): removed.
//! - Rows whose file is missing (a restore without its pictures, a node
//!   whose shared directory lost a file): their rows and references go, so
//!   the store no longer counts them; the bodies that show them show a
//!   broken picture, as `/media/` answers 404 for them anyway.
//! - With `unreferenced_days`: pictures uploaded that long ago that no
//!   topic or post shows (never used, or edited out): removed.
//!
//! `dry_run` reports the same and changes nothing.

use std::collections::HashSet;
use std::path::PathBuf;
use std::time::{Duration, SystemTime};

use crate::media::MediaName;
use crate::media::files::{Found, MediaDir, TEMP_PREFIX};
use crate::model::Timestamp;
use crate::store::{Store, StoreResult};

/// Rows read at a time.
const PAGE: usize = 500;

#[derive(Debug, Clone, Copy)]
pub struct GcOptions {
    /// Files younger than this are left alone (an upload may be writing).
    pub grace: Duration,
    /// Remove pictures no body shows once they are this many days old.
    pub unreferenced_days: Option<u64>,
    /// Report only.
    pub dry_run: bool,
}

/// What gc found (and, unless a dry run, fixed).
#[derive(Debug, Clone, Default)]
pub struct GcReport {
    /// Freed pictures whose rows and files were removed.
    pub freed: Vec<String>,
    /// Files with no row, removed.
    pub orphan_files: Vec<PathBuf>,
    /// Temporary files left by a crash, removed.
    pub stale_temp: Vec<PathBuf>,
    /// Files that are no picture's (left as they are).
    pub strays: Vec<PathBuf>,
    /// Rows whose file is missing, forgotten.
    pub missing: Vec<String>,
    /// Old pictures no body shows, removed.
    pub unreferenced: Vec<String>,
}

fn older(when: SystemTime, now: SystemTime, grace: Duration) -> bool {
    now.duration_since(when).is_ok_and(|age| age >= grace)
}

pub async fn gc<S: Store>(store: &S, dir: &MediaDir, opts: GcOptions) -> StoreResult<GcReport> {
    let mut report = GcReport::default();
    let now = SystemTime::now();
    if !opts.dry_run {
        report.freed = store.take_freed_media().await?;
        for name in report.freed.iter().filter_map(|n| MediaName::parse(n)) {
            let _ = dir.remove(&name);
        }
    }
    let mut rows = Vec::new();
    let mut after = String::new();
    loop {
        let page = store.media_rows(after.clone(), PAGE).await?;
        let Some(last) = page.last() else { break };
        after = last.name.clone();
        rows.extend(page);
    }
    let named: HashSet<&str> = rows.iter().map(|r| r.name.as_str()).collect();
    for found in dir
        .list()
        .map_err(|e| crate::store::StoreError::Internal(format!("cannot list {}: {e}", dir.root().display())))?
    {
        match found {
            Found::Media(name, when) if !named.contains(name.full().to_string().as_str()) => {
                if older(when, now, opts.grace) {
                    report.orphan_files.push(dir.path(&name));
                }
            }
            Found::Media(..) => {}
            Found::Other(path, when) => {
                let temp = path.file_name().is_some_and(|n| n.to_string_lossy().starts_with(TEMP_PREFIX));
                match temp {
                    true if older(when, now, opts.grace) => report.stale_temp.push(path),
                    true => {}
                    false => report.strays.push(path),
                }
            }
        }
    }
    let cutoff = opts.unreferenced_days.map(|d| Timestamp::now().0 - i64::try_from(d * 86_400).unwrap_or(i64::MAX));
    for row in &rows {
        let Some(name) = MediaName::parse(&row.name) else {
            report.missing.push(row.name.clone());
            continue;
        };
        if !dir.exists(&name) {
            report.missing.push(row.name.clone());
        } else if cutoff.is_some_and(|c| !row.referenced && row.created_at.0 < c) {
            report.unreferenced.push(row.name.clone());
        }
    }
    if opts.dry_run {
        return Ok(report);
    }
    for path in report.orphan_files.iter().chain(&report.stale_temp) {
        let _ = std::fs::remove_file(path);
    }
    let forget: Vec<String> = report.missing.iter().chain(&report.unreferenced).cloned().collect();
    if !forget.is_empty() {
        store.forget_media(forget.clone()).await?;
    }
    for name in forget.iter().filter_map(|n| MediaName::parse(n)) {
        let _ = dir.remove(&name);
    }
    Ok(report)
}
