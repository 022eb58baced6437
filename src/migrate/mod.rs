//! `pith migrate --from DIR_OR_URL --to URL`: copies a whole forum between
//! SQLite and PostgreSQL (either way), keeping every id, then proves the
//! copy: per table, the row count and an order-independent checksum of the
//! canonicalised rows, read back from the target, must equal the source's.
//!
//! Run it with the source server stopped (or on a backup): rows written
//! during the copy would be missed, and the checksums would disagree. A
//! SQLite source or target is locked against `pith serve` for the run.
//!
//! - `rows`: the table list, the neutral value type, the checksum.
//! - `sqlite`, `postgres`: each side's reading and writing.
//! - `copy`: the two directions.

mod copy;
mod postgres;
pub mod rows;
mod sqlite;

use std::path::PathBuf;

use clap::Args;

use rows::Tally;

#[derive(Debug, Clone, Args)]
pub struct MigrateConfig {
    /// The source: a data directory, a SQLite file (`sqlite:PATH`), or a
    /// `postgres://` URL.
    #[arg(long, env = "PITH_MIGRATE_FROM")]
    pub from: String,

    /// The target, which must hold no forum data yet: a data directory or
    /// SQLite file (created), or a `postgres://` URL of an existing database.
    #[arg(long, env = "PITH_MIGRATE_TO")]
    pub to: String,
}

/// One end of a migration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum End {
    Sqlite(PathBuf),
    Postgres(String),
}

impl End {
    /// A URL, `sqlite:PATH`, a `.db` file, or a directory (its `pith.db`).
    pub fn parse(s: &str) -> End {
        if crate::settings::is_postgres_url(s) {
            return End::Postgres(s.to_owned());
        }
        let path = PathBuf::from(s.strip_prefix("sqlite://").or_else(|| s.strip_prefix("sqlite:")).unwrap_or(s));
        let is_file = path.is_file() || path.extension().is_some_and(|e| e == "db" || e == "sqlite");
        End::Sqlite(if is_file { path } else { path.join("pith.db") })
    }

    fn describe(&self) -> String {
        match self {
            End::Sqlite(p) => format!("SQLite {}", p.display()),
            End::Postgres(url) => format!("PostgreSQL {}", crate::settings::redact_url(url)),
        }
    }
}

pub fn main(cfg: MigrateConfig) -> anyhow::Result<()> {
    let (from, to) = (End::parse(&cfg.from), End::parse(&cfg.to));
    tokio::runtime::Builder::new_multi_thread().enable_all().build()?.block_on(run(&from, &to))
}

/// Copies, verifies and prints the table of counts and checksums; an error
/// when anything differs.
pub async fn run(from: &End, to: &End) -> anyhow::Result<()> {
    println!("pith migrate: {} -> {}", from.describe(), to.describe());
    let (source, target) = match (from, to) {
        (End::Sqlite(src), End::Postgres(url)) => copy::sqlite_to_postgres(src, url).await?,
        (End::Postgres(url), End::Sqlite(dst)) => copy::postgres_to_sqlite(url, dst).await?,
        _ => anyhow::bail!(
            "pith migrate copies between SQLite and PostgreSQL; to copy SQLite to SQLite use pith backup, \
             and PostgreSQL to PostgreSQL pg_dump"
        ),
    };
    report(&source, &target)
}

fn report(source: &[(&str, Tally)], target: &[(&str, Tally)]) -> anyhow::Result<()> {
    println!("{:<12} {:>10} {:>10}  {:<32}  {:<32}", "table", "source", "target", "source checksum", "target checksum");
    let mut bad = Vec::new();
    for ((table, s), (_, t)) in source.iter().zip(target) {
        let mark = if s == t { "" } else { "  MISMATCH" };
        println!("{table:<12} {:>10} {:>10}  {}  {}{mark}", s.rows, t.rows, s.hex(), t.hex());
        if s != t {
            bad.push(*table);
        }
    }
    anyhow::ensure!(
        bad.is_empty(),
        "the copy differs from the source in {}: do not use the target (was the source server running?)",
        bad.join(", ")
    );
    println!("verified: every table has the same row count and checksum on both sides");
    Ok(())
}
