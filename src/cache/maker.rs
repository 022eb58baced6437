//! The maker: one thread, at a lower priority than the server's, that
//! makes the zstd and Brotli variants of cached renderings off the
//! request path.
//!
//! A request that would take a variant not made yet gets the best one
//! there is (gzip or identity) and leaves a job here; a later request gets
//! the new variant. Brotli at its best quality takes over a second of CPU
//! on a heavy topic, zstd at 19 a quarter of that or less, so neither may hold up an
//! answer, and the thread runs niced so the reads get the CPU first.
//! zstd jobs go first: a Brotli job runs only when no zstd job waits. A
//! job whose rendering was evicted before or while it runs stops
//! (`Rendered::retired`): a topic written faster than the maker keeps up
//! is simply served zstd or gzip.

use std::sync::{Arc, OnceLock, Weak};

use super::encoding::{self, Encoding};
use super::{Key, Rendered};

/// Jobs waiting at most; past that a request leaves none, and a later one
/// asks again.
const QUEUE: usize = 1024;

/// Adds bytes to a cached rendering's charge against the budget, if it is
/// still the one cached under its key.
pub type Charge = Box<dyn Fn(Key, &Arc<Rendered>, usize) + Send>;

enum Job {
    Make {
        key: Key,
        rendered: Weak<Rendered>,
        encoding: Encoding,
    },
    /// Answered once every job before it is done (`TopicCache::encoded`).
    Flush(tokio::sync::oneshot::Sender<()>),
}

/// The queues to the maker's thread (zstd's and the rest), started with
/// its first job.
pub struct Maker {
    tx: OnceLock<Option<Queues>>,
}

struct Queues {
    first: crossbeam_channel::Sender<Job>,
    then: crossbeam_channel::Sender<Job>,
}

impl Maker {
    pub fn new() -> Maker {
        Maker { tx: OnceLock::new() }
    }

    fn queues(&self, charge: impl FnOnce() -> Charge) -> Option<&Queues> {
        self.tx.get_or_init(|| start(charge())).as_ref()
    }

    /// Asks for `rendered`'s `encoding` variant, unless it is made or asked
    /// for already. `charge` is called once, when the thread starts.
    pub fn ask(&self, key: Key, rendered: &Arc<Rendered>, encoding: Encoding, charge: impl FnOnce() -> Charge) {
        if !rendered.take_job(encoding) {
            return;
        }
        let job = Job::Make { key, rendered: Arc::downgrade(rendered), encoding };
        let sent = self.queues(charge).is_some_and(|q| match encoding {
            Encoding::Zstd => q.first.try_send(job).is_ok(),
            _ => q.then.try_send(job).is_ok(),
        });
        if !sent {
            rendered.drop_job(encoding);
        }
    }

    /// Waits until every job asked for before is done: a flush through
    /// the second queue is taken only once the first is empty.
    pub async fn flush(&self, charge: impl FnOnce() -> Charge) {
        let Some(tx) = self.queues(charge).map(|q| q.then.clone()) else { return };
        let (done, wait) = tokio::sync::oneshot::channel();
        // A full queue makes the send wait: on a blocking thread.
        let queued = tokio::task::spawn_blocking(move || tx.send(Job::Flush(done)).is_ok()).await;
        if matches!(queued, Ok(true)) {
            let _ = wait.await;
        }
    }
}

impl Default for Maker {
    fn default() -> Self {
        Maker::new()
    }
}

/// Starts the maker's thread; it ends when the `Maker` is dropped. `None`
/// when no thread could be started: then only gzip is ever sent.
fn start(charge: Charge) -> Option<Queues> {
    let (first, first_rx) = crossbeam_channel::bounded::<Job>(QUEUE);
    let (then, then_rx) = crossbeam_channel::bounded::<Job>(QUEUE);
    let spawned = std::thread::Builder::new().name("pith-encoder".to_owned()).spawn(move || {
        crate::priority::lower_this_thread();
        while let Some(job) = next(&first_rx, &then_rx) {
            match job {
                Job::Make { key, rendered, encoding } => make(key, &rendered, encoding, &charge),
                Job::Flush(done) => {
                    let _ = done.send(());
                }
            }
        }
    });
    match spawned {
        Ok(_) => Some(Queues { first, then }),
        Err(e) => {
            tracing::warn!(error = %e, "could not start the encoder thread: no zstd or Brotli variants");
            None
        }
    }
}

/// The next job: the first queue's while it has one, else whichever
/// queue has one first; `None` once the `Maker` is gone.
fn next(first: &crossbeam_channel::Receiver<Job>, then: &crossbeam_channel::Receiver<Job>) -> Option<Job> {
    if let Ok(job) = first.try_recv() {
        return Some(job);
    }
    crossbeam_channel::select! {
        recv(first) -> job => job.ok(),
        recv(then) -> job => job.ok(),
    }
}

fn make(key: Key, rendered: &Weak<Rendered>, encoding: Encoding, charge: &Charge) {
    let Some(r) = rendered.upgrade() else { return };
    if r.retired() {
        return;
    }
    let started = std::time::Instant::now();
    let out = encoding::encode(&r.body, encoding, &|| !r.retired());
    tracing::debug!(
        topic = key.0,
        encoding = encoding.name(),
        from = r.body.len(),
        to = out.as_ref().map(Vec::len),
        ms = started.elapsed().as_secs_f64() * 1e3,
        "encoded"
    );
    if r.retired() {
        return;
    }
    let added = r.set_encoded(encoding, out);
    if added > 0 {
        charge(key, &r, added);
    }
}
