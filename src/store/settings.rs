//! The storage settings of `pith serve`: reader connections, the writer's
//! batches and the WAL's bound (SQLite), the pool (PostgreSQL).

use clap::Args;

use crate::settings::default_readers;

#[derive(Debug, Clone, Args)]
pub struct StoreConfig {
    /// Reader connections for cache misses. Default (`auto`): one per core,
    /// at most one per 32 MiB of --memory-mb.
    #[arg(long, env = "PITH_READERS", default_value_t = default_readers())]
    pub readers: usize,

    /// Most PostgreSQL connections open at once (with a postgres:// database).
    #[arg(long, env = "PITH_PG_POOL_SIZE", default_value_t = 16)]
    pub pg_pool_size: usize,

    /// Most writes gathered into one transaction by the writer thread.
    #[arg(long, env = "PITH_MAX_BATCH", default_value_t = 512)]
    pub max_batch: usize,

    /// WAL size (MiB) above which the checkpointer forces a truncating checkpoint.
    #[arg(long, env = "PITH_WAL_LIMIT_MB", default_value_t = 64)]
    pub wal_limit_mb: u64,
}
