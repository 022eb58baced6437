//! Extractors that turn every malformed request into an `AppError` with our
//! JSON error shape, and the bearer-token authentication extractor.

use axum::extract::rejection::{JsonRejection, PathRejection, QueryRejection};
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::header::AUTHORIZATION;
use axum::http::request::Parts;
use serde::de::DeserializeOwned;

use super::AppState;
use crate::auth::token_digest;
use crate::error::AppError;
use crate::model::User;
use crate::store::Store;

/// `axum::Json` with our error shape.
pub struct Json<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for Json<T> {
    type Rejection = AppError;

    async fn from_request(req: Request, state: &S) -> Result<Self, AppError> {
        match axum::Json::<T>::from_request(req, state).await {
            Ok(axum::Json(v)) => Ok(Json(v)),
            Err(rej) => Err(json_rejection(rej)),
        }
    }
}

fn json_rejection(rej: JsonRejection) -> AppError {
    let code = match &rej {
        JsonRejection::JsonDataError(_) => "invalid_body",
        JsonRejection::JsonSyntaxError(_) => "invalid_json",
        JsonRejection::MissingJsonContentType(_) => "unsupported_media_type",
        _ if rej.status() == axum::http::StatusCode::PAYLOAD_TOO_LARGE => "payload_too_large",
        _ => "invalid_body",
    };
    AppError::Rejected(rej.status(), code, rej.body_text())
}

/// `axum::extract::Path` with our error shape.
pub struct Path<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned + Send> FromRequestParts<S> for Path<T> {
    type Rejection = AppError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, AppError> {
        axum::extract::Path::<T>::from_request_parts(parts, state)
            .await
            .map(|p| Path(p.0))
            .map_err(|rej: PathRejection| AppError::BadRequest("invalid_path", rej.body_text()))
    }
}

/// `axum::extract::Query` with our error shape.
pub struct Query<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequestParts<S> for Query<T> {
    type Rejection = AppError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, AppError> {
        axum::extract::Query::<T>::from_request_parts(parts, state)
            .await
            .map(|q| Query(q.0))
            .map_err(|rej: QueryRejection| AppError::BadRequest("invalid_query", rej.body_text()))
    }
}

/// The user behind a valid `Authorization: Bearer TOKEN`; 401 otherwise.
pub struct AuthUser {
    pub user: User,
    pub digest: [u8; 32],
}

impl<S: Store> FromRequestParts<AppState<S>> for AuthUser {
    type Rejection = AppError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState<S>) -> Result<Self, AppError> {
        let header = parts.headers.get(AUTHORIZATION).ok_or(AppError::Unauthorized)?;
        let value = header.to_str().map_err(|_| AppError::Unauthorized)?;
        // The scheme name is case-insensitive (RFC 9110 11.1).
        let token = value
            .split_once(' ')
            .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
            .map(|(_, t)| t.trim())
            .filter(|t| !t.is_empty() && t.len() <= 128)
            .ok_or(AppError::Unauthorized)?;
        let digest = token_digest(token);
        if let Some(user) = state.tokens.get(&digest) {
            return Ok(AuthUser { user, digest });
        }
        let user = state.store.user_by_token(digest).await?.ok_or(AppError::Unauthorized)?;
        state.tokens.put(digest, user.clone());
        Ok(AuthUser { user, digest })
    }
}
