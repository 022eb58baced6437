//! `pith bench http`: the WORKLOAD.md mix against a running server. One
//! task per keep-alive connection, each with its own results; merged and
//! reported once every connection has stopped.

use std::str::FromStr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::Args;
use hyper::header::HeaderValue;

use super::conn::{self, Plan, Target};
use super::monitor::{self, Progress};
use super::pacer::Pacer;
use super::probe;
use super::report::{KindSummary, Summary};
use super::results::WorkerResults;
use super::schedule::Window;
use crate::settings::parse_duration;

#[derive(Debug, Clone, Args)]
pub struct HttpArgs {
    /// Base URL of the server (cleartext HTTP/1.1).
    #[arg(long, default_value = "http://127.0.0.1:8080")]
    pub url: String,

    /// Concurrent keep-alive connections.
    #[arg(long, short = 'c', default_value_t = 400)]
    pub connections: usize,

    /// Measured time, after the warm-up (e.g. 15s, 500ms, 2m).
    #[arg(long, short = 'd', default_value = "15s", value_parser = parse_duration)]
    pub duration: Duration,

    /// Time under load before measuring starts.
    #[arg(long, default_value = "5s", value_parser = parse_duration)]
    pub warmup: Duration,

    /// Total requests per second over all connections, each connection on a
    /// fixed timetable; latency then counts from the intended send time (no
    /// coordinated omission). Without it: closed loop at full speed.
    #[arg(long)]
    pub rate: Option<f64>,

    /// Share of requests that are posts (needs --token).
    #[arg(long, default_value_t = 0.01)]
    pub write_ratio: f64,

    /// Reads to posts as `READS:POSTS`, e.g. `99:1` (the WORKLOAD.md mix) or `100:0`;
    /// the same as --write-ratio POSTS/(READS+POSTS).
    #[arg(long, value_parser = parse_mix, conflicts_with = "write_ratio")]
    pub mix: Option<f64>,

    /// API token for posts (`pith user add` prints one); without it, reads only.
    #[arg(long, env = "PITH_BENCH_TOKEN", hide_env_values = true)]
    pub token: Option<String>,

    /// Topic ids are drawn from 1..=N; `auto` finds N by probing the server.
    #[arg(long, default_value = "auto")]
    pub topics: Topics,

    /// Send `Accept-Encoding: gzip` on reads.
    #[arg(long)]
    pub accept_gzip: bool,

    /// Print the summary as JSON (for scripts and `pith bench table`).
    #[arg(long)]
    pub json: bool,

    /// Name of this run in the JSON and the table (e.g. pith, hello).
    #[arg(long)]
    pub label: Option<String>,

    /// Load generator threads (default: one per core).
    #[arg(long, default_value_t = crate::settings::default_readers())]
    pub threads: usize,

    /// Longest wait for one answer before it counts as an error.
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    pub timeout: Duration,

    /// Process id of the server, to report its CPU and memory over the window (Linux).
    #[arg(long)]
    pub server_pid: Option<u32>,

    /// Seed for topic ids and the read/write draw.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
}

/// `--topics`: a count, or `auto`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Topics {
    Auto,
    Count(u64),
}

impl FromStr for Topics {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "auto" => Ok(Topics::Auto),
            n => match n.parse::<u64>() {
                Ok(0) | Err(_) => Err(format!("`{s}` is neither a positive number of topics nor `auto`")),
                Ok(n) => Ok(Topics::Count(n)),
            },
        }
    }
}

/// Open files are capped at 20,000 per process; keep room for the rest.
const MAX_CONNECTIONS: usize = 15_000;

pub fn main(args: HttpArgs) -> anyhow::Result<()> {
    if !(1..=MAX_CONNECTIONS).contains(&args.connections) {
        anyhow::bail!("--connections must be between 1 and {MAX_CONNECTIONS}");
    }
    if !(0.0..=1.0).contains(&args.write_ratio()) {
        anyhow::bail!("--write-ratio must be between 0 and 1");
    }
    if args.rate.is_some_and(|r| !(r.is_finite() && r > 0.0)) {
        anyhow::bail!("--rate must be a positive number of requests per second");
    }
    if args.duration.is_zero() {
        anyhow::bail!("--duration must be more than zero");
    }
    let summary = run(&args)?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&summary)?);
    } else {
        print!("{}", summary.text());
    }
    Ok(())
}

/// Runs the load and returns its summary.
///
/// Each load thread runs its own single-threaded runtime holding every
/// `threads`-th connection, so a connection, its hyper driver and its
/// results never change threads: no work stealing, no cross-thread wakeups
/// in the generator's share of the two cores.
pub fn run(args: &HttpArgs) -> anyhow::Result<Summary> {
    let plan = Arc::new(single_thread()?.block_on(plan(args))?);
    eprintln!(
        "pith bench: {} connections to {} for {:.1} s (+{:.1} s warm-up), topics 1..={}, {:.2} % posts",
        args.connections,
        args.url,
        args.duration.as_secs_f64(),
        args.warmup.as_secs_f64(),
        plan.topics,
        plan.write_ratio * 100.0
    );
    let threads = args.threads.clamp(1, args.connections);
    let start = Instant::now();
    let (all, usage) = std::thread::scope(|s| -> anyhow::Result<_> {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let plan = plan.clone();
                s.spawn(move || load_thread(plan, t, threads, start))
            })
            .collect();
        let usage = monitor::watch(args.server_pid, start, plan.window, &plan.progress);
        let mut all = WorkerResults::default();
        for h in handles {
            let results = h.join().map_err(|_| anyhow::anyhow!("a load thread panicked"))??;
            all.merge(&results);
        }
        Ok((all, usage))
    })?;

    let secs = plan.window.length().as_secs_f64();
    let mut total = all.reads.clone();
    total.merge(&all.writes);
    Ok(Summary {
        label: args.label.clone(),
        url: args.url.clone(),
        connections: args.connections,
        threads,
        warmup_s: args.warmup.as_secs_f64(),
        duration_s: secs,
        rate: args.rate,
        coordinated_omission_corrected: args.rate.is_some(),
        accept_gzip: args.accept_gzip,
        write_ratio: plan.write_ratio,
        topics: plan.topics,
        unfinished: all.unfinished,
        posts_acknowledged: all.posts_acknowledged,
        posts_unanswered: all.posts_unanswered,
        server_cpu_percent: usage.server_cpu,
        server_rss_mb: usage.server_rss_mb,
        server_peak_rss_mb: usage.server_peak_rss_mb,
        server_hwm_mb: usage.server_hwm_mb,
        bench_cpu_percent: usage.bench_cpu,
        machine_cpu_percent: usage.machine_cpu,
        reads: KindSummary::new(&all.reads, secs),
        writes: KindSummary::new(&all.writes, secs),
        total: KindSummary::new(&total, secs),
    })
}

fn single_thread() -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread().enable_all().build()
}

/// Resolves the target, finds the topics, and fixes what every connection shares.
async fn plan(args: &HttpArgs) -> anyhow::Result<Plan> {
    let target = Target::resolve(&args.url).await?;
    let topics = match args.topics {
        Topics::Count(n) => n,
        Topics::Auto => probe::max_topic(&target).await.context("cannot find the number of topics")?,
    };
    let auth = match &args.token {
        Some(t) => Some(HeaderValue::from_str(&format!("Bearer {t}")).context("the token is not a valid header")?),
        None => None,
    };
    Ok(Plan {
        target,
        topics,
        write_ratio: if auth.is_some() { args.write_ratio() } else { 0.0 },
        auth,
        accept_gzip: args.accept_gzip,
        rate: args.rate,
        connections: args.connections,
        window: Window::new(args.warmup, args.duration),
        timeout: args.timeout,
        seed: args.seed,
        progress: Progress::default(),
    })
}

impl HttpArgs {
    /// Share of posts: from `--mix` when given, else `--write-ratio`.
    pub fn write_ratio(&self) -> f64 {
        self.mix.unwrap_or(self.write_ratio)
    }
}

/// `--mix READS:POSTS` as the share of posts.
pub fn parse_mix(s: &str) -> Result<f64, String> {
    let bad = || format!("`{s}` is not a mix like 99:1 (reads:posts)");
    let (reads, posts) = s.split_once(':').ok_or_else(bad)?;
    let reads: f64 = reads.trim().parse().map_err(|_| bad())?;
    let posts: f64 = posts.trim().parse().map_err(|_| bad())?;
    if !(reads.is_finite() && posts.is_finite() && reads >= 0.0 && posts >= 0.0 && reads + posts > 0.0) {
        return Err(bad());
    }
    Ok(posts / (reads + posts))
}

/// Connections `thread`, `thread + threads`, ... on this thread's runtime;
/// returns their merged results.
fn load_thread(plan: Arc<Plan>, thread: usize, threads: usize, start: Instant) -> anyhow::Result<WorkerResults> {
    single_thread()?.block_on(async {
        let pacer = match plan.rate {
            Some(_) => Some(Pacer::start().context("cannot create the open loop's timer")?),
            None => None,
        };
        let tasks: Vec<_> = (thread..plan.connections)
            .step_by(threads)
            .map(|i| tokio::spawn(conn::run(plan.clone(), i, start, pacer.clone())))
            .collect();
        let mut out = WorkerResults::default();
        for t in tasks {
            out.merge(&t.await.context("a connection task failed")?);
        }
        Ok(out)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topics_are_a_positive_count_or_auto() {
        assert_eq!("auto".parse(), Ok(Topics::Auto));
        assert_eq!("4021".parse(), Ok(Topics::Count(4021)));
        assert!("0".parse::<Topics>().is_err());
        assert!("-3".parse::<Topics>().is_err());
        assert!("many".parse::<Topics>().is_err());
    }

    #[test]
    fn a_mix_gives_the_share_of_posts() {
        assert_eq!(parse_mix("99:1"), Ok(0.01));
        assert_eq!(parse_mix("100:0"), Ok(0.0));
        assert_eq!(parse_mix("0:1"), Ok(1.0));
        assert_eq!(parse_mix("3:1"), Ok(0.25));
        for bad in ["99", "0:0", "a:b", "-1:2", "1:inf", ""] {
            assert!(parse_mix(bad).is_err(), "{bad}");
        }
    }
}
