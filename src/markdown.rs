//! User Markdown (CommonMark plus tables and strikethrough) to HTML that is
//! safe to put in a page as is.
//!
//! pulldown-cmark renders and ammonia sanitizes with an explicit allow-list.
//! Two layers on purpose: the event stream is tamed before rendering (raw
//! HTML becomes text, images become links), and ammonia then guarantees the
//! result whatever pulldown-cmark emits: only the tags and attributes below,
//! only http, https and mailto links (or relative ones), no comments, and
//! `rel="nofollow ugc noopener"` on every link.
//!
//! # Size
//! `render(s).len() <= max_len(s.len())`, that is `16 * s.len() + 4096`
//! bytes. Ordinary Markdown grows 1 to 4 times; only nesting tricks (deep
//! `>>>>` quotes, many uses of one long reference link) come near the
//! bound. Rendering stops as soon as it passes the bound, so memory stays
//! bounded too, and such a source is shown as escaped plain text instead.
//!
//! # Depth
//! At most `MAX_DEPTH` elements are open at once: a source that nests
//! deeper (`> - > - ...`, `- - - -`, runs of `*`) is shown as escaped plain
//! text too. The sanitizer's HTML parser scans its stack of open elements
//! for many tags, so its time grows with nesting times length: 9,999
//! levels of `> - ` took seconds, while at this depth any body of the
//! allowed size renders in about the time of ordinary text of its length
//! (docs/SECURITY.md, `pith bench markdown`).

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::sync::LazyLock;

use ammonia::{Builder, UrlRelative};
use pulldown_cmark::{CowStr, Event, Options, Parser, Tag, TagEnd, html};

/// Output bytes allowed per source byte (see the module doc).
pub const MAX_GROWTH: usize = 16;
/// Output bytes allowed on top, so short sources may nest a little.
pub const SLACK: usize = 4096;
/// Most elements open at once (see the module doc): deeper than any
/// Markdown people write (a list ten levels deep inside a quote, with
/// emphasis in a link, is 24), shallow enough to keep the sanitizer linear.
pub const MAX_DEPTH: usize = 32;

/// The most bytes `render` returns for a source of `source_len` bytes.
pub fn max_len(source_len: usize) -> usize {
    source_len.saturating_mul(MAX_GROWTH).saturating_add(SLACK)
}

/// Sanitized HTML for a Markdown source; see the module doc for the rules.
pub fn render(source: &str) -> String {
    let cap = max_len(source.len());
    let mut out = Capped { html: String::new(), cap };
    let mut events = Tame::new(Parser::new_ext(source, Options::ENABLE_TABLES | Options::ENABLE_STRIKETHROUGH));
    if html::write_html_fmt(&mut out, events.by_ref()).is_err() || events.too_deep {
        return plain(source);
    }
    let clean = SANITIZER.clean(&out.html).to_string();
    // Sanitizing may grow the HTML a little (a `rel` on each link, `&nbsp;`).
    if clean.len() > cap { plain(source) } else { clean }
}

/// The fallback for sources past the size bound: the text, escaped, which
/// is at most 6 times as long (`"` becomes `&quot;`) plus 7 bytes.
fn plain(source: &str) -> String {
    let mut out = String::with_capacity(source.len() + 7);
    out.push_str("<p>");
    for c in source.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out.push_str("</p>");
    out
}

/// A `fmt::Write` that fails once the HTML would pass `cap` bytes, which
/// stops pulldown-cmark's writer there.
struct Capped {
    html: String,
    cap: usize,
}

impl fmt::Write for Capped {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        if self.html.len() + s.len() > self.cap {
            return Err(fmt::Error);
        }
        self.html.push_str(s);
        Ok(())
    }
}

/// The allow-list. Everything not named here is removed (tags keep their
/// text, `script` and `style` lose it too).
static SANITIZER: LazyLock<Builder<'static>> = LazyLock::new(|| {
    let tags = [
        "a",
        "blockquote",
        "br",
        "code",
        "del",
        "em",
        "h1",
        "h2",
        "h3",
        "h4",
        "h5",
        "h6",
        "hr",
        "li",
        "ol",
        "p",
        "pre",
        "strong",
        "table",
        "tbody",
        "td",
        "th",
        "thead",
        "tr",
        "ul",
    ];
    let attrs = HashMap::from([("a", HashSet::from(["href", "title"])), ("ol", HashSet::from(["start"]))]);
    let mut b = Builder::empty();
    b.tags(HashSet::from(tags))
        .tag_attributes(attrs)
        .generic_attributes(HashSet::new())
        .tag_attribute_values(HashMap::new())
        .set_tag_attribute_values(HashMap::new())
        .allowed_classes(HashMap::new())
        .clean_content_tags(HashSet::from(["script", "style"]))
        .url_schemes(HashSet::from(["http", "https", "mailto"]))
        // Links within the forum (`/c/rust`) are relative; they cannot carry a
        // scheme, so they cannot be `javascript:`.
        .url_relative(UrlRelative::PassThrough)
        .link_rel(Some("nofollow ugc noopener"))
        .strip_comments(true)
        .id_prefix(None);
    b
});

/// pulldown-cmark's events with what must not reach the HTML writer
/// replaced:
/// - raw HTML (blocks and inline) becomes text, so it shows escaped, as
///   typed, rather than being passed through or silently dropped;
/// - images become links to the image, with the alt text (or the URL) as
///   the link text: the forum makes no third-party requests, so a page never
///   loads an image a user named. An image inside a link keeps only its alt
///   text, as a link in a link is not valid HTML;
/// - table alignment is dropped, as it would be a `style` attribute;
/// - the stream ends early, with `too_deep` set, when an element would
///   open past `MAX_DEPTH`.
struct Tame<'a, I> {
    events: I,
    /// Elements open in the events yielded so far.
    depth: usize,
    /// Set when the source nests past `MAX_DEPTH`; the stream has ended.
    too_deep: bool,
    /// Open links, images rendered as links included.
    links: usize,
    /// For each open image: whether it was rendered as a link.
    images: Vec<bool>,
    /// The URL of the open image-link while its alt text is still empty, to
    /// use as the link text if it stays empty. At most one image-link is
    /// open at a time: images inside it are alt text only.
    empty_alt: Option<CowStr<'a>>,
    /// An event to yield before reading on.
    pending: Option<Event<'a>>,
}

impl<'a, I: Iterator<Item = Event<'a>>> Iterator for Tame<'a, I> {
    type Item = Event<'a>;

    fn next(&mut self) -> Option<Event<'a>> {
        if self.too_deep {
            return None;
        }
        let event = self.tamed()?;
        match event {
            Event::Start(_) if self.depth == MAX_DEPTH => {
                self.too_deep = true;
                return None;
            }
            Event::Start(_) => self.depth += 1,
            Event::End(_) => self.depth = self.depth.saturating_sub(1),
            _ => {}
        }
        Some(event)
    }
}

impl<'a, I: Iterator<Item = Event<'a>>> Tame<'a, I> {
    fn new(events: I) -> Self {
        Tame { events, depth: 0, too_deep: false, links: 0, images: Vec::new(), empty_alt: None, pending: None }
    }

    /// The next event with raw HTML, images and alignment replaced.
    fn tamed(&mut self) -> Option<Event<'a>> {
        if let Some(e) = self.pending.take() {
            return Some(e);
        }
        loop {
            let event = match self.events.next()? {
                Event::Html(raw) | Event::InlineHtml(raw) => Event::Text(raw),
                Event::Start(Tag::HtmlBlock) => Event::Start(Tag::Paragraph),
                Event::End(TagEnd::HtmlBlock) => Event::End(TagEnd::Paragraph),
                Event::Start(Tag::Table(_)) => Event::Start(Tag::Table(Vec::new())),
                Event::Start(Tag::Link { link_type, dest_url, title, id }) => {
                    self.links += 1;
                    Event::Start(Tag::Link { link_type, dest_url, title, id })
                }
                Event::End(TagEnd::Link) => {
                    self.links = self.links.saturating_sub(1);
                    Event::End(TagEnd::Link)
                }
                Event::Start(Tag::Image { link_type, dest_url, title, id }) => {
                    let as_link = self.links == 0;
                    self.images.push(as_link);
                    if !as_link {
                        continue;
                    }
                    self.links += 1;
                    self.empty_alt = Some(dest_url.clone());
                    Event::Start(Tag::Link { link_type, dest_url, title, id })
                }
                Event::End(TagEnd::Image) => {
                    if !self.images.pop().unwrap_or(false) {
                        continue;
                    }
                    self.links = self.links.saturating_sub(1);
                    match self.empty_alt.take() {
                        Some(url) => {
                            self.pending = Some(Event::End(TagEnd::Link));
                            Event::Text(url)
                        }
                        None => Event::End(TagEnd::Link),
                    }
                }
                e @ (Event::Text(_) | Event::Code(_)) => {
                    if !self.images.is_empty() {
                        self.empty_alt = None;
                    }
                    e
                }
                e => e,
            };
            return Some(event);
        }
    }
}

/// One definition of "inert" for these tests, the fuzz target and the
/// regression replay.
#[cfg(test)]
#[path = "../fuzz/src/inert.rs"]
mod inert;

#[cfg(test)]
mod tests {
    use super::*;

    /// Renders `source` and asserts the result is inert (see `inert`).
    fn assert_inert(source: &str) -> String {
        let out = render(source);
        if let Err(why) = inert::check(&out) {
            panic!("{why} in {out:?} from {source:?}");
        }
        out
    }

    #[test]
    fn script_style_and_frames_in_the_source_show_as_text() {
        for src in [
            "<script>alert(1)</script>",
            "hi <script>alert(1)</script>",
            "<style>body{display:none}</style>",
            "<iframe src=\"https://evil.example\"></iframe>",
            "<svg onload=alert(1)>",
            "<svg><script>alert(1)</script></svg>",
            "<math><mtext><script>alert(1)</script></mtext></math>",
            "<object data=\"javascript:alert(1)\"></object>",
            "<form action=\"javascript:alert(1)\"><input type=submit></form>",
            "<!-- <script>alert(1)</script> -->",
            "<scr<script>ipt>alert(1)</script>",
        ] {
            let out = assert_inert(src);
            assert!(out.contains("&lt;"), "raw HTML should show escaped: {out:?}");
        }
        assert_eq!(render("<script>alert(1)</script>"), "<p>&lt;script&gt;alert(1)&lt;/script&gt;</p>\n");
    }

    #[test]
    fn event_handlers_never_survive() {
        for src in [
            "<img src=x onerror=alert(1)>",
            "<IMG SRC=x ONERROR=alert(1)>",
            "<a href=\"https://ok.example\" onclick=\"alert(1)\">x</a>",
            "<p onmouseover=alert(1)>x</p>",
            "<details open ontoggle=alert(1)>",
            "[x](https://ok.example \"t\\\" onclick=\\\"alert(1)\")",
            "[x](https://ok.example\" onclick=\"alert(1))",
        ] {
            assert_inert(src);
        }
    }

    #[test]
    fn dangerous_link_schemes_lose_their_href() {
        for src in [
            "[x](javascript:alert(1))",
            "[x](JavaScript:alert(1))",
            "[x](javascript&#58;alert(1))",
            "[x](&#106;avascript:alert(1))",
            "[x](&#x6A;&#x61;&#x76;&#x61;&#x73;&#x63;&#x72;&#x69;&#x70;&#x74;&#x3A;alert(1))",
            "[x](java\tscript:alert(1))",
            "[x](<javascript:alert(1)>)",
            "[x](%20javascript:alert(1))",
            "[x](data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==)",
            "[x](vbscript:msgbox(1))",
            "[x][r]\n\n[r]: javascript:alert(1)",
            "<javascript:alert(1)>",
            "<a href=\" javascript:alert(1)\">x</a>",
            "<a href=\"&#14;javascript:alert(1)\">x</a>",
        ] {
            let out = assert_inert(src);
            assert!(!out.contains("href=\"javascript") && !out.contains("href=\"data"), "{out:?}");
        }
        assert_eq!(render("[x](javascript:alert(1))"), "<p><a rel=\"nofollow ugc noopener\">x</a></p>\n");
    }

    #[test]
    fn markdown_inside_html_stays_text() {
        let out = assert_inert("<div>\n\n*hi* [x](javascript:alert(1))\n\n</div>");
        assert!(out.contains("&lt;div&gt;") && out.contains("<em>hi</em>"), "{out:?}");
        assert_inert("<a href=\"[x](javascript:alert(1))\">y</a>");
        assert_inert("[<img src=x onerror=alert(1)>](https://ok.example)");
    }

    #[test]
    fn images_become_links_and_load_nothing() {
        assert_eq!(
            render("![a cat](https://cats.example/c.png)"),
            "<p><a href=\"https://cats.example/c.png\" rel=\"nofollow ugc noopener\">a cat</a></p>\n"
        );
        assert_eq!(
            render("![](https://cats.example/c.png)"),
            "<p><a href=\"https://cats.example/c.png\" rel=\"nofollow ugc noopener\">https://cats.example/c.png</a></p>\n"
        );
        assert_eq!(
            render("[![cat](https://c.example/c.png)](https://home.example)"),
            "<p><a href=\"https://home.example\" rel=\"nofollow ugc noopener\">cat</a></p>\n"
        );
        assert_inert("![x](javascript:alert(1))");
        assert_inert("![x\" onerror=\"alert(1)](https://x.example)");
        assert_inert("![a ![b](https://b.example) c](https://a.example)");
    }

    #[test]
    fn autolinks_get_nofollow() {
        assert_eq!(
            render("<https://example.com/a?b=c&d=e>"),
            "<p><a href=\"https://example.com/a?b=c&amp;d=e\" rel=\"nofollow ugc noopener\">https://example.com/a?b=c&amp;d=e</a></p>\n"
        );
        assert_eq!(
            render("<me@example.com>"),
            "<p><a href=\"mailto:me@example.com\" rel=\"nofollow ugc noopener\">me@example.com</a></p>\n"
        );
    }

    #[test]
    fn ordinary_markdown_renders() {
        assert_eq!(render("*a* **b** `c`"), "<p><em>a</em> <strong>b</strong> <code>c</code></p>\n");
        assert_eq!(render("# Title"), "<h1>Title</h1>\n");
        assert_eq!(render("- one\n- two"), "<ul>\n<li>one</li>\n<li>two</li>\n</ul>\n");
        assert_eq!(render("3. three\n4. four"), "<ol start=\"3\">\n<li>three</li>\n<li>four</li>\n</ol>\n");
        assert_eq!(render("> quoted"), "<blockquote>\n<p>quoted</p>\n</blockquote>\n");
        assert_eq!(render("```rust\nlet x = 1 < 2;\n```"), "<pre><code>let x = 1 &lt; 2;\n</code></pre>\n");
        assert_eq!(render("~~gone~~"), "<p><del>gone</del></p>\n");
        assert_eq!(
            render("[Pith](https://pith.example \"home\")"),
            "<p><a href=\"https://pith.example\" title=\"home\" rel=\"nofollow ugc noopener\">Pith</a></p>\n"
        );
        assert_eq!(render("[rust](/c/rust)"), "<p><a href=\"/c/rust\" rel=\"nofollow ugc noopener\">rust</a></p>\n");
        assert_eq!(render("a  \nb"), "<p>a<br>\nb</p>\n");
        assert_eq!(render("---"), "<hr>\n");
    }

    #[test]
    fn tables_render_without_alignment_styles() {
        assert_eq!(
            render("| a | b |\n|:-|-:|\n| 1 | 2 |"),
            "<table><thead><tr><th>a</th><th>b</th></tr></thead><tbody>\n<tr><td>1</td><td>2</td></tr>\n</tbody></table>\n"
        );
    }

    #[test]
    fn output_stays_within_the_bound() {
        let def = format!("[r]: https://example.com/{}\n\n", "x".repeat(2000));
        let many_refs = def + &"[r]".repeat(20_000);
        let quotes = ">".repeat(20_000);
        let cells = format!("{}\n{}\n{}", "|a".repeat(500), "|-".repeat(500), "|\n".repeat(5_000));
        for src in [many_refs.as_str(), quotes.as_str(), cells.as_str(), "", "x"] {
            let out = render(src);
            assert!(out.len() <= max_len(src.len()), "{} > bound for {} bytes", out.len(), src.len());
        }
        assert!(render(&quotes).starts_with("<p>&gt;&gt;&gt;"), "past the bound the source is shown as text");
    }

    /// `pattern` repeated to fill a body of the largest allowed size
    /// (`model::MAX_BODY_CHARS`, out of this layer's reach), then `tail`.
    fn fill(pattern: &str, tail: &str) -> String {
        pattern.repeat((40_000 - tail.len()) / pattern.len()) + tail
    }

    /// The nesting bombs and other worst cases of docs/SECURITY.md, at the
    /// largest allowed size.
    fn pathological() -> Vec<String> {
        vec![
            fill("> - ", "x"),
            fill("- ", "x"),
            fill("1. ", "x"),
            fill("> ", "x"),
            fill(">", "x"),
            fill("* 1. ", "x"),
            fill("- > ", "x"),
            fill(" > ", "x"),
            fill("*a**a***", ""),
            "*".repeat(19_999) + "a" + &"*".repeat(19_999),
            "_".repeat(19_999) + "a" + &"_".repeat(19_999),
            "~~".repeat(9_999) + "a" + &"~~".repeat(9_999),
            "[".repeat(20_000) + &"](u)".repeat(5_000),
            fill("[a](", ""),
            fill("- [", ""),
            format!("|a|b|\n|-|-|\n{}", fill("|x|y|\n", "")),
            format!("{}\n{}\n{}", "|a".repeat(500), "|-".repeat(500), "|\n".repeat(9_000)),
            fill("<ul><li><blockquote>", ""),
            (0..800).map(|i| format!("{}- a\n", "  ".repeat(i % 40))).collect(),
        ]
    }

    #[test]
    fn pathological_sources_still_render_inert_and_within_the_bound() {
        for src in pathological() {
            let out = assert_inert(&src);
            assert!(!out.is_empty(), "nothing rendered from {:?}", &src[..40]);
            assert!(out.len() <= max_len(src.len()), "{} > bound for {:?}", out.len(), &src[..40]);
        }
    }

    #[test]
    fn sources_nested_past_the_depth_show_as_escaped_text() {
        for src in [fill("> - ", "x"), fill("- ", "x"), fill("1. ", "x"), fill("> ", "x")] {
            let out = assert_inert(&src);
            assert_eq!(out, plain(&src), "{:?}", &src[..40]);
        }
        let stars = "*".repeat(19_999) + "a" + &"*".repeat(19_999);
        assert_eq!(render(&stars), plain(&stars));
        assert!(render("> - > - x").starts_with("<blockquote>\n<ul>\n<li>\n<blockquote>"));
    }

    #[test]
    fn nesting_up_to_the_depth_renders_as_markdown_and_one_more_level_does_not() {
        // Each `>` opens a blockquote; the text adds a paragraph.
        let deepest = format!("{} x", ">".repeat(MAX_DEPTH - 1));
        let out = render(&deepest);
        assert_eq!(out.matches("<blockquote>").count(), MAX_DEPTH - 1, "{out}");
        assert!(out.contains("<p>x</p>"), "{out}");
        let deeper = format!("{} x", ">".repeat(MAX_DEPTH));
        assert_eq!(render(&deeper), plain(&deeper));
        // Later lines are reached only if the earlier ones stay shallow.
        let late = format!("*fine*\n\n{deeper}");
        assert_eq!(render(&late), plain(&late));
    }

    #[test]
    fn the_inertness_check_itself_catches_unsafe_html() {
        let rel = "rel=\"nofollow ugc noopener\"";
        assert!(inert::check(&format!("<p><a href=\"https://a.example\" {rel}>javascript: onclick=</a></p>")).is_ok());
        for bad in [
            format!("<a href=\"javascript:alert(1)\" {rel}>x</a>"),
            format!("<a href=\" JaVa\tScRiPt:alert(1)\" {rel}>x</a>"),
            format!("<a href=\"data:text/html,x\" {rel}>x</a>"),
            "<a href=\"https://a.example\">no rel</a>".into(),
            "<img src=\"https://a.example/i.png\">".into(),
            "<p onclick=\"alert(1)\">x</p>".into(),
            "<p style=\"color:red\">x</p>".into(),
            "<script>alert(1)</script>".into(),
            format!("<a href=\"&#106;avascript:alert(1)\" {rel}>x</a>"),
        ] {
            assert!(inert::check(&bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn rendering_is_deterministic() {
        let src = "# t\n\n*a* [b](https://b.example) ![c](https://c.example)\n\n<b>x</b>";
        assert_eq!(render(src), render(src));
    }
}
