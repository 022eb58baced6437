//! The documents of local actors and objects, shaped as Lemmy and PieFed
//! read them (docs/FEDERATION.md cites the files): the site's
//! `Application`, a `Group` per community (with its outbox, followers and
//! moderators collections), a `Person` per user, a `Page` per topic and a
//! `Note` per post. A browser asking an id is sent to its page.

use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::{ap_json, federation, to_page, wants_page};
use crate::app::federation::objects::{PUBLIC, context, group_id, in_reply_to, note_json, page_json, rfc3339};
use crate::app::federation::{ids, keys};
use crate::app::{AppError, AppResult, AppState};
use crate::model::VoteTarget;
use crate::model::federation::{ActorKind, is_remote_name};
use crate::model::{Community, Topic};
use crate::store::{ListTopics, Store, TopicSort};

fn public_key(actor: &str, pem: &str) -> Value {
    json!({"id": ids::key(actor), "owner": actor, "publicKeyPem": pem})
}

pub async fn site<S: Store>(State(state): State<AppState<S>>) -> AppResult<Response> {
    federation(&state)?;
    let base = state.web.public_url();
    let id = ids::site(&base);
    let key = keys::key_for(&state, ActorKind::Site, 0).await?;
    Ok(ap_json(json!({
        "@context": context(),
        "id": id,
        "type": "Application",
        "preferredUsername": crate::model::federation::host_of(&base).unwrap_or("pith"),
        "inbox": ids::shared_inbox(&base),
        "endpoints": {"sharedInbox": ids::shared_inbox(&base)},
        "publicKey": public_key(&id, &key.public_pem),
    })))
}

/// A community's `Group` (Lemmy: crates/apub/apub/assets/lemmy/objects/group.json).
pub fn group_json(base: &str, c: &Community, public_pem: &str) -> Value {
    let id = ids::community(base, &c.name);
    json!({
        "@context": context(),
        "id": id,
        "type": "Group",
        "preferredUsername": c.name,
        "name": c.title,
        "summary": crate::markdown::render(&c.description),
        "source": {"content": c.description, "mediaType": "text/markdown"},
        "mediaType": "text/html",
        "sensitive": false,
        "url": format!("{base}/c/{}", c.name),
        "inbox": format!("{id}/inbox"),
        "outbox": format!("{id}/outbox"),
        "followers": format!("{id}/followers"),
        "attributedTo": format!("{id}/moderators"),
        "moderators": format!("{id}/moderators"),
        "postingRestrictedToMods": false,
        "endpoints": {"sharedInbox": ids::shared_inbox(base)},
        "publicKey": public_key(&id, public_pem),
        "published": rfc3339(c.created_at),
    })
}

/// A community of this server: one followed from another server
/// (`name@host`) is an actor at its home, never one of ours.
pub async fn local_community<S: Store>(state: &AppState<S>, name: String) -> AppResult<Community> {
    if is_remote_name(&name) {
        return Err(AppError::not_found("community"));
    }
    Ok(state.store.community(name).await?)
}

pub async fn group<S: Store>(
    State(state): State<AppState<S>>,
    Path(name): Path<String>,
    headers: HeaderMap,
) -> AppResult<Response> {
    federation(&state)?;
    let c = local_community(&state, name).await?;
    if wants_page(&headers) {
        return Ok(to_page(&format!("/c/{}", c.name)));
    }
    let key = keys::key_for(&state, ActorKind::Community, c.id).await?;
    Ok(ap_json(group_json(&state.web.public_url(), &c, &key.public_pem)))
}

/// The community's newest topics, each as the Group's `Announce` of the
/// `Create` of its `Page` (`outbox_item`).
pub async fn outbox<S: Store>(State(state): State<AppState<S>>, Path(name): Path<String>) -> AppResult<Response> {
    federation(&state)?;
    let base = state.web.public_url();
    let c = local_community(&state, name).await?;
    let q = ListTopics {
        community: Some(c.name.clone()),
        sort: TopicSort::New,
        after: None,
        limit: 20,
        hide_blocked_by: None,
    };
    let page = state.store.list_topics(q).await?;
    let items: Vec<Value> = page
        .topics
        .iter()
        // A remote user's topics are theirs to publish, at their home.
        .filter(|t| !t.deleted && !t.removed && t.author.as_deref().is_some_and(|a| !is_remote_name(a)))
        .map(|t| outbox_item(&base, t))
        .collect();
    let id = format!("{}/outbox", ids::community(&base, &c.name));
    Ok(ap_json(json!({
        "@context": context(), "id": id, "type": "OrderedCollection",
        "totalItems": items.len(), "orderedItems": items,
    })))
}

/// One outbox entry as Lemmy reads a Group's outbox: the Group's
/// `Announce` of the author's `Create` (Lemmy's
/// crates/apub/src/protocol/collections/group_outbox.rs takes only
/// `Announce`s, and a `Create` without `cc` fails to parse; one bad entry
/// and it takes none of them). The ids are fixed, so a second fetch
/// repeats the same activities.
fn outbox_item(base: &str, t: &Topic) -> Value {
    let group = ids::community(base, &t.community);
    let topic = ids::topic(base, t.id);
    let mut page = page_json(base, t, &group);
    if let Some(o) = page.as_object_mut() {
        o.remove("@context");
    }
    let create = json!({"id": format!("{topic}/create"), "type": "Create", "actor": page["attributedTo"],
                        "to": [PUBLIC], "cc": [group], "audience": group, "object": page});
    json!({"id": format!("{topic}/announce"), "type": "Announce", "actor": group, "to": [PUBLIC],
           "cc": [format!("{group}/followers")], "audience": group, "object": create})
}

/// Followers are counted, not listed (as Lemmy does).
pub async fn followers<S: Store>(State(state): State<AppState<S>>, Path(name): Path<String>) -> AppResult<Response> {
    federation(&state)?;
    let c = local_community(&state, name).await?;
    let n = state.store.followers(c.id).await?.len();
    let id = format!("{}/followers", ids::community(&state.web.public_url(), &c.name));
    Ok(ap_json(json!({"@context": context(), "id": id, "type": "Collection", "totalItems": n, "items": []})))
}

pub async fn moderators<S: Store>(State(state): State<AppState<S>>, Path(name): Path<String>) -> AppResult<Response> {
    federation(&state)?;
    let base = state.web.public_url();
    let c = local_community(&state, name).await?;
    let mods: Vec<String> =
        state.store.moderators(c.name.clone()).await?.iter().map(|u| ids::user(&base, &u.name)).collect();
    let id = format!("{}/moderators", ids::community(&base, &c.name));
    Ok(ap_json(json!({
        "@context": context(), "id": id, "type": "OrderedCollection",
        "totalItems": mods.len(), "orderedItems": mods,
    })))
}

pub async fn person<S: Store>(
    State(state): State<AppState<S>>,
    Path(name): Path<String>,
    headers: HeaderMap,
) -> AppResult<Response> {
    federation(&state)?;
    let user = state.store.profile(name).await?.user;
    // A remote user is an actor at its home, never one of ours.
    if is_remote_name(&user.name) {
        return Err(AppError::not_found("user"));
    }
    if wants_page(&headers) {
        return Ok(to_page(&format!("/u/{}", user.name)));
    }
    let base = state.web.public_url();
    let key = keys::key_for(&state, ActorKind::User, user.id).await?;
    let id = ids::user(&base, &user.name);
    Ok(ap_json(json!({
        "@context": context(),
        "id": id,
        "type": "Person",
        "preferredUsername": user.name,
        "url": format!("{base}/u/{}", user.name),
        "inbox": format!("{id}/inbox"),
        "outbox": format!("{id}/outbox"),
        "endpoints": {"sharedInbox": ids::shared_inbox(&base)},
        "publicKey": public_key(&id, &key.public_pem),
        "published": rfc3339(user.created_at),
    })))
}

pub async fn page<S: Store>(
    State(state): State<AppState<S>>,
    Path(id): Path<i64>,
    headers: HeaderMap,
) -> AppResult<Response> {
    federation(&state)?;
    let t = state.store.topic(id).await?;
    if t.deleted || t.removed || t.author.is_none() {
        return Err(AppError::not_found("topic"));
    }
    if let Some(home) = state.store.remote_object_id(VoteTarget::Topic(t.id)).await? {
        return Ok(to_home(&home));
    }
    if wants_page(&headers) {
        return Ok(to_page(&format!("/t/{}", t.id)));
    }
    let base = state.web.public_url();
    let group = group_id(&state, &base, &t.community).await?;
    Ok(ap_json(page_json(&base, &t, &group)))
}

/// A remote-made object's id here sends the asker to its home, as Lemmy
/// does (crates/apub/src/http/mod.rs, `redirect_remote_object`).
fn to_home(id: &str) -> Response {
    let mut res = axum::response::Redirect::permanent(id).into_response();
    res.headers_mut().insert(axum::http::header::VARY, axum::http::HeaderValue::from_static("Accept"));
    res
}

pub async fn note<S: Store>(
    State(state): State<AppState<S>>,
    Path((topic, post)): Path<(i64, i64)>,
) -> AppResult<Response> {
    federation(&state)?;
    let (t, p, _) = state.store.topic_post(topic, post, 0).await?;
    if t.deleted || t.removed || p.deleted || p.removed || p.author.is_none() {
        return Err(AppError::not_found("post"));
    }
    if let Some(home) = state.store.remote_object_id(VoteTarget::Post(p.id)).await? {
        return Ok(to_home(&home));
    }
    let base = state.web.public_url();
    let parent = in_reply_to(&state, &base, &t, &p).await?;
    let group = group_id(&state, &base, &t.community).await?;
    Ok(ap_json(note_json(&base, &t, &p, &parent, &group)))
}
