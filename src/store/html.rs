//! HTML the store derives for every backend: search snippets with their
//! matches marked. (Bodies arrive rendered: `model::Text`, `app::text`.)

/// Where a search backend marks the start and end of a match in a snippet.
/// Control characters: no stored title or body contains them (the model
/// refuses them), so every one found was put there by the backend.
pub const MATCH_START: char = '\u{1}';
pub const MATCH_END: char = '\u{2}';

/// A snippet of plain text with its matches between `MATCH_START` and
/// `MATCH_END`, as HTML: the text escaped, each match in `<mark>`. Stray or
/// nested markers are dropped, so the marks always balance.
pub fn snippet_html(raw: &str) -> String {
    let mut out = String::with_capacity(raw.len() + 32);
    let mut open = false;
    for c in raw.chars() {
        match c {
            MATCH_START if !open => {
                out.push_str("<mark>");
                open = true;
            }
            MATCH_END if open => {
                out.push_str("</mark>");
                open = false;
            }
            MATCH_START | MATCH_END => {}
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c if c.is_control() && c != '\n' && c != '\t' => {}
            c => out.push(c),
        }
    }
    if open {
        out.push_str("</mark>");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_snippet_is_escaped_except_for_the_marks_the_backend_made() {
        let raw = "<script>alert(\"x\")</script> & \u{1}café\u{2}'s";
        assert_eq!(
            snippet_html(raw),
            "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; <mark>café</mark>&#39;s"
        );
    }

    #[test]
    fn stray_and_nested_markers_never_unbalance_the_marks() {
        assert_eq!(snippet_html("\u{2}a\u{1}b\u{1}c"), "a<mark>bc</mark>");
        assert_eq!(snippet_html("\u{1}\u{1}a\u{2}\u{2}"), "<mark>a</mark>");
    }
}
