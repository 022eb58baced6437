//! The forms that take a picture (a new topic, a comment): with JavaScript
//! off a chosen file travels in the form itself, as multipart/form-data,
//! and is read here beside the same fields a urlencoded post gives; the
//! handler then uploads it (`app::media::upload`: the same processing,
//! limits and quotas as the API's) and links it at the end of the body
//! before posting. With JavaScript on, the script uploads a picture as soon
//! as it is chosen, pasted or dropped (`POST /media`), puts its Markdown in
//! the text, and the form posts without a file.

use axum::extract::{Form, FromRequest, Multipart, Request};
use axum::http::header;
use bytes::{Bytes, BytesMut};
use serde::de::DeserializeOwned;

use super::forms::bad_form;
use crate::app::limits::ClientIp;
use crate::app::media::{check_length, check_rate, upload};
use crate::app::{AppError, AppResult, AppState};
use crate::model::User;
use crate::net::MAX_BODY_BYTES;
use crate::store::Store;

/// Bytes the text fields of a multipart form may take together: a body of
/// 40,000 characters, each up to 4 bytes, and the small fields.
const FIELDS_BUDGET: usize = 192 * 1024;
/// More parts than any of these forms has.
const MAX_FIELDS: usize = 16;

/// A form's fields, and the picture it carried if a file was chosen: the
/// refusal of one too large comes here too, after the text fields read
/// before it (the forms put the file last), so the form shows it with the
/// text kept.
pub struct PictureForm<T> {
    pub fields: T,
    pub picture: Option<AppResult<Picture>>,
}

pub struct Picture {
    pub bytes: Bytes,
    /// The file's name as the browser gave it: the picture's alt text.
    pub file_name: String,
    /// The upload's turn (`app::media::upload_slot`), taken before the
    /// body was read and held until the picture is stored.
    _slot: Option<tokio::sync::OwnedSemaphorePermit>,
}

impl<S: Store, T: DeserializeOwned> FromRequest<AppState<S>> for PictureForm<T> {
    type Rejection = AppError;

    async fn from_request(req: Request, state: &AppState<S>) -> Result<Self, AppError> {
        let multipart = req
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|t| t.trim_start().to_ascii_lowercase().starts_with("multipart/form-data"));
        if !multipart {
            // These routes lift the router's body limit for the picture;
            // a urlencoded form keeps it.
            if crate::app::media::declared_length(req.headers()).is_some_and(|n| n > MAX_BODY_BYTES as u64) {
                return Err(AppError::PayloadTooLarge(MAX_BODY_BYTES));
            }
            let req = req.map(|b| axum::body::Body::new(http_body_util::Limited::new(b, MAX_BODY_BYTES)));
            let Form(fields) = Form::<T>::from_request(req, state).await.map_err(|_| bad_form())?;
            return Ok(PictureForm { fields, picture: None });
        }
        check_length(state, crate::app::media::declared_length(req.headers()))?;
        let max = state.media.get().map_or(0, |p| p.max_bytes) as usize;
        let mut form = Multipart::from_request(req, state).await.map_err(|_| bad_form())?;
        let mut slot = match state.media.get() {
            Some(_) => Some(crate::app::media::upload_slot(state).await?),
            None => None,
        };
        let (mut pairs, mut text_bytes, mut picture) = (Vec::new(), 0usize, None);
        let mut count = 0;
        while let Some(mut field) = form.next_field().await.map_err(|_| bad_form())? {
            count += 1;
            if count > MAX_FIELDS {
                return Err(bad_form());
            }
            let name = field.name().unwrap_or_default().to_owned();
            text_bytes += name.len();
            let is_file = name == "file";
            let file_name = field.file_name().unwrap_or_default().to_owned();
            let mut buf = BytesMut::new();
            while let Some(chunk) = field.chunk().await.map_err(|_| bad_form())? {
                if is_file && buf.len() + chunk.len() > max {
                    // Not read further: what follows the file is lost.
                    picture = Some(Err(too_large(max)));
                    break;
                }
                text_bytes += if is_file { 0 } else { chunk.len() };
                if text_bytes > FIELDS_BUDGET {
                    return Err(AppError::PayloadTooLarge(FIELDS_BUDGET));
                }
                buf.extend_from_slice(&chunk);
            }
            match (is_file, buf.is_empty()) {
                _ if picture.as_ref().is_some_and(Result::is_err) => break,
                // A file input left empty still sends its (empty) part.
                (true, true) => {}
                (true, false) => picture = Some(Ok(Picture { bytes: buf.freeze(), file_name, _slot: slot.take() })),
                (false, _) => pairs.push((name, String::from_utf8_lossy(&buf).into_owned())),
            }
        }
        // The text fields as the urlencoded form they would have been, so
        // both encodings fill the same struct by the same rules.
        let encoded = serde_urlencoded::to_string(&pairs).map_err(|_| bad_form())?;
        let fields = serde_urlencoded::from_str(&encoded).map_err(|_| bad_form())?;
        Ok(PictureForm { fields, picture })
    }
}

/// `body` with `picture` uploaded for `user` and linked at its end (its own
/// paragraph); `body` as it was without one. The upload's refusals (type,
/// size, pixels, quotas, rate) are its errors, for the form to show.
pub async fn attach<S: Store>(
    state: &AppState<S>,
    user: &User,
    ip: ClientIp,
    picture: Option<AppResult<Picture>>,
    body: String,
) -> AppResult<String> {
    let Some(picture) = picture.transpose()? else { return Ok(body) };
    check_rate(state, user, ip)?;
    let uploaded = upload(state, user.clone(), picture.bytes).await?;
    let image = format!("![{}]({})", alt_text(&picture.file_name), uploaded.url);
    Ok(if body.trim().is_empty() { image } else { format!("{}\n\n{image}", body.trim_end()) })
}

/// 413 for a picture over `--media-max-bytes`, in words a form can show.
fn too_large(max: usize) -> AppError {
    let size = if max >= 1 << 20 { format!("{} MB", max >> 20) } else { format!("{} KB", max >> 10) };
    AppError::Rejected(
        axum::http::StatusCode::PAYLOAD_TOO_LARGE,
        "payload_too_large",
        format!("the picture is larger than {size}, the most this forum takes"),
    )
}

/// Alt text from a file's name: its stem, with what Markdown would read
/// as syntax left out; "picture" when nothing is left.
fn alt_text(file_name: &str) -> String {
    let stem = file_name.rsplit(['/', '\\']).next().unwrap_or_default();
    let stem = stem.rsplit_once('.').map_or(stem, |(s, _)| s);
    let alt: String = stem
        .chars()
        .map(|c| if matches!(c, '_' | '-' | '.') { ' ' } else { c })
        .filter(|c| c.is_alphanumeric() || *c == ' ')
        .take(100)
        .collect();
    let alt = alt.split_whitespace().collect::<Vec<_>>().join(" ");
    if alt.is_empty() { "picture".to_owned() } else { alt }
}

#[cfg(test)]
mod tests {
    use super::alt_text;

    #[test]
    fn alt_text_is_the_file_names_stem_without_markdown() {
        assert_eq!(alt_text("IMG_2041.jpg"), "IMG 2041");
        assert_eq!(alt_text("C:\\pics\\my-pi_cluster.final.png"), "my pi cluster final");
        assert_eq!(alt_text("](javascript:x)[.png"), "javascriptx");
        assert_eq!(alt_text(""), "picture");
        assert_eq!(alt_text("!!!.gif"), "picture");
        assert_eq!(alt_text(&"é".repeat(300)).chars().count(), 100);
    }
}
