//! The rendered-response cache: a topic rendered once, as the API's JSON
//! or as the signed-out HTML page, with gzip, zstd and Brotli variants and
//! a strong ETag for each, served to every reader until a write to that
//! topic evicts it.
//!
//! Entries are grouped by topic: one slot per topic holds every variant
//! (JSON and page in each post order, and single posts' HTML for the live
//! script), so `invalidate(topic)` drops them all at once and the LRU
//! evicts whole topics.
//!
//! Freshness: each topic has a generation number, bumped by every
//! invalidation. A renderer notes the generation *before* it reads the
//! database and may insert only if it is unchanged, so a render that raced
//! with a write can never put stale bytes back after the write evicted them.
//!
//! Views: the cached bytes are always the *public* view of a topic. When
//! moderators removed something in it, the entry also records who may see
//! more (`Restricted`), so the handler can tell, without a query for
//! anonymous readers, whether a request needs a private rendering instead.
//!
//! Writes in place: a vote on a topic changes one number in its API
//! renderings, and a new post adds one to their list. `patch` puts the
//! change into the cached bytes instead of evicting them (a voted or
//! replied-to topic was otherwise rendered again at every write). Writes
//! may take effect in another order than they committed (each in its own
//! task). A post goes where its order puts it, and not twice, so order
//! does not matter; votes are numbered in the order they committed, and a
//! topic remembers the number of the last score it took: an older one
//! changes nothing, the newer score already counts it.
//!
//! Single flight: when many requests miss the same entry at once, one
//! renders and the others wait for its bytes. An invalidation also forgets
//! the renders in flight, so a read that starts after a write never waits
//! on a render that began before it.
//!
//! Encodings: the gzip variant is made by the first request that takes
//! it, as it always was; zstd and Brotli by a thread of their own
//! (`maker`), and each is charged to the budget once made. Which variant
//! a request gets: `encoding` (its `Accept-Encoding`, q-values and all).
//!
//! # Layout
//! - `encoding`: `Accept-Encoding`, the codings and their levels.
//! - `maker`: the thread that makes the zstd and Brotli variants.

pub mod encoding;
pub mod maker;

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use lru::LruCache;

pub use self::encoding::{Accepted, Encoding};
use self::maker::{Charge, Maker};
use crate::model::Restricted;
use crate::model::paging::PageFill;
use crate::store::{PostCursor, PostSort};

/// What the bytes are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Json,
    Html,
}

/// One rendered response.
#[derive(Debug)]
pub struct Rendered {
    pub body: Bytes,
    /// The gzip, zstd and Brotli variants (`coded_index`), each made when
    /// first asked for (so a topic nobody asks compressed costs neither
    /// the CPU nor the memory); `None` inside when the coding would not
    /// save anything. Boxed: most renderings have few of them.
    coded: [OnceLock<Option<Box<Coded>>>; 3],
    /// A strong validator: `"` + hash of `body` + `"`, kept as the header
    /// value so a hit copies no string.
    pub etag: HeaderValue,
    /// `None`: nothing in the topic is removed, every viewer gets `body`.
    pub restricted: Option<Restricted>,
    pub format: Format,
    /// For the first API page of a topic that holds all of it: how full
    /// that page is, so a new post can be added in place while it stays
    /// one page (`app::read::add_post`). `None` for anything else.
    pub fill: Option<PageFill>,
    /// Whether a reader was handed this rendering since it was made. A
    /// write renders again at once only what was read (`invalidate`): a
    /// topic written again before anyone reads it would otherwise be
    /// rendered for nobody at every write.
    read: AtomicBool,
    /// One bit per coding the maker was asked for, so it is asked once.
    jobs: AtomicU8,
    /// Set when the cache lets go of this rendering (a write, the LRU, a
    /// newer render): the maker stops working on it.
    retired: AtomicBool,
    /// Bytes of variants made since it was cached, charged to the budget
    /// on top of `weight`'s estimate.
    charged: AtomicUsize,
}

/// A compressed variant and its own strong ETag (`Encoding::etag_suffix`).
#[derive(Debug)]
pub struct Coded {
    body: Bytes,
    etag: HeaderValue,
}

/// `coded`'s slot of each compressed coding.
fn coded_index(encoding: Encoding) -> Option<usize> {
    match encoding {
        Encoding::Identity => None,
        Encoding::Gzip => Some(0),
        Encoding::Zstd => Some(1),
        Encoding::Brotli => Some(2),
    }
}

/// Bodies at least this large are compressed (on demand) for clients that ask.
const GZIP_MIN: usize = 256;

/// Bodies at least this large are gzipped on a blocking thread (see
/// `gzip_ready`), not inline on an async worker.
const GZIP_INLINE_MAX: usize = 64 * 1024;

impl Rendered {
    pub fn new(body: Vec<u8>) -> Rendered {
        Rendered::restricted(body, None)
    }

    /// A public JSON rendering of a topic with removed content in it.
    pub fn restricted(body: Vec<u8>, restricted: Option<Restricted>) -> Rendered {
        Rendered::of(Format::Json, body, restricted)
    }

    /// A public HTML rendering (the signed-out page, or one post).
    pub fn html(body: Vec<u8>, restricted: Option<Restricted>) -> Rendered {
        Rendered::of(Format::Html, body, restricted)
    }

    /// Another body for the same view: what `TopicCache::patch` makes.
    pub fn with_body(&self, body: Vec<u8>) -> Rendered {
        Rendered::of(self.format, body, self.restricted.clone()).with_fill(self.fill)
    }

    pub fn with_fill(mut self, fill: Option<PageFill>) -> Rendered {
        self.fill = fill;
        self
    }

    fn of(format: Format, body: Vec<u8>, restricted: Option<Restricted>) -> Rendered {
        let etag = format!("\"{:032x}\"", xxhash_rust::xxh3::xxh3_128(&body));
        let etag = HeaderValue::from_str(&etag).unwrap_or_else(|_| HeaderValue::from_static("\"\""));
        let coded = [OnceLock::new(), OnceLock::new(), OnceLock::new()];
        if body.len() < GZIP_MIN {
            for c in &coded {
                let _ = c.set(None);
            }
        }
        Rendered {
            body: in_size_class(body),
            coded,
            etag,
            restricted,
            format,
            fill: None,
            read: AtomicBool::new(false),
            jobs: AtomicU8::new(0),
            retired: AtomicBool::new(false),
            charged: AtomicUsize::new(0),
        }
    }

    /// Notes that a reader got this rendering. Written only the first
    /// time: every hit reads the flag, and a store on each one would make
    /// the readers of a busy topic fight over its cache line.
    fn mark_read(&self) {
        if !self.read.load(Ordering::Relaxed) {
            self.read.store(true, Ordering::Relaxed);
        }
    }

    /// Whether a reader got this rendering since it was made.
    pub fn was_read(&self) -> bool {
        self.read.load(Ordering::Relaxed)
    }

    /// The gzip variant, compressing now if no request asked for it yet.
    pub fn gzip(&self) -> Option<&Bytes> {
        self.gzip_coded().map(|c| &c.body)
    }

    fn gzip_coded(&self) -> Option<&Coded> {
        self.coded[0]
            .get_or_init(|| self.coded(Encoding::Gzip, encoding::encode(&self.body, Encoding::Gzip, &|| true)))
            .as_deref()
    }

    /// The variant in `encoding` if it is made (gzip: made now if not).
    fn variant(&self, encoding: Encoding) -> Option<&Coded> {
        match encoding {
            Encoding::Gzip => self.gzip_coded(),
            _ => self.made(encoding),
        }
    }

    /// The variant in `encoding` if it is made already.
    fn made(&self, encoding: Encoding) -> Option<&Coded> {
        coded_index(encoding).and_then(|i| self.coded[i].get()).and_then(Option::as_deref)
    }

    /// The size of the variant in `encoding` if it can be sent now: made,
    /// or gzip, which is made when first sent (size unknown till then).
    fn size_now(&self, encoding: Encoding) -> Option<usize> {
        match (encoding, self.made(encoding)) {
            (_, Some(coded)) => Some(coded.body.len()),
            (Encoding::Gzip, None) if !self.settled(Encoding::Gzip) => Some(usize::MAX),
            _ => None,
        }
    }

    /// Whether the variant in `encoding` is made or known not to be worth it.
    fn settled(&self, encoding: Encoding) -> bool {
        coded_index(encoding).is_none_or(|i| self.coded[i].get().is_some())
    }

    /// A variant of this body as it will be kept.
    fn coded(&self, encoding: Encoding, out: Option<Vec<u8>>) -> Option<Box<Coded>> {
        let base = self.etag.as_bytes();
        let etag = [&base[..base.len().saturating_sub(1)], encoding.etag_suffix().as_bytes(), b"\""].concat();
        let etag = HeaderValue::from_bytes(&etag).ok()?;
        Some(Box::new(Coded { body: in_size_class(out?), etag }))
    }

    /// Keeps the maker's `out` as the variant in `encoding`; returns the
    /// bytes it adds, to charge to the budget.
    fn set_encoded(&self, encoding: Encoding, out: Option<Vec<u8>>) -> usize {
        let Some(i) = coded_index(encoding) else { return 0 };
        let coded = self.coded(encoding, out);
        let added = coded.as_ref().map_or(0, |c| size_class(c.body.len()) + c.etag.len());
        if self.coded[i].set(coded).is_err() {
            return 0;
        }
        added
    }

    /// Claims the maker's one job for `encoding`: false when the variant is
    /// settled or a job for it was claimed already.
    fn take_job(&self, encoding: Encoding) -> bool {
        let bit = 1 << encoding as u8;
        !self.settled(encoding) && self.jobs.fetch_or(bit, Ordering::Relaxed) & bit == 0
    }

    /// Gives back a job that could not be queued, so a later request asks again.
    fn drop_job(&self, encoding: Encoding) {
        self.jobs.fetch_and(!(1 << encoding as u8), Ordering::Relaxed);
    }

    /// The off-path codings this client ranks above the best variant it
    /// can get now: the ones worth asking the maker for. Not Brotli from a
    /// client that takes zstd as readily: at the levels here zstd comes out
    /// as small for a fraction of the CPU (docs/PERFORMANCE.md, "Heavy
    /// answers on the wire"), so Brotli is made for the clients without zstd.
    fn wanted<'a>(&'a self, accepted: &'a Accepted) -> impl Iterator<Item = Encoding> + 'a {
        let now = accepted.choose(|e| self.size_now(e));
        // A client that weighs identity above every coding wants none.
        let any = accepted.choose(|_| Some(usize::MAX)) != Encoding::Identity;
        accepted
            .ranked()
            .take_while(move |e| any && *e != now)
            .filter(|e| match e {
                Encoding::Zstd => true,
                Encoding::Brotli => accepted.q(Encoding::Zstd) < accepted.q(Encoding::Brotli),
                _ => false,
            })
            .filter(|e| !self.settled(*e))
    }

    fn retire(&self) {
        self.retired.store(true, Ordering::Relaxed);
    }

    /// Whether the cache let go of this rendering.
    pub fn retired(&self) -> bool {
        self.retired.load(Ordering::Relaxed)
    }

    /// Makes sure the gzip variant of a large body exists before `respond`
    /// runs on an async worker when the answer will be gzip: a big topic
    /// takes milliseconds to compress.
    pub async fn gzip_ready(self: &Arc<Self>, headers: &HeaderMap) {
        if self.gzip_pending(headers) {
            let r = self.clone();
            // If the blocking pool fails, `respond` compresses inline instead.
            let _ = tokio::task::spawn_blocking(move || {
                r.gzip();
            })
            .await;
        }
    }

    /// True when answering a request with these headers would first have
    /// to compress a large body (see `gzip_ready`).
    pub fn gzip_pending(&self, headers: &HeaderMap) -> bool {
        self.gzip_pending_for(&Accepted::parse(headers.get(header::ACCEPT_ENCODING).map(HeaderValue::as_bytes)))
    }

    /// `gzip_pending` for what a request accepts.
    pub fn gzip_pending_for(&self, accepted: &Accepted) -> bool {
        self.coded[0].get().is_none()
            && self.body.len() >= GZIP_INLINE_MAX
            && accepted.choose(|e| self.size_now(e)) == Encoding::Gzip
    }

    /// What the entry is charged against the budget. The gzip variant is
    /// charged up front (a fixed share of the body, about what JSON and
    /// HTML compress to), so the budget holds whether or not it is made;
    /// zstd and Brotli when the maker made them (`charged`).
    fn weight(&self) -> usize {
        let restricted = self.restricted.as_ref().map_or(0, |r| r.authors.len() * 8);
        let gzip = if self.body.len() >= GZIP_MIN { self.body.len() / 4 } else { 0 };
        let made = self.charged.load(Ordering::Relaxed);
        size_class(self.body.len()) + gzip + made + self.etag.len() + restricted + 128
    }
}

/// The body in an allocation of its size class (`size_class`). A write
/// evicts its topic, and the render that replaces it is a little larger
/// each time: in allocations of the exact size, every eviction left a hole
/// too small for the next body, and malloc's heap grew with the write rate
/// (docs/PERFORMANCE.md, "Memory"). A freed body of a class fits the next
/// one of that class exactly.
fn in_size_class(body: Vec<u8>) -> Bytes {
    let class = size_class(body.len());
    if body.capacity() == class {
        return Bytes::from(body);
    }
    let mut sized = Vec::with_capacity(class);
    sized.extend_from_slice(&body);
    Bytes::from(sized)
}

/// `len` rounded up to one of four sizes per doubling (the size classes of
/// jemalloc and mimalloc): at most a quarter more, about 8 % on
/// average. Below 1 KiB, `len` itself: small bodies are few and cheap.
fn size_class(len: usize) -> usize {
    if len < 1024 {
        return len;
    }
    let step = len.next_power_of_two() / 8;
    len.div_ceil(step) * step
}

/// Which rendering of a topic an entry is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Variant {
    /// `GET /api/v1/topics/{id}?sort=`.
    Json(PostSort),
    /// `GET /api/v1/topics/{id}?sort=&html=true`: posts with `body_html` too.
    JsonHtml(PostSort),
    /// The signed-out page `/t/{id}?sort=`.
    Page(PostSort),
    /// One post's HTML, as the live script inserts it (signed out).
    Post(i64),
    /// A later page of a huge topic's API rendering (`?after=`, its order
    /// in the cursor), with `body_html` when true.
    JsonAfter(PostCursor, bool),
    /// A later page of a huge topic's signed-out page (`/t/{id}?after=`).
    PageAfter(PostCursor),
    /// The signed-out page of the thread under one post
    /// (`/t/{id}?thread={post}`).
    Thread(PostSort, i64),
}

impl Variant {
    /// The API's rendering in `sort` order, with `body_html` when `html`.
    pub fn json(sort: PostSort, html: bool) -> Variant {
        if html { Variant::JsonHtml(sort) } else { Variant::Json(sort) }
    }

    /// `json`'s arguments back, for the first page of an API rendering;
    /// `None` for a later page, a page or a post fragment.
    pub fn json_params(self) -> Option<(PostSort, bool)> {
        match self {
            Variant::Json(sort) => Some((sort, false)),
            Variant::JsonHtml(sort) => Some((sort, true)),
            Variant::Page(_)
            | Variant::Post(_)
            | Variant::JsonAfter(..)
            | Variant::PageAfter(_)
            | Variant::Thread(..) => None,
        }
    }
}

/// A cache key: one topic and one of its renderings.
pub type Key = (i64, Variant);

/// A render in progress that later requests for the same key wait on.
type Flight = Arc<tokio::sync::OnceCell<Arc<Rendered>>>;

/// Every cached rendering of one topic: a few (plus the post fragments
/// asked for since the topic's last write, which evicted them all), so a
/// list, scanned on a hit: one pointer to follow where a map took more.
#[derive(Default)]
struct Slot {
    variants: Vec<(Variant, Arc<Rendered>)>,
    weight: usize,
}

impl Slot {
    /// Stores `value`, returning the rendering it replaces.
    fn insert(&mut self, variant: Variant, value: Arc<Rendered>) -> Option<Arc<Rendered>> {
        match self.variants.iter_mut().find(|(v, _)| *v == variant) {
            Some((_, old)) => Some(std::mem::replace(old, value)),
            None => {
                self.variants.push((variant, value));
                None
            }
        }
    }
}

struct Inner {
    entries: LruCache<i64, Slot>,
    /// Every cached rendering by its full key, beside `entries`: a hit reads
    /// one bucket of this table, where `entries` took three dependent
    /// memory reads (its list node, the slot's list, the rendering), each a
    /// cache miss under a uniform load (measured: most of the hot path's
    /// own time, docs/PERFORMANCE.md "Cached reads without hyper").
    index: HashMap<Key, Arc<Rendered>, foldhash::fast::RandomState>,
    /// Bumped by `clear`: a render begun before it may not be stored.
    epoch: u64,
    generations: HashMap<i64, u64>,
    /// The number of the last vote whose score each topic took
    /// (`rescore`); cleared with `generations`.
    score_seqs: HashMap<i64, u64>,
    in_flight: HashMap<Key, Flight>,
    bytes: usize,
}

impl Inner {
    /// The rendering of `key`, if cached. A hit moves its topic to the
    /// front of the LRU list only when the cache is more than half full:
    /// below that nothing is evicted soon, and moving an entry writes to
    /// it and to both its neighbours, scattered in memory, on every read
    /// (measured: most of the lookup's cost, on the hot path).
    fn lookup(&mut self, key: Key, budget: usize) -> Option<Arc<Rendered>> {
        let found = self.index.get(&key).cloned();
        if let Some(hit) = &found {
            hit.mark_read();
            if self.bytes > budget / 2 {
                self.entries.promote(&key.0);
            }
        }
        found
    }

    /// Whether `topic` took the score of vote `seq`, or of a later one.
    fn took_score(&self, topic: i64, seq: u64) -> bool {
        self.score_seqs.get(&topic).is_some_and(|&last| last >= seq)
    }

    /// The ticket a render of `topic` takes now.
    fn ticket(&self, topic: i64) -> Ticket {
        Ticket(self.epoch, self.generations.get(&topic).copied().unwrap_or(0))
    }

    /// Stores a render unless the topic changed since `ticket` was taken.
    fn insert(&mut self, key: Key, ticket: Ticket, value: Arc<Rendered>, budget: usize) {
        let weight = value.weight();
        if weight > budget / 4 {
            return; // one huge topic must not flush everything else
        }
        if self.ticket(key.0) != ticket {
            return;
        }
        let slot = self.entries.get_or_insert_mut(key.0, Slot::default);
        let old = slot.insert(key.1, value.clone()).map_or(0, |old| {
            old.retire();
            old.weight()
        });
        slot.weight = slot.weight + weight - old;
        self.bytes = self.bytes + weight - old;
        self.index.insert(key, value);
        self.shrink(budget);
    }

    /// What a write to `topic` does to it: renders of it in flight voided
    /// (`void`), its slot taken out (and returned, to be dropped after the
    /// lock).
    fn evict(&mut self, topic: i64) -> Option<Slot> {
        self.void(topic);
        self.remove(topic)
    }

    /// Bumps `topic`'s generation (renders begun before may not be
    /// stored) and forgets its renders in flight, as every write does.
    fn void(&mut self, topic: i64) {
        *self.generations.entry(topic).or_insert(0) += 1;
        // Only concurrent misses are in flight: a short map to scan.
        self.in_flight.retain(|key, _| key.0 != topic);
        // Generations only matter while a render may be in flight; keep
        // the map from growing with every topic ever written.
        if self.generations.len() > 1_000_000 {
            self.epoch += 1;
            self.generations.clear();
            self.score_seqs.clear();
            self.clear();
        }
    }

    /// Takes one rendering of a topic out of both maps, returned to be
    /// dropped after the lock.
    fn drop_variant(&mut self, key: Key) -> Option<Arc<Rendered>> {
        let slot = self.entries.peek_mut(&key.0)?;
        let at = slot.variants.iter().position(|(v, _)| *v == key.1)?;
        let (_, old) = slot.variants.swap_remove(at);
        old.retire();
        let weight = old.weight();
        slot.weight -= weight;
        let empty = slot.variants.is_empty();
        self.bytes -= weight;
        self.index.remove(&key);
        if empty {
            self.entries.pop(&key.0);
        }
        Some(old)
    }

    /// Takes `topic`'s slot out of both maps.
    fn remove(&mut self, topic: i64) -> Option<Slot> {
        let slot = self.entries.pop(&topic)?;
        self.forget(topic, &slot);
        Some(slot)
    }

    /// Drops the index's entries of a slot taken out of `entries`.
    fn forget(&mut self, topic: i64, slot: &Slot) {
        self.bytes -= slot.weight;
        for (variant, rendered) in &slot.variants {
            rendered.retire();
            self.index.remove(&(topic, *variant));
        }
    }

    fn clear(&mut self) {
        for rendered in self.index.values() {
            rendered.retire();
        }
        self.entries.clear();
        self.index.clear();
        self.bytes = 0;
    }

    /// Charges `added` more bytes to `key`'s rendering, if `rendered` is
    /// still the one cached, and evicts to stay within `budget`.
    fn charge(&mut self, key: Key, rendered: &Arc<Rendered>, added: usize, budget: usize) {
        if !self.index.get(&key).is_some_and(|cached| Arc::ptr_eq(cached, rendered)) {
            return;
        }
        let Some(slot) = self.entries.peek_mut(&key.0) else { return };
        rendered.charged.fetch_add(added, Ordering::Relaxed);
        slot.weight += added;
        self.bytes += added;
        self.shrink(budget);
    }

    /// Evicts the least recently used topics until the cache fits `budget`.
    fn shrink(&mut self, budget: usize) {
        while self.bytes > budget {
            match self.entries.pop_lru() {
                Some((topic, old)) => self.forget(topic, &old),
                None => break,
            }
        }
    }
}

/// The cache's setting (`--cache-mb`).
#[derive(Debug, Clone, clap::Args)]
pub struct CacheConfig {
    /// Byte budget of the rendered-response cache, in MiB. Default (`auto`):
    /// half of --memory-mb.
    #[arg(long, env = "PITH_CACHE_MB", default_value_t = 256)]
    pub cache_mb: usize,
}

pub struct TopicCache {
    /// Shared with the maker's thread, which charges what it makes.
    inner: Arc<Mutex<Inner>>,
    budget: usize,
    /// Makes the zstd and Brotli variants off the request path.
    maker: Maker,
    /// Lookups answered from the cache and lookups that had to render (or
    /// wait for a render), for `/metrics`: one atomic add each.
    pub hits: prometheus_client::metrics::counter::Counter,
    pub misses: prometheus_client::metrics::counter::Counter,
}

/// What `TopicCache::patch` makes of one cached rendering.
pub enum Patched {
    /// It already says what the write changed.
    Kept,
    /// It is replaced by this one.
    New(Rendered),
    /// It is evicted; its next reader renders it again.
    Evicted,
}

/// A ticket taken before rendering (epoch, generation); see the module comment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ticket(u64, u64);

impl TopicCache {
    pub fn new(budget_bytes: usize) -> TopicCache {
        TopicCache {
            inner: Arc::new(Mutex::new(Inner {
                entries: LruCache::unbounded(),
                index: HashMap::default(),
                epoch: 0,
                generations: HashMap::new(),
                score_seqs: HashMap::new(),
                in_flight: HashMap::new(),
                bytes: 0,
            })),
            budget: budget_bytes,
            maker: Maker::new(),
            hits: Default::default(),
            misses: Default::default(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        lock(&self.inner)
    }

    /// What the maker calls with the bytes of each variant it made.
    fn charge(&self) -> Charge {
        let (inner, budget) = (self.inner.clone(), self.budget);
        Box::new(move |key, rendered, added| lock(&inner).charge(key, rendered, added, budget))
    }

    /// Asks the maker for the zstd and Brotli variants of `key`'s cached
    /// `rendered` that a request accepting `accepted` would rather have
    /// than what it gets now; they are there for later requests.
    pub fn ask_encodings(&self, key: Key, rendered: &Arc<Rendered>, accepted: &Accepted) {
        // The maker runs zstd jobs first whatever the order asked.
        for encoding in rendered.wanted(accepted) {
            self.maker.ask(key, rendered, encoding, || self.charge());
        }
    }

    /// Gets `key`'s cached `rendered` ready to answer a request with
    /// `headers`: asks for the variants made off the request path
    /// (`ask_encodings`) and makes the gzip one now if it is the answer
    /// (`Rendered::gzip_ready`).
    pub async fn prepare(&self, key: Key, rendered: &Arc<Rendered>, headers: &HeaderMap) {
        let accepted = Accepted::parse(headers.get(header::ACCEPT_ENCODING).map(HeaderValue::as_bytes));
        self.ask_encodings(key, rendered, &accepted);
        rendered.gzip_ready(headers).await;
    }

    /// Waits until the maker has done every job asked of it so far (for
    /// tests and benchmarks, which look at what it made).
    pub async fn encoded(&self) {
        self.maker.flush(|| self.charge()).await;
    }

    /// The rendering of `key`, if cached, for a reader (it counts as read).
    pub fn get(&self, key: Key) -> Option<Arc<Rendered>> {
        self.lock().lookup(key, self.budget)
    }

    /// The cached render of `key`, or the result of `render` (run once for
    /// all concurrent callers that miss), which is then cached. The caller
    /// is a reader: the rendering counts as read.
    pub async fn get_or_render<E, F, Fut>(&self, key: Key, render: F) -> Result<Arc<Rendered>, E>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<Arc<Rendered>, E>>,
    {
        let flight = {
            let mut inner = self.lock();
            if let Some(hit) = inner.lookup(key, self.budget) {
                self.hits.inc();
                return Ok(hit);
            }
            self.misses.inc();
            inner.in_flight.entry(key).or_default().clone()
        };
        let result = self.fly(key, flight, render).await;
        if let Ok(rendered) = &result {
            rendered.mark_read();
        }
        result
    }

    /// Renders `key` ahead of its readers (after a write evicted it),
    /// unless it is cached or being rendered already; a reader who misses
    /// meanwhile waits for this render. The rendering does not count as
    /// read, so the next write does not render it again unless someone
    /// read it in between.
    pub async fn render_ahead<E, F, Fut>(&self, key: Key, render: F) -> Result<(), E>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<Arc<Rendered>, E>>,
    {
        let flight = {
            let mut inner = self.lock();
            if inner.index.contains_key(&key) || inner.in_flight.contains_key(&key) {
                return Ok(());
            }
            inner.in_flight.entry(key).or_default().clone()
        };
        self.fly(key, flight, render).await.map(drop)
    }

    /// Runs `render` as `flight`'s one render of `key` (or waits for the
    /// render another caller runs) and caches it.
    async fn fly<E, F, Fut>(&self, key: Key, flight: Flight, render: F) -> Result<Arc<Rendered>, E>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<Arc<Rendered>, E>>,
    {
        let result = flight
            .get_or_try_init(|| async {
                let ticket = self.ticket(key.0);
                let rendered = render().await?;
                self.insert(key, ticket, rendered.clone());
                Ok(rendered)
            })
            .await
            .cloned();
        let mut inner = self.lock();
        if inner.in_flight.get(&key).is_some_and(|f| Arc::ptr_eq(f, &flight)) {
            inner.in_flight.remove(&key);
        }
        result
    }

    /// Call before reading the data a render will use.
    pub fn ticket(&self, topic: i64) -> Ticket {
        self.lock().ticket(topic)
    }

    /// Stores a render unless the topic changed since `ticket` was taken.
    pub fn insert(&self, key: Key, ticket: Ticket, value: Arc<Rendered>) {
        self.lock().insert(key, ticket, value, self.budget);
    }

    /// Evicts every rendering of `topic` (JSON, pages, posts) and forgets
    /// the renders of it in flight; call after a write to it commits
    /// (`app::apply` does). Returns the renderings that were cached and
    /// read since they were made, for a caller that renders them again at
    /// once (`app::read::evict`): one nobody read is left to its next reader.
    pub fn invalidate(&self, topic: i64) -> Vec<Variant> {
        // The slot is dropped (its bodies freed) after the lock.
        let Some(slot) = self.lock().evict(topic) else { return Vec::new() };
        slot.variants.into_iter().filter(|(_, r)| r.was_read()).map(|(v, _)| v).collect()
    }

    /// After a write to `topic` committed that its cached renderings can
    /// take in place (a vote on it, a new post in it): `patch` makes each
    /// one's successor from it, or keeps it, or has it evicted (pages,
    /// which it cannot patch), and the renders in flight are voided, as
    /// after any write. `seq`, for a vote: its number, in commit order;
    /// nothing happens for a vote older than the last one the topic took
    /// (the newer score counts it). Returns `Some` when it had to evict
    /// everything instead (nothing cached, or a render or another write
    /// replaced a rendering meanwhile), with what `invalidate` returns.
    pub fn patch(
        &self,
        topic: i64,
        seq: Option<u64>,
        patch: impl Fn(Variant, &Rendered) -> Patched,
    ) -> Option<Vec<Variant>> {
        let stale = |inner: &Inner| seq.is_some_and(|seq| inner.took_score(topic, seq));
        // Twice: a concurrent write may replace the renderings between the
        // copy and the swap.
        for _ in 0..2 {
            let old: Vec<(Variant, Arc<Rendered>)> = {
                let inner = self.lock();
                if stale(&inner) {
                    return None;
                }
                match inner.entries.peek(&topic) {
                    Some(slot) => slot.variants.clone(),
                    None => break,
                }
            };
            // The copies and their hashes are made outside the lock.
            let new: Vec<(Variant, Patched)> = old.iter().map(|(v, r)| (*v, patch(*v, r))).collect();
            let mut inner = self.lock();
            if stale(&inner) {
                return None;
            }
            let unchanged = inner.entries.peek(&topic).is_some_and(|slot| {
                slot.variants.len() == old.len()
                    && slot.variants.iter().zip(&old).all(|((v, r), (ov, or))| v == ov && Arc::ptr_eq(r, or))
            });
            if !unchanged {
                continue;
            }
            inner.void(topic);
            if let Some(seq) = seq {
                inner.score_seqs.insert(topic, seq);
            }
            let ticket = inner.ticket(topic);
            let mut dropped = Vec::new();
            for (variant, patched) in new {
                // The old rendering goes first: the new one may not be
                // stored (too large for the budget), and the old must not stay.
                dropped.extend(match patched {
                    Patched::Kept => None,
                    Patched::Evicted => inner.drop_variant((topic, variant)),
                    Patched::New(rendered) => {
                        let old = inner.drop_variant((topic, variant));
                        inner.insert((topic, variant), ticket, Arc::new(rendered), self.budget);
                        old
                    }
                });
            }
            drop(inner);
            drop(dropped);
            return None;
        }
        if let Some(seq) = seq {
            let mut inner = self.lock();
            let last = inner.score_seqs.entry(topic).or_insert(0);
            *last = (*last).max(seq);
        }
        Some(self.invalidate(topic))
    }

    /// Drops every entry, and every render in flight may not be stored:
    /// for when invalidations from other nodes may have been missed.
    pub fn clear(&self) {
        let mut inner = self.lock();
        inner.epoch += 1;
        inner.in_flight.clear();
        inner.clear();
    }

    pub fn bytes(&self) -> usize {
        self.lock().bytes
    }

    /// The byte budget (`--cache-mb`).
    pub fn budget(&self) -> usize {
        self.budget
    }

    /// Topics with at least one cached rendering.
    pub fn topics(&self) -> usize {
        self.lock().entries.len()
    }
}

fn lock(inner: &Mutex<Inner>) -> MutexGuard<'_, Inner> {
    // A panic while holding this lock leaves the map consistent (every
    // mutation is a single call), so poisoning is safe to ignore.
    inner.lock().unwrap_or_else(|p| p.into_inner())
}

impl Default for TopicCache {
    fn default() -> Self {
        TopicCache::new(128 << 20)
    }
}

/// Who a response may be kept for.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Audience {
    /// Anyone: the cached public view.
    Public,
    /// Only the requesting user (`Cache-Control: private`): it shows removed
    /// content.
    Private,
}

/// What a render answers a request with: decided from the two request
/// headers that matter, so the router's `respond` and the parked
/// connection's fast path (`net::fast`) answer alike.
pub struct Answer<'a> {
    /// 200, or 304 when the client's `If-None-Match` holds the ETag.
    pub status: StatusCode,
    /// The body to send (none with a 304).
    pub body: Option<&'a Bytes>,
    /// The body's coding (and a 304's: the one a 200 would have had).
    pub encoding: Encoding,
    pub content_type: &'static str,
    /// The ETag of the variant sent.
    pub etag: &'a HeaderValue,
    pub vary: &'static str,
    pub cache_control: &'static str,
}

impl Rendered {
    /// The answer to a request with this `If-None-Match` value that
    /// accepts `accepted`: the best variant the client takes among those
    /// made (gzip is made now if it is the one), 304 when the client holds
    /// that variant's ETag.
    pub fn answer(&self, if_none_match: Option<&[u8]>, accepted: &Accepted, audience: Audience) -> Answer<'_> {
        let cache_control = match audience {
            Audience::Public => "no-cache",
            Audience::Private => "private, no-cache",
        };
        // Where some viewers see more, the answer depends on the credentials
        // too; a signed-in browser always gets a page of its own.
        let vary = match self.format {
            Format::Html => "accept-encoding, cookie",
            Format::Json if audience == Audience::Private || self.restricted.is_some() => {
                "accept-encoding, authorization"
            }
            Format::Json => "accept-encoding",
        };
        let content_type = match self.format {
            Format::Json => "application/json",
            Format::Html => "text/html; charset=utf-8",
        };
        let chosen = accepted.choose(|e| self.size_now(e));
        // gzip is made now if it is the answer; if it saves nothing, identity.
        let (encoding, body, etag) = match self.variant(chosen) {
            Some(coded) => (chosen, &coded.body, &coded.etag),
            None => (Encoding::Identity, &self.body, &self.etag),
        };
        let mut answer =
            Answer { status: StatusCode::OK, body: None, encoding, content_type, etag, vary, cache_control };
        // Weak comparison (RFC 9110 13.1.2) with the ETag of the variant
        // this request gets: a client holding another coding of the same
        // body gets this one whole, so its cache matches what it holds.
        let inm = if_none_match.and_then(encoding::visible_ascii);
        if inm.is_some_and(|inm| {
            inm.split(',')
                .map(|t| t.trim().trim_start_matches("W/"))
                .any(|t| t == "*" || t.as_bytes() == etag.as_bytes())
        }) {
            // A 304 repeats the validators and caching headers of the 200 (RFC 9110 15.4.5).
            answer.status = StatusCode::NOT_MODIFIED;
            return answer;
        }
        answer.body = Some(body);
        answer
    }
}

/// Answers from a render: 304 when the client has it, else the best
/// variant the client accepts that is made. Shared by the API and the pages.
pub fn respond(r: &Rendered, headers: &HeaderMap, audience: Audience) -> Response {
    let value = |name| headers.get(name).map(HeaderValue::as_bytes);
    let a = r.answer(value(header::IF_NONE_MATCH), &Accepted::parse(value(header::ACCEPT_ENCODING)), audience);
    let mut res = match a.body {
        Some(body) => body.clone().into_response(),
        None => a.status.into_response(),
    };
    let h = res.headers_mut();
    if a.body.is_some() {
        h.insert(header::CONTENT_TYPE, HeaderValue::from_static(a.content_type));
    }
    if a.body.is_some() && a.encoding != Encoding::Identity {
        h.insert(header::CONTENT_ENCODING, HeaderValue::from_static(a.encoding.name()));
    }
    h.insert(header::ETAG, a.etag.clone());
    h.insert(header::VARY, HeaderValue::from_static(a.vary));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static(a.cache_control));
    res
}

/// True when a request with these headers is to get gzip rather than
/// identity (for answers made per request, where gzip is the only coding).
pub fn accepts_gzip(headers: &HeaderMap) -> bool {
    let accepted = Accepted::parse(headers.get(header::ACCEPT_ENCODING).map(HeaderValue::as_bytes));
    accepted.choose(|e| (e == Encoding::Gzip).then_some(usize::MAX)) == Encoding::Gzip
}

#[cfg(test)]
mod tests {
    use super::*;

    fn render(s: &str) -> Arc<Rendered> {
        Arc::new(Rendered::new(s.as_bytes().to_vec()))
    }

    #[test]
    fn a_render_that_raced_with_a_write_is_not_stored() {
        let cache = TopicCache::new(1 << 20);
        let ticket = cache.ticket(7);
        cache.invalidate(7);
        cache.insert((7, Variant::Json(PostSort::Old)), ticket, render("stale"));
        assert!(cache.get((7, Variant::Json(PostSort::Old))).is_none());
        let ticket = cache.ticket(7);
        cache.insert((7, Variant::Json(PostSort::Old)), ticket, render("fresh"));
        assert_eq!(&cache.get((7, Variant::Json(PostSort::Old))).expect("cached").body[..], b"fresh");
    }

    #[test]
    fn invalidating_a_topic_evicts_all_its_renderings_and_nothing_else() {
        let cache = TopicCache::new(1 << 20);
        let keys = [
            (1, Variant::Json(PostSort::Best)),
            (1, Variant::Json(PostSort::New)),
            (1, Variant::Page(PostSort::Best)),
            (1, Variant::Page(PostSort::Old)),
            (1, Variant::Post(10)),
            (2, Variant::Json(PostSort::Best)),
            (2, Variant::Page(PostSort::Best)),
        ];
        for key in keys {
            cache.insert(key, cache.ticket(key.0), render("x"));
        }
        let before = cache.bytes();
        cache.invalidate(1);
        for key in &keys[..5] {
            assert!(cache.get(*key).is_none(), "{key:?}");
        }
        assert!(cache.get(keys[5]).is_some() && cache.get(keys[6]).is_some());
        assert_eq!(cache.bytes(), before * 2 / 7, "the byte count follows");
    }

    #[test]
    fn a_page_render_that_raced_with_a_write_is_not_stored_either() {
        let cache = TopicCache::new(1 << 20);
        let ticket = cache.ticket(5);
        cache.invalidate(5);
        cache.insert((5, Variant::Page(PostSort::Best)), ticket, render("stale page"));
        cache.insert((5, Variant::Post(9)), ticket, render("stale post"));
        assert!(cache.get((5, Variant::Page(PostSort::Best))).is_none());
        assert!(cache.get((5, Variant::Post(9))).is_none());
    }

    #[test]
    fn the_cache_stays_within_its_byte_budget() {
        let cache = TopicCache::new(64 * 1024);
        for id in 0..1000 {
            cache.insert((id, Variant::Json(PostSort::Best)), cache.ticket(id), render(&"y".repeat(1000)));
        }
        assert!(cache.bytes() <= 64 * 1024);
        assert!(cache.get((999, Variant::Json(PostSort::Best))).is_some(), "the newest entry survives");
        let found = (0..1000).filter(|&id| cache.get((id, Variant::Json(PostSort::Best))).is_some()).count();
        assert_eq!(found, cache.topics(), "what was evicted is not found any more");
        let indexed = cache.lock().index.len();
        assert_eq!(indexed, cache.topics());
        cache.clear();
        assert!(cache.get((999, Variant::Json(PostSort::Best))).is_none());
        assert_eq!(cache.lock().index.len(), 0);
    }

    #[test]
    fn a_hit_saves_its_topic_from_eviction_once_the_cache_fills_up() {
        let cache = TopicCache::new(64 * 1024);
        let key = |id| (id, Variant::Json(PostSort::Best));
        for id in 0..1000 {
            cache.insert(key(id), cache.ticket(id), render(&"y".repeat(1000)));
        }
        let oldest = 1000 - cache.topics() as i64;
        assert!(cache.get(key(oldest)).is_some(), "the least recently used survivor, now used");
        cache.insert(key(1000), cache.ticket(1000), render(&"y".repeat(1000)));
        assert!(cache.get(key(oldest + 1)).is_none(), "the next least recently used went instead");
        assert!(cache.get(key(oldest)).is_some());
    }

    #[tokio::test]
    async fn concurrent_misses_render_once() {
        let cache = Arc::new(TopicCache::new(1 << 20));
        let renders = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let mut tasks = Vec::new();
        for _ in 0..16 {
            let (cache, renders) = (cache.clone(), renders.clone());
            tasks.push(tokio::spawn(async move {
                cache
                    .get_or_render((3, Variant::Json(PostSort::Best)), || async {
                        renders.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
                        Ok::<_, ()>(render("once"))
                    })
                    .await
            }));
        }
        for t in tasks {
            assert_eq!(&t.await.expect("join").expect("render").body[..], b"once");
        }
        assert_eq!(renders.load(std::sync::atomic::Ordering::SeqCst), 1);
    }

    #[tokio::test]
    async fn a_read_after_an_invalidation_does_not_wait_on_an_older_render() {
        let cache = Arc::new(TopicCache::new(1 << 20));
        let (started_tx, started_rx) = tokio::sync::oneshot::channel::<()>();
        let (release_tx, release_rx) = tokio::sync::oneshot::channel::<()>();
        let old = {
            let cache = cache.clone();
            tokio::spawn(async move {
                cache
                    .get_or_render((4, Variant::Json(PostSort::Old)), || async move {
                        let _ = started_tx.send(());
                        let _ = release_rx.await;
                        Ok::<_, ()>(render("before the write"))
                    })
                    .await
            })
        };
        started_rx.await.expect("render started");
        cache.invalidate(4);
        let fresh =
            cache.get_or_render((4, Variant::Json(PostSort::Old)), || async { Ok::<_, ()>(render("after")) }).await;
        assert_eq!(&fresh.expect("render").body[..], b"after");
        let _ = release_tx.send(());
        assert_eq!(&old.await.expect("join").expect("render").body[..], b"before the write");
        assert_eq!(&cache.get((4, Variant::Json(PostSort::Old))).expect("cached").body[..], b"after");
    }

    #[tokio::test]
    async fn a_write_names_for_rendering_again_only_what_a_reader_got_since_the_last_render() {
        let cache = TopicCache::new(1 << 20);
        let key = (8, Variant::Json(PostSort::Best));
        let ahead = || async { Ok::<_, ()>(render("ahead")) };
        cache.render_ahead(key, ahead).await.expect("render");
        assert_eq!(
            cache.invalidate(8),
            Vec::<Variant>::new(),
            "rendered ahead and never read: left to its next reader"
        );

        cache.render_ahead(key, ahead).await.expect("render");
        cache.render_ahead(key, || async { Ok::<_, ()>(render("twice")) }).await.expect("cached: no render");
        assert_eq!(&cache.get(key).expect("cached").body[..], b"ahead", "a reader got it");
        assert_eq!(cache.invalidate(8), [key.1]);

        let missed = cache.get_or_render(key, || async { Ok::<_, ()>(render("missed")) }).await;
        assert_eq!(&missed.expect("render").body[..], b"missed");
        assert_eq!(cache.invalidate(8), [key.1], "rendered for a reader who missed: read");
        assert_eq!(cache.invalidate(8), Vec::<Variant>::new(), "nothing cached");
    }

    /// A vote's patch in these tests: the body with its number replaced.
    fn scored(score: i64) -> impl Fn(Variant, &Rendered) -> Patched {
        move |variant, old| match variant {
            Variant::Json(_) => Patched::New(old.with_body(format!("score {score}").into_bytes())),
            _ => Patched::Evicted,
        }
    }

    /// A new post's patch in these tests: `+N` added to the body, unless
    /// it is there already.
    fn posted(n: i64) -> impl Fn(Variant, &Rendered) -> Patched {
        move |variant, old| {
            let post = format!("+{n}");
            match variant {
                Variant::Json(_) if old.body.ends_with(post.as_bytes()) => Patched::Kept,
                Variant::Json(_) => Patched::New(old.with_body([&old.body[..], post.as_bytes()].concat())),
                _ => Patched::Evicted,
            }
        }
    }

    #[test]
    fn a_new_post_goes_into_the_cached_json_once_and_voids_the_renders_in_flight() {
        let cache = TopicCache::new(1 << 20);
        let (json, page, html) = (
            (6, Variant::Json(PostSort::Best)),
            (6, Variant::Page(PostSort::Best)),
            (6, Variant::JsonHtml(PostSort::New)),
        );
        cache.insert(json, cache.ticket(6), render("posts"));
        cache.insert(page, cache.ticket(6), render("<p>posts</p>"));
        let in_flight = cache.ticket(6);
        assert_eq!(cache.patch(6, None, posted(1)), None, "patched in place");
        assert_eq!(&cache.get(json).expect("cached").body[..], b"posts+1");
        assert!(cache.get(page).is_none(), "pages render again on their next request");
        let kept = cache.get(json).expect("cached");
        assert_eq!(cache.patch(6, None, posted(1)), None, "the post was there already");
        assert!(Arc::ptr_eq(&kept, &cache.get(json).expect("cached")), "the same rendering kept");
        assert!(!kept.retired());
        cache.insert(html, in_flight, render("posts, rendered before the post"));
        assert!(cache.get(html).is_none(), "a render from before the post is void");
        assert_eq!(cache.bytes(), kept.weight(), "the byte count follows");
        assert_eq!(cache.patch(7, None, posted(1)), Some(Vec::new()), "nothing cached: evicted as after any write");
    }

    /// A patched rendering too large for the cache is not stored, and the
    /// one it replaces does not stay either.
    #[test]
    fn a_patch_too_large_to_store_evicts_what_it_replaces() {
        let cache = TopicCache::new(4096);
        let json = (6, Variant::Json(PostSort::Best));
        cache.insert(json, cache.ticket(6), render("score 0"));
        let huge = |_: Variant, old: &Rendered| Patched::New(old.with_body(vec![b'x'; 4096]));
        assert_eq!(cache.patch(6, Some(1), huge), None);
        assert!(cache.get(json).is_none(), "neither the old rendering nor the new one");
        assert_eq!(cache.bytes(), 0);
    }

    #[test]
    fn a_vote_puts_its_score_into_the_cached_json_and_evicts_the_pages() {
        let cache = TopicCache::new(1 << 20);
        let (json, page) = ((6, Variant::Json(PostSort::Best)), (6, Variant::Page(PostSort::Best)));
        cache.insert(json, cache.ticket(6), render("score 0"));
        cache.insert(page, cache.ticket(6), render("<p>score 0</p>"));
        let before = cache.get(json).expect("cached");
        let in_flight = cache.ticket(6);
        assert_eq!(cache.patch(6, Some(10), scored(1)), None, "rescored in place");
        let after = cache.get(json).expect("still cached");
        assert_eq!(&after.body[..], b"score 1");
        assert_ne!(after.etag, before.etag, "a new validator");
        assert!(before.retired(), "the old rendering is let go");
        assert!(cache.get(page).is_none(), "pages render again on their next request");
        cache.insert(json, in_flight, render("score 0, rendered before the vote"));
        assert_eq!(&cache.get(json).expect("cached").body[..], b"score 1", "a render from before is void");
        assert_eq!(cache.bytes(), after.weight(), "the byte count follows");
    }

    #[test]
    fn an_older_vote_taking_effect_late_changes_nothing() {
        let cache = TopicCache::new(1 << 20);
        let json = (6, Variant::Json(PostSort::Best));
        cache.insert(json, cache.ticket(6), render("score 0"));
        assert_eq!(cache.patch(6, Some(11), scored(2)), None);
        assert_eq!(cache.patch(6, Some(10), scored(1)), None, "vote 10 committed before vote 11");
        assert_eq!(&cache.get(json).expect("cached").body[..], b"score 2");

        // Nothing cached: the topic is evicted as after any write, and a
        // later render (which reads vote 21) is not undone by vote 20.
        assert_eq!(cache.patch(7, Some(21), scored(5)), Some(Vec::new()));
        cache.insert((7, Variant::Json(PostSort::Best)), cache.ticket(7), render("score 5"));
        assert_eq!(cache.patch(7, Some(20), scored(4)), None);
        assert_eq!(&cache.get((7, Variant::Json(PostSort::Best))).expect("cached").body[..], b"score 5");
    }

    /// A JSON body of `n` posts, as compressible as a topic's.
    fn topic_body(n: usize) -> Arc<Rendered> {
        let posts: Vec<String> = (0..n).map(|i| format!("{{\"id\":{i},\"body\":\"post {i} says a thing\"}}")).collect();
        render(&format!("{{\"posts\":[{}]}}", posts.join(",")))
    }

    #[tokio::test]
    async fn the_maker_makes_what_a_client_would_rather_have_and_charges_it_to_the_budget() {
        let cache = TopicCache::new(1 << 20);
        let key = (1, Variant::Json(PostSort::Best));
        cache.insert(key, cache.ticket(1), topic_body(500));
        let r = cache.get(key).expect("cached");
        let browser = Accepted::parse(Some(b"gzip, deflate, br, zstd"));
        let safari = Accepted::parse(Some(b"gzip, deflate, br"));
        assert_eq!(r.answer(None, &browser, Audience::Public).encoding, Encoding::Gzip, "what is ready");
        let before = cache.bytes();
        cache.ask_encodings(key, &r, &browser);
        cache.ask_encodings(key, &r, &safari);
        cache.encoded().await;
        let (zst, br) = (r.made(Encoding::Zstd).expect("zstd"), r.made(Encoding::Brotli).expect("br"));
        let made = size_class(zst.body.len()) + zst.etag.len() + size_class(br.body.len()) + br.etag.len();
        assert_eq!(cache.bytes(), before + made, "each variant charged once made");
        let a = r.answer(None, &safari, Audience::Public);
        assert_eq!((a.encoding, a.etag), (Encoding::Brotli, &br.etag));
        assert!(br.etag.to_str().expect("ascii").ends_with("-br\""));
        let smallest = if br.body.len() < zst.body.len() { Encoding::Brotli } else { Encoding::Zstd };
        assert_eq!(r.answer(None, &browser, Audience::Public).encoding, smallest);
        cache.ask_encodings(key, &r, &browser);
        cache.ask_encodings(key, &r, &safari);
        cache.encoded().await;
        assert_eq!(cache.bytes(), before + made, "asked again: made once");
        cache.invalidate(1);
        assert_eq!(cache.bytes(), 0, "the charge leaves with the topic");
    }

    #[tokio::test]
    async fn an_evicted_rendering_is_not_encoded_or_charged() {
        let cache = TopicCache::new(1 << 20);
        let key = (2, Variant::Json(PostSort::Best));
        cache.insert(key, cache.ticket(2), topic_body(500));
        let r = cache.get(key).expect("cached");
        cache.invalidate(2);
        assert!(r.retired());
        cache.ask_encodings(key, &r, &Accepted::parse(Some(b"br")));
        cache.encoded().await;
        assert!(r.made(Encoding::Brotli).is_none(), "nobody will read it");
        assert_eq!(cache.bytes(), 0);
        let replaced = topic_body(10);
        cache.insert(key, cache.ticket(2), replaced.clone());
        cache.insert(key, cache.ticket(2), topic_body(11));
        assert!(replaced.retired(), "a newer render retires the older");
    }

    #[test]
    fn small_bodies_have_no_variants_to_ask_for() {
        let r = render("short");
        let browser = Accepted::parse(Some(b"br, zstd, gzip"));
        assert_eq!(r.wanted(&browser).count(), 0);
        assert_eq!(r.answer(None, &browser, Audience::Public).encoding, Encoding::Identity);
        let big = topic_body(100);
        assert_eq!(big.wanted(&browser).collect::<Vec<_>>(), [Encoding::Zstd], "zstd does as well as Brotli");
        let safari = Accepted::parse(Some(b"gzip, deflate, br"));
        assert_eq!(big.wanted(&safari).collect::<Vec<_>>(), [Encoding::Brotli]);
        let leaning = Accepted::parse(Some(b"br, zstd;q=0.9"));
        assert_eq!(big.wanted(&leaning).collect::<Vec<_>>(), [Encoding::Brotli, Encoding::Zstd]);
        assert_eq!(big.wanted(&Accepted::parse(Some(b"gzip"))).count(), 0, "gzip is made on the request path");
        assert_eq!(big.wanted(&Accepted::parse(Some(b"br;q=0.5, identity"))).count(), 0, "it prefers identity");
    }

    #[test]
    fn large_bodies_get_a_smaller_gzip_variant_and_a_stable_etag() {
        let a = Rendered::new("hello ".repeat(100).into_bytes());
        let b = Rendered::new("hello ".repeat(100).into_bytes());
        assert!(a.gzip().expect("gzip").len() < a.body.len());
        assert_eq!(a.etag, b.etag);
        assert!(Rendered::new(b"short".to_vec()).gzip().is_none(), "too small to be worth it");
    }

    #[test]
    fn cached_bodies_are_sized_in_four_classes_per_doubling() {
        let classes: Vec<usize> = [0, 1023, 1024, 1025, 1280, 1281, 2048, 9300, 10240, 10241, 16384, 16385]
            .into_iter()
            .map(size_class)
            .collect();
        assert_eq!(classes, [0, 1023, 1024, 1280, 1280, 1536, 2048, 10240, 10240, 12288, 16384, 20480]);
        for len in (1024..200_000).step_by(997) {
            let class = size_class(len);
            assert!(class >= len && class <= len + len / 4, "{len} -> {class}");
        }
        let body: Vec<u8> = (0..9300u32).map(|i| i as u8).collect();
        assert_eq!(Rendered::new(body.clone()).body, body, "the same bytes, whatever the allocation");
    }
}
