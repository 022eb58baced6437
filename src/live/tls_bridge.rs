//! WebSockets over TLS (`wss://`). A live `Conn` writes straight to a
//! `TcpStream` with non-blocking syscalls, which a TLS stream cannot offer,
//! so the upgraded TLS stream is relayed to a loopback TCP pair and the
//! `Conn` runs on its inner end unchanged. It costs two more descriptors
//! and a relay task per `wss` socket; slow clients are still caught, as
//! the relay stops reading the loopback socket while the TLS side is full.

use bytes::Bytes;
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::server::TlsStream;

use super::{Conn, Membership};

/// Runs `member`'s connection over `tls`; `leftover` is what hyper read
/// past the handshake.
pub async fn run(mut tls: TlsStream<TcpStream>, leftover: Bytes, member: Membership) {
    let (inner, mut outer) = match loopback_pair().await {
        Ok(pair) => pair,
        Err(e) => return tracing::warn!("live: no loopback pair for a TLS WebSocket: {e}"),
    };
    tokio::spawn(Conn::new(inner, member, &leftover));
    let _ = tokio::io::copy_bidirectional(&mut tls, &mut outer).await;
}

/// Two connected loopback sockets. The listener lives only for the one
/// accept, and the accepted peer must be our own connecting socket, so no
/// other local process can slip in.
async fn loopback_pair() -> std::io::Result<(TcpStream, TcpStream)> {
    let listener = TcpListener::bind((std::net::Ipv4Addr::LOCALHOST, 0)).await?;
    let (outer, accepted) = tokio::join!(TcpStream::connect(listener.local_addr()?), listener.accept());
    let (outer, (inner, peer)) = (outer?, accepted?);
    if peer != outer.local_addr()? {
        return Err(std::io::Error::other("a stranger connected to the loopback relay"));
    }
    let _ = inner.set_nodelay(true);
    let _ = outer.set_nodelay(true);
    Ok((inner, outer))
}
