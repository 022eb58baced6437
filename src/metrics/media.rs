//! Picture metrics: uploads by result, the time each took to process, the
//! refusals by quota, and the bytes stored (set by `app::media` after each
//! change, from the store's count).

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ResultLabel {
    /// `stored`, `existing`, `unsupported`, `undecodable`, `too_many_pixels`,
    /// `too_large`, `quota_user`, `quota_total`, `busy`.
    pub result: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct QuotaLabel {
    /// `user` or `total`.
    pub quota: &'static str,
}

/// Cheap to clone: each metric is an `Arc`.
#[derive(Clone)]
pub struct MediaMetrics {
    uploads: Family<ResultLabel, Counter>,
    processing: Histogram,
    quota_refusals: Family<QuotaLabel, Counter>,
    stored_bytes: Gauge,
    stored_files: Gauge,
}

impl MediaMetrics {
    pub fn new(r: &mut Registry) -> MediaMetrics {
        let m = MediaMetrics {
            uploads: Family::default(),
            // 5 ms to about 40 s.
            processing: Histogram::new(exponential_buckets(0.005, 2.0, 14)),
            quota_refusals: Family::default(),
            stored_bytes: Gauge::default(),
            stored_files: Gauge::default(),
        };
        r.register("pith_media_uploads", "Picture uploads, by how they ended", m.uploads.clone());
        r.register(
            "pith_media_processing_duration_seconds",
            "Time to decode, shrink and re-encode one picture, its wait for the pool included",
            m.processing.clone(),
        );
        r.register("pith_media_quota_refusals", "Uploads refused by a quota, by quota", m.quota_refusals.clone());
        r.register("pith_media_stored_bytes", "Bytes of stored pictures and thumbnails", m.stored_bytes.clone());
        r.register("pith_media_stored_files", "Stored pictures", m.stored_files.clone());
        m
    }

    pub fn upload(&self, result: &'static str) {
        self.uploads.get_or_create(&ResultLabel { result }).inc();
        if let Some(quota) = result.strip_prefix("quota_") {
            let quota = if quota == "user" { "user" } else { "total" };
            self.quota_refusals.get_or_create(&QuotaLabel { quota }).inc();
        }
    }

    pub fn processed(&self, seconds: f64) {
        self.processing.observe(seconds);
    }

    pub fn set_stored(&self, files: i64, bytes: i64) {
        self.stored_files.set(files);
        self.stored_bytes.set(bytes);
    }
}
