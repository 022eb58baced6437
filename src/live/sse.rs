//! The same events as Server-Sent Events, for simple clients and strict
//! proxies. Each event is its WebSocket frame's JSON, sliced out of the
//! shared frame (no copy), between `data: ` and a blank line; every
//! heartbeat sends a comment line so idle proxies keep the stream open.
//! A subscriber that falls behind gets an error event and the stream ends
//! (`EventSource` reconnects by itself).

use std::collections::VecDeque;
use std::convert::Infallible;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use futures_core::Stream;

use super::events::{error_frame, payload};
use super::proto;
use super::subs::{Lagged, Membership};

const DATA: &[u8] = b"data: ";
const END: &[u8] = b"\n\n";
const KEEP_ALIVE: &[u8] = b": keep-alive\n\n";

pub struct SseStream {
    member: Membership,
    /// The rest of the event being sent.
    queue: VecDeque<Bytes>,
    done: bool,
}

impl SseStream {
    /// A stream that starts with the `subscribed` event.
    pub fn new(member: Membership) -> SseStream {
        let mut s = SseStream { member, queue: VecDeque::new(), done: false };
        if let Some(hello) = proto::subscribed(&s.member) {
            s.push(&hello);
        }
        s
    }

    fn push(&mut self, frame: &Bytes) {
        self.queue.push_back(Bytes::from_static(DATA));
        self.queue.push_back(payload(frame));
        self.queue.push_back(Bytes::from_static(END));
    }
}

impl Stream for SseStream {
    type Item = Result<Bytes, Infallible>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let s = &mut *self;
        if let Some(chunk) = s.queue.pop_front() {
            return Poll::Ready(Some(Ok(chunk)));
        }
        if s.done {
            return Poll::Ready(None);
        }
        let tick = s.member.poll_beat(cx);
        if s.member.hub().is_closing() {
            s.done = true;
            return Poll::Ready(None);
        }
        if tick {
            return Poll::Ready(Some(Ok(Bytes::from_static(KEEP_ALIVE))));
        }
        match s.member.poll_event(cx) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(Ok(frame)) => {
                s.push(&frame);
                Poll::Ready(s.queue.pop_front().map(Ok))
            }
            Poll::Ready(Err(Lagged)) => {
                s.done = true;
                s.member.clear();
                if let Some(f) = error_frame("too_slow", "fell behind the event stream; reconnect and reload") {
                    s.push(&f);
                }
                Poll::Ready(s.queue.pop_front().map(Ok))
            }
        }
    }
}
