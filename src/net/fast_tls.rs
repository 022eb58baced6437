//! The parked connection's fast path over TLS: `fast`, with rustls
//! between the socket and the request.
//!
//! tokio-rustls is only an async wrapper round a rustls `ServerConnection`
//! and the socket, so a parked TLS connection drives the two by hand, as
//! `fast` drives a cleartext socket: it reads the records the socket
//! holds, decrypts them, and when the plaintext is one whole `GET` head the
//! hot path answers (`fast::answer`), hands head and body to rustls in one
//! vectored write (records of up to 16 KB across both, not one per part)
//! and sends every record with one `writev`. Anything else goes to hyper
//! as the cleartext path's does: the plaintext read so far first, then
//! the stream, whose rustls state is the one used here. Plaintext rustls
//! still holds after the first read (pipelined requests, a long head) is
//! hyper's too, so nothing is left above the socket while parked.

use std::io::{self, IoSlice, Read as _};
use std::time::Duration;

use bytes::Bytes;
use tokio::net::TcpStream;
use tokio_rustls::rustls::ServerConnection;

use super::fast::{self, Framed, Read};
use super::hot::Answer;

/// A TCP socket as the blocking `Read` and `Write` rustls asks for: a
/// read or write that would block says `WouldBlock` (and clears tokio's
/// readiness, as `try_read` does).
struct Nonblocking<'a>(&'a TcpStream);

impl io::Read for Nonblocking<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.0.try_read(buf)
    }
}

impl io::Write for Nonblocking<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.try_write(buf)
    }

    fn write_vectored(&mut self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
        self.0.try_write_vectored(bufs)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// `fast::read` for a TLS connection: what a readable parked connection
/// holds, answered when it is one whole request the hot path answers.
pub fn read(tcp: &TcpStream, tls: &mut ServerConnection, hot: &dyn Answer) -> Read {
    let mut buf = [0u8; fast::MAX_HEAD];
    let n = loop {
        match tls.reader().read(&mut buf) {
            // The client's close_notify.
            Ok(0) => return Read::Closed,
            Ok(n) => break n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            Err(_) => return Read::Closed,
        }
        match tls.read_tls(&mut Nonblocking(tcp)) {
            Ok(0) => return Read::Closed,
            Ok(_) => {}
            // No whole record yet: the rest wakes the connection again.
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Read::Nothing,
            Err(_) => return Read::Closed,
        }
        if tls.process_new_packets().is_err() {
            // rustls queued an alert saying why; send it if the socket takes it.
            let _ = tls.write_tls(&mut Nonblocking(tcp));
            return Read::Closed;
        }
    };
    // Whatever the records asked rustls to answer (a key update).
    while tls.wants_write() {
        if tls.write_tls(&mut Nonblocking(tcp)).is_err() {
            break;
        }
    }
    let more = tls.process_new_packets().map_or(true, |state| state.plaintext_bytes_to_read() > 0);
    match (more, fast::answer(&buf[..n], hot)) {
        (false, Some(framed)) => Read::Answered(framed),
        _ => Read::Pass(Bytes::copy_from_slice(&buf[..n])),
    }
}

/// `fast::send` for a TLS connection: hands `framed` to rustls and sends
/// its records, waiting at most `limit` for the client to take them;
/// `false` if it did not or the connection failed.
pub async fn send(tcp: &TcpStream, tls: &mut ServerConnection, framed: Framed, limit: Duration) -> bool {
    fast::send_with(tcp, framed, limit, |framed, taken| write(tcp, tls, framed, taken)).await
}

/// Hands rustls what it takes of `framed` after the first `taken` bytes
/// and sends its records until the socket would block: `None` once all is
/// sent, else how much of `framed` rustls has taken. rustls takes as much
/// as its send buffer allows (64 KB by default), so a large answer goes
/// in turns.
fn write(tcp: &TcpStream, tls: &mut ServerConnection, framed: &Framed, mut taken: usize) -> io::Result<Option<usize>> {
    loop {
        if taken < framed.wire_len() {
            taken += io::Write::write_vectored(&mut tls.writer(), &framed.rest(taken))?;
        }
        if !tls.wants_write() {
            if taken < framed.wire_len() {
                return Err(io::ErrorKind::WriteZero.into());
            }
            return Ok(None);
        }
        while tls.wants_write() {
            match tls.write_tls(&mut Nonblocking(tcp)) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(Some(taken)),
                Err(e) => return Err(e),
            }
        }
    }
}
