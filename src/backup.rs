//! `pith backup` and `pith restore`, plus the lock that keeps a restore
//! from pulling the database out from under a running server; `pith media
//! gc`; and the way the commands open a store (`with_sqlite`,
//! `with_postgres`).
//!
//! A backup is SQLite's `VACUUM INTO` on a read-only connection: it copies
//! one consistent snapshot (a read transaction in WAL mode) while the server
//! keeps writing, and the copy is compact and self-contained (no WAL). It
//! is written beside the target, checked with `PRAGMA integrity_check`,
//! synced, and only then renamed into place, so a crash never leaves a
//! half-written file under the backup's name.
//!
//! The pictures go beside it, in the directory `FILE.media` (the same
//! `HH/NAME` layout as the data dir's `media`): every picture file is
//! copied first, then the database snapshot is taken, then the files
//! written meanwhile are copied. A picture's file is written before its
//! row commits (`app::media`), so every row in the snapshot finds its
//! file in the copy. `pith restore` copies `FILE.media` back into the
//! media directory (files already there are kept: the same name is the
//! same bytes) before it puts the database in place.

use std::fs::File;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, bail};
use rusqlite::{Connection, OpenFlags};

use crate::config::{Backend, BackupConfig, DataConfig, MediaGcConfig, RestoreConfig};
use crate::media::files::MediaDir;
use crate::store::Store;
use crate::store::postgres::{PgOptions, PgStore};
use crate::store::sqlite::{SqliteOptions, SqliteStore};

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
    let media = MediaDir::new(media_dir(&cfg.data, cfg.media_dir.as_deref()));
    let media_target = sibling(&target, ".media")?;
    if media_target.exists() {
        bail!("{} already exists; choose a new file name (a backup never overwrites)", media_target.display());
    }
    let media_partial = sibling(&target, ".media.partial")?;
    let _ = std::fs::remove_dir_all(&media_partial);
    let copy = MediaDir::new(&media_partial);
    let mut pictures = copy_pictures(&media, &copy).context("cannot copy the pictures")?;
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
        // The pictures written while the snapshot was taken.
        pictures += copy_pictures(&media, &copy).context("cannot copy the pictures")?;
        std::fs::create_dir_all(&media_partial)?;
        std::fs::rename(&media_partial, &media_target)?;
        std::fs::rename(&partial, &target)?;
        sync_dir(&target);
        anyhow::Ok(())
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&partial);
        let _ = std::fs::remove_dir_all(&media_partial);
    }
    result?;
    let size = std::fs::metadata(&target).map(|m| m.len()).unwrap_or(0);
    eprintln!(
        "backed up {} to {} ({:.1} MiB, integrity ok) and {pictures} picture files to {} in {:.2} s",
        db.display(),
        target.display(),
        size as f64 / (1 << 20) as f64,
        media_target.display(),
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// The media directory `pith serve` uses with these settings.
fn media_dir(data: &DataConfig, explicit: Option<&Path>) -> PathBuf {
    explicit.map_or_else(|| data.data_dir.join("media"), Path::to_path_buf)
}

/// Copies every picture file of `from` that `to` lacks, each synced, and
/// returns how many.
fn copy_pictures(from: &MediaDir, to: &MediaDir) -> anyhow::Result<usize> {
    let mut copied = 0;
    for found in from.list()? {
        let crate::media::files::Found::Media(name, _) = found else { continue };
        if to.exists(&name) {
            continue;
        }
        let bytes = match std::fs::read(from.path(&name)) {
            Ok(b) => b,
            // Removed since it was listed: its row is gone too.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(e).with_context(|| format!("cannot read {}", from.path(&name).display())),
        };
        to.write(&name, &bytes)?;
        copied += 1;
    }
    Ok(copied)
}

pub fn restore(cfg: RestoreConfig) -> anyhow::Result<()> {
    let db = cfg.data.sqlite_path()?;
    let source = cfg.file;
    if !source.is_file() {
        bail!("there is no backup file at {}", source.display());
    }
    check(&source).with_context(|| format!("{} is not a usable backup", source.display()))?;
    let _lock = ServeLock::acquire(&db, "restoring")?;
    let media_source = sibling(&source, ".media")?;
    let pictures = if media_source.is_dir() {
        let media = MediaDir::new(media_dir(&cfg.data, cfg.media_dir.as_deref()));
        copy_pictures(&MediaDir::new(&media_source), &media).context("cannot restore the pictures")?
    } else {
        0
    };
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
    eprintln!("restored {} from {} (and {pictures} picture files)", db.display(), source.display());
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

/// Opens the SQLite database `data` points at, runs `f` on it and shuts
/// the store down cleanly (commit, checkpoint) whatever `f` returned.
pub fn with_sqlite<T, F, Fut>(data: &DataConfig, f: F) -> anyhow::Result<T>
where
    F: FnOnce(std::sync::Arc<SqliteStore>) -> Fut,
    Fut: Future<Output = anyhow::Result<T>>,
{
    let path = data.sqlite_path()?;
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    rt.block_on(async {
        let opts = SqliteOptions { readers: 1, ..SqliteOptions::default() };
        let store = std::sync::Arc::new(
            SqliteStore::open(&path, &opts).with_context(|| format!("cannot open database {}", path.display()))?,
        );
        let result = f(store.clone()).await;
        store.shutdown().await;
        result
    })
}

/// Connects to the PostgreSQL database at `url` (migrating it) and runs `f`.
pub fn with_postgres<T, F, Fut>(url: &str, f: F) -> anyhow::Result<T>
where
    F: FnOnce(std::sync::Arc<PgStore>) -> Fut,
    Fut: Future<Output = anyhow::Result<T>>,
{
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    rt.block_on(async {
        let opts = PgOptions { pool_size: 1, ..PgOptions::default() };
        let store = std::sync::Arc::new(
            PgStore::connect(url, &opts)
                .await
                .with_context(|| format!("cannot open database {}", crate::settings::redact_url(url)))?,
        );
        let result = f(store.clone()).await;
        store.shutdown().await;
        result
    })
}

/// `pith media gc` (`app::media_gc`): prints what it found and did.
pub fn media_gc(cfg: MediaGcConfig) -> anyhow::Result<()> {
    use crate::app::media_gc::{GcOptions, gc};
    let dir = MediaDir::new(cfg.media_dir.clone().unwrap_or_else(|| cfg.data.data_dir.join("media")));
    let opts = GcOptions {
        grace: std::time::Duration::from_secs(cfg.grace_minutes * 60),
        unreferenced_days: cfg.unreferenced_days,
        dry_run: cfg.dry_run,
    };
    let report = match cfg.data.backend() {
        Backend::Sqlite(_) => {
            let dir = dir.clone();
            with_sqlite(&cfg.data, |store| async move { Ok(gc(&*store, &dir, opts).await?) })?
        }
        Backend::Postgres(url) => {
            let dir = dir.clone();
            with_postgres(&url, |store| async move { Ok(gc(&*store, &dir, opts).await?) })?
        }
    };
    let verb = if cfg.dry_run { "would remove" } else { "removed" };
    let show = |what: &str, items: Vec<String>| {
        println!("{what}: {}", items.len());
        for item in items {
            println!("  {item}");
        }
    };
    let paths = |v: &[PathBuf]| v.iter().map(|p| p.display().to_string()).collect::<Vec<_>>();
    println!("pictures in {} ({})", dir.root().display(), if cfg.dry_run { "dry run" } else { "fixed" });
    show("freed pictures removed", report.freed);
    show(&format!("files with no row ({verb})"), paths(&report.orphan_files));
    show(&format!("temporary files left by a crash ({verb})"), paths(&report.stale_temp));
    show(&format!("rows whose file is missing ({} forget)", if cfg.dry_run { "would" } else { "did" }), report.missing);
    show(&format!("pictures no body shows ({verb})"), report.unreferenced);
    show("other files (left alone)", paths(&report.strays));
    Ok(())
}
