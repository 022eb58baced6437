//! The ActivityPub objects of local topics and posts, and the context
//! every local document carries: what the `/ap/` routes serve and what
//! outbound activities embed (`outbound`). Shaped as Lemmy reads them
//! (docs/FEDERATION.md cites the files).

use serde_json::{Value, json};

use super::ids;
use crate::model::{Post, Timestamp, Topic};

/// ActivityStreams' public address.
pub const PUBLIC: &str = "https://www.w3.org/ns/activitystreams#Public";

pub fn context() -> Value {
    json!(["https://www.w3.org/ns/activitystreams", "https://w3id.org/security/v1"])
}

/// RFC 3339, as `published` and `updated` carry times.
pub fn rfc3339(t: Timestamp) -> String {
    time::OffsetDateTime::from_unix_timestamp(t.0)
        .ok()
        .and_then(|d| d.format(&time::format_description::well_known::Rfc3339).ok())
        .unwrap_or_default()
}

/// A topic's `Page` (Lemmy: crates/apub/objects/src/protocol/page.rs):
/// `name` the title, `content` its HTML, `audience` its community.
pub fn page_json(base: &str, t: &Topic) -> Value {
    let community = ids::community(base, &t.community);
    let mut page = json!({
        "@context": context(),
        "id": ids::topic(base, t.id),
        "type": "Page",
        "attributedTo": t.author.as_deref().map(|a| ids::user(base, a)),
        "to": [community, PUBLIC],
        "cc": [],
        "audience": community,
        "name": t.title,
        "content": t.body_html.clone().unwrap_or_default(),
        "mediaType": "text/html",
        "source": {"content": t.body.clone().unwrap_or_default(), "mediaType": "text/markdown"},
        "url": format!("{base}/t/{}", t.id),
        "sensitive": false,
        "commentsEnabled": !t.locked,
        "published": rfc3339(t.created_at),
    });
    if let Some(link) = &t.url {
        page["attachment"] = json!([{"type": "Link", "href": link}]);
    }
    if let Some(edited) = t.edited_at {
        page["updated"] = json!(rfc3339(edited));
    }
    page
}

/// A post's `Note`: `inReplyTo` its parent post, or its topic's `Page`.
pub fn note_json(base: &str, t: &Topic, p: &Post) -> Value {
    let community = ids::community(base, &t.community);
    let parent = match p.parent_id {
        Some(parent) => format!("{}/p/{parent}", ids::topic(base, t.id)),
        None => ids::topic(base, t.id),
    };
    let mut note = json!({
        "@context": context(),
        "id": format!("{}/p/{}", ids::topic(base, t.id), p.id),
        "type": "Note",
        "attributedTo": p.author.as_deref().map(|a| ids::user(base, a)),
        "to": [PUBLIC],
        "cc": [community],
        "audience": community,
        "inReplyTo": parent,
        "content": p.body_html,
        "mediaType": "text/html",
        "source": {"content": p.body, "mediaType": "text/markdown"},
        "published": rfc3339(p.created_at),
    });
    if let Some(edited) = p.edited_at {
        note["updated"] = json!(rfc3339(edited));
    }
    note
}
