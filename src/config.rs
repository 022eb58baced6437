//! The commands' arguments: one clap struct per subcommand, gathering the
//! settings structs each module owns (`live::LiveConfig`,
//! `app::RateConfig`...). Every setting has a default, a `--flag` and a
//! `PITH_*` variable, so `pith serve` with nothing set starts a working
//! forum. `config_file` assembles the command line (`Cli`) and the file.

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::{Args, ValueEnum};
use serde::Serialize;

use crate::app::{RateConfig, WebConfig};
use crate::cache::CacheConfig;
use crate::live::LiveConfig;
use crate::net::NetConfig;
use crate::store::StoreConfig;

#[derive(Debug, Clone, Args)]
pub struct BackupConfig {
    /// The backup file to write; it must not exist yet.
    pub file: PathBuf,

    #[command(flatten)]
    pub data: DataConfig,

    /// Directory of the stored pictures; default: `media` in the data dir.
    #[arg(long, env = "PITH_MEDIA_DIR")]
    pub media_dir: Option<PathBuf>,
}

#[derive(Debug, Clone, Args)]
pub struct MediaGcConfig {
    #[command(flatten)]
    pub data: DataConfig,

    /// Directory of the stored pictures; default: `media` in the data dir.
    #[arg(long, env = "PITH_MEDIA_DIR")]
    pub media_dir: Option<PathBuf>,

    /// Report what would be done, and change nothing.
    #[arg(long)]
    pub dry_run: bool,

    /// Also remove pictures uploaded at least this many days ago that no
    /// topic or post shows.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=36500))]
    pub unreferenced_days: Option<u64>,

    /// Leave files younger than this alone (an upload may be writing them).
    #[arg(long, default_value_t = 60)]
    pub grace_minutes: u64,
}

#[derive(Debug, Clone, Args)]
pub struct RestoreConfig {
    /// A file written by `pith backup`.
    pub file: PathBuf,

    #[command(flatten)]
    pub data: DataConfig,

    /// Directory of the stored pictures; default: `media` in the data dir.
    #[arg(long, env = "PITH_MEDIA_DIR")]
    pub media_dir: Option<PathBuf>,
}

/// Where the data lives; shared by every subcommand that touches data.
#[derive(Debug, Clone, Args)]
pub struct DataConfig {
    /// Directory holding the SQLite database (created when missing).
    #[arg(long, env = "PITH_DATA_DIR", default_value = "./pith-data")]
    pub data_dir: PathBuf,

    /// Database URL; default: the SQLite file `pith.db` inside the data dir.
    /// Accepts `sqlite:PATH`, a plain path, or a PostgreSQL URL
    /// `postgres://USER:PASSWORD@HOST:PORT/DATABASE` (docs/POSTGRES.md).
    #[arg(long, env = "PITH_DATABASE")]
    pub database: Option<String>,
}

/// Which database a command works on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Backend {
    /// The SQLite file at this path.
    Sqlite(PathBuf),
    /// The PostgreSQL database at this URL.
    Postgres(String),
}

impl DataConfig {
    /// The backend and database this configuration points at.
    pub fn backend(&self) -> Backend {
        match self.database.as_deref() {
            None | Some("") => Backend::Sqlite(self.data_dir.join("pith.db")),
            Some(url) if crate::settings::is_postgres_url(url) => Backend::Postgres(url.to_owned()),
            Some(url) => {
                let path = url.strip_prefix("sqlite://").or_else(|| url.strip_prefix("sqlite:")).unwrap_or(url);
                Backend::Sqlite(PathBuf::from(path))
            }
        }
    }

    /// The SQLite file this configuration points at, for the commands that
    /// work on SQLite files only (backup, restore).
    pub fn sqlite_path(&self) -> anyhow::Result<PathBuf> {
        match self.backend() {
            Backend::Sqlite(path) => Ok(path),
            Backend::Postgres(_) => anyhow::bail!(
                "this command works on SQLite databases only; back up and restore a PostgreSQL database \
                 with pg_dump and pg_restore (see docs/POSTGRES.md)"
            ),
        }
    }
}

#[derive(Debug, Clone, Args)]
pub struct ServeConfig {
    /// Address to listen on. The default serves the home network, as a Pi would.
    #[arg(long, env = "PITH_LISTEN", default_value = "0.0.0.0:8080")]
    pub listen: SocketAddr,

    #[command(flatten)]
    pub data: DataConfig,

    /// The whole process's memory budget in MiB, which the cache, the
    /// readers and the connection limits are sized from unless set
    /// themselves. Default (`auto`): 3/8 of the machine's memory, or of
    /// its cgroup's limit (docs/DEPLOY.md, "Defaults that fit the board").
    #[arg(long, env = "PITH_MEMORY_MB", value_parser = clap::value_parser!(u64).range(16..=1_048_576))]
    pub memory_mb: Option<u64>,

    #[command(flatten)]
    pub store: StoreConfig,

    #[command(flatten)]
    pub cache: CacheConfig,

    #[command(flatten)]
    pub net: NetConfig,

    #[command(flatten)]
    pub live: LiveConfig,

    #[command(flatten)]
    pub rate: RateConfig,

    #[command(flatten)]
    pub metrics: crate::metrics::MetricsConfig,

    #[command(flatten)]
    pub cluster: crate::cluster::ClusterConfig,

    #[command(flatten)]
    pub web: WebConfig,

    #[command(flatten)]
    pub sessions: crate::app::SessionConfig,

    #[command(flatten)]
    pub mail: crate::app::mail::MailConfig,

    #[command(flatten)]
    pub media: crate::app::media::MediaConfig,

    #[command(flatten)]
    pub federation: crate::app::federation::FederationConfig,

    /// TOML file of settings, keyed by the long flag names (`listen =
    /// "0.0.0.0:8080"`, `cache-mb = 128`); flags and environment override
    /// it. Default: `pith.toml` in the data dir, when it exists.
    #[arg(long, env = "PITH_CONFIG")]
    pub config: Option<PathBuf>,

    /// Every setting with its value and source, filled in by
    /// `config_file::parse` (empty when the struct is built in code).
    #[arg(skip)]
    pub effective: Vec<Setting>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Dataset {
    /// ~100k posts, 2-50 posts per topic, bodies of 100-200 chars.
    Realistic,
    /// ~100k posts, 5-1000 posts per topic, bodies of 57-2772 chars.
    Heavy,
    /// 5,000 topics, ~200k posts, Zipf-skewed topic sizes, nested replies and votes.
    Reddit,
}

#[derive(Debug, Clone, Args)]
pub struct SeedConfig {
    #[command(flatten)]
    pub data: DataConfig,

    /// Which data set to generate.
    #[arg(long, env = "PITH_DATASET", value_enum, default_value = "realistic")]
    pub dataset: Dataset,

    /// Random seed; the same seed gives the same data.
    #[arg(long, env = "PITH_SEED", default_value_t = 1)]
    pub seed: u64,

    /// Scale the number of posts (1.0 = the sizes in WORKLOAD.md).
    #[arg(long, default_value_t = 1.0)]
    pub scale: f64,
}

#[derive(Debug, Clone, Args)]
pub struct UserAddConfig {
    /// The new user's name (3-20 of a-z, A-Z, 0-9, _ and -).
    pub name: String,

    /// Make the user a site administrator.
    #[arg(long)]
    pub admin: bool,

    /// Password; without one the account logs in only with the printed token.
    #[arg(long, env = "PITH_USER_PASSWORD")]
    pub password: Option<String>,

    #[command(flatten)]
    pub data: DataConfig,
}

#[derive(Debug, Clone, Args)]
pub struct UserTokenConfig {
    /// The user to issue a new API token to.
    pub name: String,

    #[command(flatten)]
    pub data: DataConfig,
}

#[derive(Debug, Clone, Args)]
pub struct UserResetLinkConfig {
    /// The user who gets a new password through the link.
    pub name: String,

    /// The site's address the link starts with, as `pith serve` has it
    /// (`https://forum.example`); unset: the --listen address.
    #[arg(long, env = "PITH_PUBLIC_URL", value_parser = crate::app::web_settings::parse_public_url)]
    pub public_url: Option<String>,

    /// `pith serve`'s listen address, the link's base without --public-url.
    #[arg(long, env = "PITH_LISTEN", default_value = "0.0.0.0:8080")]
    pub listen: SocketAddr,

    #[command(flatten)]
    pub data: DataConfig,
}

#[derive(Debug, Clone, Args)]
pub struct UserDeleteConfig {
    /// The user whose account to delete.
    pub name: String,

    /// What becomes of their topics and posts: `keep_anonymous` (they stay,
    /// under no name) or `remove` (their text is erased).
    #[arg(long, value_parser = ["keep_anonymous", "remove"])]
    pub content: String,

    #[command(flatten)]
    pub data: DataConfig,
}

#[derive(Debug, Clone, Args)]
pub struct UserInviteConfig {
    /// Days until the code expires; without it, the code never expires.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=366))]
    pub expires_days: Option<u64>,

    #[command(flatten)]
    pub data: DataConfig,
}

/// One effective setting.
#[derive(Debug, Clone, Serialize)]
pub struct Setting {
    /// The long flag name, which is also the config file's key.
    #[serde(skip)]
    pub name: String,
    /// As given (secrets masked); `None` when unset.
    pub value: Option<String>,
    /// `default`, `file`, `env` or `flag`.
    pub source: &'static str,
    /// The file's path, the variable's name, or the flag.
    pub from: Option<String>,
}

impl Setting {
    /// `flag --listen`, `env PITH_LISTEN`, `file /etc/pith.toml`, `default`.
    pub fn source_text(&self) -> String {
        match &self.from {
            Some(from) => format!("{} {from}", self.source),
            None => self.source.to_owned(),
        }
    }
}

/// `pith serve`'s start-up log: one line naming the settings that differ
/// from their defaults, and where each came from (`pith config` lists
/// them all).
pub fn log(settings: &[Setting]) {
    let changed: Vec<String> = settings
        .iter()
        .filter(|s| s.source != "default")
        .map(|s| format!("{}={} ({})", s.name, s.value.as_deref().unwrap_or("(unset)"), s.source_text()))
        .collect();
    if changed.is_empty() {
        tracing::info!("config: every setting at its default (pith config lists them)");
    } else {
        tracing::info!(changed = %changed.join(", "), "config: settings not at their defaults (pith config lists all)");
    }
}

#[cfg(test)]
mod backend_tests {
    use super::*;

    fn data(database: Option<&str>) -> DataConfig {
        DataConfig { data_dir: PathBuf::from("/d"), database: database.map(str::to_owned) }
    }

    #[test]
    fn a_postgres_url_picks_postgres_and_anything_else_sqlite() {
        assert_eq!(data(None).backend(), Backend::Sqlite(PathBuf::from("/d/pith.db")));
        assert_eq!(data(Some("sqlite:/x.db")).backend(), Backend::Sqlite(PathBuf::from("/x.db")));
        let url = "postgresql://u@h/db";
        assert_eq!(data(Some(url)).backend(), Backend::Postgres(url.into()));
        let err = data(Some("postgres://h/db")).sqlite_path().expect_err("not a file");
        assert!(err.to_string().contains("pg_dump"), "{err}");
    }
}
