//! `pith serve`: open the store, log the effective configuration, bind,
//! and serve until SIGINT or SIGTERM.

use std::time::Duration;

use anyhow::Context;

use crate::config::{Backend, ServeConfig};
use crate::http::{self, AppState};
use crate::store::Store;
use crate::store::postgres::{PgOptions, PgStore};
use crate::store::sqlite::{SqliteOptions, SqliteStore};

pub fn main(cfg: ServeConfig) -> anyhow::Result<()> {
    tokio::runtime::Builder::new_multi_thread().enable_all().build()?.block_on(serve(cfg))
}

pub async fn serve(cfg: ServeConfig) -> anyhow::Result<()> {
    let backend = cfg.data.backend();
    let database = match &backend {
        Backend::Sqlite(path) => path.display().to_string(),
        Backend::Postgres(url) => crate::config::redact_url(url),
    };
    tracing::info!(
        listen = %cfg.listen,
        data_dir = %cfg.data.data_dir.display(),
        database = %database,
        readers = cfg.readers,
        pg_pool_size = cfg.pg_pool_size,
        cache_mb = cfg.cache_mb,
        max_batch = cfg.max_batch,
        wal_limit_mb = cfg.wal_limit_mb,
        request_timeout_secs = cfg.request_timeout_secs,
        header_timeout_secs = cfg.header_timeout_secs,
        max_header_kb = cfg.max_header_kb,
        max_connections = cfg.max_connections,
        secure_cookies = cfg.secure_cookies,
        live_ping_interval = ?cfg.live.ping_interval,
        live_max_sockets = cfg.live.max_sockets,
        live_max_sockets_per_ip = cfg.live.max_sockets_per_ip,
        live_max_subscriptions = cfg.live.max_subscriptions,
        live_max_message_bytes = cfg.live.max_message_bytes,
        live_max_pending_kb = cfg.live.max_pending_kb,
        live_max_pending_total_mb = cfg.live.max_pending_total_mb,
        live_send_buffer_kb = cfg.live.send_buffer_kb,
        live_channel_capacity = cfg.live.channel_capacity,
        live_max_channels = cfg.live.max_channels,
        "starting pith {}",
        env!("CARGO_PKG_VERSION")
    );
    let rate = &cfg.rate;
    tracing::info!(
        rate_limits = rate.enabled,
        limit_post_user = %rate.post_user,
        limit_post_ip = %rate.post_ip,
        limit_vote_user = %rate.vote_user,
        limit_vote_ip = %rate.vote_ip,
        limit_register_ip = %rate.register_ip,
        limit_login_user = %rate.login_user,
        limit_login_ip = %rate.login_ip,
        real_ip_header = rate.real_ip_header.as_deref().unwrap_or("(none: the socket's peer)"),
        "rate limits"
    );
    match backend {
        Backend::Sqlite(path) => {
            let opts = SqliteOptions {
                readers: cfg.readers,
                max_batch: cfg.max_batch,
                wal_limit_bytes: cfg.wal_limit_mb << 20,
                ..SqliteOptions::default()
            };
            let store =
                SqliteStore::open(&path, &opts).with_context(|| format!("cannot open database {}", path.display()))?;
            // Held until the process exits: refuses a second server or a restore.
            // Taken after the open so a bad database is reported as such first.
            let _lock = crate::backup::ServeLock::acquire(&path, "starting another server")?;
            launch(store, &cfg).await?;
        }
        // No lock: several nodes may serve one PostgreSQL database.
        Backend::Postgres(url) => {
            let opts = PgOptions { pool_size: cfg.pg_pool_size, ..PgOptions::default() };
            let store = PgStore::connect(&url, &opts)
                .await
                .with_context(|| format!("cannot open database {}", crate::config::redact_url(&url)))?;
            launch(store, &cfg).await?;
        }
    }
    tracing::info!("stopped cleanly");
    Ok(())
}

/// Binds and serves `store` until SIGINT or SIGTERM.
async fn launch<S: Store>(store: S, cfg: &ServeConfig) -> anyhow::Result<()> {
    let listener = bind(cfg.listen).with_context(|| format!("cannot listen on {}", cfg.listen))?;
    tracing::info!(addr = %listener.local_addr()?, "serving");
    let state = AppState::with_config(store, cfg.cache_mb << 20, &cfg.live, &cfg.rate);
    state.web.set_secure_cookies(cfg.secure_cookies);
    crate::cluster::start(&state, &cfg.cluster, cfg.data.database.as_deref())?;
    let limits = http::server::ConnLimits {
        max_connections: cfg.max_connections.max(1),
        header_timeout: Duration::from_secs(cfg.header_timeout_secs.max(1)),
        max_header_bytes: cfg.max_header_kb.max(1) << 10,
        ..http::server::ConnLimits::default()
    };
    http::run_with_limits(listener, state, Duration::from_secs(cfg.request_timeout_secs), limits, shutdown_signal())
        .await?;
    Ok(())
}

/// Resolves on SIGINT or SIGTERM.
pub async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    tokio::select! { _ = ctrl_c => {}, _ = term => {} }
    tracing::info!("shutting down: finishing requests, committing writes, checkpointing");
}

/// Binds with a deep accept backlog: tokio's default of 128 drops SYNs when
/// thousands of live clients reconnect at once (after a restart, say). The
/// kernel caps it at `net.core.somaxconn`.
fn bind(addr: std::net::SocketAddr) -> std::io::Result<tokio::net::TcpListener> {
    let socket = if addr.is_ipv4() { tokio::net::TcpSocket::new_v4()? } else { tokio::net::TcpSocket::new_v6()? };
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(4096)
}
