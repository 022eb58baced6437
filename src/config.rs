//! Command-line and environment configuration: one clap struct per
//! subcommand. Every setting has a default, a `--flag` and a `PITH_*` variable,
//! so `pith serve` with nothing set starts a working forum.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};

#[derive(Debug, Parser)]
#[command(name = "pith", version, about = "A Reddit-style forum that fits on a Raspberry Pi")]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
// Parsed once at start-up: the size of the serve variant costs nothing.
#[allow(clippy::large_enum_variant)]
pub enum Command {
    /// Run the forum server.
    Serve(ServeConfig),
    /// Fill a database with a deterministic benchmark data set.
    Seed(SeedConfig),
    /// Manage user accounts.
    User {
        #[command(subcommand)]
        command: UserCommand,
    },
    /// Load generators and reference servers for benchmarks.
    Bench(crate::bench::BenchArgs),
    /// Copy the database to FILE while the server keeps running (a
    /// consistent, checked snapshot).
    Backup(BackupConfig),
    /// Replace the database with a backup (stop `pith serve` first; the
    /// replaced database is kept beside it).
    Restore(RestoreConfig),
    /// Copy a whole forum between SQLite and PostgreSQL, verified by counts
    /// and checksums (stop the source server first).
    Migrate(crate::migrate::MigrateConfig),
}

#[derive(Debug, Clone, Args)]
pub struct BackupConfig {
    /// The backup file to write; it must not exist yet.
    pub file: PathBuf,

    #[command(flatten)]
    pub data: DataConfig,
}

#[derive(Debug, Clone, Args)]
pub struct RestoreConfig {
    /// A file written by `pith backup`.
    pub file: PathBuf,

    #[command(flatten)]
    pub data: DataConfig,
}

#[derive(Debug, Subcommand)]
pub enum UserCommand {
    /// Create a user; prints a new API token as the last line of stdout.
    Add(UserAddConfig),
    /// Create a one-use invite code for registration by invitation; prints
    /// the code as the last line of stdout.
    Invite(UserInviteConfig),
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
            Some(url) if url.starts_with("postgres://") || url.starts_with("postgresql://") => {
                Backend::Postgres(url.to_owned())
            }
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

/// `url` with its password masked, for logs and messages.
pub fn redact_url(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else { return url.to_owned() };
    let authority_end = rest.find(['/', '?']).unwrap_or(rest.len());
    let Some(at) = rest[..authority_end].rfind('@') else { return url.to_owned() };
    match rest[..at].split_once(':') {
        Some((user, _password)) => format!("{scheme}://{user}:***{}", &rest[at..]),
        None => url.to_owned(),
    }
}

#[derive(Debug, Clone, Args)]
pub struct ServeConfig {
    /// Address to listen on. The default serves the home network, as a Pi would.
    #[arg(long, env = "PITH_LISTEN", default_value = "0.0.0.0:8080")]
    pub listen: SocketAddr,

    #[command(flatten)]
    pub data: DataConfig,

    /// Reader connections for cache misses (about one per core).
    #[arg(long, env = "PITH_READERS", default_value_t = default_readers())]
    pub readers: usize,

    /// Byte budget of the rendered-response cache, in MiB (sized for a 1 GB Pi).
    #[arg(long, env = "PITH_CACHE_MB", default_value_t = 256)]
    pub cache_mb: usize,

    /// Most PostgreSQL connections open at once (with a postgres:// database).
    #[arg(long, env = "PITH_PG_POOL_SIZE", default_value_t = 16)]
    pub pg_pool_size: usize,

    /// Most writes gathered into one transaction by the writer thread.
    #[arg(long, env = "PITH_MAX_BATCH", default_value_t = 512)]
    pub max_batch: usize,

    /// WAL size (MiB) above which the checkpointer forces a truncating checkpoint.
    #[arg(long, env = "PITH_WAL_LIMIT_MB", default_value_t = 64)]
    pub wal_limit_mb: u64,

    /// Seconds a request may take before it is answered 408/503.
    #[arg(long, env = "PITH_REQUEST_TIMEOUT", default_value_t = 30)]
    pub request_timeout_secs: u64,

    /// Seconds a client has to send a request's headers; also how long an
    /// idle keep-alive connection is kept (slowloris defence).
    #[arg(long, env = "PITH_HEADER_TIMEOUT", default_value_t = 10)]
    pub header_timeout_secs: u64,

    /// Largest request head (request line plus headers), in KiB.
    #[arg(long, env = "PITH_MAX_HEADER_KB", default_value_t = 16)]
    pub max_header_kb: usize,

    /// Most HTTP connections open at once; more are answered 503 and closed.
    /// Keep it below the process's open-file limit (`ulimit -n`).
    #[arg(long, env = "PITH_MAX_CONNECTIONS", default_value_t = 10_000)]
    pub max_connections: usize,

    #[command(flatten)]
    pub live: LiveConfig,

    #[command(flatten)]
    pub rate: RateConfig,

    #[command(flatten)]
    pub cluster: crate::cluster::ClusterConfig,

    /// Mark the web session cookies `Secure` (serve over HTTPS, e.g. behind a
    /// TLS proxy). They are also marked when a request carries
    /// `X-Forwarded-Proto: https`.
    #[arg(long, env = "PITH_SECURE_COOKIES", default_value_t = false, action = clap::ArgAction::Set, num_args = 0..=1, default_missing_value = "true")]
    pub secure_cookies: bool,
}

/// Rate limits (docs/SECURITY.md): each is `COUNT/PERIOD`, a burst of COUNT
/// that refills one every PERIOD/COUNT. Over a limit the answer is 429 with
/// `Retry-After`.
#[derive(Debug, Clone, Args)]
pub struct RateConfig {
    /// Enforce the rate limits below ("false" for benchmarks and trusted networks).
    #[arg(long = "rate-limits", env = "PITH_RATE_LIMITS", default_value_t = true, action = clap::ArgAction::Set)]
    pub enabled: bool,

    /// New topics and posts per account.
    #[arg(long = "limit-post-user", env = "PITH_LIMIT_POST_USER", default_value = "10/1m", value_parser = Rate::parse)]
    pub post_user: Rate,

    /// New topics and posts per client address.
    #[arg(long = "limit-post-ip", env = "PITH_LIMIT_POST_IP", default_value = "30/1m", value_parser = Rate::parse)]
    pub post_ip: Rate,

    /// Votes per account.
    #[arg(long = "limit-vote-user", env = "PITH_LIMIT_VOTE_USER", default_value = "60/1m", value_parser = Rate::parse)]
    pub vote_user: Rate,

    /// Votes per client address.
    #[arg(long = "limit-vote-ip", env = "PITH_LIMIT_VOTE_IP", default_value = "180/1m", value_parser = Rate::parse)]
    pub vote_ip: Rate,

    /// Registrations per client address.
    #[arg(long = "limit-register-ip", env = "PITH_LIMIT_REGISTER_IP", default_value = "5/1h", value_parser = Rate::parse)]
    pub register_ip: Rate,

    /// Searches per client address: a search of a common word costs a reader
    /// thread ~100 ms on a large forum, so it is rationed like a write.
    #[arg(long = "limit-search-ip", env = "PITH_LIMIT_SEARCH_IP", default_value = "60/1m", value_parser = Rate::parse)]
    pub search_ip: Rate,

    /// Login attempts per account name (brute-force defence).
    #[arg(long = "limit-login-user", env = "PITH_LIMIT_LOGIN_USER", default_value = "10/15m", value_parser = Rate::parse)]
    pub login_user: Rate,

    /// Login attempts per client address.
    #[arg(long = "limit-login-ip", env = "PITH_LIMIT_LOGIN_IP", default_value = "30/15m", value_parser = Rate::parse)]
    pub login_ip: Rate,

    /// Header that carries the client's address when Pith runs behind a
    /// reverse proxy (`X-Forwarded-For`: its last entry; `X-Real-IP`).
    /// Unset: the socket's peer address. Never set it without a proxy that
    /// overwrites the header, or clients can pick their own address.
    #[arg(long = "real-ip-header", env = "PITH_REAL_IP_HEADER")]
    pub real_ip_header: Option<String>,
}

impl RateConfig {
    /// Every limit off: for tests and benchmarks that must not be throttled.
    pub fn off() -> RateConfig {
        RateConfig { enabled: false, ..RateConfig::default() }
    }
}

impl Default for RateConfig {
    fn default() -> Self {
        let rate = |s: &str| Rate::parse(s).unwrap_or(Rate { count: 1, per: Duration::from_secs(1) });
        RateConfig {
            enabled: true,
            post_user: rate("10/1m"),
            post_ip: rate("30/1m"),
            vote_user: rate("60/1m"),
            vote_ip: rate("180/1m"),
            register_ip: rate("5/1h"),
            search_ip: rate("60/1m"),
            login_user: rate("10/15m"),
            login_ip: rate("30/15m"),
            real_ip_header: None,
        }
    }
}

/// `COUNT/PERIOD`, such as `10/1m`: a burst of COUNT, then one more every
/// PERIOD/COUNT.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rate {
    pub count: u32,
    pub per: Duration,
}

impl Rate {
    pub fn parse(s: &str) -> Result<Rate, String> {
        let bad = |why: &str| format!("{s:?} is not a rate like 10/1m (COUNT/PERIOD): {why}");
        let (count, per) = s.split_once('/').ok_or_else(|| bad("no '/'"))?;
        let count: u32 = count.trim().parse().map_err(|_| bad("the count must be a whole number"))?;
        if !(1..=1_000_000).contains(&count) {
            return Err(bad("the count must be between 1 and 1000000"));
        }
        Ok(Rate { count, per: parse_duration(per).map_err(|e| bad(&e))? })
    }
}

impl std::fmt::Display for Rate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}s", self.count, self.per.as_secs_f64())
    }
}

/// Live updates (docs/LIVE.md): heartbeats and the limits that keep
/// memory bounded whatever clients do.
#[derive(Debug, Clone, Args)]
pub struct LiveConfig {
    /// How often idle live sockets are pinged ("16s", "500ms"); one that has
    /// not answered by the next ping is closed.
    #[arg(long = "live-ping-interval", env = "PITH_LIVE_PING_INTERVAL", default_value = "16s", value_parser = parse_duration)]
    pub ping_interval: Duration,

    /// Most live connections (WebSocket and SSE) at once.
    #[arg(long = "live-max-sockets", env = "PITH_LIVE_MAX_SOCKETS", default_value_t = LiveConfig::MAX_SOCKETS)]
    pub max_sockets: usize,

    /// Most live connections from one IP address (behind a reverse proxy,
    /// every client shares the proxy's address: raise this).
    #[arg(long = "live-max-sockets-per-ip", env = "PITH_LIVE_MAX_SOCKETS_PER_IP", default_value_t = LiveConfig::MAX_SOCKETS_PER_IP)]
    pub max_sockets_per_ip: u32,

    /// Most topic and community subscriptions on one connection.
    #[arg(long = "live-max-subscriptions", env = "PITH_LIVE_MAX_SUBSCRIPTIONS", default_value_t = LiveConfig::MAX_SUBSCRIPTIONS)]
    pub max_subscriptions: usize,

    /// Largest message a client may send, in bytes.
    #[arg(long = "live-max-message-bytes", env = "PITH_LIVE_MAX_MESSAGE_BYTES", default_value_t = LiveConfig::MAX_MESSAGE_BYTES)]
    pub max_message_bytes: usize,

    /// KiB of output a socket may have waiting beyond the kernel's buffer
    /// before it is dropped as too slow (one event always fits).
    #[arg(long = "live-max-pending-kb", env = "PITH_LIVE_MAX_PENDING_KB", default_value_t = LiveConfig::MAX_PENDING_KB)]
    pub max_pending_kb: usize,

    /// KiB of kernel send buffer per live socket (the kernel doubles it;
    /// 0 keeps its autotuning, which lets one slow client take ~4 MiB).
    #[arg(long = "live-send-buffer-kb", env = "PITH_LIVE_SEND_BUFFER_KB", default_value_t = LiveConfig::SEND_BUFFER_KB)]
    pub send_buffer_kb: usize,

    /// MiB of waiting output for all sockets together; past it, sockets
    /// that cannot take an event are dropped as too slow.
    #[arg(long = "live-max-pending-total-mb", env = "PITH_LIVE_MAX_PENDING_TOTAL_MB", default_value_t = LiveConfig::MAX_PENDING_TOTAL_MB)]
    pub max_pending_total_mb: usize,

    /// Events buffered per channel; a subscriber that falls this far behind
    /// is dropped (it must reload what it missed).
    #[arg(long = "live-channel-capacity", env = "PITH_LIVE_CHANNEL_CAPACITY", default_value_t = LiveConfig::CHANNEL_CAPACITY)]
    pub channel_capacity: usize,

    /// Most channels (topics, communities, inboxes with a subscriber) at once.
    #[arg(long = "live-max-channels", env = "PITH_LIVE_MAX_CHANNELS", default_value_t = LiveConfig::MAX_CHANNELS)]
    pub max_channels: usize,
}

impl LiveConfig {
    pub const MAX_SOCKETS: usize = 250_000;
    pub const MAX_SOCKETS_PER_IP: u32 = 256;
    pub const MAX_SUBSCRIPTIONS: usize = 32;
    pub const MAX_MESSAGE_BYTES: usize = 4096;
    pub const MAX_PENDING_KB: usize = 64;
    pub const MAX_PENDING_TOTAL_MB: usize = 64;
    pub const SEND_BUFFER_KB: usize = 64;
    pub const CHANNEL_CAPACITY: usize = 32;
    pub const MAX_CHANNELS: usize = 65_536;
}

impl Default for LiveConfig {
    fn default() -> Self {
        LiveConfig {
            ping_interval: Duration::from_secs(16),
            max_sockets: Self::MAX_SOCKETS,
            max_sockets_per_ip: Self::MAX_SOCKETS_PER_IP,
            max_subscriptions: Self::MAX_SUBSCRIPTIONS,
            max_message_bytes: Self::MAX_MESSAGE_BYTES,
            max_pending_kb: Self::MAX_PENDING_KB,
            max_pending_total_mb: Self::MAX_PENDING_TOTAL_MB,
            send_buffer_kb: Self::SEND_BUFFER_KB,
            channel_capacity: Self::CHANNEL_CAPACITY,
            max_channels: Self::MAX_CHANNELS,
        }
    }
}

/// "16s", "500ms", "2m" or plain seconds.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let (num, unit) = s.find(|c: char| !c.is_ascii_digit() && c != '.').map_or((s, "s"), |i| s.split_at(i));
    let n: f64 = num.parse().map_err(|_| format!("{s:?} is not a duration like 16s or 500ms"))?;
    let secs = match unit.trim() {
        "ms" => n / 1000.0,
        "s" | "" => n,
        "m" => n * 60.0,
        "h" => n * 3600.0,
        _ => return Err(format!("{s:?}: the unit must be ms, s, m or h")),
    };
    if !(0.001..=86_400.0).contains(&secs) {
        return Err(format!("{s:?} is out of range"));
    }
    Ok(Duration::from_secs_f64(secs))
}

pub fn default_readers() -> usize {
    std::thread::available_parallelism().map(|n| n.get()).unwrap_or(2).clamp(1, 16)
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
pub struct UserInviteConfig {
    /// Days until the code expires; without it, the code never expires.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=366))]
    pub expires_days: Option<u64>,

    #[command(flatten)]
    pub data: DataConfig,
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

    #[test]
    fn a_password_never_shows_in_a_redacted_url() {
        assert_eq!(redact_url("postgres://pith:s3cr:et@h:5432/db"), "postgres://pith:***@h:5432/db");
        assert_eq!(redact_url("postgres://pith@h/db"), "postgres://pith@h/db");
        assert_eq!(redact_url("postgres://h/db?user=a"), "postgres://h/db?user=a");
    }
}
