//! Full-text search the PostgreSQL way (migration 0003): generated
//! tsvector columns with GIN indexes, `ts_rank` with a title's words
//! weighing five times a body's, and snippets cut by `ts_headline` with
//! their matches marked, escaped the same way as SQLite's.

use deadpool_postgres::GenericClient;

use super::conn::{all, col, opt};
use super::reads;
use crate::model::SearchHit;
use crate::store::html::{MATCH_END, MATCH_START, snippet_html};
use crate::store::search::{MAX_OFFSET, Term, terms};
use crate::store::{Search, SearchKind, SearchPage, StoreError, StoreResult};

/// The `to_tsquery` text for `terms`: each word cut into its runs of
/// letters and digits, joined by `&` (every word must match), a prefix
/// word's last run marked `:*`. Only letters and digits reach the parser,
/// so nothing the user typed is read as tsquery syntax (`!`, `|`, `(`,
/// `<->`, quotes, weights). `None` without words.
pub fn tsquery(terms: &[Term]) -> Option<String> {
    let mut parts: Vec<String> = Vec::new();
    for t in terms {
        let runs: Vec<&str> = t.word.split(|c: char| !c.is_alphanumeric()).filter(|r| !r.is_empty()).collect();
        for (i, run) in runs.iter().enumerate() {
            let prefix = t.prefix && i + 1 == runs.len();
            parts.push(format!("{run}{}", if prefix { ":*" } else { "" }));
        }
    }
    (!parts.is_empty()).then(|| parts.join(" & "))
}

/// Title (A) five times body (B), as SQLite's bm25(5.0, 1.0); ts_rank's
/// weights are listed {D, C, B, A}.
const RANK_TOPICS: &str = "SELECT t.id FROM topics t, to_tsquery('pith_english', $1) q \
     WHERE t.fts @@ q AND NOT t.deleted AND NOT t.removed AND ($2::bigint IS NULL OR t.community_id = $2) \
     ORDER BY ts_rank('{0, 0, 0.2, 1.0}', t.fts, q) DESC, t.id DESC LIMIT $3 OFFSET $4";

// Deleted and removed posts have no vector; they are checked again here
// all the same, with the topic, whose removal hides its replies.
const RANK_POSTS: &str = "SELECT p.id FROM posts p JOIN topics t ON t.id = p.topic_id, to_tsquery('pith_english', $1) q \
     WHERE p.fts @@ q AND NOT p.deleted AND NOT p.removed AND NOT t.removed \
     AND ($2::bigint IS NULL OR t.community_id = $2) \
     ORDER BY ts_rank(p.fts, q) DESC, p.id DESC LIMIT $3 OFFSET $4";

const TOPIC_SNIPPET: &str = "SELECT ts_headline('pith_english', coalesce(body, ''), to_tsquery('pith_english', $1), $3) FROM topics WHERE id = $2";
const POST_SNIPPET: &str =
    "SELECT ts_headline('pith_english', body, to_tsquery('pith_english', $1), $3) FROM posts WHERE id = $2";

/// About as long as SQLite's 24-token snippets.
fn headline_options() -> String {
    format!("StartSel={MATCH_START}, StopSel={MATCH_END}, MaxWords=24, MinWords=12, ShortWord=2")
}

pub async fn search(c: &impl GenericClient, q: &Search) -> StoreResult<SearchPage> {
    // An unknown community is a 404 whatever the query.
    let community = match q.community.as_deref() {
        Some(name) => Some(reads::community_id(c, name).await?),
        None => None,
    };
    let Some(matching) = tsquery(&terms(&q.text)) else {
        return Ok(SearchPage { hits: Vec::new(), next: None });
    };
    let (limit, offset) = (q.limit.max(1), q.offset.min(MAX_OFFSET));
    let rank = match q.kind {
        SearchKind::Topics => RANK_TOPICS,
        SearchKind::Posts => RANK_POSTS,
    };
    let (fetch, skip) = ((limit + 1) as i64, offset as i64);
    let mut ids: Vec<i64> = all(c, rank, &[&matching, &community, &fetch, &skip])
        .await?
        .iter()
        .map(|r| col(r, 0))
        .collect::<StoreResult<_>>()?;
    let more = ids.len() > limit;
    ids.truncate(limit);
    let mut hits = Vec::with_capacity(ids.len());
    for id in ids {
        hits.push(hit(c, q.kind, &matching, id).await?);
    }
    let next = Some(offset + limit).filter(|&n| more && n <= MAX_OFFSET);
    Ok(SearchPage { hits, next })
}

/// The item `id` that `matching` found, with its snippet.
async fn hit(c: &impl GenericClient, kind: SearchKind, matching: &str, id: i64) -> StoreResult<SearchHit> {
    match kind {
        SearchKind::Topics => {
            let topic = reads::topic(c, id).await?;
            Ok(SearchHit::Topic { topic, snippet: snippet(c, TOPIC_SNIPPET, matching, id).await? })
        }
        SearchKind::Posts => {
            let sql = format!(
                "SELECT {}, t.title, c.name {} JOIN topics t ON t.id = p.topic_id \
                 JOIN communities c ON c.id = t.community_id WHERE p.id = $1",
                reads::POST_COLS,
                reads::POST_FROM
            );
            let Some(row) = opt(c, &sql, &[&id]).await? else {
                return Err(StoreError::NotFound("post"));
            };
            let width = reads::POST_WIDTH;
            let (post, topic_title, community) = (reads::post_row(&row)?, col(&row, width)?, col(&row, width + 1)?);
            let snippet = snippet(c, POST_SNIPPET, matching, id).await?;
            Ok(SearchHit::Post { post, topic_title, community, snippet })
        }
    }
}

/// The passage of `id`'s text around what `matching` found, as HTML: the
/// text is escaped by `snippet_html`, only the markers become `<mark>`.
async fn snippet(c: &impl GenericClient, sql: &str, matching: &str, id: i64) -> StoreResult<String> {
    let raw: Option<String> = match opt(c, sql, &[&matching, &id, &headline_options()]).await? {
        Some(r) => col(&r, 0)?,
        None => None,
    };
    Ok(raw.as_deref().map(snippet_html).unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_letters_and_digits_reach_the_tsquery_parser() {
        let q = tsquery(&terms("say \"hi\" !x|y <-> col:x rasp")).expect("words");
        assert_eq!(q, "say & hi & x & y & col & x & rasp:*");
        assert_eq!(tsquery(&terms("* - ^ ! | & ( ) :")), None);
        assert_eq!(tsquery(&terms("café\u{301} 日本語")), Some("café & 日本語:*".into()));
    }
}
