//! How much of a topic one answer holds. A topic of ordinary size is one
//! page; a huge one (issue 26: 100,000 posts made every read a 50-90 MB
//! render, and the signed-in page a 500) is cut into pages. A page ends
//! after `posts` posts or once `bytes` of text are in it, whichever comes
//! first, and always holds at least one post: a count alone does not bound
//! memory, as one post may hold up to ~2.7 MB (40,000 characters and their
//! HTML, `markdown::MAX_GROWTH`).

/// The bounds of one page of a topic's posts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PageLimit {
    /// Most posts on a page.
    pub posts: usize,
    /// A page takes no further post once the text before it (Markdown
    /// and HTML of each post, as stored) reaches this many bytes.
    pub bytes: usize,
}

impl PageLimit {
    /// `GET /api/v1/topics/{id}`: one topic with all its posts, as the
    /// benchmark reads it. The seeded data sets have at most 5,000 posts per
    /// topic and ~7.7 MB of text in the largest (reddit: 5,000 posts of
    /// 20-1,500 characters, each stored with its HTML); twice both, so a
    /// benchmark's own writes never page a seeded topic, and its answers
    /// stay byte for byte what they were. A page then costs at most ~16 MiB
    /// of rows plus one post, and about as much again as JSON.
    pub const API: PageLimit = PageLimit { posts: 10_000, bytes: 16 << 20 };

    /// The topic page (`/t/{id}`): read by a browser, which slows down
    /// long before the API's page (a 5,000-comment page is ~15 MB of HTML).
    /// Reddit shows 200 comments at first, 500 at most.
    pub const WEB: PageLimit = PageLimit { posts: 500, bytes: 1 << 20 };

    /// How many of the posts sized `sizes` (bytes each, in page order) the
    /// page takes, and whether any are left for a next page. Give it up to
    /// `posts + 1` sizes, so that it can tell.
    pub fn cut(&self, sizes: impl IntoIterator<Item = usize>) -> (usize, bool) {
        let (mut taken, mut bytes) = (0, 0usize);
        for size in sizes {
            if taken == self.posts.max(1) || (taken > 0 && bytes >= self.bytes) {
                return (taken, true);
            }
            taken += 1;
            bytes = bytes.saturating_add(size);
        }
        (taken, false)
    }

    /// Whether a page that held every post of its topic (`fill`, no page
    /// after it) would still hold them all with one more of `size` bytes,
    /// wherever in its order that one goes: then the post may be added to
    /// its cached rendering in place (`app::read::add_post`).
    pub fn holds_one_more(&self, fill: PageFill, size: usize) -> bool {
        fill.posts < self.posts.max(1) && fill.bytes.saturating_add(size) < self.bytes
    }
}

/// How much of its `PageLimit` a page that holds all of its topic took:
/// its posts, and their stored text as `PageLimit::bytes` weighs it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PageFill {
    pub posts: usize,
    pub bytes: usize,
}

#[cfg(test)]
mod tests {
    use super::*;

    const SMALL: PageLimit = PageLimit { posts: 3, bytes: 100 };

    /// `holds_one_more` says yes only where `cut` would take every post of
    /// the page and the new one, whatever their sizes and order.
    #[test]
    fn one_more_post_is_held_only_where_the_cut_takes_every_post() {
        for sizes in [vec![], vec![1], vec![1, 1], vec![40, 40], vec![98], vec![99], vec![50, 49], vec![1, 1, 1]] {
            let fill = PageFill { posts: sizes.len(), bytes: sizes.iter().sum() };
            for size in [0, 1, 2, 50, 100] {
                let held = SMALL.holds_one_more(fill, size);
                for at in 0..=sizes.len() {
                    let mut more = sizes.clone();
                    more.insert(at, size);
                    if held {
                        assert_eq!(SMALL.cut(more.clone()), (more.len(), false), "{more:?}");
                    }
                }
                if sizes.len() == 3 || fill.bytes + size >= 100 + 100 {
                    assert!(!held, "{sizes:?} + {size}");
                }
            }
        }
    }

    #[test]
    fn a_page_ends_after_its_count_of_posts() {
        assert_eq!(SMALL.cut([1, 1, 1, 1]), (3, true));
        assert_eq!(SMALL.cut([1, 1, 1]), (3, false), "exactly full, nothing left");
        assert_eq!(SMALL.cut([1]), (1, false));
        assert_eq!(SMALL.cut([]), (0, false));
    }

    #[test]
    fn a_page_ends_once_its_bytes_are_reached() {
        assert_eq!(SMALL.cut([60, 40, 1]), (2, true), "100 bytes in: no third");
        assert_eq!(SMALL.cut([60, 39, 1]), (3, false), "99 bytes in: one more");
        assert_eq!(SMALL.cut([60, 60]), (2, false), "the post that crosses the bound is still taken");
    }

    #[test]
    fn a_post_larger_than_a_page_is_a_page_of_its_own() {
        assert_eq!(SMALL.cut([1_000, 1]), (1, true));
        assert_eq!(SMALL.cut([usize::MAX, usize::MAX]), (1, true));
        assert_eq!(PageLimit { posts: 0, bytes: 0 }.cut([5, 5]), (1, true), "at least one post");
    }

    #[test]
    fn every_seeded_topic_is_one_api_page() {
        // reddit's largest: 5,000 posts of up to 1,500 characters, with HTML.
        let sizes = std::iter::repeat_n(1_500 * 2 + 12, 5_000);
        assert_eq!(PageLimit::API.cut(sizes), (5_000, false));
    }
}
