//! `pith serve`'s side of the metrics: the separate listener of
//! `--metrics-listen` (the settings are logged with all the others).

use anyhow::Context;
use tokio::task::JoinHandle;

use super::{MetricsConfig, Mode};
use crate::http::AppState;
use crate::store::Store;

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
