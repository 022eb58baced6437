//! Prometheus metrics (docs/METRICS.md): the registry each `App` owns and
//! where it is served (main listener, its own, or nowhere). This module
//! records and samples; `api::metrics` serves `/metrics`.
//!
//! Counters and histograms are recorded where things happen (the request
//! middleware in `http`, the cache, the writer and checkpointer through
//! `store::StoreMetrics`); sizes and counts that already exist elsewhere
//! (cache bytes, live sockets, file sizes, memory) are sampled only when
//! `/metrics` is scraped, so they cost nothing in between.

pub mod config;
pub mod http;
pub mod media;
mod process;

use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::info::Info;
use prometheus_client::registry::Registry;

pub use config::MetricsConfig;

use crate::cache::TopicCache;
use crate::live::Hub;
use crate::store::StoreMetrics;

/// The OpenMetrics text format, which Prometheus reads (and prefers).
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Where `/metrics` is served.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    MainListener = 0,
    OwnListener = 1,
    Off = 2,
}

/// Gauges set from their sources at each scrape.
#[derive(Default)]
struct Sampled {
    live_sockets: Gauge,
    live_channels: Gauge,
    live_subscriptions: Gauge,
    live_pending_bytes: Gauge,
    cache_bytes: Gauge,
    cache_budget_bytes: Gauge,
    cache_topics: Gauge,
    db_bytes: Gauge,
    wal_bytes: Gauge,
    resident_bytes: Gauge,
    virtual_bytes: Gauge,
}

pub struct Metrics {
    registry: Registry,
    pub http: http::HttpMetrics,
    sampled: Sampled,
    store: Option<StoreMetrics>,
    /// A `Mode`; set before the router is built (see `set_mode`).
    mode: AtomicU8,
    /// `--metrics-access any`: the main listener's `/metrics` answers
    /// every client, not only local ones.
    public: AtomicBool,
    /// Mail delivered and given up, and the outbox as the sender last saw it.
    mail: MailMetrics,
    /// Picture uploads, their processing and what is stored.
    pub media: media::MediaMetrics,
}

#[derive(Default)]
struct MailMetrics {
    sent: Counter,
    failed: Counter,
    queued: Gauge,
    given_up: Gauge,
}

impl Metrics {
    pub fn new(store: Option<StoreMetrics>, cache: &TopicCache) -> Metrics {
        let http = http::HttpMetrics::new();
        let sampled = Sampled::default();
        let mut r = Registry::default();
        r.register("pith_build", "The running version", Info::new(vec![("version", env!("CARGO_PKG_VERSION"))]));
        r.register("pith_http_requests", "HTTP requests answered, by route template", http.requests.clone());
        r.register(
            "pith_http_request_duration_seconds",
            "Time from a request's arrival to its response head",
            http.duration.clone(),
        );
        r.register(
            "pith_http_fast_answers",
            "Cached answers a parked connection wrote without building a hyper connection (of pith_http_requests)",
            http.fast_answers.clone(),
        );
        register_live(&mut r, &sampled);
        register_cache(&mut r, &sampled, cache);
        if let Some(s) = &store {
            register_store(&mut r, &sampled, s);
        }
        let mail = MailMetrics::default();
        r.register("pith_mail_sent", "Mails the SMTP server took", mail.sent.clone());
        r.register("pith_mail_failed", "Mails given up after every attempt failed", mail.failed.clone());
        r.register(
            "pith_mail_queued",
            "Mails in the outbox waiting to be sent, as the sender last counted",
            mail.queued.clone(),
        );
        r.register(
            "pith_mail_given_up",
            "Mails in the outbox marked failed, as the sender last counted",
            mail.given_up.clone(),
        );
        let media = media::MediaMetrics::new(&mut r);
        r.register("process_resident_memory_bytes", "Resident memory of the process", sampled.resident_bytes.clone());
        r.register("process_virtual_memory_bytes", "Virtual memory of the process", sampled.virtual_bytes.clone());
        Metrics {
            registry: r,
            http,
            sampled,
            store,
            mode: AtomicU8::new(Mode::MainListener as u8),
            public: AtomicBool::new(false),
            mail,
            media,
        }
    }

    pub fn mail_sent(&self) {
        self.mail.sent.inc();
    }

    pub fn mail_failed(&self) {
        self.mail.failed.inc();
    }

    /// The outbox's counts, from the sender's last look.
    pub fn set_outbox(&self, queued: i64, given_up: i64) {
        self.mail.queued.set(queued);
        self.mail.given_up.set(given_up);
    }

    /// Call before `server::run`: the router reads it when it is built.
    pub fn set_mode(&self, mode: Mode) {
        self.mode.store(mode as u8, Ordering::Relaxed);
    }

    /// Call with `set_mode`: whether every client may read `/metrics` on
    /// the main listener (`--metrics-access any`).
    pub fn set_public(&self, public: bool) {
        self.public.store(public, Ordering::Relaxed);
    }

    pub fn is_public(&self) -> bool {
        self.public.load(Ordering::Relaxed)
    }

    pub fn mode(&self) -> Mode {
        match self.mode.load(Ordering::Relaxed) {
            0 => Mode::MainListener,
            1 => Mode::OwnListener,
            _ => Mode::Off,
        }
    }

    /// Samples the gauges and encodes everything.
    pub fn render(&self, cache: &TopicCache, live: &Hub) -> Result<String, std::fmt::Error> {
        let s = &self.sampled;
        let set = |g: &Gauge, v: usize| g.set(i64::try_from(v).unwrap_or(i64::MAX));
        let set64 = |g: &Gauge, v: u64| g.set(i64::try_from(v).unwrap_or(i64::MAX));
        set(&s.live_sockets, live.sockets());
        set(&s.live_channels, live.channels());
        set(&s.live_subscriptions, live.subscriptions());
        set(&s.live_pending_bytes, live.pending());
        set(&s.cache_bytes, cache.bytes());
        set(&s.cache_budget_bytes, cache.budget());
        set(&s.cache_topics, cache.topics());
        if let Some(store) = &self.store {
            let (db, wal) = store.file_sizes();
            set64(&s.db_bytes, db);
            set64(&s.wal_bytes, wal);
        }
        if let Some((resident, virt)) = process::memory() {
            set64(&s.resident_bytes, resident);
            set64(&s.virtual_bytes, virt);
        }
        let mut out = String::with_capacity(16 * 1024);
        prometheus_client::encoding::text::encode(&mut out, &self.registry)?;
        Ok(out)
    }
}

fn register_live(r: &mut Registry, s: &Sampled) {
    r.register("pith_live_sockets", "Live connections open (WebSocket and SSE)", s.live_sockets.clone());
    r.register("pith_live_channels", "Topic and community channels with subscribers", s.live_channels.clone());
    r.register("pith_live_subscriptions", "Subscriptions over all live connections", s.live_subscriptions.clone());
    r.register(
        "pith_live_pending_bytes",
        "Output queued on live sockets the kernel would not take yet",
        s.live_pending_bytes.clone(),
    );
}

fn register_cache(r: &mut Registry, s: &Sampled, cache: &TopicCache) {
    r.register("pith_cache_hits", "Rendered-response lookups answered from the cache", cache.hits.clone());
    r.register(
        "pith_cache_misses",
        "Rendered-response lookups that rendered or waited for a render",
        cache.misses.clone(),
    );
    r.register("pith_cache_bytes", "Bytes held by the rendered-response cache", s.cache_bytes.clone());
    r.register("pith_cache_budget_bytes", "The cache's byte budget (--cache-mb)", s.cache_budget_bytes.clone());
    r.register("pith_cache_topics", "Topics with at least one cached rendering", s.cache_topics.clone());
}

fn register_store(r: &mut Registry, s: &Sampled, store: &StoreMetrics) {
    r.register("pith_writer_batch_size", "Writes committed together in one transaction", store.batch_size.clone());
    r.register(
        "pith_writer_commit_duration_seconds",
        "Time to run and commit one batch of writes (fsync included)",
        store.commit_seconds.clone(),
    );
    r.register(
        "pith_checkpoint_duration_seconds",
        "Time of one WAL checkpoint, by mode and by who ran it",
        store.checkpoint_seconds.clone(),
    );
    r.register("pith_db_bytes", "Size of the database file", s.db_bytes.clone());
    r.register("pith_wal_bytes", "Size of the write-ahead log file", s.wal_bytes.clone());
}
