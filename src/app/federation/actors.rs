//! Remote actors: fetched (a GET signed by the site's actor), checked,
//! cached in the store with their keys; and the signature of an inbound
//! request verified against its signer's key, fetched again once when a
//! cached key fails (the actor may have rotated it).

use axum::http::{HeaderMap, StatusCode};
use serde_json::Value;

use super::client::{FetchError, Signer};
use super::signature::{self, Refused};
use super::{Federation, ids, instances, keys};
use crate::app::{AppError, AppResult, AppState};
use crate::model::Timestamp;
use crate::model::federation::{ActorKind, KnownActor, RemoteActor, same_host};
use crate::store::Store;

/// The site actor's signer, for fetches.
pub async fn site_signer<S: Store>(state: &AppState<S>) -> AppResult<Signer> {
    let key = keys::key_for(state, ActorKind::Site, 0).await?;
    Signer::new(ids::key(&ids::site(&state.web.public_url())), &key.private_pem).map_err(AppError::Internal)
}

fn refused(why: impl std::fmt::Display) -> AppError {
    AppError::Rejected(StatusCode::UNAUTHORIZED, "bad_signature", why.to_string())
}

fn unusable(url: &str, why: impl std::fmt::Display) -> AppError {
    refused(format!("the actor {url} cannot be used: {why}"))
}

/// Fetches the actor `url` (or the key document `url`, then its owner),
/// checks it and stores it.
pub async fn fetch<S: Store>(state: &AppState<S>, fed: &Federation, url: &str) -> AppResult<RemoteActor> {
    instances::admit_url(state, url).await?;
    let signer = site_signer(state).await?;
    let mut doc = fed.client.get_json(url, &signer).await.map_err(|e: FetchError| unusable(url, e))?;
    // A keyId that names a key document (Fedify, GoToSocial): its owner.
    if doc.get("inbox").is_none()
        && let Some(owner) = doc.get("owner").and_then(Value::as_str).filter(|o| same_host(o, url))
    {
        let owner = owner.to_owned();
        doc = fed.client.get_json(&owner, &signer).await.map_err(|e| unusable(&owner, e))?;
    }
    let actor = parse_actor(&doc, url).map_err(|why| unusable(url, why))?;
    let known_before = state.store.remote_actor(actor.id.clone()).await?.is_some();
    state.store.put_remote_actor(actor.clone()).await?;
    // What nodes keep of it (its key, its inbox) is read again.
    if known_before {
        crate::app::apply::apply(state, crate::model::Change::ActorFetched { actor_id: actor.id.clone() });
    }
    Ok(actor)
}

/// An actor document as stored, after the checks that tie it to where it
/// was fetched from: its id, inbox and key on the host asked.
pub fn parse_actor(doc: &Value, fetched_from: &str) -> Result<RemoteActor, String> {
    let text = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).map(str::to_owned);
    let id = text(doc, "id").ok_or("no id")?;
    if !same_host(&id, fetched_from) {
        return Err(format!("its id {id} is on another host"));
    }
    let inbox = text(doc, "inbox").ok_or("no inbox")?;
    let key = match doc.get("publicKey") {
        Some(Value::Array(keys)) => keys.first().cloned(),
        other => other.cloned(),
    }
    .ok_or("no publicKey")?;
    let key_id = text(&key, "id").ok_or("no publicKey.id")?;
    let pem = text(&key, "publicKeyPem").ok_or("no publicKeyPem")?;
    if text(&key, "owner").is_some_and(|o| o != id) {
        return Err("its key belongs to another actor".into());
    }
    if !same_host(&inbox, &id) || !same_host(&key_id, &id) {
        return Err("its inbox or key is on another host".into());
    }
    keys::public_der(&pem)?;
    let shared_inbox = doc.get("endpoints").and_then(|e| text(e, "sharedInbox")).filter(|s| same_host(s, &id));
    let name = text(doc, "preferredUsername").unwrap_or_else(|| id.rsplit('/').next().unwrap_or("").to_owned());
    let url = text(doc, "url").filter(|u| same_host(u, &id) && u.len() <= 2000);
    Ok(RemoteActor {
        id,
        inbox,
        shared_inbox,
        key_id,
        public_key_pem: pem,
        name: name.chars().filter(|c| !c.is_control()).take(64).collect(),
        fetched_at: Timestamp::now().0,
        url,
    })
}

/// An inbound request, as the inbox received it.
pub struct Inbound<'a> {
    pub method: &'a str,
    pub path_and_query: &'a str,
    pub headers: &'a HeaderMap,
    pub body: &'a [u8],
}

/// Verifies the request's signature; its signer, with the user it acts
/// as here when the store has one (one read for both). 401 (`bad_signature`)
/// when unsigned, stale, with a digest that does not match, or signed by
/// a key that does not verify it even after its actor is fetched again;
/// 403 (`instance_blocked`) when its key is on a server the rules refuse,
/// before anything is fetched; 429 over that server's rate limit, counted
/// only once the signature holds (`instances`).
pub async fn verify<S: Store>(state: &AppState<S>, fed: &Federation, req: &Inbound<'_>) -> AppResult<KnownActor> {
    let header = |name: &str| {
        let values: Vec<&str> = req.headers.get_all(name).iter().filter_map(|v| v.to_str().ok()).collect();
        (!values.is_empty()).then(|| values.join(", "))
    };
    let sig = signature::parse(&header("signature").ok_or(Refused::Unsigned).map_err(refused)?).map_err(refused)?;
    let body = (req.method != "GET").then_some(req.body);
    signature::check(&sig, header("date").as_deref(), header("digest").as_deref(), body, Timestamp::now().0)
        .map_err(refused)?;
    let text = signature::signing_string(&sig.headers, req.method, req.path_and_query, header).map_err(refused)?;
    let key_url = sig.key_id.split('#').next().unwrap_or(&sig.key_id).to_owned();
    instances::admit_url(state, &key_url).await?;
    let known = verified(state, fed, &sig, &text, &key_url).await?;
    instances::count_activity(state, &known.actor.id)?;
    Ok(known)
}

async fn verified<S: Store>(
    state: &AppState<S>,
    fed: &Federation,
    sig: &signature::SignatureHeader,
    text: &str,
    key_url: &str,
) -> AppResult<KnownActor> {
    let cached = fed.known.signer(&sig.key_id, state.store.remote_actor_by_key(sig.key_id.clone())).await?;
    if let Some(known) = cached
        && keys::verify(&known.actor.public_key_pem, text.as_bytes(), &sig.signature)
    {
        return Ok(known);
    }
    let actor = fetch(state, fed, key_url).await?;
    if actor.key_id != sig.key_id {
        return Err(refused(format!("the actor at {key_url} has no key {}", sig.key_id)));
    }
    if keys::verify(&actor.public_key_pem, text.as_bytes(), &sig.signature) {
        // Its user, if it has one, is read when it first acts.
        Ok(KnownActor { actor, user: None })
    } else {
        Err(refused(Refused::Bad(sig.key_id.clone())))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn doc(id: &str, inbox: &str, key_id: &str, owner: &str) -> Value {
        let key = keys::generate().expect("key");
        json!({"id": id, "type": "Person", "inbox": inbox, "preferredUsername": "alice",
               "endpoints": {"sharedInbox": "https://a.example/inbox"},
               "publicKey": {"id": key_id, "owner": owner, "publicKeyPem": key.public_pem}})
    }

    #[test]
    fn an_actor_on_the_host_it_was_fetched_from_is_taken() {
        let d = doc(
            "https://a.example/u/alice",
            "https://a.example/u/alice/inbox",
            "https://a.example/u/alice#k",
            "https://a.example/u/alice",
        );
        let a = parse_actor(&d, "https://a.example/u/alice").expect("taken");
        assert_eq!(a.handle(), "alice@a.example");
        assert_eq!(a.shared_inbox.as_deref(), Some("https://a.example/inbox"));
    }

    #[test]
    fn an_actor_claiming_another_hosts_id_inbox_or_key_is_refused() {
        let id = "https://a.example/u/alice";
        assert!(
            parse_actor(&doc(id, "https://a.example/i", "https://a.example/k", id), "https://b.example/u/alice")
                .is_err()
        );
        assert!(parse_actor(&doc(id, "https://b.example/i", "https://a.example/k", id), id).is_err());
        assert!(parse_actor(&doc(id, "https://a.example/i", "https://b.example/k", id), id).is_err());
        assert!(
            parse_actor(&doc(id, "https://a.example/i", "https://a.example/k", "https://a.example/u/bob"), id).is_err()
        );
        assert!(parse_actor(&json!({"id": id, "inbox": "https://a.example/i"}), id).is_err());
    }
}
