//! The parked connection's fast path over TLS: `fast`, with the record
//! layer (`crate::tls13::Records`) between the socket and the request.
//!
//! A readable parked TLS connection opens the records the socket holds;
//! when their plaintext is one whole `GET` head the hot path answers
//! (`fast::answer`), head and body are sealed into records of up to 16 KB
//! across both (not one per part) and sent with one `write`. Anything
//! else goes to hyper as the cleartext path's does: the plaintext read so
//! far first, then the stream, whose records are the ones used here.
//! Plaintext the records still hold after the first read (pipelined
//! requests, a long head) is hyper's too.

use std::io::{self, ErrorKind};
use std::time::Duration;

use bytes::Bytes;
use tokio::net::TcpStream;

use super::fast::{self, Framed, Read};
use super::hot::Answer;
use crate::tls13::Records;

/// `fast::read` for a TLS connection: what a readable parked connection
/// holds, answered when it is one whole request the hot path answers.
pub fn read(tcp: &TcpStream, tls: &mut Records, hot: &dyn Answer) -> Read {
    let mut buf = [0u8; fast::MAX_HEAD];
    let n = match tls.read(&mut buf, &mut |b: &mut [u8]| tcp.try_read(b)) {
        Ok(0) => return Read::Closed,
        Ok(n) => n,
        // No whole record yet: the rest wakes the connection again.
        Err(e) if e.kind() == ErrorKind::WouldBlock => return Read::Nothing,
        // The client's close_notify, a record that does not open, a
        // message after the handshake.
        Err(_) => return Read::Closed,
    };
    match (tls.buffered(), fast::answer(&buf[..n], hot)) {
        (false, Some(framed)) => Read::Answered(framed),
        _ => Read::Pass(Bytes::copy_from_slice(&buf[..n])),
    }
}

/// `fast::send` for a TLS connection: seals `framed` into records and
/// sends them, waiting at most `limit` for the client to take them;
/// `false` if it did not or the connection failed.
pub async fn send(tcp: &TcpStream, tls: &mut Records, framed: Framed, limit: Duration) -> bool {
    fast::send_with(tcp, framed, limit, |framed, taken| write(tcp, tls, framed, taken)).await
}

/// Seals what is left of `framed` after the first `taken` bytes and sends
/// it until the socket would block: `None` once all is sent, else how much
/// of `framed` is sealed. A large answer goes in turns of `Records::write`.
fn write(tcp: &TcpStream, tls: &mut Records, framed: &Framed, mut taken: usize) -> io::Result<Option<usize>> {
    let mut send = |b: &[u8]| tcp.try_write(b);
    loop {
        if !tls.flush(&mut send)? {
            return Ok(Some(taken));
        }
        if taken == framed.wire_len() {
            return Ok(None);
        }
        taken += tls.write(&framed.rest(taken), &mut send)?;
    }
}
