//! What a WebSocket runs on once the HTTP server hands its connection
//! over: the socket, or TLS over it, with the bytes read past the
//! handshake. Defined here, below the network layer, so the live
//! connections need nothing from the server that accepted them.

use bytes::Bytes;
use tokio::net::TcpStream;

use crate::tls13::Records;

/// An upgraded connection and the bytes hyper read past the handshake.
pub type Upgraded = (Stream, Bytes);

/// What an upgraded connection runs on.
pub enum Stream {
    Tcp(TcpStream),
    /// The socket and its TLS records (`crate::tls13`), with any plaintext
    /// they hold that hyper did not read.
    Tls(TcpStream, Box<Records>),
}
