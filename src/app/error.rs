//! `AppError`: every way a request can fail, each with its HTTP status and
//! a stable JSON body `{"error": {"code": "...", "message": "..."}}`.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::json;

use crate::model::Invalid;
use crate::store::StoreError;

#[derive(Debug, thiserror::Error)]
pub enum AppError {
    /// The request could not be parsed (bad query, bad path).
    #[error("{1}")]
    BadRequest(&'static str, String),
    /// A body the extractor refused, with the status it chose (400 bad
    /// JSON, 413 too large, 415 wrong content type, 422 wrong types).
    #[error("{2}")]
    Rejected(StatusCode, &'static str, String),
    /// A field's value breaks a rule (length, characters...).
    #[error("{0}")]
    Validation(String),
    #[error("authentication required: send Authorization: Bearer TOKEN")]
    Unauthorized,
    #[error("wrong username or password")]
    BadCredentials,
    #[error("{0}")]
    Forbidden(String),
    #[error("{0} not found")]
    NotFound(String),
    #[error("{0}")]
    Conflict(String),
    #[error("request body is larger than {0} bytes")]
    PayloadTooLarge(usize),
    /// Over a rate limit: what was limited, and how long until it is not.
    #[error("too many {}; try again in {} s", .0, retry_after_secs(*.1))]
    TooManyRequests(&'static str, std::time::Duration),
    #[error("{0}")]
    Unavailable(String),
    #[error("internal error")]
    Internal(String),
}

impl AppError {
    pub fn status(&self) -> StatusCode {
        match self {
            AppError::BadRequest(..) => StatusCode::BAD_REQUEST,
            AppError::Rejected(status, ..) => *status,
            AppError::Validation(_) => StatusCode::UNPROCESSABLE_ENTITY,
            AppError::Unauthorized | AppError::BadCredentials => StatusCode::UNAUTHORIZED,
            AppError::Forbidden(_) => StatusCode::FORBIDDEN,
            AppError::NotFound(_) => StatusCode::NOT_FOUND,
            AppError::Conflict(_) => StatusCode::CONFLICT,
            AppError::PayloadTooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            AppError::TooManyRequests(..) => StatusCode::TOO_MANY_REQUESTS,
            AppError::Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
            AppError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    pub fn code(&self) -> &'static str {
        match self {
            AppError::BadRequest(code, _) | AppError::Rejected(_, code, _) => code,
            AppError::Validation(_) => "invalid_field",
            AppError::Unauthorized => "unauthorized",
            AppError::BadCredentials => "bad_credentials",
            AppError::Forbidden(_) => "forbidden",
            AppError::NotFound(_) => "not_found",
            AppError::Conflict(_) => "conflict",
            AppError::PayloadTooLarge(_) => "payload_too_large",
            AppError::TooManyRequests(..) => "rate_limited",
            AppError::Unavailable(_) => "unavailable",
            AppError::Internal(_) => "internal",
        }
    }

    pub fn not_found(what: &str) -> AppError {
        AppError::NotFound(what.to_owned())
    }

    /// Logs what the client will not be told: the cause of a 500 (and of a
    /// 503). Every path from an `AppError` to a response calls this once,
    /// so that no 500 goes unexplained in the log; `status_logged` is the
    /// form for the paths that build their own response from the status.
    pub fn report(&self) {
        match self {
            AppError::Internal(cause) => tracing::error!(%cause, "internal error"),
            AppError::Unavailable(cause) => tracing::warn!(%cause, "storage unavailable"),
            _ => {}
        }
    }

    /// `status`, after `report`: for a response made from the status and
    /// the message rather than through `into_response` or the error page.
    pub fn status_logged(&self) -> StatusCode {
        self.report();
        self.status()
    }
}

impl From<Invalid> for AppError {
    fn from(e: Invalid) -> Self {
        AppError::Validation(e.0)
    }
}

impl From<StoreError> for AppError {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::NotFound(what) => AppError::NotFound(what.to_owned()),
            StoreError::Conflict(m) => AppError::Conflict(m),
            StoreError::Forbidden(m) => AppError::Forbidden(m.to_owned()),
            StoreError::Denied(code, m) => AppError::Rejected(StatusCode::FORBIDDEN, code, m),
            StoreError::Invalid(m) => AppError::Validation(m),
            StoreError::Taken(code, m) => AppError::Rejected(StatusCode::CONFLICT, code, m),
            StoreError::Unavailable(m) => AppError::Unavailable(m),
            StoreError::Internal(m) => AppError::Internal(m),
        }
    }
}

/// A rule's refusal answers as the store's would (same code, same message).
impl From<crate::model::policy::Refusal> for AppError {
    fn from(r: crate::model::policy::Refusal) -> Self {
        StoreError::from(r).into()
    }
}

impl IntoResponse for AppError {
    fn into_response(self) -> Response {
        let status = self.status();
        self.report();
        let message = match &self {
            AppError::Internal(_) => "internal error".to_owned(),
            AppError::Unavailable(_) => "the forum cannot store writes right now; try again later".to_owned(),
            other => other.to_string(),
        };
        let retry_after = match &self {
            AppError::TooManyRequests(_, after) => Some(retry_after_secs(*after)),
            _ => None,
        };
        let body = json!({ "error": { "code": self.code(), "message": message } });
        let mut res = (status, axum::Json(body)).into_response();
        if status == StatusCode::UNAUTHORIZED {
            res.headers_mut().insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        if let Some(secs) = retry_after {
            res.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(secs));
        }
        if status == StatusCode::SERVICE_UNAVAILABLE {
            res.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from_static("5"));
        }
        res
    }
}

pub type AppResult<T> = Result<T, AppError>;

/// Whole seconds for `Retry-After`, rounded up so a client that waits that
/// long is let in.
fn retry_after_secs(d: std::time::Duration) -> u64 {
    d.as_secs() + u64::from(d.subsec_nanos() > 0)
}
