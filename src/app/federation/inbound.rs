//! What a remote user's activities do to a local community (FEP-1b12):
//! `Create` or `Update` of a `Page` (a topic) or a `Note` (a reply),
//! `Delete` of either or of the actor itself (its account), `Like` and
//! `Dislike` (votes), `Lock` of a topic, and their `Undo`.
//! The remote actor acts as a user of its own (`name@host`, made the
//! first time: `Store::remote_user`) through the same operations as the
//! API and the pages (`topics`, `posts`, `votes`), so every rule holds:
//! bans, locks, limits, Markdown sanitizing, authorship. Each activity
//! accepted is announced by the community's Group to its followers
//! (`outbound::forward`). Activities about objects that are not ours are
//! answered 202 and dropped, as are repeats of a `Create`.

use axum::http::StatusCode;
use serde_json::Value;

use super::known::Place;
use super::{Federation, content, outbound};
use crate::app::limits::ClientIp;
use crate::app::moderation::{self, ModRequest};
use crate::app::posts::{self, Reply};
use crate::app::topics::{self, Submission};
use crate::app::{AppError, AppResult, AppState, votes};
use crate::model::federation::{LocalObject, RemoteActor, same_host};
use crate::model::{
    Body, Community, CommunityName, ContentFate, Link, MAX_REASON_CHARS, ModAction, Title, User, VoteTarget,
};
use crate::store::{Store, StoreError};

/// Who sent an activity, and to which inbox.
pub struct Sender<'a> {
    /// The verified signer, the activity's actor.
    pub actor: &'a RemoteActor,
    /// The user it acts as here, when the inbox read it with the actor;
    /// `None`: read (or made) when it acts.
    pub user: Option<&'a User>,
    /// What the rate limits count it as: `ClientIp::FEDERATED` from the
    /// inbox (the server has its own limit; each remote user, theirs).
    pub ip: ClientIp,
    /// The local community whose own inbox it came to, if it did.
    pub inbox: Option<&'a str>,
    /// The remote community whose Group announced it (`join::announced`),
    /// for an activity that came so; it may act in that community only.
    pub via: Option<&'a Community>,
}

fn bad(message: impl Into<String>) -> AppError {
    AppError::BadRequest("bad_activity", message.into())
}

fn not_author(message: impl Into<String>) -> AppError {
    AppError::Rejected(StatusCode::FORBIDDEN, "not_author", message.into())
}

/// An id, whether given as a string or as an object carrying `id` (the
/// first of an array).
pub fn id_of(v: Option<&Value>) -> Option<&str> {
    match v? {
        Value::String(s) => Some(s),
        Value::Object(o) => o.get("id").and_then(Value::as_str),
        Value::Array(a) => id_of(a.first()),
        _ => None,
    }
}

/// Acts on `activity` (its `type` is `kind`), then has the Group announce
/// it when it was taken. Kinds not handled here are dropped, logged.
pub async fn act<S: Store>(
    state: &AppState<S>,
    fed: &Federation,
    sender: &Sender<'_>,
    kind: &str,
    activity: &Value,
) -> AppResult<()> {
    let taken = match kind {
        "Create" => create(state, fed, sender, activity).await?,
        "Update" => update(state, fed, sender, activity).await?,
        "Delete" => delete(state, fed, sender, activity).await?,
        "Like" => vote(state, fed, sender, activity, 1).await?,
        "Dislike" => vote(state, fed, sender, activity, -1).await?,
        "Lock" => lock(state, fed, sender, activity, true).await?,
        other => {
            tracing::info!(kind = other, actor = %sender.actor.id, "activity not handled; dropped");
            None
        }
    };
    // A remote community's Group announces for itself; ours do.
    if let Some(place) = taken.filter(|c| !c.is_remote()) {
        outbound::forward(state, fed, &place, activity, sender.actor).await?;
    }
    Ok(())
}

/// `Undo` of the sender's own `Like` or `Dislike` (given inline): the
/// vote withdrawn; of its `Lock`: the topic unlocked; of its `Delete`:
/// a removal undone (`restore`). The Undo is announced when taken; the
/// Undo of anything else is dropped, logged (a `Follow`'s is the inbox's).
pub async fn undo<S: Store>(state: &AppState<S>, fed: &Federation, sender: &Sender<'_>, undo: &Value) -> AppResult<()> {
    let undone = undo.get("object").ok_or_else(|| bad("the Undo has no object"))?;
    let kind = undone.get("type").and_then(Value::as_str);
    if !matches!(kind, Some("Like" | "Dislike" | "Lock" | "Delete")) {
        tracing::info!(?kind, actor = %sender.actor.id, "undo of an activity not handled; dropped");
        return Ok(());
    }
    if id_of(undone.get("actor")) != Some(sender.actor.id.as_str()) {
        return Err(bad("an Undo may undo only its actor's own activity"));
    }
    let taken = match kind {
        Some("Lock") => lock(state, fed, sender, undone, false).await?,
        Some("Delete") => restore(state, fed, sender, undone).await?,
        _ => vote(state, fed, sender, undone, 0).await?,
    };
    if let Some(place) = taken.filter(|c| !c.is_remote()) {
        outbound::forward(state, fed, &place, undo, sender.actor).await?;
    }
    Ok(())
}

/// The user the sender acts as.
async fn acting_user<S: Store>(state: &AppState<S>, sender: &Sender<'_>) -> AppResult<User> {
    match sender.user {
        Some(user) => Ok(user.clone()),
        None => actor_user(state, sender.actor).await,
    }
}

/// The user the remote actor acts as, made the first time.
async fn actor_user<S: Store>(state: &AppState<S>, actor: &RemoteActor) -> AppResult<User> {
    let name = actor.user_name();
    match state.store.remote_user(actor.id.clone(), name.clone()).await {
        // Its first two activities at once: the other made the user.
        Err(StoreError::Conflict(_)) => Ok(state.store.remote_user(actor.id.clone(), name).await?),
        other => Ok(other?),
    }
}

/// The topic or post an id names: one of ours (`/ap/t/T`,
/// `/ap/t/T/p/P`), or a remote object one became. `None`: not ours.
async fn local_object<S: Store>(state: &AppState<S>, id: &str) -> AppResult<Option<LocalObject>> {
    let prefix = format!("{}/ap/t/", state.web.public_url());
    let Some(rest) = id.strip_prefix(&prefix) else { return Ok(state.store.remote_object(id.to_owned()).await?) };
    let number = |s: &str| s.parse::<i64>().ok();
    Ok(match rest.split_once("/p/") {
        Some((t, p)) => number(t).zip(number(p)).map(|(t, p)| LocalObject { target: VoteTarget::Post(p), topic_id: t }),
        None => number(rest).map(|t| LocalObject { target: VoteTarget::Topic(t), topic_id: t }),
    })
}

/// Whether the sender may act in `community`: a local one when sent to
/// us directly; a remote one only through its own Group's `Announce`.
fn admitted(sender: &Sender<'_>, community: &Place) -> bool {
    match sender.via {
        Some(via) => via.id == community.id,
        None => !community.is_remote(),
    }
}

/// The community of `topic_id`, when the sender may act there; `None`
/// (dropped, logged) when not.
async fn community_for<S: Store>(
    state: &AppState<S>,
    fed: &Federation,
    sender: &Sender<'_>,
    topic_id: i64,
) -> AppResult<Option<Place>> {
    let community = fed.known.topic_community(topic_id, state.store.topic_community(topic_id)).await?;
    if admitted(sender, &community) {
        return Ok(Some(community));
    }
    tracing::info!(actor = %sender.actor.id, community = %community.name,
        "an activity about a community it may not act in here; dropped");
    Ok(None)
}

/// The topic or post the `object` of `activity` (a `what`) names, with its
/// community, when it is ours and the sender may act there; `None`
/// (dropped, logged) when not.
async fn acted_on<S: Store>(
    state: &AppState<S>,
    fed: &Federation,
    sender: &Sender<'_>,
    activity: &Value,
    what: &str,
) -> AppResult<Option<(LocalObject, Place)>> {
    let id = id_of(activity.get("object")).ok_or_else(|| bad(format!("the {what} has no object")))?;
    let Some(local) = local_object(state, id).await? else {
        tracing::debug!(%id, what, "an activity about an object not ours; dropped");
        return Ok(None);
    };
    Ok(community_for(state, fed, sender, local.topic_id).await?.map(|community| (local, community)))
}

/// The embedded object of a `Create` or `Update`, with its id, checked to
/// be the sender's own: on its host and attributed to it.
fn own_object<'a>(activity: &'a Value, sender: &Sender<'_>) -> AppResult<(&'a Value, String)> {
    let object = activity.get("object").filter(|o| o.is_object()).ok_or_else(|| bad("the object must be embedded"))?;
    let id = object.get("id").and_then(Value::as_str).ok_or_else(|| bad("the object has no id"))?;
    if !same_host(id, &sender.actor.id) {
        return Err(not_author(format!("the object {id} is not on its actor's host")));
    }
    if id_of(object.get("attributedTo")) != Some(sender.actor.id.as_str()) {
        return Err(not_author(format!("the object {id} is not attributed to its actor")));
    }
    Ok((object, id.to_owned()))
}

/// The local community a `Page` is addressed to: named by `audience`,
/// `to` or `cc` (of the object or the activity), else the community
/// whose inbox it came to.
fn addressed(state_base: &str, activity: &Value, object: &Value, inbox: Option<&str>) -> Option<String> {
    let prefix = format!("{state_base}/ap/c/");
    let mut named = Vec::new();
    for doc in [object, activity] {
        for field in ["audience", "to", "cc"] {
            match doc.get(field) {
                Some(Value::String(s)) => named.push(s.as_str()),
                Some(Value::Array(a)) => named.extend(a.iter().filter_map(Value::as_str)),
                _ => {}
            }
        }
    }
    named
        .into_iter()
        .filter_map(|id| id.strip_prefix(&prefix))
        .find(|name| !name.is_empty() && !name.contains(['/', '?', '#']))
        .map(str::to_owned)
        .or_else(|| inbox.map(str::to_owned))
}

/// A topic made of a remote `Page` (or a `Note` replying to nothing),
/// titled by `title`, with `text` (`content::markdown_of`) its body, in
/// the local community it is addressed to (or the
/// remote one whose Group announced it); `None` (dropped, logged) when
/// there is none it may post in.
async fn new_topic<'t, S: Store>(
    state: &AppState<S>,
    sender: &Sender<'_>,
    activity: &Value,
    object: &Value,
    id: String,
    title: impl FnOnce() -> AppResult<&'t str>,
    text: Option<String>,
) -> AppResult<Option<AppResult<Place>>> {
    let community = match sender.via {
        Some(via) => Place::from(via),
        None => {
            let Some(name) = addressed(&state.web.public_url(), activity, object, sender.inbox) else {
                tracing::info!(%id, "a topic for no local community; dropped");
                return Ok(None);
            };
            Place::from(&state.store.community(name).await?)
        }
    };
    if !admitted(sender, &community) {
        tracing::info!(%id, "a topic for a community it may not post in here; dropped");
        return Ok(None);
    }
    let submission = Submission {
        community: CommunityName::named(&community.name)?,
        title: Title::parse(title()?)?,
        body: text.map(|b| Body::parse(&b)).transpose()?,
        url: content::link_of(object).map(|u| Link::parse(&u)).transpose()?,
        remote_id: Some(id),
    };
    let user = acting_user(state, sender).await?;
    Ok(Some(topics::create_topic(state, user, sender.ip, submission).await.map(|_| community)))
}

/// `Create` of a `Page` into a local community, of a `Note` replying to
/// one of our topics or posts, or of one replying to nothing (a topic);
/// the community taken into.
async fn create<S: Store>(
    state: &AppState<S>,
    fed: &Federation,
    sender: &Sender<'_>,
    activity: &Value,
) -> AppResult<Option<Place>> {
    let (object, id) = own_object(activity, sender)?;
    if state.store.remote_object(id.clone()).await?.is_some() {
        tracing::debug!(%id, "a repeated Create; nothing to do");
        return Ok(None);
    }
    let kind = object.get("type").and_then(Value::as_str).unwrap_or("");
    let made = match kind {
        "Page" | "Article" => {
            let title = || object.get("name").and_then(Value::as_str).ok_or_else(|| bad("the Page has no name"));
            let text = content::markdown_of(object);
            let Some(made) = new_topic(state, sender, activity, object, id, title, text).await? else {
                return Ok(None);
            };
            made
        }
        // A Note that replies to nothing (a Mastodon post naming the
        // Group) starts a topic, titled by its first line.
        "Note" if object.get("inReplyTo").is_none_or(Value::is_null) => {
            let text = content::markdown_of(object).ok_or_else(|| bad("the Note has no content"))?;
            let first_line = content::title_of_note(&text);
            let title = || first_line.as_deref().ok_or_else(|| bad("the Note has no text to title a topic with"));
            let text = Some(text);
            let Some(made) = new_topic(state, sender, activity, object, id, title, text).await? else {
                return Ok(None);
            };
            made
        }
        "Note" => {
            let Some(parent) = id_of(object.get("inReplyTo")) else {
                return Err(bad("the Note's inReplyTo has no id"));
            };
            let Some(parent) = local_object(state, parent).await? else {
                tracing::info!(%id, "a Note replying to something not ours; dropped");
                return Ok(None);
            };
            let Some(community) = community_for(state, fed, sender, parent.topic_id).await? else { return Ok(None) };
            let body = content::markdown_of(object).ok_or_else(|| bad("the Note has no content"))?;
            let reply = Reply {
                topic_id: parent.topic_id,
                parent_id: match parent.target {
                    VoteTarget::Topic(_) => None,
                    VoteTarget::Post(p) => Some(p),
                },
                body: Body::parse(&body)?,
                remote_id: Some(id),
            };
            let user = acting_user(state, sender).await?;
            posts::create_post(state, user, sender.ip, reply).await.map(|_| community)
        }
        other => {
            tracing::info!(%id, kind = other, "a Create of an object not handled; dropped");
            return Ok(None);
        }
    };
    match made {
        Ok(community) => Ok(Some(community)),
        // The same Create twice at once: the other one made it.
        Err(AppError::Conflict(_)) => Ok(None),
        Err(e) => Err(e),
    }
}

/// `Update` of a `Page` or `Note` that came from the sender: its body
/// replaced, and a `Page`'s title (Lemmy's authors may edit theirs).
async fn update<S: Store>(
    state: &AppState<S>,
    fed: &Federation,
    sender: &Sender<'_>,
    activity: &Value,
) -> AppResult<Option<Place>> {
    let (object, id) = own_object(activity, sender)?;
    let Some(local) = state.store.remote_object(id.clone()).await? else {
        tracing::info!(%id, "an Update of an object never received; dropped");
        return Ok(None);
    };
    let Some(community) = community_for(state, fed, sender, local.topic_id).await? else { return Ok(None) };
    let user = acting_user(state, sender).await?;
    let body = content::markdown_of(object);
    match local.target {
        VoteTarget::Topic(t) => {
            let body = body.map(|b| Body::parse(&b)).transpose()?;
            let title = object.get("name").and_then(Value::as_str).map(Title::parse).transpose()?;
            topics::edit_topic(state, user, sender.ip, t, body, title).await?;
        }
        VoteTarget::Post(p) => {
            let body = Body::parse(&body.ok_or_else(|| bad("the Note has no content"))?)?;
            posts::edit_post(state, user, sender.ip, p, body).await?;
        }
    }
    Ok(Some(community))
}

/// An actor's `Delete` of itself: its account at home is gone, so its user
/// here goes as a local account does (`deletion::purge`: the name stays
/// reserved, its tokens and renderings go), with its topics and posts kept
/// under no name, or erased when the activity says `removeData` (as Lemmy
/// sends an account deleted with its content). Its server tells the
/// others itself, so nothing is announced. Taken only signed by the actor
/// itself: a Group's `Announce` of it is dropped (a Group does not speak
/// for an account), as is the Delete of an actor that never acted here.
async fn delete_actor<S: Store>(
    state: &AppState<S>,
    sender: &Sender<'_>,
    activity: &Value,
) -> AppResult<Option<Place>> {
    // The inbox reads the signer's live user with its actor (`known`).
    let (Some(user), None) = (sender.user, sender.via) else {
        tracing::info!(actor = %sender.actor.id, "a Delete of an actor with no user here, or announced; dropped");
        return Ok(None);
    };
    let fate = match activity.get("removeData").and_then(Value::as_bool) {
        Some(true) => ContentFate::Remove,
        _ => ContentFate::KeepAnonymous,
    };
    crate::app::deletion::purge(state, user.id, fate).await?;
    Ok(None)
}

/// `Delete` of a `Page` or `Note` (or its `Tombstone`) by its author.
async fn delete<S: Store>(
    state: &AppState<S>,
    fed: &Federation,
    sender: &Sender<'_>,
    activity: &Value,
) -> AppResult<Option<Place>> {
    let id = id_of(activity.get("object")).ok_or_else(|| bad("the Delete has no object"))?;
    if id == sender.actor.id {
        return delete_actor(state, sender, activity).await;
    }
    if !same_host(id, &sender.actor.id) {
        return Err(not_author(format!("the object {id} is not on its actor's host")));
    }
    let Some(local) = state.store.remote_object(id.to_owned()).await? else {
        tracing::info!(%id, "a Delete of an object never received; dropped");
        return Ok(None);
    };
    let Some(community) = community_for(state, fed, sender, local.topic_id).await? else { return Ok(None) };
    let user = acting_user(state, sender).await?;
    let deleted = match local.target {
        VoteTarget::Topic(t) => topics::delete_topic(state, user, t).await,
        VoteTarget::Post(p) => posts::delete_post(state, user, p).await.map(|_| ()),
    };
    match deleted {
        Ok(()) => Ok(Some(community)),
        // Not its author's: a remote community's Group announcing a
        // removal by one of its moderators (or by itself). The Group
        // moderates its community here, as its user.
        Err(e) if e.status() == StatusCode::FORBIDDEN && sender.via.is_some() => {
            remove_for_group(state, &community, local.target, activity).await?;
            Ok(Some(community))
        }
        Err(e) => Err(e),
    }
}

/// A removal that a remote community's Group announced: made by the
/// Group's user, the community's moderator here, with the activity's
/// `summary` (Lemmy's reason) as the reason in the moderation log.
async fn remove_for_group<S: Store>(
    state: &AppState<S>,
    community: &Place,
    target: VoteTarget,
    activity: &Value,
) -> AppResult<()> {
    let moderator = group_user(state, community, "only its author or its community's Group removes it").await?;
    let action = match target {
        VoteTarget::Topic(t) => ModAction::RemoveTopic(t),
        VoteTarget::Post(p) => ModAction::RemovePost(p),
    };
    let reason = activity
        .get("summary")
        .and_then(Value::as_str)
        .map(content::html_to_text)
        .map(|r| r.split_whitespace().collect::<Vec<_>>().join(" ").chars().take(MAX_REASON_CHARS).collect::<String>())
        .filter(|r| !r.is_empty());
    moderation::act(state, moderator, action, ModRequest { reason }).await
}

/// The user a remote community's Group acts as here: its moderator
/// (`refusal` when the community has no Group: a local one).
async fn group_user<S: Store>(state: &AppState<S>, community: &Place, refusal: &str) -> AppResult<User> {
    let Some(group) = state.store.community_actor(community.name.clone()).await? else {
        return Err(not_author(refusal));
    };
    actor_user(state, &group).await
}

/// `Lock` of a topic (`locked`), or its `Undo`. Lemmy's moderators lock
/// a post with their own `Lock`, which the Group announces: in a remote
/// community followed here it is taken as the Group's, whose user
/// moderates that community here (as a removal, `remove_for_group`).
/// Sent to us directly, the sender acts as itself, and the moderation
/// rules refuse it in a local community (no remote user moderates one).
async fn lock<S: Store>(
    state: &AppState<S>,
    fed: &Federation,
    sender: &Sender<'_>,
    activity: &Value,
    locked: bool,
) -> AppResult<Option<Place>> {
    let Some((local, community)) = acted_on(state, fed, sender, activity, "Lock").await? else { return Ok(None) };
    let VoteTarget::Topic(topic) = local.target else { return Err(bad("only a Page is locked")) };
    let moderator = match sender.via {
        Some(_) => group_user(state, &community, "only its community's Group locks it").await?,
        None => acting_user(state, sender).await?,
    };
    let action = if locked { ModAction::LockTopic(topic) } else { ModAction::UnlockTopic(topic) };
    moderation::act(state, moderator, action, ModRequest { reason: None }).await?;
    Ok(Some(community))
}

/// The `Undo` of a `Delete`, as Lemmy's moderators restore what they
/// removed, announced by the Group of a remote community followed here:
/// the topic or post restored here by the Group's user, as its removal
/// was (`remove_for_group`). Sent to us directly it is dropped: no remote
/// user moderates here, and an author's own deletion erased the text,
/// so there is nothing to bring back.
async fn restore<S: Store>(
    state: &AppState<S>,
    fed: &Federation,
    sender: &Sender<'_>,
    delete: &Value,
) -> AppResult<Option<Place>> {
    let Some((local, community)) = acted_on(state, fed, sender, delete, "Delete").await? else { return Ok(None) };
    if sender.via.is_none() {
        tracing::info!(actor = %sender.actor.id, "an Undo of a Delete sent to us directly; dropped");
        return Ok(None);
    }
    let moderator = group_user(state, &community, "only its community's Group restores it").await?;
    let action = match local.target {
        VoteTarget::Topic(t) => ModAction::RestoreTopic(t),
        VoteTarget::Post(p) => ModAction::RestorePost(p),
    };
    moderation::act(state, moderator, action, ModRequest { reason: None }).await?;
    Ok(Some(community))
}

/// A vote (`value` 1 `Like`, -1 `Dislike`, 0 its `Undo`) on one of our
/// topics or posts, or one that came over federation.
async fn vote<S: Store>(
    state: &AppState<S>,
    fed: &Federation,
    sender: &Sender<'_>,
    activity: &Value,
    value: i8,
) -> AppResult<Option<Place>> {
    let Some((local, community)) = acted_on(state, fed, sender, activity, "vote").await? else { return Ok(None) };
    let user = acting_user(state, sender).await?;
    votes::cast_vote(state, user, sender.ip, local.target, value).await?;
    Ok(Some(community))
}
