//! User Markdown (CommonMark plus tables and strikethrough) to HTML that is
//! safe to put in a page as is.
//!
//! pulldown-cmark parses; `Tame` replaces in its event stream what must not
//! reach a page (raw HTML becomes text, images become links); `Writer`
//! writes the HTML of an allow-list of elements only: every text and
//! attribute escaped, links to http, https and mailto (or relative) only,
//! each with `rel="nofollow ugc noopener"`, no `class` or `style`.
//!
//! # Why not an HTML sanitizer after rendering
//! The output used to go through ammonia, which parses it again with a
//! full HTML5 parser (html5ever) and writes it out filtered. That pass was
//! nearly all of a render's cost (a 40 KB body: 45 ms against 1-2 ms; a
//! table or nested quotes: over 100 ms), and it only ever checked HTML that
//! pulldown-cmark's known events had produced. Writing those events under
//! the same allow-list directly gives the same bytes without the second
//! parse: the tests hold `Writer`'s output to be exactly what ammonia,
//! configured as before (`tests::sanitizer`), leaves unchanged, over the
//! unit cases, the fuzz corpus and generated sources, and the fuzz target
//! and `inert` check it independently.
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
//! text too. Browsers lay out deep nesting slowly, and no Markdown people
//! write comes near it.

use pulldown_cmark::{CowStr, Event, LinkType, Options, Parser, Tag, TagEnd};

/// Output bytes allowed per source byte (see the module doc).
pub const MAX_GROWTH: usize = 16;
/// Output bytes allowed on top, so short sources may nest a little.
pub const SLACK: usize = 4096;
/// Most elements open at once (see the module doc): deeper than any
/// Markdown people write (a list ten levels deep inside a quote, with
/// emphasis in a link, is 24).
pub const MAX_DEPTH: usize = 32;

/// What every link carries: no ranking credit for spam, no `window.opener`.
pub const LINK_REL: &str = "nofollow ugc noopener";

/// The most bytes `render` returns for a source of `source_len` bytes.
pub fn max_len(source_len: usize) -> usize {
    source_len.saturating_mul(MAX_GROWTH).saturating_add(SLACK)
}

/// Sanitized HTML for a Markdown source; see the module doc for the rules.
pub fn render(source: &str) -> String {
    render_with_mentions(source).0
}

/// `render`, and the names the HTML links as `@mentions` (lowercased, in
/// order of first mention; none when the source is shown as plain text).
pub fn render_with_mentions(source: &str) -> (String, Vec<String>) {
    let out = render_all(source);
    (out.html, out.mentions)
}

/// A body rendered, with what it points at.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Rendered {
    pub html: String,
    /// The names linked as `@mentions`, lowercased, in order of first
    /// mention.
    pub mentions: Vec<String>,
    /// The site's pictures shown or linked (`/media/NAME`), by their
    /// full-size names, each once, in order of first use.
    pub media: Vec<String>,
}

/// `render`, with the mentions and the site's pictures the body uses (none
/// of either when the source is shown as plain text).
pub fn render_all(source: &str) -> Rendered {
    render_events(source, parser(source)).unwrap_or_else(|| plain_rendered(source))
}

/// The events of a Markdown source, with the extensions Pith renders.
fn parser(source: &str) -> Parser<'_> {
    Parser::new_ext(source, Options::ENABLE_TABLES | Options::ENABLE_STRIKETHROUGH)
}

/// Renders the events of `source`; `None` when the render stopped before
/// their end (nested past `MAX_DEPTH`, or past the size bound), for the
/// caller to show the source as plain text.
fn render_events<'a>(source: &str, events: impl Iterator<Item = Event<'a>>) -> Option<Rendered> {
    let mut events = Tame::new(events);
    let mut out = Writer::new(max_len(source.len()));
    if out.run(events.by_ref()).is_err() || events.too_deep {
        return None;
    }
    Some(Rendered { html: out.html, mentions: events.mentions, media: events.media })
}

/// The plain-text fallback as a rendering: no mentions, no pictures.
fn plain_rendered(source: &str) -> Rendered {
    Rendered { html: plain(source), ..Rendered::default() }
}

/// The site's own picture a URL names: `/media/NAME` with a name
/// `media::MediaName` reads.
fn site_media(url: &str) -> Option<crate::media::MediaName> {
    crate::media::MediaName::parse(url.strip_prefix(MEDIA_PATH)?)
}

/// Where the site's pictures are served.
pub const MEDIA_PATH: &str = "/media/";

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

/// The output would pass the size bound.
#[derive(Debug)]
struct TooLong;

/// Writes the HTML of tamed events: pulldown-cmark's own layout (the same
/// tags and line breaks as its `html` module), restricted to the allowed
/// elements, and escaped the way an HTML5 serializer writes a parsed
/// document (`&amp; &lt; &gt; &nbsp;` in text; `&amp; &quot; &nbsp;` in
/// attributes; line ends normalised to `\n`), so the bytes are what a
/// sanitizer's parse and re-serialisation would give.
///
/// Written by hand, as no crate writes pulldown-cmark events under an
/// allow-list; each arm below says what the allowed output is.
struct Writer {
    html: String,
    cap: usize,
    /// The last thing written ended a line (pulldown-cmark's rule for
    /// where block tags start a new line).
    end_newline: bool,
    /// In the table's head row (`th`) rather than its body (`td`).
    table_head: bool,
    /// The last byte written was a CR at the end of a text, written as
    /// LF: a LF that starts the next text ends the same line.
    after_cr: bool,
}

impl Writer {
    fn new(cap: usize) -> Writer {
        Writer { html: String::new(), cap, end_newline: true, table_head: false, after_cr: false }
    }

    fn run<'a>(&mut self, events: impl Iterator<Item = Event<'a>>) -> Result<(), TooLong> {
        for event in events {
            match event {
                Event::Start(tag) => self.start(tag)?,
                Event::End(tag) => self.end(tag)?,
                // Tame turned raw HTML into text already; math, footnotes
                // and task lists are not enabled, but would show as text.
                Event::Text(text)
                | Event::Html(text)
                | Event::InlineHtml(text)
                | Event::InlineMath(text)
                | Event::DisplayMath(text)
                | Event::FootnoteReference(text) => {
                    self.text(&text)?;
                    self.end_newline = text.ends_with('\n');
                }
                Event::Code(text) => {
                    self.write("<code>")?;
                    self.text(&text)?;
                    self.write("</code>")?;
                }
                Event::SoftBreak => self.write("\n")?,
                Event::HardBreak => self.write("<br>\n")?,
                Event::Rule => self.block("<hr>\n")?,
                Event::TaskListMarker(_) => {}
            }
        }
        Ok(())
    }

    fn start(&mut self, tag: Tag<'_>) -> Result<(), TooLong> {
        match tag {
            Tag::Paragraph => self.block("<p>"),
            Tag::Heading { level, .. } => self.block(&format!("<{level}>")),
            Tag::BlockQuote(_) => self.block("<blockquote>\n"),
            // No `class="language-..."`: classes are not allowed.
            Tag::CodeBlock(_) => {
                if !self.end_newline {
                    self.write("\n")?;
                }
                self.write("<pre><code>")
            }
            Tag::List(Some(1)) => self.block("<ol>\n"),
            Tag::List(Some(start)) => self.block(&format!("<ol start=\"{start}\">\n")),
            Tag::List(None) => self.block("<ul>\n"),
            Tag::Item => self.block("<li>"),
            // No alignment: it would be a `style` attribute.
            Tag::Table(_) => self.write("<table>"),
            Tag::TableHead => {
                self.table_head = true;
                self.write("<thead><tr>")
            }
            Tag::TableRow => self.write("<tr>"),
            Tag::TableCell => self.write(if self.table_head { "<th>" } else { "<td>" }),
            Tag::Emphasis => self.write("<em>"),
            Tag::Strong => self.write("<strong>"),
            Tag::Strikethrough => self.write("<del>"),
            Tag::Link { link_type, dest_url, title, .. } => self.link(link_type, &dest_url, &title),
            // Only the site's own pictures reach here as images (Tame makes
            // the rest links), their alt text in `title`.
            Tag::Image { dest_url, title, .. } => self.image(&dest_url, &title),
            // HTML blocks are paragraphs by then. What is not enabled
            // writes no tag.
            Tag::HtmlBlock
            | Tag::FootnoteDefinition(_)
            | Tag::DefinitionList
            | Tag::DefinitionListTitle
            | Tag::DefinitionListDefinition
            | Tag::Superscript
            | Tag::Subscript
            | Tag::MetadataBlock(_) => Ok(()),
        }
    }

    fn end(&mut self, tag: TagEnd) -> Result<(), TooLong> {
        match tag {
            TagEnd::Paragraph => self.write("</p>\n"),
            TagEnd::Heading(level) => self.write(&format!("</{level}>\n")),
            TagEnd::BlockQuote(_) => self.write("</blockquote>\n"),
            TagEnd::CodeBlock => self.write("</code></pre>\n"),
            TagEnd::List(true) => self.write("</ol>\n"),
            TagEnd::List(false) => self.write("</ul>\n"),
            TagEnd::Item => self.write("</li>\n"),
            TagEnd::Table => self.write("</tbody></table>\n"),
            TagEnd::TableHead => {
                self.table_head = false;
                self.write("</tr></thead><tbody>\n")
            }
            TagEnd::TableRow => self.write("</tr>\n"),
            TagEnd::TableCell => self.write(if self.table_head { "</th>" } else { "</td>" }),
            TagEnd::Emphasis => self.write("</em>"),
            TagEnd::Strong => self.write("</strong>"),
            TagEnd::Strikethrough => self.write("</del>"),
            TagEnd::Link | TagEnd::Image => self.write("</a>"),
            TagEnd::HtmlBlock
            | TagEnd::FootnoteDefinition
            | TagEnd::DefinitionList
            | TagEnd::DefinitionListTitle
            | TagEnd::DefinitionListDefinition
            | TagEnd::Superscript
            | TagEnd::Subscript
            | TagEnd::MetadataBlock(_) => Ok(()),
        }
    }

    /// `<a href title rel>`: the `href` only when its URL is allowed
    /// (`allowed_url`), so a refused link keeps its text and goes nowhere.
    fn link(&mut self, link_type: LinkType, dest: &str, title: &str) -> Result<(), TooLong> {
        let mut href = String::with_capacity(dest.len() + 7);
        if link_type == LinkType::Email {
            href.push_str("mailto:");
        }
        escape_href(&mut href, dest);
        self.write("<a")?;
        if allowed_url(&href) {
            self.write(" href=\"")?;
            self.attribute(&href)?;
            self.write("\"")?;
        }
        if !title.is_empty() {
            self.write(" title=\"")?;
            self.attribute(title)?;
            self.write("\"")?;
        }
        self.write(" rel=\"")?;
        self.write(LINK_REL)?;
        self.write("\">")
    }

    /// One of the site's pictures, linked to itself at full size:
    /// `<a href rel><img src alt width height loading="lazy">`, its size
    /// read from its name so the page does not shift as it loads. Any
    /// other URL wrote no image (Tame made it a link).
    fn image(&mut self, dest: &str, alt: &str) -> Result<(), TooLong> {
        let Some(name) = site_media(dest) else { return self.write("<a>") };
        let full = name.full();
        let tag = format!("<a href=\"{MEDIA_PATH}{full}\" rel=\"{LINK_REL}\"><img src=\"{MEDIA_PATH}{full}\" alt=\"");
        self.write(&tag)?;
        self.attribute(alt)?;
        self.write(&format!("\" width=\"{}\" height=\"{}\" loading=\"lazy\">", full.width, full.height))
    }

    /// A block tag: on a new line, as pulldown-cmark places it.
    fn block(&mut self, tag: &str) -> Result<(), TooLong> {
        if !self.end_newline {
            self.write("\n")?;
        }
        self.write(tag)
    }

    fn write(&mut self, s: &str) -> Result<(), TooLong> {
        self.after_cr = false;
        self.reserve(s.len())?;
        self.html.push_str(s);
        if !s.is_empty() {
            self.end_newline = s.ends_with('\n');
        }
        Ok(())
    }

    fn reserve(&self, more: usize) -> Result<(), TooLong> {
        if self.html.len() + more > self.cap { Err(TooLong) } else { Ok(()) }
    }

    /// Text content: `& < >` and no-break spaces as entities, line ends as
    /// `\n`, NULs dropped (an HTML parser drops them from text too).
    fn text(&mut self, s: &str) -> Result<(), TooLong> {
        self.escaped(s, |c| match c {
            '&' => Some("&amp;"),
            '<' => Some("&lt;"),
            '>' => Some("&gt;"),
            '\u{a0}' => Some("&nbsp;"),
            '\0' => Some(""),
            _ => None,
        })
    }

    /// A double-quoted attribute value: `& "` and no-break spaces as
    /// entities, line ends as `\n`, NULs as U+FFFD (as a parser reads them).
    fn attribute(&mut self, s: &str) -> Result<(), TooLong> {
        self.escaped(s, |c| match c {
            '&' => Some("&amp;"),
            '"' => Some("&quot;"),
            '\u{a0}' => Some("&nbsp;"),
            '\0' => Some("\u{fffd}"),
            _ => None,
        })
    }

    /// Writes `s` with `entity`'s replacements, and CR LF or a lone CR as
    /// LF (HTML's input stream normalises them so).
    fn escaped(&mut self, s: &str, entity: impl Fn(char) -> Option<&'static str>) -> Result<(), TooLong> {
        let s = match s.strip_prefix('\n') {
            Some(rest) if self.after_cr => rest,
            _ => s,
        };
        self.after_cr = s.ends_with('\r');
        let mut chars = s.chars().peekable();
        let mut start = 0;
        let mut at = 0;
        while let Some(c) = chars.next() {
            let width = c.len_utf8();
            let replacement = match c {
                '\r' if chars.peek() == Some(&'\n') => Some(""),
                '\r' => Some("\n"),
                c => entity(c),
            };
            if let Some(r) = replacement {
                self.reserve(at - start + r.len())?;
                self.html.push_str(&s[start..at]);
                self.html.push_str(r);
                start = at + width;
            }
            at += width;
        }
        self.reserve(s.len() - start)?;
        self.html.push_str(&s[start..]);
        Ok(())
    }
}

/// Whether a link may keep its `href`, the rule ammonia applied: a URL
/// that parses as absolute must be http, https or mailto; one without a
/// scheme stays (links within the forum, `/c/rust`, cannot be
/// `javascript:`); anything else that does not parse is dropped. `href` is
/// the value as written (percent-encoded by `escape_href`), which is what
/// a browser reads.
fn allowed_url(href: &str) -> bool {
    match url::Url::parse(href) {
        Ok(url) => matches!(url.scheme(), "http" | "https" | "mailto"),
        Err(e) => e == url::ParseError::RelativeUrlWithoutBase,
    }
}

/// Bytes a link destination keeps as they are; the rest is percent-encoded
/// (pulldown-cmark's `escape_href` table; `&` and `'` stay, and the
/// attribute escaping then writes `&` as `&amp;`).
const HREF_SAFE: [bool; 128] = {
    let mut t = [false; 128];
    let safe = b"!#$%&'()*+,-./0123456789:;=?@ABCDEFGHIJKLMNOPQRSTUVWXYZ^_abcdefghijklmnopqrstuvwxyz~";
    let mut i = 0;
    while i < safe.len() {
        t[safe[i] as usize] = true;
        i += 1;
    }
    t
};

fn escape_href(out: &mut String, url: &str) {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    for &b in url.as_bytes() {
        if b < 0x80 && HREF_SAFE[b as usize] {
            out.push(b as char);
        } else {
            out.push('%');
            out.push(HEX[usize::from(b >> 4)] as char);
            out.push(HEX[usize::from(b & 0xF)] as char);
        }
    }
}

/// pulldown-cmark's events with what must not reach the HTML writer
/// replaced:
/// - raw HTML (blocks and inline) becomes text, so it shows escaped, as
///   typed, rather than being passed through or silently dropped;
/// - an image of the site's own (`/media/NAME`, outside a link) stays an
///   image: one `Start(Image)` with its alt text as plain text in `title`,
///   then its `End(Image)` (the events of the alt text are read here);
/// - other images become links to the image, with the alt text (or the
///   URL) as the link text: the forum makes no third-party requests, so a
///   page never loads an image a user named. An image inside a link keeps
///   only its alt text, as a link in a link is not valid HTML;
/// - a link inside a link (an autolink in a link's text) keeps only its
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
    /// For each link start seen: whether it was kept (not inside a link).
    link_kept: Vec<bool>,
    /// For each open image: whether it was rendered as a link.
    images: Vec<bool>,
    /// The URL of the open image-link while its alt text is still empty, to
    /// use as the link text if it stays empty. At most one image-link is
    /// open at a time: images inside it are alt text only.
    empty_alt: Option<CowStr<'a>>,
    /// An event to yield before reading on.
    pending: Option<Event<'a>>,
    /// Events a text split into (text, and mentions as links) still to
    /// yield, in order.
    split: std::collections::VecDeque<Event<'a>>,
    /// Inside a code block: its text is code, with no mentions.
    in_code: bool,
    /// The text just before the next text event ends in a character of a
    /// name (or `@`), so an `@` right after it starts no mention
    /// (`email@host`).
    after_word: bool,
    /// The names mentioned, in order of first mention, lowercased.
    pub mentions: Vec<String>,
    /// The site's pictures shown or linked, full-size names, each once.
    pub media: Vec<String>,
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
        Tame {
            events,
            depth: 0,
            too_deep: false,
            links: 0,
            link_kept: Vec::new(),
            images: Vec::new(),
            empty_alt: None,
            pending: None,
            split: std::collections::VecDeque::new(),
            in_code: false,
            after_word: false,
            mentions: Vec::new(),
            media: Vec::new(),
        }
    }

    /// Records a use of the site's picture `url` names, if it names one.
    fn note_media(&mut self, url: &str) {
        if let Some(name) = site_media(url) {
            let full = name.full().to_string();
            if !self.media.contains(&full) {
                self.media.push(full);
            }
        }
    }

    /// The alt text of the image just opened, as plain text: its texts and
    /// code, and those of images nested in it, up to its own end.
    fn alt_text(&mut self) -> String {
        let mut alt = String::new();
        let mut open = 1usize;
        for event in self.events.by_ref() {
            match event {
                Event::Start(Tag::Image { .. }) => open += 1,
                Event::End(TagEnd::Image) => {
                    open -= 1;
                    if open == 0 {
                        break;
                    }
                }
                Event::Text(t) | Event::Code(t) => alt.push_str(&t),
                Event::SoftBreak | Event::HardBreak => alt.push(' '),
                _ => {}
            }
        }
        alt
    }

    /// The next event with raw HTML, images and alignment replaced.
    fn tamed(&mut self) -> Option<Event<'a>> {
        if let Some(e) = self.pending.take().or_else(|| self.split.pop_front()) {
            return Some(e);
        }
        loop {
            let next = self.events.next()?;
            let after_word = std::mem::replace(&mut self.after_word, false);
            let event = match next {
                Event::Text(text) if self.links == 0 && !self.in_code => {
                    self.after_word = text.chars().next_back().is_some_and(|c| is_name_char(c) || c == '@');
                    match self.mention_split(text, after_word) {
                        Ok(first) => first,
                        Err(text) => Event::Text(text),
                    }
                }
                Event::Start(Tag::CodeBlock(kind)) => {
                    self.in_code = true;
                    Event::Start(Tag::CodeBlock(kind))
                }
                Event::End(TagEnd::CodeBlock) => {
                    self.in_code = false;
                    Event::End(TagEnd::CodeBlock)
                }
                Event::Html(raw) | Event::InlineHtml(raw) => Event::Text(raw),
                Event::Start(Tag::HtmlBlock) => Event::Start(Tag::Paragraph),
                Event::End(TagEnd::HtmlBlock) => Event::End(TagEnd::Paragraph),
                Event::Start(Tag::Table(_)) => Event::Start(Tag::Table(Vec::new())),
                Event::Start(Tag::Link { link_type, dest_url, title, id }) => {
                    self.note_media(&dest_url);
                    let keep = self.links == 0;
                    self.link_kept.push(keep);
                    if !keep {
                        continue;
                    }
                    self.links += 1;
                    Event::Start(Tag::Link { link_type, dest_url, title, id })
                }
                Event::End(TagEnd::Link) => {
                    if !self.link_kept.pop().unwrap_or(false) {
                        continue;
                    }
                    self.links = self.links.saturating_sub(1);
                    Event::End(TagEnd::Link)
                }
                Event::Start(Tag::Image { link_type, dest_url, title: _, id })
                    if self.links == 0 && site_media(&dest_url).is_some() =>
                {
                    self.note_media(&dest_url);
                    let alt = self.alt_text();
                    self.pending = Some(Event::End(TagEnd::Image));
                    Event::Start(Tag::Image { link_type, dest_url, title: alt.into(), id })
                }
                Event::Start(Tag::Image { link_type, dest_url, title, id }) => {
                    self.note_media(&dest_url);
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

    /// Splits a text with mentions into text and `@name` links to the
    /// profile (`/u/name`): returns the first event and queues the rest,
    /// or gives the text back when it mentions no one. `after_word`: the
    /// text before this one ended inside a word.
    fn mention_split(&mut self, text: CowStr<'a>, after_word: bool) -> Result<Event<'a>, CowStr<'a>> {
        let found = find_mentions(&text, after_word);
        if found.is_empty() {
            return Err(text);
        }
        let piece = |range: std::ops::Range<usize>| -> CowStr<'a> {
            match &text {
                CowStr::Borrowed(s) => CowStr::Borrowed(&s[range]),
                other => CowStr::from(other[range].to_owned()),
            }
        };
        let mut at = 0;
        for range in found {
            if range.start > at {
                self.split.push_back(Event::Text(piece(at..range.start)));
            }
            let name = &text[range.start + 1..range.end];
            let lower = name.to_ascii_lowercase();
            if !self.mentions.contains(&lower) {
                self.mentions.push(lower);
            }
            let dest_url = CowStr::from(format!("/u/{name}"));
            let link = Tag::Link { link_type: LinkType::Inline, dest_url, title: "".into(), id: "".into() };
            self.split.push_back(Event::Start(link));
            self.split.push_back(Event::Text(piece(range.clone())));
            self.split.push_back(Event::End(TagEnd::Link));
            at = range.end;
        }
        if at < text.len() {
            self.split.push_back(Event::Text(piece(at..text.len())));
        }
        Ok(self.split.pop_front().unwrap_or(Event::Text("".into())))
    }
}

/// A character a username may hold (`model::Username`).
fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == '-'
}

/// Shortest and longest username (`model::Username`).
const NAME_LEN: std::ops::RangeInclusive<usize> = 3..=20;

/// The byte ranges of the mentions in `text`, each `@` and a name: an `@`
/// not right after a name's character or another `@` (so `email@host` is
/// no mention), then 3 to 20 name characters and no more.
fn find_mentions(text: &str, mut after_word: bool) -> Vec<std::ops::Range<usize>> {
    let mut found = Vec::new();
    let mut chars = text.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        if c == '@' && !after_word {
            let mut end = i + 1;
            while let Some(&(j, n)) = chars.peek().filter(|(_, n)| is_name_char(*n)) {
                end = j + n.len_utf8();
                chars.next();
            }
            if NAME_LEN.contains(&(end - i - 1)) {
                found.push(i..end);
            }
            after_word = true;
            continue;
        }
        // A letter of any script before `@` makes it part of a word.
        after_word = c == '@' || c == '_' || c == '-' || c.is_alphanumeric();
    }
    found
}

/// The names `@mentioned` in a Markdown source, lowercased, in order of
/// first mention: the mentions `render` makes links of (none in code or in
/// links).
pub fn mentions(source: &str) -> Vec<String> {
    let mut events = Tame::new(parser(source));
    events.by_ref().for_each(drop);
    events.mentions
}

/// The site's pictures a Markdown source shows or links (`/media/NAME`),
/// by their full-size names, each once: `render_all`'s `media` without
/// the HTML.
pub fn media(source: &str) -> Vec<String> {
    let mut events = Tame::new(parser(source));
    events.by_ref().for_each(drop);
    if events.too_deep { Vec::new() } else { events.media }
}

/// The text of a Markdown source without its markup, whitespace collapsed,
/// cut to at most `max` characters (with `…` when cut): a notification's
/// excerpt.
pub fn excerpt(source: &str, max: usize) -> String {
    let mut excerpt = Excerpt::new(max, source.len());
    for event in parser(source) {
        excerpt.see(&event);
        // Enough to cut from: stop reading a long source.
        if excerpt.full() {
            break;
        }
    }
    excerpt.finish()
}

/// `render_all` and `excerpt` from one parse of the source: a new post or
/// topic needs both, and parsing twice was a third of its rendering.
pub fn render_with_excerpt(source: &str, max: usize) -> (Rendered, String) {
    let mut excerpt = Excerpt::new(max, source.len());
    match render_events(source, parser(source).inspect(|event| excerpt.see(event))) {
        Some(rendered) => (rendered, excerpt.finish()),
        // The render stopped before the end of the events: the excerpt
        // reads them all.
        None => (plain_rendered(source), self::excerpt(source, max)),
    }
}

/// An excerpt built from the parser's events, as they are read.
struct Excerpt {
    words: String,
    /// A space is due before the next character.
    space: bool,
    max: usize,
}

impl Excerpt {
    /// `source_len`: the source's length, which bounds the text's.
    fn new(max: usize, source_len: usize) -> Self {
        Excerpt { words: String::with_capacity(source_len.min(max * 4 + 16)), space: false, max }
    }

    fn see(&mut self, event: &Event<'_>) {
        let text = match event {
            Event::Text(t) | Event::Code(t) | Event::Html(t) | Event::InlineHtml(t) => t,
            Event::SoftBreak | Event::HardBreak | Event::Rule => {
                self.space = true;
                return;
            }
            Event::End(
                TagEnd::Paragraph
                | TagEnd::Heading(_)
                | TagEnd::Item
                | TagEnd::TableCell
                | TagEnd::CodeBlock
                | TagEnd::HtmlBlock
                | TagEnd::BlockQuote(_),
            ) => {
                self.space = true;
                return;
            }
            _ => return,
        };
        if self.full() {
            return;
        }
        // A run of whitespace or control characters becomes one space,
        // before the next word: each piece after the first follows one.
        for (i, piece) in text.split(|c: char| c.is_whitespace() || c.is_control()).enumerate() {
            self.space |= i > 0;
            if piece.is_empty() {
                continue;
            }
            if std::mem::take(&mut self.space) && !self.words.is_empty() {
                self.words.push(' ');
            }
            self.words.push_str(piece);
        }
    }

    /// Enough text to cut the excerpt from.
    fn full(&self) -> bool {
        self.words.len() > self.max * 4 + 8
    }

    fn finish(self) -> String {
        let mut words = self.words;
        if words.char_indices().nth(self.max).is_some() {
            let cut = words.char_indices().nth(self.max.saturating_sub(1)).map_or(words.len(), |(i, _)| i);
            words.truncate(words[..cut].trim_end().len());
            words.push('…');
        }
        words
    }
}

/// One definition of "inert" for these tests, the fuzz target and the
/// regression replay.
#[cfg(test)]
#[path = "../fuzz/src/inert.rs"]
mod inert;

#[cfg(test)]
pub(crate) mod tests {
    use std::collections::{HashMap, HashSet};

    use ammonia::{Builder, UrlRelative};
    use rand::{Rng, SeedableRng};

    use super::*;

    /// The allow-list the output was once sanitized with after rendering,
    /// now the check that `Writer` writes nothing it would remove or
    /// change: only these tags and attributes, only http, https and
    /// mailto links (or relative ones), no comments, `rel` on every link.
    pub(crate) fn sanitizer() -> Builder<'static> {
        let attrs = HashMap::from([
            ("a", HashSet::from(["href", "title"])),
            ("ol", HashSet::from(["start"])),
            ("img", HashSet::from(["src", "alt", "width", "height", "loading"])),
        ]);
        let mut b = Builder::empty();
        // The inertness check's list: one allow-list for both checks.
        b.tags(inert::TAGS.iter().copied().collect())
            .tag_attributes(attrs)
            .generic_attributes(HashSet::new())
            .tag_attribute_values(HashMap::new())
            .set_tag_attribute_values(HashMap::new())
            .allowed_classes(HashMap::new())
            .clean_content_tags(HashSet::from(["script", "style"]))
            .url_schemes(HashSet::from(["http", "https", "mailto"]))
            .url_relative(UrlRelative::PassThrough)
            .link_rel(Some(LINK_REL))
            .strip_comments(true)
            .id_prefix(None);
        b
    }

    /// Renders `source`, asserts the result is inert (see `inert`) and that
    /// the sanitizer would leave it byte for byte as it is.
    fn assert_inert(source: &str) -> String {
        let out = render(source);
        if let Err(why) = inert::check(&out) {
            panic!("{why} in {out:?} from {source:?}");
        }
        assert_sanitized(source, &out);
        out
    }

    fn assert_sanitized(source: &str, out: &str) {
        let clean = sanitizer().clean(out).to_string();
        assert!(clean == out, "the sanitizer changes the output of {source:?}:\n{out:?}\n{clean:?}");
    }

    /// The renderer as it was: pulldown-cmark's HTML writer over the same
    /// tamed events, then the sanitizer.
    fn rendered_then_sanitized(source: &str) -> Option<String> {
        let mut html = String::new();
        let mut events = Tame::new(parser(source));
        pulldown_cmark::html::push_html(&mut html, events.by_ref());
        (!events.too_deep).then(|| sanitizer().clean(&html).to_string())
    }

    /// Markdown-ish sources from pieces that exercise every event the
    /// writer handles, and the escaping and URL rules.
    fn generated(rng: &mut rand_chacha::ChaCha8Rng) -> String {
        const PIECES: &[&str] = &[
            "a",
            "word ",
            " ",
            "\n",
            "\n\n",
            "\r\n",
            "\r",
            "\t",
            "# ",
            "## ",
            "###### ",
            "> ",
            "- ",
            "* ",
            "+ ",
            "1. ",
            "7) ",
            "  ",
            "    ",
            "```",
            "```rust x\n",
            "~~~\n",
            "`",
            "*",
            "**",
            "_",
            "__",
            "~~",
            "[",
            "]",
            "(",
            ")",
            "](",
            "![",
            "<",
            ">",
            "&",
            "&amp;",
            "&#0;",
            "&#x27;",
            "&nbsp;",
            "\u{a0}",
            "\0",
            "\"",
            "'",
            "\\",
            "|",
            "|-|",
            "|:-:|\n",
            "---\n",
            "***",
            "javascript:",
            "JaVa\tScript:",
            "data:",
            "https://x.example/",
            "http://a.example/?q=1&r=2",
            "mailto:",
            "me@x.example",
            "<https://a.example/b c>",
            "<b@c.example>",
            "/c/rust",
            "../x",
            "//evil.example",
            "%20",
            "\u{e9}",
            "\u{1f600}",
            "\u{200b}",
            " \"title\"",
            " 'ti\"t'",
            "<script>",
            "</p>",
            "<!--",
            "-->",
            "<a href=\"x\">",
            "[r]",
            "[r]: https://r.example/'q' \"t\"\n",
            "\\\n",
        ];
        let n = rng.random_range(1..40);
        (0..n).map(|_| PIECES[rng.random_range(0..PIECES.len())]).collect()
    }

    /// The fuzz target's seeds and every input it ever failed on, through
    /// the same comparison.
    #[test]
    fn the_fuzz_seeds_and_regressions_render_as_rendering_then_sanitizing_did() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz");
        let mut checked = 0;
        for dir in [root.join("corpus/markdown"), root.join("regressions/markdown")] {
            for entry in std::fs::read_dir(&dir).expect("fuzz inputs") {
                let path = entry.expect("entry").path();
                let name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default().to_owned();
                if dir.ends_with("corpus/markdown") && !name.starts_with("seed-") {
                    continue;
                }
                let src = String::from_utf8_lossy(&std::fs::read(&path).expect("read")).into_owned();
                let out = assert_inert(&src);
                if let Some(before) = rendered_then_sanitized(&src).filter(|b| b.len() <= max_len(src.len()) / 2) {
                    assert!(out == before, "{name}:\n{out:?}\n{before:?}");
                }
                checked += 1;
            }
        }
        assert!(checked >= 10, "only {checked} inputs");
    }

    /// The writer gives exactly the bytes the old render-then-sanitize did,
    /// for 20,000 generated sources and the pathological ones.
    #[test]
    fn the_writer_matches_rendering_then_sanitizing() {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(26);
        let sources = (0..20_000).map(|_| generated(&mut rng)).chain(pathological());
        for src in sources {
            let Some(before) = rendered_then_sanitized(&src) else { continue };
            // Past the size bound both show the source as text; the bound
            // is checked on different bytes, so skip sources near it.
            if before.len() > max_len(src.len()) / 2 {
                continue;
            }
            let out = render(&src);
            assert!(out == before, "{src:?}:\n{out:?}\n{before:?}");
            assert_sanitized(&src, &out);
        }
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
    fn a_link_inside_a_link_keeps_only_its_text() {
        assert_eq!(
            render("[see <b@c.example> here](https://a.example)"),
            "<p><a href=\"https://a.example\" rel=\"nofollow ugc noopener\">see b@c.example here</a></p>\n"
        );
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
    fn the_sites_own_picture_is_an_image_linked_to_itself_and_others_stay_links() {
        let name = format!("{}-640x480.jpg", "ab".repeat(16));
        let thumb = name.replace(".jpg", ".t.jpg");
        let out = assert_inert(&format!("![a *cat* & dog](/media/{thumb} \"title\")"));
        assert_eq!(
            out,
            format!(
                "<p><a href=\"/media/{name}\" rel=\"{LINK_REL}\"><img src=\"/media/{name}\" alt=\"a cat &amp; dog\" \
                 width=\"640\" height=\"480\" loading=\"lazy\"></a></p>\n"
            )
        );
        assert_eq!(
            render_all(&format!("![x](/media/{name}) [y](/media/{thumb}) ![z](/media/{name})")).media,
            std::slice::from_ref(&name)
        );
        // Another host's picture, a name that does not parse, or a picture
        // inside a link: links, or text, and never an image.
        for source in [
            "![c](https://c.example/i.png)".to_owned(),
            "![c](/media/../pith.db)".to_owned(),
            format!("![c](//evil.example/media/{name})"),
            format!("[![c](/media/{name})](https://a.example)"),
        ] {
            assert!(!assert_inert(&source).contains("<img"), "{source}");
        }
    }

    #[test]
    fn rendering_is_deterministic() {
        let src = "# t\n\n*a* [b](https://b.example) ![c](https://c.example)\n\n<b>x</b>";
        assert_eq!(render(src), render(src));
    }

    #[test]
    fn an_at_name_becomes_a_link_to_the_profile() {
        assert_eq!(render("hi @alice!"), "<p>hi <a href=\"/u/alice\" rel=\"nofollow ugc noopener\">@alice</a>!</p>\n");
        assert_eq!(mentions("hi @alice and @Bob_2, @alice again"), ["alice", "bob_2"]);
        assert_inert("**@alice** @bob-c\n\n> @carol");
    }

    #[test]
    fn an_email_address_code_and_links_mention_no_one() {
        for source in
            ["email@host.example", "`@alice`", "    @alice\n", "```\n@alice\n```", "[@alice](https://a.example)"]
        {
            assert_eq!(mentions(source), Vec::<String>::new(), "{source}");
            assert!(!render(source).contains("/u/alice"), "{source}");
        }
    }

    #[test]
    fn a_name_too_short_or_too_long_is_no_mention() {
        assert!(mentions("@ab and @abcdefghijklmnopqrstu and @@alice").is_empty());
        assert_eq!(mentions("@abc"), ["abc"]);
    }

    #[test]
    fn an_excerpt_is_the_plain_text_cut_to_length() {
        assert_eq!(excerpt("# Hi\n\n*there*, `you`\n\n<b>x</b>", 140), "Hi there, you <b>x</b>");
        assert_eq!(excerpt("one two three", 7), "one tw…");
        assert_eq!(excerpt(&"é".repeat(300), 140).chars().count(), 140);
        assert_eq!(excerpt("  lead\u{7}and \t\n  trail  \n\nnext", 140), "lead and trail next");
        assert_eq!(excerpt("a\n\n- b\n- c\n\n> d", 140), "a b c d");
        assert_eq!(excerpt("one two three", 8), "one two…");
        assert_eq!(excerpt("one two three", 13), "one two three");
        assert_eq!(excerpt("", 140), "");
    }

    /// One parse gives what the two did: the same rendering and the same
    /// excerpt, also where the render stops early (too deep) or falls back
    /// to plain text.
    #[test]
    fn render_with_excerpt_is_render_all_and_excerpt() {
        let long = "word ".repeat(2000);
        let deep = format!("{}deep", "> ".repeat(MAX_DEPTH + 5));
        let sources = [
            "",
            "plain",
            "# Hi\n\n*there*, `you`\n\n<b>x</b> and <script>x</script>",
            "@alice and @Bob_2 wrote\nsoft\nbreaks  \nhard one",
            "![pic](/media/abc.webp) [link](https://example.com \"t\") ~~gone~~",
            "| a | b |\n|---|---|\n| 1 | 2 |\n\n```\n@notme code\n```\n\n---\n\n- item\n- two",
            "> quote\n>> nested <i>html</i>\n\n<div>block</div>",
            long.as_str(),
            deep.as_str(),
        ];
        // The deep one is past the render's bound: shown as plain text.
        assert!(render_all(&deep).html.starts_with("<p>&gt; &gt; "), "{:?}", render_all(&deep).html);
        for source in sources {
            for max in [1, 7, 140] {
                let (rendered, made) = render_with_excerpt(source, max);
                assert_eq!(rendered, render_all(source), "{source:?}");
                assert_eq!(made, excerpt(source, max), "{source:?} at {max}");
            }
        }
    }
}
