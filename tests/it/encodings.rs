//! zstd and Brotli variants of cached topics over a real socket: made off
//! the request path and sent on a later request, each decoding to the
//! identity bytes, chosen by `Accept-Encoding` with its q-values, each
//! with its own ETag (304s, HEAD, ranges), and fresh after a write.

use std::io::Read;

use reqwest::Method;

use crate::support::helpers::{Reply, TestApp, app_with_a_long_topic, fetch};

async fn get(app: &TestApp, method: Method, path: &str, headers: &[(&str, &str)]) -> Reply {
    let mut req = app.req(method, path);
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    fetch(req).await
}

/// The body decoded from its `Content-Encoding`, with the crates Pith
/// encodes with.
fn decode(reply: &Reply) -> Vec<u8> {
    let mut out = Vec::new();
    match reply.header("content-encoding") {
        None => out.clone_from(&reply.bytes),
        Some("gzip") => {
            flate2::read::GzDecoder::new(&reply.bytes[..]).read_to_end(&mut out).expect("gzip");
        }
        Some("zstd") => out = zstd::stream::decode_all(&reply.bytes[..]).expect("zstd"),
        Some("br") => {
            brotli::Decompressor::new(&reply.bytes[..], 4096).read_to_end(&mut out).expect("br");
        }
        Some(other) => panic!("unexpected coding {other}"),
    }
    out
}

/// The ETag of a variant: the identity's with the coding's suffix.
fn etag_of(identity: &str, coding: &str) -> String {
    format!("{}-{coding}\"", identity.trim_end_matches('"'))
}

/// Asks for the topic in zstd and in Brotli, and waits until both are made.
async fn made_in_both(app: &TestApp, path: &str) {
    get(app, Method::GET, path, &[("accept-encoding", "zstd")]).await;
    get(app, Method::GET, path, &[("accept-encoding", "br")]).await;
    app.state.cache.encoded().await;
}

/// A topic read once without a coding (so it is cached), its path and that answer.
async fn topic() -> (TestApp, String, Reply, String) {
    let (app, topic, alice) = app_with_a_long_topic().await;
    let path = format!("/api/v1/topics/{topic}");
    let plain = get(&app, Method::GET, &path, &[]).await;
    assert_eq!(plain.status, 200);
    (app, path, plain, alice)
}

#[tokio::test]
async fn zstd_and_brotli_arrive_on_a_later_request_and_decode_to_the_identity_bytes() {
    let (app, path, plain, _) = topic().await;
    let etag = plain.header("etag").expect("etag").to_owned();
    let mut sizes = Vec::new();
    for (accept, coding) in [("zstd", "zstd"), ("br", "br")] {
        // The first request gets what is ready: identity (this client
        // takes nothing else), or the variant if the maker was quicker.
        let first = get(&app, Method::GET, &path, &[("accept-encoding", accept)]).await;
        assert_eq!(first.status, 200);
        let ce = first.header("content-encoding");
        assert!(ce.is_none() || ce == Some(coding), "{accept}: {ce:?}");
        assert_eq!(decode(&first), plain.bytes, "{accept}: first answer");
        app.state.cache.encoded().await;
        let later = get(&app, Method::GET, &path, &[("accept-encoding", accept)]).await;
        assert_eq!(later.header("content-encoding"), Some(coding), "{accept}: made by now");
        assert_eq!(later.header("vary"), Some("accept-encoding"));
        assert_eq!(later.header("etag"), Some(etag_of(&etag, coding).as_str()), "an ETag of its own");
        assert_eq!(later.header("content-type"), Some("application/json"));
        assert!(later.bytes.len() < plain.bytes.len());
        assert_eq!(decode(&later), plain.bytes, "{accept}");
        sizes.push((later.bytes.len(), coding));
    }
    let browser = get(&app, Method::GET, &path, &[("accept-encoding", "gzip, deflate, br, zstd")]).await;
    let smallest = sizes.iter().min().map(|(_, coding)| *coding);
    assert_eq!(browser.header("content-encoding"), smallest, "a browser gets the smallest: {sizes:?}");
    assert_eq!(decode(&browser), plain.bytes);
    app.stop().await;
}

#[tokio::test]
async fn accept_encoding_q_values_choose_the_variant() {
    let (app, path, plain, _) = topic().await;
    made_in_both(&app, &path).await;
    let br = get(&app, Method::GET, &path, &[("accept-encoding", "br")]).await.bytes.len();
    let zstd = get(&app, Method::GET, &path, &[("accept-encoding", "zstd")]).await.bytes.len();
    let smallest = if br <= zstd { "br" } else { "zstd" };
    for (accept, want) in [
        ("br;q=0.5, zstd;q=0.9", Some("zstd")),
        ("zstd;q=0.5, br;q=0.9, gzip", Some("gzip")),
        ("gzip, br;q=0", Some("gzip")),
        ("gzip;q=0.2, br;q=0.1", Some("gzip")),
        ("x-gzip", Some("gzip")),
        ("*", Some(smallest)),
        ("*;q=0.1, br;q=0", Some("zstd")),
        ("identity;q=0, gzip", Some("gzip")),
        ("zstd, identity;q=0", Some("zstd")),
        ("gzip;q=0.5, identity", None),
        ("br;q=0, zstd;q=0, gzip;q=0", None),
        ("BR;Q=0.9, Zstd;q=0.8", Some("br")),
        ("br;q=2, zstd", Some("zstd")),
        ("deflate, compress", None),
        ("", None),
    ] {
        let r = get(&app, Method::GET, &path, &[("accept-encoding", accept)]).await;
        assert_eq!((r.status, r.header("content-encoding")), (200, want), "Accept-Encoding: {accept}");
        assert_eq!(r.header("vary"), Some("accept-encoding"), "{accept}");
        assert_eq!(decode(&r), plain.bytes, "{accept}");
    }
    app.stop().await;
}

#[tokio::test]
async fn each_variant_revalidates_with_its_own_etag_and_answers_head_and_ranges_whole() {
    let (app, path, plain, _) = topic().await;
    made_in_both(&app, &path).await;
    let identity_etag = plain.header("etag").expect("etag").to_owned();
    for accept in ["identity", "gzip", "zstd", "br"] {
        let full = get(&app, Method::GET, &path, &[("accept-encoding", accept)]).await;
        let etag = full.header("etag").expect("etag").to_owned();
        let want = if accept == "identity" { identity_etag.clone() } else { etag_of(&identity_etag, accept) };
        assert_eq!(etag, want, "{accept}");
        for inm in [etag.clone(), format!("W/{etag}"), format!("\"other\", {etag}")] {
            let again = get(&app, Method::GET, &path, &[("accept-encoding", accept), ("if-none-match", &inm)]).await;
            assert_eq!(again.status, 304, "{accept}, If-None-Match: {inm}");
            assert!(again.bytes.is_empty());
            assert_eq!(again.header("etag"), Some(etag.as_str()), "a 304 names the variant");
            assert_eq!(again.header("vary"), full.header("vary"));
        }
        // The same body in another coding is another representation: sent whole.
        let other = if accept == "br" { "zstd" } else { "br" };
        let moved = get(&app, Method::GET, &path, &[("accept-encoding", other), ("if-none-match", &etag)]).await;
        assert_eq!(moved.status, 200, "{accept}'s ETag asked with {other}");
        assert_eq!(decode(&moved), plain.bytes);

        let head = get(&app, Method::HEAD, &path, &[("accept-encoding", accept)]).await;
        assert_eq!(head.status, 200, "HEAD {accept}");
        assert!(head.bytes.is_empty());
        for name in ["etag", "content-encoding", "content-type", "vary", "content-length"] {
            assert_eq!(head.header(name), full.header(name), "HEAD {accept}: {name}");
        }

        // No ranges on cached topics, as before for gzip: the whole variant.
        let ranged = get(&app, Method::GET, &path, &[("accept-encoding", accept), ("range", "bytes=0-9")]).await;
        assert_eq!(ranged.status, 200, "Range with {accept}");
        assert_eq!(ranged.header("content-range"), None);
        assert_eq!(ranged.bytes, full.bytes);
    }
    app.stop().await;
}

#[tokio::test]
async fn a_write_makes_the_variants_again_from_the_fresh_body() {
    let (app, path, _, alice) = topic().await;
    // A browser asks for zstd only (as small as Brotli for far less CPU).
    let browser = [("accept-encoding", "gzip, deflate, br, zstd")];
    get(&app, Method::GET, &path, &browser).await;
    app.state.cache.encoded().await;
    let before = get(&app, Method::GET, &path, &browser).await;
    assert_eq!(before.header("content-encoding"), Some("zstd"));
    let topic: i64 = path.rsplit('/').next().expect("id").parse().expect("id");
    app.reply(topic, &alice, None, "a fresh reply for every coding").await;
    let plain = get(&app, Method::GET, &path, &[]).await;
    assert!(String::from_utf8_lossy(&plain.bytes).contains("a fresh reply for every coding"));
    let first = get(&app, Method::GET, &path, &browser).await;
    assert_eq!(decode(&first), plain.bytes, "fresh, in whatever coding was ready");
    assert_ne!(first.header("etag"), before.header("etag"));
    app.state.cache.encoded().await;
    let later = get(&app, Method::GET, &path, &browser).await;
    assert_eq!(later.header("content-encoding"), Some("zstd"));
    assert_eq!(later.header("etag"), Some(etag_of(plain.header("etag").expect("etag"), "zstd").as_str()));
    assert_eq!(decode(&later), plain.bytes);
    app.stop().await;
}
