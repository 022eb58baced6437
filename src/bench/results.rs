//! What one connection saw, kept apart from every other connection so the
//! hot path takes no lock; merged once at the end (the shape of
//! hatoo/oha's `result_data.rs`).

use std::collections::BTreeMap;
use std::time::Duration;

use hdrhistogram::Histogram;

/// Results for one kind of request (reads or writes).
#[derive(Debug, Clone)]
pub struct Results {
    /// Latency of every answered request, in microseconds.
    pub latency_us: Histogram<u64>,
    /// Responses by status class: index 1-5 for 1xx-5xx, 0 for anything else.
    pub status: [u64; 6],
    /// Requests that got no response, by cause.
    pub errors: BTreeMap<String, u64>,
    /// Response body bytes as received (compressed when the server gzips).
    pub body_bytes: u64,
}

impl Default for Results {
    fn default() -> Self {
        Results::new()
    }
}

impl Results {
    pub fn new() -> Results {
        // Three significant figures, growing to fit: a histogram covering up
        // to an hour up front would cost 400 connections ~150 MB.
        let latency_us = Histogram::new(3).expect("3 significant figures is a valid histogram");
        Results { latency_us, status: [0; 6], errors: BTreeMap::new(), body_bytes: 0 }
    }

    pub fn record(&mut self, latency: Duration, status: u16, body_bytes: u64) {
        let us = (latency.as_micros().min(u64::MAX as u128) as u64).max(1);
        // `record` grows the histogram; `saturating_record` would clamp.
        if self.latency_us.record(us).is_err() {
            self.latency_us.saturating_record(us);
        }
        let class = (status / 100) as usize;
        self.status[if (1..=5).contains(&class) { class } else { 0 }] += 1;
        self.body_bytes += body_bytes;
    }

    pub fn record_error(&mut self, cause: &str) {
        match self.errors.get_mut(cause) {
            Some(n) => *n += 1,
            None => {
                self.errors.insert(cause.to_owned(), 1);
            }
        }
    }

    pub fn merge(&mut self, other: &Results) {
        self.latency_us.add(&other.latency_us).expect("auto-resizing histograms always add");
        for (mine, theirs) in self.status.iter_mut().zip(other.status) {
            *mine += theirs;
        }
        for (cause, n) in &other.errors {
            *self.errors.entry(cause.clone()).or_default() += n;
        }
        self.body_bytes += other.body_bytes;
    }

    /// Requests answered with any status.
    pub fn responses(&self) -> u64 {
        self.status.iter().sum()
    }

    pub fn error_count(&self) -> u64 {
        self.errors.values().sum()
    }
}

/// Everything one connection saw.
#[derive(Debug, Clone, Default)]
pub struct WorkerResults {
    pub reads: Results,
    pub writes: Results,
    /// Open loop only: requests due inside the measured window that had no
    /// answer when it closed (in flight, or not yet sent because the server
    /// fell behind).
    pub unfinished: u64,
    /// Posts answered 2xx over the whole run, warm-up and stragglers
    /// included: every one of them must be in the database afterwards.
    pub posts_acknowledged: u64,
    /// Posts sent whose answer never came (timed out, connection lost, cut
    /// off when the run ended): the server may or may not have stored them.
    pub posts_unanswered: u64,
}

impl WorkerResults {
    pub fn merge(&mut self, other: &WorkerResults) {
        self.reads.merge(&other.reads);
        self.writes.merge(&other.writes);
        self.unfinished += other.unfinished;
        self.posts_acknowledged += other.posts_acknowledged;
        self.posts_unanswered += other.posts_unanswered;
    }

    /// Merges every worker's results into one.
    pub fn merge_all<'a>(workers: impl IntoIterator<Item = &'a WorkerResults>) -> WorkerResults {
        let mut all = WorkerResults::default();
        for w in workers {
            all.merge(w);
        }
        all
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn responses_are_counted_by_status_class() {
        let mut r = Results::new();
        for status in [200, 201, 304, 404, 500, 503, 99, 600] {
            r.record(ms(1), status, 10);
        }
        assert_eq!(r.status, [2, 0, 2, 1, 1, 2]);
        assert_eq!(r.responses(), 8);
        assert_eq!(r.body_bytes, 80);
    }

    #[test]
    fn merging_adds_histograms_counts_errors_and_bytes() {
        let mut a = Results::new();
        let mut b = Results::new();
        for i in 1..=100 {
            a.record(ms(i), 200, 1000);
        }
        b.record(Duration::from_secs(3), 503, 5);
        b.record_error("timeout");
        b.record_error("timeout");
        a.record_error("connect: refused");
        a.merge(&b);
        assert_eq!(a.latency_us.len(), 101);
        assert_eq!(a.status[2], 100);
        assert_eq!(a.status[5], 1);
        assert_eq!(a.body_bytes, 100_005);
        assert_eq!(a.error_count(), 3);
        assert_eq!(a.errors.get("timeout"), Some(&2));
        // The 3 s outlier is the merged maximum, within 0.1 %.
        let max = a.latency_us.max() as f64;
        assert!((max - 3_000_000.0).abs() / 3_000_000.0 < 0.001, "{max}");
        let p50 = a.latency_us.value_at_quantile(0.5) as f64;
        assert!((p50 - 51_000.0).abs() < 100.0, "{p50}");
    }

    #[test]
    fn merging_workers_keeps_reads_and_writes_apart() {
        let mut w1 = WorkerResults::default();
        w1.reads.record(ms(2), 200, 700);
        w1.unfinished = 1;
        let mut w2 = WorkerResults::default();
        w2.writes.record(ms(9), 201, 300);
        w2.reads.record(ms(4), 200, 700);
        w2.unfinished = 2;
        let all = WorkerResults::merge_all([&w1, &w2]);
        assert_eq!(all.reads.responses(), 2);
        assert_eq!(all.writes.responses(), 1);
        assert_eq!(all.writes.status[2], 1);
        assert_eq!(all.reads.body_bytes, 1400);
        assert_eq!(all.unfinished, 3);
    }

    #[test]
    fn a_sub_microsecond_latency_is_recorded_as_one_microsecond() {
        let mut r = Results::new();
        r.record(Duration::from_nanos(10), 200, 0);
        assert_eq!(r.latency_us.min(), 1);
    }

    #[test]
    fn merging_nothing_gives_empty_results() {
        let all = WorkerResults::merge_all([]);
        assert_eq!(all.reads.responses() + all.writes.responses() + all.unfinished, 0);
        assert!(all.reads.latency_us.is_empty());
    }
}
