//! `/admin/federation`: the administrators' rules for other servers
//! (`app::federation::instances`): the list, a form to block or allow a
//! host, and a button to remove each rule. The same rules as
//! `pith federation`; site administrators only (403).

use askama::Template;
use axum::extract::rejection::FormRejection;
use axum::extract::{Form, State};
use axum::http::{StatusCode, Uri};
use axum::response::Response;
use serde::Deserialize;

use super::forms::{accept, login_first};
use super::view::Time;
use super::{Ctx, Session, capitalise, error_page, see_other};
use crate::app::federation::instances;
use crate::app::{AppError, AppState};
use crate::model::instances::InstanceRule;
use crate::store::Store;

struct RuleRow {
    host: String,
    rule: &'static str,
    reason: String,
    created: Time,
}

#[derive(Template)]
#[template(path = "instances.html")]
struct InstancesPage {
    ctx: Ctx,
    federating: bool,
    rules: Vec<RuleRow>,
    allowlist: bool,
    host: String,
    reason: String,
    error: Option<String>,
}

/// `GET /admin/federation`.
pub async fn show<S: Store>(State(state): State<AppState<S>>, session: Session, uri: Uri) -> Response {
    let ctx = Ctx::new(&session, &uri);
    if ctx.user.is_none() {
        return login_first(&ctx.here);
    }
    page(&state, &ctx, None).await
}

/// The page, with a refused form's input and error to show again.
async fn page<S: Store>(state: &AppState<S>, ctx: &Ctx, refused: Option<(String, String, AppError)>) -> Response {
    let Some(user) = ctx.user.as_ref() else { return error_page(ctx, AppError::Unauthorized) };
    let rules = match instances::rules(state, user).await {
        Ok(rules) => rules,
        Err(e) => return error_page(ctx, e),
    };
    let (host, reason, error) = match refused {
        Some((h, r, e)) => (h, r, Some(e)),
        None => (String::new(), String::new(), None),
    };
    let status = error.as_ref().map_or(StatusCode::OK, AppError::status);
    let page = InstancesPage {
        ctx: ctx.clone(),
        federating: state.federation.get().is_some(),
        allowlist: rules.iter().any(|r| r.rule == InstanceRule::Allow),
        rules: rules
            .into_iter()
            .map(|r| RuleRow { host: r.host, rule: r.rule.as_str(), reason: r.reason, created: Time::of(r.created_at) })
            .collect(),
        host,
        reason,
        error: error.map(|e| capitalise(&e.to_string())),
    };
    ctx.page(status, &page)
}

#[derive(Deserialize)]
pub struct RuleForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    host: String,
    /// `block`, `allow`, or `clear` (remove the rule).
    #[serde(default)]
    rule: String,
    #[serde(default)]
    reason: String,
}

/// `POST /admin/federation`: sets or removes the rule for a host; a
/// refusal shows the page again with the form as sent.
pub async fn set<S: Store>(
    State(state): State<AppState<S>>,
    session: Session,
    uri: Uri,
    form: Result<Form<RuleForm>, FormRejection>,
) -> Response {
    let (ctx, user, form) = match accept(&session, &uri, form, "/admin/federation", |f| &f.csrf) {
        Ok(accepted) => accepted,
        Err(res) => return *res,
    };
    let rule = match form.rule.as_str() {
        "clear" => Ok(None),
        other => InstanceRule::parse(other).map(Some).map_err(AppError::Validation),
    };
    let result = match rule {
        Ok(rule) => instances::set_rule(&state, &user, &form.host, rule, &form.reason).await.map(|_| ()),
        Err(e) => Err(e),
    };
    match result {
        Ok(()) => see_other("/admin/federation"),
        Err(e @ (AppError::Validation(_) | AppError::BadRequest(..))) => {
            page(&state, &ctx, Some((form.host, form.reason, e))).await
        }
        Err(e) => error_page(&ctx, e),
    }
}
