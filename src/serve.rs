//! `pith serve`: open the store, log the effective configuration, bind,
//! and serve until SIGINT or SIGTERM.

use std::time::Duration;

use anyhow::Context;

use crate::app::AppState;
use crate::config::{Backend, ServeConfig};
use crate::net::server::ConnLimits;
use crate::store::Store;
use crate::store::postgres::{PgOptions, PgStore};
use crate::store::sqlite::{SqliteOptions, SqliteStore};

pub fn main(cfg: ServeConfig) -> anyhow::Result<()> {
    crate::memory::limit_malloc_arenas();
    tokio::runtime::Builder::new_multi_thread().enable_all().build()?.block_on(serve(cfg))
}

pub async fn serve(cfg: ServeConfig) -> anyhow::Result<()> {
    let backend = cfg.data.backend();
    tracing::info!("starting pith {}", env!("CARGO_PKG_VERSION"));
    crate::config::log(&cfg.effective);
    // Loaded before anything else so a bad certificate stops start-up.
    let tls = cfg.net.tls_files()?.map(crate::net::tls::Tls::new).transpose()?;
    match backend {
        Backend::Sqlite(path) => {
            let opts = SqliteOptions {
                readers: cfg.store.readers,
                max_batch: cfg.store.max_batch,
                wal_limit_bytes: cfg.store.wal_limit_mb << 20,
                ..SqliteOptions::default()
            };
            let store =
                SqliteStore::open(&path, &opts).with_context(|| format!("cannot open database {}", path.display()))?;
            // Opening read the database through the writer's page cache.
            crate::memory::release_free();
            // Held until the process exits: refuses a second server or a restore.
            // Taken after the open so a bad database is reported as such first.
            let _lock = crate::backup::ServeLock::acquire(&path, "starting another server")?;
            launch(store, &cfg, tls).await?;
        }
        // No lock: several nodes may serve one PostgreSQL database.
        Backend::Postgres(url) => {
            let opts = PgOptions { pool_size: cfg.store.pg_pool_size, ..PgOptions::default() };
            let store = PgStore::connect(&url, &opts)
                .await
                .with_context(|| format!("cannot open database {}", crate::settings::redact_url(&url)))?;
            launch(store, &cfg, tls).await?;
        }
    }
    tracing::info!("stopped cleanly");
    Ok(())
}

/// Binds and serves `store` until SIGINT or SIGTERM.
async fn launch<S: Store>(store: S, cfg: &ServeConfig, tls: Option<crate::net::tls::Tls>) -> anyhow::Result<()> {
    let listener = bind(cfg.listen).with_context(|| format!("cannot listen on {}", cfg.listen))?;
    if let Some(tls) = &tls {
        tls.reload_on_sighup()?;
    }
    let scheme = if tls.is_some() { "https" } else { "http" };
    tracing::info!(addr = %listener.local_addr()?, scheme, "serving");
    let state = AppState::with_config(store, cfg.cache.cache_mb << 20, &cfg.live, &cfg.rate);
    // Over TLS every cookie is Secure, whatever the flag says.
    state.web.set_secure_cookies(cfg.web.secure_cookies || tls.is_some());
    let public_url = match &cfg.web.public_url {
        Some(url) => url.clone(),
        None => crate::app::web_settings::listen_url(scheme, listener.local_addr()?),
    };
    state.web.set_public_url(&public_url, cfg.web.hsts_days);
    state.sessions.set(&cfg.sessions);
    state.media.set(&cfg.media, &cfg.data.data_dir);
    crate::app::federation::start(&state, &cfg.federation);
    crate::app::bus::start(&state, &cfg.cluster, cfg.data.database.as_deref())?;
    let mailer = crate::app::mail::start(&state, &cfg.mail)?;
    let housekeeping = crate::app::housekeeping::start(&state);
    let metrics_listener = crate::api::metrics::start(&cfg.metrics, &state).await?;
    if !state.store.has_admin().await? {
        let link = format!("{}/setup/{}", state.web.public_url(), state.web.setup.issue());
        // A log line, and so on stderr, which keeps `--log-format json`
        // output all JSON.
        tracing::warn!("no administrator yet: create one at this one-time link (works until one exists): {link}");
    }
    let limits = ConnLimits {
        max_connections: cfg.net.max_connections.max(1),
        header_timeout: Duration::from_secs(cfg.net.header_timeout_secs.max(1)),
        max_header_bytes: cfg.net.max_header_kb.max(1) << 10,
        tls,
        ..ConnLimits::default()
    };
    crate::server::run_with_limits(
        listener,
        state,
        Duration::from_secs(cfg.net.request_timeout_secs),
        limits,
        shutdown_signal(),
    )
    .await?;
    if let Some(task) = metrics_listener {
        task.abort();
    }
    housekeeping.abort();
    // Unsent mail stays in the outbox for the next start.
    if let Some(task) = mailer {
        task.abort();
    }
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
