//! Which other servers may federate (docs/FEDERATION.md, "Instances"): the
//! administrators' block and allow rules (`model::instances`), set from
//! `pith federation`, the admin page or the API, and applied in three
//! places: an inbox POST whose key is on a refused host is answered 403
//! before its key is fetched (`actors::verify`), no actor is fetched from
//! one (`actors::fetch`), and no delivery goes to one (`queue`).
//!
//! The rules are read from the store at most every `REFRESH` and kept as
//! one `InstancePolicy`: a flood of activities costs no query each, and a
//! rule set by `pith federation` or on another node takes effect within
//! `REFRESH`; one set through this server, at once.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::http::StatusCode;

use crate::app::{AppError, AppResult, AppState};
use crate::model::User;
use crate::model::federation::host_of;
use crate::model::instances::{
    InstanceEntry, InstancePolicy, InstanceRule, MAX_REASON_CHARS, Refusal, parse_host, rule_host,
};
use crate::store::Store;

/// How long the rules are kept before they are read again.
pub const REFRESH: Duration = Duration::from_secs(10);

/// The rules as last read.
#[derive(Default)]
pub struct Instances {
    cached: Mutex<Option<(Instant, Arc<InstancePolicy>)>>,
}

impl Instances {
    async fn policy<S: Store>(&self, store: &S) -> AppResult<Arc<InstancePolicy>> {
        if let Some((at, policy)) = self.cached.lock().unwrap_or_else(|e| e.into_inner()).as_ref()
            && at.elapsed() < REFRESH
        {
            return Ok(policy.clone());
        }
        let policy = Arc::new(InstancePolicy::new(&store.instance_rules().await?));
        *self.cached.lock().unwrap_or_else(|e| e.into_inner()) = Some((Instant::now(), policy.clone()));
        Ok(policy)
    }

    /// Forgets the rules, so the next check reads them again.
    fn forget(&self) {
        *self.cached.lock().unwrap_or_else(|e| e.into_inner()) = None;
    }
}

/// Refuses (403) a URL on a host the rules do not let federate; a URL
/// with no host (not http or https) is refused as not federating either.
pub async fn admit_url<S: Store>(state: &AppState<S>, url: &str) -> AppResult<()> {
    let Some(fed) = state.federation.get() else { return Ok(()) };
    let authority = host_of(url).ok_or_else(|| refused(url, "it has no http or https host".into()))?;
    let host = rule_host(authority);
    match fed.instances.policy(&state.store).await?.judge(authority) {
        Ok(()) => Ok(()),
        Err(Refusal::Blocked(rule)) => {
            let why = format!("this server blocks {rule}{}", if rule == host { "" } else { " and its subdomains" });
            Err(refused(&host, why))
        }
        Err(Refusal::NotAllowed) => Err(refused(&host, "it is not on this server's allowlist".into())),
    }
}

fn refused(host: &str, why: String) -> AppError {
    AppError::Rejected(StatusCode::FORBIDDEN, "instance_blocked", format!("{host} may not federate here: {why}"))
}

/// Counts one activity from the server of the actor `actor_id` against
/// its rate limit (`--limit-federation-instance`): 429 over it.
pub fn count_activity<S: Store>(state: &AppState<S>, actor_id: &str) -> AppResult<()> {
    state.limits.check_instance(&rule_host(host_of(actor_id).unwrap_or_default()))
}

/// The rules, for site administrators.
pub async fn rules<S: Store>(state: &AppState<S>, actor: &User) -> AppResult<Vec<InstanceEntry>> {
    admin_only(actor)?;
    Ok(state.store.instance_rules().await?)
}

/// Sets (or with `None`, removes) the rule for `host`; site
/// administrators only. Takes effect on this server at once. Returns the
/// host as stored and whether it had a rule before.
pub async fn set_rule<S: Store>(
    state: &AppState<S>,
    actor: &User,
    host: &str,
    rule: Option<InstanceRule>,
    reason: &str,
) -> AppResult<(String, bool)> {
    admin_only(actor)?;
    let set = store_rule(&state.store, host, rule, reason).await?;
    if let Some(fed) = state.federation.get() {
        fed.instances.forget();
    }
    Ok(set)
}

/// The rule's checks and its write, for the pages and API (`set_rule`)
/// and for `pith federation`, which has a store and no server.
pub async fn store_rule<S: Store>(
    store: &S,
    host: &str,
    rule: Option<InstanceRule>,
    reason: &str,
) -> AppResult<(String, bool)> {
    let host = parse_host(host).map_err(AppError::Validation)?;
    let reason = reason.trim();
    if reason.chars().count() > MAX_REASON_CHARS {
        return Err(AppError::Validation(format!("a reason has at most {MAX_REASON_CHARS} characters")));
    }
    if reason.chars().any(|c| c.is_control()) {
        return Err(AppError::Validation("a reason is one line of text".into()));
    }
    let had = store.set_instance_rule(host.clone(), rule.map(|r| (r, reason.to_owned()))).await?;
    Ok((host, had))
}

fn admin_only(actor: &User) -> AppResult<()> {
    if actor.is_admin { Ok(()) } else { Err(AppError::Forbidden("site administrators only".into())) }
}
