//! `pith serve`'s side of the metrics: logging the settings at start and
//! the separate listener of `--metrics-listen`.

use anyhow::Context;
use tokio::task::JoinHandle;

use super::{MetricsConfig, Mode};
use crate::http::AppState;
use crate::store::Store;

pub fn log_settings(cfg: &MetricsConfig) {
    let listen =
        cfg.metrics_listen.map_or_else(|| "(unset: /metrics on the main listener)".to_owned(), |a| a.to_string());
    tracing::info!(metrics = ?cfg.metrics, metrics_listen = listen, "metrics");
}

/// Records the mode on the state (call before the router is built) and,
/// with `--metrics-listen`, binds and serves `/metrics` there until the
/// returned task is aborted.
pub async fn start<S: Store>(cfg: &MetricsConfig, state: &AppState<S>) -> anyhow::Result<Option<JoinHandle<()>>> {
    let mode = cfg.mode();
    state.metrics.set_mode(mode);
    let Some(addr) = cfg.metrics_listen.filter(|_| mode == Mode::OwnListener) else {
        return Ok(None);
    };
    let listener =
        tokio::net::TcpListener::bind(addr).await.with_context(|| format!("cannot listen for metrics on {addr}"))?;
    tracing::info!(addr = %listener.local_addr()?, "serving /metrics");
    let app = super::router(state.clone());
    Ok(Some(tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, app).await {
            tracing::warn!(error = %e, "the metrics listener stopped");
        }
    })))
}
