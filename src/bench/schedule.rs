//! When each request is due, and which requests count.
//!
//! With `--rate R`, every connection gets a fixed timetable, as in wrk2:
//! connection `i` of `C` sends its k-th request at `phase_i + k * C / R`
//! seconds after the start, whatever happened to the previous one. A
//! response's latency is measured from that intended time, so a server that
//! stalls is charged for every request it delayed, not just the one it was
//! serving (no coordinated omission). A connection that falls behind sends
//! back to back until it catches up.
//!
//! All times here are offsets from the run's start, so the arithmetic can be
//! tested without a clock.

use std::time::Duration;

/// One connection's timetable in an open-loop run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Schedule {
    /// Time between two requests on this connection: connections / rate.
    interval_ns: u64,
    /// Where in the first interval this connection starts, so the
    /// connections' requests interleave evenly instead of arriving in bursts.
    phase_ns: u64,
}

impl Schedule {
    /// The timetable of connection `index` when `connections` share a total
    /// of `rate` requests per second.
    pub fn new(rate: f64, connections: usize, index: usize) -> Schedule {
        let connections = connections.max(1);
        let interval_ns = ((connections as f64 * 1e9 / rate).round() as u64).max(1);
        let phase_ns = (interval_ns as u128 * (index % connections) as u128 / connections as u128) as u64;
        Schedule { interval_ns, phase_ns }
    }

    /// When request `k` (counting from 0) is due.
    pub fn due(&self, k: u64) -> Duration {
        Duration::from_nanos(self.phase_ns.saturating_add(k.saturating_mul(self.interval_ns)))
    }

    pub fn interval(&self) -> Duration {
        Duration::from_nanos(self.interval_ns)
    }

    /// How many requests are due strictly before `t`.
    pub fn due_before(&self, t: Duration) -> u64 {
        let t = t.as_nanos().min(u64::MAX as u128) as u64;
        if t <= self.phase_ns { 0 } else { (t - self.phase_ns - 1) / self.interval_ns + 1 }
    }
}

/// The measured part of a run: after the warm-up, before the end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    pub warmup: Duration,
    /// Warm-up plus measured duration: when every connection stops.
    pub end: Duration,
}

impl Window {
    pub fn new(warmup: Duration, duration: Duration) -> Window {
        Window { warmup, end: warmup + duration }
    }

    /// Whether a request sent (or due) at `sent` and answered at `done`
    /// is recorded: it must start after the warm-up and finish in time.
    pub fn records(&self, sent: Duration, done: Duration) -> bool {
        sent >= self.warmup && done <= self.end
    }

    /// The measured duration.
    pub fn length(&self) -> Duration {
        self.end.saturating_sub(self.warmup)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_connection_sends_at_its_share_of_the_total_rate() {
        // 1000 req/s over 10 connections: one request per 10 ms each.
        let s = Schedule::new(1000.0, 10, 0);
        assert_eq!(s.interval(), Duration::from_millis(10));
        assert_eq!(s.due(0), Duration::ZERO);
        assert_eq!(s.due(1), Duration::from_millis(10));
        assert_eq!(s.due(100), Duration::from_secs(1));
    }

    #[test]
    fn connections_are_staggered_across_one_interval() {
        let phases: Vec<Duration> = (0..4).map(|i| Schedule::new(400.0, 4, i).due(0)).collect();
        assert_eq!(
            phases,
            [Duration::ZERO, Duration::from_micros(2500), Duration::from_millis(5), Duration::from_micros(7500)]
        );
        // Together they send evenly: one request every 2.5 ms.
        let mut all: Vec<Duration> =
            (0..4).flat_map(|i| (0..3).map(move |k| Schedule::new(400.0, 4, i).due(k))).collect();
        all.sort();
        let gaps: Vec<Duration> = all.windows(2).map(|w| w[1] - w[0]).collect();
        assert!(gaps.iter().all(|g| *g == Duration::from_micros(2500)), "{gaps:?}");
    }

    #[test]
    fn the_total_rate_is_kept_over_a_long_run() {
        let (rate, conns) = (7_777.0, 400);
        let total: u64 = (0..conns).map(|i| Schedule::new(rate, conns, i).due_before(Duration::from_secs(100))).sum();
        let expected = rate * 100.0;
        assert!((total as f64 - expected).abs() <= conns as f64, "{total} vs {expected}");
    }

    #[test]
    fn due_before_counts_the_requests_due_before_a_time() {
        let s = Schedule::new(100.0, 1, 0); // every 10 ms from 0
        assert_eq!(s.due_before(Duration::ZERO), 0);
        assert_eq!(s.due_before(Duration::from_nanos(1)), 1);
        assert_eq!(s.due_before(Duration::from_millis(10)), 1);
        assert_eq!(s.due_before(Duration::from_millis(11)), 2);
        let late = Schedule::new(100.0, 2, 1); // every 20 ms from 10 ms
        assert_eq!(late.due_before(Duration::from_millis(10)), 0);
        assert_eq!(late.due_before(Duration::from_millis(31)), 2);
        for k in 0..50 {
            assert_eq!(late.due_before(late.due(k)), k);
        }
    }

    #[test]
    fn an_absurd_rate_still_gives_a_positive_interval() {
        let s = Schedule::new(1e12, 1, 0);
        assert_eq!(s.interval(), Duration::from_nanos(1));
        assert_eq!(s.due(u64::MAX), Duration::from_nanos(u64::MAX));
    }

    #[test]
    fn only_requests_inside_the_window_are_recorded() {
        let w = Window::new(Duration::from_secs(5), Duration::from_secs(15));
        assert_eq!(w.end, Duration::from_secs(20));
        assert_eq!(w.length(), Duration::from_secs(15));
        assert!(!w.records(Duration::from_millis(4999), Duration::from_secs(6)), "sent during warm-up");
        assert!(w.records(Duration::from_secs(5), Duration::from_secs(6)));
        assert!(w.records(Duration::from_secs(19), Duration::from_secs(20)));
        assert!(!w.records(Duration::from_secs(19), Duration::from_millis(20_001)), "finished after the end");
    }
}
