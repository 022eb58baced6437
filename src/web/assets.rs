//! Static assets, embedded in the binary at compile time and served at
//! fingerprinted URLs (`/static/app.<hash>.css`) so they can be cached
//! forever: a changed file is a new URL. Each is gzipped once, on first
//! use, and the gzip variant is chosen by `Accept-Encoding`.

use std::io::Write;
use std::sync::LazyLock;

use axum::extract::Path;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;

pub struct Asset {
    /// The fingerprinted URL, `/static/app.0123456789ab.css`.
    pub url: String,
    content_type: &'static str,
    body: Bytes,
    gzip: Option<Bytes>,
}

impl Asset {
    fn new(stem: &str, ext: &str, content_type: &'static str, body: &'static [u8]) -> Asset {
        let hash = xxhash_rust::xxh3::xxh3_64(body);
        Asset {
            url: format!("/static/{stem}.{hash:012x}.{ext}", hash = hash & 0xffff_ffff_ffff),
            content_type,
            body: Bytes::from_static(body),
            gzip: gzip(body),
        }
    }

    /// Bytes on the wire for a client that takes gzip.
    pub fn wire_len(&self) -> usize {
        self.gzip.as_ref().map_or(self.body.len(), Bytes::len)
    }
}

fn gzip(data: &[u8]) -> Option<Bytes> {
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    enc.write_all(data).ok()?;
    let out = enc.finish().ok()?;
    (out.len() < data.len()).then(|| Bytes::from(out))
}

pub static CSS: LazyLock<Asset> =
    LazyLock::new(|| Asset::new("app", "css", "text/css; charset=utf-8", include_bytes!("../../static/app.css")));
pub static JS: LazyLock<Asset> =
    LazyLock::new(|| Asset::new("app", "js", "text/javascript; charset=utf-8", include_bytes!("../../static/app.js")));
pub static ICON: LazyLock<Asset> =
    LazyLock::new(|| Asset::new("icon", "svg", "image/svg+xml", include_bytes!("../../static/icon.svg")));

fn all() -> [&'static Asset; 3] {
    [&CSS, &JS, &ICON]
}

/// `GET /static/{file}`: only the current fingerprinted names exist.
pub async fn serve(Path(file): Path<String>, headers: HeaderMap) -> Response {
    let Some(asset) = all().into_iter().find(|a| a.url.strip_prefix("/static/") == Some(file.as_str())) else {
        return (StatusCode::NOT_FOUND, [(header::CONTENT_TYPE, "text/plain")], "no such asset\n").into_response();
    };
    let mut res = match (&asset.gzip, crate::cache::accepts_gzip(&headers)) {
        (Some(gz), true) => {
            let mut res = gz.clone().into_response();
            res.headers_mut().insert(header::CONTENT_ENCODING, HeaderValue::from_static("gzip"));
            res
        }
        _ => asset.body.clone().into_response(),
    };
    let h = res.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(asset.content_type));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("public, max-age=31536000, immutable"));
    h.insert(header::VARY, HeaderValue::from_static("accept-encoding"));
    res
}
