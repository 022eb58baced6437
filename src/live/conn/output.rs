//! What the server writes: events and replies go straight to the socket
//! with `try_write`; only what the kernel refuses is queued, as shared
//! `Bytes`, up to the per-socket and server-wide limits.

use std::io::{ErrorKind, IoSlice};
use std::task::{Context, Poll};

use bytes::{Buf, Bytes};

use super::{Conn, EVENTS_PER_POLL, Step, Stop, close};
use crate::live::events::error_frame;
use crate::live::frame::MAX_CONTROL;
use crate::live::reactor::Socket;
use crate::live::subs::Lagged;

impl Conn {
    pub(super) fn events(&mut self, cx: &mut Context<'_>) -> Step {
        for _ in 0..EVENTS_PER_POLL {
            match self.member.poll_event(cx) {
                Poll::Pending => return Ok(()),
                Poll::Ready(Ok(frame)) => self.send(frame)?,
                Poll::Ready(Err(Lagged)) => return Err(Stop::Close(close::TOO_SLOW, "fell behind the event stream")),
            }
        }
        cx.waker().wake_by_ref();
        Ok(())
    }

    pub(super) fn send_opt(&mut self, frame: Option<Bytes>) -> Step {
        frame.map_or(Ok(()), |f| self.send(f))
    }

    pub(super) fn send_error(&mut self, code: &str, message: &str) -> Step {
        self.send_opt(error_frame(code, message))
    }

    /// Writes a frame now as far as the kernel takes it; queues the rest.
    pub(super) fn send(&mut self, frame: Bytes) -> Step {
        if self.extra.as_ref().is_some_and(|e| !e.out.is_empty()) {
            return self.enqueue(frame, false);
        }
        let n = write_now(&mut self.tcp, &frame)?;
        if n < frame.len() { self.enqueue(frame.slice(n..), false) } else { Ok(()) }
    }

    /// A control frame built on the stack; copied only if it must wait.
    pub(super) fn send_control(&mut self, opcode: u8, payload: &[u8]) -> Step {
        let n = payload.len().min(MAX_CONTROL);
        let mut buf = [0u8; 2 + MAX_CONTROL];
        buf[0] = 0x80 | opcode;
        buf[1] = n as u8;
        buf[2..2 + n].copy_from_slice(&payload[..n]);
        let frame = &buf[..2 + n];
        if self.extra.as_ref().is_some_and(|e| !e.out.is_empty()) {
            return self.enqueue(Bytes::copy_from_slice(frame), false);
        }
        let w = write_now(&mut self.tcp, frame)?;
        if w < frame.len() { self.enqueue(Bytes::copy_from_slice(&frame[w..]), false) } else { Ok(()) }
    }

    /// Queues output; a client whose queue would pass the limit (beyond
    /// one frame, so any single event fits) is too slow. `force` is for
    /// the final close frame.
    pub(super) fn enqueue(&mut self, rest: Bytes, force: bool) -> Step {
        let hub = self.member.hub();
        let ex = self.extra.get_or_insert_with(Default::default);
        if force {
            hub.add_pending(rest.len());
        } else {
            let over = !ex.out.is_empty() && ex.out_bytes + rest.len() > hub.limits().max_pending;
            if over || !hub.reserve_pending(rest.len()) {
                return Err(Stop::Close(close::TOO_SLOW, "too slow"));
            }
        }
        ex.out_bytes += rest.len();
        ex.out.push_back(rest);
        Ok(())
    }

    /// Writes queued output while the kernel takes it.
    pub(super) fn flush(&mut self) -> Step {
        // Over TLS, the rest of a record the kernel took part of goes first.
        match self.tcp.flush() {
            Ok(true) => {}
            Ok(false) => return Ok(()),
            Err(_) => return Err(Stop::Hangup),
        }
        loop {
            let Some(ex) = self.extra.as_mut().filter(|e| !e.out.is_empty()) else { return Ok(()) };
            if !self.tcp.writable() {
                return Ok(());
            }
            let written = {
                let mut slices = [IoSlice::new(&[]); 16];
                let k = ex.out.iter().zip(slices.iter_mut()).map(|(b, s)| *s = IoSlice::new(b)).count();
                self.tcp.try_write_vectored(&slices[..k])
            };
            match written {
                Ok(0) => return Err(Stop::Hangup),
                Ok(n) => {
                    self.member.hub().release_pending(n.min(ex.out_bytes));
                    ex.out_bytes = ex.out_bytes.saturating_sub(n);
                    let mut n = n;
                    while let Some(front) = ex.out.front_mut() {
                        if front.len() > n {
                            front.advance(n);
                            break;
                        }
                        n -= front.len();
                        ex.out.pop_front();
                    }
                }
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::Interrupted) => {}
                Err(_) => return Err(Stop::Hangup),
            }
        }
    }
}

/// Writes as much of `data` as the kernel takes without blocking.
pub(super) fn write_now(tcp: &mut Socket, data: &[u8]) -> Result<usize, Stop> {
    let mut done = 0;
    while done < data.len() {
        match tcp.try_write(&data[done..]) {
            Ok(0) => return Err(Stop::Hangup),
            Ok(n) => done += n,
            Err(e) if e.kind() == ErrorKind::WouldBlock => break,
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(_) => return Err(Stop::Hangup),
        }
    }
    Ok(done)
}
