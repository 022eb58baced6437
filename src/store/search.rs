//! Full-text search as every backend sees it: what a search asks for, what
//! it returns, and the words of a query. Each backend turns `terms` into
//! its own query language (FTS5 in `sqlite::search`; tsquery for
//! PostgreSQL), so no user input ever reaches a query parser as syntax.

use crate::model::SearchHit;

/// Longest query read, in characters; the rest is ignored.
pub const MAX_QUERY_CHARS: usize = 200;
/// Most words a query keeps; later ones are ignored.
pub const MAX_TERMS: usize = 16;
/// Deepest a search pages: every page costs ranking all matches up to it.
pub const MAX_OFFSET: usize = 1000;
/// A last word this long or longer also finds words it begins
/// ("rasp" finds "raspberry"); shorter ones would match too much.
pub const MIN_PREFIX_CHARS: usize = 3;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SearchKind {
    /// Titles and bodies of topics.
    Topics,
    /// Bodies of replies.
    Posts,
}

/// One page of a search. Only what the public may read is ever found:
/// nothing deleted or removed, no reply in a removed topic.
#[derive(Debug, Clone)]
pub struct Search {
    /// As the user typed it: any text is safe here (see `terms`).
    pub text: String,
    pub kind: SearchKind,
    /// Only in this community (`None`: everywhere).
    pub community: Option<String>,
    /// Hits to skip, at most `MAX_OFFSET`: results page by position, since
    /// a relevance score is no stable key to seek from.
    pub offset: usize,
    pub limit: usize,
}

#[derive(Debug, Clone)]
pub struct SearchPage {
    /// Best first.
    pub hits: Vec<SearchHit>,
    /// The `offset` of the next page, when there is one.
    pub next: Option<usize>,
}

/// One word to find.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Term {
    /// The word as typed (case and punctuation are the tokenizer's job),
    /// without control characters or a trailing `*`.
    pub word: String,
    /// Also find words that begin with it.
    pub prefix: bool,
}

/// The words of a query: split at whitespace, words without a letter or
/// digit dropped (they would match nothing), at most `MAX_TERMS` of them
/// from the first `MAX_QUERY_CHARS` characters. A word typed with a
/// trailing `*`, and the last word when it has `MIN_PREFIX_CHARS` letters
/// or digits, is a prefix. Every word must be found (AND).
pub fn terms(text: &str) -> Vec<Term> {
    let head: String = text.chars().take(MAX_QUERY_CHARS).collect();
    let mut terms: Vec<Term> = head
        .split(|c: char| c.is_whitespace() || c.is_control())
        .filter_map(|w| {
            let word = w.trim_end_matches('*');
            word.chars()
                .any(char::is_alphanumeric)
                .then(|| Term { word: word.to_owned(), prefix: word.len() < w.len() })
        })
        .take(MAX_TERMS)
        .collect();
    if let Some(last) = terms.last_mut() {
        last.prefix |= last.word.chars().filter(|c| c.is_alphanumeric()).count() >= MIN_PREFIX_CHARS;
    }
    terms
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shown(text: &str) -> Vec<String> {
        terms(text).into_iter().map(|t| format!("{}{}", t.word, if t.prefix { "*" } else { "" })).collect()
    }

    #[test]
    fn words_are_split_at_whitespace_and_the_last_long_one_is_a_prefix() {
        assert_eq!(shown("  Raspberry   pi\tcase "), ["Raspberry", "pi", "case*"]);
        assert_eq!(shown("sd pi"), ["sd", "pi"]);
        assert_eq!(shown("card* pi"), ["card*", "pi"]);
    }

    #[test]
    fn punctuation_alone_is_no_word_and_operators_are_plain_words() {
        assert_eq!(shown("\" * - ^ ( ) : NEAR( AND OR NOT"), ["NEAR(", "AND", "OR", "NOT*"]);
        assert!(terms("\"\"\" *** --- ^^^").is_empty());
        assert!(terms("").is_empty());
    }

    #[test]
    fn a_long_query_keeps_its_first_words_and_characters() {
        assert_eq!(terms(&"word ".repeat(100)).len(), MAX_TERMS);
        let long = "x".repeat(10_000);
        assert_eq!(terms(&long)[0].word.chars().count(), MAX_QUERY_CHARS);
    }

    #[test]
    fn control_characters_separate_words() {
        assert_eq!(shown("a\0b\u{1}cde"), ["a", "b", "cde*"]);
    }
}
