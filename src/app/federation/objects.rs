//! The ActivityPub objects of local topics and posts, and the context
//! every local document carries: what the `/ap/` routes serve and what
//! outbound activities embed (`outbound`). Shaped as Lemmy reads them
//! (docs/FEDERATION.md cites the files).

use serde_json::{Value, json};

use super::ids;
use crate::app::{AppResult, AppState};
use crate::model::federation::is_remote_name;
use crate::model::{Post, Timestamp, Topic, VoteTarget};
use crate::store::Store;

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

/// The id of the `Group` a community is: ours, or for a community on
/// another server (`name@host`), its own.
pub async fn group_id<S: Store>(state: &AppState<S>, base: &str, community: &str) -> AppResult<String> {
    if is_remote_name(community)
        && let Some(group) = state.store.community_actor(community.to_owned()).await?
    {
        return Ok(group.id);
    }
    Ok(ids::community(base, community))
}

/// A topic's `Page` (Lemmy: crates/apub/objects/src/protocol/page.rs):
/// `name` the title, `content` its HTML, `audience` its community's
/// Group (`group_id`).
pub fn page_json(base: &str, t: &Topic, group: &str) -> Value {
    let community = group;
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

/// The id a topic or post (of topic `topic_id`) has on the Fediverse:
/// the remote object's for one that came over federation, else ours.
pub async fn object_id<S: Store>(
    state: &AppState<S>,
    base: &str,
    target: VoteTarget,
    topic_id: i64,
) -> AppResult<String> {
    if let Some(id) = state.store.remote_object_id(target).await? {
        return Ok(id);
    }
    Ok(match target {
        VoteTarget::Topic(t) => ids::topic(base, t),
        VoteTarget::Post(p) => ids::note(base, topic_id, p),
    })
}

/// What a post replies to: its parent post's `Note`, else its topic's
/// `Page` (`object_id`).
pub async fn in_reply_to<S: Store>(state: &AppState<S>, base: &str, t: &Topic, p: &Post) -> AppResult<String> {
    let target = p.parent_id.map_or(VoteTarget::Topic(t.id), VoteTarget::Post);
    object_id(state, base, target, t.id).await
}

/// A post's `Note`: `inReplyTo` its parent post, or its topic's `Page`
/// (`in_reply_to`).
pub fn note_json(base: &str, t: &Topic, p: &Post, in_reply_to: &str, group: &str) -> Value {
    let community = group;
    let parent = in_reply_to;
    let mut note = json!({
        "@context": context(),
        "id": ids::note(base, t.id, p.id),
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
