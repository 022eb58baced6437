//! The rendered-topic cache as a client sees it: strong ETags, 304s,
//! gzip, and fresh bytes after every kind of write (zstd and Brotli:
//! `encodings`).

use std::io::Read;

use reqwest::Method;
use serde_json::json;

use crate::support::helpers::{Reply, TestApp, app_with_a_long_topic, fetch};

async fn get_topic(app: &TestApp, topic: i64, headers: &[(&str, &str)]) -> Reply {
    let mut req = app.req(Method::GET, &format!("/api/v1/topics/{topic}"));
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    fetch(req).await
}

fn gunzip(bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    flate2::read::GzDecoder::new(bytes).read_to_end(&mut out).expect("valid gzip");
    out
}

#[tokio::test]
async fn a_topic_carries_a_strong_etag_that_a_revalidation_matches_with_304() {
    let (app, topic, _) = app_with_a_long_topic().await;
    let first = get_topic(&app, topic, &[]).await;
    assert_eq!(first.status, 200);
    assert_eq!(first.header("content-type"), Some("application/json"));
    assert!(first.header("content-encoding").is_none(), "identity unless asked");
    let etag = first.header("etag").expect("an ETag").to_owned();
    assert!(etag.starts_with('"') && etag.ends_with('"') && etag.len() > 2, "strong, quoted: {etag}");
    assert_eq!(get_topic(&app, topic, &[]).await.header("etag"), Some(etag.as_str()), "stable while unchanged");

    for inm in [etag.clone(), format!("W/{etag}"), format!("\"nope\", {etag}"), "*".to_owned()] {
        let again = get_topic(&app, topic, &[("if-none-match", &inm)]).await;
        assert_eq!(again.status, 304, "If-None-Match: {inm}");
        assert!(again.bytes.is_empty(), "a 304 has no body");
        assert_eq!(again.header("etag"), Some(etag.as_str()));
    }
    let other = get_topic(&app, topic, &[("if-none-match", "\"something-else\"")]).await;
    assert_eq!(other.status, 200);
    assert_eq!(other.bytes, first.bytes);
    app.stop().await;
}

#[tokio::test]
async fn a_304_repeats_the_vary_and_cache_control_of_the_200() {
    let (app, topic, _) = app_with_a_long_topic().await;
    let full = get_topic(&app, topic, &[]).await;
    let etag = full.header("etag").expect("etag").to_owned();
    let not_modified = get_topic(&app, topic, &[("if-none-match", &etag)]).await;
    assert_eq!(not_modified.status, 304);
    // RFC 9110 section 15.4.5: a 304 must carry the Cache-Control and Vary
    // the 200 would have carried.
    for name in ["vary", "cache-control"] {
        assert_eq!(not_modified.header(name), full.header(name), "{name}");
    }
    app.stop().await;
}

#[tokio::test]
async fn a_client_that_accepts_gzip_gets_the_same_bytes_compressed() {
    let (app, topic, _) = app_with_a_long_topic().await;
    let plain = get_topic(&app, topic, &[]).await;
    assert_eq!(plain.header("vary"), Some("accept-encoding"));
    // gzip's own ETag: the identity's with a suffix (tests/it/encodings.rs
    // has zstd and Brotli, which arrive off the request path).
    let etag = plain.header("etag").expect("etag").trim_end_matches('"').to_owned() + "-gzip\"";
    for accept in ["gzip", "gzip, deflate", "br;q=0, gzip;q=0.8", "*;q=0.5, zstd;q=0, br;q=0"] {
        let zipped = get_topic(&app, topic, &[("accept-encoding", accept)]).await;
        assert_eq!(zipped.status, 200);
        assert_eq!(zipped.header("content-encoding"), Some("gzip"), "Accept-Encoding: {accept}");
        assert_eq!(zipped.header("vary"), Some("accept-encoding"));
        assert_eq!(zipped.header("etag"), Some(etag.as_str()));
        assert!(zipped.bytes.len() < plain.bytes.len(), "compression saves bytes");
        assert_eq!(gunzip(&zipped.bytes), plain.bytes, "Accept-Encoding: {accept}");
    }
    for refuse in ["identity", "gzip;q=0", "deflate", ""] {
        let unzipped = get_topic(&app, topic, &[("accept-encoding", refuse)]).await;
        assert!(unzipped.header("content-encoding").is_none(), "Accept-Encoding: {refuse}");
        assert_eq!(unzipped.bytes, plain.bytes);
    }
    app.stop().await;
}

/// Reads the topic in all three orders (caching each), applies `write`,
/// and checks that every order now has a new ETag and the fresh content.
async fn every_order_is_fresh_after(
    app: &TestApp,
    topic: i64,
    write: impl AsyncFnOnce(),
    fresh: impl Fn(&serde_json::Value) -> bool,
) {
    let mut before = Vec::new();
    for sort in ["best", "new", "old"] {
        let path = format!("/api/v1/topics/{topic}?sort={sort}");
        let reply = fetch(app.req(Method::GET, &path)).await;
        let etag = reply.header("etag").expect("etag").to_owned();
        // Twice, so the second answer surely comes from the cache.
        let cached = fetch(app.req(Method::GET, &path).header("if-none-match", &etag)).await;
        assert_eq!(cached.status, 304);
        assert!(!fresh(&reply.json()), "{sort}: the write has not happened yet");
        before.push((path, etag));
    }
    write().await;
    for (path, etag) in before {
        let after = fetch(app.req(Method::GET, &path).header("if-none-match", &etag)).await;
        assert_eq!(after.status, 200, "{path}: the old ETag no longer matches");
        let new_etag = after.header("etag").expect("etag");
        assert_ne!(new_etag, etag, "{path}");
        assert!(fresh(&after.json()), "{path}: fresh body {:?}", after.json());
        let zipped = fetch(app.req(Method::GET, &path).header("accept-encoding", "gzip")).await;
        let gzip_etag = new_etag.trim_end_matches('"').to_owned() + "-gzip\"";
        assert_eq!(zipped.header("etag"), Some(gzip_etag.as_str()), "{path}: gzip variant is fresh too");
        assert_eq!(gunzip(&zipped.bytes), after.bytes, "{path}");
    }
}

#[tokio::test]
async fn every_kind_of_write_to_a_topic_changes_its_etag_and_body() {
    let (app, topic, alice) = app_with_a_long_topic().await;
    let bob = app.user("bob").await;
    let base = format!("/api/v1/topics/{topic}");
    let first = app.read_topic(topic, "old").await["posts"][0]["id"].as_i64().expect("id");

    every_order_is_fresh_after(
        &app,
        topic,
        async || assert_eq!(app.post(&format!("{base}/posts"), Some(&bob), json!({"body": "new reply"})).await.0, 201),
        |t| t["posts"].as_array().expect("posts").iter().any(|p| p["body"] == "new reply"),
    )
    .await;
    every_order_is_fresh_after(
        &app,
        topic,
        async || {
            assert_eq!(
                app.patch(&format!("/api/v1/posts/{first}"), Some(&alice), json!({"body": "edited"})).await.0,
                200
            )
        },
        |t| t["posts"].as_array().expect("posts").iter().any(|p| p["body"] == "edited"),
    )
    .await;
    every_order_is_fresh_after(
        &app,
        topic,
        async || {
            assert_eq!(app.post(&format!("/api/v1/posts/{first}/vote"), Some(&bob), json!({"value": 1})).await.0, 200)
        },
        |t| t["posts"].as_array().expect("posts").iter().any(|p| p["score"] == 1),
    )
    .await;
    every_order_is_fresh_after(
        &app,
        topic,
        async || assert_eq!(app.post(&format!("{base}/vote"), Some(&bob), json!({"value": -1})).await.0, 200),
        |t| t["topic"]["score"] == -1,
    )
    .await;
    every_order_is_fresh_after(
        &app,
        topic,
        async || assert_eq!(app.patch(&base, Some(&alice), json!({"body": "new topic body"})).await.0, 200),
        |t| t["topic"]["body"] == "new topic body",
    )
    .await;
    every_order_is_fresh_after(
        &app,
        topic,
        async || assert_eq!(app.delete(&format!("/api/v1/posts/{first}"), Some(&alice)).await.0, 204),
        |t| t["posts"].as_array().expect("posts").iter().any(|p| p["deleted"] == true),
    )
    .await;
    every_order_is_fresh_after(
        &app,
        topic,
        async || assert_eq!(app.delete(&base, Some(&alice)).await.0, 204),
        |t| t["topic"]["deleted"] == true,
    )
    .await;
    app.stop().await;
}

#[tokio::test]
async fn a_write_to_one_topic_leaves_another_topics_etag_alone() {
    let (app, topic, alice) = app_with_a_long_topic().await;
    let other = app.topic("raspi", &alice, "Another").await;
    let before = get_topic(&app, other, &[]).await;
    app.reply(topic, &alice, None, "elsewhere").await;
    let after = get_topic(&app, other, &[("if-none-match", before.header("etag").expect("etag"))]).await;
    assert_eq!(after.status, 304);
    app.stop().await;
}

/// A write that cannot go into the cached renderings in place (an edit)
/// renders again the API renderings that were cached, before anyone asks;
/// a topic nobody read is left alone.
#[tokio::test]
async fn an_edit_renders_a_cached_topic_again_without_a_reader() {
    use pith::cache::Variant;
    use pith::store::PostSort;
    let (app, topic, alice) = app_with_a_long_topic().await;
    let unread = app.topic("raspi", &alice, "Nobody reads this").await;
    let unread_post = app.reply(unread, &alice, None, "nobody reads this either").await;
    let first = get_topic(&app, topic, &[]).await.json();
    let post = first["posts"][0]["id"].as_i64().expect("a post");
    assert_eq!(fetch(app.req(Method::GET, &format!("/api/v1/topics/{topic}?sort=new&html=true"))).await.status, 200);
    let (best, new_html) = ((topic, Variant::Json(PostSort::Best)), (topic, Variant::JsonHtml(PostSort::New)));
    let before = app.state.cache.get(best).expect("cached by the read");

    let edit = json!({"body": "rendered before anyone asks"});
    assert_eq!(app.patch(&format!("/api/v1/posts/{post}"), Some(&alice), edit.clone()).await.0, 200);
    assert_eq!(app.patch(&format!("/api/v1/posts/{unread_post}"), Some(&alice), edit).await.0, 200);
    let mut waited = 0;
    let fresh = loop {
        match (app.state.cache.get(best), app.state.cache.get(new_html)) {
            (Some(a), Some(b)) if !std::sync::Arc::ptr_eq(&a, &before) => break (a, b),
            _ if waited >= 500 => panic!("not rendered again within 5 s"),
            _ => {
                tokio::time::sleep(std::time::Duration::from_millis(10)).await;
                waited += 1;
            }
        }
    };
    for rendered in [&fresh.0, &fresh.1] {
        let json: serde_json::Value = serde_json::from_slice(&rendered.body).expect("json");
        let posts = json["posts"].as_array().expect("posts");
        assert!(posts.iter().any(|p| p["id"] == post && p["body"] == "rendered before anyone asks"), "{json}");
    }
    assert!(app.state.cache.get((unread, Variant::Json(PostSort::Best))).is_none(), "never read: not rendered");
    let served = get_topic(&app, topic, &[]).await;
    assert_eq!(served.bytes, fresh.0.body.to_vec(), "the next reader gets the new rendering");
    app.stop().await;
}

/// Writes that come faster than reads: each acknowledged post is in the
/// next read, whether it went into the cached rendering in place or found
/// the topic evicted (a concurrent write replaced the rendering first).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_read_after_writes_with_no_read_between_them_sees_every_acknowledged_post() {
    let (app, topic, alice) = app_with_a_long_topic().await;
    let app = std::sync::Arc::new(app);
    assert_eq!(get_topic(&app, topic, &[]).await.status, 200, "cached and read: the first write renders it again");
    for round in 0..3 {
        let writers: Vec<_> = (0..8)
            .map(|w| {
                let (app, alice) = (app.clone(), alice.clone());
                tokio::spawn(async move { app.reply(topic, &alice, None, &format!("round {round}, writer {w}")).await })
            })
            .collect();
        let mut acked = Vec::new();
        for w in writers {
            acked.push(w.await.expect("writer"));
        }
        let read = get_topic(&app, topic, &[]).await;
        let json: serde_json::Value = serde_json::from_slice(&read.bytes).expect("json");
        let ids: Vec<i64> = json["posts"].as_array().expect("posts").iter().filter_map(|p| p["id"].as_i64()).collect();
        for id in acked {
            assert!(ids.contains(&id), "round {round}: acknowledged post {id} missing from the next read");
        }
        assert_eq!(json["topic"]["post_count"], ids.len(), "round {round}");
    }
    let Ok(app) = std::sync::Arc::try_unwrap(app) else { panic!("a task still holds the app") };
    app.stop().await;
}

/// A vote on a read topic makes its new rendering from the old bytes and
/// the score read again, not from the vote (`app::read::evict`): votes
/// that commit in one order may take effect in the other. Every read after
/// a vote is acknowledged counts it, and once they are all in, the topic
/// reads as a render from scratch would.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_votes_on_a_read_topic_each_count_in_the_next_read() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicI64, Ordering};
    let (app, topic, _) = app_with_a_long_topic().await;
    let before = get_topic(&app, topic, &[]).await;
    assert_eq!(before.json()["topic"]["score"], 0);
    let app_ref = &app;
    let voters: Vec<String> =
        futures_util::future::join_all((0..16).map(|i| async move { app_ref.user(&format!("voter{i}")).await })).await;
    let app = Arc::new(app);
    let acked = Arc::new(AtomicI64::new(0));
    let tasks: Vec<_> = voters
        .into_iter()
        .map(|token| {
            let (app, acked) = (app.clone(), acked.clone());
            tokio::spawn(async move {
                let (status, body) =
                    app.post(&format!("/api/v1/topics/{topic}/vote"), Some(&token), json!({"value": 1})).await;
                assert_eq!(status, 200, "{body}");
                let counted = acked.fetch_add(1, Ordering::SeqCst) + 1;
                let read = get_topic(&app, topic, &[]).await.json();
                let score = read["topic"]["score"].as_i64().expect("score");
                assert!(score >= counted, "a read after {counted} acknowledged votes shows {score}");
            })
        })
        .collect();
    for t in tasks {
        t.await.expect("voter");
    }
    let after = get_topic(&app, topic, &[]).await;
    let mut json = after.json();
    assert_eq!(json["topic"]["score"], 16);
    json["topic"]["score"] = 0.into();
    assert_eq!(json, before.json(), "only the score changed");
    app.state.cache.clear();
    let rendered = get_topic(&app, topic, &[]).await;
    assert_eq!(rendered.bytes, after.bytes, "the same bytes as a render from scratch");
    assert_eq!(rendered.header("etag"), after.header("etag"));
    let zipped = get_topic(&app, topic, &[("accept-encoding", "gzip")]).await;
    assert_eq!(gunzip(&zipped.bytes), after.bytes);
    let Ok(app) = Arc::try_unwrap(app) else { panic!("a task still holds the app") };
    app.stop().await;
}

/// Every API rendering of a topic: each order, with and without HTML.
const RENDERINGS: [&str; 6] =
    ["sort=best", "sort=new", "sort=old", "sort=best&html=true", "sort=new&html=true", "sort=old&html=true"];

async fn get_rendering(app: &TestApp, topic: i64, query: &str) -> Reply {
    fetch(app.req(Method::GET, &format!("/api/v1/topics/{topic}?{query}"))).await
}

/// The bytes of each of `RENDERINGS`.
async fn read_all(app: &TestApp, topic: i64) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    for q in RENDERINGS {
        out.push(get_rendering(app, topic, q).await.bytes);
    }
    out
}

/// A new post goes into the cached renderings of its topic in place
/// (`app::read::add_post`), where a render would put it: read after read,
/// replies (some nested, some to posts voted up or down) come out of the
/// cache, without a render, byte for byte what a render from scratch
/// makes; and replies acknowledged at once each show in the next read.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn new_posts_go_into_the_cached_renderings_where_a_render_puts_them() {
    use std::sync::Arc;
    let (app, topic, alice) = app_with_a_long_topic().await;
    let first = get_topic(&app, topic, &[]).await.json();
    let posts: Vec<i64> =
        first["posts"].as_array().expect("posts").iter().map(|p| p["id"].as_i64().expect("id")).collect();
    let bob = app.user("bob").await;
    app.vote("posts", posts[3], &bob, 1).await;
    app.vote("posts", posts[1], &bob, -1).await;
    read_all(&app, topic).await;
    let misses = || app.state.cache.misses.get();
    for (parent, body) in [
        (None, "a new top-level post"),
        (Some(posts[3]), "a reply to the best post"),
        (Some(posts[1]), "and to the worst"),
    ] {
        let id = app.reply(topic, &alice, parent, body).await;
        let before = misses();
        let cached = read_all(&app, topic).await;
        assert_eq!(misses(), before, "post {id}: every rendering answered from the cache");
        app.state.cache.clear();
        let rendered = read_all(&app, topic).await;
        for ((q, cached), rendered) in RENDERINGS.iter().zip(&cached).zip(&rendered) {
            assert_eq!(String::from_utf8_lossy(cached), String::from_utf8_lossy(rendered), "{q} after post {id}");
        }
        let json: serde_json::Value = serde_json::from_slice(&cached[0]).expect("json");
        assert_eq!(json["topic"]["post_count"].as_i64(), Some(json["posts"].as_array().expect("posts").len() as i64));
    }

    let app = Arc::new(app);
    let writers: Vec<String> = futures_util::future::join_all((0..12).map(|i| {
        let app = app.clone();
        async move { app.user(&format!("writer{i}")).await }
    }))
    .await;
    let tasks: Vec<_> = writers
        .into_iter()
        .enumerate()
        .map(|(i, token)| {
            let app = app.clone();
            let parent = (i % 2 == 1).then_some(posts[i % posts.len()]);
            tokio::spawn(async move {
                let id = app.reply(topic, &token, parent, &format!("reply {i}, at the same time as the others")).await;
                let read = get_rendering(&app, topic, RENDERINGS[i % RENDERINGS.len()]).await.json();
                let ids: Vec<i64> =
                    read["posts"].as_array().expect("posts").iter().map(|p| p["id"].as_i64().expect("id")).collect();
                assert!(ids.contains(&id), "post {id} acknowledged, then missing from the next read");
            })
        })
        .collect();
    for t in tasks {
        t.await.expect("writer");
    }
    let cached = read_all(&app, topic).await;
    app.state.cache.clear();
    let rendered = read_all(&app, topic).await;
    for ((q, cached), rendered) in RENDERINGS.iter().zip(&cached).zip(&rendered) {
        assert_eq!(String::from_utf8_lossy(cached), String::from_utf8_lossy(rendered), "{q} after the replies at once");
    }
    let Ok(app) = Arc::try_unwrap(app) else { panic!("a task still holds the app") };
    app.stop().await;
}

/// A post patches only the renderings a reader got since they were made
/// (`app::read::add_post`): a rendering patched by one post and not read
/// before the next is evicted by that one, not copied again for nobody,
/// and its next reader renders it with both posts; a topic read between
/// two posts is patched at each, answered from the cache.
#[tokio::test]
async fn a_post_evicts_the_renderings_nobody_read_since_the_last_post() {
    let (app, topic, alice) = app_with_a_long_topic().await;
    let misses = || app.state.cache.misses.get();
    assert_eq!(get_topic(&app, topic, &[]).await.status, 200);
    let first = app.reply(topic, &alice, None, "read before: goes into the cached rendering").await;
    let before = misses();
    let read = get_topic(&app, topic, &[]).await;
    assert_eq!(misses(), before, "a read rendering takes the post in place");
    assert!(
        String::from_utf8_lossy(&read.bytes).contains(&format!("\"id\":{first},")),
        "{first} in the patched rendering"
    );

    let second = app.reply(topic, &alice, None, "patched into a rendering the next post finds unread").await;
    let third = app.reply(topic, &alice, None, "no read since the last post: evicts").await;
    let before = misses();
    let read = get_topic(&app, topic, &[]).await;
    assert_eq!(misses(), before + 1, "the unread rendering was evicted, so this read renders");
    let json = read.json();
    let ids: Vec<i64> = json["posts"].as_array().expect("posts").iter().filter_map(|p| p["id"].as_i64()).collect();
    for id in [first, second, third] {
        assert!(ids.contains(&id), "acknowledged post {id} missing from the next read");
    }
    assert_eq!(json["topic"]["post_count"], ids.len());

    let fourth = app.reply(topic, &alice, None, "read since it was rendered: patched again").await;
    let before = misses();
    let cached = get_topic(&app, topic, &[]).await;
    assert_eq!(misses(), before, "a read rendering takes the post in place");
    assert!(String::from_utf8_lossy(&cached.bytes).contains(&format!("\"id\":{fourth},")));
    app.state.cache.clear();
    let rendered = get_topic(&app, topic, &[]).await;
    assert_eq!(
        String::from_utf8_lossy(&cached.bytes),
        String::from_utf8_lossy(&rendered.bytes),
        "the patched rendering is what a render makes"
    );
    app.stop().await;
}
