//! Huge topics and deep threads (issue 26), on both stores. A topic too
//! large for one answer is cut into pages, in the API and the pages, each
//! bounded in posts and bytes (`PageLimit`), and `next`/`?after=` walks
//! them; a reply chain deeper than a page shows ends in "continue this
//! thread", a link to the page of the thread under the last comment shown.
//! The big topics are written straight into the database: 100,000 posts
//! through the API would take minutes.

use std::collections::HashSet;

use pith::cache::Variant;
use pith::model::paging::PageLimit;
use pith::store::{PostSort, Store};
use reqwest::Method;
use serde_json::json;

use crate::support::helpers::{Reply, TestApp, assert_error, fetch, ids, spawn_app, spawn_pg_app};
use crate::support::pg::TestDb;

/// Posts in the huge topic: about what the probe made.
const HUGE: i64 = 100_000;
/// Of which the last are long (2,000 characters, ~4 KB with their HTML),
/// so that later pages end on bytes rather than on their count.
const LONG: i64 = 10_000;
/// The deep chain's length, as in the issue.
const CHAIN: i64 = 5_000;

/// Adds the second parameter's posts to the count of the topic the first
/// names (`topic_counts`), in each backend's SQL.
const COUNT_SQLITE: &str = "INSERT INTO topic_counts (topic_id, post_count) VALUES (?1, ?2) \
     ON CONFLICT (topic_id) DO UPDATE SET post_count = post_count + ?2";
const COUNT_PG: &str = "INSERT INTO topic_counts (topic_id, post_count) VALUES ($1, $2) \
     ON CONFLICT (topic_id) DO UPDATE SET post_count = topic_counts.post_count + $2";

/// An API page's most bytes: its text bound, one post past it, and the
/// JSON around each post.
const API_PAGE_MAX: usize = (16 << 20) + (4 << 20);
/// A page's most bytes: the web text bound and the markup of each post.
const WEB_PAGE_MAX: usize = 2 << 20;

/// Where the rows are written straight, behind the server's back.
enum Raw<'a> {
    Sqlite(std::path::PathBuf),
    Pg(&'a TestDb),
}

impl Raw<'_> {
    /// `count` posts at the top level of `topic`, by its author, with
    /// mixed scores; the last `long` of them long.
    async fn posts(&self, topic: i64, count: i64, long: i64) {
        match self {
            Raw::Sqlite(db) => {
                let conn = rusqlite::Connection::open(db).expect("open");
                conn.busy_timeout(std::time::Duration::from_secs(10)).expect("busy timeout");
                conn.execute(
                    "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?2), \
                     b(i, body) AS (SELECT i, CASE WHEN i > ?2 - ?3 THEN 'long ' || i || ' ' || printf('%.2000c', 'x') \
                     ELSE 'post ' || i END FROM n) \
                     INSERT INTO posts (topic_id, author_id, body, body_html, created_at, score) \
                     SELECT ?1, (SELECT author_id FROM topics WHERE id = ?1), body, '<p>' || body || '</p>' || char(10), \
                     1700000000 + i, (i * 7919) % 11 - 5 FROM b",
                    rusqlite::params![topic, count, long],
                )
                .expect("insert posts");
                conn.execute(COUNT_SQLITE, rusqlite::params![topic, count]).expect("count");
            }
            Raw::Pg(db) => {
                let c = db.client().await;
                c.execute(
                    "INSERT INTO posts (topic_id, author_id, body, body_html, created_at, score) \
                     SELECT $1, t.author_id, b.body, '<p>' || b.body || '</p>' || chr(10), 1700000000 + b.i, \
                     (b.i * 7919) % 11 - 5 FROM topics t, \
                     (SELECT i, CASE WHEN i > $2 - $3 THEN 'long ' || i || ' ' || repeat('x', 2000) \
                      ELSE 'post ' || i END AS body FROM generate_series(1::int8, $2) i) b WHERE t.id = $1",
                    &[&topic, &count, &long],
                )
                .await
                .expect("insert posts");
                c.execute(COUNT_PG, &[&topic, &count]).await.expect("count");
            }
        }
    }

    /// A chain of `depth` replies in `topic`, each to the one before;
    /// returns their ids, the top first.
    async fn chain(&self, topic: i64, depth: i64) -> Vec<i64> {
        let first = match self {
            Raw::Sqlite(db) => {
                let conn = rusqlite::Connection::open(db).expect("open");
                conn.busy_timeout(std::time::Duration::from_secs(10)).expect("busy timeout");
                let first: i64 =
                    conn.query_row("SELECT coalesce(max(id), 0) + 1 FROM posts", [], |r| r.get(0)).expect("next id");
                conn.execute(
                    "WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i + 1 < ?2) \
                     INSERT INTO posts (id, topic_id, parent_id, author_id, body, body_html, created_at) \
                     SELECT ?3 + i, ?1, CASE WHEN i = 0 THEN NULL ELSE ?3 + i - 1 END, \
                     (SELECT author_id FROM topics WHERE id = ?1), 'level ' || i, '<p>level ' || i || '</p>' || char(10), \
                     1700000000 + i FROM n",
                    rusqlite::params![topic, depth, first],
                )
                .expect("insert chain");
                conn.execute(COUNT_SQLITE, rusqlite::params![topic, depth]).expect("count");
                first
            }
            Raw::Pg(db) => {
                let c = db.client().await;
                let first: i64 =
                    c.query_one("SELECT coalesce(max(id), 0) + 1 FROM posts", &[]).await.expect("next id").get(0);
                c.execute(
                    "INSERT INTO posts (id, topic_id, parent_id, author_id, body, body_html, created_at) \
                     SELECT $3 + i, $1, CASE WHEN i = 0 THEN NULL ELSE $3 + i - 1 END, t.author_id, 'level ' || i, \
                     '<p>level ' || i || '</p>' || chr(10), 1700000000 + i \
                     FROM topics t, generate_series(0::int8, $2::int8 - 1) i WHERE t.id = $1",
                    &[&topic, &depth, &first],
                )
                .await
                .expect("insert chain");
                // The ids were given: the identity moves past them.
                c.execute("SELECT setval(pg_get_serial_sequence('posts', 'id'), (SELECT max(id) FROM posts))", &[])
                    .await
                    .expect("setval");
                c.execute(COUNT_PG, &[&topic, &depth]).await.expect("count");
                first
            }
        };
        (first..first + depth).collect()
    }
}

async fn get<S: Store>(app: &TestApp<S>, path: &str) -> Reply {
    fetch(app.req(Method::GET, path)).await
}

/// A page as a browser asks for it, signed in with `token` when given.
async fn page<S: Store>(app: &TestApp<S>, path: &str, token: Option<&str>) -> Reply {
    let mut req = app.req(Method::GET, path).header("accept", "text/html");
    if let Some(t) = token {
        req = req.header("cookie", format!("pith_session={t}"));
    }
    fetch(req).await
}

fn text(r: &Reply) -> String {
    String::from_utf8(r.bytes.clone()).expect("utf-8")
}

/// Walks every API page of `topic` in `sort` order; returns the ids in
/// the order read, checking each page's bounds on the way, and how many
/// pages ended on their bytes.
async fn walk<S: Store>(app: &TestApp<S>, topic: i64, sort: &str) -> (Vec<i64>, usize) {
    let (mut all, mut by_bytes) = (Vec::new(), 0);
    let mut path = format!("/api/v1/topics/{topic}?sort={sort}");
    loop {
        let r = get(app, &path).await;
        assert_eq!(r.status, 200, "{path}: {}", text(&r));
        assert!(r.bytes.len() <= API_PAGE_MAX, "{path}: {} bytes", r.bytes.len());
        let body = r.json();
        assert_eq!(body["topic"]["id"], topic);
        let page = ids(&body["posts"]);
        assert!(!page.is_empty() && page.len() <= PageLimit::API.posts, "{path}: {} posts", page.len());
        all.extend(page.iter().copied());
        match body["next"].as_str() {
            Some(next) => {
                by_bytes += usize::from(page.len() < PageLimit::API.posts);
                path = format!("/api/v1/topics/{topic}?sort={sort}&after={next}");
            }
            None => return (all, by_bytes),
        }
    }
}

async fn huge_topics_are_read_in_bounded_pages<S: Store>(app: TestApp<S>, raw: Raw<'_>) {
    app.community("big").await;
    let alice = app.user("alice").await;
    let topic = app.topic("big", &alice, "One hundred thousand replies").await;
    raw.posts(topic, HUGE, LONG).await;

    // The first page: its own shape, with `next`.
    let r = get(&app, &format!("/api/v1/topics/{topic}")).await;
    assert_eq!(r.status, 200);
    assert!(r.bytes.len() <= API_PAGE_MAX, "{} bytes", r.bytes.len());
    let first = r.json();
    let mut keys: Vec<&str> = first.as_object().expect("object").keys().map(String::as_str).collect();
    keys.sort_unstable();
    assert_eq!(keys, ["next", "posts", "topic"], "the topic, its first posts, the next page");
    assert_eq!(first["posts"].as_array().map(Vec::len), Some(PageLimit::API.posts));
    assert_eq!(first["topic"]["post_count"], HUGE);

    // Every order visits every post exactly once, in its order.
    let (old, by_bytes) = walk(&app, topic, "old").await;
    assert_eq!(old.len() as i64, HUGE);
    assert!(old.windows(2).all(|w| w[0] < w[1]), "oldest first, none twice");
    assert!(by_bytes >= 2, "the long posts' pages end on bytes ({by_bytes})");
    let (mut new, _) = walk(&app, topic, "new").await;
    new.reverse();
    assert_eq!(new, old, "new is old reversed");
    let (best, _) = walk(&app, topic, "best").await;
    assert_eq!(best.iter().copied().collect::<HashSet<_>>().len(), best.len(), "none twice");
    assert_eq!(best.len() as i64, HUGE);
    let r = get(&app, &format!("/api/v1/topics/{topic}?sort=best&html=true")).await;
    let posts = r.json()["posts"].as_array().cloned().expect("posts");
    let scores: Vec<i64> = posts.iter().map(|p| p["score"].as_i64().expect("score")).collect();
    assert!(scores.windows(2).all(|w| w[0] >= w[1]), "best first");
    assert!(posts[0]["body_html"].is_string(), "html=true pages too");

    // A cursor that is not one, or of another order, names `after`.
    let r = get(&app, &format!("/api/v1/topics/{topic}?sort=old")).await;
    let next = r.json()["next"].as_str().expect("next").to_owned();
    for (query, why) in [
        ("after=garbage".to_owned(), "garbage"),
        (format!("sort=new&after={next}"), "another order's cursor"),
        (format!("sort=old&after={}", pith::store::Cursor::New(1, 1).encode()), "a listing's cursor"),
    ] {
        let (status, body) = app.get(&format!("/api/v1/topics/{topic}?{query}")).await;
        assert_error(why, status, &body, 400, "invalid_query");
        assert!(body["error"]["message"].as_str().is_some_and(|m| m.contains("after")), "{why}: {body}");
    }

    // Each page is cached apart, with its own ETag, and a write to the
    // topic evicts every one of them.
    let second = format!("/api/v1/topics/{topic}?sort=old&after={next}");
    let r = get(&app, &second).await;
    let etag = r.header("etag").expect("etag").to_owned();
    let r = fetch(app.req(Method::GET, &second).header("if-none-match", &etag)).await;
    assert_eq!(r.status, 304);
    let cursor = pith::store::PostCursor::decode(&next).expect("a post cursor");
    let cache = &app.state.cache;
    assert!(cache.get((topic, Variant::Json(PostSort::Old))).is_some());
    assert!(cache.get((topic, Variant::JsonAfter(cursor, false))).is_some());
    app.reply(topic, &alice, None, "one more").await;
    assert!(cache.get((topic, Variant::JsonAfter(cursor, false))).is_none(), "a write evicts every page");
    assert!(cache.get((topic, Variant::Json(PostSort::Old))).is_none());
    let r = fetch(app.req(Method::GET, &second).header("if-none-match", &etag)).await;
    assert_eq!(r.status, 200, "rendered again: its topic counts one more post");

    // The topic page: paged too, for everyone, and no longer a 500 for a
    // signed-in browser that accepts gzip (its 120 MB page went past the
    // compressor's limit).
    let r = page(&app, &format!("/t/{topic}"), None).await;
    assert_eq!(r.status, 200);
    assert!(r.bytes.len() <= WEB_PAGE_MAX, "{} bytes", r.bytes.len());
    let html = text(&r);
    let more = html.split("<nav class=\"pager\" aria-label=\"Comment pages\"><a href=\"").nth(1).expect("a next link");
    let more = more.split('"').next().expect("href").replace("&#38;", "&");
    let r = page(&app, &more, None).await;
    assert_eq!(r.status, 200, "{more}");
    assert!(r.bytes.len() <= WEB_PAGE_MAX);
    assert!(text(&r).contains("Back to the first page"));
    let later = more.split("after=").nth(1).and_then(|c| c.split('#').next()).expect("cursor");
    let later = pith::store::PostCursor::decode(later).expect("a post cursor");
    assert!(cache.get((topic, Variant::PageAfter(later))).is_some(), "later pages are cached too");
    let r = fetch(
        app.req(Method::GET, &format!("/t/{topic}"))
            .header("accept", "text/html")
            .header("accept-encoding", "gzip")
            .header("cookie", format!("pith_session={alice}")),
    )
    .await;
    assert_eq!((r.status, r.header("content-encoding")), (200, Some("gzip")));
    assert!(r.bytes.len() <= WEB_PAGE_MAX);
    app.reply(topic, &alice, None, "and another").await;
    assert!(cache.get((topic, Variant::PageAfter(later))).is_none(), "evicted with the rest");

    // A topic of ordinary size is one page, without `next`.
    let small = app.topic("big", &alice, "Small").await;
    app.reply(small, &alice, None, "only").await;
    let r = get(&app, &format!("/api/v1/topics/{small}")).await.json();
    assert_eq!(r.as_object().map(|o| o.len()), Some(2), "{r}");
}

async fn deep_chains_are_cut_with_a_link_to_the_thread_that_continues<S: Store>(app: TestApp<S>, raw: Raw<'_>) {
    app.community("deep").await;
    let alice = app.user("alice").await;
    let topic = app.topic("deep", &alice, "Turtles").await;
    let chain = raw.chain(topic, CHAIN).await;
    let shown = |html: &str, id: i64| html.contains(&format!("id=\"p{id}\""));
    let link = |id: i64| format!("<a href=\"/t/{topic}?thread={id}\">continue this thread →</a>");

    // Ten levels, then the link, for everyone; as a plain link, it works
    // without JavaScript.
    for token in [None, Some(alice.as_str())] {
        let r = page(&app, &format!("/t/{topic}"), token).await;
        assert_eq!(r.status, 200);
        let html = text(&r);
        assert!(r.bytes.len() < 100_000, "{} bytes", r.bytes.len());
        assert!(chain[..10].iter().all(|&id| shown(&html, id)), "the first ten levels");
        assert!(!shown(&html, chain[10]), "not the eleventh");
        assert!(html.contains(&link(chain[9])), "continue from the tenth");
        assert_eq!(html.matches("continue this thread").count(), 1);
    }
    assert!(app.state.cache.get((topic, Variant::Page(PostSort::Best))).is_some());

    // The thread under the tenth: ten levels from it, and a link on.
    let r = page(&app, &format!("/t/{topic}?thread={}", chain[9]), None).await;
    assert_eq!(r.status, 200);
    let html = text(&r);
    assert!(chain[9..19].iter().all(|&id| shown(&html, id)));
    assert!(!shown(&html, chain[8]) && !shown(&html, chain[19]));
    assert!(html.contains(&link(chain[18])));
    assert!(html.contains(&format!("data-root=\"{}\"", chain[9])), "the live script keeps to the thread");
    assert!(app.state.cache.get((topic, Variant::Thread(PostSort::Best, chain[9]))).is_some());
    let r = page(&app, &format!("/t/{topic}?thread={}&sort=old", chain[4_995]), Some(&alice)).await;
    let html = text(&r);
    assert!(chain[4_995..].iter().all(|&id| shown(&html, id)), "the end of the chain");
    assert!(!html.contains("continue this thread"), "and no link past it");

    // A bad thread is a 400; one not in this topic is not found.
    assert_eq!(page(&app, &format!("/t/{topic}?thread=x"), None).await.status, 400);
    let other = app.topic("deep", &alice, "Elsewhere").await;
    assert_eq!(page(&app, &format!("/t/{other}?thread={}", chain[0]), None).await.status, 404);

    // One post, deep down: the fragment the live script asks for, and
    // its link for a browser, to the thread under it.
    let deep = chain[4_000];
    let r = fetch(app.req(Method::GET, &format!("/t/{topic}/p/{deep}")).header("x-pith-fetch", "1")).await;
    assert_eq!(r.status, 200);
    assert!(text(&r).starts_with(&format!("<article class=\"post deep\" id=\"p{deep}\"")), "{}", text(&r));
    let no_redirects = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().expect("client");
    let r = fetch(no_redirects.get(app.url(&format!("/t/{topic}/p/{deep}"))).header("accept", "text/html")).await;
    let to = format!("/t/{topic}?thread={deep}#p{deep}");
    assert_eq!((r.status, r.header("location")), (303, Some(to.as_str())));

    // The API is unchanged: one topic, its 5,000 posts, one answer.
    let read = app.read_topic(topic, "old").await;
    assert_eq!(ids(&read["posts"]), chain);
    assert!(read.get("next").is_none());

    // A write to the topic evicts the thread pages with the rest.
    let (status, _) = app
        .post(&format!("/api/v1/topics/{topic}/posts"), Some(&alice), json!({"body": "deeper", "parent_id": deep}))
        .await;
    assert_eq!(status, 201);
    assert!(app.state.cache.get((topic, Variant::Thread(PostSort::Best, chain[9]))).is_none());
    assert!(app.state.cache.get((topic, Variant::Page(PostSort::Best))).is_none());
}

#[tokio::test]
async fn a_huge_topic_is_read_in_bounded_pages_that_visit_every_post_once_on_sqlite() {
    let app = spawn_app().await;
    let raw = Raw::Sqlite(app.db_path());
    huge_topics_are_read_in_bounded_pages(app, raw).await;
}

#[tokio::test]
async fn a_huge_topic_is_read_in_bounded_pages_that_visit_every_post_once_on_postgres() {
    let db = TestDb::create().await;
    let app = spawn_pg_app(&db).await;
    huge_topics_are_read_in_bounded_pages(app, Raw::Pg(&db)).await;
}

#[tokio::test]
async fn a_5000_deep_reply_chain_is_cut_at_ten_levels_with_a_link_that_continues_on_sqlite() {
    let app = spawn_app().await;
    let raw = Raw::Sqlite(app.db_path());
    deep_chains_are_cut_with_a_link_to_the_thread_that_continues(app, raw).await;
}

#[tokio::test]
async fn a_5000_deep_reply_chain_is_cut_at_ten_levels_with_a_link_that_continues_on_postgres() {
    let db = TestDb::create().await;
    let app = spawn_pg_app(&db).await;
    deep_chains_are_cut_with_a_link_to_the_thread_that_continues(app, Raw::Pg(&db)).await;
}
