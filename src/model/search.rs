//! What a full-text search finds (the query side is `store::search`).

use serde::Serialize;

use super::{Post, Topic};

/// One search result. `snippet` is HTML: a passage of the matching text,
/// escaped, with each match in `<mark>` (nothing else is markup).
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum SearchHit {
    /// The title or body of a topic matched; the snippet is from its body
    /// (empty when it has none).
    Topic { topic: Topic, snippet: String },
    /// A reply matched; its topic's title and community say where it is.
    Post { post: Post, topic_title: String, community: String, snippet: String },
}
