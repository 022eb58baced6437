//! Opaque pagination cursors: the sort key and id of the last item of a
//! page, so the next page is an index seek, not an OFFSET scan. `Cursor`
//! pages topic listings, `PostCursor` the posts of one huge topic.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;

use super::PostSort;
use crate::model::Post;

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Cursor {
    /// After (hot, id) in a hot listing.
    Hot(f64, i64),
    /// After (created_at, id) in a new listing.
    New(i64, i64),
    /// After (score, id) in a top listing.
    Top(i64, i64),
}

impl Cursor {
    pub fn encode(&self) -> String {
        let raw = match *self {
            Cursor::Hot(h, id) => format!("h:{:x}:{id}", h.to_bits()),
            Cursor::New(t, id) => format!("n:{t}:{id}"),
            Cursor::Top(s, id) => format!("t:{s}:{id}"),
        };
        URL_SAFE_NO_PAD.encode(raw)
    }

    /// `None` for anything that is not a cursor this server made.
    pub fn decode(s: &str) -> Option<Cursor> {
        if s.len() > 100 {
            return None;
        }
        let raw = URL_SAFE_NO_PAD.decode(s).ok()?;
        let raw = std::str::from_utf8(&raw).ok()?;
        let mut parts = raw.splitn(3, ':');
        let (kind, key, id) = (parts.next()?, parts.next()?, parts.next()?);
        let id: i64 = id.parse().ok()?;
        match kind {
            "h" => {
                let h = f64::from_bits(u64::from_str_radix(key, 16).ok()?);
                h.is_finite().then_some(Cursor::Hot(h, id))
            }
            "n" => Some(Cursor::New(key.parse().ok()?, id)),
            "t" => Some(Cursor::Top(key.parse().ok()?, id)),
            _ => None,
        }
    }
}

/// Where the next page of a topic's posts starts: after this post, in the
/// order the cursor was made for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PostCursor {
    /// After (score, id) in best order (score down, then id up).
    Best(i64, i64),
    /// After this id in new order (id down).
    New(i64),
    /// After this id in old order (id up).
    Old(i64),
}

impl PostCursor {
    /// The cursor of the page that ends with `last`.
    pub fn after(sort: PostSort, last: &Post) -> PostCursor {
        match sort {
            PostSort::Best => PostCursor::Best(last.score, last.id),
            PostSort::New => PostCursor::New(last.id),
            PostSort::Old => PostCursor::Old(last.id),
        }
    }

    /// The order it continues.
    pub fn sort(&self) -> PostSort {
        match self {
            PostCursor::Best(..) => PostSort::Best,
            PostCursor::New(_) => PostSort::New,
            PostCursor::Old(_) => PostSort::Old,
        }
    }

    pub fn encode(&self) -> String {
        let raw = match *self {
            PostCursor::Best(score, id) => format!("pb:{score}:{id}"),
            PostCursor::New(id) => format!("pn:{id}"),
            PostCursor::Old(id) => format!("po:{id}"),
        };
        URL_SAFE_NO_PAD.encode(raw)
    }

    /// `None` for anything that is not a post cursor this server made (a
    /// listing's `Cursor` included).
    pub fn decode(s: &str) -> Option<PostCursor> {
        if s.len() > 100 {
            return None;
        }
        let raw = URL_SAFE_NO_PAD.decode(s).ok()?;
        let raw = std::str::from_utf8(&raw).ok()?;
        let mut parts = raw.split(':');
        let cursor = match (parts.next()?, parts.next()?, parts.next()) {
            ("pb", score, Some(id)) => PostCursor::Best(score.parse().ok()?, id.parse().ok()?),
            ("pn", id, None) => PostCursor::New(id.parse().ok()?),
            ("po", id, None) => PostCursor::Old(id.parse().ok()?),
            _ => return None,
        };
        parts.next().is_none().then_some(cursor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_cursor_survives_a_round_trip() {
        for c in [Cursor::Hot(1234.5678, 9), Cursor::New(1_700_000_000, 3), Cursor::Top(-4, 1)] {
            assert_eq!(Cursor::decode(&c.encode()), Some(c));
        }
    }

    #[test]
    fn garbage_is_not_a_cursor() {
        for s in ["", "!!!", "aDp6OjE", "bjp4OjE", &"A".repeat(500)] {
            assert_eq!(Cursor::decode(s), None, "{s}");
        }
    }

    #[test]
    fn every_post_cursor_survives_a_round_trip() {
        for c in [PostCursor::Best(-3, 7), PostCursor::Best(i64::MAX, i64::MIN), PostCursor::New(5), PostCursor::Old(1)]
        {
            assert_eq!(PostCursor::decode(&c.encode()), Some(c));
        }
    }

    #[test]
    fn garbage_and_listing_cursors_are_not_post_cursors() {
        let listing = Cursor::New(1_700_000_000, 3).encode();
        let extra = URL_SAFE_NO_PAD.encode("po:1:2");
        let text = URL_SAFE_NO_PAD.encode("pb:x:1");
        for s in ["", "!!!", listing.as_str(), extra.as_str(), text.as_str(), &"A".repeat(500)] {
            assert_eq!(PostCursor::decode(s), None, "{s}");
        }
    }
}
