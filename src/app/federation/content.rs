//! The text of a remote `Page` or `Note`, as Pith stores text: Markdown
//! source, rendered and sanitized by the same operation as a local post.
//! `source.content` is taken as it is when its `mediaType` is
//! `text/markdown` (Lemmy, PieFed send it); otherwise the HTML `content`
//! is turned into plain text here (tags dropped, paragraphs and line
//! breaks kept, links kept as Markdown links, entities decoded, Markdown's
//! own characters escaped). No remote HTML is ever kept or shown.

use serde_json::Value;

/// The Markdown source of a remote object's body; `None` when it has
/// none (a link-only `Page`).
pub fn markdown_of(object: &Value) -> Option<String> {
    let source = object.get("source");
    let markdown = source
        .filter(|s| s.get("mediaType").and_then(Value::as_str) == Some("text/markdown"))
        .and_then(|s| s.get("content"))
        .and_then(Value::as_str);
    let text = match markdown {
        Some(md) => md.to_owned(),
        None => html_to_text(object.get("content").and_then(Value::as_str)?),
    };
    (!text.trim().is_empty()).then_some(text)
}

/// A title for a `Note` that starts a topic (a Mastodon post naming the
/// Group has no `name`): the first line of its text as plain text (the
/// Markdown this module writes read back: escapes undone, a link its
/// text) without the mentions it opens with (a line of mentions only is
/// skipped), cut to a title's 300 characters. `None` when nothing is left.
pub fn title_of_note(markdown: &str) -> Option<String> {
    const MAX: usize = 300;
    let title = markdown.lines().map(plain).find_map(|line| {
        let words: Vec<&str> = line.split_whitespace().skip_while(|w| w.starts_with('@')).collect();
        (!words.is_empty()).then(|| words.join(" "))
    })?;
    Some(match title.char_indices().nth(MAX - 1) {
        Some((cut, _)) => format!("{}…", title[..cut].trim_end()),
        None => title,
    })
}

/// A line of Markdown as plain text: `\x` is x, `[text](url)` is text,
/// and no control characters (a Markdown source is taken as sent).
fn plain(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => out.extend(chars.next()),
            '[' => {}
            ']' if chars.clone().next() == Some('(') => {
                // The link's target, to its closing parenthesis.
                chars.by_ref().take_while(|&c| c != ')').for_each(drop);
            }
            c if c.is_whitespace() => out.push(' '),
            c if c.is_control() => {}
            c => out.push(c),
        }
    }
    out
}

/// The link a `Page` carries: its first `Link` attachment's `href`
/// (Lemmy's link posts), when it is http(s).
pub fn link_of(object: &Value) -> Option<String> {
    let attachments = match object.get("attachment")? {
        Value::Array(a) => a.clone(),
        one => vec![one.clone()],
    };
    attachments
        .iter()
        .filter(|a| a.get("type").and_then(Value::as_str) == Some("Link"))
        .find_map(|a| a.get("href").and_then(Value::as_str))
        .filter(|h| h.starts_with("https://") || h.starts_with("http://"))
        .map(str::to_owned)
}

/// Plain text (as Markdown) from remote HTML.
pub fn html_to_text(html: &str) -> String {
    let mut out = String::with_capacity(html.len());
    let mut rest = html;
    // The href of the link being read, and where its text starts in `out`.
    let mut link: Option<(String, usize)> = None;
    while let Some(c) = rest.chars().next() {
        match c {
            '<' => {
                // An unclosed tag ends the text.
                let Some(end) = rest.find('>') else { break };
                let tag = &rest[1..end];
                rest = &rest[end + 1..];
                let name: String = tag
                    .trim_start_matches('/')
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric())
                    .collect::<String>()
                    .to_ascii_lowercase();
                let closing = tag.starts_with('/');
                match name.as_str() {
                    // Their text is no content.
                    "script" | "style" | "template" if !closing => {
                        let close = format!("</{name}");
                        let lower = rest.to_ascii_lowercase();
                        let at = lower.find(&close).unwrap_or(rest.len());
                        rest = &rest[at..];
                    }
                    "br" => out.push_str("  \n"),
                    "p" | "div" | "blockquote" | "ul" | "ol" | "pre" | "h1" | "h2" | "h3" | "h4" | "h5" | "h6" => {
                        paragraph(&mut out)
                    }
                    "li" if !closing => {
                        paragraph(&mut out);
                        out.push_str("- ");
                    }
                    "a" if !closing => link = Some((href(tag).unwrap_or_default(), out.len())),
                    "a" => {
                        if let Some((href, start)) = link.take()
                            && !href.is_empty()
                            && start <= out.len()
                        {
                            out.insert(start, '[');
                            out.push_str("](");
                            out.push_str(&href);
                            out.push(')');
                        }
                    }
                    _ => {}
                }
            }
            '&' => {
                let (decoded, used) = entity(rest);
                push_text(&mut out, decoded);
                rest = &rest[used..];
            }
            c if c.is_whitespace() => {
                if !out.ends_with([' ', '\n']) && !out.is_empty() {
                    out.push(' ');
                }
                rest = &rest[c.len_utf8()..];
            }
            c => {
                push_text(&mut out, c);
                rest = &rest[c.len_utf8()..];
            }
        }
    }
    let lines: Vec<&str> = out.lines().map(str::trim_start).collect();
    let mut text = lines.join("\n");
    while text.contains("\n\n\n") {
        text = text.replace("\n\n\n", "\n\n");
    }
    text.trim().to_owned()
}

fn paragraph(out: &mut String) {
    let trimmed = out.trim_end_matches(' ').len();
    out.truncate(trimmed);
    if !out.is_empty() && !out.ends_with("\n\n") {
        out.push_str(if out.ends_with('\n') { "\n" } else { "\n\n" });
    }
}

/// A character of text, escaped when Markdown would read it as markup.
fn push_text(out: &mut String, c: char) {
    if c.is_control() {
        return;
    }
    if matches!(c, '\\' | '`' | '*' | '_' | '[' | ']' | '<' | '>' | '#' | '|' | '~' | '!') {
        out.push('\\');
    }
    out.push(c);
}

/// An http(s) `href="..."` of a tag, safe inside a Markdown link.
fn href(tag: &str) -> Option<String> {
    let lower = tag.to_ascii_lowercase();
    let at = lower.find("href=")? + 5;
    let value = &tag[at..];
    let (quote, value) = match value.chars().next()? {
        q @ ('"' | '\'') => (Some(q), &value[1..]),
        _ => (None, value),
    };
    let end = match quote {
        Some(q) => value.find(q)?,
        None => value.find(char::is_whitespace).unwrap_or(value.len()),
    };
    let url = value[..end].replace("&amp;", "&");
    let ok = (url.starts_with("https://") || url.starts_with("http://"))
        && !url.chars().any(|c| c.is_whitespace() || c.is_control() || matches!(c, '(' | ')' | '<' | '>'));
    ok.then_some(url)
}

/// The character an entity at the start of `s` stands for, and its length;
/// a lone '&' is itself.
fn entity(s: &str) -> (char, usize) {
    let Some(end) = s.bytes().take(12).position(|b| b == b';') else { return ('&', 1) };
    let name = &s[1..end];
    let c = match name {
        "amp" => Some('&'),
        "lt" => Some('<'),
        "gt" => Some('>'),
        "quot" => Some('"'),
        "apos" => Some('\''),
        "nbsp" => Some(' '),
        _ => {
            let code = match name.strip_prefix('#') {
                Some(hex) if hex.starts_with(['x', 'X']) => u32::from_str_radix(&hex[1..], 16).ok(),
                Some(dec) => dec.parse().ok(),
                None => None,
            };
            code.and_then(char::from_u32)
        }
    };
    match c {
        Some(c) => (c, end + 1),
        None => ('&', 1),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_note_is_titled_by_its_first_line_without_its_opening_mentions() {
        let mastodon = json!({"content": "<p><span class=\"h-card\"><a href=\"https://forum.example/c/rust\" \
            class=\"u-url mention\">@<span>rust</span></a></span> Is *this* [thing] safe?<br>More below.</p><p>And more.</p>"});
        let text = markdown_of(&mastodon).expect("text");
        assert_eq!(title_of_note(&text).as_deref(), Some("Is *this* [thing] safe?"));
        assert_eq!(title_of_note("@rust@forum.example @ann\n\nSecond line").as_deref(), Some("Second line"));
        assert_eq!(title_of_note("@rust@forum.example").as_deref(), None, "a mention alone is no title");
        assert_eq!(title_of_note("  \n").as_deref(), None);
        assert_eq!(title_of_note("a\u{1}b\tc").as_deref(), Some("ab c"), "no control characters");
        let long = "é".repeat(400);
        let title = title_of_note(&long).expect("title");
        assert_eq!(title.chars().count(), 300);
        assert!(title.ends_with('…'));
        crate::model::Title::parse(&title).expect("a valid title");
    }

    #[test]
    fn markdown_source_is_taken_as_it_is() {
        let page = json!({"content": "<p>x</p>", "source": {"content": "**bold**", "mediaType": "text/markdown"}});
        assert_eq!(markdown_of(&page).as_deref(), Some("**bold**"));
    }

    #[test]
    fn html_becomes_plain_text_with_its_paragraphs_links_and_no_markup() {
        let html = "<p>Hello <b>world</b> &amp; <a href=\"https://a.example/@bob\" class=\"mention\">@<span>bob</span></a></p>\
                    <p>second<br>line *not bold*</p><script>alert(1)</script><img src=x onerror=alert(1)>";
        assert_eq!(html_to_text(html), "Hello world & [@bob](https://a.example/@bob)\n\nsecond  \nline \\*not bold\\*");
    }

    #[test]
    fn markup_spelled_in_entities_stays_text_and_a_javascript_link_is_dropped() {
        assert_eq!(html_to_text("&lt;script&gt;x&lt;/script&gt; &#x41;&#66;"), "\\<script\\>x\\</script\\> AB");
        assert_eq!(html_to_text("<a href=\"javascript:alert(1)\">click</a>"), "click");
        assert_eq!(html_to_text("a & b <unclosed"), "a & b");
    }

    #[test]
    fn every_prefix_of_tricky_html_converts_without_panicking() {
        let html = "<p>é&#x1F600;<a href='https://a.example/ü'>ü&amp</a><br/>&#999999999;&#xD800;&\u{1F600};                    <scr<script>ipt>x</SCRIPT>ß <li>ok</li><a href=https://b.example>b</a> <";
        for (at, _) in html.char_indices() {
            let text = html_to_text(&html[..at]);
            assert!(!text.contains("<script") && !text.contains("<a "), "{at}: {text}");
        }
    }

    #[test]
    fn a_link_page_carries_its_attachment() {
        let page = json!({"attachment": [{"type": "Link", "href": "https://example.org/a"}]});
        assert_eq!(link_of(&page).as_deref(), Some("https://example.org/a"));
        assert_eq!(link_of(&json!({"attachment": [{"type": "Link", "href": "ftp://x"}]})), None);
    }
}
