//! Markdown rendered once, in the operation that writes a body, before the
//! store sees it: rendering on the SQLite writer thread would make every
//! write queued behind it wait, and on PostgreSQL it would hold a
//! connection.

use super::{AppError, AppResult};
use crate::model::{Body, Text};

/// Bodies up to this many bytes are rendered in place: tens of
/// microseconds. Longer ones go to the blocking pool, so a 40,000-character
/// post does not hold up an async worker for milliseconds.
const INLINE_BYTES: usize = 4096;

/// `body` with its sanitized HTML (`markdown::render`).
pub async fn render(body: Body) -> AppResult<Text> {
    if body.as_str().len() <= INLINE_BYTES {
        return Ok(Text::render(body));
    }
    tokio::task::spawn_blocking(move || Text::render(body))
        .await
        .map_err(|e| AppError::Internal(format!("rendering a body failed: {e}")))
}

/// `render` for a body that may be absent.
pub async fn render_some(body: Option<Body>) -> AppResult<Option<Text>> {
    match body {
        Some(body) => Ok(Some(render(body).await?)),
        None => Ok(None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_long_body_renders_off_the_async_worker_the_same_as_a_short_one() {
        let long = Body::parse(&"*word* ".repeat(2000)).expect("body");
        let rendered = render(long.clone()).await.expect("render");
        assert_eq!(rendered.html(), crate::markdown::render(long.as_str()));
        let short = Body::parse("<script>x</script>").expect("body");
        assert!(!render(short).await.expect("render").html().contains("<script"));
    }
}
