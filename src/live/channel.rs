//! The hub's broadcast channel, one per key: the frames some receiver has
//! yet to take (at most `capacity`), numbered in sequence; a receiver is a
//! cursor into them.
//!
//! Written by hand because tokio's `broadcast::Receiver` can only wait
//! through its `recv` future, which a connection that is polled rather
//! than awaited has to keep boxed: ~112-128 bytes per subscription. This
//! receiver is polled in place; idle, it costs its cursor (24 bytes,
//! inline in the connection) and its waker in the channel's list (16).
//!
//! The rules are tokio's: a receiver gets every frame sent after it
//! subscribed, in order; one that falls more than `capacity` frames behind
//! is told once (`Lagged`) and goes on from the oldest frame kept; a frame
//! is dropped once every receiver there when it was sent has taken it or
//! left. A send takes the lock once, and with it the wakers of the
//! receivers waiting, which it wakes after letting go: O(receivers), and
//! nothing held while they run.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};

use bytes::Bytes;
use slab::Slab;

use super::hub::{Key, lock};

/// The receiver fell more than the channel's capacity behind and missed
/// frames.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lagged;

pub struct Channel {
    key: Key,
    capacity: usize,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// Frames some receiver has yet to take, oldest first; the newest is
    /// number `tail - 1`.
    frames: VecDeque<Slot>,
    /// The number the next frame sent gets.
    tail: u64,
    receivers: usize,
    /// Wakers of the receivers that have taken everything (they wait for
    /// frame `tail`); each send takes them all.
    waiters: Slab<Waker>,
}

struct Slot {
    frame: Bytes,
    /// Receivers that have yet to take it.
    left: usize,
}

impl State {
    /// The number of the oldest frame kept.
    fn head(&self) -> u64 {
        self.tail - self.frames.len() as u64
    }

    /// Frees the oldest frames once every receiver has taken them (a
    /// frame's receivers take the ones before it first, or leave).
    fn trim(&mut self) {
        while self.frames.front().is_some_and(|s| s.left == 0) {
            self.frames.pop_front();
        }
    }
}

impl Channel {
    pub fn new(key: Key, capacity: usize) -> Channel {
        Channel { key, capacity: capacity.max(1), state: Mutex::new(State::default()) }
    }

    pub fn key(&self) -> &Key {
        &self.key
    }

    pub fn receivers(&self) -> usize {
        lock(&self.state).receivers
    }

    /// A receiver of the frames sent from now on.
    pub fn subscribe(self: &Arc<Self>) -> Receiver {
        let mut st = lock(&self.state);
        st.receivers += 1;
        Receiver { chan: self.clone(), next: st.tail, waiter: None }
    }

    /// Keeps `frame` for every receiver (pushing out the oldest frame when
    /// `capacity` are kept) and wakes those waiting; dropped when there are
    /// none.
    pub fn send(&self, frame: Bytes) {
        let waiters = {
            let mut st = lock(&self.state);
            if st.receivers == 0 {
                return;
            }
            if st.frames.len() >= self.capacity {
                st.frames.pop_front();
            }
            let left = st.receivers;
            st.frames.push_back(Slot { frame, left });
            st.tail += 1;
            std::mem::take(&mut st.waiters)
        };
        for (_, waker) in waiters {
            waker.wake();
        }
    }
}

pub struct Receiver {
    chan: Arc<Channel>,
    /// The number of the next frame to take.
    next: u64,
    /// Where its waker is in `waiters`; stands only while `next == tail`
    /// (a send takes the list, and taking a frame clears this).
    waiter: Option<u32>,
}

impl Receiver {
    pub fn key(&self) -> &Key {
        &self.chan.key
    }

    /// The next frame, or `Lagged` once when frames it had not taken were
    /// pushed out (it then goes on from the oldest kept). Waits with
    /// `cx`'s waker.
    pub fn poll_recv(&mut self, cx: &mut Context<'_>) -> Poll<Result<Bytes, Lagged>> {
        let mut st = lock(&self.chan.state);
        let st = &mut *st;
        let head = st.head();
        if self.next < head {
            self.next = head;
            self.waiter = None;
            return Poll::Ready(Err(Lagged));
        }
        let Some(slot) = st.frames.get_mut((self.next - head) as usize) else {
            match self.waiter.and_then(|i| st.waiters.get_mut(i as usize)) {
                Some(w) if w.will_wake(cx.waker()) => {}
                Some(w) => *w = cx.waker().clone(),
                None => self.waiter = Some(st.waiters.insert(cx.waker().clone()) as u32),
            }
            return Poll::Pending;
        };
        slot.left -= 1;
        let frame = slot.frame.clone();
        self.next += 1;
        self.waiter = None;
        st.trim();
        Poll::Ready(Ok(frame))
    }
}

impl Drop for Receiver {
    /// Lets go of the frames it had yet to take, and of its place in the
    /// waiting list.
    fn drop(&mut self) {
        let mut st = lock(&self.chan.state);
        let untaken = self.next.saturating_sub(st.head()) as usize;
        st.frames.iter_mut().skip(untaken).for_each(|s| s.left -= 1);
        if self.next == st.tail
            && let Some(i) = self.waiter
        {
            st.waiters.try_remove(i as usize);
        }
        st.receivers -= 1;
        st.trim();
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::task::Wake;

    use super::*;

    #[derive(Default)]
    struct Count(AtomicUsize);

    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn channel(capacity: usize) -> Arc<Channel> {
        Arc::new(Channel::new(Key::Topic(1), capacity))
    }

    fn poll(rx: &mut Receiver, waker: &Arc<Count>) -> Poll<Result<Bytes, Lagged>> {
        rx.poll_recv(&mut Context::from_waker(&Waker::from(waker.clone())))
    }

    fn frame(s: &'static str) -> Poll<Result<Bytes, Lagged>> {
        Poll::Ready(Ok(Bytes::from_static(s.as_bytes())))
    }

    fn kept(chan: &Channel) -> (usize, usize) {
        let st = lock(&chan.state);
        (st.frames.len(), st.waiters.len())
    }

    #[test]
    fn a_receiver_gets_the_frames_sent_after_it_subscribed_in_order_and_is_woken_for_more() {
        let chan = channel(4);
        chan.send(Bytes::from_static(b"before"));
        let mut rx = chan.subscribe();
        let w = Arc::new(Count::default());
        assert!(poll(&mut rx, &w).is_pending());
        chan.send(Bytes::from_static(b"a"));
        chan.send(Bytes::from_static(b"b"));
        assert_eq!(w.0.load(Ordering::Relaxed), 1, "woken once, by the first send");
        assert_eq!(poll(&mut rx, &w), frame("a"));
        assert_eq!(poll(&mut rx, &w), frame("b"));
        assert!(poll(&mut rx, &w).is_pending());
        assert_eq!(kept(&chan), (0, 1), "taken frames are freed; the receiver waits again");
    }

    #[test]
    fn a_receiver_more_than_capacity_behind_is_told_once_and_goes_on_from_the_oldest_kept() {
        let chan = channel(2);
        let mut rx = chan.subscribe();
        for s in ["1", "2", "3", "4"] {
            chan.send(Bytes::from_static(s.as_bytes()));
        }
        let w = Arc::new(Count::default());
        assert_eq!(poll(&mut rx, &w), Poll::Ready(Err(Lagged)));
        assert_eq!(poll(&mut rx, &w), frame("3"));
        assert_eq!(poll(&mut rx, &w), frame("4"));
        assert!(poll(&mut rx, &w).is_pending());
    }

    #[test]
    fn a_frame_is_kept_until_every_receiver_there_when_it_was_sent_has_taken_it_or_left() {
        let chan = channel(8);
        let (mut a, b) = (chan.subscribe(), chan.subscribe());
        chan.send(Bytes::from_static(b"x"));
        let mut late = chan.subscribe();
        chan.send(Bytes::from_static(b"y"));
        let w = Arc::new(Count::default());
        assert_eq!((poll(&mut a, &w), poll(&mut a, &w)), (frame("x"), frame("y")));
        assert_eq!(kept(&chan).0, 2, "b has taken neither");
        drop(b);
        assert_eq!(kept(&chan).0, 1, "x is gone; y waits for the late receiver");
        assert_eq!(poll(&mut late, &w), frame("y"));
        assert_eq!(kept(&chan).0, 0);
        assert_eq!(chan.receivers(), 2);
    }

    #[test]
    fn a_waiting_receiver_holds_one_waker_the_latest_and_none_once_dropped() {
        let chan = channel(4);
        let mut rx = chan.subscribe();
        let (first, second) = (Arc::new(Count::default()), Arc::new(Count::default()));
        for _ in 0..3 {
            assert!(poll(&mut rx, &first).is_pending());
        }
        assert!(poll(&mut rx, &second).is_pending());
        assert_eq!(kept(&chan).1, 1);
        chan.send(Bytes::from_static(b"x"));
        assert_eq!((first.0.load(Ordering::Relaxed), second.0.load(Ordering::Relaxed)), (0, 1));
        assert_eq!(poll(&mut rx, &first), frame("x"));
        assert!(poll(&mut rx, &first).is_pending());
        drop(rx);
        assert_eq!(kept(&chan), (0, 0));
        assert_eq!(chan.receivers(), 0);
        chan.send(Bytes::from_static(b"unheard"));
        assert_eq!(kept(&chan).0, 0, "a channel without receivers keeps nothing");
    }
}
