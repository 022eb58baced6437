//! The name of a stored picture: `HASH-WxH.EXT`, where HASH is the first
//! 128 bits of the SHA-256 of the full-size file in hex, W and H its size
//! in pixels and EXT `jpg` or `png`; its thumbnail is `HASH-WxH.t.EXT`
//! (the size is the full picture's). The same picture uploaded twice gets
//! the same name, so it is stored once; a name that parses is the only
//! thing `/media/` ever opens, so no path can escape the directory.

use std::fmt;

use super::process::Kind;

/// Widest or tallest side a name may state.
const MAX_SIDE: u32 = 65_535;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct MediaName {
    pub hash: [u8; 16],
    pub width: u32,
    pub height: u32,
    pub kind: Kind,
    /// The thumbnail rather than the full picture.
    pub thumb: bool,
}

impl MediaName {
    /// The name of the full-size picture whose bytes are `full`.
    pub fn of(full: &[u8], width: u32, height: u32, kind: Kind) -> MediaName {
        use sha2::{Digest, Sha256};
        let digest = Sha256::digest(full);
        let mut hash = [0u8; 16];
        hash.copy_from_slice(&digest[..16]);
        MediaName { hash, width, height, kind, thumb: false }
    }

    /// The thumbnail's name of this picture.
    pub fn thumbnail(self) -> MediaName {
        MediaName { thumb: true, ..self }
    }

    /// The full picture's name of this one (itself when it is full).
    pub fn full(self) -> MediaName {
        MediaName { thumb: false, ..self }
    }

    /// A name as `Display` writes it, or `None` for anything else
    /// (upper-case hex, a path, a size of 0, another extension).
    pub fn parse(s: &str) -> Option<MediaName> {
        let (hex, rest) = s.split_once('-')?;
        if hex.len() != 32 {
            return None;
        }
        let mut hash = [0u8; 16];
        for (i, pair) in hex.as_bytes().chunks(2).enumerate() {
            hash[i] = (nibble(pair[0])? << 4) | nibble(pair[1])?;
        }
        let (size, ext) = rest.split_once('.')?;
        let (ext, thumb) = match ext.strip_prefix("t.") {
            Some(ext) => (ext, true),
            None => (ext, false),
        };
        let kind = Kind::from_ext(ext)?;
        let (w, h) = size.split_once('x')?;
        let (width, height) = (side(w)?, side(h)?);
        Some(MediaName { hash, width, height, kind, thumb })
    }

    /// The first two hex digits: the subdirectory the file lives in.
    pub fn shard(&self) -> String {
        format!("{:02x}", self.hash[0])
    }
}

impl fmt::Display for MediaName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for b in self.hash {
            write!(f, "{b:02x}")?;
        }
        let t = if self.thumb { "t." } else { "" };
        write!(f, "-{}x{}.{t}{}", self.width, self.height, self.kind.ext())
    }
}

/// A lower-case hex digit's value.
fn nibble(c: u8) -> Option<u8> {
    match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        _ => None,
    }
}

/// A side in pixels: digits only, no leading zero, 1 to `MAX_SIDE`.
fn side(s: &str) -> Option<u32> {
    if s.is_empty() || s.len() > 5 || s.starts_with('0') || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok().filter(|n| (1..=MAX_SIDE).contains(n))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_reads_back_as_it_was_written_and_its_thumbnail_too() {
        let name = MediaName::of(b"bytes", 640, 480, Kind::Jpeg);
        let text = name.to_string();
        assert!(text.ends_with("-640x480.jpg"), "{text}");
        assert_eq!(MediaName::parse(&text), Some(name));
        let thumb = name.thumbnail();
        assert!(thumb.to_string().ends_with("-640x480.t.jpg"));
        assert_eq!(MediaName::parse(&thumb.to_string()), Some(thumb));
        assert_eq!(thumb.full(), name);
    }

    #[test]
    fn anything_but_a_written_name_is_refused() {
        let good = MediaName::of(b"x", 1, 2, Kind::Png).to_string();
        assert!(MediaName::parse(&good).is_some());
        for bad in [
            "../etc/passwd",
            "",
            &good.to_uppercase(),
            &good.replace(".png", ".svg"),
            &good.replace("-1x2", "-0x2"),
            &good.replace("-1x2", "-01x2"),
            &good.replace("-1x2", "-1x99999"),
            &format!("a/{good}"),
            &good[1..],
        ] {
            assert_eq!(MediaName::parse(bad), None, "{bad}");
        }
    }
}
