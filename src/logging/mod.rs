//! Logging: the global `--log-level` and `--log-format` settings, the
//! subscriber `main` installs for every subcommand, and (in `request_id`)
//! the id that names each request in every line it logs.

pub mod request_id;

use clap::{Args, ValueEnum};
use tracing_subscriber::EnvFilter;

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    /// One readable line per event.
    Human,
    /// One JSON object per line, for log collectors.
    Json,
}

#[derive(Debug, Clone, Args)]
pub struct LogConfig {
    /// Least severe events logged: error, warn, info, debug or trace. A
    /// PITH_LOG filter (such as `pith=debug,hyper=warn`) takes precedence.
    #[arg(long, env = "PITH_LOG_LEVEL", default_value = "info", global = true, value_parser = parse_level)]
    pub log_level: tracing::Level,

    /// How log lines are written to stderr.
    #[arg(long, env = "PITH_LOG_FORMAT", value_enum, default_value = "human", global = true)]
    pub log_format: LogFormat,
}

fn parse_level(s: &str) -> Result<tracing::Level, String> {
    s.parse().map_err(|_| format!("{s:?} is not a log level (error, warn, info, debug or trace)"))
}

impl LogConfig {
    /// The filter: PITH_LOG when it is set, not empty and valid, else the level.
    pub fn filter(&self) -> EnvFilter {
        std::env::var("PITH_LOG")
            .ok()
            .filter(|f| !f.trim().is_empty())
            .and_then(|f| EnvFilter::try_new(f).ok())
            .unwrap_or_else(|| EnvFilter::new(self.log_level.as_str()))
    }
}

/// For `pith serve`'s start-up lines.
pub fn log_settings(cfg: &LogConfig) {
    let pith_log = std::env::var("PITH_LOG").unwrap_or_default();
    tracing::info!(log_level = %cfg.log_level, log_format = ?cfg.log_format, pith_log, "logging");
}

/// Installs the global subscriber, writing to stderr.
pub fn init(cfg: &LogConfig) {
    use std::io::IsTerminal;
    // Colour codes only for a terminal, not for log files and collectors.
    let builder = tracing_subscriber::fmt()
        .with_env_filter(cfg.filter())
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal());
    match cfg.log_format {
        LogFormat::Human => builder.init(),
        // The current span's fields (the request id) sit at the top level
        // of each line; the list of all spans would repeat them.
        LogFormat::Json => builder.json().with_current_span(true).with_span_list(false).init(),
    }
}
