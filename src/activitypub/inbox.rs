//! The inboxes: a community's, a user's and the shared one. Every POST is
//! read within `MAX_ACTIVITY_BYTES` (413 past it), its HTTP signature
//! verified (401: `app::federation::actors::verify`), the activity's
//! `actor` held to the signer (401), its JSON checked (400), and then
//! acted on: `Follow` of a local community and its `Undo` here (`follow`);
//! a remote user's `Create`, `Update`, `Delete`, `Like`, `Dislike` and
//! `Undo` of a vote by `app::federation::inbound`; the `Accept`,
//! `Reject` and `Announce` of a remote community's Group by
//! `app::federation::join`. Other activities are
//! answered 202 and dropped, logged. A refusal by the forum's rules (a
//! ban, a locked topic, someone else's post) is the same error as the API
//! answers (403 with its JSON body).

use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::extract::{Path, State};
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use http_body_util::{BodyExt, Limited};
use serde_json::Value;

use super::federation;
use crate::app::federation::actors::{self, Inbound};
use crate::app::federation::inbound::{self, Sender, id_of};
use crate::app::federation::{Federation, follow, ids, join};
use crate::app::{AppError, AppResult, AppState, ClientIp};
use crate::model::Community;
use crate::store::Store;

/// The largest activity taken: Mastodon's and Lemmy's are a few KB; a
/// long post with its source fits many times over.
pub const MAX_ACTIVITY_BYTES: usize = 256 << 10;

/// Whose inbox a request came to.
enum Target {
    Shared,
    Community(String),
    User(String),
}

pub async fn shared<S: Store>(
    State(state): State<AppState<S>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Body,
) -> AppResult<Response> {
    receive(state, Target::Shared, Request { method, uri, headers, body }).await
}

pub async fn community<S: Store>(
    State(state): State<AppState<S>>,
    Path(name): Path<String>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Body,
) -> AppResult<Response> {
    receive(state, Target::Community(name), Request { method, uri, headers, body }).await
}

pub async fn user<S: Store>(
    State(state): State<AppState<S>>,
    Path(name): Path<String>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Body,
) -> AppResult<Response> {
    receive(state, Target::User(name), Request { method, uri, headers, body }).await
}

/// The parts of an inbox POST the signature covers.
struct Request<B = Body> {
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: B,
}

fn bad(message: impl Into<String>) -> AppError {
    AppError::BadRequest("bad_activity", message.into())
}

/// Activities from other servers are verified and applied on a runtime
/// of their own with one thread, so however many arrive they take at most
/// one core's worth of the async work: the rest stays with local readers,
/// whose cached answers would otherwise queue behind dozens of signature
/// checks (docs/PERFORMANCE.md, "Inbound federation"). That thread is
/// niced (`crate::priority`): a remote server can wait a little and
/// retries, a local reader is waiting now, so on a busy machine reads get
/// the CPU first. What an activity sets off (its commit, its `Change`)
/// runs there too. The task is
/// aborted when the request is dropped (the client gone, its deadline
/// passed), as the handler's own work was, so dropped requests cannot pile
/// up work and bodies on that one thread; a commit runs in a task of its own
/// and is not cut short.
fn inbox_runtime() -> Option<&'static tokio::runtime::Handle> {
    static RUNTIME: std::sync::OnceLock<Option<tokio::runtime::Runtime>> = std::sync::OnceLock::new();
    RUNTIME
        .get_or_init(|| {
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .thread_name("pith-inbox")
                .on_thread_start(crate::priority::lower_this_thread)
                .enable_all()
                .build()
                .map_err(|e| {
                    tracing::warn!("federation: no runtime of its own for the inbox ({e}); sharing the server's")
                })
                .ok()
        })
        .as_ref()
        .map(tokio::runtime::Runtime::handle)
}

async fn receive<S: Store>(state: AppState<S>, target: Target, req: Request) -> AppResult<Response> {
    let fed = federation(&state)?;
    // Read here, by the connection's own task: the body's bytes come from
    // it, and read on the inbox's thread each chunk would wake this one
    // and then that one again.
    let body = match Limited::new(req.body, MAX_ACTIVITY_BYTES).collect().await {
        Ok(b) => b.to_bytes(),
        Err(e) if e.is::<http_body_util::LengthLimitError>() => {
            return Err(AppError::PayloadTooLarge(MAX_ACTIVITY_BYTES));
        }
        Err(e) => return Err(bad(format!("the body could not be read: {e}"))),
    };
    let req = Request { method: req.method, uri: req.uri, headers: req.headers, body };
    match inbox_runtime() {
        Some(runtime) => tokio_util::task::AbortOnDropHandle::new(runtime.spawn(receive_here(state, fed, target, req)))
            .await
            .map_err(|e| AppError::Internal(format!("inbox task failed: {e}")))?,
        None => receive_here(state, fed, target, req).await,
    }
}

async fn receive_here<S: Store>(
    state: AppState<S>,
    fed: Arc<Federation>,
    target: Target,
    req: Request<Bytes>,
) -> AppResult<Response> {
    let Request { method, uri, headers, body } = req;
    let community = match &target {
        Target::Community(name) => {
            let read = super::objects::local_community(&state, name.clone());
            Some(fed.known.community(name, read).await?.name)
        }
        Target::User(name) => {
            // A remote user has no inbox here: it is an actor at its home.
            if crate::model::federation::is_remote_name(name) {
                return Err(AppError::not_found("user"));
            }
            state.store.profile(name.clone()).await?;
            None
        }
        Target::Shared => None,
    };
    let path = uri.path_and_query().map_or(uri.path(), |p| p.as_str());
    let inbound = Inbound { method: method.as_str(), path_and_query: path, headers: &headers, body: &body };
    let known = actors::verify(&state, &fed, &inbound).await?;
    let signer = &known.actor;
    let activity: Value = serde_json::from_slice(&body).map_err(|e| bad(format!("not JSON: {e}")))?;
    let kind = activity.get("type").and_then(Value::as_str).ok_or_else(|| bad("the activity has no type"))?;
    let actor = id_of(activity.get("actor")).ok_or_else(|| bad("the activity has no actor"))?;
    if actor != signer.id {
        return Err(AppError::Rejected(
            StatusCode::UNAUTHORIZED,
            "actor_mismatch",
            format!("the activity's actor {actor} is not its signer {}", signer.id),
        ));
    }
    // The server's rules and its rate limit were applied by `verify`
    // (`app::federation::instances`): every activity passed them.
    // Counted per server (in `verify`) and per remote user, not by the
    // address all of that server's users share.
    let sender = Sender {
        actor: signer,
        user: known.user.as_ref(),
        ip: ClientIp::FEDERATED,
        inbox: community.as_deref(),
        via: None,
    };
    match kind {
        "Follow" => {
            let community = followed(&state, &target, id_of(activity.get("object"))).await?;
            follow::follow(&state, &fed, &community, signer, &activity).await?;
        }
        "Undo" => undo(&state, &fed, &target, &sender, &activity).await?,
        // Phase 2: what the Groups of remote communities followed from
        // here send (`join`).
        "Accept" => join::answered(&state, signer, &activity, true).await?,
        "Reject" => join::answered(&state, signer, &activity, false).await?,
        "Announce" => join::announced(&state, &fed, signer, &activity).await?,
        other => inbound::act(&state, &fed, &sender, other, &activity).await?,
    }
    Ok(StatusCode::ACCEPTED.into_response())
}

/// The local community an activity's object names: one of ours, and the
/// inbox's own when it came to a community's inbox. 404 for none.
async fn followed<S: Store>(state: &AppState<S>, target: &Target, object: Option<&str>) -> AppResult<Community> {
    let object = object.ok_or_else(|| bad("the Follow has no object"))?;
    let prefix = format!("{}/ap/c/", state.web.public_url());
    let name = object
        .strip_prefix(&prefix)
        .filter(|n| !n.is_empty() && !n.contains(['/', '?', '#']))
        .ok_or_else(|| AppError::NotFound(format!("community {object}")))?;
    if let Target::Community(inbox) = target
        && !inbox.eq_ignore_ascii_case(name)
    {
        return Err(bad("a community's inbox takes follows of that community only"));
    }
    let community = super::objects::local_community(state, name.to_owned()).await?;
    if ids::community(&state.web.public_url(), &community.name) != object {
        return Err(AppError::NotFound(format!("community {object}")));
    }
    Ok(community)
}

/// `Undo` of the signer's own `Follow`, given inline (as Mastodon, Lemmy
/// and Fedify send it); any other Undo is `inbound::undo`'s (a vote, a
/// lock, a removal; anything else dropped, logged).
async fn undo<S: Store>(
    state: &AppState<S>,
    fed: &Federation,
    target: &Target,
    sender: &Sender<'_>,
    activity: &Value,
) -> AppResult<()> {
    let signer = sender.actor;
    let object = activity.get("object").ok_or_else(|| bad("the Undo has no object"))?;
    match object.get("type").and_then(Value::as_str) {
        Some("Follow") => {
            if id_of(object.get("actor")) != Some(signer.id.as_str()) {
                return Err(bad("an Undo may undo only its actor's own Follow"));
            }
            let community = followed(state, target, id_of(object.get("object"))).await?;
            match follow::unfollow(state, &community, signer).await {
                Ok(_) | Err(AppError::NotFound(_)) => Ok(()),
                Err(e) => Err(e),
            }
        }
        _ => inbound::undo(state, fed, sender, activity).await,
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use crate::priority::{NICE, nice_of_this_thread};

    #[tokio::test]
    async fn activities_are_taken_on_a_niced_thread_of_their_own() {
        let here = (std::thread::current().id(), nice_of_this_thread());
        let runtime = super::inbox_runtime().expect("the inbox's runtime");
        let there = runtime.spawn(async { (std::thread::current().id(), nice_of_this_thread()) }).await.expect("ran");
        assert_ne!(there.0, here.0);
        assert_eq!(there.1, (here.1 + NICE).min(19));
    }
}
