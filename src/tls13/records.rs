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
//! in the kernel: an idle connection holds its two traffic secrets, keys,
//! IVs and sequence numbers (~250 bytes), and buffers only while a record
//! is half received or half sent.
//!
//! Key updates (RFC 8446, 4.6.3): each direction keeps its traffic
//! secret (rustls logs it through `KeyLog`, `handshake`), so a client's
//! KeyUpdate moves the keys it sends with on, and one that asks for ours
//! gets our KeyUpdate before our next record; this side sends one itself
//! before its key reaches AES-GCM's limit of records. Any other message
//! after the handshake ends the connection, as does any record that fails
//! to open.

use std::cell::RefCell;
use std::io::{self, ErrorKind, IoSlice};
use std::ops::Range;

use ring::aead::{self, Aad, LessSafeKey, NONCE_LEN, Nonce, UnboundKey};
use ring::hkdf::{self, KeyType};
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
const HANDSHAKE: u8 = 22;
/// A KeyUpdate handshake message (4.6.3) without and with `update_requested`.
const KEY_UPDATE: [u8; 5] = [24, 0, 0, 1, 0];
const KEY_UPDATE_REQUESTED: [u8; 5] = [24, 0, 0, 1, 1];
/// Longest traffic secret: SHA-384's.
const MAX_SECRET: usize = 48;

/// Records one AES-GCM key may seal or open: rustls's confidentiality
/// limit for these suites (RFC 8446, 5.5; ChaCha20-Poly1305 has none that
/// a connection can reach).
const AES_GCM_RECORDS: u64 = 1 << 24;

/// One direction's traffic secret, key, IV and next record's sequence
/// number. The key is kept as its bytes and expanded (AES round keys, the
/// GHASH table: ~550 bytes) only while records are sealed or opened, so an
/// idle connection does not hold the expansion; expanding costs well under
/// a microsecond, next to the record's own encryption.
struct Direction {
    alg: &'static aead::Algorithm,
    /// The suite's hash, for the next generation of keys.
    hash: &'static hkdf::Algorithm,
    /// application_traffic_secret_N, its first `hash.len()` bytes.
    secret: [u8; MAX_SECRET],
    key: [u8; 32],
    iv: [u8; NONCE_LEN],
    seq: u64,
    /// The sequence number this key must not reach.
    limit: u64,
}

impl Drop for Direction {
    fn drop(&mut self) {
        wipe(&mut self.key);
        wipe(&mut self.secret);
    }
}

/// Zeroes `bytes`; volatile, so the wipe of a secret that is never read
/// again is not optimised away.
pub(super) fn wipe(bytes: &mut [u8]) {
    for b in bytes {
        // SAFETY: a valid, aligned place of our own.
        unsafe { std::ptr::write_volatile(b, 0) };
    }
}

/// HKDF-Expand-Label with an empty context (RFC 8446, 7.1), into `out`.
fn expand_label(hash: &'static hkdf::Algorithm, secret: &[u8], label: &[u8], out: &mut [u8]) -> io::Result<()> {
    struct Len(usize);
    impl hkdf::KeyType for Len {
        fn len(&self) -> usize {
            self.0
        }
    }
    let length = u16::try_from(out.len()).map_err(|_| io::Error::other("HKDF output too long"))?.to_be_bytes();
    let label_len = [u8::try_from(6 + label.len()).map_err(|_| io::Error::other("HKDF label too long"))?];
    let info: [&[u8]; 5] = [&length, &label_len, b"tls13 ", label, &[0]];
    hkdf::Prk::new_less_safe(*hash, secret)
        .expand(&info, Len(out.len()))
        .and_then(|okm| okm.fill(out))
        .map_err(|_| io::Error::other("HKDF-Expand-Label failed"))
}

impl Direction {
    /// A direction from the keys rustls handed over and the traffic secret
    /// it logged, which must give those very keys.
    fn new((seq, secrets): (u64, ConnectionTrafficSecrets), secret: &[u8]) -> io::Result<Direction> {
        let (alg, hash, key, iv, limit) = match secrets {
            ConnectionTrafficSecrets::Aes128Gcm { key, iv } => {
                (&aead::AES_128_GCM, &hkdf::HKDF_SHA256, key, iv, AES_GCM_RECORDS)
            }
            ConnectionTrafficSecrets::Aes256Gcm { key, iv } => {
                (&aead::AES_256_GCM, &hkdf::HKDF_SHA384, key, iv, AES_GCM_RECORDS)
            }
            ConnectionTrafficSecrets::Chacha20Poly1305 { key, iv } => {
                (&aead::CHACHA20_POLY1305, &hkdf::HKDF_SHA256, key, iv, u64::MAX)
            }
            _ => return Err(io::Error::other("a cipher suite this record layer does not take")),
        };
        let mut dir = Direction::from_secret(alg, hash, secret, limit)?;
        dir.seq = seq;
        if key.as_ref() != &dir.key[..alg.key_len()] || iv.as_ref() != &dir.iv[..] {
            return Err(io::Error::other("the traffic secret does not give the handshake's keys"));
        }
        Ok(dir)
    }

    /// The key and IV of `secret` (7.3), from record 0.
    fn from_secret(
        alg: &'static aead::Algorithm,
        hash: &'static hkdf::Algorithm,
        secret: &[u8],
        limit: u64,
    ) -> io::Result<Direction> {
        if secret.len() != hash.len() || alg.key_len() > 32 {
            return Err(io::Error::other("a bad traffic secret"));
        }
        let mut dir = Direction { alg, hash, secret: [0; MAX_SECRET], key: [0; 32], iv: [0; NONCE_LEN], seq: 0, limit };
        dir.secret[..secret.len()].copy_from_slice(secret);
        expand_label(hash, secret, b"key", &mut dir.key[..alg.key_len()])?;
        expand_label(hash, secret, b"iv", &mut dir.iv)?;
        Ok(dir)
    }

    /// Moves on to the next generation of keys (4.6.3, 7.2):
    /// application_traffic_secret_N+1, its key and IV, from record 0.
    fn update(&mut self) -> io::Result<()> {
        let len = self.hash.len();
        let mut next = [0u8; MAX_SECRET];
        let made = expand_label(self.hash, &self.secret[..len], b"traffic upd", &mut next[..len])
            .and_then(|()| Direction::from_secret(self.alg, self.hash, &next[..len], self.limit));
        wipe(&mut next);
        *self = made?;
        Ok(())
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
    /// The peer asked for our KeyUpdate: sent before our next record.
    update_due: bool,
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
    /// over at the end of a handshake, and the traffic secrets they come
    /// from (this side's, then the peer's).
    pub fn new(secrets: ExtractedSecrets, tx_secret: &[u8], rx_secret: &[u8]) -> io::Result<Records> {
        Ok(Records {
            tx: Direction::new(secrets.tx, tx_secret)?,
            rx: Direction::new(secrets.rx, rx_secret)?,
            update_due: false,
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
        // Our KeyUpdate first when the peer asked for it, or before the
        // records this write may seal would pass the key's limit.
        let records = (WRITE_MAX / MAX_PLAIN) as u64;
        if self.update_due || self.tx.seq.saturating_add(records + 1) >= self.tx.limit {
            self.send_key_update(false, send)?;
            if !self.out.is_empty() {
                return Err(ErrorKind::WouldBlock.into());
            }
        }
        self.seal(APPLICATION_DATA, bufs, send)
    }

    /// Sends a KeyUpdate (asking for the peer's when `request`) under the
    /// current key, and moves on to the next.
    fn send_key_update(&mut self, request: bool, send: &mut impl FnMut(&[u8]) -> io::Result<usize>) -> io::Result<()> {
        let message = if request { KEY_UPDATE_REQUESTED } else { KEY_UPDATE };
        self.seal(HANDSHAKE, &[IoSlice::new(&message)], send)?;
        self.tx.update()?;
        self.update_due = false;
        Ok(())
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
        let (close, update) = match (plain[end], &plain[..end]) {
            (APPLICATION_DATA, _) => (false, None),
            // close_notify ends the stream; any other alert is an error.
            (ALERT, [1, 0]) => (true, None),
            (ALERT, _) => return Err(invalid("a TLS alert")),
            // A KeyUpdate, the one handshake message a client sends after
            // the handshake, alone at the end of its record (the next
            // record is under the new key).
            (HANDSHAKE, m) if m == KEY_UPDATE => (false, Some(false)),
            (HANDSHAKE, m) if m == KEY_UPDATE_REQUESTED => (false, Some(true)),
            _ => return Err(invalid("a TLS handshake message after the handshake other than a KeyUpdate")),
        };
        if let Some(requested) = update {
            self.rx.update()?;
            // Several asks while this side is silent get one answer.
            self.update_due |= requested;
            return Ok(Some(Opened { content: HEADER..HEADER, len: HEADER + len, close }));
        }
        let content = if close { HEADER..HEADER } else { HEADER..HEADER + end };
        Ok(Some(Opened { content, len: HEADER + len, close }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pair() -> (Records, Records) {
        let dir = |secret: u8| {
            Direction::from_secret(&aead::AES_256_GCM, &hkdf::HKDF_SHA384, &[secret; 48], AES_GCM_RECORDS)
                .expect("direction")
        };
        let side = |tx, rx| Records {
            tx: dir(tx),
            rx: dir(rx),
            update_due: false,
            out: Vec::new(),
            inp: Vec::new(),
            plain: Vec::new(),
            plain_at: 0,
        };
        (side(1, 3), side(3, 1))
    }

    /// Writes `msg` whole from `from`, and returns what went on the wire.
    fn wire_of(from: &mut Records, msg: &[u8]) -> Vec<u8> {
        let mut wire = Vec::new();
        let mut at = 0;
        while at < msg.len() {
            at += from
                .write(&[IoSlice::new(&msg[at..])], &mut |b: &[u8]| {
                    wire.extend_from_slice(b);
                    Ok(b.len())
                })
                .expect("write");
        }
        wire
    }

    /// What each of `to`'s reads returned, into a buffer of `buf` bytes,
    /// from `wire` handed over `step` bytes at a time, until it would block.
    fn reads(to: &mut Records, wire: &[u8], step: usize, buf: usize) -> io::Result<Vec<Vec<u8>>> {
        let (mut fed, mut got, mut buf) = (0, Vec::new(), vec![0u8; buf]);
        loop {
            match to.read(&mut buf, &mut |b: &mut [u8]| {
                let n = b.len().min(step).min(wire.len() - fed);
                if n == 0 {
                    return Err(ErrorKind::WouldBlock.into());
                }
                b[..n].copy_from_slice(&wire[fed..fed + n]);
                fed += n;
                Ok(n)
            }) {
                Ok(n) => got.push(buf[..n].to_vec()),
                Err(e) if e.kind() == ErrorKind::WouldBlock => return Ok(got),
                Err(e) => return Err(e),
            }
        }
    }

    /// Everything `to` reads from `wire` until it would block.
    fn read_all(to: &mut Records, wire: &[u8]) -> io::Result<Vec<u8>> {
        Ok(reads(to, wire, usize::MAX, MAX_PLAIN)?.concat())
    }

    #[test]
    fn the_traffic_secret_must_give_the_keys_handed_over() {
        use tokio_rustls::rustls::crypto::cipher::{AeadKey, Iv};
        let good = Direction::from_secret(&aead::AES_256_GCM, &hkdf::HKDF_SHA384, &[5; 48], AES_GCM_RECORDS)
            .expect("direction");
        let handed = |key: [u8; 32], iv: [u8; NONCE_LEN]| ConnectionTrafficSecrets::Aes256Gcm {
            key: AeadKey::from(key),
            iv: Iv::from(iv),
        };
        let dir = Direction::new((7, handed(good.key, good.iv)), &[5; 48]).expect("the same keys");
        assert_eq!(dir.seq, 7);
        let err = Direction::new((0, handed(good.key, [0; NONCE_LEN])), &[5; 48]).err().expect("another IV");
        assert!(err.to_string().contains("does not give"), "{err}");
        assert!(Direction::new((0, handed(good.key, good.iv)), &[5; 32]).is_err(), "a SHA-256 length for SHA-384");
    }

    #[test]
    fn a_key_update_asked_for_is_answered_before_the_next_record_and_both_sides_move_on() {
        let (mut server, mut client) = pair();
        // The client asks for an update along with its request.
        let mut wire = Vec::new();
        client
            .send_key_update(true, &mut |b: &[u8]| {
                wire.extend_from_slice(b);
                Ok(b.len())
            })
            .expect("key update");
        wire.extend(wire_of(&mut client, b"GET / after the update"));
        assert_eq!(read_all(&mut server, &wire).expect("read"), b"GET / after the update");
        assert!(server.update_due, "asked for");
        assert_eq!(server.rx.seq, 1, "the client's new key, from record 0");
        // The server answers with its own update, then its record under
        // the new key; the client takes both.
        let wire = wire_of(&mut server, b"200 OK");
        assert!(!server.update_due);
        assert_eq!(server.tx.seq, 1);
        assert_eq!(read_all(&mut client, &wire).expect("read"), b"200 OK");
        assert!(!client.update_due, "an answer asks for nothing back");
        // And on, both ways.
        assert_eq!(read_all(&mut server, &wire_of(&mut client, b"more")).expect("read"), b"more");
        assert_eq!(read_all(&mut client, &wire_of(&mut server, b"and more")).expect("read"), b"and more");
    }

    #[test]
    fn a_key_near_its_limit_is_updated_before_it_reaches_it() {
        let (mut server, mut client) = pair();
        // Room for a write's four records and a KeyUpdate, no more.
        server.tx.seq = AES_GCM_RECORDS - 5;
        client.rx.seq = AES_GCM_RECORDS - 5;
        let wire = wire_of(&mut server, b"x");
        assert_eq!(server.tx.seq, 1, "a KeyUpdate under the old key, then the record under the new");
        assert_eq!(read_all(&mut client, &wire).expect("read"), b"x");
        assert!(!client.update_due);
    }

    #[test]
    fn records_sealed_on_one_side_open_on_the_other_in_any_split() {
        let (mut server, mut client) = pair();
        let big = vec![7u8; MAX_PLAIN + 100];
        let wire = [wire_of(&mut server, b"hello"), wire_of(&mut server, &big)].concat();
        // Delivered a few bytes at a time, as a socket may.
        let got = reads(&mut client, &wire, 3, 1000).expect("read").concat();
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
        let chunks = reads(&mut client, &wire, usize::MAX, 2 * MAX_PLAIN).expect("read");
        assert!(chunks.iter().all(|c| c.len() <= MAX_PLAIN), "a read returns one record's plaintext at most");
        let got = chunks.concat();
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
    fn a_peer_key_that_opened_all_the_records_it_may_opens_no_more() {
        let (mut server, mut client) = pair();
        client.rx.seq = AES_GCM_RECORDS;
        let err = read_all(&mut client, &wire_of(&mut server, b"x")).expect_err("refused");
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
        // A handshake message other than a KeyUpdate, sealed as one would be.
        let (mut server, mut client) = pair();
        let mut wire = Vec::new();
        server
            .seal(HANDSHAKE, &[IoSlice::new(&[20, 0, 0, 0])], &mut |b: &[u8]| {
                wire.extend_from_slice(b);
                Ok(b.len())
            })
            .expect("seal");
        let err = client.read(&mut [0u8; 64], &mut once(wire)).expect_err("not a KeyUpdate");
        assert!(err.to_string().contains("other than a KeyUpdate"), "{err}");
    }
}
