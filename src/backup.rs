//! `pith backup` and `pith restore`, plus the lock that keeps a restore
//! from pulling the database out from under a running server.
//!
//! A backup is SQLite's `VACUUM INTO` on a read-only connection: it copies
//! one consistent snapshot (a read transaction in WAL mode) while the server
//! keeps writing, and the copy is compact and self-contained (no WAL). It
//! is written beside the target, checked with `PRAGMA integrity_check`,
//! synced, and only then renamed into place, so a crash never leaves a
//! half-written file under the backup's name.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, bail};
use rusqlite::{Connection, OpenFlags};

use crate::config::{BackupConfig, RestoreConfig};

/// Held by `pith serve` for as long as it runs: a second server, or a
/// restore, on the same database is refused instead of corrupting it.
pub struct ServeLock {
    _file: File,
}

/// The lock file of a database: `pith.db` -> `pith.db.lock`.
fn lock_path(db: &Path) -> PathBuf {
    let mut name = db.as_os_str().to_owned();
    name.push(".lock");
    PathBuf::from(name)
}

impl ServeLock {
    /// Takes the lock or says who holds it. The OS drops the lock when the
    /// process exits, however it exits, so a `kill -9` leaves nothing stale.
    pub fn acquire(db: &Path, holder: &str) -> anyhow::Result<ServeLock> {
        let path = lock_path(db);
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)
                .with_context(|| format!("cannot create the data directory {}", dir.display()))?;
        }
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .with_context(|| format!("cannot open the lock file {}", path.display()))?;
        match file.try_lock() {
            Ok(()) => Ok(ServeLock { _file: file }),
            Err(std::fs::TryLockError::WouldBlock) => {
                bail!("{} is in use by a running `pith serve`; stop it before {holder}", db.display())
            }
            Err(std::fs::TryLockError::Error(e)) => Err(e).context(format!("cannot lock {}", path.display())),
        }
    }
}

pub fn backup(cfg: BackupConfig) -> anyhow::Result<()> {
    let db = cfg.data.sqlite_path()?;
    let target = cfg.file;
    if !db.is_file() {
        bail!("there is no database at {} to back up", db.display());
    }
    if target.exists() {
        bail!("{} already exists; choose a new file name (a backup never overwrites)", target.display());
    }
    let started = Instant::now();
    let partial = sibling(&target, ".partial")?;
    let _ = std::fs::remove_file(&partial);
    let result = (|| {
        let conn = Connection::open_with_flags(&db, OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX)
            .with_context(|| format!("cannot open {}", db.display()))?;
        conn.busy_timeout(std::time::Duration::from_secs(30))?;
        let into = partial.to_str().context("the backup path must be valid UTF-8")?;
        conn.execute("VACUUM INTO ?1", [into]).with_context(|| format!("cannot write the backup to {into}"))?;
        drop(conn);
        check(&partial)?;
        File::open(&partial)?.sync_all()?;
        std::fs::rename(&partial, &target)?;
        sync_dir(&target);
        anyhow::Ok(())
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&partial);
    }
    result?;
    let size = std::fs::metadata(&target).map(|m| m.len()).unwrap_or(0);
    eprintln!(
        "backed up {} to {} ({:.1} MiB, integrity ok) in {:.2} s",
        db.display(),
        target.display(),
        size as f64 / (1 << 20) as f64,
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

pub fn restore(cfg: RestoreConfig) -> anyhow::Result<()> {
    let db = cfg.data.sqlite_path()?;
    let source = cfg.file;
    if !source.is_file() {
        bail!("there is no backup file at {}", source.display());
    }
    check(&source).with_context(|| format!("{} is not a usable backup", source.display()))?;
    let _lock = ServeLock::acquire(&db, "restoring")?;
    let incoming = sibling(&db, ".restoring")?;
    std::fs::copy(&source, &incoming)
        .with_context(|| format!("cannot copy {} to {}", source.display(), incoming.display()))?;
    File::open(&incoming)?.sync_all()?;
    // The old database is kept, never deleted: a restore can be undone.
    let kept = if db.exists() {
        let stamp = time::OffsetDateTime::now_utc().unix_timestamp();
        let kept = sibling(&db, &format!(".before-restore-{stamp}"))?;
        // Its WAL belongs to it: fold it in first so the kept copy is whole.
        if let Ok(conn) = Connection::open(&db) {
            let _ = conn.execute_batch("PRAGMA wal_checkpoint(TRUNCATE)");
        }
        std::fs::rename(&db, &kept)?;
        Some(kept)
    } else {
        None
    };
    for suffix in ["-wal", "-shm"] {
        let _ = std::fs::remove_file(sibling(&db, suffix)?);
    }
    std::fs::rename(&incoming, &db)?;
    sync_dir(&db);
    eprintln!("restored {} from {}", db.display(), source.display());
    if let Some(kept) = kept {
        eprintln!("the database it replaced is kept as {}", kept.display());
    }
    Ok(())
}

/// A backup must pass the full integrity check and hold a Pith schema.
fn check(path: &Path) -> anyhow::Result<()> {
    let conn = Connection::open_with_flags(path, OpenFlags::SQLITE_OPEN_READ_ONLY)
        .with_context(|| format!("cannot open {}", path.display()))?;
    let verdict: String = conn
        .query_row("PRAGMA integrity_check(1)", [], |r| r.get(0))
        .with_context(|| format!("{} is not a SQLite database", path.display()))?;
    if verdict != "ok" {
        bail!("integrity check failed: {verdict}");
    }
    let version: i64 = conn.query_row("PRAGMA user_version", [], |r| r.get(0))?;
    let has_posts: bool =
        conn.query_row("SELECT count(*) > 0 FROM sqlite_schema WHERE type = 'table' AND name = 'posts'", [], |r| {
            r.get(0)
        })?;
    if version < 1 || !has_posts {
        bail!("it is a SQLite database but not a Pith one");
    }
    Ok(())
}

/// `path` with `suffix` added to its file name.
fn sibling(path: &Path, suffix: &str) -> anyhow::Result<PathBuf> {
    let mut name = path.file_name().with_context(|| format!("{} is not a file path", path.display()))?.to_owned();
    name.push(suffix);
    Ok(path.with_file_name(name))
}

/// Makes a rename durable: the directory entry must reach the disk too.
fn sync_dir(path: &Path) {
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    if let Ok(d) = File::open(dir) {
        let _ = d.sync_all();
    }
}
