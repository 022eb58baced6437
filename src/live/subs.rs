//! What one live connection holds in the hub: its place in the per-IP
//! count and one receiver per subscription (a cursor into its channel,
//! which knows its key). Shared by the WebSocket connection and the SSE
//! stream; dropping it unsubscribes everything and frees the connection's
//! slot.

use std::net::IpAddr;
use std::task::{Context, Poll};

use bytes::Bytes;

use super::beat::Beat;
pub use super::channel::Lagged;
use super::channel::Receiver;
use super::hub::{Hub, Key, Refused};

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
    One(Receiver),
    Many(Vec<Receiver>),
}

impl Subs {
    fn as_slice(&self) -> &[Receiver] {
        match self {
            Subs::None => &[],
            Subs::One(s) => std::slice::from_ref(s),
            Subs::Many(v) => v,
        }
    }

    fn as_mut_slice(&mut self) -> &mut [Receiver] {
        match self {
            Subs::None => &mut [],
            Subs::One(s) => std::slice::from_mut(s),
            Subs::Many(v) => v,
        }
    }

    fn push(&mut self, sub: Receiver) {
        *self = match std::mem::take(self) {
            Subs::None => Subs::One(sub),
            Subs::One(first) => Subs::Many(vec![first, sub]),
            Subs::Many(mut v) => {
                v.push(sub);
                Subs::Many(v)
            }
        };
    }

    fn swap_remove(&mut self, i: usize) -> Option<Receiver> {
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
        self.subs.as_slice().iter().any(|s| s.key() == key)
    }

    /// Topic and community subscriptions (the inbox does not count).
    pub fn public_count(&self) -> usize {
        self.subs.as_slice().iter().filter(|s| !matches!(s.key(), Key::Inbox(_))).count()
    }

    pub fn keys(&self) -> impl Iterator<Item = &Key> {
        self.subs.as_slice().iter().map(|s| s.key())
    }

    /// Subscribes to `key`; does nothing when already subscribed.
    pub fn add(&mut self, key: Key) -> Result<(), Refused> {
        if self.contains(&key) {
            return Ok(());
        }
        self.subs.push(self.hub.subscribe(key)?);
        Ok(())
    }

    pub fn remove(&mut self, key: &Key) {
        if let Some(i) = self.subs.as_slice().iter().position(|s| s.key() == key) {
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
            let key = sub.key().clone();
            drop(sub);
            self.hub.release(&key);
        }
    }

    /// True once per heartbeat (and at shutdown); see `Beat::poll`.
    pub fn poll_beat(&mut self, cx: &mut Context<'_>) -> bool {
        self.beat.poll(self.hub.clock(), cx)
    }

    /// The next event from any subscription, or `Lagged` when one fell
    /// behind its channel's buffer and missed events.
    pub fn poll_event(&mut self, cx: &mut Context<'_>) -> Poll<Result<Bytes, Lagged>> {
        for sub in self.subs.as_mut_slice() {
            if let Poll::Ready(r) = sub.poll_recv(cx) {
                return Poll::Ready(r);
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
        assert!(matches!(m.subs, Subs::One(ref s) if s.key() == &Key::Topic(3)));
        assert_eq!((hub.channels(), m.public_count()), (1, 1));
        m.remove(&Key::Topic(3));
        assert!(matches!(m.subs, Subs::None));
        assert_eq!(hub.channels(), 0);
        drop(m);
        assert_eq!(hub.sockets(), 0);
    }

    #[test]
    fn a_subscription_that_falls_behind_its_channel_reports_lagged() {
        let hub = Hub::new(&LiveConfig { channel_capacity: 2, ..LiveConfig::default() }, None);
        let mut m = Membership::join(&hub, std::net::Ipv4Addr::LOCALHOST.into()).expect("join");
        m.add(Key::Topic(1)).expect("add");
        m.add(Key::Topic(2)).expect("add");
        let cx = &mut Context::from_waker(std::task::Waker::noop());
        assert!(m.poll_event(cx).is_pending());
        hub.publish_with(&Key::Topic(1), || Some(Bytes::from_static(b"one")));
        assert_eq!(m.poll_event(cx), Poll::Ready(Ok(Bytes::from_static(b"one"))));
        for _ in 0..3 {
            hub.publish_with(&Key::Topic(2), || Some(Bytes::from_static(b"two")));
        }
        assert_eq!(m.poll_event(cx), Poll::Ready(Err(Lagged)));
    }
}
