//! Full-text search (`GET /api/v1/search`) and the HTML stored with every
//! body: what is found and in which order, what must never be found, that
//! no query string breaks it, paging; `body_html` as written, sanitized,
//! and rendered for databases that predate it.

use pith::store::Store;
use pith::store::sqlite::{SqliteOptions, SqliteStore};
use reqwest::Method;
use serde_json::{Value, json};

use crate::support::helpers::{TestApp, assert_error, assert_error_shape, fetch, spawn_app};

/// `GET /api/v1/search` with `query` (already encoded); the status and JSON.
async fn search(app: &TestApp, query: &str) -> (u16, Value) {
    app.get(&format!("/api/v1/search?{query}")).await
}

/// The ids of what a successful search found: topic ids for topic hits,
/// post ids for post hits.
async fn found(app: &TestApp, query: &str) -> Vec<i64> {
    let (status, body) = search(app, query).await;
    assert_eq!(status, 200, "{query}: {body}");
    hit_ids(&body)
}

fn hit_ids(body: &Value) -> Vec<i64> {
    body["hits"]
        .as_array()
        .expect("hits")
        .iter()
        .map(|h| match h["type"].as_str() {
            Some("topic") => h["topic"]["id"].as_i64().expect("topic id"),
            Some("post") => h["post"]["id"].as_i64().expect("post id"),
            other => panic!("unknown hit type {other:?} in {h}"),
        })
        .collect()
}

/// Creates a topic with a body; returns its id.
async fn topic(app: &TestApp, community: &str, token: &str, title: &str, body: &str) -> i64 {
    let (status, topic) = app
        .post(&format!("/api/v1/communities/{community}/topics"), Some(token), json!({"title": title, "body": body}))
        .await;
    assert_eq!(status, 201, "{topic}");
    topic["id"].as_i64().expect("id")
}

/// Percent-encodes a query value.
fn enc(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

#[tokio::test]
async fn topics_are_found_by_title_and_body_words_and_posts_by_theirs() {
    let app = spawn_app().await;
    app.community("raspi").await;
    let alice = app.user("alice").await;
    let cards = topic(&app, "raspi", &alice, "Which SD card lasts?", "Mine died after a month of logging.").await;
    let cases = topic(&app, "raspi", &alice, "Cases with fans", "Passive cooling is quieter.").await;
    let p = app.reply(cards, &alice, None, "Industrial cards survive power cuts.").await;

    assert_eq!(found(&app, "q=logging").await, [cards], "a body word");
    assert_eq!(found(&app, "q=fans").await, [cases], "a title word");
    assert_eq!(found(&app, "q=FANS").await, [cases], "case does not matter");
    assert_eq!(found(&app, "q=power%20cuts&type=posts").await, [p]);
    assert!(found(&app, "q=power%20cuts").await.is_empty(), "topics do not include their replies");
    assert!(found(&app, "q=logging&type=posts").await.is_empty());
    // Every word must match, anywhere.
    assert_eq!(found(&app, "q=month%20logging").await, [cards]);
    assert!(found(&app, "q=month%20cooling").await.is_empty());
    // Word endings and accents fold: "survives" finds "survive", "cáses" finds "Cases".
    assert_eq!(found(&app, "q=survives&type=posts").await, [p]);
    assert_eq!(found(&app, "q=c%C3%A1ses").await, [cases], "cáses finds cases");

    // A hit carries the whole item and a snippet with the match marked.
    let (_, body) = search(&app, "q=logging").await;
    let hit = &body["hits"][0];
    assert_eq!(hit["type"], "topic");
    assert_eq!(hit["topic"]["title"], "Which SD card lasts?");
    assert_eq!(hit["snippet"], "Mine died after a month of <mark>logging</mark>.");
    assert_eq!(body["next"], Value::Null);
    let (_, body) = search(&app, "q=industrial&type=posts").await;
    let hit = &body["hits"][0];
    assert_eq!((hit["type"].as_str(), hit["topic_title"].as_str()), (Some("post"), Some("Which SD card lasts?")));
    assert_eq!((hit["community"].as_str(), hit["post"]["topic_id"].as_i64()), (Some("raspi"), Some(cards)));
    assert_eq!(hit["snippet"], "<mark>Industrial</mark> cards survive power cuts.");
}

#[tokio::test]
async fn a_title_match_and_more_matches_rank_higher() {
    let app = spawn_app().await;
    app.community("raspi").await;
    let alice = app.user("alice").await;
    let body_once = topic(&app, "raspi", &alice, "Power supplies", "A kernel panic once.").await;
    let in_title = topic(&app, "raspi", &alice, "Kernel panic at boot", "Nothing else to say here.").await;
    let body_thrice = topic(&app, "raspi", &alice, "Logs", "kernel this, kernel that, kernel everywhere.").await;
    let unrelated = topic(&app, "raspi", &alice, "Cases", "Plastic or metal.").await;
    let order = found(&app, "q=kernel").await;
    assert_eq!(order.first(), Some(&in_title), "the title counts most: {order:?}");
    assert!(!order.contains(&unrelated));
    let pos = |id| order.iter().position(|&x| x == id).expect("found");
    assert!(pos(body_thrice) < pos(body_once), "three matches beat one: {order:?}");

    let t = app.topic("raspi", &alice, "Replies").await;
    let once = app.reply(t, &alice, None, "swap wears the card out, and a long long long long tail of words").await;
    let twice = app.reply(t, &alice, None, "swap here, swap there").await;
    assert_eq!(found(&app, "q=swap&type=posts").await, [twice, once]);
}

#[tokio::test]
async fn the_last_word_finds_words_it_begins_and_a_star_makes_any_word_a_prefix() {
    let app = spawn_app().await;
    app.community("raspi").await;
    let alice = app.user("alice").await;
    let berry = topic(&app, "raspi", &alice, "Raspberry models", "Zero, 3, 4 and 5.").await;
    let pico = topic(&app, "raspi", &alice, "Pico boards", "Microcontrollers for small jobs.").await;
    assert_eq!(found(&app, "q=rasp").await, [berry], "the last word is a prefix");
    assert_eq!(found(&app, "q=micro").await, [pico]);
    assert!(found(&app, "q=rasp%20models").await.is_empty(), "only the last word is, without a star");
    assert_eq!(found(&app, "q=rasp*%20models").await, [berry], "a star makes any word a prefix");
    assert!(found(&app, "q=pi").await.is_empty(), "a short last word must match whole");
    assert_eq!(found(&app, "q=pi*").await, [pico], "unless starred");
}

#[tokio::test]
async fn edits_are_found_by_their_new_words_and_no_longer_by_their_old_ones() {
    let app = spawn_app().await;
    app.community("raspi").await;
    let alice = app.user("alice").await;
    let t = topic(&app, "raspi", &alice, "Overclocking", "Try arm_freq first.").await;
    let p = app.reply(t, &alice, None, "My board runs hot.").await;
    assert_eq!(found(&app, "q=hot&type=posts").await, [p]);

    let (status, _) =
        app.patch(&format!("/api/v1/posts/{p}"), Some(&alice), json!({"body": "It runs cool now."})).await;
    assert_eq!(status, 200);
    assert!(found(&app, "q=hot&type=posts").await.is_empty(), "the old words are gone");
    assert_eq!(found(&app, "q=cool&type=posts").await, [p]);

    let (status, _) = app.patch(&format!("/api/v1/topics/{t}"), Some(&alice), json!({"body": "Use a heatsink."})).await;
    assert_eq!(status, 200);
    assert!(found(&app, "q=arm_freq").await.is_empty());
    assert_eq!(found(&app, "q=heatsink").await, [t]);
    let (status, _) = app.patch(&format!("/api/v1/topics/{t}"), Some(&alice), json!({"body": null})).await;
    assert_eq!(status, 200);
    assert!(found(&app, "q=heatsink").await.is_empty(), "a cleared body is not found");
    assert_eq!(found(&app, "q=overclocking").await, [t], "the title still is");
    let (_, body) = search(&app, "q=overclocking").await;
    assert_eq!(body["hits"][0]["snippet"], "", "no body, no snippet");
}

#[tokio::test]
async fn deleted_and_removed_content_is_never_found_and_a_restore_brings_it_back() {
    let app = spawn_app().await;
    app.community("raspi").await;
    let alice = app.user("alice").await;
    let bob = app.user("bob").await;
    let admin = app.admin_token.clone();
    let t = topic(&app, "raspi", &alice, "Secret sauce recipe", "Mostly ketchup.").await;
    let p = app.reply(t, &bob, None, "Needs more mustard.").await;
    let kept = app.reply(t, &bob, None, "Mustard is overrated.").await;

    // A moderator removes the post: gone from search, for everyone.
    let (status, _) = app.post(&format!("/api/v1/posts/{p}/remove"), Some(&admin), json!({})).await;
    assert_eq!(status, 204);
    assert_eq!(found(&app, "q=mustard&type=posts").await, [kept]);
    let (_, as_admin) = app.send(Method::GET, "/api/v1/search?q=mustard&type=posts", Some(&admin), None).await;
    assert_eq!(hit_ids(&as_admin), [kept], "search shows the public view to everyone");
    let (status, _) = app.post(&format!("/api/v1/posts/{p}/restore"), Some(&admin), json!({})).await;
    assert_eq!(status, 204);
    let mut both = found(&app, "q=mustard&type=posts").await;
    both.sort_unstable();
    assert_eq!(both, [p, kept], "restored, found again");

    // Removing the topic hides it and every reply in it.
    let (status, _) = app.post(&format!("/api/v1/topics/{t}/remove"), Some(&admin), json!({})).await;
    assert_eq!(status, 204);
    assert!(found(&app, "q=ketchup").await.is_empty());
    assert!(found(&app, "q=sauce").await.is_empty());
    assert!(found(&app, "q=mustard&type=posts").await.is_empty(), "replies in a removed topic are hidden");
    let (status, _) = app.post(&format!("/api/v1/topics/{t}/restore"), Some(&admin), json!({})).await;
    assert_eq!(status, 204);
    assert_eq!(found(&app, "q=ketchup").await, [t]);
    assert_eq!(found(&app, "q=mustard&type=posts").await.len(), 2);

    // Deleting by the author is for good.
    let (status, _) = app.delete(&format!("/api/v1/posts/{kept}"), Some(&bob)).await;
    assert_eq!(status, 204);
    assert_eq!(found(&app, "q=mustard&type=posts").await, [p]);
    let (status, _) = app.delete(&format!("/api/v1/topics/{t}"), Some(&alice)).await;
    assert_eq!(status, 204);
    assert!(found(&app, "q=ketchup").await.is_empty());
    assert!(found(&app, "q=secret").await.is_empty(), "a deleted topic's title is not found either");
    assert_eq!(found(&app, "q=mustard&type=posts").await, [p], "its replies stay, as on its page");

    // Through the store too (the web pages' path).
    let page = app
        .state
        .store
        .search(pith::store::Search {
            text: "ketchup".into(),
            kind: pith::store::SearchKind::Topics,
            community: None,
            offset: 0,
            limit: 10,
        })
        .await
        .expect("search");
    assert!(page.hits.is_empty());
}

#[tokio::test]
async fn no_query_string_gets_a_5xx_and_hostile_words_are_just_words() {
    let app = spawn_app().await;
    app.community("raspi").await;
    let alice = app.user("alice").await;
    let t = topic(&app, "raspi", &alice, "NEAR and AND", "The words AND OR NOT, \"quoted\", a-b and c^d.").await;
    let long = "x".repeat(10 * 1024);
    let hostile = [
        "\"",
        "\"\"",
        "*",
        "**",
        "NEAR(",
        "NEAR(a b, 2)",
        "AND OR NOT",
        "AND",
        "-",
        "-foo",
        "^",
        "^start",
        "title:x",
        "{title body}:x",
        "(",
        ")",
        "a OR",
        "\u{0}",
        "\u{1}\u{2}",
        "日本語",
        "é\u{301}",
        "\u{200b}\u{feff}",
        "🦀🦀",
        "' OR 1=1 --",
        "%",
        "\\",
        long.as_str(),
    ];
    for q in hostile {
        for kind in ["topics", "posts"] {
            let query = format!("q={}&type={kind}", enc(q));
            let (status, body) = search(&app, &query).await;
            let shown = q.chars().take(40).collect::<String>();
            assert!(status == 200 || (400..500).contains(&status), "{shown:?}: {status} {body}");
            if status == 200 {
                assert!(body["hits"].is_array(), "{shown:?}: {body}");
            } else {
                assert_error_shape(&shown, &body);
            }
        }
    }
    let (status, body) = search(&app, &format!("q={}", enc(&long))).await;
    assert_error(&format!("a {} byte query", long.len()), status, &body, 400, "invalid_query");
    // Operators are words like any other.
    assert_eq!(found(&app, &format!("q={}", enc("AND OR NOT"))).await, [t]);
    assert_eq!(found(&app, &format!("q={}", enc("NEAR("))).await, [t]);
    assert_eq!(found(&app, &format!("q={}", enc("\"quoted"))).await, [t]);
    assert_eq!(found(&app, &format!("q={}", enc("c^d"))).await, [t]);
    // Bytes that are not UTF-8 are read as U+FFFD: no word, nothing found.
    assert!(found(&app, "q=%FF%FE").await.is_empty());
}

#[tokio::test]
async fn search_parameters_are_checked_and_pages_cover_every_hit_once() {
    let app = spawn_app().await;
    app.community("raspi").await;
    app.community("arduino").await;
    let alice = app.user("alice").await;
    let t = app.topic("raspi", &alice, "Threads").await;
    let mut posts = Vec::new();
    for i in 0..23 {
        posts.push(app.reply(t, &alice, None, &format!("gadget number {i}")).await);
    }
    let elsewhere = app.topic("arduino", &alice, "Blink").await;
    let other = app.reply(elsewhere, &alice, None, "another gadget").await;

    let mut seen = Vec::new();
    let mut after = 0;
    let mut pages = 0;
    loop {
        let (status, body) = search(&app, &format!("q=gadget&type=posts&limit=10&after={after}")).await;
        assert_eq!(status, 200, "{body}");
        let ids = hit_ids(&body);
        assert!(ids.len() <= 10);
        seen.extend(ids);
        pages += 1;
        match body["next"].as_u64() {
            Some(n) => after = n,
            None => break,
        }
    }
    assert_eq!(pages, 3);
    let mut want = posts.clone();
    want.push(other);
    seen.sort_unstable();
    want.sort_unstable();
    assert_eq!(seen, want, "every hit once");

    // Within a community.
    assert_eq!(found(&app, "q=gadget&type=posts&community=arduino").await, [other]);
    assert_eq!(found(&app, "q=gadget&type=posts&community=raspi&limit=100").await.len(), 23);
    assert_eq!(found(&app, "q=threads&community=raspi").await, [t]);
    assert!(found(&app, "q=threads&community=arduino").await.is_empty());

    // Nothing to look for finds nothing.
    assert!(found(&app, "q=").await.is_empty());
    assert!(found(&app, "q=%20%20").await.is_empty());

    for (query, code) in [
        ("", "invalid_query"),
        ("q=x&type=comments", "invalid_query"),
        ("q=x&limit=0", "invalid_query"),
        ("q=x&limit=101", "invalid_query"),
        ("q=x&limit=ten", "invalid_query"),
        ("q=x&after=-1", "invalid_query"),
        ("q=x&after=1001", "invalid_query"),
        ("q=x&q=y", "invalid_query"),
    ] {
        let (status, body) = search(&app, query).await;
        assert_error(query, status, &body, 400, code);
    }
    let (status, body) = search(&app, "q=x&community=nowhere").await;
    assert_error("unknown community", status, &body, 404, "not_found");
    let (status, body) = search(&app, &format!("q=x&community={}", "c".repeat(500))).await;
    assert_error("a very long community", status, &body, 404, "not_found");
    let (status, _) = search(&app, "q=gadget&after=1000").await;
    assert_eq!(status, 200, "the deepest page is allowed");
    let reply = fetch(app.req(Method::GET, "/api/v1/search?q=gadget")).await;
    assert_eq!(reply.header("cache-control"), Some("no-cache"));
}

#[tokio::test]
async fn bodies_are_stored_with_their_sanitized_html_and_served_with_it() {
    let app = spawn_app().await;
    app.community("raspi").await;
    let alice = app.user("alice").await;
    let t = topic(&app, "raspi", &alice, "Markdown", "Some *emphasis* <script>alert(1)</script>").await;
    let (_, created) = app.get(&format!("/api/v1/topics/{t}")).await;
    let html = created["topic"]["body_html"].as_str().expect("topic body_html");
    assert!(html.contains("<em>emphasis</em>"), "{html}");
    assert!(!html.contains("<script"), "sanitized: {html}");
    assert_eq!(created["topic"]["body"], "Some *emphasis* <script>alert(1)</script>", "the source as written");

    let (status, post) = app
        .post(&format!("/api/v1/topics/{t}/posts"), Some(&alice), json!({"body": "**bold** <script>x()</script>"}))
        .await;
    assert_eq!(status, 201);
    let html = post["body_html"].as_str().expect("post body_html");
    assert!(html.contains("<strong>bold</strong>") && !html.contains("<script"), "{html}");
    let p = post["id"].as_i64().expect("id");

    let (_, edited) = app.patch(&format!("/api/v1/posts/{p}"), Some(&alice), json!({"body": "`code`"})).await;
    assert_eq!(edited["body_html"], "<p><code>code</code></p>\n");
    let (_, thread) = app.get(&format!("/api/v1/topics/{t}?html=true")).await;
    assert_eq!(thread["posts"][0]["body_html"], "<p><code>code</code></p>\n", "the cache was refreshed");

    // Listings and profiles carry it too; a topic without a body has none.
    let bare = app.post("/api/v1/communities/raspi/topics", Some(&alice), json!({"title": "Bare"})).await.1;
    assert_eq!((bare["body"].clone(), bare["body_html"].clone()), (Value::Null, Value::Null));
    let (_, list) = app.get("/api/v1/topics?sort=new").await;
    assert!(list["topics"][1]["body_html"].as_str().is_some_and(|h| h.contains("<em>")), "{list}");
    let (_, profile) = app.get("/api/v1/users/alice").await;
    assert_eq!(profile["posts"][0]["body_html"], "<p><code>code</code></p>\n");

    // Removed for the public, deleted for everyone: no HTML either.
    let (status, _) = app.post(&format!("/api/v1/posts/{p}/remove"), Some(&app.admin_token), json!({})).await;
    assert_eq!(status, 204);
    let (_, public) = app.get(&format!("/api/v1/topics/{t}?html=true")).await;
    assert_eq!((public["posts"][0]["body"].as_str(), public["posts"][0]["body_html"].as_str()), (Some(""), Some("")));
    let (_, own) = app.send(Method::GET, &format!("/api/v1/topics/{t}?html=true"), Some(&alice), None).await;
    assert_eq!(own["posts"][0]["body_html"], "<p><code>code</code></p>\n", "the author still sees it");
    let (status, _) = app.delete(&format!("/api/v1/posts/{p}"), Some(&alice)).await;
    assert_eq!(status, 204);
    let (_, own) = app.send(Method::GET, &format!("/api/v1/topics/{t}?html=true"), Some(&alice), None).await;
    assert_eq!(own["posts"][0]["body_html"], "");
    let (status, _) = app.delete(&format!("/api/v1/topics/{t}"), Some(&alice)).await;
    assert_eq!(status, 204);
    let (_, gone) = app.get(&format!("/api/v1/topics/{t}")).await;
    assert_eq!(gone["topic"]["body_html"], Value::Null);
    let conn = rusqlite::Connection::open(app.db_path()).expect("open");
    let stored: Option<String> =
        conn.query_row("SELECT body_html FROM topics WHERE id = ?1", [t], |r| r.get(0)).expect("row");
    assert_eq!(stored, None, "deleting drops the stored HTML with the source");
}

/// The schema as it was before migration 0003, with a forum in it.
fn old_database(path: &std::path::Path) {
    let conn = rusqlite::Connection::open(path).expect("create");
    let root = env!("CARGO_MANIFEST_DIR");
    for file in ["0001_core.sql", "0002_moderation.sql"] {
        let sql = std::fs::read_to_string(format!("{root}/migrations/sqlite/{file}")).expect("read migration");
        conn.execute_batch(&sql).expect("apply");
    }
    conn.execute_batch(
        "PRAGMA user_version = 2;
         INSERT INTO users (id, name, created_at) VALUES (1, 'old', 0);
         INSERT INTO communities (id, name, title, created_by, created_at) VALUES (1, 'past', 'Past', 1, 0);
         INSERT INTO topics (id, community_id, author_id, title, body, created_at, hot)
             VALUES (1, 1, 1, 'Ancient lore', 'Written in *olden* days <script>x</script>', 0, 0),
                    (2, 1, 1, 'Link only', NULL, 0, 0),
                    (3, 1, 1, 'Hidden lore', 'olden and removed', 0, 0);
         UPDATE topics SET removed = 1 WHERE id = 3;
         INSERT INTO posts (id, topic_id, author_id, body, created_at)
             VALUES (1, 1, 1, 'An **olden** reply', 0), (2, 1, 1, 'olden but removed', 0), (3, 1, 1, '', 0),
                    (4, 3, 1, 'olden in a removed topic', 0);
         UPDATE posts SET removed = 1 WHERE id = 2;
         UPDATE posts SET deleted = 1 WHERE id = 3;
         UPDATE topics SET post_count = CASE id WHEN 1 THEN 1003 WHEN 3 THEN 1 ELSE 0 END;",
    )
    .expect("fill");
    let extra: Vec<String> = (5..1005).map(|i| format!("({i}, 1, 1, 'filler {i} with _some_ markdown', 0)")).collect();
    conn.execute_batch(&format!(
        "INSERT INTO posts (id, topic_id, author_id, body, created_at) VALUES {};",
        extra.join(",")
    ))
    .expect("filler");
}

/// The ids of what `Store::search` found, as `hit_ids` for the API's.
fn store_hit_ids(page: pith::store::SearchPage) -> Vec<i64> {
    page.hits
        .into_iter()
        .map(|h| match h {
            pith::model::SearchHit::Topic { topic, .. } => topic.id,
            pith::model::SearchHit::Post { post, .. } => post.id,
        })
        .collect()
}

#[tokio::test]
async fn a_database_from_before_stored_html_gets_it_rendered_and_indexed_when_opened() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("pith.db");
    old_database(&path);
    let store = SqliteStore::open(&path, &SqliteOptions { readers: 1, ..SqliteOptions::default() }).expect("open");
    let (topic, posts) = store.topic_with_posts(1, pith::store::PostSort::Old).await.expect("read");
    let html = topic.body_html.expect("rendered");
    assert_eq!(html, pith::markdown::render("Written in *olden* days <script>x</script>"));
    assert!(html.contains("<em>olden</em>") && !html.contains("<script"), "{html}");
    assert_eq!(posts[0].body_html, "<p>An <strong>olden</strong> reply</p>\n");
    assert_eq!(posts[1].body_html, "<p>olden but removed</p>\n", "kept for moderators");
    assert_eq!((posts[2].id, posts[2].body_html.as_str()), (3, ""), "deleted");
    assert_eq!(posts[500].id, 502);
    assert_eq!(posts[500].body_html, "<p>filler 502 with <em>some</em> markdown</p>\n");
    assert_eq!(topic.post_count, 1003, "the count moved out of the topic's row (0019)");
    let search = |text: &str, kind| pith::store::Search {
        text: text.into(),
        kind,
        community: Some("past".into()),
        offset: 0,
        limit: 10,
    };
    let topics = store.search(search("olden", pith::store::SearchKind::Topics)).await.expect("search");
    assert_eq!(store_hit_ids(topics), [1], "the removed topic was not indexed");
    let posts = store.search(search("olden", pith::store::SearchKind::Posts)).await.expect("search");
    assert_eq!(store_hit_ids(posts), [1], "neither the removed post nor a reply in the removed topic");
    store.shutdown().await;
    drop(store);

    let conn = rusqlite::Connection::open(&path).expect("open");
    let (version, missing): (i64, i64) = conn
        .query_row(
            "SELECT (SELECT user_version FROM pragma_user_version), \
             (SELECT count(*) FROM posts WHERE body_html IS NULL) \
             + (SELECT count(*) FROM topics WHERE body_html IS NULL AND body IS NOT NULL) \
             + (SELECT count(*) FROM users WHERE skeleton IS NULL OR skeleton_folded IS NULL)",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .expect("check");
    assert_eq!((version, missing), (19, 0), "every migration applied; every body rendered, every name keyed");
    let counts: Vec<(i64, i64)> = conn
        .prepare("SELECT topic_id, post_count FROM topic_counts ORDER BY topic_id")
        .and_then(|mut s| s.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?.collect())
        .expect("counts");
    assert_eq!(counts, [(1, 1003), (3, 1)], "a row per topic with posts");
    let old_column: i64 = conn
        .query_row("SELECT count(*) FROM pragma_table_info('topics') WHERE name = 'post_count'", [], |r| r.get(0))
        .expect("columns");
    assert_eq!(old_column, 0, "topics no longer carries the count");
    let bare: Option<String> =
        conn.query_row("SELECT body_html FROM topics WHERE id = 2", [], |r| r.get(0)).expect("row");
    assert_eq!(bare, None, "a topic without a body has no HTML");
}

/// The writer may commit a post before indexing its words
/// (`search_queue::MAX_AGE`); a search indexes them first, and changes a
/// crash left queued are found after the next start.
#[tokio::test]
async fn queued_index_changes_are_found_by_the_next_search_even_after_a_crash() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("pith.db");
    old_database(&path);
    let opts = SqliteOptions { readers: 1, ..SqliteOptions::default() };
    let store = SqliteStore::open(&path, &opts).expect("open");
    store.shutdown().await;
    drop(store);
    let queued = |path: &std::path::Path| -> i64 {
        let conn = rusqlite::Connection::open(path).expect("open");
        conn.query_row("SELECT count(*) FROM fts_queue", [], |r| r.get(0)).expect("count")
    };
    assert_eq!(queued(&path), 0, "stopping indexes what was queued");
    // What a crash right after the commit of an edit leaves: the writer's
    // triggers queued its index changes, which nobody applied.
    rusqlite::Connection::open(&path)
        .expect("open")
        .execute_batch(
            "BEGIN;
             UPDATE fts_defer SET deferred = 1;
             UPDATE posts SET body = 'A zebra reply' WHERE id = 1;
             UPDATE fts_defer SET deferred = 0;
             COMMIT;",
        )
        .expect("queue");
    assert_eq!(queued(&path), 2, "the old words to forget, the new to index");

    // Indexed by the first search or within a second of the start,
    // whichever comes first: either way before the search answers.
    let store = SqliteStore::open(&path, &opts).expect("reopen");
    let posts = |text: &str| pith::store::Search {
        text: text.into(),
        kind: pith::store::SearchKind::Posts,
        community: Some("past".into()),
        offset: 0,
        limit: 10,
    };
    assert_eq!(store_hit_ids(store.search(posts("zebra")).await.expect("search")), [1], "found by its new words");
    assert_eq!(
        store_hit_ids(store.search(posts("olden")).await.expect("search")),
        Vec::<i64>::new(),
        "and not by its old"
    );
    assert_eq!(queued(&path), 0);
    store.shutdown().await;
}

#[tokio::test]
async fn a_seeded_database_is_stored_rendered_and_searchable() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("pith.db");
    let shape = pith::seed::Shape::of(pith::config::Dataset::Realistic, 0.01);
    pith::seed::seed(&path, &shape, 3).expect("seed");
    let unrendered: i64 = rusqlite::Connection::open(&path)
        .expect("open")
        .query_row("SELECT count(*) FROM posts WHERE body_html IS NULL", [], |r| r.get(0))
        .expect("count");
    assert_eq!(unrendered, 0, "seeding stores the HTML with the sources");
    let store = SqliteStore::open(&path, &SqliteOptions { readers: 1, ..SqliteOptions::default() }).expect("open");
    let (_, posts) = store.topic_with_posts(1, pith::store::PostSort::Old).await.expect("read");
    assert!(posts.iter().all(|p| p.body_html == pith::markdown::render(&p.body)));
    let q = pith::store::Search {
        text: "kernel".into(),
        kind: pith::store::SearchKind::Posts,
        community: None,
        offset: 0,
        limit: 5,
    };
    let page = store.search(q).await.expect("search");
    assert_eq!(page.hits.len(), 5, "seeded posts are indexed as they are written");
    assert_eq!(page.next, Some(5));
    store.shutdown().await;
}
