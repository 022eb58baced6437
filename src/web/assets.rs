//! Static assets, embedded in the binary at compile time and served at
//! fingerprinted URLs (`/static/app.<hash>.css`) so they can be cached
//! forever: a changed file is a new URL. Each is compressed once, in
//! gzip, zstd and Brotli at their best levels (a few kilobytes: tens of
//! milliseconds, on a blocking thread, on the first request for it), and
//! the variant is chosen by `Accept-Encoding` (the smallest of those the
//! client weighs highest).

use std::sync::{LazyLock, OnceLock};

use axum::extract::Path;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;

use crate::cache::Accepted;
use crate::cache::encoding::{self, COMPRESSED, Encoding};

pub struct Asset {
    /// The fingerprinted URL, `/static/app.0123456789ab.css`.
    pub url: String,
    content_type: &'static str,
    body: Bytes,
    /// The compressed variants, in `COMPRESSED`'s order; `None` where the
    /// coding saves nothing.
    coded: OnceLock<[Option<Bytes>; 3]>,
}

impl Asset {
    fn new(stem: &str, ext: &str, content_type: &'static str, body: &'static [u8]) -> Asset {
        let hash = xxhash_rust::xxh3::xxh3_64(body);
        Asset {
            url: format!("/static/{stem}.{hash:012x}.{ext}", hash = hash & 0xffff_ffff_ffff),
            content_type,
            body: Bytes::from_static(body),
            coded: OnceLock::new(),
        }
    }

    /// The compressed variants, made now if they are not yet.
    fn coded(&self) -> &[Option<Bytes>; 3] {
        self.coded.get_or_init(|| COMPRESSED.map(|e| best(&self.body, e)))
    }

    /// The body in `encoding`, if that saves bytes.
    fn variant(&self, encoding: Encoding) -> Option<&Bytes> {
        let i = COMPRESSED.iter().position(|e| *e == encoding)?;
        self.coded()[i].as_ref()
    }

    /// Bytes on the wire for a client that takes `encoding`.
    pub fn wire_len(&self, encoding: Encoding) -> usize {
        self.variant(encoding).map_or(self.body.len(), Bytes::len)
    }
}

/// `data` at the coding's best level: made once per process.
fn best(data: &[u8], encoding: Encoding) -> Option<Bytes> {
    let out = match encoding {
        Encoding::Identity => return None,
        Encoding::Gzip => encoding::gzip(data, 9),
        Encoding::Zstd => encoding::zstd(data, 19),
        Encoding::Brotli => encoding::brotli(data, 11, &|| true),
    };
    out.ok().filter(|out| out.len() < data.len()).map(Bytes::from)
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
    if asset.coded.get().is_none() {
        // If the blocking pool fails, `coded` compresses inline instead.
        let _ = tokio::task::spawn_blocking(move || {
            asset.coded();
        })
        .await;
    }
    let accepted = Accepted::parse(headers.get(header::ACCEPT_ENCODING).map(HeaderValue::as_bytes));
    let encoding = accepted.choose(|e| asset.variant(e).map(Bytes::len));
    let mut res = asset.variant(encoding).unwrap_or(&asset.body).clone().into_response();
    let h = res.headers_mut();
    if encoding != Encoding::Identity {
        h.insert(header::CONTENT_ENCODING, HeaderValue::from_static(encoding.name()));
    }
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(asset.content_type));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("public, max-age=31536000, immutable"));
    h.insert(header::VARY, HeaderValue::from_static("accept-encoding"));
    res
}
