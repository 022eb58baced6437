//! Live updates: WebSocket and Server-Sent-Events subscribers to topics,
//! communities and their own inbox, with a tiny footprint per socket.
//!
//! - `hub`: channel map (topic/community/inbox -> channel), connection
//!   and byte limits, heartbeat clock, score coalescing.
//! - `channel`: one key's broadcast channel, a ring of frames and a
//!   cursor per receiver.
//! - `beat`: the heartbeat clock (buckets of wakers, no timer per socket).
//! - `events`: the JSON events, each serialised once into a shared frame.
//! - `frame`: the RFC 6455 subset a server needs, by hand.
//! - `conn`: one WebSocket connection as one small hand-written state
//!   machine (`conn::input` reads and parses, `conn::output` writes and
//!   queues).
//! - `reactor`: the few driver tasks the connections run on, each with an
//!   epoll set and a slab of connections (no task or tokio registration
//!   per socket).
//! - `subs`: a connection's subscriptions and its slot in the limits.
//! - `proto`: what clients may send.
//! - `origin`: which browser pages may open a user's inbox.
//! - `sse`: the same events as Server-Sent Events.
//! - `loadgen`: `pith bench ws`, the load generator for all of this.
//! - `settings`: `--live-*`, the limits above; `stream`: what an upgraded
//!   connection runs on (TCP, or TLS over it).
//!
//! docs/LIVE.md describes the protocol and the measured footprint.

pub mod beat;
pub mod channel;
pub mod conn;
pub mod events;
pub mod frame;
pub mod hub;
pub mod loadgen;
pub mod origin;
pub mod proto;
pub mod reactor;
pub mod settings;
pub mod sse;
pub mod stream;
pub mod subs;

pub use conn::Conn;
pub use hub::{Hub, Key, Limits, Refused, Resolver};
pub use origin::Origins;
pub use settings::LiveConfig;
pub use sse::SseStream;
pub use stream::{Stream, Upgraded};
pub use subs::Membership;
