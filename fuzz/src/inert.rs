//! What "inert" means for `pith::markdown::render` output, checked by
//! reading its tags back: only allow-listed tags and attributes, no URL
//! scheme but http, https and mailto, and `rel="nofollow ugc noopener"` on
//! every link. A plain substring search would not do: the text of a post
//! may well say "javascript:" or "onclick=", escaped and harmless.
//!
//! Shared (std only) by the markdown unit tests, the `markdown` fuzz target
//! and the regression replay, so all three hold the output to one rule.

/// Tags the sanitizer may let through.
pub const TAGS: &[&str] = &[
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
    "img",
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

pub const REL: &str = "nofollow ugc noopener";

/// `Ok` when `html` can neither run script nor load anything; otherwise
/// what is wrong.
pub fn check(html: &str) -> Result<(), String> {
    // Text never holds a raw `<` (it is serialised as `&lt;`), so every `<`
    // opens a tag.
    let mut rest = html;
    while let Some(i) = rest.find('<') {
        rest = &rest[i + 1..];
        let closing = rest.starts_with('/');
        if closing {
            rest = &rest[1..];
        }
        let n = rest.find(|c: char| !c.is_ascii_alphanumeric()).unwrap_or(rest.len());
        let name = &rest[..n];
        rest = &rest[n..];
        if !TAGS.contains(&name) {
            return Err(format!("tag {name:?} is not allowed"));
        }
        let mut rel = false;
        loop {
            rest = rest.trim_start_matches(' ');
            if let Some(r) = rest.strip_prefix('>') {
                rest = r;
                break;
            }
            if closing {
                return Err(format!("closing tag {name:?} has attributes"));
            }
            let n = rest.find(['=', ' ', '>']).unwrap_or(rest.len());
            let attr = &rest[..n];
            rest = rest[n..].strip_prefix("=\"").ok_or_else(|| format!("attribute {attr:?} is not quoted"))?;
            let end = rest.find('"').ok_or("unterminated attribute value")?;
            let value = unescape(&rest[..end])?;
            rest = &rest[end + 1..];
            match (name, attr) {
                ("a", "href") => check_url(&value)?,
                ("a", "title") | ("ol", "start") | ("img", "alt") => {}
                ("a", "rel") if value == REL => rel = true,
                // Only the site's own pictures, which load from the site.
                ("img", "src") if is_site_media(&value) => {}
                ("img", "width" | "height") if !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit()) => {}
                ("img", "loading") if value == "lazy" => {}
                _ => return Err(format!("attribute {attr}={value:?} on {name:?} is not allowed")),
            }
        }
        if name == "a" && !closing && !rel {
            return Err("a link without rel".into());
        }
    }
    Ok(())
}

/// A path under `/media/` of lower-case letters, digits, `-` and `.` only:
/// a picture the site serves itself, never another host's.
fn is_site_media(src: &str) -> bool {
    src.strip_prefix("/media/").is_some_and(|name| {
        !name.is_empty()
            && !name.starts_with('.')
            && name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.')
    })
}

/// An attribute value as the browser reads it. Serialised attributes escape
/// `&`, so any other character reference would mean the output was not
/// produced by the serialiser.
fn unescape(v: &str) -> Result<String, String> {
    let mut out = String::with_capacity(v.len());
    let mut rest = v;
    while let Some(i) = rest.find('&') {
        out.push_str(&rest[..i]);
        rest = &rest[i..];
        let (entity, c) = [("&amp;", '&'), ("&quot;", '"'), ("&nbsp;", '\u{a0}'), ("&lt;", '<'), ("&gt;", '>')]
            .into_iter()
            .find(|(e, _)| rest.starts_with(e))
            .ok_or_else(|| format!("unexpected character reference in {v:?}"))?;
        out.push(c);
        rest = &rest[entity.len()..];
    }
    out.push_str(rest);
    Ok(out)
}

/// Reads the scheme the way a browser does (WHATWG URL: leading and
/// trailing controls and spaces trimmed, tabs and newlines removed): only
/// http, https, mailto or none (a relative URL) may remain.
fn check_url(url: &str) -> Result<(), String> {
    let trimmed = url.trim_matches(|c: char| c <= ' ');
    let cleaned: String = trimmed.chars().filter(|c| !matches!(c, '\t' | '\n' | '\r')).collect();
    let Some((scheme, _)) = cleaned.split_once(':') else { return Ok(()) };
    let is_scheme = scheme.starts_with(|c: char| c.is_ascii_alphabetic())
        && scheme.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'));
    if !is_scheme || matches!(scheme.to_ascii_lowercase().as_str(), "http" | "https" | "mailto") {
        return Ok(());
    }
    Err(format!("link scheme {scheme:?} in {url:?}"))
}
