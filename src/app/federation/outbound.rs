//! What a local community's remote followers are sent. From `apply`, the
//! one place a committed `Change` takes effect: each local topic or post,
//! edit, deletion and vote becomes an activity of its author or voter
//! (`Create`, `Update`, `Like`, `Dislike`, `Undo`) or of the Group
//! (`Delete`), wrapped in the Group's `Announce` (FEP-1b12, as Lemmy's
//! crates/apub/apub/assets/lemmy/activities/community/announce_create_page.json)
//! and queued once per follower inbox (a shared inbox once per server).
//! A remote user's activities are not rebuilt here: `forward` announces
//! each as it came (`inbound`), with its own actor, and `send` leaves out
//! the Changes they made, but for a moderator's removal of remote
//! content, which the Group announces as its `Delete`.

use serde_json::{Value, json};

use super::known::Place;
use super::objects::{PUBLIC, in_reply_to, note_json, object_id, page_json};
use super::{Federation, follow::activity_id, ids, queue};
use crate::app::{AppResult, AppState};
use crate::model::change::{Acted, How, Voter};
use crate::model::federation::{ActorKind, NewDelivery, RemoteActor, inboxes, is_remote_name, same_host};
use crate::model::{Change, Community, Topic, VoteTarget};
use crate::store::Store;

/// What a change sends, by the ids it names.
#[derive(Debug, Clone)]
enum Out {
    /// A topic created (`true`) or changed: `Create`, `Update`, or who
    /// deleted, removed, locked or unlocked it (`Change`'s `Acted`).
    Topic(i64, bool, Option<Acted>),
    /// A post of a topic created (`true`) or edited.
    Post(i64, i64, bool),
    /// A post gone from view; who deleted or removed it.
    PostGone(i64, i64, Option<Acted>),
    /// A removed post a moderator restored.
    PostRestored(i64, i64, Acted),
    /// A local user's vote on a topic (post `None`) or post.
    Vote(i64, Option<i64>, Voter),
}

fn remote_author(author: &Option<String>) -> bool {
    author.as_deref().is_some_and(is_remote_name)
}

/// Sends what `change` means to the followers, in a task of its own,
/// when federation is on; a failure is logged (the write stands).
pub fn send<S: Store>(state: &AppState<S>, change: &Change) {
    let Some(fed) = state.federation.get().cloned() else { return };
    let out = match change {
        Change::TopicCreated { topic } if !remote_author(&topic.author) => Out::Topic(topic.id, true, None),
        Change::TopicChanged { topic_id, by } => Out::Topic(*topic_id, false, by.clone()),
        Change::PostCreated { post, .. } if !remote_author(&post.author) => Out::Post(post.topic_id, post.id, true),
        Change::PostEdited { post, by: None } if !remote_author(&post.author) => {
            Out::Post(post.topic_id, post.id, false)
        }
        Change::PostEdited { post, by: Some(by) } => Out::PostRestored(post.topic_id, post.id, by.clone()),
        Change::PostRemoved { topic_id, post_id, by } => Out::PostGone(*topic_id, *post_id, by.clone()),
        Change::Scored { topic_id, post_id, by: Some(voter), .. } if !is_remote_name(&voter.name) => {
            Out::Vote(*topic_id, *post_id, voter.clone())
        }
        _ => return,
    };
    let state = state.clone();
    tokio::spawn(async move {
        if let Err(e) = announce(&state, &fed, out.clone()).await {
            tracing::warn!(error = %e, ?out, "federation: cannot queue an outbound activity");
        }
    });
}

async fn announce<S: Store>(state: &AppState<S>, fed: &Federation, out: Out) -> AppResult<()> {
    let base = state.web.public_url();
    let topic_id = match out {
        Out::Topic(t, ..) | Out::Post(t, ..) | Out::PostGone(t, ..) | Out::PostRestored(t, ..) | Out::Vote(t, ..) => t,
    };
    let topic = state.store.topic(topic_id).await?;
    let community = state.store.community(topic.community.clone()).await?;
    if community.is_remote() {
        return to_remote_group(state, fed, &base, &topic, &community, out).await;
    }
    let followers = fed.known.followers(community.id, state.store.followers(community.id)).await?;
    if followers.is_empty() {
        return Ok(());
    }
    let group = ids::community(&base, &community.name);
    let Some(activity) = activity(state, &base, &topic, &group, out).await? else { return Ok(()) };
    queue_announce(state, fed, &base, &Place::from(&community), activity, followers.iter()).await
}

/// A local user's topic, reply, edit or vote in a community on another
/// server (phase 2): sent to its Group, signed by the user, for the Group
/// to announce (this server gets it back among the followers, and drops
/// it: `join::announced`). A deletion of something written here is sent
/// as the `Delete` of whoever deleted it (its author; an administrator's
/// the Group may refuse); a local moderator's removal stays here: only
/// the Group's own moderators remove for its followers.
async fn to_remote_group<S: Store>(
    state: &AppState<S>,
    fed: &Federation,
    base: &str,
    topic: &Topic,
    community: &Community,
    out: Out,
) -> AppResult<()> {
    let Some(group) = state.store.community_actor(community.name.clone()).await? else { return Ok(()) };
    let hidden = topic.deleted || topic.removed || topic.author.is_none();
    let ours =
        |target| async move { Ok::<_, crate::app::AppError>(state.store.remote_object_id(target).await?.is_none()) };
    match &out {
        // A deletion of something written here: its deleter's `Delete`
        // (`activity`, `by_person`).
        Out::PostGone(_, p, Some(by)) if by.how == How::Deleted && ours(VoteTarget::Post(*p)).await? => {}
        Out::Topic(_, false, Some(by)) if by.how == How::Deleted && ours(VoteTarget::Topic(topic.id)).await? => {}
        Out::PostGone(..) | Out::PostRestored(..) | Out::Topic(_, _, Some(_)) => return Ok(()),
        Out::Topic(..) if hidden => return Ok(()),
        Out::Topic(..) if !ours(VoteTarget::Topic(topic.id)).await? => return Ok(()),
        _ => {}
    }
    let Some(mut activity) = activity(state, base, topic, &group.id, out).await? else { return Ok(()) };
    let user_prefix = format!("{base}/ap/u/");
    let Some(name) = activity["actor"].as_str().and_then(|a| a.strip_prefix(&user_prefix)).map(str::to_owned) else {
        return Ok(());
    };
    let Some((user, _)) = state.store.user_credentials(name).await? else { return Ok(()) };
    activity["@context"] = super::objects::context();
    queue::enqueue(state, fed, vec![super::join::to_group(base, user.id, &user.name, &group, &activity)]).await
}

/// Announces `activity` (a remote user's, as received and taken by
/// `inbound`) to the community's followers, but for those on the server
/// it came from, which has it already.
pub async fn forward<S: Store>(
    state: &AppState<S>,
    fed: &Federation,
    community: &Place,
    activity: &Value,
    origin: &RemoteActor,
) -> AppResult<()> {
    let followers = fed.known.followers(community.id, state.store.followers(community.id)).await?;
    let followers: Vec<&RemoteActor> = followers.iter().filter(|f| !same_host(&f.id, &origin.id)).collect();
    if followers.is_empty() {
        return Ok(());
    }
    let mut inner = activity.clone();
    if let Some(o) = inner.as_object_mut() {
        o.remove("@context");
    }
    queue_announce(state, fed, &state.web.public_url(), community, inner, followers).await
}

/// The Group's `Announce` of `activity`, queued once per inbox.
async fn queue_announce<'a, S: Store>(
    state: &AppState<S>,
    fed: &Federation,
    base: &str,
    community: &Place,
    activity: Value,
    followers: impl IntoIterator<Item = &'a RemoteActor>,
) -> AppResult<()> {
    let group = ids::community(base, &community.name);
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
    let deliveries = inboxes(followers)
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

/// The activity `out` stands for, by its author, or by whoever deleted,
/// removed, locked or unlocked it (`by_person`; the Group's `Delete` when
/// a node did not say who); `None` when there is nothing to say (a topic
/// changed while hidden, a post that is not there, a remote user's own
/// write).
async fn activity<S: Store>(
    state: &AppState<S>,
    base: &str,
    topic: &Topic,
    group: &str,
    out: Out,
) -> AppResult<Option<Value>> {
    let wrap = |kind: &str, object: Value| {
        let actor = object["attributedTo"].clone();
        let mut object = object;
        if let Some(o) = object.as_object_mut() {
            o.remove("@context");
        }
        let id = activity_id(object["id"].as_str().unwrap_or(group), &kind.to_ascii_lowercase());
        json!({"id": id, "type": kind, "actor": actor, "to": [PUBLIC], "cc": [group],
               "audience": group, "object": object})
    };
    let delete = |object_id: String| {
        json!({"id": activity_id(group, "delete"), "type": "Delete", "actor": group, "to": [PUBLIC],
               "cc": [group], "audience": group, "object": {"id": object_id, "type": "Tombstone"}})
    };
    let hidden = topic.deleted || topic.removed || topic.author.is_none();
    let remote_topic = match out {
        Out::Topic(..) => state.store.remote_object_id(VoteTarget::Topic(topic.id)).await?,
        _ => None,
    };
    let topic_id = remote_topic.clone().unwrap_or_else(|| ids::topic(base, topic.id));
    Ok(match out {
        // A remote user's own deletion was forwarded as it came.
        Out::Topic(_, _, Some(by)) | Out::PostGone(_, _, Some(by)) if is_remote_name(&by.name) => None,
        Out::Topic(_, _, Some(by)) if matches!(by.how, How::Locked | How::Unlocked | How::Restored) => {
            (!hidden).then(|| by_person(base, group, &by, topic_id))
        }
        Out::Topic(_, _, Some(by)) if hidden => Some(by_person(base, group, &by, topic_id)),
        // A remote user's topic: only a moderator's removal is the Group's
        // to send; its author's own writes were forwarded as they came.
        Out::Topic(..) if remote_topic.is_some() => remote_topic.filter(|_| topic.removed).map(delete),
        Out::Topic(..) if hidden => Some(delete(ids::topic(base, topic.id))),
        Out::Topic(_, created, _) => {
            Some(wrap(if created { "Create" } else { "Update" }, page_json(base, topic, group)))
        }
        Out::Post(..) if hidden => None,
        Out::Post(_, post, created) => {
            let (topic, post, _) = state.store.topic_post(topic.id, post, 0).await?;
            if post.deleted || post.removed || post.author.is_none() {
                return Ok(None);
            }
            let parent = in_reply_to(state, base, &topic, &post).await?;
            Some(wrap(if created { "Create" } else { "Update" }, note_json(base, &topic, &post, &parent, group)))
        }
        Out::PostGone(_, post, Some(by)) | Out::PostRestored(_, post, by) => {
            let object = object_id(state, base, VoteTarget::Post(post), topic.id).await?;
            Some(by_person(base, group, &by, object))
        }
        Out::PostGone(_, post, None) => match state.store.remote_object_id(VoteTarget::Post(post)).await? {
            Some(remote) => {
                let (_, post, _) = state.store.topic_post(topic.id, post, 0).await?;
                (post.removed && !post.deleted).then(|| delete(remote))
            }
            None => Some(delete(ids::note(base, topic.id, post))),
        },
        Out::Vote(_, post, voter) => {
            let target = post.map_or(VoteTarget::Topic(topic.id), VoteTarget::Post);
            let object = object_id(state, base, target, topic.id).await?;
            Some(vote(base, group, &voter, object))
        }
    })
}

/// What `by` did to `object` as Lemmy takes it
/// (crates/apub/assets/lemmy/activities/deletion, community/lock_page.json):
/// a deletion as the deleter's `Delete`; a moderator's removal as the
/// moderator's `Delete` with a `summary` (the reason), which is what
/// tells Lemmy it is a removal, and a restore as the `Undo` of that
/// `Delete`; a lock as their `Lock`, and an unlock as its `Undo`.
fn by_person(base: &str, group: &str, by: &Acted, object: String) -> Value {
    let actor = ids::user(base, &by.name);
    let make = |kind: &str, object: Value| {
        json!({"id": activity_id(&actor, &kind.to_ascii_lowercase()), "type": kind, "actor": actor,
               "to": [PUBLIC], "cc": [group], "audience": group, "object": object})
    };
    let removal = || {
        let mut delete = make("Delete", json!(object));
        delete["summary"] = json!(by.reason.clone().unwrap_or_else(|| "Removed by a moderator".into()));
        delete
    };
    match by.how {
        How::Deleted => make("Delete", json!(object)),
        How::Removed => removal(),
        How::Restored => make("Undo", removal()),
        How::Locked => make("Lock", json!(object)),
        How::Unlocked => make("Undo", make("Lock", json!(object))),
    }
}

/// A local user's vote as Lemmy sends one (crates/apub/activities/src/voting):
/// `Like` or `Dislike` of the object's id, and a withdrawn vote as the
/// `Undo` of a `Like` (Lemmy undoes whichever vote the actor cast).
fn vote(base: &str, group: &str, voter: &Voter, object: String) -> Value {
    let actor = ids::user(base, &voter.name);
    let kind = if voter.value < 0 { "Dislike" } else { "Like" };
    let cast = json!({"id": activity_id(&actor, &kind.to_ascii_lowercase()), "type": kind, "actor": actor,
                      "object": object, "to": [PUBLIC], "cc": [group], "audience": group});
    if voter.value != 0 {
        return cast;
    }
    json!({"id": activity_id(&actor, "undo"), "type": "Undo", "actor": actor, "object": cast,
           "to": [PUBLIC], "cc": [group], "audience": group})
}
