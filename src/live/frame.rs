//! The subset of RFC 6455 a server (and the benchmark's client) needs,
//! written by hand: the handshake key, frame headers, masking and close
//! payloads.
//!
//! Why not tungstenite: it gives every connection its own read buffer
//! (128 KiB by default, touched at once) and write buffer, so an idle socket
//! costs kilobytes to hundreds of kilobytes. Here a server frame is built
//! once per event and shared as `Bytes` by every subscriber, and a client
//! frame is parsed straight out of a small stack buffer.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use bytes::{BufMut, Bytes, BytesMut};
use sha1::{Digest, Sha1};

pub const OP_CONTINUATION: u8 = 0x0;
pub const OP_TEXT: u8 = 0x1;
pub const OP_BINARY: u8 = 0x2;
pub const OP_CLOSE: u8 = 0x8;
pub const OP_PING: u8 = 0x9;
pub const OP_PONG: u8 = 0xA;

/// Longest frame header: 2 bytes, an 8-byte length and a 4-byte mask.
pub const MAX_HEADER: usize = 14;

/// Longest payload of a control frame (ping, pong, close).
pub const MAX_CONTROL: usize = 125;

/// An empty server ping, sent to idle sockets.
pub const PING: &[u8] = &[0x80 | OP_PING, 0];

const GUID: &[u8] = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11";

/// `Sec-WebSocket-Accept` for a client's `Sec-WebSocket-Key`.
pub fn accept_key(key: &[u8]) -> String {
    let mut sha = Sha1::new();
    sha.update(key);
    sha.update(GUID);
    STANDARD.encode(sha.finalize())
}

/// Writes a final frame's header into `out`; returns its length.
pub fn write_header(out: &mut [u8; MAX_HEADER], opcode: u8, len: usize, mask: Option<[u8; 4]>) -> usize {
    out[0] = 0x80 | opcode;
    let mask_bit = if mask.is_some() { 0x80 } else { 0 };
    let mut n = if len < 126 {
        out[1] = mask_bit | len as u8;
        2
    } else if len <= u16::MAX as usize {
        out[1] = mask_bit | 126;
        out[2..4].copy_from_slice(&(len as u16).to_be_bytes());
        4
    } else {
        out[1] = mask_bit | 127;
        out[2..10].copy_from_slice(&(len as u64).to_be_bytes());
        10
    };
    if let Some(m) = mask {
        out[n..n + 4].copy_from_slice(&m);
        n += 4;
    }
    n
}

/// A whole frame (header and payload) in one allocation, masked when
/// `mask` is given (clients must mask, servers must not).
pub fn frame(opcode: u8, payload: &[u8], mask: Option<[u8; 4]>) -> Bytes {
    let mut head = [0u8; MAX_HEADER];
    let n = write_header(&mut head, opcode, payload.len(), mask);
    let mut buf = BytesMut::with_capacity(n + payload.len());
    buf.put_slice(&head[..n]);
    buf.put_slice(payload);
    if let Some(m) = mask {
        apply_mask(&mut buf[n..], m);
    }
    buf.freeze()
}

/// Where the payload of an unmasked server frame starts.
pub fn payload_offset(frame: &[u8]) -> usize {
    match frame.get(1).map(|b| b & 0x7f) {
        Some(126) => 4,
        Some(127) => 10,
        _ => 2,
    }
}

/// Close payload: a 2-byte code and a reason (cut to fit a control frame).
pub fn close_payload(code: u16, reason: &str) -> ([u8; MAX_CONTROL], usize) {
    let mut out = [0u8; MAX_CONTROL];
    out[..2].copy_from_slice(&code.to_be_bytes());
    let mut r = reason.len().min(MAX_CONTROL - 2);
    while !reason.is_char_boundary(r) {
        r -= 1;
    }
    out[2..2 + r].copy_from_slice(&reason.as_bytes()[..r]);
    (out, 2 + r)
}

/// XORs `data` with the 4-byte mask (masking and unmasking are the same).
pub fn apply_mask(data: &mut [u8], mask: [u8; 4]) {
    for (i, b) in data.iter_mut().enumerate() {
        *b ^= mask[i & 3];
    }
}

/// A parsed frame header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Head {
    pub fin: bool,
    pub opcode: u8,
    pub mask: Option<[u8; 4]>,
    /// Payload length.
    pub len: usize,
    /// Header length; the payload starts here.
    pub header_len: usize,
}

impl Head {
    /// Saturates: with a limit near `usize::MAX` (the hub's is at most
    /// 1 MiB) a declared length could otherwise overflow; such a frame just
    /// never completes. Found by the `live_proto` fuzz target.
    pub fn frame_len(&self) -> usize {
        self.header_len.saturating_add(self.len)
    }

    pub fn is_control(&self) -> bool {
        self.opcode & 0x8 != 0
    }
}

/// Why a frame header was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HeadError {
    /// Breaks RFC 6455 (reserved bits, unknown opcode, long control frame).
    Protocol(&'static str),
    /// Payload longer than the limit given to `parse_head`.
    TooBig,
}

/// Parses the header at the start of `buf`; `Ok(None)` when more bytes are
/// needed. Payloads longer than `max_len` are refused before they arrive.
pub fn parse_head(buf: &[u8], max_len: usize) -> Result<Option<Head>, HeadError> {
    let [b0, b1, ..] = *buf else { return Ok(None) };
    if b0 & 0x70 != 0 {
        return Err(HeadError::Protocol("reserved bits set without an extension"));
    }
    let opcode = b0 & 0x0f;
    if !matches!(opcode, OP_CONTINUATION | OP_TEXT | OP_BINARY | OP_CLOSE | OP_PING | OP_PONG) {
        return Err(HeadError::Protocol("unknown opcode"));
    }
    let fin = b0 & 0x80 != 0;
    let masked = b1 & 0x80 != 0;
    let (len, mut n) = match b1 & 0x7f {
        126 => match buf.get(2..4) {
            Some(b) => (u64::from(u16::from_be_bytes([b[0], b[1]])), 4),
            None => return Ok(None),
        },
        127 => match buf.get(2..10) {
            Some(b) => (u64::from_be_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]), 10),
            None => return Ok(None),
        },
        l => (u64::from(l), 2),
    };
    if opcode & 0x8 != 0 && (!fin || len > MAX_CONTROL as u64) {
        return Err(HeadError::Protocol("control frames must be final and at most 125 bytes"));
    }
    if len > max_len as u64 {
        return Err(HeadError::TooBig);
    }
    let mask = if masked {
        let Some(m) = buf.get(n..n + 4) else { return Ok(None) };
        n += 4;
        Some([m[0], m[1], m[2], m[3]])
    } else {
        None
    };
    Ok(Some(Head { fin, opcode, mask, len: len as usize, header_len: n }))
}

/// Unmasks each complete client frame at the start of `buf` and hands it,
/// with its payload, to `each`; returns the bytes used, the rest being a
/// frame still arriving. A pure function (no socket) so it can be fuzzed.
pub fn client_frames<E: From<HeadError>>(
    buf: &mut [u8],
    max_len: usize,
    mut each: impl FnMut(Head, &mut [u8]) -> Result<(), E>,
) -> Result<usize, E> {
    let mut pos = 0;
    while pos < buf.len() {
        let Some(head) = parse_head(&buf[pos..], max_len)? else { break };
        if buf.len() - pos < head.frame_len() {
            break;
        }
        let Some(mask) = head.mask else {
            return Err(HeadError::Protocol("client frames must be masked").into());
        };
        let payload = &mut buf[pos + head.header_len..pos + head.frame_len()];
        apply_mask(payload, mask);
        pos += head.frame_len();
        each(head, payload)?;
    }
    Ok(pos)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_accept_key_matches_the_rfc_example() {
        assert_eq!(accept_key(b"dGhlIHNhbXBsZSBub25jZQ=="), "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");
    }

    #[test]
    fn a_masked_client_frame_parses_back_to_its_payload() {
        for len in [0usize, 5, 125, 126, 300, 70_000] {
            let payload: Vec<u8> = (0..len).map(|i| i as u8).collect();
            let f = frame(OP_TEXT, &payload, Some([1, 2, 3, 4]));
            let head = parse_head(&f, 100_000).expect("valid").expect("complete");
            assert_eq!((head.fin, head.opcode, head.len, head.frame_len()), (true, OP_TEXT, len, f.len()));
            let mut body = f[head.header_len..].to_vec();
            apply_mask(&mut body, head.mask.expect("masked"));
            assert_eq!(body, payload);
        }
    }

    #[test]
    fn a_truncated_header_asks_for_more_bytes() {
        let f = frame(OP_TEXT, &[0u8; 300], Some([9, 9, 9, 9]));
        for cut in 0..8 {
            assert_eq!(parse_head(&f[..cut], 1000), Ok(None), "cut at {cut}");
        }
    }

    #[test]
    fn bad_headers_are_refused_before_the_payload_arrives() {
        assert!(matches!(parse_head(&[0xC1, 0x80], 10), Err(HeadError::Protocol(_))));
        assert!(matches!(parse_head(&[0x83, 0x80], 10), Err(HeadError::Protocol(_))));
        assert!(matches!(parse_head(&[0x09, 0x80], 10), Err(HeadError::Protocol(_))));
        assert!(matches!(parse_head(&[0x89, 0xFE, 0, 200], 1000), Err(HeadError::Protocol(_))));
        assert_eq!(parse_head(&[0x81, 0xFF, 0, 0, 0, 1, 0, 0, 0, 0], 4096), Err(HeadError::TooBig));
    }

    #[test]
    fn a_huge_declared_length_waits_for_bytes_instead_of_overflowing() {
        let mut f = [0x81, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 1, 2, 3, 4, b'x'];
        let used = client_frames(&mut f, usize::MAX, |_, _| Err::<(), _>(HeadError::TooBig));
        assert_eq!(used, Ok(0));
    }

    #[test]
    fn client_frames_are_unmasked_and_an_unmasked_one_is_refused() {
        let mut buf = [frame(OP_TEXT, b"hi", Some([7, 7, 7, 7])), frame(OP_PING, b"", Some([1, 1, 1, 1]))].concat();
        buf.extend_from_slice(&[0x81, 0x85]);
        let mut seen = Vec::new();
        let used = client_frames(&mut buf, 100, |h, p| {
            seen.push((h.opcode, p.to_vec()));
            Ok::<(), HeadError>(())
        });
        assert_eq!(used, Ok(buf.len() - 2), "the incomplete last frame is kept");
        assert_eq!(seen, [(OP_TEXT, b"hi".to_vec()), (OP_PING, vec![])]);
        let mut unmasked = frame(OP_TEXT, b"hi", None).to_vec();
        assert!(matches!(
            client_frames(&mut unmasked, 100, |_, _| Ok::<(), HeadError>(())),
            Err(HeadError::Protocol(_))
        ));
    }

    #[test]
    fn a_server_frame_knows_where_its_payload_starts() {
        for len in [3usize, 200, 70_000] {
            let f = frame(OP_TEXT, &vec![b'x'; len], None);
            assert_eq!(f.len() - payload_offset(&f), len);
        }
    }

    #[test]
    fn a_close_reason_is_cut_on_a_character_boundary() {
        let (buf, n) = close_payload(4001, &"é".repeat(100));
        assert_eq!(&buf[..2], &4001u16.to_be_bytes());
        assert!(n <= MAX_CONTROL);
        assert!(std::str::from_utf8(&buf[2..n]).is_ok());
    }
}
