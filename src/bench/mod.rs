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
//! - `markdown`: `pith bench markdown`, the cost of rendering the largest
//!   bodies, ordinary and pathological.
//! - `upload`: `pith bench upload`, picture uploads against a server.
//! - `deliver`: `pith bench deliver`, one topic to many remote followers.
//! - `inbound`: `pith bench inbound`, signed activities taken per second.
//! - `fedsim`: simulated remote ActivityPub servers and the child server
//!   the federation benches drive.
//! - `encode`: `pith bench encode`, gzip, zstd and Brotli at each level on
//!   saved answers: bytes and CPU time.

mod conn;
pub mod deliver;
pub mod encode;
pub mod fedsim;
pub mod hello;
pub mod http;
pub mod inbound;
pub mod markdown;
pub mod monitor;
pub mod pacer;
pub mod plot;
pub mod probe;
pub mod procstat;
pub mod report;
pub mod results;
pub mod schedule;
pub mod upload;
pub mod write;

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
    /// Render ordinary and pathological bodies of the largest allowed size N times each: time per render.
    Markdown(markdown::MarkdownArgs),
    /// Upload a 12 MP JPEG N times, C at once, to a running server: uploads/s, the server's peak
    /// memory, the bytes stored against the bytes sent.
    Upload(upload::UploadArgs),
    /// One local topic delivered to N remote followers over simulated servers on loopback: time
    /// to deliver all, the server's peak memory (docs/FEDERATION.md, "Speed").
    Deliver(deliver::DeliverArgs),
    /// Signed activities from simulated remote servers, verified and applied per second, and the
    /// local reads beside them (docs/FEDERATION.md, "Speed").
    Inbound(inbound::InboundArgs),
    /// Compress saved answers with gzip, zstd and Brotli at each level: bytes, ratio, CPU time.
    Encode(encode::EncodeArgs),
}

pub fn main(args: BenchArgs) -> anyhow::Result<()> {
    match args.command {
        BenchCommand::Http(a) => http::main(a),
        BenchCommand::Hello(a) => hello::main(a),
        BenchCommand::Table(a) => report::table_main(a),
        BenchCommand::Plot(a) => plot::main(a),
        BenchCommand::Ws(a) => crate::live::loadgen::main(a),
        BenchCommand::Write(a) => write::main(a),
        BenchCommand::Markdown(a) => markdown::main(a),
        BenchCommand::Upload(a) => upload::main(a),
        BenchCommand::Encode(a) => encode::main(a),
        BenchCommand::Deliver(a) => deliver::main(a),
        BenchCommand::Inbound(a) => inbound::main(a),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        assert_eq!(a.duration, std::time::Duration::from_secs(3));
        assert_eq!(a.topics, http::Topics::Count(300));
        assert!(Cli::try_parse_from(["pith", "hello", "--listen", "127.0.0.1:0"]).is_ok());
    }
}
