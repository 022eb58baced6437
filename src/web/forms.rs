//! What every form handler shares: the signed-in user of a post after its
//! CSRF check, the login redirect, ids from paths, and which errors a form
//! shows next to itself.

use axum::extract::rejection::FormRejection;
use axum::extract::{Form, FromRequestParts, Path};
use axum::http::request::Parts;
use axum::http::{HeaderMap, Uri};
use axum::response::Response;
use serde::Deserialize;

use super::{Ctx, Session, error_page, local_path, see_other};
use crate::app::{AppError, AppResult, AuthUser};
use crate::model::{User, VoteTarget};

/// A form that carries nothing but its CSRF token.
#[derive(Deserialize)]
pub struct CsrfForm {
    #[serde(default)]
    pub csrf: String,
}

/// Whether the request comes from the script rather than a form post.
pub fn is_fetch(headers: &HeaderMap) -> bool {
    headers.contains_key("x-pith-fetch")
}

/// A positive id from a path segment; anything else names nothing.
pub fn id_of(s: &str, what: &'static str) -> AppResult<i64> {
    s.parse::<i64>().ok().filter(|id| *id > 0).ok_or(AppError::NotFound(what.into()))
}

pub fn bad_form() -> AppError {
    AppError::BadRequest("invalid_form", "the form could not be read".into())
}

/// Errors a form shows next to itself; anything else gets the error page.
pub fn shown_on_form(e: &AppError) -> bool {
    matches!(
        e,
        AppError::Validation(_) | AppError::TooManyRequests(..) | AppError::Rejected(..) | AppError::Forbidden(_)
    )
}

/// Sends a visitor who must sign in to the login page, and back after.
pub fn login_first(here: &str) -> Response {
    see_other(&format!("/login?next={}", url_encode(here)))
}

fn url_encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' | b'/' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// The user of a form post, after its CSRF token is checked; otherwise the
/// answer to give (login redirect, or 403).
pub fn authorise(session: &Session, ctx: &Ctx, csrf: &str, back: &str) -> Result<User, Box<Response>> {
    let Some(user) = session.user.clone() else {
        return Err(Box::new(login_first(local_path(back))));
    };
    if !session.csrf_ok(csrf) {
        return Err(Box::new(csrf_refused(ctx)));
    }
    Ok(user)
}

/// What every signed-in form post starts with: its page context, its
/// fields, and its user after the CSRF check; otherwise the answer to give
/// (400, the login redirect, or 403). `csrf` picks the form's token.
pub fn accept<T>(
    session: &Session,
    uri: &Uri,
    form: Result<Form<T>, FormRejection>,
    back: &str,
    csrf: fn(&T) -> &str,
) -> Result<(Ctx, User, T), Box<Response>> {
    let ctx = Ctx::new(session, uri);
    let Ok(Form(form)) = form else { return Err(Box::new(error_page(&ctx, bad_form()))) };
    let user = authorise(session, &ctx, csrf(&form), back)?;
    Ok((ctx, user, form))
}

/// An `AuthUser` for `user` of this session, for the API functions the
/// forms share.
pub fn as_api(session: &Session, user: User) -> AuthUser {
    AuthUser { user, digest: session.token_digest().unwrap_or_default() }
}

/// What a vote form is cast on, from its route: `/t/{id}/vote` or
/// `/p/{post}/vote`.
pub struct VotePath(pub AppResult<VoteTarget>);

impl<S: Send + Sync> FromRequestParts<S> for VotePath {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        let topic = parts.uri.path().starts_with("/t/");
        let id = Path::<String>::from_request_parts(parts, state).await.map(|Path(id)| id).unwrap_or_default();
        Ok(VotePath(if topic {
            id_of(&id, "topic").map(VoteTarget::Topic)
        } else {
            id_of(&id, "post").map(VoteTarget::Post)
        }))
    }
}

/// `authorise`, as the API's extractor would have given it, for the API
/// functions the forms share.
pub fn authorise_api(session: &Session, ctx: &Ctx, csrf: &str, back: &str) -> Result<AuthUser, Box<Response>> {
    Ok(as_api(session, authorise(session, ctx, csrf, back)?))
}

/// 403 for a form without this session's CSRF token.
pub fn csrf_refused(ctx: &Ctx) -> Response {
    error_page(
        ctx,
        AppError::Forbidden(
            "this form has expired or did not come from this site (CSRF check failed); reload the page and try again"
                .into(),
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn login_redirects_keep_the_path_and_query_encoded() {
        assert_eq!(url_encode("/t/1?sort=new&x=ü"), "/t/1%3Fsort%3Dnew%26x%3D%C3%BC");
    }
}
