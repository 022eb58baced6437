//! Extractors that turn every malformed request into an `AppError` with our
//! JSON error shape (the acting user's extractor is `app::AuthUser`).

use axum::extract::rejection::{JsonRejection, PathRejection, QueryRejection};
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::request::Parts;
use serde::de::DeserializeOwned;

use crate::app::AppError;

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
