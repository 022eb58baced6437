//! TLS 1.3 connections as this server runs them: rustls does the
//! handshake (`handshake`), then hands over the traffic keys, and the
//! connection's records are sealed and opened here (`records`), for HTTP
//! and for live WebSockets alike. What an idle connection keeps is its two
//! keys, not rustls's buffers and state.

pub mod handshake;
pub mod records;

pub use handshake::{Accepted, accept};
pub use records::Records;
