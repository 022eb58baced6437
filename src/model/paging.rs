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
}

#[cfg(test)]
mod tests {
    use super::*;

    const SMALL: PageLimit = PageLimit { posts: 3, bytes: 100 };

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
