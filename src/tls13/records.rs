//! A TLS 1.3 connection after its handshake: application-data records
//! sealed and opened in place with ring (RFC 8446, 5.2 and 5.3), with the
//! traffic keys rustls hands out for kernel TLS.
//!
//! Why by hand: rustls's buffered connection keeps a 4 KB receive buffer,
//! record queues and its handshake state for as long as a connection lives
//! (~9 KB an idle connection), copies each record through its buffers, and
//! cannot run on a live driver's non-blocking writes. rustls supports
//! handing a finished connection's keys to kTLS (`dangerous_extract_secrets`);
//! this kernel has no kTLS, so this does in user space what kTLS would do
//! in the kernel: an idle connection holds its two keys, IVs and sequence
//! numbers (~150 bytes), and buffers only while a record is half received
//! or half sent.
//!
//! What it does not take: post-handshake messages (a client's KeyUpdate;
//! clients send one only after ~2^24 records) end the connection, as does
//! any record that fails to open, and so does reaching AES-GCM's limit of
//! records under one key; the client reconnects.

use std::cell::RefCell;
use std::io::{self, ErrorKind, IoSlice};
use std::ops::Range;

use ring::aead::{self, Aad, LessSafeKey, NONCE_LEN, Nonce, UnboundKey};
use tokio_rustls::rustls::{ConnectionTrafficSecrets, ExtractedSecrets};

/// Largest plaintext of a record (RFC 8446, 5.1).
const MAX_PLAIN: usize = 1 << 14;
/// Largest ciphertext a peer may send: the plaintext, its type byte,
/// padding and tag together (5.2).
const MAX_CIPHER: usize = MAX_PLAIN + 256;
const HEADER: usize = 5;
const TAG: usize = 16;

const APPLICATION_DATA: u8 = 23;
const ALERT: u8 = 21;

/// Records one AES-GCM key may seal or open: rustls's confidentiality
/// limit for these suites (RFC 8446, 5.5; ChaCha20-Poly1305 has none that
/// a connection can reach).
const AES_GCM_RECORDS: u64 = 1 << 24;

/// One direction's key, IV and next record's sequence number. The key is
/// kept as its bytes and expanded (AES round keys, the GHASH table: ~550
/// bytes) only while records are sealed or opened, so an idle connection
/// does not hold the expansion; expanding costs well under a microsecond,
/// next to the record's own encryption.
struct Direction {
    alg: &'static aead::Algorithm,
    key: [u8; 32],
    iv: [u8; NONCE_LEN],
    seq: u64,
    /// The sequence number this key must not reach.
    limit: u64,
}

impl Drop for Direction {
    fn drop(&mut self) {
        for b in &mut self.key {
            // SAFETY: a valid, aligned place of our own; volatile, so the
            // wipe of a key that is never read again is not optimised away.
            unsafe { std::ptr::write_volatile(b, 0) };
        }
    }
}

impl Direction {
    fn new((seq, secrets): (u64, ConnectionTrafficSecrets)) -> io::Result<Direction> {
        let (alg, secret, iv, limit) = match secrets {
            ConnectionTrafficSecrets::Aes128Gcm { key, iv } => (&aead::AES_128_GCM, key, iv, AES_GCM_RECORDS),
            ConnectionTrafficSecrets::Aes256Gcm { key, iv } => (&aead::AES_256_GCM, key, iv, AES_GCM_RECORDS),
            ConnectionTrafficSecrets::Chacha20Poly1305 { key, iv } => (&aead::CHACHA20_POLY1305, key, iv, u64::MAX),
            _ => return Err(io::Error::other("a cipher suite this record layer does not take")),
        };
        let mut key = [0u8; 32];
        let bytes = secret.as_ref();
        if bytes.len() != alg.key_len() || bytes.len() > key.len() {
            return Err(io::Error::other("a bad traffic key"));
        }
        key[..bytes.len()].copy_from_slice(bytes);
        let iv = iv.as_ref().try_into().map_err(|_| io::Error::other("a bad traffic IV"))?;
        Ok(Direction { alg, key, iv, seq, limit })
    }

    /// The key, expanded for sealing or opening records.
    fn expand(&self) -> io::Result<LessSafeKey> {
        let key = UnboundKey::new(self.alg, &self.key[..self.alg.key_len()])
            .map_err(|_| io::Error::other("a bad traffic key"))?;
        Ok(LessSafeKey::new(key))
    }

    /// The per-record nonce: the IV XOR the sequence number (5.3); each
    /// number is used once, as it moves on with every record.
    fn nonce(&mut self) -> io::Result<Nonce> {
        let mut nonce = self.iv;
        for (n, s) in nonce[NONCE_LEN - 8..].iter_mut().zip(self.seq.to_be_bytes()) {
            *n ^= s;
        }
        if self.seq >= self.limit {
            return Err(io::Error::other("a TLS key has sealed or opened all the records it may"));
        }
        self.seq += 1;
        Ok(Nonce::assume_unique_for_key(nonce))
    }
}

/// A connection's TLS state after the handshake.
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

/// Plaintext sealed by one `write`, in records of up to `MAX_PLAIN`: most
/// answers go out whole in one `write(2)`.
const WRITE_MAX: usize = 4 * MAX_PLAIN;
/// Bytes asked of the socket at least, when reading records.
const READ_CHUNK: usize = 4096;

thread_local! {
    /// Where records are sealed before they go out; what the kernel does
    /// not take moves to the connection's own `out`.
    static SEAL: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
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

/// The length of the record `bytes` begin with, once its header is there.
fn record_len(bytes: &[u8]) -> Option<usize> {
    let &[_, _, _, hi, lo] = bytes.get(..HEADER)? else { return None };
    Some(HEADER + usize::from(u16::from_be_bytes([hi, lo])))
}

/// A record opened in place in `inp`.
struct Opened {
    /// Where its application data is in `inp`.
    content: Range<usize>,
    /// Its length on the wire.
    len: usize,
    /// It was the peer's `close_notify`.
    close: bool,
}

impl Records {
    /// The record layer for the keys and sequence numbers rustls handed
    /// over at the end of a handshake.
    pub fn new(secrets: ExtractedSecrets) -> io::Result<Records> {
        Ok(Records {
            tx: Direction::new(secrets.tx)?,
            rx: Direction::new(secrets.rx)?,
            out: Vec::new(),
            inp: Vec::new(),
            plain: Vec::new(),
            plain_at: 0,
        })
    }

    /// A sealed record's bytes still to send.
    pub fn pending(&self) -> bool {
        !self.out.is_empty()
    }

    /// Plaintext a `read` returns without asking the socket: opened and not
    /// read yet, or in a record received whole.
    pub fn buffered(&self) -> bool {
        self.plain_at < self.plain.len() || record_len(&self.inp).is_some_and(|len| self.inp.len() >= len)
    }

    /// Appends to `into` the plaintext `buffered` says is there, opening
    /// the records received whole; a record half received stays.
    pub fn take_buffered(&mut self, into: &mut Vec<u8>) -> io::Result<()> {
        let mut buf = [0u8; READ_CHUNK];
        while self.buffered() {
            match self.read(&mut buf, &mut |_| Err(ErrorKind::WouldBlock.into())) {
                Ok(n) => into.extend_from_slice(&buf[..n]),
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Sends what is left of the last records; true when nothing is.
    pub fn flush(&mut self, send: &mut impl FnMut(&[u8]) -> io::Result<usize>) -> io::Result<bool> {
        let sent = send_some(&self.out, send)?;
        if sent < self.out.len() {
            self.out.drain(..sent);
            return Ok(false);
        }
        self.out = Vec::new();
        Ok(true)
    }

    /// Seals up to `WRITE_MAX` bytes of `bufs` into records and sends
    /// them; returns the plaintext bytes taken. Once a record is sealed its
    /// plaintext counts as written: what the kernel does not take waits in
    /// `out`, and nothing more is taken until it has gone (`WouldBlock`).
    pub fn write(
        &mut self,
        bufs: &[IoSlice<'_>],
        send: &mut impl FnMut(&[u8]) -> io::Result<usize>,
    ) -> io::Result<usize> {
        if !self.flush(send)? {
            return Err(ErrorKind::WouldBlock.into());
        }
        if bufs.iter().all(|b| b.is_empty()) {
            return Ok(0);
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
        let total = bufs.iter().map(|b| b.len()).sum::<usize>().min(WRITE_MAX);
        let key = self.tx.expand()?;
        SEAL.with_borrow_mut(|wire| {
            wire.clear();
            // Where the next plaintext byte is: `bufs[part][at]`.
            let (mut part, mut at, mut taken) = (0, 0, 0);
            loop {
                let start = wire.len();
                wire.extend_from_slice(&[APPLICATION_DATA, 3, 3, 0, 0]);
                let end = (taken + MAX_PLAIN).min(total);
                while taken < end {
                    let b = &bufs[part][at..];
                    let n = b.len().min(end - taken);
                    wire.extend_from_slice(&b[..n]);
                    (taken, at) = (taken + n, at + n);
                    if at == bufs[part].len() {
                        (part, at) = (part + 1, 0);
                    }
                }
                wire.push(kind);
                let len = (wire.len() - start - HEADER + TAG) as u16;
                wire[start + 3..start + HEADER].copy_from_slice(&len.to_be_bytes());
                let header: [u8; HEADER] = wire[start..start + HEADER].try_into().expect("five bytes");
                let nonce = self.tx.nonce()?;
                let tag = key
                    .seal_in_place_separate_tag(nonce, Aad::from(header), &mut wire[start + HEADER..])
                    .map_err(|_| io::Error::other("sealing a record failed"))?;
                wire.extend_from_slice(tag.as_ref());
                if taken == total {
                    break;
                }
            }
            let sent = send_some(wire, send)?;
            self.out.extend_from_slice(&wire[sent..]);
            if wire.capacity() > 2 * (WRITE_MAX + MAX_CIPHER) {
                *wire = Vec::new();
            }
            Ok(taken)
        })
    }

    /// Reads plaintext into `buf`: what was opened before, else the next
    /// complete records, reading the socket with `recv` until one is.
    /// `Ok(0)` is the peer hanging up; its `close_notify` is
    /// `UnexpectedEof`.
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
            if let Some(opened) = self.open()? {
                // Straight to the caller; only what does not fit is kept.
                let content = &self.inp[opened.content];
                let n = buf.len().min(content.len());
                buf[..n].copy_from_slice(&content[..n]);
                self.plain.extend_from_slice(&content[n..]);
                self.inp.drain(..opened.len);
                if self.inp.is_empty() {
                    self.inp = Vec::new();
                }
                if opened.close {
                    return Err(ErrorKind::UnexpectedEof.into());
                }
                if n > 0 {
                    return Ok(n);
                }
                continue;
            }
            // Into `inp` itself: the rest of the record begun, or a chunk.
            let have = self.inp.len();
            let want = record_len(&self.inp).map_or(0, |len| len.saturating_sub(have)).max(READ_CHUNK);
            self.inp.resize(have + want, 0);
            let got = recv(&mut self.inp[have..]);
            self.inp.truncate(have + got.as_ref().map_or(0, |n| *n));
            if self.inp.is_empty() {
                self.inp = Vec::new();
            }
            if got? == 0 {
                return Ok(0);
            }
        }
    }

    /// Opens the first record of `inp` in place if it is all there.
    fn open(&mut self) -> io::Result<Option<Opened>> {
        let Some(&[kind, major, _, hi, lo]) = self.inp.get(..HEADER) else { return Ok(None) };
        let len = usize::from(u16::from_be_bytes([hi, lo]));
        if kind != APPLICATION_DATA || major != 3 {
            return Err(invalid("not a TLS 1.3 application-data record"));
        }
        if !(TAG + 1..=MAX_CIPHER).contains(&len) {
            return Err(invalid("a TLS record of a length it cannot have"));
        }
        if self.inp.len() < HEADER + len {
            return Ok(None);
        }
        let header: [u8; HEADER] = self.inp[..HEADER].try_into().expect("five bytes");
        let nonce = self.rx.nonce()?;
        let plain = self
            .rx
            .expand()?
            .open_in_place(nonce, Aad::from(header), &mut self.inp[HEADER..HEADER + len])
            .map_err(|_| invalid("a TLS record failed to open"))?;
        // The content type is the last byte that is not padding (5.2).
        let Some(end) = plain.iter().rposition(|&b| b != 0) else {
            return Err(invalid("a TLS record with no content type"));
        };
        let close = match plain[end] {
            APPLICATION_DATA => false,
            // close_notify ends the stream; any other alert is an error.
            ALERT if plain[..end] == [1, 0] => true,
            ALERT => return Err(invalid("a TLS alert")),
            _ => return Err(invalid("a TLS handshake message after the handshake")),
        };
        let content = if close { HEADER..HEADER } else { HEADER..HEADER + end };
        Ok(Some(Opened { content, len: HEADER + len, close }))
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
    fn one_write_seals_up_to_four_records_and_a_read_opens_them_one_by_one() {
        let (mut server, mut client) = pair();
        let mut wire = Vec::new();
        let mut sends = 0;
        let big = vec![9u8; WRITE_MAX + 10];
        let taken = server
            .write(&[IoSlice::new(b"head"), IoSlice::new(&big)], &mut |b: &[u8]| {
                sends += 1;
                wire.extend_from_slice(b);
                Ok(b.len())
            })
            .expect("write");
        assert_eq!((taken, sends), (WRITE_MAX, 1), "four full records in one send");
        let mut got = Vec::new();
        let mut fed = 0;
        let mut buf = vec![0u8; 2 * MAX_PLAIN];
        loop {
            match client.read(&mut buf, &mut |b: &mut [u8]| {
                let n = b.len().min(wire.len() - fed);
                if n == 0 {
                    return Err(ErrorKind::WouldBlock.into());
                }
                b[..n].copy_from_slice(&wire[fed..fed + n]);
                fed += n;
                Ok(n)
            }) {
                Ok(n) => {
                    assert!(n <= MAX_PLAIN, "a read returns one record's plaintext at most");
                    got.extend_from_slice(&buf[..n]);
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) => panic!("{e}"),
            }
        }
        assert_eq!(&got[..4], b"head");
        assert_eq!(&got[4..], &big[..WRITE_MAX - 4]);
        assert!(!client.buffered());
    }

    #[test]
    fn buffered_plaintext_and_whole_records_are_taken_and_a_half_record_stays() {
        let (mut server, mut client) = pair();
        let mut wire = Vec::new();
        for msg in [&b"one"[..], b"two"] {
            server
                .write(&[IoSlice::new(msg)], &mut |b: &[u8]| {
                    wire.extend_from_slice(b);
                    Ok(b.len())
                })
                .expect("write");
        }
        let half = wire.len() - 5;
        let mut first = Some(wire[..half].to_vec());
        let mut small = [0u8; 2];
        let n = client
            .read(&mut small, &mut |b: &mut [u8]| {
                let w = first.take().ok_or(io::Error::from(ErrorKind::WouldBlock))?;
                b[..w.len()].copy_from_slice(&w);
                Ok(w.len())
            })
            .expect("read");
        assert_eq!(&small[..n], b"on");
        assert!(client.buffered(), "the rest of the first record");
        let mut taken = Vec::new();
        client.take_buffered(&mut taken).expect("take");
        assert_eq!(taken, b"e");
        assert!(!client.buffered(), "the second record is not whole yet");
        let mut rest = Some(wire[half..].to_vec());
        let n = client
            .read(&mut small, &mut |b: &mut [u8]| {
                let w = rest.take().ok_or(io::Error::from(ErrorKind::WouldBlock))?;
                b[..w.len()].copy_from_slice(&w);
                Ok(w.len())
            })
            .expect("read");
        assert_eq!(&small[..n], b"tw");
    }

    #[test]
    fn a_key_that_sealed_all_the_records_it_may_seals_no_more() {
        let (mut server, _) = pair();
        server.tx.seq = AES_GCM_RECORDS - 1;
        assert!(server.write(&[IoSlice::new(b"x")], &mut |b: &[u8]| Ok(b.len())).is_ok(), "the last one");
        let err = server.write(&[IoSlice::new(b"x")], &mut |b: &[u8]| Ok(b.len())).expect_err("refused");
        assert!(err.to_string().contains("all the records"), "{err}");
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
