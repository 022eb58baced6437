//! Content codings (RFC 9110 8.4): what a request's `Accept-Encoding`
//! allows, which coding an answer takes, and making each one.
//!
//! Three codings besides identity: gzip, made on the request path as
//! before (fast enough, and every client takes it); zstd and Brotli, which
//! browsers take over HTTPS and which are made off the request path
//! (`cache::maker`) at the levels below, chosen from measurements on the
//! heavy data set (docs/PERFORMANCE.md, "Heavy answers on the wire").

use std::io::{self, Read, Write};

use bytes::Bytes;

/// A content coding Pith sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Encoding {
    Identity,
    Gzip,
    Zstd,
    Brotli,
}

/// The compressed codings in the server's order of preference when a
/// client weighs them alike and their sizes do not decide (`choose`).
pub const COMPRESSED: [Encoding; 3] = [Encoding::Brotli, Encoding::Zstd, Encoding::Gzip];

impl Encoding {
    /// The coding's name in `Content-Encoding`.
    pub fn name(self) -> &'static str {
        match self {
            Encoding::Identity => "identity",
            Encoding::Gzip => "gzip",
            Encoding::Zstd => "zstd",
            Encoding::Brotli => "br",
        }
    }

    /// What a variant's ETag gets after the identity's hash: each
    /// representation has its own strong validator (RFC 9110 8.8.3).
    pub fn etag_suffix(self) -> &'static str {
        match self {
            Encoding::Identity => "",
            Encoding::Gzip => "-gzip",
            Encoding::Zstd => "-zstd",
            Encoding::Brotli => "-br",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// Level 5, not zlib's default 6: every write to a topic makes its gzip
/// variant again, and on a ~1 MB topic of the heavy data set level 6 took
/// 43 ms for 219 KB, level 5 15 ms for 243 KB (zlib-rs; docs/PERFORMANCE.md,
/// "Gzip after a write").
pub const GZIP_LEVEL: u32 = 5;

/// zstd's level for cached renderings, made off the request path.
/// docs/PERFORMANCE.md, "Heavy answers on the wire", has the measurements.
pub const ZSTD_LEVEL: i32 = 19;

/// Brotli's quality for cached renderings, made off the request path.
pub const BROTLI_QUALITY: u32 = 11;

/// Brotli's window: 4 MiB (its default), far above a page of a topic.
const BROTLI_LGWIN: u32 = 22;

/// zstd's largest window a client must accept for HTTP (RFC 9659: 8 MiB).
const ZSTD_WINDOW_LOG: u32 = 23;

/// What a request's `Accept-Encoding` allows: a weight (the q-value in
/// thousandths) per coding; 0 refuses. Without the header, identity only.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Accepted {
    q: [u16; 4],
    /// Whether identity was named (itself or by `*`) with a weight, so it
    /// competes with the compressed codings by weight; unnamed, it is only
    /// the answer when nothing compressed can be sent.
    identity_named: bool,
}

impl Accepted {
    /// Identity only: a request without `Accept-Encoding`.
    pub const IDENTITY: Accepted = Accepted { q: [1000, 0, 0, 0], identity_named: false };

    /// Parses an `Accept-Encoding` value (`None`: the header is absent).
    /// Codings are case-insensitive and `x-gzip` is gzip (RFC 9110 8.4.1.3);
    /// `*` weighs every coding the value does not name; a coding named
    /// twice keeps its first weight; an element with a malformed q-value is
    /// ignored; a value that is not visible ASCII allows identity only.
    pub fn parse(value: Option<&[u8]>) -> Accepted {
        let Some(value) = value.and_then(visible_ascii) else {
            return Accepted::IDENTITY;
        };
        let mut named: [Option<u16>; 4] = [None; 4];
        let mut star = None;
        for element in value.split(',') {
            let mut parts = element.split(';');
            let coding = parts.next().unwrap_or("").trim();
            if coding.is_empty() {
                continue;
            }
            let Some(q) = weight(parts) else { continue };
            // No lowercased copy: this runs for every cached read.
            let is = |name: &str| coding.eq_ignore_ascii_case(name);
            let slot = if coding == "*" {
                &mut star
            } else if is("identity") {
                &mut named[Encoding::Identity.index()]
            } else if is("gzip") || is("x-gzip") {
                &mut named[Encoding::Gzip.index()]
            } else if is("zstd") {
                &mut named[Encoding::Zstd.index()]
            } else if is("br") {
                &mut named[Encoding::Brotli.index()]
            } else {
                continue;
            };
            slot.get_or_insert(q);
        }
        let identity = named[Encoding::Identity.index()];
        // Identity is acceptable unless refused by name, or by `*;q=0`
        // without a name (RFC 9110 12.5.3).
        let identity_q = identity.or(star).map_or(1000, |q| q);
        let mut q = named.map(|q| q.or(star).unwrap_or(0));
        q[Encoding::Identity.index()] = identity_q;
        Accepted { q, identity_named: identity.is_some() || star.is_some() }
    }

    /// The weight this request gives `encoding`, 0 to 1000.
    pub fn q(&self, encoding: Encoding) -> u16 {
        self.q[encoding.index()]
    }

    /// The compressed codings the client takes (weight above 0), best first:
    /// by weight, then in the server's order (`COMPRESSED`).
    pub fn ranked(&self) -> impl Iterator<Item = Encoding> + '_ {
        let mut ranked = COMPRESSED;
        // A stable sort keeps `COMPRESSED`'s order among equal weights.
        ranked.sort_by_key(|e| std::cmp::Reverse(self.q(*e)));
        ranked.into_iter().filter(|e| self.q(*e) > 0)
    }

    /// The coding to answer with, given the size of each compressed
    /// variant that can be sent now (`None`: it cannot; `usize::MAX`: it
    /// can, size unknown, as gzip before it is made): among those the
    /// client weighs highest, the smallest, unless the client weighs
    /// identity above them. Identity also when the client refuses it but
    /// nothing it takes can be sent: RFC 9110 12.5.3 asks for an answer
    /// without a coding rather than an error.
    pub fn choose(&self, size: impl Fn(Encoding) -> Option<usize>) -> Encoding {
        let mut best: Option<(Encoding, usize)> = None;
        for e in self.ranked() {
            let Some(len) = size(e) else { continue };
            match best {
                Some((b, _)) if self.q(b) > self.q(e) => break,
                Some((_, b_len)) if b_len <= len => {}
                _ => best = Some((e, len)),
            }
        }
        match best.map(|(e, _)| e) {
            Some(e) if self.identity_named && self.q(Encoding::Identity) > self.q(e) => Encoding::Identity,
            Some(e) => e,
            None => Encoding::Identity,
        }
    }
}

/// The weight of an element's parameters: 1000 without `q`, `None` when
/// `q` is malformed (RFC 9110 12.4.2: `0` or `1` and up to three decimals).
fn weight<'a>(params: impl Iterator<Item = &'a str>) -> Option<u16> {
    let mut q = 1000;
    for param in params {
        let Some((name, value)) = param.split_once('=') else { continue };
        if !name.trim().eq_ignore_ascii_case("q") {
            continue;
        }
        let value = value.trim();
        let (whole, fraction) = value.split_once('.').unwrap_or((value, ""));
        if fraction.len() > 3 || !fraction.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        let thousandths =
            fraction.bytes().chain(std::iter::repeat(b'0')).take(3).fold(0u16, |n, b| n * 10 + u16::from(b - b'0'));
        q = match whole {
            "0" => thousandths,
            "1" if thousandths == 0 => 1000,
            _ => return None,
        };
    }
    Some(q)
}

/// A header value as text when it is visible ASCII (as
/// `HeaderValue::to_str` takes it), else `None`.
pub fn visible_ascii(value: &[u8]) -> Option<&str> {
    value.iter().all(|&b| b == b'\t' || (32..127).contains(&b)).then(|| std::str::from_utf8(value).ok()).flatten()
}

/// `data` gzipped at `level`.
pub fn gzip(data: &[u8], level: u32) -> io::Result<Vec<u8>> {
    let mut enc = flate2::write::GzEncoder::new(Vec::with_capacity(data.len() / 3), flate2::Compression::new(level));
    enc.write_all(data)?;
    enc.finish()
}

/// `data` compressed with zstd at `level`, its size in the frame header.
pub fn zstd(data: &[u8], level: i32) -> io::Result<Vec<u8>> {
    let mut c = zstd::bulk::Compressor::new(level)?;
    c.set_parameter(zstd::zstd_safe::CParameter::WindowLog(ZSTD_WINDOW_LOG.min(window_log_for(data.len()))))?;
    c.compress(data)
}

/// The smallest window log that covers `len` bytes (zstd's least is 10).
fn window_log_for(len: usize) -> u32 {
    len.max(1024).next_power_of_two().trailing_zeros()
}

/// `data` compressed with Brotli at `quality`, asking `keep_going` at
/// every read of its input (4 KiB): when that turns false the compression
/// stops with an error (the maker drops work nobody will read).
pub fn brotli(data: &[u8], quality: u32, keep_going: &dyn Fn() -> bool) -> io::Result<Vec<u8>> {
    let params = brotli::enc::BrotliEncoderParams {
        quality: quality as i32,
        lgwin: BROTLI_LGWIN as i32,
        size_hint: data.len(),
        mode: brotli::enc::backward_references::BrotliEncoderMode::BROTLI_MODE_TEXT,
        ..Default::default()
    };
    let mut out = Vec::with_capacity(data.len() / 4);
    brotli::BrotliCompress(&mut Checked { data, keep_going }, &mut out, &params)?;
    Ok(out)
}

/// A reader of `data` that fails once `keep_going` says to stop.
struct Checked<'a> {
    data: &'a [u8],
    keep_going: &'a dyn Fn() -> bool,
}

impl Read for Checked<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if !(self.keep_going)() {
            // Not `Interrupted`, which the encoder's reader retries.
            return Err(io::Error::other("no longer wanted"));
        }
        let n = buf.len().min(self.data.len());
        buf[..n].copy_from_slice(&self.data[..n]);
        self.data = &self.data[n..];
        Ok(n)
    }
}

/// `data` in `encoding` at the level cached renderings use, or `None` when
/// it fails or saves nothing. `keep_going` as for `brotli`.
pub fn encode(data: &[u8], encoding: Encoding, keep_going: &dyn Fn() -> bool) -> Option<Vec<u8>> {
    let out = match encoding {
        Encoding::Identity => return None,
        Encoding::Gzip => gzip(data, GZIP_LEVEL),
        Encoding::Zstd => zstd(data, ZSTD_LEVEL),
        Encoding::Brotli => brotli(data, BROTLI_QUALITY, keep_going),
    };
    out.ok().filter(|out| out.len() < data.len())
}

/// `encode` into `Bytes`.
pub fn encoded(data: &[u8], encoding: Encoding) -> Option<Bytes> {
    encode(data, encoding, &|| true).map(Bytes::from)
}

#[cfg(test)]
mod tests {
    use super::*;
    use Encoding::*;

    fn parse(value: &str) -> Accepted {
        Accepted::parse(Some(value.as_bytes()))
    }

    /// Every compressed variant sendable, size unknown.
    fn all(_: Encoding) -> Option<usize> {
        Some(usize::MAX)
    }

    /// Only the variants `ok` names, size unknown.
    fn only(ok: &[Encoding]) -> impl Fn(Encoding) -> Option<usize> + '_ {
        move |e| ok.contains(&e).then_some(usize::MAX)
    }

    /// The coding chosen when every compressed variant is available.
    fn choice(value: &str) -> Encoding {
        parse(value).choose(all)
    }

    #[test]
    fn without_the_header_only_identity_is_sent() {
        assert_eq!(Accepted::parse(None), Accepted::IDENTITY);
        assert_eq!(Accepted::parse(None).choose(all), Identity);
        assert_eq!(choice(""), Identity, "an empty value asks for no coding");
    }

    #[test]
    fn a_browser_gets_brotli_then_zstd_then_gzip_as_they_become_available() {
        let browser = parse("gzip, deflate, br, zstd");
        assert_eq!(browser.choose(all), Brotli);
        assert_eq!(browser.choose(only(&[Zstd, Gzip])), Zstd);
        assert_eq!(browser.choose(only(&[Gzip])), Gzip);
        assert_eq!(browser.choose(|_| None), Identity);
        assert_eq!(browser.ranked().collect::<Vec<_>>(), [Brotli, Zstd, Gzip]);
    }

    #[test]
    fn among_codings_weighed_alike_the_smallest_variant_is_sent() {
        let sizes = |br, zstd| {
            move |e| match e {
                Brotli => Some(br),
                Zstd => Some(zstd),
                _ => Some(usize::MAX),
            }
        };
        let browser = parse("gzip, deflate, br, zstd");
        assert_eq!(browser.choose(sizes(200, 190)), Zstd);
        assert_eq!(browser.choose(sizes(190, 200)), Brotli);
        assert_eq!(browser.choose(sizes(200, 200)), Brotli, "a tie: the server's order");
        assert_eq!(parse("br, zstd;q=0.9").choose(sizes(200, 100)), Brotli, "the weight comes first");
    }

    #[test]
    fn q_values_order_the_codings_and_zero_refuses() {
        assert_eq!(choice("br;q=0.5, zstd;q=0.9, gzip;q=0.1"), Zstd);
        assert_eq!(choice("br;q=1.0, gzip;q=0.8"), Brotli);
        assert_eq!(choice("gzip, br;q=0"), Gzip);
        assert_eq!(choice("br;q=0, zstd;q=0.000, gzip;q=0."), Identity);
        assert_eq!(choice("gzip;q=0.001"), Gzip, "the least weight above zero still accepts");
        assert_eq!(choice("GZIP; Q=0.5 , X-Gzip"), Gzip, "case-insensitive; x-gzip is gzip");
        assert_eq!(choice("gzip;q=0, gzip"), Identity, "the first weight of a coding counts");
        assert_eq!(parse("zstd;q=0.25;level=3").q(Zstd), 250, "other parameters are ignored");
    }

    #[test]
    fn a_star_weighs_every_coding_not_named() {
        assert_eq!(choice("*"), Brotli);
        assert_eq!(choice("*;q=0.5, br;q=0"), Zstd);
        assert_eq!(choice("gzip, *;q=0"), Gzip);
        assert_eq!(parse("*;q=0").q(Identity), 0, "`*;q=0` refuses identity too");
        assert_eq!(parse("*;q=0, identity").q(Identity), 1000);
        assert_eq!(choice("deflate, compress"), Identity, "codings Pith does not make are skipped");
    }

    #[test]
    fn identity_competes_only_when_named() {
        assert_eq!(choice("gzip;q=0.5"), Gzip, "unnamed identity is the fallback");
        assert_eq!(choice("gzip;q=0.5, identity"), Identity, "named, it wins by weight");
        assert_eq!(choice("gzip, identity;q=0.5"), Gzip);
        assert_eq!(choice("br, identity"), Brotli, "a tie goes to compression");
        let refused = parse("br, identity;q=0");
        assert_eq!(refused.q(Identity), 0);
        assert_eq!(refused.choose(|_| None), Identity, "nothing else to send: identity anyway");
    }

    #[test]
    fn malformed_weights_and_values_are_ignored() {
        for value in ["gzip;q=2", "gzip;q=1.5", "gzip;q=-1", "gzip;q=0.0001", "gzip;q=abc", "gzip;q=", "gzip;q=.5"] {
            assert_eq!(choice(value), Identity, "{value}");
        }
        assert_eq!(choice("gzip;q=2, br"), Brotli, "only the malformed element is dropped");
        assert_eq!(choice(" , ,gzip,, "), Gzip, "empty elements are skipped");
        assert_eq!(Accepted::parse(Some(b"gzip\xff")), Accepted::IDENTITY, "not visible ASCII");
        assert_eq!(choice("gzip;foo"), Gzip, "a parameter without a value is ignored");
    }

    #[test]
    fn each_coding_decodes_back_to_its_input() {
        let data = "a topic of many posts, each one like the others ".repeat(400).into_bytes();
        let gz = encode(&data, Gzip, &|| true).expect("gzip");
        let mut out = Vec::new();
        flate2::read::GzDecoder::new(&gz[..]).read_to_end(&mut out).expect("gunzip");
        assert_eq!(out, data);
        let zst = encode(&data, Zstd, &|| true).expect("zstd");
        assert_eq!(zstd::stream::decode_all(&zst[..]).expect("unzstd"), data);
        let br = encode(&data, Brotli, &|| true).expect("brotli");
        let mut out = Vec::new();
        brotli::Decompressor::new(&br[..], 4096).read_to_end(&mut out).expect("unbrotli");
        assert_eq!(out, data);
        assert!(br.len() < data.len() / 10 && zst.len() < data.len() / 10);
        assert!(encode(b"tiny", Brotli, &|| true).is_none(), "saves nothing");
        assert!(encode(&data, Brotli, &|| false).is_none(), "stopped: nothing");
    }

    #[test]
    fn zstds_window_covers_the_body_and_stays_within_what_http_clients_take() {
        assert_eq!(window_log_for(0), 10);
        assert_eq!(window_log_for(800_000), 20);
        assert_eq!(ZSTD_WINDOW_LOG.min(window_log_for(100 << 20)), 23);
    }
}
