//! What the client says: reads into a stack buffer, frame parsing over
//! what arrived, and the JSON messages (subscribe, unsubscribe, auth, ping).

use std::io::ErrorKind;
use std::task::{Context, Poll};

use super::{ACTIVE, Conn, PINGED, READ_CHUNK, READS_PER_POLL, Step, Stop, close};
use crate::live::events::{Out, text_frame};
use crate::live::frame::{self, Head, HeadError, OP_BINARY, OP_CLOSE, OP_CONTINUATION, OP_PING, OP_PONG};
use crate::live::hub::Key;
use crate::live::proto::{self, Request};

impl From<HeadError> for Stop {
    fn from(e: HeadError) -> Stop {
        match e {
            HeadError::Protocol(why) => Stop::Close(close::PROTOCOL, why),
            HeadError::TooBig => Stop::Close(close::TOO_BIG, "message too big"),
        }
    }
}

impl Conn {
    /// Reads what has arrived, a stack buffer at a time, and yields after
    /// `READS_PER_POLL` reads so one chatty client cannot hog a worker.
    pub(super) fn read(&mut self, cx: &mut Context<'_>) -> Step {
        for _ in 0..READS_PER_POLL {
            if !self.tcp.readable() {
                return Ok(());
            }
            let mut buf = [0u8; READ_CHUNK];
            match self.tcp.try_read(&mut buf) {
                Ok(0) => return Err(Stop::Hangup),
                Ok(n) => self.received(&mut buf[..n])?,
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::Interrupted) => {}
                Err(_) => return Err(Stop::Hangup),
            }
        }
        cx.waker().wake_by_ref();
        Ok(())
    }

    /// Handles the complete frames in what was held plus `data`, and keeps
    /// the incomplete rest.
    pub(super) fn received(&mut self, data: &mut [u8]) -> Step {
        let held = self.extra.as_mut().map(|e| std::mem::take(&mut e.partial)).unwrap_or_default();
        if held.is_empty() {
            let used = self.frames(data)?;
            if used < data.len() {
                self.extra_mut().partial.extend_from_slice(&data[used..]);
            }
        } else {
            let mut held = held;
            held.extend_from_slice(data);
            let used = self.frames(&mut held)?;
            held.drain(..used);
            if !held.is_empty() {
                self.extra_mut().partial = held;
            }
        }
        Ok(())
    }

    /// Handles each complete frame at the start of `buf`; returns the bytes used.
    fn frames(&mut self, buf: &mut [u8]) -> Result<usize, Stop> {
        let max = self.member.hub().limits().max_message;
        frame::client_frames(buf, max, |head, payload| self.frame(head, payload))
    }

    fn frame(&mut self, head: Head, payload: &mut [u8]) -> Step {
        match head.opcode {
            OP_PING => {
                self.flags |= ACTIVE;
                self.send_control(OP_PONG, payload)
            }
            OP_PONG => {
                self.flags &= !PINGED;
                Ok(())
            }
            OP_CLOSE => {
                // RFC 6455 5.5.1: a body starts with a two-byte code.
                let code = match *payload {
                    [] => close::NORMAL,
                    [_] => return Err(Stop::Close(close::PROTOCOL, "a close body of one byte")),
                    [a, b, ref reason @ ..] => {
                        // 5.5.1: the reason is UTF-8; 7.4.1: else 1007.
                        if std::str::from_utf8(reason).is_err() {
                            return Err(Stop::Close(close::INVALID_DATA, "close reason is not UTF-8"));
                        }
                        u16::from_be_bytes([a, b])
                    }
                };
                let valid = matches!(code, 1000..=1003 | 1007..=1014 | 3000..=4999);
                Err(Stop::Close(if valid { code } else { close::PROTOCOL }, ""))
            }
            OP_CONTINUATION => {
                let max = self.member.hub().limits().max_message;
                let Some(ex) = self.extra.as_mut().filter(|e| e.message_op != 0) else {
                    return Err(Stop::Close(close::PROTOCOL, "continuation frame without a message"));
                };
                if ex.message.len() + payload.len() > max {
                    return Err(Stop::Close(close::TOO_BIG, "message too big"));
                }
                ex.message.extend_from_slice(payload);
                if !head.fin {
                    return Ok(());
                }
                let (op, msg) = (std::mem::take(&mut ex.message_op), std::mem::take(&mut ex.message));
                self.flags |= ACTIVE;
                self.message(op, &msg)
            }
            op => {
                if self.extra.as_ref().is_some_and(|e| e.message_op != 0) {
                    return Err(Stop::Close(close::PROTOCOL, "a message began before the last one ended"));
                }
                self.flags |= ACTIVE;
                if head.fin {
                    return self.message(op, payload);
                }
                let ex = self.extra_mut();
                ex.message_op = op;
                ex.message = payload.to_vec();
                Ok(())
            }
        }
    }

    /// A complete client message.
    fn message(&mut self, op: u8, payload: &[u8]) -> Step {
        if op == OP_BINARY {
            return self.send_error("unsupported", "binary messages are not accepted; send JSON text");
        }
        let Ok(text) = std::str::from_utf8(payload) else {
            return Err(Stop::Close(close::INVALID_DATA, "text message is not UTF-8"));
        };
        match proto::parse(text) {
            Err(e) => self.send_error("invalid_message", &e),
            Ok(Request::Ping {}) => self.send_opt(text_frame(&Out::Pong)),
            Ok(Request::Subscribe { topics, communities }) => self.subscribe(&topics, &communities),
            Ok(Request::Unsubscribe { topics, communities }) => self.unsubscribe(&topics, &communities),
            Ok(Request::Auth { token }) => self.auth(token),
        }
    }

    fn subscribe(&mut self, topics: &[i64], communities: &[String]) -> Step {
        let keys = match proto::keys(topics, communities) {
            Ok(k) => k,
            Err(e) => return self.send_error("invalid_message", &e),
        };
        let max = self.member.hub().limits().max_subscriptions;
        let new = keys.iter().filter(|k| !self.member.contains(k)).count();
        if self.member.public_count() + new > max {
            return self.send_error("too_many_subscriptions", &format!("at most {max} subscriptions per connection"));
        }
        for key in keys {
            if let Err(r) = self.member.add(key) {
                return self.send_error(r.code(), r.message());
            }
        }
        self.send_opt(proto::subscribed(&self.member))
    }

    fn unsubscribe(&mut self, topics: &[i64], communities: &[String]) -> Step {
        match proto::keys(topics, communities) {
            Ok(keys) => keys.iter().for_each(|k| self.member.remove(k)),
            Err(e) => return self.send_error("invalid_message", &e),
        }
        self.send_opt(proto::subscribed(&self.member))
    }

    fn auth(&mut self, token: String) -> Step {
        if self.member.keys().any(|k| matches!(k, Key::Inbox(_))) {
            return self.send_error("already_authenticated", "this connection is already authenticated");
        }
        if !self.member.may_auth() {
            return self.send_error(
                "origin_not_allowed",
                "a page of this origin may follow public topics but not open an inbox",
            );
        }
        if self.extra.as_ref().is_some_and(|e| e.auth.is_some()) {
            return self.send_error("busy", "a token is already being checked");
        }
        match self.member.hub().resolve(token) {
            Some(check) => {
                self.extra_mut().auth = Some(check);
                Ok(())
            }
            None => self.send_error("unavailable", "this server cannot check tokens"),
        }
    }

    pub(super) fn poll_auth(&mut self, cx: &mut Context<'_>) -> Step {
        let Some(ex) = self.extra.as_mut() else { return Ok(()) };
        let Some(check) = ex.auth.as_mut() else { return Ok(()) };
        let Poll::Ready(user) = check.as_mut().poll(cx) else { return Ok(()) };
        ex.auth = None;
        let Some(user) = user else {
            return self.send_error("unauthorized", "invalid or revoked token");
        };
        if let Err(r) = self.member.add(Key::Inbox(user)) {
            return self.send_error(r.code(), r.message());
        }
        self.send_opt(proto::subscribed(&self.member))
    }
}
