//! The rendered-response cache: a topic rendered once as JSON bytes, with a
//! gzip variant and a strong ETag, served to every reader until a write to
//! that topic evicts it.
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
//! Single flight: when many requests miss the same entry at once, one
//! renders and the others wait for its bytes. An invalidation also forgets
//! the render in flight, so a read that starts after a write never waits on
//! a render that began before it.

use std::collections::HashMap;
use std::future::Future;
use std::io::Write;
use std::sync::{Arc, Mutex, MutexGuard};

use bytes::Bytes;
use lru::LruCache;

use crate::model::Restricted;
use crate::store::PostSort;

/// One rendered response.
#[derive(Debug)]
pub struct Rendered {
    pub body: Bytes,
    /// `None` when compression would not save anything.
    pub gzip: Option<Bytes>,
    /// A strong validator: `"` + hash of `body` + `"`.
    pub etag: String,
    /// `None`: nothing in the topic is removed, every viewer gets `body`.
    pub restricted: Option<Restricted>,
}

impl Rendered {
    pub fn new(body: Vec<u8>) -> Rendered {
        Rendered::restricted(body, None)
    }

    /// A public rendering of a topic with removed content in it.
    pub fn restricted(body: Vec<u8>, restricted: Option<Restricted>) -> Rendered {
        let etag = format!("\"{:032x}\"", xxhash_rust::xxh3::xxh3_128(&body));
        let gzip = if body.len() >= 256 { gzip(&body) } else { None };
        Rendered { body: Bytes::from(body), gzip, etag, restricted }
    }

    fn weight(&self) -> usize {
        let restricted = self.restricted.as_ref().map_or(0, |r| r.authors.len() * 8);
        self.body.len() + self.gzip.as_ref().map_or(0, |g| g.len()) + self.etag.len() + restricted + 128
    }
}

fn gzip(data: &[u8]) -> Option<Bytes> {
    let mut enc = flate2::write::GzEncoder::new(Vec::with_capacity(data.len() / 3), flate2::Compression::new(6));
    enc.write_all(data).ok()?;
    let out = enc.finish().ok()?;
    (out.len() < data.len()).then(|| Bytes::from(out))
}

/// A cache key: one topic rendered in one post order.
pub type Key = (i64, PostSort);

/// A render in progress that later requests for the same key wait on.
type Flight = Arc<tokio::sync::OnceCell<Arc<Rendered>>>;

struct Inner {
    entries: LruCache<Key, Arc<Rendered>>,
    generations: HashMap<i64, u64>,
    in_flight: HashMap<Key, Flight>,
    bytes: usize,
}

pub struct TopicCache {
    inner: Mutex<Inner>,
    budget: usize,
}

/// A ticket taken before rendering; see the module comment.
#[derive(Debug, Clone, Copy)]
pub struct Ticket(u64);

impl TopicCache {
    pub fn new(budget_bytes: usize) -> TopicCache {
        TopicCache {
            inner: Mutex::new(Inner {
                entries: LruCache::unbounded(),
                generations: HashMap::new(),
                in_flight: HashMap::new(),
                bytes: 0,
            }),
            budget: budget_bytes,
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panic while holding this lock leaves the map consistent (every
        // mutation is a single call), so poisoning is safe to ignore.
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn get(&self, key: Key) -> Option<Arc<Rendered>> {
        self.lock().entries.get(&key).cloned()
    }

    /// The cached render of `key`, or the result of `render` (run once for
    /// all concurrent callers that miss), which is then cached.
    pub async fn get_or_render<E, F, Fut>(&self, key: Key, render: F) -> Result<Arc<Rendered>, E>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<Arc<Rendered>, E>>,
    {
        let flight = {
            let mut inner = self.lock();
            if let Some(hit) = inner.entries.get(&key) {
                return Ok(hit.clone());
            }
            inner.in_flight.entry(key).or_default().clone()
        };
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
        Ticket(self.lock().generations.get(&topic).copied().unwrap_or(0))
    }

    /// Stores a render unless the topic changed since `ticket` was taken.
    pub fn insert(&self, key: Key, ticket: Ticket, value: Arc<Rendered>) {
        let weight = value.weight();
        if weight > self.budget / 4 {
            return; // one huge topic must not flush everything else
        }
        let mut inner = self.lock();
        if inner.generations.get(&key.0).copied().unwrap_or(0) != ticket.0 {
            return;
        }
        if let Some(old) = inner.entries.put(key, value) {
            inner.bytes -= old.weight();
        }
        inner.bytes += weight;
        while inner.bytes > self.budget {
            match inner.entries.pop_lru() {
                Some((_, old)) => inner.bytes -= old.weight(),
                None => break,
            }
        }
    }

    /// Evicts every rendering of `topic`; call after a write to it commits.
    pub fn invalidate(&self, topic: i64) {
        let mut inner = self.lock();
        *inner.generations.entry(topic).or_insert(0) += 1;
        for sort in [PostSort::Best, PostSort::New, PostSort::Old] {
            inner.in_flight.remove(&(topic, sort));
            if let Some(old) = inner.entries.pop(&(topic, sort)) {
                inner.bytes -= old.weight();
            }
        }
        // Generations only matter while a render may be in flight; keep
        // the map from growing with every topic ever written.
        if inner.generations.len() > 1_000_000 {
            inner.generations.clear();
            inner.entries.clear();
            inner.bytes = 0;
        }
    }

    pub fn bytes(&self) -> usize {
        self.lock().bytes
    }
}

impl Default for TopicCache {
    fn default() -> Self {
        TopicCache::new(128 << 20)
    }
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
        cache.insert((7, PostSort::Old), ticket, render("stale"));
        assert!(cache.get((7, PostSort::Old)).is_none());
        let ticket = cache.ticket(7);
        cache.insert((7, PostSort::Old), ticket, render("fresh"));
        assert_eq!(&cache.get((7, PostSort::Old)).expect("cached").body[..], b"fresh");
    }

    #[test]
    fn invalidating_a_topic_evicts_all_its_orders_and_nothing_else() {
        let cache = TopicCache::new(1 << 20);
        for (id, sort) in [(1, PostSort::Best), (1, PostSort::New), (2, PostSort::Best)] {
            cache.insert((id, sort), cache.ticket(id), render("x"));
        }
        cache.invalidate(1);
        assert!(cache.get((1, PostSort::Best)).is_none());
        assert!(cache.get((1, PostSort::New)).is_none());
        assert!(cache.get((2, PostSort::Best)).is_some());
    }

    #[test]
    fn the_cache_stays_within_its_byte_budget() {
        let cache = TopicCache::new(64 * 1024);
        for id in 0..1000 {
            cache.insert((id, PostSort::Best), cache.ticket(id), render(&"y".repeat(1000)));
        }
        assert!(cache.bytes() <= 64 * 1024);
        assert!(cache.get((999, PostSort::Best)).is_some(), "the newest entry survives");
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
                    .get_or_render((3, PostSort::Best), || async {
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
                    .get_or_render((4, PostSort::Old), || async move {
                        let _ = started_tx.send(());
                        let _ = release_rx.await;
                        Ok::<_, ()>(render("before the write"))
                    })
                    .await
            })
        };
        started_rx.await.expect("render started");
        cache.invalidate(4);
        let fresh = cache.get_or_render((4, PostSort::Old), || async { Ok::<_, ()>(render("after")) }).await;
        assert_eq!(&fresh.expect("render").body[..], b"after");
        let _ = release_tx.send(());
        assert_eq!(&old.await.expect("join").expect("render").body[..], b"before the write");
        assert_eq!(&cache.get((4, PostSort::Old)).expect("cached").body[..], b"after");
    }

    #[test]
    fn large_bodies_get_a_smaller_gzip_variant_and_a_stable_etag() {
        let a = Rendered::new("hello ".repeat(100).into_bytes());
        let b = Rendered::new("hello ".repeat(100).into_bytes());
        assert!(a.gzip.as_ref().expect("gzip").len() < a.body.len());
        assert_eq!(a.etag, b.etag);
    }
}
