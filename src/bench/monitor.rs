//! What `pith bench http` watches while the load runs: CPU of the server,
//! of the generator and of the machine over the measured window, the
//! server's resident memory (sampled every 100 ms, so the peak is seen, not
//! just the value at the end), and a live progress line on a terminal.

use std::io::{IsTerminal, Write as _};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use super::procstat::{self, Sample};
use super::schedule::Window;

/// Counters every connection bumps once per request, read by the progress
/// line only (one relaxed add per request: no lock on the hot path).
#[derive(Debug, Default)]
pub struct Progress {
    pub answers: AtomicU64,
    pub errors: AtomicU64,
}

impl Progress {
    pub fn answered(&self) {
        self.answers.fetch_add(1, Ordering::Relaxed);
    }

    pub fn failed(&self) {
        self.errors.fetch_add(1, Ordering::Relaxed);
    }
}

/// CPU and memory use over the window.
#[derive(Debug, Default)]
pub struct Usage {
    pub server_cpu: Option<f64>,
    /// Resident memory at the end of the window, in 10^6 bytes.
    pub server_rss_mb: Option<f64>,
    /// Largest resident memory seen during warm-up and window (100 ms samples).
    pub server_peak_rss_mb: Option<f64>,
    /// The kernel's high-water mark (`VmHWM`) at the end: peak since the server started.
    pub server_hwm_mb: Option<f64>,
    pub bench_cpu: Option<f64>,
    pub machine_cpu: Option<f64>,
}

const TICK: Duration = Duration::from_millis(100);

/// Sleeps through the run in 100 ms ticks, reading `/proc` and, when
/// stderr is a terminal, redrawing the progress line once a second.
pub fn watch(server: Option<u32>, start: Instant, window: Window, progress: &Progress) -> Usage {
    let read = || (server.and_then(|p| procstat::sample(Some(p))), procstat::sample(None), procstat::machine());
    let live = std::io::stderr().is_terminal();
    let mut before = None;
    let mut peak: Option<u64> = None;
    let mut last_line = (start, 0u64);
    loop {
        let now = Instant::now();
        if before.is_none() && now >= start + window.warmup {
            before = Some(read());
        }
        if now >= start + window.end {
            break;
        }
        if let Some(s) = server.and_then(|p| procstat::sample(Some(p))) {
            peak = Some(peak.unwrap_or(0).max(s.rss));
        }
        if live && now.duration_since(last_line.0) >= Duration::from_secs(1) {
            let answers = progress.answers.load(Ordering::Relaxed);
            let rate = (answers - last_line.1) as f64 / now.duration_since(last_line.0).as_secs_f64();
            let phase = if now < start + window.warmup { "warm-up" } else { "measuring" };
            let errors = progress.errors.load(Ordering::Relaxed);
            let elapsed = now.duration_since(start).as_secs_f64();
            let total = window.end.as_secs_f64();
            eprint!(
                "\r  {phase:<9} {elapsed:5.1}/{total:.0} s  {rate:>9.0} req/s  {answers:>10} answers  {errors} errors "
            );
            let _ = std::io::stderr().flush();
            last_line = (now, answers);
        }
        std::thread::sleep(TICK.min((start + window.end).saturating_duration_since(Instant::now())));
    }
    if live {
        eprintln!();
    }
    let before = before.unwrap_or_else(read);
    let after = read();
    let cpu = |b: Option<Sample>, a: Option<Sample>| Some(procstat::cpu_percent(&b?, &a?));
    let mb = |bytes: u64| bytes as f64 / 1e6;
    Usage {
        server_cpu: cpu(before.0, after.0),
        server_rss_mb: after.0.map(|s| mb(s.rss)),
        server_peak_rss_mb: after.0.map(|s| mb(peak.unwrap_or(0).max(s.rss))),
        server_hwm_mb: after.0.map(|s| mb(s.rss_peak)),
        bench_cpu: cpu(before.1, after.1),
        machine_cpu: before.2.zip(after.2).map(|(b, a)| procstat::machine_percent(&b, &a)),
    }
}
