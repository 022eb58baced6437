//! The hot path (`pith::http::hot`): which requests it answers before the
//! router, and that its answers are the router's, byte for byte and
//! header for header, over a real socket.

use axum::http::{HeaderMap, HeaderValue, Method, Uri};
use pith::http::hot::{Answer, Hot};
use reqwest::Method as ReqMethod;
use serde_json::json;

use crate::helpers::{Reply, TestApp, app_with_a_long_topic, fetch};

fn answer(app: &TestApp, method: Method, uri: &str, headers: &HeaderMap, no_body: bool) -> Option<u16> {
    let hot = Hot::new(app.state.clone());
    let uri: Uri = uri.parse().expect("uri");
    hot.answer(&method, &uri, headers, no_body).map(|r| r.status().as_u16())
}

async fn get(app: &TestApp, path: &str, headers: &[(&str, &str)]) -> Reply {
    let mut req = app.req(ReqMethod::GET, path);
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    fetch(req).await
}

#[tokio::test]
async fn it_answers_cached_public_topics_only() {
    let (app, topic, alice) = app_with_a_long_topic().await;
    let path = format!("/api/v1/topics/{topic}");
    let none = HeaderMap::new();
    assert_eq!(answer(&app, Method::GET, &path, &none, true), None, "not rendered yet: the router renders it");
    assert_eq!(get(&app, &path, &[]).await.status, 200);
    assert_eq!(answer(&app, Method::GET, &path, &none, true), Some(200), "now cached");
    assert_eq!(answer(&app, Method::GET, &format!("{path}?sort=best&html=false"), &none, true), Some(200));
    for (method, uri, no_body) in [
        (Method::GET, format!("{path}?sort=new"), true), // another rendering, not cached yet
        (Method::GET, format!("{path}?sort=best&x=1"), true),
        (Method::GET, format!("{path}?sort=bogus"), true),
        (Method::GET, format!("{path}/"), true),
        (Method::GET, path.clone(), false),
        (Method::HEAD, path.clone(), true),
        (Method::DELETE, path.clone(), true),
    ] {
        assert_eq!(answer(&app, method.clone(), &uri, &none, no_body), None, "{method} {uri} (body: {})", !no_body);
    }
    let mut inm = HeaderMap::new();
    let etag = get(&app, &path, &[]).await.header("etag").expect("etag").to_owned();
    inm.insert("if-none-match", HeaderValue::from_str(&etag).expect("header"));
    assert_eq!(answer(&app, Method::GET, &path, &inm, true), Some(304));

    // A write evicts it (and renders it again in the background); what
    // the hot path answers next is the new rendering.
    let before = get(&app, &path, &[]).await.bytes;
    app.reply(topic, &alice, None, "one more").await;
    let after = get(&app, &path, &[]).await;
    assert!(String::from_utf8_lossy(&after.bytes).contains("one more"));
    assert_ne!(after.bytes, before);
    assert_eq!(answer(&app, Method::GET, &path, &none, true), Some(200));

    // Removed content makes the view depend on who asks: the router decides.
    let admin = app.admin_token.clone();
    let first = app.read_topic(topic, "best").await["posts"][0]["id"].as_i64().expect("a post");
    let (status, _) = app.post(&format!("/api/v1/posts/{first}/remove"), Some(&admin), json!({"reason": "spam"})).await;
    assert_eq!(status, 204);
    assert_eq!(get(&app, &path, &[]).await.status, 200);
    assert!(app.state.cache.get((topic, pith::cache::Variant::Json(pith::store::PostSort::Best))).is_some());
    assert_eq!(answer(&app, Method::GET, &path, &none, true), None, "restricted: not the hot path's");
    app.stop().await;
}

/// The same cached rendering asked for through the hot path (plain query)
/// and through the router (an unknown parameter sends it there).
#[tokio::test]
async fn its_answers_are_the_routers() {
    let (app, topic, _) = app_with_a_long_topic().await;
    let hot = format!("/api/v1/topics/{topic}?sort=best");
    let routed = format!("/api/v1/topics/{topic}?sort=best&via=router");
    assert_eq!(get(&app, &hot, &[]).await.status, 200, "rendered and cached");
    let etag = get(&app, &hot, &[]).await.header("etag").expect("etag").to_owned();
    let variants: [&[(&str, &str)]; 4] = [
        &[],
        &[("accept-encoding", "gzip")],
        &[("if-none-match", etag.as_str())],
        &[("x-request-id", "trace-me-1234")],
    ];
    for headers in variants {
        assert!(answer(&app, Method::GET, &hot, &to_map(headers), true).is_some(), "{headers:?}");
        let (a, b) = (get(&app, &hot, headers).await, get(&app, &routed, headers).await);
        assert_eq!(a.status, b.status, "{headers:?}");
        assert_eq!(a.bytes, b.bytes, "{headers:?}");
        for name in ["content-type", "content-encoding", "etag", "vary", "cache-control", "content-length"] {
            assert_eq!(a.header(name), b.header(name), "{name} with {headers:?}");
        }
        let id = a.header("x-request-id").expect("a request id");
        match headers.iter().find(|(k, _)| *k == "x-request-id") {
            Some((_, sent)) => assert_eq!(id, *sent, "a sane client id is echoed"),
            None => assert!(id.len() == 16 && id != b.header("x-request-id").expect("id"), "fresh: {id}"),
        }
    }
    let bad = get(&app, &hot, &[("x-request-id", "no spaces allowed")]).await;
    assert_ne!(bad.header("x-request-id"), Some("no spaces allowed"));
    app.stop().await;
}

fn to_map(headers: &[(&str, &str)]) -> HeaderMap {
    let mut map = HeaderMap::new();
    for (k, v) in headers {
        map.insert(
            axum::http::HeaderName::from_bytes(k.as_bytes()).expect("name"),
            HeaderValue::from_str(v).expect("value"),
        );
    }
    map
}
