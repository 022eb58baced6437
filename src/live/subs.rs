//! What one live connection holds in the hub: its place in the per-IP
//! count and one broadcast receiver per subscription. Shared by the
//! WebSocket connection and the SSE stream; dropping it unsubscribes
//! everything and frees the connection's slot.

use std::net::IpAddr;
use std::task::{Context, Poll};

use bytes::Bytes;
use tokio::sync::broadcast::{self, error::RecvError};
use tokio_util::sync::ReusableBoxFuture;

use super::beat::Beat;
use super::hub::{Hub, Key, Refused};

type Recv = (Result<Bytes, RecvError>, broadcast::Receiver<Bytes>);

/// One subscription: the receiver lives inside a boxed `recv` future that
/// hands it back with each event, so it can wait without a borrow; the
/// box is reused for the next wait.
struct Sub {
    key: Key,
    next: ReusableBoxFuture<'static, Recv>,
}

async fn recv(mut rx: broadcast::Receiver<Bytes>) -> Recv {
    let r = rx.recv().await;
    (r, rx)
}

/// The subscriber fell behind its channel's buffer and missed events.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lagged;

pub struct Membership {
    hub: Hub,
    ip: IpAddr,
    subs: Subs,
    beat: Beat,
    /// False when a page of a foreign origin opened the connection: it may
    /// follow public topics but not authenticate (`live::origin`).
    may_auth: bool,
}

/// Most connections have one subscription: keep it inline, so it costs no
/// allocation of its own.
#[derive(Default)]
enum Subs {
    #[default]
    None,
    One(Sub),
    Many(Vec<Sub>),
}

impl Subs {
    fn as_slice(&self) -> &[Sub] {
        match self {
            Subs::None => &[],
            Subs::One(s) => std::slice::from_ref(s),
            Subs::Many(v) => v,
        }
    }

    fn as_mut_slice(&mut self) -> &mut [Sub] {
        match self {
            Subs::None => &mut [],
            Subs::One(s) => std::slice::from_mut(s),
            Subs::Many(v) => v,
        }
    }

    fn push(&mut self, sub: Sub) {
        *self = match std::mem::take(self) {
            Subs::None => Subs::One(sub),
            Subs::One(first) => Subs::Many(vec![first, sub]),
            Subs::Many(mut v) => {
                v.push(sub);
                Subs::Many(v)
            }
        };
    }

    fn swap_remove(&mut self, i: usize) -> Option<Sub> {
        let (removed, rest) = match std::mem::take(self) {
            Subs::None => (None, Subs::None),
            Subs::One(s) if i == 0 => (Some(s), Subs::None),
            one @ Subs::One(_) => (None, one),
            Subs::Many(mut v) if i < v.len() => {
                let s = v.swap_remove(i);
                let rest = match v.len() {
                    0 => Subs::None,
                    1 => v.pop().map_or(Subs::None, Subs::One),
                    _ => Subs::Many(v),
                };
                (Some(s), rest)
            }
            many => (None, many),
        };
        *self = rest;
        removed
    }
}

impl Membership {
    /// Takes a connection slot for `ip`.
    pub fn join(hub: &Hub, ip: IpAddr) -> Result<Membership, Refused> {
        hub.join(ip)?;
        Ok(Membership { hub: hub.clone(), ip, subs: Subs::None, beat: hub.clock().join(), may_auth: true })
    }

    pub fn hub(&self) -> &Hub {
        &self.hub
    }

    /// Refuses any later `auth` on this connection (opened from a page of
    /// a foreign origin).
    pub fn forbid_auth(&mut self) {
        self.may_auth = false;
    }

    pub fn may_auth(&self) -> bool {
        self.may_auth
    }

    pub fn contains(&self, key: &Key) -> bool {
        self.subs.as_slice().iter().any(|s| &s.key == key)
    }

    /// Topic and community subscriptions (the inbox does not count).
    pub fn public_count(&self) -> usize {
        self.subs.as_slice().iter().filter(|s| !matches!(s.key, Key::Inbox(_))).count()
    }

    pub fn keys(&self) -> impl Iterator<Item = &Key> {
        self.subs.as_slice().iter().map(|s| &s.key)
    }

    /// Subscribes to `key`; does nothing when already subscribed.
    pub fn add(&mut self, key: Key) -> Result<(), Refused> {
        if self.contains(&key) {
            return Ok(());
        }
        let rx = self.hub.subscribe(key.clone())?;
        self.subs.push(Sub { key, next: ReusableBoxFuture::new(recv(rx)) });
        Ok(())
    }

    pub fn remove(&mut self, key: &Key) {
        if let Some(i) = self.subs.as_slice().iter().position(|s| &s.key == key) {
            drop(self.subs.swap_remove(i));
            self.hub.release(key);
        }
    }

    /// Drops every subscription.
    pub fn clear(&mut self) {
        let subs = match std::mem::take(&mut self.subs) {
            Subs::None => Vec::new(),
            Subs::One(s) => vec![s],
            Subs::Many(v) => v,
        };
        for sub in subs {
            let Sub { key, next } = sub;
            drop(next);
            self.hub.release(&key);
        }
    }

    /// True once per heartbeat (and at shutdown); see `Beat::poll`.
    pub fn poll_beat(&mut self, cx: &mut Context<'_>) -> bool {
        self.beat.poll(self.hub.clock(), cx)
    }

    /// The next event from any subscription.
    pub fn poll_event(&mut self, cx: &mut Context<'_>) -> Poll<Result<Bytes, Lagged>> {
        let mut i = 0;
        while let Some(sub) = self.subs.as_mut_slice().get_mut(i) {
            match sub.next.poll(cx) {
                Poll::Pending => i += 1,
                Poll::Ready((Ok(frame), rx)) => {
                    sub.next.set(recv(rx));
                    return Poll::Ready(Ok(frame));
                }
                Poll::Ready((Err(RecvError::Lagged(_)), _)) => return Poll::Ready(Err(Lagged)),
                Poll::Ready((Err(RecvError::Closed), _)) => {
                    let key = sub.key.clone();
                    self.remove(&key);
                }
            }
        }
        Poll::Pending
    }
}

impl Drop for Membership {
    fn drop(&mut self) {
        self.clear();
        self.beat.leave(self.hub.clock());
        self.hub.leave(self.ip);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::live::LiveConfig;

    #[test]
    fn subscriptions_go_from_inline_to_a_vector_and_back() {
        let hub = Hub::new(&LiveConfig::default(), None);
        let mut m = Membership::join(&hub, std::net::Ipv4Addr::LOCALHOST.into()).expect("join");
        for t in 1..=3 {
            m.add(Key::Topic(t)).expect("add");
            m.add(Key::Topic(t)).expect("again");
        }
        assert!(matches!(m.subs, Subs::Many(ref v) if v.len() == 3));
        m.remove(&Key::Topic(2));
        m.remove(&Key::Topic(1));
        assert!(matches!(m.subs, Subs::One(ref s) if s.key == Key::Topic(3)));
        assert_eq!((hub.channels(), m.public_count()), (1, 1));
        m.remove(&Key::Topic(3));
        assert!(matches!(m.subs, Subs::None));
        assert_eq!(hub.channels(), 0);
        drop(m);
        assert_eq!(hub.sockets(), 0);
    }
}
