//! Full-text search with FTS5 (migration 0003): BM25 ranking over
//! external-content indexes that hold only rows the public may read, and
//! snippets cut by FTS5 with their matches marked.
//!
//! A search is two steps in one read transaction: rank the matching ids
//! (FTS5 scores every match, so this step reads no text), then load the
//! page's items and cut their snippets, which needs each one's text.

use rusqlite::{Connection, OptionalExtension, params};

use super::conn::map_err;
use super::reads;
use crate::model::SearchHit;
use crate::store::html::{MATCH_END, MATCH_START, snippet_html};
use crate::store::search::{MAX_OFFSET, Term, terms};
use crate::store::{Search, SearchKind, SearchPage, StoreError, StoreResult};

/// Tokens in a snippet (FTS5 allows up to 64).
const SNIPPET_TOKENS: i64 = 24;

/// The FTS5 query for `terms`: each word a quoted string (a `"` doubled,
/// the only character special inside one), so nothing the user typed is
/// read as FTS5 syntax: no operator, column filter, `NEAR`, `^` or
/// parenthesis. A prefix word gets `*` after its closing quote. Words
/// side by side must all match. `None` without words.
pub fn fts5_query(terms: &[Term]) -> Option<String> {
    if terms.is_empty() {
        return None;
    }
    let quoted: Vec<String> = terms
        .iter()
        .map(|t| format!("\"{}\"{}", t.word.replace('"', "\"\""), if t.prefix { "*" } else { "" }))
        .collect();
    Some(quoted.join(" "))
}

const RANK_TOPICS: &str = "SELECT t.id FROM topics_fts JOIN topics t ON t.id = topics_fts.rowid \
     WHERE topics_fts MATCH ?1 AND t.deleted = 0 AND t.removed = 0 AND (?2 IS NULL OR t.community_id = ?2) \
     ORDER BY topics_fts.rank, t.id DESC LIMIT ?3 OFFSET ?4";

// Deleted and removed posts are not indexed; they are checked again here
// all the same, with the topic, whose removal hides its replies.
const RANK_POSTS: &str = "SELECT p.id FROM posts_fts JOIN posts p ON p.id = posts_fts.rowid \
     JOIN topics t ON t.id = p.topic_id \
     WHERE posts_fts MATCH ?1 AND p.deleted = 0 AND p.removed = 0 AND t.removed = 0 \
     AND (?2 IS NULL OR t.community_id = ?2) \
     ORDER BY posts_fts.rank, p.id DESC LIMIT ?3 OFFSET ?4";

const TOPIC_SNIPPET: &str =
    "SELECT snippet(topics_fts, 1, ?3, ?4, '…', ?5) FROM topics_fts WHERE topics_fts MATCH ?1 AND rowid = ?2";
const POST_SNIPPET: &str =
    "SELECT snippet(posts_fts, 0, ?3, ?4, '…', ?5) FROM posts_fts WHERE posts_fts MATCH ?1 AND rowid = ?2";

pub fn search(conn: &Connection, q: &Search) -> StoreResult<SearchPage> {
    // An unknown community is a 404 whatever the query.
    let community = q.community.as_deref().map(|name| reads::community_id(conn, name)).transpose()?;
    let Some(matching) = fts5_query(&terms(&q.text)) else {
        return Ok(SearchPage { hits: Vec::new(), next: None });
    };
    let (limit, offset) = (q.limit.max(1), q.offset.min(MAX_OFFSET));
    let rank = match q.kind {
        SearchKind::Topics => RANK_TOPICS,
        SearchKind::Posts => RANK_POSTS,
    };
    let mut ids: Vec<i64> = conn
        .prepare_cached(rank)
        .and_then(|mut s| {
            s.query_map(params![matching, community, (limit + 1) as i64, offset as i64], |r| r.get(0))?.collect()
        })
        .map_err(map_err)?;
    let more = ids.len() > limit;
    ids.truncate(limit);
    let hits = ids.into_iter().map(|id| hit(conn, q.kind, &matching, id)).collect::<StoreResult<Vec<_>>>()?;
    let next = Some(offset + limit).filter(|&n| more && n <= MAX_OFFSET);
    Ok(SearchPage { hits, next })
}

/// The item `id` that `matching` found, with its snippet.
fn hit(conn: &Connection, kind: SearchKind, matching: &str, id: i64) -> StoreResult<SearchHit> {
    match kind {
        SearchKind::Topics => {
            let topic = reads::topic(conn, id)?;
            Ok(SearchHit::Topic { topic, snippet: snippet(conn, TOPIC_SNIPPET, matching, id)? })
        }
        SearchKind::Posts => {
            let sql = format!(
                "SELECT {}, t.title, c.name {} JOIN topics t ON t.id = p.topic_id \
                 JOIN communities c ON c.id = t.community_id WHERE p.id = ?1",
                reads::POST_COLS,
                reads::POST_FROM
            );
            let width = reads::POST_COLS.split(',').count();
            let (post, topic_title, community) = conn
                .prepare_cached(&sql)
                .and_then(|mut s| {
                    s.query_row([id], |r| Ok((reads::post_row(r)?, r.get(width)?, r.get(width + 1)?))).optional()
                })
                .map_err(map_err)?
                .ok_or(StoreError::NotFound("post"))?;
            let snippet = snippet(conn, POST_SNIPPET, matching, id)?;
            Ok(SearchHit::Post { post, topic_title, community, snippet })
        }
    }
}

/// The passage of `id`'s text around what `matching` found, as HTML.
fn snippet(conn: &Connection, sql: &str, matching: &str, id: i64) -> StoreResult<String> {
    let raw: Option<String> = conn
        .prepare_cached(sql)
        .and_then(|mut s| {
            let (start, end) = (MATCH_START.to_string(), MATCH_END.to_string());
            s.query_row(params![matching, id, start, end, SNIPPET_TOKENS], |r| r.get(0)).optional()
        })
        .map_err(map_err)?
        .flatten();
    Ok(raw.as_deref().map(snippet_html).unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_word_is_quoted_and_quotes_are_doubled() {
        let q = fts5_query(&terms("say \"hi\" NEAR(a b) col:x rasp")).expect("words");
        assert_eq!(q, r#""say" """hi""" "NEAR(a" "b)" "col:x" "rasp"*"#);
        assert_eq!(fts5_query(&terms("* - ^")), None);
    }

    /// FTS5 itself accepts every query made from hostile input.
    #[test]
    fn fts5_parses_every_query_made_from_hostile_input() {
        let conn = Connection::open_in_memory().expect("open");
        conn.execute_batch(
            "CREATE VIRTUAL TABLE f USING fts5(body, tokenize = 'porter unicode61 remove_diacritics 2');
             INSERT INTO f (body) VALUES ('hello world');",
        )
        .expect("schema");
        let long = "x\"(*".repeat(3000);
        for input in [
            "\"",
            "*",
            "NEAR(",
            "AND OR NOT",
            "-",
            "^",
            "a:b",
            "(hello",
            "hello)",
            "\"\"*",
            "日本語 テキスト",
            "é\u{301}",
            "\u{200b}",
            "hello*world",
            "{a b}",
            "+hello -world",
            long.as_str(),
        ] {
            if let Some(q) = fts5_query(&terms(input)) {
                let n: Result<i64, _> = conn.query_row("SELECT count(*) FROM f WHERE f MATCH ?1", [&q], |r| r.get(0));
                assert!(n.is_ok(), "{input:?} -> {q:?}: {n:?}");
            }
        }
    }
}
