//! A remote actor follows a local community: the follow is stored and the
//! community's `Group` answers with a signed `Accept` delivered to the
//! follower's inbox through the delivery queue (`queue`); `Undo` of the
//! follow ends it.

use rand::RngCore;
use serde_json::{Value, json};

use super::{Federation, ids};
use crate::app::apply::apply;
use crate::app::{AppResult, AppState};
use crate::model::federation::{ActorKind, NewDelivery, RemoteActor};
use crate::model::{Change, Community};
use crate::store::Store;

/// A new activity id under the actor: random, so ids never repeat.
pub fn activity_id(actor: &str, kind: &str) -> String {
    let mut bytes = [0u8; 12];
    rand::rng().fill_bytes(&mut bytes);
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    format!("{actor}/activities/{kind}/{hex}")
}

/// `follower` follows `community` by `follow` (the activity as received,
/// already checked to be a Follow of this community by this actor):
/// stored, and accepted. Returns the Accept sent.
pub async fn follow<S: Store>(
    state: &AppState<S>,
    fed: &Federation,
    community: &Community,
    follower: &RemoteActor,
    follow: &Value,
) -> AppResult<Value> {
    let follow_id = follow.get("id").and_then(Value::as_str).unwrap_or_default().to_owned();
    state.store.add_follower(community.id, follower.id.clone(), follow_id).await?;
    apply(state, Change::Followers { community_id: community.id });
    let actor = ids::community(&state.web.public_url(), &community.name);
    // The Follow is embedded as Lemmy embeds it, without its own context
    // (crates/apub/apub/assets/lemmy/activities/following/accept.json).
    let mut object = follow.clone();
    if let Some(o) = object.as_object_mut() {
        o.remove("@context");
    }
    let accept = json!({
        "@context": "https://www.w3.org/ns/activitystreams",
        "id": activity_id(&actor, "accept"),
        "type": "Accept",
        "actor": actor,
        "to": [follower.id],
        "object": object,
    });
    let delivery = NewDelivery {
        inbox: follower.inbox.clone(),
        body: accept.to_string(),
        signer: ActorKind::Community,
        signer_id: community.id,
        key_id: ids::key(&actor),
    };
    super::queue::enqueue(state, fed, vec![delivery]).await?;
    Ok(accept)
}

/// `follower` stops following `community`; whether it was following.
pub async fn unfollow<S: Store>(state: &AppState<S>, community: &Community, follower: &RemoteActor) -> AppResult<bool> {
    let was = state.store.remove_follower(community.id, follower.id.clone()).await?;
    if was {
        apply(state, Change::Followers { community_id: community.id });
    }
    Ok(was)
}
