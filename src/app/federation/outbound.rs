//! Local writes in a local community, sent to its remote followers: from
//! `apply`, the one place a committed `Change` takes effect, each new
//! topic or post, edit and deletion becomes an activity of its author
//! (`Create`, `Update`) or of the Group (`Delete`), wrapped in the Group's
//! `Announce` (FEP-1b12, as Lemmy's
//! crates/apub/apub/assets/lemmy/activities/community/announce_create_page.json)
//! and queued once per follower inbox (a shared inbox once per server).
//! Votes are not sent yet: a `Change::Scored` does not say who voted.

use serde_json::{Value, json};

use super::objects::{PUBLIC, note_json, page_json};
use super::{Federation, follow::activity_id, ids, queue};
use crate::app::{AppResult, AppState};
use crate::model::federation::{ActorKind, NewDelivery, inboxes};
use crate::model::{Change, Topic};
use crate::store::Store;

/// What a change sends, by the ids it names.
#[derive(Debug, Clone, Copy)]
enum Out {
    /// A topic created (`true`) or changed: `Create`, `Update` or, once
    /// deleted or removed, `Delete`.
    Topic(i64, bool),
    /// A post of a topic created (`true`) or edited.
    Post(i64, i64, bool),
    /// A post gone from view.
    PostGone(i64, i64),
}

/// Sends what `change` means to the followers, in a task of its own,
/// when federation is on; a failure is logged (the write stands).
pub fn send<S: Store>(state: &AppState<S>, change: &Change) {
    let Some(fed) = state.federation.get().cloned() else { return };
    let out = match change {
        Change::TopicCreated { topic } => Out::Topic(topic.id, true),
        Change::TopicChanged { topic_id } => Out::Topic(*topic_id, false),
        Change::PostCreated { post, .. } => Out::Post(post.topic_id, post.id, true),
        Change::PostEdited { post } => Out::Post(post.topic_id, post.id, false),
        Change::PostRemoved { topic_id, post_id } => Out::PostGone(*topic_id, *post_id),
        _ => return,
    };
    let state = state.clone();
    tokio::spawn(async move {
        if let Err(e) = announce(&state, &fed, out).await {
            tracing::warn!(error = %e, ?out, "federation: cannot queue an outbound activity");
        }
    });
}

async fn announce<S: Store>(state: &AppState<S>, fed: &Federation, out: Out) -> AppResult<()> {
    let base = state.web.public_url();
    let topic_id = match out {
        Out::Topic(t, _) | Out::Post(t, _, _) | Out::PostGone(t, _) => t,
    };
    let topic = state.store.topic(topic_id).await?;
    let community = state.store.community(topic.community.clone()).await?;
    let followers = state.store.followers(community.id).await?;
    if followers.is_empty() {
        return Ok(());
    }
    let Some(activity) = activity(state, &base, &topic, out).await? else { return Ok(()) };
    let group = ids::community(&base, &community.name);
    let announce = json!({
        "@context": super::objects::context(),
        "id": activity_id(&group, "announce"),
        "type": "Announce",
        "actor": group,
        "to": [PUBLIC],
        "cc": [format!("{group}/followers")],
        "audience": group,
        "object": activity,
    })
    .to_string();
    let deliveries = inboxes(&followers)
        .into_iter()
        .map(|inbox| NewDelivery {
            inbox,
            body: announce.clone(),
            signer: ActorKind::Community,
            signer_id: community.id,
            key_id: ids::key(&group),
        })
        .collect();
    queue::enqueue(state, fed, deliveries).await
}

/// The activity `out` stands for, by its author (a deletion by the
/// Group); `None` when there is nothing to say (a topic changed while
/// hidden, a post that is not there).
async fn activity<S: Store>(state: &AppState<S>, base: &str, topic: &Topic, out: Out) -> AppResult<Option<Value>> {
    let group = ids::community(base, &topic.community);
    let wrap = |kind: &str, object: Value| {
        let actor = object["attributedTo"].clone();
        let mut object = object;
        if let Some(o) = object.as_object_mut() {
            o.remove("@context");
        }
        let id = activity_id(object["id"].as_str().unwrap_or(&group), &kind.to_ascii_lowercase());
        json!({"id": id, "type": kind, "actor": actor, "to": [PUBLIC], "cc": [group],
               "audience": group, "object": object})
    };
    let delete = |object_id: String| {
        json!({"id": activity_id(&group, "delete"), "type": "Delete", "actor": group, "to": [PUBLIC],
               "cc": [group], "audience": group, "object": {"id": object_id, "type": "Tombstone"}})
    };
    let hidden = topic.deleted || topic.removed || topic.author.is_none();
    Ok(match out {
        Out::Topic(_, _) if hidden => Some(delete(ids::topic(base, topic.id))),
        Out::Topic(_, created) => Some(wrap(if created { "Create" } else { "Update" }, page_json(base, topic))),
        Out::Post(..) if hidden => None,
        Out::Post(_, post, created) => {
            let (topic, post, _) = state.store.topic_post(topic.id, post, 0).await?;
            if post.deleted || post.removed || post.author.is_none() {
                return Ok(None);
            }
            Some(wrap(if created { "Create" } else { "Update" }, note_json(base, &topic, &post)))
        }
        Out::PostGone(_, post) => Some(delete(format!("{}/p/{post}", ids::topic(base, topic.id)))),
    })
}
