//! Opening SQLite connections with Pith's settings, mapping SQLite errors to
//! `StoreError`, and applying migrations.

use std::path::Path;

use rusqlite::{Connection, ErrorCode, OpenFlags};

use crate::store::StoreError;

/// Versioned migrations, applied in order; `PRAGMA user_version` records how
/// many have run.
const MIGRATIONS: &[&str] = &[
    include_str!("../../../migrations/sqlite/0001_core.sql"),
    include_str!("../../../migrations/sqlite/0002_moderation.sql"),
    include_str!("../../../migrations/sqlite/0003_rendered_and_search.sql"),
    include_str!("../../../migrations/sqlite/0004_search_queue.sql"),
    include_str!("../../../migrations/sqlite/0005_sessions_and_lookalikes.sql"),
    include_str!("../../../migrations/sqlite/0006_saves_and_blocks.sql"),
    include_str!("../../../migrations/sqlite/0007_inbox.sql"),
    include_str!("../../../migrations/sqlite/0008_messages_and_user_blocks.sql"),
    include_str!("../../../migrations/sqlite/0009_email.sql"),
    include_str!("../../../migrations/sqlite/0010_two_factor_and_deletion.sql"),
    include_str!("../../../migrations/sqlite/0011_media.sql"),
    include_str!("../../../migrations/sqlite/0012_federation.sql"),
    include_str!("../../../migrations/sqlite/0013_federation_instances.sql"),
    include_str!("../../../migrations/sqlite/0014_federation_content.sql"),
    include_str!("../../../migrations/sqlite/0015_federation_following.sql"),
    include_str!("../../../migrations/sqlite/0016_community_topic_count.sql"),
    include_str!("../../../migrations/sqlite/0017_post_writes_without_temporary_tables.sql"),
    include_str!("../../../migrations/sqlite/0018_inbox_unread_count.sql"),
    include_str!("../../../migrations/sqlite/0019_topic_counts.sql"),
];

/// Prepared statements each connection keeps (`prepare_cached`): more
/// than the store has call sites, so none is evicted and parsed again.
const STATEMENT_CACHE: usize = 256;

/// Which job a connection does; each gets different pragmas.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Writer,
    Reader,
    Checkpointer,
}

/// Opens a connection to `path`. A failure is explained in terms of the
/// file (read-only, not a database, corrupted...), since it is reported at
/// start-up to whoever runs `pith`.
pub fn open(path: &Path, role: Role) -> Result<Connection, StoreError> {
    let flags = match role {
        Role::Writer => OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_CREATE,
        _ => OpenFlags::SQLITE_OPEN_READ_WRITE,
    } | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let fail = |e| open_failure(path, e);
    let conn = Connection::open_with_flags(path, flags).map_err(fail)?;
    // rusqlite keeps 16 prepared statements by default; the store's hot
    // paths use more than that (an inbound vote alone: the signer's actor,
    // its user, the topic, the community, the vote), and a statement
    // pushed out is parsed and planned again on its next use
    // (`prepare_with_flags` was 6 % of the server's CPU under inbound
    // activities, docs/BENCHMARKS.md). A statement never run on this
    // connection is never prepared: this bounds the cache, it allocates
    // nothing.
    conn.set_prepared_statement_cache_capacity(STATEMENT_CACHE);
    // synchronous=FULL: in WAL mode every COMMIT fsyncs the WAL, so an
    // acknowledged write survives power loss, not just a process crash.
    // Group commit pays that fsync once per batch (docs/STORAGE.md).
    conn.execute_batch(
        "PRAGMA journal_mode = WAL;
         PRAGMA synchronous = FULL;
         PRAGMA foreign_keys = ON;
         PRAGMA busy_timeout = 5000;
         PRAGMA temp_store = MEMORY;",
    )
    .map_err(fail)?;
    // The query planner stability guarantee: a statement keeps the plan it
    // was prepared with. Without it SQLite 3.54 marks statements whose
    // plan could depend on a bound value (`topic_id = ?`, the ban check's
    // `IS NULL OR = ?`) to be parsed and planned again whenever that value
    // changes, which is every render and every post: measured, a third of
    // the readers' and a fifth of the writer's CPU went to re-parsing.
    conn.set_db_config(rusqlite::config::DbConfig::SQLITE_DBCONFIG_ENABLE_QPSG, true).map_err(fail)?;
    match role {
        // Checkpoints belong to the checkpointer thread, never to a commit.
        // A 2 MB page cache, as the readers': posts land in topics drawn
        // uniformly, so a 16 MB cache filled up (18 MB of SQLite's heap
        // under the realistic benchmark) without making a post cheaper;
        // the kernel's page cache serves the pages it no longer keeps
        // (docs/PERFORMANCE.md, "Memory").
        Role::Writer => conn.execute_batch(
            "PRAGMA wal_autocheckpoint = 0; PRAGMA journal_size_limit = 67108864; PRAGMA cache_size = -2000;",
        ),
        // Readers run only on cache misses, so their pages are cold: a
        // small page cache each, and no mmap (mapped database pages count
        // in the server's RSS; through read() they stay in the kernel's
        // page cache, which serves them as fast on a miss).
        Role::Reader => conn.execute_batch("PRAGMA query_only = 1; PRAGMA cache_size = -2000; PRAGMA mmap_size = 0;"),
        Role::Checkpointer => conn.execute_batch("PRAGMA wal_autocheckpoint = 0;"),
    }
    .map_err(fail)?;
    Ok(conn)
}

/// Turns a failure to open (or first read) `path` into a message that says
/// what is wrong with the file. SQLite's own words are often too vague for
/// that: a database on a read-only mount fails with "unable to open
/// database file", because SQLite cannot create `pith.db-shm` beside it.
pub fn open_failure(path: &Path, e: rusqlite::Error) -> StoreError {
    match e.sqlite_error_code() {
        Some(ErrorCode::NotADatabase) => StoreError::Internal(format!(
            "the file is not a SQLite database, or its header is damaged ({e}); restore it from a backup or move it aside"
        )),
        Some(ErrorCode::DatabaseCorrupt) => corrupted(&e),
        Some(ErrorCode::CannotOpen | ErrorCode::ReadOnly | ErrorCode::PermissionDenied) => match not_writable(path) {
            Some(why) => StoreError::Unavailable(why),
            None => map_err(e),
        },
        _ => map_err(e),
    }
}

/// The message for a database whose pages are damaged.
pub fn corrupted(e: &rusqlite::Error) -> StoreError {
    StoreError::Internal(format!("the database is corrupted ({e}); restore it from a backup"))
}

/// Why Pith cannot write `path`, if the file system says so: the file is a
/// directory, the file is read-only (read-only mount, immutable file,
/// permissions), or its directory is (SQLite must create `-wal` and `-shm`
/// files beside the database, and the database itself when it is missing).
pub fn not_writable(path: &Path) -> Option<String> {
    if path.is_dir() {
        return Some("it is a directory, not a database file".into());
    }
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let exists = path.exists();
    if exists && let Err(e) = writable(path) {
        return Some(format!("the database file is read-only ({e})"));
    }
    match writable(dir) {
        Err(e) if exists => Some(format!(
            "its directory {} is read-only ({e}); SQLite must create the -wal and -shm files beside the database",
            dir.display()
        )),
        Err(e) => Some(format!("cannot create it: its directory {} is read-only ({e})", dir.display())),
        Ok(()) => None,
    }
}

/// `access(path, W_OK)`: unlike the permission bits, this also reports a
/// read-only mount (EROFS) or an immutable file (EPERM) to root.
fn writable(path: &Path) -> std::io::Result<()> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(path.as_os_str().as_bytes())?;
    // SAFETY: `c` is a valid NUL-terminated string that outlives the call.
    if unsafe { libc::access(c.as_ptr(), libc::W_OK) } == 0 { Ok(()) } else { Err(std::io::Error::last_os_error()) }
}

/// Brings the schema up to date, then renders any body stored without its
/// HTML (see `backfill`) and computes any user name's missing look-alike
/// keys (`accounts::fill_name_keys`); run on the writer connection before
/// serving.
pub fn migrate(conn: &mut Connection) -> Result<(), StoreError> {
    migrate_schema(conn)?;
    let tx = conn.transaction().map_err(map_err)?;
    super::search_queue::index_unindexed_posts(&tx)?;
    tx.commit().map_err(map_err)?;
    super::backfill::render_missing(conn)?;
    super::accounts::fill_name_keys(conn).map(drop)
}

/// Applies the SQL migrations not yet applied.
fn migrate_schema(conn: &mut Connection) -> Result<(), StoreError> {
    let version: usize = conn.query_row("PRAGMA user_version", [], |r| r.get::<_, i64>(0)).map_err(map_err)? as usize;
    if version > MIGRATIONS.len() {
        return Err(StoreError::Internal(format!(
            "database schema version {version} is newer than this build ({}); upgrade pith",
            MIGRATIONS.len()
        )));
    }
    for (i, sql) in MIGRATIONS.iter().enumerate().skip(version) {
        let tx = conn.transaction().map_err(map_err)?;
        tx.execute_batch(sql).map_err(map_err)?;
        tx.execute_batch(&format!("PRAGMA user_version = {}", i + 1)).map_err(map_err)?;
        tx.commit().map_err(map_err)?;
        tracing::info!(migration = i + 1, "applied schema migration");
    }
    Ok(())
}

/// Runs one statement without parameters through the connection's
/// statement cache; how many rows it changed. For statements run on every
/// write or batch (the writer's SAVEPOINT, RELEASE, BEGIN and COMMIT, the
/// search queue's), which `execute_batch` would parse again each time.
pub fn run_cached(conn: &Connection, sql: &str) -> Result<usize, StoreError> {
    conn.prepare_cached(sql).and_then(|mut s| s.execute([])).map_err(map_err)
}

/// Classifies a SQLite failure: a full disk or read-only file is
/// `Unavailable` (answered 503), anything else `Internal`.
pub fn map_err(e: rusqlite::Error) -> StoreError {
    if let rusqlite::Error::SqliteFailure(f, _) = &e {
        match f.code {
            ErrorCode::DiskFull | ErrorCode::ReadOnly | ErrorCode::CannotOpen | ErrorCode::DatabaseBusy => {
                return StoreError::Unavailable(e.to_string());
            }
            _ => {}
        }
    }
    StoreError::Internal(e.to_string())
}

/// True when `e` is a UNIQUE constraint violation.
pub fn is_unique_violation(e: &rusqlite::Error) -> bool {
    matches!(e, rusqlite::Error::SqliteFailure(f, _)
        if f.code == ErrorCode::ConstraintViolation
            && f.extended_code == rusqlite::ffi::SQLITE_CONSTRAINT_UNIQUE)
}
