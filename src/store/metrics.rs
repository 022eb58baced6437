//! The storage engine's instruments: the writer's batch sizes and commit
//! latency, the checkpoints' durations, and the database's files (whose
//! sizes are read when `/metrics` is scraped). The writer and checkpointer
//! threads hold clones and record with one atomic update per event.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::Histogram;

/// Which kind of checkpoint ran (`PRAGMA wal_checkpoint(MODE)`) and who ran it.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct CheckpointLabels {
    pub mode: &'static str,
    /// `checkpointer` (the once-a-second thread) or `writer` (the WAL bound).
    pub by: &'static str,
}

/// Cheap to clone: every field is an `Arc`.
#[derive(Clone)]
pub struct StoreMetrics {
    /// Writes committed together in one transaction.
    pub batch_size: Histogram,
    /// Seconds from BEGIN to the end of COMMIT of one batch (the fsync included).
    pub commit_seconds: Histogram,
    pub checkpoint_seconds: Family<CheckpointLabels, Histogram>,
    /// The database file; its `-wal` sits beside it.
    db: Arc<PathBuf>,
}

/// Batch sizes 1, 2, 4 ... 512 (the default `--max-batch`) and beyond.
fn batch_buckets() -> Histogram {
    Histogram::new([1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 512.0, 1024.0])
}

/// From 100 µs (a commit on a fast SSD) to 5 s (a checkpoint of a large WAL on an SD card).
pub fn disk_buckets() -> Histogram {
    Histogram::new([0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0])
}

impl StoreMetrics {
    pub fn new(db: &Path) -> StoreMetrics {
        StoreMetrics {
            batch_size: batch_buckets(),
            commit_seconds: disk_buckets(),
            checkpoint_seconds: Family::new_with_constructor(disk_buckets),
            db: Arc::new(db.to_owned()),
        }
    }

    pub fn commit(&self, writes: usize, took: Duration) {
        self.batch_size.observe(writes as f64);
        self.commit_seconds.observe(took.as_secs_f64());
    }

    pub fn checkpoint(&self, mode: &'static str, by: &'static str, took: Duration) {
        self.checkpoint_seconds.get_or_create(&CheckpointLabels { mode, by }).observe(took.as_secs_f64());
    }

    /// Bytes of the database file and of its WAL (0 when absent).
    pub fn file_sizes(&self) -> (u64, u64) {
        let size = |p: &Path| std::fs::metadata(p).map(|m| m.len()).unwrap_or(0);
        let wal = PathBuf::from(format!("{}-wal", self.db.display()));
        (size(&self.db), size(&wal))
    }
}
