//! A `wss://` socket after its handshake: TLS 1.3 application-data records
//! sealed and opened in place with ring (RFC 8446, 5.2 and 5.3), with the
//! traffic keys rustls hands out for kernel TLS.
//!
//! Why by hand: rustls's buffered connection keeps a 4 KB receive buffer,
//! record queues and its handshake state for as long as a connection lives
//! (~10 KB an idle socket, and no way to run it on a driver's non-blocking
//! writes), and its unbuffered API must drive the whole connection from
//! the handshake on. rustls supports handing a finished connection's keys
//! to kTLS (`dangerous_extract_secrets`); this kernel has no kTLS, so this
//! does in user space what kTLS would do in the kernel, only for live
//! sockets, whose traffic after the 101 is WebSocket frames: an idle `wss`
//! socket holds its two keys and sequence numbers (~1.1 KB), and buffers
//! only while a record is half received or half sent.
//!
//! What it does not take: post-handshake messages (a client's KeyUpdate;
//! clients send one only after billions of bytes) end the connection, as
//! does any record that fails to open; the client reconnects.

use std::cell::RefCell;
use std::io::{self, ErrorKind, IoSlice};

use bytes::Bytes;
use ring::aead::{self, Aad, LessSafeKey, NONCE_LEN, Nonce, UnboundKey};
use tokio::net::TcpStream;
use tokio_rustls::rustls::{ConnectionTrafficSecrets, ExtractedSecrets};
use tokio_rustls::server::TlsStream;

/// Largest plaintext of a record (RFC 8446, 5.1).
const MAX_PLAIN: usize = 1 << 14;
/// Largest ciphertext a peer may send: the plaintext, its type byte,
/// padding and tag together (5.2).
const MAX_CIPHER: usize = MAX_PLAIN + 256;
const HEADER: usize = 5;
const TAG: usize = 16;

const APPLICATION_DATA: u8 = 23;
const ALERT: u8 = 21;

/// One direction's key, IV and next record's sequence number.
struct Direction {
    key: LessSafeKey,
    iv: [u8; NONCE_LEN],
    seq: u64,
}

impl Direction {
    fn new((seq, secrets): (u64, ConnectionTrafficSecrets)) -> io::Result<Direction> {
        let (alg, key, iv) = match secrets {
            ConnectionTrafficSecrets::Aes128Gcm { key, iv } => (&aead::AES_128_GCM, key, iv),
            ConnectionTrafficSecrets::Aes256Gcm { key, iv } => (&aead::AES_256_GCM, key, iv),
            ConnectionTrafficSecrets::Chacha20Poly1305 { key, iv } => (&aead::CHACHA20_POLY1305, key, iv),
            _ => return Err(io::Error::other("a cipher suite live sockets do not take")),
        };
        let key = UnboundKey::new(alg, key.as_ref()).map_err(|_| io::Error::other("a bad traffic key"))?;
        let iv = iv.as_ref().try_into().map_err(|_| io::Error::other("a bad traffic IV"))?;
        Ok(Direction { key: LessSafeKey::new(key), iv, seq })
    }

    /// The per-record nonce: the IV XOR the sequence number (5.3); each
    /// number is used once, as it moves on with every record.
    fn nonce(&mut self) -> io::Result<Nonce> {
        let mut nonce = self.iv;
        for (n, s) in nonce[NONCE_LEN - 8..].iter_mut().zip(self.seq.to_be_bytes()) {
            *n ^= s;
        }
        self.seq = self.seq.checked_add(1).ok_or_else(|| io::Error::other("TLS sequence numbers ran out"))?;
        Ok(Nonce::assume_unique_for_key(nonce))
    }
}

/// A live socket's TLS state after the handshake.
pub struct Records {
    tx: Direction,
    rx: Direction,
    /// The unsent tail of a record the kernel took only part of.
    out: Vec<u8>,
    /// Received bytes of records not yet complete.
    inp: Vec<u8>,
    /// Opened plaintext not read yet, from `plain_at`.
    plain: Vec<u8>,
    plain_at: usize,
}

thread_local! {
    /// Where records are sealed before they go out; what the kernel does
    /// not take moves to the socket's own `out`.
    static SEAL: RefCell<Vec<u8>> = RefCell::new(Vec::with_capacity(HEADER + MAX_PLAIN + 1 + TAG));
}

/// Takes a TLS WebSocket over from rustls once the 101 has gone out: its
/// socket, its keys, and the bytes read past the handshake (hyper's, then
/// whatever rustls had opened and nobody read).
pub fn take_over(tls: TlsStream<TcpStream>, leftover: Bytes) -> io::Result<(TcpStream, Box<Records>, Bytes)> {
    use std::io::Read;
    let (tcp, mut conn) = tls.into_inner();
    conn.process_new_packets().map_err(io::Error::other)?;
    let mut rest = leftover.to_vec();
    match conn.reader().read_to_end(&mut rest) {
        Ok(_) => {}
        Err(e) if e.kind() == ErrorKind::WouldBlock => {}
        Err(e) => return Err(e),
    }
    while conn.wants_write() {
        let mut out = Vec::new();
        conn.write_tls(&mut out)?;
        let mut at = 0;
        while at < out.len() {
            match tcp.try_write(&out[at..]) {
                Ok(n) => at += n,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }
    let ExtractedSecrets { tx, rx } = conn.dangerous_extract_secrets().map_err(io::Error::other)?;
    let records = Box::new(Records {
        tx: Direction::new(tx)?,
        rx: Direction::new(rx)?,
        out: Vec::new(),
        inp: Vec::new(),
        plain: Vec::new(),
        plain_at: 0,
    });
    Ok((tcp, records, Bytes::from(rest)))
}

/// Sends `buf` until the kernel would block; returns the bytes it took.
fn send_some(buf: &[u8], send: &mut impl FnMut(&[u8]) -> io::Result<usize>) -> io::Result<usize> {
    let mut at = 0;
    while at < buf.len() {
        match send(&buf[at..]) {
            Ok(0) => return Err(ErrorKind::WriteZero.into()),
            Ok(n) => at += n,
            Err(e) if e.kind() == ErrorKind::WouldBlock => break,
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(at)
}

fn invalid(why: &'static str) -> io::Error {
    io::Error::new(ErrorKind::InvalidData, why)
}

impl Records {
    /// A sealed record's bytes still to send.
    pub fn pending(&self) -> bool {
        !self.out.is_empty()
    }

    /// Sends what is left of the last record; true when nothing is.
    pub fn flush(&mut self, send: &mut impl FnMut(&[u8]) -> io::Result<usize>) -> io::Result<bool> {
        let sent = send_some(&self.out, send)?;
        if sent < self.out.len() {
            self.out.drain(..sent);
            return Ok(false);
        }
        self.out = Vec::new();
        Ok(true)
    }

    /// Seals up to one record of `bufs` and sends it; returns the plaintext
    /// bytes taken. Once a record is sealed its plaintext counts as
    /// written: what the kernel does not take waits in `out`, and nothing
    /// more is taken until it has gone.
    pub fn write(
        &mut self,
        bufs: &[IoSlice<'_>],
        send: &mut impl FnMut(&[u8]) -> io::Result<usize>,
    ) -> io::Result<usize> {
        if !self.flush(send)? {
            return Err(ErrorKind::WouldBlock.into());
        }
        self.seal(APPLICATION_DATA, bufs, send)
    }

    /// A `close_notify` alert, sent as far as the kernel takes it.
    pub fn close_notify(&mut self, send: &mut impl FnMut(&[u8]) -> io::Result<usize>) {
        if self.flush(send).unwrap_or(false) {
            let _ = self.seal(ALERT, &[IoSlice::new(&[1, 0])], send);
        }
    }

    fn seal(
        &mut self,
        kind: u8,
        bufs: &[IoSlice<'_>],
        send: &mut impl FnMut(&[u8]) -> io::Result<usize>,
    ) -> io::Result<usize> {
        SEAL.with_borrow_mut(|rec| {
            rec.clear();
            rec.extend_from_slice(&[APPLICATION_DATA, 3, 3, 0, 0]);
            let mut taken = 0;
            for b in bufs {
                let n = b.len().min(MAX_PLAIN - taken);
                rec.extend_from_slice(&b[..n]);
                taken += n;
                if taken == MAX_PLAIN {
                    break;
                }
            }
            rec.push(kind);
            let len = (rec.len() - HEADER + TAG) as u16;
            rec[3..HEADER].copy_from_slice(&len.to_be_bytes());
            let header: [u8; HEADER] = rec[..HEADER].try_into().expect("five bytes");
            let nonce = self.tx.nonce()?;
            let tag = self
                .tx
                .key
                .seal_in_place_separate_tag(nonce, Aad::from(header), &mut rec[HEADER..])
                .map_err(|_| io::Error::other("sealing a record failed"))?;
            rec.extend_from_slice(tag.as_ref());
            let sent = send_some(rec, send)?;
            self.out.extend_from_slice(&rec[sent..]);
            Ok(taken)
        })
    }

    /// Reads plaintext into `buf`: what was opened before, else the next
    /// complete records, reading the socket with `recv` until one is.
    /// `Ok(0)` is the end: the peer hung up or sent `close_notify`.
    pub fn read(&mut self, buf: &mut [u8], recv: &mut impl FnMut(&mut [u8]) -> io::Result<usize>) -> io::Result<usize> {
        loop {
            if self.plain_at < self.plain.len() {
                let n = buf.len().min(self.plain.len() - self.plain_at);
                buf[..n].copy_from_slice(&self.plain[self.plain_at..self.plain_at + n]);
                self.plain_at += n;
                if self.plain_at == self.plain.len() {
                    (self.plain, self.plain_at) = (Vec::new(), 0);
                }
                return Ok(n);
            }
            if self.open()? {
                continue;
            }
            let mut chunk = [0u8; 2048];
            match recv(&mut chunk) {
                Ok(0) => return Ok(0),
                Ok(n) => self.inp.extend_from_slice(&chunk[..n]),
                Err(e) => return Err(e),
            }
        }
    }

    /// Opens the first record of `inp` if it is all there; false if not.
    fn open(&mut self) -> io::Result<bool> {
        let Some(&[kind, major, _, hi, lo]) = self.inp.get(..HEADER) else { return Ok(false) };
        let len = usize::from(u16::from_be_bytes([hi, lo]));
        if kind != APPLICATION_DATA || major != 3 {
            return Err(invalid("not a TLS 1.3 application-data record"));
        }
        if !(TAG + 1..=MAX_CIPHER).contains(&len) {
            return Err(invalid("a TLS record of a length it cannot have"));
        }
        if self.inp.len() < HEADER + len {
            return Ok(false);
        }
        let header: [u8; HEADER] = self.inp[..HEADER].try_into().expect("five bytes");
        let nonce = self.rx.nonce()?;
        let plain = self
            .rx
            .key
            .open_in_place(nonce, Aad::from(header), &mut self.inp[HEADER..HEADER + len])
            .map_err(|_| invalid("a TLS record failed to open"))?;
        // The content type is the last byte that is not padding (5.2).
        let Some(end) = plain.iter().rposition(|&b| b != 0) else {
            return Err(invalid("a TLS record with no content type"));
        };
        match plain[end] {
            APPLICATION_DATA => self.plain.extend_from_slice(&plain[..end]),
            // close_notify ends the stream; any other alert is an error.
            ALERT if plain[..end] == [1, 0] => {}
            ALERT => return Err(invalid("a TLS alert")),
            _ => return Err(invalid("a TLS handshake message after the handshake")),
        }
        let close = plain[end] == ALERT;
        self.inp.drain(..HEADER + len);
        if self.inp.is_empty() {
            self.inp = Vec::new();
        }
        if close {
            return Err(ErrorKind::UnexpectedEof.into());
        }
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio_rustls::rustls::crypto::cipher::{AeadKey, Iv};

    fn pair() -> (Records, Records) {
        let secret = |k: u8, i: u8| ConnectionTrafficSecrets::Aes256Gcm {
            key: AeadKey::from([k; 32]),
            iv: Iv::from([i; NONCE_LEN]),
        };
        let side = |a, b| Records {
            tx: Direction::new((0, a)).expect("tx"),
            rx: Direction::new((0, b)).expect("rx"),
            out: Vec::new(),
            inp: Vec::new(),
            plain: Vec::new(),
            plain_at: 0,
        };
        (side(secret(1, 2), secret(3, 4)), side(secret(3, 4), secret(1, 2)))
    }

    #[test]
    fn records_sealed_on_one_side_open_on_the_other_in_any_split() {
        let (mut server, mut client) = pair();
        let mut wire = Vec::new();
        let big = vec![7u8; MAX_PLAIN + 100];
        for msg in [&b"hello"[..], &big] {
            let mut at = 0;
            while at < msg.len() {
                at += server
                    .write(&[IoSlice::new(&msg[at..])], &mut |b: &[u8]| {
                        wire.extend_from_slice(b);
                        Ok(b.len())
                    })
                    .expect("write");
            }
        }
        // Delivered a few bytes at a time, as a socket may.
        let mut fed = 0;
        let mut got = Vec::new();
        let mut buf = [0u8; 1000];
        while got.len() < 5 + big.len() {
            let n = client
                .read(&mut buf, &mut |b: &mut [u8]| {
                    let n = b.len().min(3).min(wire.len() - fed);
                    if n == 0 {
                        return Err(ErrorKind::WouldBlock.into());
                    }
                    b[..n].copy_from_slice(&wire[fed..fed + n]);
                    fed += n;
                    Ok(n)
                })
                .expect("read");
            got.extend_from_slice(&buf[..n]);
        }
        assert_eq!(&got[..5], b"hello");
        assert_eq!(&got[5..], &big[..]);
    }

    #[test]
    fn a_record_the_kernel_takes_half_of_is_finished_before_the_next() {
        let (mut server, _) = pair();
        let mut took = false;
        let n = server
            .write(&[IoSlice::new(b"abc"), IoSlice::new(b"def")], &mut |_: &[u8]| {
                if std::mem::replace(&mut took, true) { Err(ErrorKind::WouldBlock.into()) } else { Ok(4) }
            })
            .expect("first");
        assert_eq!(n, 6, "sealed whole");
        assert!(server.pending());
        let refused = server.write(&[IoSlice::new(b"x")], &mut |_: &[u8]| Err(ErrorKind::WouldBlock.into()));
        assert_eq!(refused.err().map(|e| e.kind()), Some(ErrorKind::WouldBlock));
        assert!(server.flush(&mut |b: &[u8]| Ok(b.len())).expect("flush"));
        assert!(!server.pending());
    }

    #[test]
    fn a_tampered_record_or_a_foreign_one_ends_the_stream() {
        let (mut server, mut client) = pair();
        let mut wire = Vec::new();
        server
            .write(&[IoSlice::new(b"hi")], &mut |b: &[u8]| {
                wire.extend_from_slice(b);
                Ok(b.len())
            })
            .expect("write");
        let last = wire.len() - 1;
        wire[last] ^= 1;
        // Hands `bytes` over in one read, then would block.
        let once = |bytes: Vec<u8>| {
            let mut feed = Some(bytes);
            move |b: &mut [u8]| {
                let w = feed.take().ok_or(io::Error::from(ErrorKind::WouldBlock))?;
                b[..w.len()].copy_from_slice(&w);
                Ok(w.len())
            }
        };
        let err = client.read(&mut [0u8; 64], &mut once(wire)).expect_err("tampered");
        assert_eq!(err.kind(), ErrorKind::InvalidData);
        let (_, mut client) = pair();
        let err = client.read(&mut [0u8; 64], &mut once(vec![22u8, 3, 3, 0, 40])).expect_err("handshake record");
        assert_eq!(err.kind(), ErrorKind::InvalidData);
    }
}
