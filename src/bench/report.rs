//! The summary of a run: built from the merged results, printed as text or
//! JSON, and rendered by `pith bench table` as one markdown row per run,
//! with its throughput as a ratio against a baseline (the hello-world
//! server measured in the same session).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::PathBuf;

use anyhow::Context;
use clap::Args;
use serde::{Deserialize, Serialize};

use super::results::Results;

/// Everything a script needs about one run (`pith bench http --json`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Summary {
    pub label: Option<String>,
    pub url: String,
    pub connections: usize,
    /// Load generator's runtime threads.
    pub threads: usize,
    pub warmup_s: f64,
    pub duration_s: f64,
    /// Total req/s asked for; none for a closed loop at full speed.
    pub rate: Option<f64>,
    /// True only for open-loop runs, whose latency counts from the intended send time.
    pub coordinated_omission_corrected: bool,
    pub accept_gzip: bool,
    pub write_ratio: f64,
    pub topics: u64,
    /// Requests due in the window that had no answer when it closed.
    pub unfinished: u64,
    /// Posts answered 2xx over the whole run (warm-up included): each must
    /// be in the database afterwards (`bench/run.sh` with `MIX=write`).
    #[serde(default)]
    pub posts_acknowledged: u64,
    /// Posts sent that got no answer: stored or not, nobody was told.
    #[serde(default)]
    pub posts_unanswered: u64,
    /// CPU use of `--server-pid` over the window, in % of one core.
    pub server_cpu_percent: Option<f64>,
    pub server_rss_mb: Option<f64>,
    /// Largest server RSS sampled (every 100 ms) during warm-up and window.
    #[serde(default)]
    pub server_peak_rss_mb: Option<f64>,
    /// The server's `VmHWM` at the end: its peak RSS since it started.
    #[serde(default)]
    pub server_hwm_mb: Option<f64>,
    /// CPU use of the load generator itself over the window.
    pub bench_cpu_percent: Option<f64>,
    /// Busy CPU of the whole machine over the window (200 % = both cores of
    /// two): what the server and generator leave is other processes and
    /// the kernel's loopback traffic.
    #[serde(default)]
    pub machine_cpu_percent: Option<f64>,
    pub reads: KindSummary,
    pub writes: KindSummary,
    pub total: KindSummary,
}

/// One kind of request (reads, writes, or both).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct KindSummary {
    /// Requests answered (any status) inside the window.
    pub responses: u64,
    pub requests_per_s: f64,
    pub latency_ms: Latency,
    /// Responses by class: "2xx", "4xx", ...; classes never seen are left out.
    pub status: BTreeMap<String, u64>,
    /// Requests that got no answer (refused, reset, timed out).
    pub errors: u64,
    pub error_kinds: BTreeMap<String, u64>,
    pub body_bytes: u64,
    /// Body bytes per second, in 10^6 bytes.
    pub mb_per_s: f64,
}

#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize)]
pub struct Latency {
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub p999: f64,
    pub max: f64,
    pub mean: f64,
}

impl KindSummary {
    pub fn new(r: &Results, seconds: f64) -> KindSummary {
        let h = &r.latency_us;
        let ms = |us: u64| us as f64 / 1000.0;
        let latency_ms = if h.is_empty() {
            Latency::default()
        } else {
            Latency {
                p50: ms(h.value_at_quantile(0.50)),
                p90: ms(h.value_at_quantile(0.90)),
                p99: ms(h.value_at_quantile(0.99)),
                p999: ms(h.value_at_quantile(0.999)),
                max: ms(h.max()),
                mean: h.mean() / 1000.0,
            }
        };
        let names = ["other", "1xx", "2xx", "3xx", "4xx", "5xx"];
        let status = names.iter().zip(r.status).filter(|(_, n)| *n > 0).map(|(k, n)| (k.to_string(), n)).collect();
        let per_s = |x: f64| if seconds > 0.0 { x / seconds } else { 0.0 };
        KindSummary {
            responses: r.responses(),
            requests_per_s: per_s(r.responses() as f64),
            latency_ms,
            status,
            errors: r.error_count(),
            error_kinds: r.errors.clone(),
            body_bytes: r.body_bytes,
            mb_per_s: per_s(r.body_bytes as f64 / 1e6),
        }
    }

    /// Answers that were not 2xx.
    pub fn non_2xx(&self) -> u64 {
        self.status.iter().filter(|(k, _)| k.as_str() != "2xx").map(|(_, n)| n).sum()
    }
}

/// Formats milliseconds with the precision that matters at that size.
pub fn fmt_ms(ms: f64) -> String {
    if ms >= 10_000.0 {
        format!("{:.1}s", ms / 1000.0)
    } else if ms >= 100.0 {
        format!("{ms:.0}ms")
    } else if ms >= 10.0 {
        format!("{ms:.1}ms")
    } else {
        format!("{ms:.2}ms")
    }
}

impl Summary {
    /// Server CPU time per answered request, in microseconds: unlike req/s,
    /// it hardly depends on what else is using the cores.
    pub fn server_cpu_per_request_us(&self) -> Option<f64> {
        let cpu = self.server_cpu_percent?;
        (self.total.requests_per_s > 0.0).then(|| cpu / 100.0 * 1e6 / self.total.requests_per_s)
    }

    /// The human-readable report.
    pub fn text(&self) -> String {
        let mut s = String::new();
        let label = self.label.as_deref().map(|l| format!(" [{l}]")).unwrap_or_default();
        let _ = writeln!(s, "pith bench http: {}{label}", self.url);
        let _ = writeln!(
            s,
            "  {} connections, {} threads, {:.1} s measured after {:.1} s warm-up",
            self.connections, self.threads, self.duration_s, self.warmup_s
        );
        let _ = match self.rate {
            Some(r) => writeln!(
                s,
                "  open loop at {r:.0} req/s in total: latency from each request's intended send time \
                 (coordinated omission corrected)"
            ),
            None => writeln!(
                s,
                "  closed loop at full speed: latency from the actual send, coordinated omission NOT corrected \
                 (use --rate for that)"
            ),
        };
        let writes = if self.write_ratio > 0.0 {
            format!("{:.2} % posts", self.write_ratio * 100.0)
        } else {
            "reads only (no --token)".to_owned()
        };
        let enc = if self.accept_gzip { "gzip" } else { "identity" };
        let _ = writeln!(s, "  topics 1..={} uniform, {writes}, Accept-Encoding: {enc}\n", self.topics);
        let _ = writeln!(
            s,
            "  {:<7}{:>10}{:>10}{:>9}{:>9}{:>9}{:>9}{:>9}{:>9}{:>9}{:>8}{:>8}",
            "", "answers", "req/s", "p50", "p90", "p99", "p99.9", "max", "MB/s", "2xx", "non-2xx", "errors"
        );
        for (name, k) in [("reads", &self.reads), ("writes", &self.writes), ("total", &self.total)] {
            let l = &k.latency_ms;
            let _ = writeln!(
                s,
                "  {:<7}{:>10}{:>10.0}{:>9}{:>9}{:>9}{:>9}{:>9}{:>9.1}{:>9}{:>8}{:>8}",
                name,
                k.responses,
                k.requests_per_s,
                fmt_ms(l.p50),
                fmt_ms(l.p90),
                fmt_ms(l.p99),
                fmt_ms(l.p999),
                fmt_ms(l.max),
                k.mb_per_s,
                k.status.get("2xx").copied().unwrap_or(0),
                k.non_2xx(),
                k.errors
            );
        }
        if let (Some(cpu), Some(rss)) = (self.server_cpu_percent, self.server_rss_mb) {
            let per_req = self.server_cpu_per_request_us().unwrap_or(0.0);
            let _ =
                write!(s, "\n  server: {cpu:.0} % CPU ({per_req:.1} µs per request), {rss:.1} MB resident at the end");
            if let (Some(peak), Some(hwm)) = (self.server_peak_rss_mb, self.server_hwm_mb) {
                let _ = write!(s, ", {peak:.1} MB at most during the run, {hwm:.1} MB peak since it started");
            }
        }
        if let Some(cpu) = self.bench_cpu_percent {
            let _ = write!(s, "\n  load generator: {cpu:.0} % CPU");
        }
        if let Some(cpu) = self.machine_cpu_percent {
            let _ = write!(s, "\n  whole machine: {cpu:.0} % CPU busy (100 % = one core)");
        }
        if self.unfinished > 0 {
            let _ = write!(s, "\n  {} requests due in the window had no answer when it closed", self.unfinished);
        }
        if self.posts_acknowledged + self.posts_unanswered > 0 {
            let _ = write!(
                s,
                "\n  posts over the whole run, warm-up included: {} acknowledged, {} sent without an answer",
                self.posts_acknowledged, self.posts_unanswered
            );
        }
        for (name, k) in [("reads", &self.reads), ("writes", &self.writes)] {
            for (cause, n) in &k.error_kinds {
                let _ = write!(s, "\n  {name} error: {cause}: {n}");
            }
        }
        s.push('\n');
        s
    }
}

#[derive(Debug, Clone, Args)]
pub struct TableArgs {
    /// Files written by `pith bench http --json`.
    #[arg(required = true)]
    pub files: Vec<PathBuf>,

    /// Labels of the runs that throughput is compared against (same connection count and
    /// rate), one ratio column each: `--baseline hello,c`.
    #[arg(long, default_value = "hello", value_delimiter = ',')]
    pub baseline: Vec<String>,
}

pub fn table_main(args: TableArgs) -> anyhow::Result<()> {
    let mut runs = Vec::new();
    for f in &args.files {
        let text = std::fs::read_to_string(f).with_context(|| format!("cannot read {}", f.display()))?;
        runs.push(serde_json::from_str(&text).with_context(|| format!("{} is not a bench summary", f.display()))?);
    }
    let baselines: Vec<&str> = args.baseline.iter().map(String::as_str).collect();
    print!("{}", table(&runs, &baselines));
    Ok(())
}

/// One markdown row per run, in the order given, with one ratio column per baseline.
pub fn table(runs: &[Summary], baselines: &[&str]) -> String {
    let mut s = String::from("| server | conns | load | gzip | req/s |");
    for b in baselines {
        let _ = write!(s, " vs {b} |");
    }
    s.push_str(
        " read p50 | read p90 | read p99 | read p99.9 | read max | write p99 | writes/s | MB/s | server CPU \
         | server µs/req | bench CPU | machine CPU | server RSS | peak RSS | non-2xx | errors |\n",
    );
    s.push_str("|---|--:|---|---|--:|");
    s.push_str(&"--:|".repeat(baselines.len()));
    s.push_str("--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n");
    for (i, r) in runs.iter().enumerate() {
        let pct = |x: Option<f64>| x.map(|v| format!("{v:.0} %")).unwrap_or_else(|| "-".to_owned());
        let mb = |x: Option<f64>| x.map(|m| format!("{m:.0} MB")).unwrap_or_else(|| "-".to_owned());
        let write_p99 = if r.writes.responses > 0 { fmt_ms(r.writes.latency_ms.p99) } else { "-".to_owned() };
        let load = r.rate.map(|x| format!("{x:.0}/s")).unwrap_or_else(|| "max".to_owned());
        let mut errors = r.total.errors.to_string();
        if r.unfinished > 0 {
            let _ = write!(errors, " (+{} unfinished)", r.unfinished);
        }
        let _ = write!(
            s,
            "| {} | {} | {} | {} | {:.0} |",
            r.label.as_deref().unwrap_or(&r.url),
            r.connections,
            load,
            if r.accept_gzip { "yes" } else { "no" },
            r.total.requests_per_s,
        );
        for b in baselines {
            let _ = write!(s, " {} |", ratio(runs, i, b));
        }
        let _ = writeln!(
            s,
            " {} | {} | {} | {} | {} | {} | {:.1} | {:.1} | {} | {} | {} | {} | {} | {} | {} | {} |",
            fmt_ms(r.reads.latency_ms.p50),
            fmt_ms(r.reads.latency_ms.p90),
            fmt_ms(r.reads.latency_ms.p99),
            fmt_ms(r.reads.latency_ms.p999),
            fmt_ms(r.reads.latency_ms.max),
            write_p99,
            r.writes.requests_per_s,
            r.total.mb_per_s,
            pct(r.server_cpu_percent),
            r.server_cpu_per_request_us().map(|us| format!("{us:.1}")).unwrap_or_else(|| "-".to_owned()),
            pct(r.bench_cpu_percent),
            pct(r.machine_cpu_percent),
            mb(r.server_rss_mb),
            mb(r.server_peak_rss_mb),
            r.total.non_2xx(),
            errors,
        );
    }
    s
}

/// Run `i`'s req/s over the `baseline` run it meets: same connection count
/// and rate; with repeated runs, the k-th run of a kind meets the k-th
/// baseline run (A B A B interleaving compares neighbours).
fn ratio(runs: &[Summary], i: usize, baseline: &str) -> String {
    let r = &runs[i];
    let same_kind = |b: &Summary| {
        b.label == r.label && b.accept_gzip == r.accept_gzip && b.connections == r.connections && b.rate == r.rate
    };
    let ordinal = runs[..i].iter().filter(|b| same_kind(b)).count();
    let bases: Vec<&Summary> = runs
        .iter()
        .filter(|b| b.label.as_deref() == Some(baseline) && b.connections == r.connections && b.rate == r.rate)
        .collect();
    match bases.get(ordinal.min(bases.len().saturating_sub(1))) {
        Some(b) if b.total.requests_per_s > 0.0 => format!("{:.2}", r.total.requests_per_s / b.total.requests_per_s),
        _ => "-".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn results(n: u64, latency_ms: u64, status: u16, bytes: u64) -> Results {
        let mut r = Results::new();
        for _ in 0..n {
            r.record(Duration::from_millis(latency_ms), status, bytes);
        }
        r
    }

    fn summary(label: &str, connections: usize, rps: u64) -> Summary {
        let reads = KindSummary::new(&results(rps * 10, 2, 200, 1000), 10.0);
        let writes = KindSummary::new(&Results::new(), 10.0);
        Summary {
            label: Some(label.to_owned()),
            url: "http://127.0.0.1:1".to_owned(),
            connections,
            threads: 2,
            warmup_s: 1.0,
            duration_s: 10.0,
            rate: None,
            coordinated_omission_corrected: false,
            accept_gzip: false,
            write_ratio: 0.0,
            topics: 100,
            unfinished: 0,
            posts_acknowledged: 0,
            posts_unanswered: 0,
            server_cpu_percent: Some(95.0),
            server_rss_mb: None,
            server_peak_rss_mb: None,
            server_hwm_mb: None,
            bench_cpu_percent: None,
            machine_cpu_percent: None,
            total: reads.clone(),
            reads,
            writes,
        }
    }

    #[test]
    fn a_kind_summary_gives_rates_per_second_and_latency_in_ms() {
        let mut r = results(1000, 4, 200, 2_000);
        r.merge(&results(10, 40, 503, 0));
        let k = KindSummary::new(&r, 2.0);
        assert_eq!(k.responses, 1010);
        assert_eq!(k.requests_per_s, 505.0);
        assert_eq!(k.mb_per_s, 1.0);
        assert_eq!(k.status.get("2xx"), Some(&1000));
        assert_eq!(k.status.get("5xx"), Some(&10));
        assert_eq!(k.status.get("4xx"), None);
        assert_eq!(k.non_2xx(), 10);
        assert!((k.latency_ms.p50 - 4.0).abs() < 0.01, "{:?}", k.latency_ms);
        assert!((k.latency_ms.max - 40.0).abs() < 0.05, "{:?}", k.latency_ms);
    }

    #[test]
    fn an_empty_kind_has_zero_latency_and_rate() {
        let k = KindSummary::new(&Results::new(), 0.0);
        assert_eq!(k.responses, 0);
        assert_eq!(k.requests_per_s, 0.0);
        assert_eq!(k.latency_ms.max, 0.0);
    }

    #[test]
    fn the_table_gives_each_run_a_ratio_against_the_baseline_with_the_same_connections() {
        let runs = [summary("pith", 50, 500), summary("hello", 50, 1000), summary("pith", 400, 300)];
        let t = table(&runs, &["hello"]);
        let rows: Vec<&str> = t.lines().collect();
        assert_eq!(rows.len(), 5);
        assert!(rows[0].contains("vs hello"));
        assert!(rows[2].starts_with("| pith | 50 | max | no | 500 | 0.50 | 2.00ms | 2.00ms |"), "{}", rows[2]);
        assert!(rows[3].starts_with("| hello | 50 | max | no | 1000 | 1.00 |"), "{}", rows[3]);
        assert!(rows[4].starts_with("| pith | 400 | max | no | 300 | - |"), "{}", rows[4]);
        assert!(rows[2].contains("| 95 % | 1900.0 |"), "{}", rows[2]);
    }

    #[test]
    fn repeated_runs_are_compared_with_the_nearest_baseline() {
        let runs =
            [summary("pith", 50, 500), summary("hello", 50, 1000), summary("pith", 50, 400), summary("hello", 50, 500)];
        let t = table(&runs, &["hello"]);
        let rows: Vec<&str> = t.lines().skip(2).collect();
        assert!(rows[0].contains("| 500 | 0.50 |"), "{}", rows[0]);
        assert!(rows[2].contains("| 400 | 0.80 |"), "{}", rows[2]);
    }

    #[test]
    fn a_summary_survives_a_json_round_trip() {
        let s = summary("pith", 400, 10);
        let back: Summary = serde_json::from_str(&serde_json::to_string(&s).expect("serializes")).expect("parses");
        assert_eq!(back.total.responses, 100);
        assert_eq!(back.label.as_deref(), Some("pith"));
    }

    #[test]
    fn the_text_report_says_whether_coordinated_omission_is_corrected() {
        let mut s = summary("pith", 50, 10);
        assert!(s.text().contains("coordinated omission NOT corrected"));
        s.rate = Some(100.0);
        s.coordinated_omission_corrected = true;
        assert!(s.text().contains("(coordinated omission corrected)"));
    }

    #[test]
    fn milliseconds_are_shown_with_sensible_precision() {
        assert_eq!(fmt_ms(0.123), "0.12ms");
        assert_eq!(fmt_ms(12.34), "12.3ms");
        assert_eq!(fmt_ms(123.4), "123ms");
        assert_eq!(fmt_ms(12_345.0), "12.3s");
    }
}
