//! `pith bench ws`: holds N idle WebSocket subscribers on one topic and
//! measures what docs/LIVE.md reports: connect rate, server memory per
//! socket (VmRSS of `--server-pid` before and after), ping round trips with
//! everyone connected, and how long one post takes to reach all N.
//!
//! The subscribers are spread over source addresses 127.0.0.2-127.0.0.9
//! (each has its own ephemeral ports) and over child processes, each
//! holding at most `--per-process` sockets (a process may only open so
//! many files). The children are this same executable, started with the
//! same arguments plus `PITH_WS_WORKER`; they take one-line commands on
//! stdin and report on stdout (see `worker`), and this process merges
//! their samples. Times are CLOCK_MONOTONIC, which all processes share.

pub mod http;
mod worker;

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use anyhow::{Context, bail};
use clap::Args;
use serde_json::json;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout};

use crate::settings::parse_duration;
use http::{Target, request};
use worker::Share;

#[derive(Debug, Clone, Args)]
pub struct WsBenchArgs {
    /// The server's base URL.
    #[arg(long, default_value = "http://127.0.0.1:8080")]
    pub url: String,

    /// Subscribers to hold open.
    #[arg(long, default_value_t = 1000)]
    pub connections: usize,

    /// How often each subscriber pings during the ping phase ("16s").
    #[arg(long, default_value = "16s", value_parser = parse_duration)]
    pub ping_interval: Duration,

    /// How long the ping phase lasts (two intervals gives each socket ~2 pings).
    #[arg(long, default_value = "32s", value_parser = parse_duration)]
    pub ping_duration: Duration,

    /// The server's process id, to read its VmRSS before and after.
    #[arg(long)]
    pub server_pid: Option<u32>,

    /// Topic to subscribe to; default: a new topic in the first community.
    #[arg(long)]
    pub topic: Option<i64>,

    /// Bearer token for the timed posts; default: register a new user.
    #[arg(long, env = "PITH_BENCH_TOKEN")]
    pub token: Option<String>,

    /// Posts whose fan-out to all subscribers is timed.
    #[arg(long, default_value_t = 3)]
    pub posts: usize,

    /// Connections opened at once per process (keep it under the server's
    /// listen backlog, or SYNs are dropped and retried a second later).
    #[arg(long, default_value_t = 64)]
    pub batch: usize,

    /// Source addresses for a loopback server, as FIRST-LAST.
    #[arg(long, default_value = "127.0.0.2-127.0.0.9")]
    pub source_ips: String,

    /// Most sockets per process; default: the open-file limit less a margin.
    #[arg(long)]
    pub per_process: Option<usize>,

    /// For an `https://` --url: PEM certificates its chain must lead to
    /// (the server's own, when self-signed); the subscribers use `wss://`.
    #[arg(long)]
    pub tls_ca: Option<PathBuf>,

    /// Internal: makes this process a worker (index,connections,topic).
    #[arg(long, hide = true, env = "PITH_WS_WORKER")]
    pub worker: Option<String>,
}

pub fn main(args: WsBenchArgs) -> anyhow::Result<()> {
    if let Some(spec) = &args.worker {
        return worker::run(&args, Share::decode(spec)?);
    }
    tokio::runtime::Builder::new_current_thread().enable_all().build()?.block_on(coordinate(args))
}

/// CLOCK_MONOTONIC in nanoseconds: the same clock in every process.
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime only writes the timespec it is given.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Raises the soft open-file limit to the hard one; returns the new soft limit.
fn raise_nofile() -> usize {
    let mut lim = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit/setrlimit read and write the struct they are given.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) != 0 {
            return 1024;
        }
        lim.rlim_cur = lim.rlim_max;
        libc::setrlimit(libc::RLIMIT_NOFILE, &lim);
        libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim);
    }
    lim.rlim_cur as usize
}

/// Kernel slab memory (`Slab:` in /proc/meminfo), in bytes: most of what
/// the kernel spends on each socket.
fn slab() -> Option<u64> {
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    let kb = info.lines().find_map(|l| l.strip_prefix("Slab:"))?;
    Some(kb.trim().trim_end_matches("kB").trim().parse::<u64>().ok()? * 1024)
}

/// VmRSS of a process, in bytes.
pub fn rss(pid: u32) -> anyhow::Result<u64> {
    status_bytes(pid, "VmRSS:")
}

/// RssAnon of a process, in bytes: its heap and stacks, without the pages
/// of its binary, which a server touches for the first time while the
/// subscribers connect and which VmRSS would count as theirs.
pub fn rss_anon(pid: u32) -> anyhow::Result<u64> {
    status_bytes(pid, "RssAnon:")
}

fn status_bytes(pid: u32, field: &str) -> anyhow::Result<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).with_context(|| format!("no process {pid}"))?;
    let kb = status.lines().find_map(|l| l.strip_prefix(field)).with_context(|| format!("no {field}"))?;
    Ok(kb.trim().trim_end_matches("kB").trim().parse::<u64>()? * 1024)
}

struct Worker {
    child: Child,
    stdin: ChildStdin,
    lines: Lines<BufReader<ChildStdout>>,
}

impl Worker {
    async fn tell(&mut self, cmd: &str) -> anyhow::Result<()> {
        self.stdin.write_all(format!("{cmd}\n").as_bytes()).await.context("worker gone")
    }

    /// The next line starting with `word`, without the word.
    async fn hear(&mut self, word: &str) -> anyhow::Result<String> {
        loop {
            let line = self.lines.next_line().await?.context("worker exited")?;
            if let Some(rest) = line.strip_prefix(word) {
                return Ok(rest.trim().to_owned());
            }
        }
    }
}

async fn coordinate(args: WsBenchArgs) -> anyhow::Result<()> {
    let target = Target::parse(&args.url, args.tls_ca.as_deref())?;
    let nofile = raise_nofile();
    let token = match args.token.clone() {
        Some(t) => t,
        None => register(&target).await?,
    };
    let topic = match args.topic {
        Some(t) => t,
        None => make_topic(&target, &token).await?,
    };
    let per_process = args.per_process.unwrap_or(nofile.saturating_sub(256)).max(1);
    let procs = args.connections.div_ceil(per_process).max(1);
    println!(
        "pith bench ws: {} subscribers of topic {topic} at {}, {procs} process(es), batches of {}",
        args.connections, args.url, args.batch
    );
    let before = args.server_pid.map(rss).transpose()?;
    let anon_before = args.server_pid.map(rss_anon).transpose()?;
    let slab_before = slab();

    let exe: PathBuf = std::env::current_exe()?;
    let mut workers = Vec::with_capacity(procs);
    for index in 0..procs {
        let connections = args.connections / procs + usize::from(index < args.connections % procs);
        let share = Share { index, connections, topic };
        let mut child = tokio::process::Command::new(&exe)
            .args(std::env::args_os().skip(1))
            .env("PITH_WS_WORKER", share.encode())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .context("cannot start a worker process")?;
        let stdin = child.stdin.take().context("stdin")?;
        let lines = BufReader::new(child.stdout.take().context("stdout")?).lines();
        workers.push(Worker { child, stdin, lines });
    }

    let (mut ok, mut failed, mut secs, mut errors) = (0usize, 0usize, 0f64, Vec::new());
    for w in &mut workers {
        let ready = w.hear("ready").await?;
        let mut parts = ready.splitn(4, ' ');
        ok += parts.next().and_then(|s| s.parse::<usize>().ok()).unwrap_or(0);
        failed += parts.next().and_then(|s| s.parse::<usize>().ok()).unwrap_or(0);
        secs = secs.max(parts.next().and_then(|s| s.parse().ok()).unwrap_or(0.0));
        errors.extend(parts.next().filter(|e| !e.is_empty()).map(str::to_owned));
    }
    println!("connect: {ok} subscribed, {failed} failed, in {secs:.2} s ({:.0}/s)", ok as f64 / secs.max(1e-9));
    for e in errors.iter().take(3) {
        println!("  first error: {e}");
    }
    if ok == 0 {
        bail!("no subscriber connected");
    }

    tokio::time::sleep(Duration::from_secs(2)).await;
    if let (Some(pid), Some(before)) = (args.server_pid, before) {
        let after = rss(pid)?;
        let delta = after.saturating_sub(before);
        println!(
            "server RSS: {:.1} MiB -> {:.1} MiB: {:.1} MiB for {ok} sockets = {} bytes per socket",
            mib(before),
            mib(after),
            mib(delta),
            delta / ok as u64
        );
    }
    if let (Some(pid), Some(before)) = (args.server_pid, anon_before) {
        let delta = rss_anon(pid)?.saturating_sub(before);
        println!(
            "server anonymous memory (RssAnon): +{:.1} MiB for {ok} sockets = {} bytes per socket",
            mib(delta),
            delta / ok as u64
        );
    }
    if let (Some(a), Some(b)) = (slab_before, slab()) {
        let local = target.addr.ip().is_loopback();
        // On loopback both ends of every connection are this host's.
        let per = b.saturating_sub(a) / ok as u64 / if local { 2 } else { 1 };
        println!(
            "kernel slab: +{:.1} MiB, about {per} bytes per socket{}",
            mib(b.saturating_sub(a)),
            if local { " (half of each client-server pair)" } else { "" }
        );
    }

    for round in 1..=args.posts {
        fan_out(&target, &token, topic, &mut workers, round, args.server_pid).await?;
        tokio::time::sleep(Duration::from_millis(300)).await;
    }

    for w in &mut workers {
        w.tell("ping").await?;
    }
    tokio::time::sleep(args.ping_duration).await;
    let mut rtts: Vec<u32> = Vec::new();
    for w in &mut workers {
        w.tell("stop").await?;
        rtts.extend(numbers::<u32>(&w.hear("rtt").await?));
    }
    rtts.sort_unstable();
    let ms = |us: u32| f64::from(us) / 1000.0;
    println!(
        "ping RTT ({} pings, each socket every {:?} for {:?}): p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms",
        rtts.len(),
        args.ping_interval,
        args.ping_duration,
        ms(pct(&rtts, 50.0)),
        ms(pct(&rtts, 99.0)),
        ms(rtts.last().copied().unwrap_or(0)),
    );
    if let Some(pid) = args.server_pid {
        println!("server RSS at the end: {:.1} MiB", mib(rss(pid)?));
    }
    for w in &mut workers {
        let _ = w.tell("quit").await;
    }
    for w in &mut workers {
        let _ = tokio::time::timeout(Duration::from_secs(10), w.child.wait()).await;
    }
    Ok(())
}

/// Times one post from the POST being sent, and from its 201 arriving,
/// until every subscriber has it.
async fn fan_out(
    target: &Target,
    token: &str,
    topic: i64,
    workers: &mut [Worker],
    round: usize,
    server_pid: Option<u32>,
) -> anyhow::Result<()> {
    let worker_pids: Vec<u32> = workers.iter().filter_map(|w| w.child.id()).collect();
    let cpu = || (server_pid.map_or(0, cpu_ms), worker_pids.iter().map(|&p| cpu_ms(p)).sum::<u64>());
    let cpu_before = cpu();
    for w in workers.iter_mut() {
        w.tell("expect").await?;
    }
    for w in workers.iter_mut() {
        w.hear("armed").await?;
    }
    let body = json!({"body": format!("fan-out {round}: {}", "x".repeat(130))});
    let sent = monotonic_ns();
    let (status, answer) =
        request(target, "POST", &format!("/api/v1/topics/{topic}/posts"), Some(token), Some(&body)).await?;
    let acked = monotonic_ns();
    if status != 201 {
        bail!("POST answered {status}: {answer}");
    }
    let (mut want, mut arrivals) = (0usize, Vec::new());
    for w in workers.iter_mut() {
        let line = w.hear("arrivals").await?;
        let (n, list) = line.split_once(' ').unwrap_or((&line, ""));
        want += n.parse::<usize>().unwrap_or(0);
        arrivals.extend(numbers::<u64>(list));
    }
    let cpu_after = cpu();
    let mut from_ack: Vec<u32> = arrivals.iter().map(|&t| (t.saturating_sub(acked) / 1000) as u32).collect();
    let mut from_send: Vec<u32> = arrivals.iter().map(|&t| (t.saturating_sub(sent) / 1000) as u32).collect();
    from_ack.sort_unstable();
    from_send.sort_unstable();
    let ms = |us: u32| f64::from(us) / 1000.0;
    println!(
        "fan-out {round}: {}/{want} received; after the 201 (which took {:.1} ms): p50 {:.1} ms, p99 {:.1} ms, \
         all {:.1} ms; after sending the POST: all {:.1} ms",
        arrivals.len(),
        (acked - sent) as f64 / 1e6,
        ms(pct(&from_ack, 50.0)),
        ms(pct(&from_ack, 99.0)),
        ms(from_ack.last().copied().unwrap_or(0)),
        ms(from_send.last().copied().unwrap_or(0)),
    );
    println!(
        "  CPU meanwhile: server {} ms, load generator {} ms (on {} cores)",
        cpu_after.0.saturating_sub(cpu_before.0),
        cpu_after.1.saturating_sub(cpu_before.1),
        std::thread::available_parallelism().map_or(1, |n| n.get()),
    );
    Ok(())
}

/// User plus system CPU time a process has used, in milliseconds (0 when
/// it cannot be read).
fn cpu_ms(pid: u32) -> u64 {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else { return 0 };
    // After the parenthesised command name come fields 3 (state) onwards;
    // utime and stime are fields 14 and 15.
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let field = |n: usize| rest.split_whitespace().nth(n - 3).and_then(|x| x.parse::<u64>().ok()).unwrap_or(0);
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
    (field(14) + field(15)) * 1000 / hz
}

fn numbers<T: std::str::FromStr>(s: &str) -> Vec<T> {
    s.split(',').filter_map(|x| x.trim().parse().ok()).collect()
}

/// The `p`th percentile of sorted samples.
fn pct(sorted: &[u32], p: f64) -> u32 {
    if sorted.is_empty() {
        return 0;
    }
    let i = ((p / 100.0) * (sorted.len() - 1) as f64).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

fn mib(b: u64) -> f64 {
    b as f64 / (1024.0 * 1024.0)
}

async fn register(target: &Target) -> anyhow::Result<String> {
    let name = format!("wsbench_{}", rand::random::<u32>() % 1_000_000_000);
    let body = json!({"username": name, "password": "wsbench-password"});
    let (status, answer) = request(target, "POST", "/api/v1/auth/register", None, Some(&body)).await?;
    if status != 201 {
        bail!("registering {name} answered {status}: {answer}; pass --token");
    }
    answer["token"].as_str().map(str::to_owned).context("no token in the register answer")
}

async fn make_topic(target: &Target, token: &str) -> anyhow::Result<i64> {
    let (_, list) = request(target, "GET", "/api/v1/communities", None, None).await?;
    let first = list
        .as_array()
        .or_else(|| list["communities"].as_array())
        .and_then(|a| a.first())
        .and_then(|c| c["name"].as_str())
        .map(str::to_owned)
        .context("the server has no community to post in: seed it, or pass --topic")?;
    let body = json!({"title": "WebSocket fan-out benchmark", "body": "Subscribers of this topic are load."});
    let (status, answer) =
        request(target, "POST", &format!("/api/v1/communities/{first}/topics"), Some(token), Some(&body)).await?;
    if status != 201 {
        bail!("creating a topic in {first} answered {status}: {answer}");
    }
    answer["id"].as_i64().context("no id in the topic answer")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_pick_from_sorted_samples() {
        let v: Vec<u32> = (1..=100).collect();
        assert_eq!((pct(&v, 50.0), pct(&v, 99.0), pct(&[], 50.0)), (51, 99, 0));
    }

    #[test]
    fn cpu_time_of_this_process_is_readable() {
        let spin = std::time::Instant::now();
        while spin.elapsed() < Duration::from_millis(30) {}
        assert!(cpu_ms(std::process::id()) > 0);
    }

    #[test]
    fn a_worker_spec_round_trips() {
        let s = Share { index: 2, connections: 5000, topic: 17 };
        let back = Share::decode(&s.encode()).expect("decode");
        assert_eq!((back.index, back.connections, back.topic), (2, 5000, 17));
    }
}
