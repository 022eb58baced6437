//! `pith bench`: the load generator that measures Pith against the
//! WORKLOAD.md contract, the hello-world server that sets the ceiling for
//! the box, and a table renderer for scripts (`bench/run.sh`).
//!
//! # Layout
//! - `http`: `pith bench http`, the flags and the run (spawns one task per
//!   connection, merges their results, prints the report).
//! - `conn`: one keep-alive connection's request loop.
//! - `schedule`: when each request is due (open loop) and which ones count.
//! - `pacer`: sending it then, to the tens of microseconds (tokio's timer
//!   counts in milliseconds).
//! - `results`: per-worker results (HDR histogram, status classes, errors,
//!   bytes) and their merge.
//! - `report`: the summary (text and JSON) and the markdown table.
//! - `probe`: finding the highest topic id on a live server.
//! - `procstat`: CPU time and memory of a process, from `/proc`.
//! - `monitor`: what is watched during a run (CPU, peak RSS, progress line).
//! - `plot`: `pith bench plot`, an SVG of throughput and latency per run.
//! - `hello`: `pith bench hello`, the reference server.
//! - `write`: `pith bench write`, the storage engine's durable insert rate.

mod conn;
pub mod hello;
pub mod http;
pub mod monitor;
pub mod pacer;
pub mod plot;
pub mod probe;
pub mod procstat;
pub mod report;
pub mod results;
pub mod schedule;
pub mod write;

use std::time::Duration;

use clap::{Args, Subcommand};

#[derive(Debug, Clone, Args)]
pub struct BenchArgs {
    #[command(subcommand)]
    pub command: BenchCommand,
}

#[derive(Debug, Clone, Subcommand)]
pub enum BenchCommand {
    /// Load a running server with the WORKLOAD.md mix (99 % topic reads, 1 % posts).
    Http(http::HttpArgs),
    /// Serve a fixed small JSON body on the same stack (axum, tokio): the ceiling for this box.
    Hello(hello::HelloArgs),
    /// Render `pith bench http --json` outputs as a markdown table, with ratios against a baseline.
    Table(report::TableArgs),
    /// Draw `pith bench http --json` outputs as an SVG: req/s and read latency per run.
    Plot(plot::PlotArgs),
    /// Open N live subscribers against a running server: connect rate, server memory per socket,
    /// ping round trips and fan-out latency of one post to all of them (docs/LIVE.md).
    Ws(crate::live::loadgen::WsBenchArgs),
    /// N concurrent writers against the storage engine in-process: durable inserts/s and commit latency.
    Write(write::WriteArgs),
}

pub fn main(args: BenchArgs) -> anyhow::Result<()> {
    match args.command {
        BenchCommand::Http(a) => http::main(a),
        BenchCommand::Hello(a) => hello::main(a),
        BenchCommand::Table(a) => report::table_main(a),
        BenchCommand::Plot(a) => plot::main(a),
        BenchCommand::Ws(a) => crate::live::loadgen::main(a),
        BenchCommand::Write(a) => write::main(a),
    }
}

/// Parses `15s`, `500ms`, `2m`, `1h` or a bare number of seconds (`1.5`).
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let split = s.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let value: f64 = num.parse().map_err(|_| format!("`{s}` is not a duration like 15s, 500ms or 2m"))?;
    let secs = match unit.trim() {
        "" | "s" => value,
        "ms" => value / 1000.0,
        "m" | "min" => value * 60.0,
        "h" => value * 3600.0,
        other => return Err(format!("unknown duration unit `{other}` (use ms, s, m or h)")),
    };
    if !(0.0..=86_400.0).contains(&secs) {
        return Err(format!("`{s}` is out of range (0 to 24 h)"));
    }
    Ok(Duration::from_secs_f64(secs))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_accept_the_usual_units() {
        assert_eq!(parse_duration("15s"), Ok(Duration::from_secs(15)));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("1.5"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_duration("0s"), Ok(Duration::ZERO));
    }

    #[test]
    fn a_duration_with_an_unknown_unit_or_no_number_is_rejected() {
        assert!(parse_duration("15 parsecs").is_err());
        assert!(parse_duration("s").is_err());
        assert!(parse_duration("").is_err());
        assert!(parse_duration("999999h").is_err());
    }

    #[test]
    fn bench_subcommands_parse_from_the_command_line() {
        use clap::Parser;
        #[derive(Parser)]
        struct Cli {
            #[command(flatten)]
            bench: BenchArgs,
        }
        let cli = Cli::try_parse_from(["pith", "http", "--connections", "50", "--topics", "300", "--duration", "3s"])
            .expect("http flags parse");
        let BenchCommand::Http(a) = cli.bench.command else { panic!("expected http") };
        assert_eq!(a.connections, 50);
        assert_eq!(a.duration, Duration::from_secs(3));
        assert_eq!(a.topics, http::Topics::Count(300));
        assert!(Cli::try_parse_from(["pith", "hello", "--listen", "127.0.0.1:0"]).is_ok());
    }
}
