//! The site's pictures: `GET /media/{name}` serves a stored file, and
//! `POST /media` uploads one from a page (its session and CSRF token; the
//! API's `POST /api/v1/media` takes a bearer token).
//!
//! A picture is served from its file alone, never a database read: its
//! name is its content, so it is cached for a year as `immutable`; its
//! type comes from its name (`image/jpeg` or `image/png`, what Pith wrote),
//! with `nosniff`; ranges, `HEAD` and `If-Modified-Since` are tower-http's
//! `ServeFile`. A name that does not parse, a file that is not there (a
//! picture removed, a node of a cluster whose shared directory lacks it)
//! are a 404, never a 500.

use axum::extract::{FromRequest, Multipart, Path, Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use tower::ServiceExt;
use tower_http::services::ServeFile;

use super::Session;
use crate::app::media::{check_length, check_rate, declared_length, not_multipart, read_file, upload};
use crate::app::{AppError, AppResult, AppState, ClientIp};
use crate::media::MediaName;
use crate::store::Store;

/// The header a page's script sends its CSRF token in; a form post sends
/// it as the multipart field `csrf`, before `file`.
pub const CSRF_HEADER: &str = "x-csrf-token";

pub async fn serve<S: Store>(State(state): State<AppState<S>>, Path(name): Path<String>, req: Request) -> Response {
    let (Some(pictures), Some(name)) = (state.media.get(), MediaName::parse(&name)) else {
        return missing();
    };
    let Ok(res) = ServeFile::new(pictures.dir.path(&name)).oneshot(req).await;
    if res.status() == StatusCode::NOT_FOUND {
        return missing();
    }
    let mut res = res.map(axum::body::Body::new);
    if res.status().is_success() {
        // What Pith wrote, by its name; not guessed.
        res.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static(name.kind.content_type()));
    }
    if res.status().is_success() || res.status() == StatusCode::NOT_MODIFIED {
        res.headers_mut()
            .insert(header::CACHE_CONTROL, HeaderValue::from_static("public, max-age=31536000, immutable"));
    }
    res.headers_mut().insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    res
}

fn missing() -> Response {
    AppError::NotFound("picture".into()).into_response()
}

/// A page's upload: answers as the API does (201 and the picture as JSON).
pub async fn upload_from_page<S: Store>(
    State(state): State<AppState<S>>,
    session: Session,
    ip: ClientIp,
    req: Request,
) -> AppResult<Response> {
    let Some(user) = session.user.clone() else { return Err(AppError::Unauthorized) };
    let header = req.headers().get(CSRF_HEADER).and_then(|v| v.to_str().ok()).map(str::to_owned);
    // A token in the header is checked before the body is read.
    if header.as_deref().is_some_and(|t| !session.csrf_ok(t)) {
        return Err(csrf_failed());
    }
    check_rate(&state, &user, ip)?;
    let declared = declared_length(req.headers());
    check_length(&state, declared)?;
    let form = Multipart::from_request(req, &state).await.map_err(|rej| not_multipart(rej.body_text()))?;
    let file = read_file(&state, form, declared).await?;
    if header.is_none() && !file.csrf.as_deref().is_some_and(|t| session.csrf_ok(t)) {
        return Err(csrf_failed());
    }
    Ok(upload(&state, user, file.bytes).await?.created())
}

fn csrf_failed() -> AppError {
    AppError::Rejected(
        StatusCode::FORBIDDEN,
        "csrf_failed",
        "this upload did not come from this site's page (CSRF check failed); reload the page and try again".into(),
    )
}
