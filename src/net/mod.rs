//! The network layer: what happens between a socket and a handler.
//!
//! - `server`: the accept loop, connection caps, header limits and
//!   timeouts, HTTP/1.1 and HTTP/2 (by ALPN or prior knowledge).
//! - `idle`: keep-alive connections parked between requests without
//!   hyper's buffers, and the hand-off of upgraded sockets to `live`.
//! - `fast`: a parked connection's cached-topic answer, without hyper;
//!   `fast_tls` the same through a TLS connection's records.
//! - `hot`: cached public topics answered before the router.
//! - `tls`: rustls's configuration, certificate files and their reload on
//!   SIGHUP; `tls_stream`: a TLS connection after its handshake
//!   (`crate::tls13`) as hyper reads and writes it.
//! - `deadline`: the whole-request time limit.
//! - `settings`: `--request-timeout`, `--header-timeout`, `--max-header-kb`,
//!   `--max-connections`, `--tls-cert`, `--tls-key`.

pub mod deadline;
pub mod fast;
pub mod fast_tls;
pub mod hot;
pub mod idle;
pub mod server;
pub mod settings;
pub mod tls;
pub mod tls_stream;

/// Largest request body accepted: a 40,000-character post fits even when
/// every character is escaped as a surrogate pair (`\uXXXX\uXXXX`, 12 bytes).
pub const MAX_BODY_BYTES: usize = 512 * 1024;

pub use settings::NetConfig;
