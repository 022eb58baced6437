//! Connecting to PostgreSQL: the connection pool, versioned migrations,
//! transactions, and mapping PostgreSQL errors to `StoreError`.

use std::time::Duration;

use deadpool_postgres::{GenericClient, Manager, ManagerConfig, Object, Pool, RecyclingMethod, Runtime, Transaction};
use tokio_postgres::error::SqlState;
use tokio_postgres::types::ToSql;
use tokio_postgres::{IsolationLevel, NoTls, Row};

use crate::store::{StoreError, StoreResult};

/// Versioned migrations, applied in order; the `pith_migrations` table
/// records each one applied, so a rerun applies nothing twice.
const MIGRATIONS: &[(i64, &str)] = &[
    (1, include_str!("../../../migrations/postgres/0001_core.sql")),
    (2, include_str!("../../../migrations/postgres/0002_moderation.sql")),
    (3, include_str!("../../../migrations/postgres/0003_rendered_and_search.sql")),
    (4, include_str!("../../../migrations/postgres/0004_sessions_and_lookalikes.sql")),
    (5, include_str!("../../../migrations/postgres/0005_saves_and_blocks.sql")),
    (6, include_str!("../../../migrations/postgres/0006_inbox.sql")),
    (7, include_str!("../../../migrations/postgres/0007_messages_and_user_blocks.sql")),
    (8, include_str!("../../../migrations/postgres/0008_email.sql")),
    (9, include_str!("../../../migrations/postgres/0009_two_factor_and_deletion.sql")),
    (10, include_str!("../../../migrations/postgres/0010_media.sql")),
    (11, include_str!("../../../migrations/postgres/0011_federation.sql")),
    (12, include_str!("../../../migrations/postgres/0012_federation_instances.sql")),
    (13, include_str!("../../../migrations/postgres/0013_federation_content.sql")),
    (14, include_str!("../../../migrations/postgres/0014_federation_following.sql")),
    (15, include_str!("../../../migrations/postgres/0015_community_topic_count.sql")),
    (16, include_str!("../../../migrations/postgres/0016_topic_counts.sql")),
];

/// Any number: every node takes this advisory lock to migrate, so nodes
/// starting together migrate one after another, not twice at once.
const MIGRATION_LOCK: i64 = 0x7069_7468; // "pith"

/// SQL parameters as tokio-postgres takes them.
pub type Params<'a> = &'a [&'a (dyn ToSql + Sync)];

/// A pool of `size` connections to `url` (a `postgres://` URL or a
/// libpq key=value string). Connections are made lazily; `check` proves
/// the server answers.
pub fn pool(url: &str, size: usize, wait: Duration) -> StoreResult<Pool> {
    let config: tokio_postgres::Config =
        url.parse().map_err(|e| StoreError::Unavailable(format!("invalid PostgreSQL URL: {e}")))?;
    // Fast recycling: a connection that failed is closed and replaced; the
    // statement cache of a healthy one stays warm.
    let manager = Manager::from_config(config, NoTls, ManagerConfig { recycling_method: RecyclingMethod::Fast });
    Pool::builder(manager)
        .max_size(size.max(1))
        .runtime(Runtime::Tokio1)
        .wait_timeout(Some(wait))
        .create_timeout(Some(wait))
        .recycle_timeout(Some(wait))
        .build()
        .map_err(|e| StoreError::Internal(format!("cannot build the PostgreSQL pool: {e}")))
}

/// A connection from the pool; `Unavailable` when none can be had.
pub async fn get(pool: &Pool) -> StoreResult<Object> {
    pool.get().await.map_err(|e| match e {
        deadpool_postgres::PoolError::Backend(e) => map_err(e),
        e => StoreError::Unavailable(format!("no PostgreSQL connection: {e}")),
    })
}

/// Applies the migrations not applied yet, each in its own transaction,
/// under an advisory lock held for the whole run.
pub async fn migrate(pool: &Pool) -> StoreResult<()> {
    let mut client = get(pool).await?;
    client
        .batch_execute(
            "CREATE TABLE IF NOT EXISTS pith_migrations (version BIGINT PRIMARY KEY, applied_at BIGINT NOT NULL)",
        )
        .await
        .map_err(map_err)?;
    for (version, sql) in MIGRATIONS {
        let tx = client.transaction().await.map_err(map_err)?;
        tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK]).await.map_err(map_err)?;
        let done = tx
            .query_opt("SELECT 1 FROM pith_migrations WHERE version = $1", &[version])
            .await
            .map_err(map_err)?
            .is_some();
        if done {
            tx.rollback().await.map_err(map_err)?;
            continue;
        }
        tx.batch_execute(sql).await.map_err(map_err)?;
        tx.execute(
            "INSERT INTO pith_migrations (version, applied_at) VALUES ($1, extract(epoch FROM now())::bigint)",
            &[version],
        )
        .await
        .map_err(map_err)?;
        tx.commit().await.map_err(map_err)?;
        tracing::info!(migration = version, "applied PostgreSQL schema migration");
    }
    // SQL cannot compute a name's look-alike keys: rows without them get
    // them here, after the migration that adds them and after `pith seed`.
    super::accounts::fill_name_keys(&client).await?;
    Ok(())
}

/// A read-write transaction (READ COMMITTED, with row locks where a write
/// reads what it changes).
pub async fn begin(client: &mut Object) -> StoreResult<Transaction<'_>> {
    client.transaction().await.map_err(map_err)
}

/// A read-only transaction over one snapshot, so a read of several
/// queries (a topic and its posts) sees one state, as on SQLite.
pub async fn snapshot(client: &mut Object) -> StoreResult<Transaction<'_>> {
    client
        .build_transaction()
        .isolation_level(IsolationLevel::RepeatableRead)
        .read_only(true)
        .start()
        .await
        .map_err(map_err)
}

/// Commits on success (PostgreSQL's COMMIT is durable: synchronous_commit
/// defaults to on), rolls back on failure.
pub async fn finish<R>(tx: Transaction<'_>, result: StoreResult<R>) -> StoreResult<R> {
    match result {
        Ok(v) => {
            tx.commit().await.map_err(map_err)?;
            Ok(v)
        }
        Err(e) => {
            let _ = tx.rollback().await;
            Err(e)
        }
    }
}

pub async fn opt(c: &impl GenericClient, sql: &str, params: Params<'_>) -> StoreResult<Option<Row>> {
    let st = c.prepare_cached(sql).await.map_err(map_err)?;
    c.query_opt(&st, params).await.map_err(map_err)
}

pub async fn one(c: &impl GenericClient, sql: &str, params: Params<'_>) -> StoreResult<Row> {
    let st = c.prepare_cached(sql).await.map_err(map_err)?;
    c.query_one(&st, params).await.map_err(map_err)
}

pub async fn all(c: &impl GenericClient, sql: &str, params: Params<'_>) -> StoreResult<Vec<Row>> {
    let st = c.prepare_cached(sql).await.map_err(map_err)?;
    c.query(&st, params).await.map_err(map_err)
}

/// Runs a statement; how many rows it changed.
pub async fn exec(c: &impl GenericClient, sql: &str, params: Params<'_>) -> StoreResult<u64> {
    exec_raw(c, sql, params).await.map_err(map_err)
}

/// `exec` keeping PostgreSQL's error, for callers that look at it.
pub async fn exec_raw(c: &impl GenericClient, sql: &str, params: Params<'_>) -> Result<u64, tokio_postgres::Error> {
    let st = c.prepare_cached(sql).await?;
    c.execute(&st, params).await
}

/// Classifies a PostgreSQL failure: the server unreachable, shutting down,
/// out of disk or connections, or read-only is `Unavailable` (answered
/// 503); a unique violation is `Conflict`; anything else `Internal`.
pub fn map_err(e: tokio_postgres::Error) -> StoreError {
    let Some(code) = e.code() else {
        // No SQLSTATE: the connection failed (refused, closed, I/O, timed
        // out), or a value did not convert (a bug).
        return if connection_failed(&e) {
            StoreError::Unavailable(format!("PostgreSQL connection failed: {e}"))
        } else {
            StoreError::Internal(format!("PostgreSQL: {e}"))
        };
    };
    if *code == SqlState::UNIQUE_VIOLATION {
        return StoreError::Conflict("that is already taken".into());
    }
    let class = &code.code()[..2];
    // 08 connection exception, 53 insufficient resources (disk full, too
    // many connections), 57 operator intervention (shutdown), 40
    // serialization failure or deadlock (worth retrying), 25006 read-only.
    if matches!(class, "08" | "53" | "57" | "40") || *code == SqlState::READ_ONLY_SQL_TRANSACTION {
        return StoreError::Unavailable(format!("PostgreSQL: {}", db_message(&e)));
    }
    StoreError::Internal(format!("PostgreSQL: {}", db_message(&e)))
}

fn connection_failed(e: &tokio_postgres::Error) -> bool {
    use std::error::Error as _;
    let io = e.source().is_some_and(|s| s.is::<std::io::Error>());
    // tokio-postgres tells its error kinds only through their messages.
    let text = e.to_string();
    e.is_closed() || io || ["error connecting", "error communicating", "timeout"].iter().any(|k| text.starts_with(k))
}

fn db_message(e: &tokio_postgres::Error) -> String {
    e.as_db_error().map_or_else(|| e.to_string(), |d| format!("{} ({})", d.message(), d.code().code()))
}

/// True when `e` is a unique violation.
pub fn is_unique_violation(e: &tokio_postgres::Error) -> bool {
    e.code() == Some(&SqlState::UNIQUE_VIOLATION)
}

/// A row's column, as a `StoreError` when it has another type (a bug).
pub fn col<'a, T: tokio_postgres::types::FromSql<'a>>(r: &'a Row, i: usize) -> StoreResult<T> {
    r.try_get(i).map_err(|e| StoreError::Internal(format!("PostgreSQL row: {e}")))
}
