//! Discovery: WebFinger (RFC 7033) turns `acct:NAME@HOST` into actor ids,
//! and NodeInfo 2.1 says what software this is. A name that is both a
//! community's and a user's answers both links, the `Person` first and
//! the `Group` last, as Lemmy orders them (crates/routes/src/webfinger.rs:
//! Mastodon takes the last of duplicates, so a follow finds the
//! community); `acct:!NAME@HOST` asks for the community alone and
//! `acct:@NAME@HOST` for the user alone.

use axum::extract::{Query, State};
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::{Value, json};

use super::federation;
use crate::app::federation::ids;
use crate::app::{AppError, AppResult, AppState};
use crate::model::federation::host_of;
use crate::store::{Store, StoreError};

#[derive(Deserialize)]
pub struct WebfingerQuery {
    resource: Option<String>,
}

fn link(kind: &str, id: &str, page: &str) -> [Value; 2] {
    [
        json!({"rel": "http://webfinger.net/rel/profile-page", "type": "text/html", "href": page}),
        json!({"rel": "self", "type": "application/activity+json", "href": id,
               "properties": {"https://www.w3.org/ns/activitystreams#type": kind}}),
    ]
}

/// Absent things are `None`; anything else the store says is an error.
fn found<T>(r: Result<T, StoreError>) -> AppResult<Option<T>> {
    match r {
        Ok(t) => Ok(Some(t)),
        Err(StoreError::NotFound(_)) => Ok(None),
        Err(e) => Err(e.into()),
    }
}

pub async fn webfinger<S: Store>(
    State(state): State<AppState<S>>,
    Query(q): Query<WebfingerQuery>,
) -> AppResult<Response> {
    federation(&state)?;
    let base = state.web.public_url();
    let resource = q.resource.ok_or_else(|| AppError::BadRequest("bad_resource", "resource is required".into()))?;
    // An actor's own id is a resource too (RFC 7033 takes any URI; Fedify
    // asks so for an http id, where `acct:` would mean https).
    let by_id = [("/ap/c/", "!"), ("/ap/u/", "@")].into_iter().find_map(|(path, mark)| {
        let name = resource.strip_prefix(&format!("{base}{path}"))?;
        (!name.contains(['/', '?', '#'])).then(|| format!("{mark}{name}@{}", host_of(&base).unwrap_or("")))
    });
    let acct = match &by_id {
        Some(acct) => acct.as_str(),
        None => resource.strip_prefix("acct:").unwrap_or(&resource),
    };
    let (name, host) = acct
        .rsplit_once('@')
        .ok_or_else(|| AppError::BadRequest("bad_resource", "resource must be acct:NAME@HOST".into()))?;
    if Some(host.to_ascii_lowercase().as_str()) != host_of(&base).map(str::to_ascii_lowercase).as_deref() {
        return Err(AppError::NotFound(format!("{host}: not this site")));
    }
    let (users, communities, name) = match (name.strip_prefix('!'), name.strip_prefix('@')) {
        (Some(n), _) => (false, true, n),
        (_, Some(n)) => (true, false, n),
        _ => (true, true, name),
    };
    let mut links = Vec::new();
    // A remote user (`name@host`) is found at its home, not here.
    // So is a community followed from another server.
    let users = users && !crate::model::federation::is_remote_name(name);
    let communities = communities && !crate::model::federation::is_remote_name(name);
    if users && let Some(p) = found(state.store.profile(name.to_owned()).await)? {
        links.extend(link("Person", &ids::user(&base, &p.user.name), &format!("{base}/u/{}", p.user.name)));
    }
    let community = match communities {
        true => found(state.store.community(name.to_owned()).await)?,
        false => None,
    };
    if let Some(c) = community {
        links.extend(link("Group", &ids::community(&base, &c.name), &format!("{base}/c/{}", c.name)));
    }
    if links.is_empty() {
        return Err(AppError::NotFound(name.to_owned()));
    }
    let mut res = axum::Json(json!({"subject": resource, "links": links})).into_response();
    res.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/jrd+json"));
    Ok(res)
}

pub async fn nodeinfo_links<S: Store>(State(state): State<AppState<S>>) -> AppResult<Response> {
    federation(&state)?;
    let href = format!("{}/nodeinfo/2.1", state.web.public_url());
    Ok(axum::Json(json!({"links": [{"rel": "http://nodeinfo.diaspora.software/ns/schema/2.1", "href": href}]}))
        .into_response())
}

/// NodeInfo 2.1. `usage.users` is left empty: counting needs queries the
/// store does not have yet, and the schema allows it.
pub async fn nodeinfo<S: Store>(State(state): State<AppState<S>>) -> AppResult<Response> {
    federation(&state)?;
    let site = state.store.site_settings().await?;
    let doc = json!({
        "version": "2.1",
        "software": {"name": "pith", "version": env!("CARGO_PKG_VERSION")},
        "protocols": ["activitypub"],
        "services": {"inbound": [], "outbound": ["atom1.0"]},
        "openRegistrations": site.registration == crate::model::RegistrationMode::Open,
        "usage": {"users": {}},
        "metadata": {},
    });
    let mut res = axum::Json(doc).into_response();
    res.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json; profile=\"http://nodeinfo.diaspora.software/ns/schema/2.1#\""),
    );
    Ok(res)
}
