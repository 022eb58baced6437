//! Phase 2: local users join communities on other servers. A community
//! found by `!name@host` (WebFinger, then its `Group`) becomes a community
//! of its own here, named `name@host` (`resolve`); a user's `Follow` goes
//! to its Group from the user's `Person` (`follow`, `unfollow`), and the
//! Group's `Accept` or `Reject` settles it (`answered`). What the Group
//! then `Announce`s (FEP-1b12: its members' `Create`, `Update`, `Delete`,
//! votes and their `Undo`) is taken through `inbound`, the same
//! operations as the API, with the Group vouching for its community's
//! content (`announced`). What local users write there goes back to the
//! Group (`outbound`). Remote media stays a link: nothing is downloaded.

use serde_json::{Value, json};

use super::inbound::{self, Sender, id_of};
use super::{Federation, actors, content, follow::activity_id, ids, queue};
use crate::app::limits::{Action, ClientIp, Who};
use crate::app::{AppError, AppResult, AppState};
use crate::model::federation::{ActorKind, NewDelivery, RemoteActor, host_of, remote_user_name};
use crate::model::{Community, User};
use crate::store::{Store, StoreError};

fn bad(code: &'static str, message: impl Into<String>) -> AppError {
    AppError::BadRequest(code, message.into())
}

/// What a user asked for: `!name@host`, `name@host`, or the Group's URL.
#[derive(Debug, PartialEq, Eq)]
enum Wanted {
    Handle { name: String, host: String },
    Url(String),
}

fn wanted(query: &str) -> AppResult<Wanted> {
    let q = query.trim();
    if q.starts_with("https://") || q.starts_with("http://") {
        return match url::Url::parse(q) {
            Ok(u) if u.host_str().is_some() && q.len() <= 2000 => Ok(Wanted::Url(q.to_owned())),
            _ => Err(bad("bad_community", format!("{q:?} is not a URL"))),
        };
    }
    let handle = q.trim_start_matches('!');
    let bad_handle = || bad("bad_community", format!("give a community as !name@host, not {q:?}"));
    let (name, host) = handle.split_once('@').ok_or_else(bad_handle)?;
    let name_ok = (1..=100).contains(&name.len())
        && name.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'));
    // The host as `parse_host` takes it, with a port kept for loopback tests.
    let (bare, port) = match host.rsplit_once(':') {
        Some((h, p)) if p.parse::<u16>().is_ok() => (h, Some(p)),
        _ => (host, None),
    };
    let bare = crate::model::instances::parse_host(bare).map_err(|_| bad_handle())?;
    if !name_ok {
        return Err(bad_handle());
    }
    let host = match port {
        Some(p) => format!("{bare}:{p}"),
        None => bare,
    };
    Ok(Wanted::Handle { name: name.to_owned(), host })
}

/// Whether `query` is a community's handle (`!name@host`, `name@host`):
/// what the search page offers to look up on its server.
pub fn looks_like_handle(query: &str) -> bool {
    matches!(wanted(query), Ok(Wanted::Handle { .. }))
}

/// The community `query` names: one of ours, or one on another server
/// found and stored here (fetched again each time, so its title and
/// description stay current). 400 for a query that names none, 404 for
/// one its server does not know, 502 when that server cannot be asked.
pub async fn resolve<S: Store>(
    state: &AppState<S>,
    fed: &Federation,
    user: &User,
    ip: ClientIp,
    query: &str,
) -> AppResult<Community> {
    let wanted = wanted(query)?;
    let base = state.web.public_url();
    let own_host = host_of(&base).unwrap_or("").to_ascii_lowercase();
    if let Wanted::Handle { name, host } = &wanted
        && *host == own_host
    {
        return Ok(state.store.community(name.to_ascii_lowercase()).await?);
    }
    // Each look-up may fetch twice from another server: counted as a search.
    state.limits.check(Action::Search, ip, Who::User(user.id))?;
    let signer = actors::site_signer(state).await?;
    let unreachable = |url: &str, e: &dyn std::fmt::Display| {
        AppError::Rejected(
            axum::http::StatusCode::BAD_GATEWAY,
            "remote_unreachable",
            format!("{url} could not be read: {e}"),
        )
    };
    let candidates = match wanted {
        Wanted::Url(url) => vec![url],
        Wanted::Handle { name, host } => {
            let mut last = None;
            let mut found = None;
            // https first; plain http only where tests on loopback allow it.
            for scheme in ["https", "http"] {
                if scheme == "http" && !fed.allow_private {
                    break;
                }
                let url = format!("{scheme}://{host}/.well-known/webfinger?resource=acct:{name}@{host}");
                super::instances::admit_url(state, &url).await?;
                match fed.client.get_json(&url, &signer).await {
                    Ok(jrd) => {
                        found = Some(jrd);
                        break;
                    }
                    Err(super::client::FetchError::Status(404)) => {
                        return Err(AppError::NotFound(format!("community !{name}@{host}")));
                    }
                    Err(e) => last = Some(unreachable(&url, &e)),
                }
            }
            let jrd = match (found, last) {
                (Some(jrd), _) => jrd,
                (None, Some(e)) => return Err(e),
                (None, None) => return Err(AppError::NotFound(format!("community !{name}@{host}"))),
            };
            self_links(&jrd)
        }
    };
    for url in candidates.iter().take(3) {
        if url.starts_with(&format!("{base}/")) {
            continue;
        }
        super::instances::admit_url(state, url).await?;
        let doc = fed.client.get_json(url, &signer).await.map_err(|e| unreachable(url, &e))?;
        if doc.get("type").and_then(Value::as_str) != Some("Group") {
            continue;
        }
        let group = actors::parse_actor(&doc, url).map_err(|why| bad("bad_community", format!("{url}: {why}")))?;
        return store_group(state, &group, &doc).await;
    }
    Err(AppError::NotFound(format!("community {}", query.trim())))
}

/// The ActivityPub documents a WebFinger answer links to, a `Group`
/// first (Lemmy lists a user and a community of one name both).
fn self_links(jrd: &Value) -> Vec<String> {
    let links = jrd.get("links").and_then(Value::as_array).cloned().unwrap_or_default();
    let mut out: Vec<(bool, String)> = links
        .iter()
        .filter(|l| l.get("rel").and_then(Value::as_str) == Some("self"))
        .filter(|l| {
            l.get("type").and_then(Value::as_str).is_some_and(|t| t.contains("activity+json") || t.contains("ld+json"))
        })
        .filter_map(|l| {
            let href = l.get("href").and_then(Value::as_str)?.to_owned();
            let group = l
                .get("properties")
                .and_then(|p| p.get("https://www.w3.org/ns/activitystreams#type"))
                .and_then(Value::as_str)
                == Some("Group");
            Some((group, href))
        })
        .collect();
    out.sort_by_key(|(group, _)| !*group);
    out.into_iter().map(|(_, href)| href).collect()
}

/// Stores a fetched `Group` as the community it is here.
async fn store_group<S: Store>(state: &AppState<S>, group: &RemoteActor, doc: &Value) -> AppResult<Community> {
    let host = host_of(&group.id).unwrap_or("unknown");
    let name = remote_user_name(&group.name, host).to_ascii_lowercase();
    let clean = |s: &str, max: usize| s.chars().filter(|c| !c.is_control() || *c == '\n').take(max).collect::<String>();
    let title = doc.get("name").and_then(Value::as_str).map(str::trim).filter(|t| !t.is_empty());
    let title = clean(title.unwrap_or(&group.name), 300).replace('\n', " ");
    let description = match doc.get("source").and_then(|s| s.get("content")).and_then(Value::as_str) {
        Some(md) => md.to_owned(),
        None => doc.get("summary").and_then(Value::as_str).map(content::html_to_text).unwrap_or_default(),
    };
    let description = clean(&description, crate::app::communities::MAX_DESCRIPTION);
    let put = || state.store.put_remote_community(group.clone(), name.clone(), title.clone(), description.clone());
    match put().await {
        // Two look-ups at once: the other stored it.
        Err(StoreError::Conflict(_)) => Ok(put().await?),
        other => Ok(other?),
    }
}

/// Where a user's follow of a remote community stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Following {
    /// Asked; the Group has not answered yet.
    Pending,
    Accepted,
    No,
}

impl Following {
    pub fn of(state: Option<bool>) -> Following {
        match state {
            None => Following::No,
            Some(false) => Following::Pending,
            Some(true) => Following::Accepted,
        }
    }
}

/// The remote community `name` and its Group; 400 for a local community.
async fn remote_community<S: Store>(state: &AppState<S>, name: &str) -> AppResult<(Community, RemoteActor)> {
    let community = state.store.community(name.to_owned()).await?;
    match state.store.community_actor(community.name.clone()).await? {
        Some(group) => Ok((community, group)),
        None => Err(bad(
            "not_remote",
            format!("c/{} is a community of this server: its topics are here already", community.name),
        )),
    }
}

/// A user's activity, queued for the Group's inbox, signed by the user
/// (`user_id`, `name`).
pub(super) fn to_group(base: &str, user_id: i64, name: &str, group: &RemoteActor, activity: &Value) -> NewDelivery {
    NewDelivery {
        inbox: group.inbox.clone(),
        body: activity.to_string(),
        signer: ActorKind::User,
        signer_id: user_id,
        key_id: ids::key(&ids::user(base, name)),
    }
}

/// `user` follows the remote community `name`: stored as pending, and the
/// `Follow` sent to its Group. Asking again sends a new Follow.
pub async fn follow<S: Store>(state: &AppState<S>, fed: &Federation, user: &User, name: &str) -> AppResult<Following> {
    let (community, group) = remote_community(state, name).await?;
    let base = state.web.public_url();
    let actor = ids::user(&base, &user.name);
    let follow_id = activity_id(&actor, "follow");
    state.store.follow_remote(community.id, user.id, follow_id.clone()).await?;
    let follow = json!({
        "@context": super::objects::context(),
        "id": follow_id,
        "type": "Follow",
        "actor": actor,
        "object": group.id,
        "to": [group.id],
    });
    queue::enqueue(state, fed, vec![to_group(&base, user.id, &user.name, &group, &follow)]).await?;
    Ok(Following::Pending)
}

/// `user` stops following the remote community: the row goes, and the
/// Group is sent the `Undo` of the Follow. Whether there was one.
pub async fn unfollow<S: Store>(state: &AppState<S>, fed: &Federation, user: &User, name: &str) -> AppResult<bool> {
    let (community, group) = remote_community(state, name).await?;
    let Some(follow_id) = state.store.unfollow_remote(community.id, user.id).await? else { return Ok(false) };
    let base = state.web.public_url();
    let actor = ids::user(&base, &user.name);
    let undo = json!({
        "@context": super::objects::context(),
        "id": activity_id(&actor, "undo"),
        "type": "Undo",
        "actor": actor,
        "object": {"id": follow_id, "type": "Follow", "actor": actor, "object": group.id},
        "to": [group.id],
    });
    queue::enqueue(state, fed, vec![to_group(&base, user.id, &user.name, &group, &undo)]).await?;
    Ok(true)
}

/// Where `user` stands with the community (`No` for a local one).
pub async fn following<S: Store>(state: &AppState<S>, user: &User, community: &Community) -> AppResult<Following> {
    if !community.is_remote() {
        return Ok(Following::No);
    }
    Ok(Following::of(state.store.remote_follow(community.id, user.id).await?))
}

/// The Group `signer` answered a Follow: `Accept` (`accepted`) or
/// `Reject`. Anything else (a Group no one here follows, a Follow not
/// ours) is dropped, logged.
pub async fn answered<S: Store>(
    state: &AppState<S>,
    signer: &RemoteActor,
    activity: &Value,
    accepted: bool,
) -> AppResult<()> {
    let Some(community) = state.store.community_of_actor(signer.id.clone()).await? else {
        tracing::info!(actor = %signer.id, "an Accept or Reject from an actor no one here follows; dropped");
        return Ok(());
    };
    let follow_id = id_of(activity.get("object")).ok_or_else(|| bad("bad_activity", "the answer has no object"))?;
    if !state.store.settle_remote_follow(community.id, follow_id.to_owned(), accepted).await? {
        tracing::info!(%follow_id, "an answer to a Follow not ours (or undone since); dropped");
    }
    Ok(())
}

/// An `Announce` by `group` of one of its members' activities (embedded),
/// or of a `Page` or `Note` itself (as Lemmy also sends for microblogs):
/// taken into the community it is here, when someone here follows it.
/// The Group vouches for its community, as Lemmy takes it: the inner
/// activity is not fetched again from its author's server, but its
/// object must still be on its author's host and attributed to it
/// (`inbound`). Ours (an activity of a local user, announced back) is
/// dropped: it is here already.
pub async fn announced<S: Store>(
    state: &AppState<S>,
    fed: &Federation,
    group: &RemoteActor,
    announce: &Value,
) -> AppResult<()> {
    let Some(community) = state.store.community_of_actor(group.id.clone()).await? else {
        tracing::info!(actor = %group.id, "an Announce from an actor no community here is; dropped");
        return Ok(());
    };
    if state.store.remote_follow_count(community.id).await? == 0 {
        tracing::info!(community = %community.name, "an Announce of a community no one here follows; dropped");
        return Ok(());
    }
    let inner = match announce.get("object") {
        Some(o @ Value::Object(_)) => o.clone(),
        _ => {
            tracing::info!(actor = %group.id, "an Announce of an object by id (Pith fetches no objects); dropped");
            return Ok(());
        }
    };
    let kind = inner.get("type").and_then(Value::as_str).unwrap_or("").to_owned();
    // An object announced as it is: its author's Create of it.
    let (kind, inner) = match kind.as_str() {
        "Page" | "Article" | "Note" => {
            let actor = inner.get("attributedTo").cloned().unwrap_or(Value::Null);
            ("Create".to_owned(), json!({"type": "Create", "actor": actor, "object": inner}))
        }
        _ => (kind, inner),
    };
    let Some(actor_id) = id_of(inner.get("actor")).map(str::to_owned) else {
        return Err(bad("bad_activity", "the announced activity has no actor"));
    };
    if actor_id.starts_with(&format!("{}/", state.web.public_url())) {
        return Ok(());
    }
    let author = match state.store.remote_actor(actor_id.clone()).await? {
        Some(a) => a,
        None => actors::fetch(state, fed, &actor_id).await?,
    };
    let sender = Sender { actor: &author, user: None, ip: ClientIp::FEDERATED, inbox: None, via: Some(&community) };
    match kind.as_str() {
        "Undo" => inbound::undo(state, fed, &sender, &inner).await,
        other => inbound::act(state, fed, &sender, other, &inner).await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_community_is_asked_for_by_handle_or_url() {
        let h = |name: &str, host: &str| Wanted::Handle { name: name.into(), host: host.into() };
        assert_eq!(wanted("!rust@lemmy.example").expect("taken"), h("rust", "lemmy.example"));
        assert_eq!(wanted(" rust@Lemmy.Example ").expect("taken"), h("rust", "lemmy.example"));
        assert_eq!(wanted("!r@127.0.0.1:8536").expect("taken"), h("r", "127.0.0.1:8536"));
        assert_eq!(
            wanted("https://lemmy.example/c/rust").expect("taken"),
            Wanted::Url("https://lemmy.example/c/rust".into())
        );
        for bad in ["rust", "!@host", "!a b@host", "!rust@", "!rust@ho st", "!rust@host/x", "ftp://x/y", "https://"] {
            assert!(wanted(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_webfinger_answer_gives_its_group_first() {
        let jrd = json!({"links": [
            {"rel": "http://webfinger.net/rel/profile-page", "href": "https://l.example/u/rust"},
            {"rel": "self", "type": "application/activity+json", "href": "https://l.example/u/rust"},
            {"rel": "self", "type": "application/activity+json", "href": "https://l.example/c/rust",
             "properties": {"https://www.w3.org/ns/activitystreams#type": "Group"}},
        ]});
        assert_eq!(
            self_links(&jrd),
            vec!["https://l.example/c/rust".to_owned(), "https://l.example/u/rust".to_owned()]
        );
        assert!(self_links(&json!({})).is_empty());
    }
}
