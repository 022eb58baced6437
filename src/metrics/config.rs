//! The `/metrics` settings of `pith serve` (flattened into `ServeConfig`).

use std::net::SocketAddr;

use clap::{Args, ValueEnum};

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Switch {
    On,
    Off,
}

#[derive(Debug, Clone, Args)]
pub struct MetricsConfig {
    /// Serve Prometheus metrics at `/metrics` (docs/METRICS.md); "off" also
    /// leaves out the request middleware that records them.
    #[arg(long = "metrics", env = "PITH_METRICS", value_enum, default_value = "on")]
    pub metrics: Switch,

    /// Serve `/metrics` on its own listener at this address instead of the
    /// main one (keep it off the public network). Unset: on the main listener.
    #[arg(long = "metrics-listen", env = "PITH_METRICS_LISTEN")]
    pub metrics_listen: Option<SocketAddr>,

    /// Who may read `/metrics` on the main listener: `local` (a client on
    /// this machine, not forwarded by a proxy) or `any`. A forum on a home
    /// network should not tell every visitor its routes, database size
    /// and memory. `--metrics-listen` serves whoever reaches its address.
    #[arg(long = "metrics-access", env = "PITH_METRICS_ACCESS", value_enum, default_value = "local")]
    pub metrics_access: Access,
}

/// Who may read `/metrics` on the main listener.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Access {
    Local,
    Any,
}

impl Default for MetricsConfig {
    fn default() -> Self {
        MetricsConfig { metrics: Switch::On, metrics_listen: None, metrics_access: Access::Local }
    }
}

impl MetricsConfig {
    /// Where `/metrics` is served, as the router needs to know.
    pub fn mode(&self) -> super::Mode {
        match (self.metrics, self.metrics_listen) {
            (Switch::Off, _) => super::Mode::Off,
            (Switch::On, None) => super::Mode::MainListener,
            (Switch::On, Some(_)) => super::Mode::OwnListener,
        }
    }
}
