//! The heartbeat clock. Sockets are spread over `BUCKETS`; the hub's
//! ticker advances one bucket's epoch every `ping_interval / BUCKETS` and
//! wakes the sockets in it, so pings go out in small waves. A socket keeps
//! its waker in its bucket's shared slab (16 bytes of a shared vector) and
//! 12 bytes inline, rather than owning a timer or a waiter (112 and 64
//! bytes, the latter in a box of its own).

use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::task::{Context, Waker};

pub const BUCKETS: usize = 16;

const NO_SLOT: u32 = u32::MAX;

pub struct Clock {
    buckets: Box<[Bucket]>,
    next: AtomicUsize,
}

#[derive(Default)]
struct Bucket {
    epoch: AtomicU32,
    slots: Mutex<Slots>,
}

/// Wakers by slot; freed slots are reused.
#[derive(Default)]
struct Slots {
    wakers: Vec<Option<Waker>>,
    free: Vec<u32>,
}

impl Bucket {
    fn slots(&self) -> MutexGuard<'_, Slots> {
        self.slots.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl Default for Clock {
    fn default() -> Self {
        Clock { buckets: (0..BUCKETS).map(|_| Bucket::default()).collect(), next: AtomicUsize::new(0) }
    }
}

impl Clock {
    /// A place on the clock for a new socket, buckets taken in turn.
    pub fn join(&self) -> Beat {
        let bucket = (self.next.fetch_add(1, Ordering::Relaxed) % BUCKETS) as u8;
        Beat { bucket, slot: NO_SLOT, seen: 0 }
    }

    /// Advances `bucket` and wakes its sockets.
    pub fn tick(&self, bucket: usize) {
        let b = &self.buckets[bucket % BUCKETS];
        b.epoch.fetch_add(1, Ordering::Release);
        for w in b.slots().wakers.iter().flatten() {
            w.wake_by_ref();
        }
    }

    pub fn tick_all(&self) {
        (0..BUCKETS).for_each(|b| self.tick(b));
    }
}

/// A socket's place on the clock.
pub struct Beat {
    bucket: u8,
    slot: u32,
    seen: u32,
}

impl Beat {
    /// True once for each tick of this socket's bucket since the last call
    /// (several ticks in between count as one). The first call registers
    /// the task's waker; each tick refreshes it.
    pub fn poll(&mut self, clock: &Clock, cx: &mut Context<'_>) -> bool {
        let b = &clock.buckets[usize::from(self.bucket)];
        if self.slot == NO_SLOT {
            let mut s = b.slots();
            let waker = Some(cx.waker().clone());
            self.slot = match s.free.pop() {
                Some(i) => {
                    s.wakers[i as usize] = waker;
                    i
                }
                None => {
                    s.wakers.push(waker);
                    (s.wakers.len() - 1) as u32
                }
            };
            drop(s);
            self.seen = b.epoch.load(Ordering::Acquire);
            return false;
        }
        let now = b.epoch.load(Ordering::Acquire);
        if now == self.seen {
            return false;
        }
        self.seen = now;
        if let Some(w) = b.slots().wakers.get_mut(self.slot as usize)
            && !w.as_ref().is_some_and(|w| w.will_wake(cx.waker()))
        {
            *w = Some(cx.waker().clone());
        }
        true
    }

    /// Gives the slot back; call when the socket goes away.
    pub fn leave(&mut self, clock: &Clock) {
        if self.slot == NO_SLOT {
            return;
        }
        let mut s = clock.buckets[usize::from(self.bucket)].slots();
        if let Some(w) = s.wakers.get_mut(self.slot as usize) {
            *w = None;
            s.free.push(self.slot);
        }
        self.slot = NO_SLOT;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::AtomicBool;
    use std::task::Wake;

    struct Flag(AtomicBool);
    impl Wake for Flag {
        fn wake(self: Arc<Self>) {
            self.0.store(true, Ordering::SeqCst);
        }
    }

    #[test]
    fn a_tick_wakes_its_bucket_and_is_seen_once() {
        let clock = Clock::default();
        let flag = Arc::new(Flag(AtomicBool::new(false)));
        let waker = Waker::from(flag.clone());
        let mut cx = Context::from_waker(&waker);
        let mut beat = clock.join();
        assert!(!beat.poll(&clock, &mut cx), "registering is not a tick");
        clock.tick(usize::from(beat.bucket) + 1);
        assert!(!flag.0.load(Ordering::SeqCst) && !beat.poll(&clock, &mut cx), "another bucket");
        clock.tick(usize::from(beat.bucket));
        clock.tick(usize::from(beat.bucket));
        assert!(flag.0.load(Ordering::SeqCst));
        assert!(beat.poll(&clock, &mut cx));
        assert!(!beat.poll(&clock, &mut cx));
        beat.leave(&clock);
        let again = clock.join();
        assert_ne!(again.bucket, beat.bucket, "buckets are taken in turn");
    }

    #[test]
    fn slots_are_reused() {
        let clock = Clock::default();
        let waker = Waker::noop();
        let mut cx = Context::from_waker(waker);
        let mut beats: Vec<Beat> = (0..BUCKETS * 3).map(|_| clock.join()).collect();
        beats.iter_mut().for_each(|b| {
            b.poll(&clock, &mut cx);
        });
        beats.iter_mut().for_each(|b| b.leave(&clock));
        let mut b = clock.join();
        b.poll(&clock, &mut cx);
        assert!(b.slot < 3);
        assert!(clock.buckets.iter().all(|b| b.slots().wakers.len() == 3));
    }
}
