//! PostgreSQL end to end: the JSON API served from a `PgStore` (topics,
//! posts, reading, votes, listings, search, edits, moderation's basics),
//! and the real `pith` binary's `seed` and `user add` on a postgres:// URL.
//! The store itself is proven by `store::story`.

use std::ffi::OsStr;

use serde_json::json;

use crate::support::child::run_pith;
use crate::support::helpers::{assert_error, ids, spawn_pg_app};
use crate::support::pg::TestDb;

#[tokio::test]
async fn the_api_on_postgres_creates_reads_votes_lists_and_searches() {
    let db = TestDb::create().await;
    let app = spawn_pg_app(&db).await;
    app.community("raspi").await;
    let alice = app.register("alice").await;
    let bob = app.user("bob").await;

    // Topics and nested replies, read back in each order.
    let (status, topic) = app
        .post(
            "/api/v1/communities/RasPi/topics",
            Some(&alice),
            json!({"title": "Which microSD card?", "body": "For a *Pi 5*."}),
        )
        .await;
    assert_eq!(status, 201, "{topic}");
    assert_eq!((topic["community"].clone(), topic["author"].clone()), (json!("raspi"), json!("alice")));
    let cards = topic["id"].as_i64().expect("id");
    let older = app.topic("raspi", &bob, "Cases").await;
    let p1 = app.reply(cards, &bob, None, "SanDisk Extreme.").await;
    let p2 = app.reply(cards, &alice, Some(p1), "Which size?").await;
    let (status, crossed) =
        app.post(&format!("/api/v1/topics/{older}/posts"), Some(&bob), json!({"body": "x", "parent_id": p1})).await;
    assert_error("a parent from another topic", status, &crossed, 422, "invalid_field");

    let read = app.read_topic(cards, "old").await;
    assert_eq!(ids(&read["posts"]), [p1, p2]);
    assert_eq!(read["posts"][1]["parent_id"], p1);
    assert_eq!(read["topic"]["body_html"], "<p>For a <em>Pi 5</em>.</p>\n");
    assert_eq!(read["topic"]["post_count"], 2);

    // Votes: one per user, replaced, withdrawn; best order and hot follow.
    assert_eq!(app.vote("posts", p2, &bob, 1).await, 1);
    assert_eq!(app.vote("posts", p2, &bob, 1).await, 1);
    assert_eq!(app.vote("posts", p1, &alice, -1).await, -1);
    assert_eq!(app.vote("posts", p1, &alice, 0).await, 0);
    assert_eq!(app.vote("topics", older, &alice, 1).await, 1);
    assert_eq!(app.vote("topics", older, &bob, 1).await, 2);
    assert_eq!(ids(&app.read_topic(cards, "best").await["posts"]), [p2, p1]);
    let (top, _) = app.list("/api/v1/communities/raspi/topics?sort=top").await;
    assert_eq!(top, [older, cards]);
    let (hot, _) = app.list("/api/v1/topics?sort=hot").await;
    assert_eq!(hot, [older, cards], "two votes outweigh a few seconds");
    let (first, next) = app.list("/api/v1/topics?sort=new&limit=1").await;
    assert_eq!(first, [older]);
    let next = next.expect("a second page");
    let (second, _) = app.list(&format!("/api/v1/topics?sort=new&limit=1&after={next}")).await;
    assert_eq!(second, [cards]);

    // Search, with snippets escaped and marked.
    let (status, found) = app.get("/api/v1/search?q=microsd").await;
    assert_eq!(status, 200, "{found}");
    assert_eq!(found["hits"].as_array().map(Vec::len), Some(1), "{found}");
    assert_eq!(found["hits"][0]["topic"]["id"], cards, "{found}");
    let (_, found) = app.get("/api/v1/search?q=sandisk&type=posts").await;
    assert_eq!(found["hits"][0]["post"]["id"], p1, "{found}");
    assert!(found["hits"][0]["snippet"].as_str().is_some_and(|s| s.contains("<mark>SanDisk</mark>")), "{found}");

    // Edits and deletes by the author only; search follows them.
    let (status, body) = app.patch(&format!("/api/v1/posts/{p1}"), Some(&alice), json!({"body": "mine"})).await;
    assert_error("someone else's post", status, &body, 403, "forbidden");
    let (status, edited) = app.patch(&format!("/api/v1/posts/{p1}"), Some(&bob), json!({"body": "Kingston."})).await;
    assert_eq!((status, edited["body"].clone()), (200, json!("Kingston.")), "{edited}");
    let (_, found) = app.get("/api/v1/search?q=sandisk&type=posts").await;
    assert_eq!(found["hits"], json!([]), "edited away: {found}");
    let (status, _) = app.delete(&format!("/api/v1/topics/{older}"), Some(&bob)).await;
    assert_eq!(status, 204);
    let (listed, _) = app.list("/api/v1/topics?sort=new").await;
    assert_eq!(listed, [cards]);

    // Unknown things are 404s, as on SQLite.
    let (status, body) = app.get("/api/v1/topics/999999").await;
    assert_error("a missing topic", status, &body, 404, "not_found");
    let (status, body) = app.get("/api/v1/search?q=x&community=nowhere").await;
    assert_error("a missing community", status, &body, 404, "not_found");
    app.stop().await;
}

/// Runs the real binary; its stdout, failing the test with its stderr.
async fn pith_ok(args: &[&str]) -> String {
    let args: Vec<&OsStr> = args.iter().map(OsStr::new).collect();
    let out = run_pith(&args).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "pith {args:?} failed: {stderr}");
    String::from_utf8(out.stdout).expect("utf-8")
}

#[tokio::test]
async fn pith_seed_and_user_add_work_on_a_postgres_url() {
    let db = TestDb::create().await;
    pith_ok(&["seed", "--database", &db.url, "--scale", "0.01", "--seed", "7"]).await;
    let client = db.client().await;
    let count = |sql: &'static str| {
        let client = &client;
        async move { client.query_one(sql, &[]).await.expect("count").get::<_, i64>(0) }
    };
    assert_eq!(count("SELECT count(*) FROM users").await, 1000);
    assert_eq!(count("SELECT count(*) FROM communities").await, 10);
    assert_eq!(count("SELECT count(*) FROM posts").await, 1000, "1% of 100k posts");
    assert_eq!(count("SELECT count(*) FROM posts WHERE body_html IS NULL").await, 0, "rendered as loaded");
    assert!(count("SELECT count(*) FROM topics WHERE fts IS NOT NULL").await > 0, "searchable");

    // The same rows as the SQLite seed with the same seed.
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("pith.db");
    pith_ok(&["seed", "--database", path.to_str().expect("path"), "--scale", "0.01", "--seed", "7"]).await;
    let sqlite = rusqlite::Connection::open(&path).expect("open");
    let sqlite_sum: (i64, i64, f64, String) = sqlite
        .query_row(
            "SELECT sum(id * score), sum(coalesce(n.post_count, 0)), sum(hot), group_concat(title, '|') FROM \
             (SELECT * FROM topics ORDER BY id) t LEFT JOIN topic_counts n ON n.topic_id = t.id",
            [],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
        )
        .expect("sqlite sums");
    let pg = client
        .query_one(
            "SELECT sum(id * score)::bigint, sum(coalesce(n.post_count, 0))::bigint, sum(hot), \
             string_agg(title, '|' ORDER BY id) FROM topics t LEFT JOIN topic_counts n ON n.topic_id = t.id",
            &[],
        )
        .await
        .expect("pg sums");
    let pg_sum: (i64, i64, f64, String) = (pg.get(0), pg.get(1), pg.get(2), pg.get(3));
    assert_eq!((sqlite_sum.0, sqlite_sum.1, &sqlite_sum.3), (pg_sum.0, pg_sum.1, &pg_sum.3));
    assert!((sqlite_sum.2 - pg_sum.2).abs() < 1e-6, "hot: {} vs {}", sqlite_sum.2, pg_sum.2);

    // Seeding again is refused: the database holds data.
    let words = ["seed", "--database", db.url.as_str()];
    let args: Vec<&OsStr> = words.iter().map(OsStr::new).collect();
    let again = run_pith(&args).await;
    assert!(!again.status.success());
    assert!(String::from_utf8_lossy(&again.stderr).contains("already holds data"));

    // A user made on the command line logs in with the printed token, and
    // new rows get ids after the seeded ones.
    let out = pith_ok(&["user", "add", "root", "--admin", "--database", &db.url]).await;
    let token = out.lines().last().expect("token").trim().to_owned();
    let row = client.query_one("SELECT id, is_admin FROM users WHERE name = 'root'", &[]).await.expect("root");
    assert_eq!((row.get::<_, i64>(0), row.get::<_, bool>(1)), (1001, true));
    let app = crate::support::helpers::spawn_pg_app(&db).await;
    let (status, me) = app.send(reqwest::Method::GET, "/api/v1/auth/me", Some(&token), None).await;
    assert_eq!((status, me["name"].clone()), (200, json!("root")), "{me}");
    let (status, topic) =
        app.post("/api/v1/communities/community1/topics", Some(&token), json!({"title": "After the seed"})).await;
    assert_eq!(status, 201, "{topic}");
    let invite = pith_ok(&["user", "invite", "--database", &db.url]).await;
    assert!(!invite.trim().is_empty());

    // The seeded names got their look-alike keys when pith connected; a
    // second `user add root` says it exists, and `user token` issues another.
    let unkeyed = client.query_one("SELECT count(*) FROM users WHERE skeleton IS NULL", &[]).await.expect("count");
    assert_eq!(unkeyed.get::<_, i64>(0), 0);
    let words = ["user", "add", "r0ot", "--database", db.url.as_str()];
    let again = run_pith(&words.iter().map(OsStr::new).collect::<Vec<_>>()).await;
    assert!(!again.status.success());
    assert!(String::from_utf8_lossy(&again.stderr).contains("too similar to the existing user root"));
    let second = pith_ok(&["user", "token", "root", "--database", &db.url]).await;
    let second = second.lines().last().expect("token").trim().to_owned();
    assert_ne!(second, token);
    for t in [&token, &second] {
        let (status, me) = app.send(reqwest::Method::GET, "/api/v1/auth/me", Some(t), None).await;
        assert_eq!((status, me["name"].clone()), (200, json!("root")), "{me}");
    }
    app.stop().await;
}

#[tokio::test]
async fn backup_on_a_postgres_url_points_at_pg_dump() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("b.db");
    let args: Vec<&OsStr> = vec![
        "backup".as_ref(),
        file.as_os_str(),
        "--database".as_ref(),
        "postgres://postgres@127.0.0.1:1/none".as_ref(),
    ];
    let out = run_pith(&args).await;
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("pg_dump"), "{}", String::from_utf8_lossy(&out.stderr));
}

#[tokio::test]
async fn no_query_text_is_an_error_for_postgres_search() {
    use pith::store::{Search, SearchKind, Store};
    let db = TestDb::create().await;
    let store = db.store().await;
    let long = "x\"(*!|&:".repeat(3000);
    for text in [
        "\"",
        "*",
        "!",
        "a | b",
        "a & b",
        "!x",
        "(hello",
        "hello)",
        "a:b",
        "a:*",
        "<->",
        "a <-> b",
        "'quoted'",
        "\\",
        "日本語 テキスト",
        "é\u{301}",
        "\u{200b}",
        "hello*world",
        "NEAR(a b)",
        "a:A",
        &long,
    ] {
        for kind in [SearchKind::Topics, SearchKind::Posts] {
            let q = Search { text: text.to_owned(), kind, community: None, offset: 0, limit: 10 };
            let page = store.search(q).await;
            assert!(page.as_ref().is_ok_and(|p| p.hits.is_empty()), "{text:?}: {:?}", page.map(|p| p.hits.len()));
        }
    }
    store.shutdown().await;
}

#[tokio::test]
async fn an_unreachable_server_is_unavailable_not_a_crash() {
    use pith::store::StoreError;
    use pith::store::postgres::{PgOptions, PgStore};
    let opts = PgOptions { pool_size: 1, wait: std::time::Duration::from_secs(2) };
    let refused = PgStore::connect("postgres://postgres@127.0.0.1:1/nothing", &opts).await;
    assert!(matches!(refused, Err(StoreError::Unavailable(_))), "{:?}", refused.err());

    let args: Vec<&OsStr> = ["user", "add", "someone", "--database", "postgres://u:topsecret@127.0.0.1:1/x"]
        .iter()
        .map(|s| OsStr::new(*s))
        .collect();
    let out = run_pith(&args).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(stderr.contains("cannot open database postgres://u:***@127.0.0.1:1/x"), "{stderr}");
    assert!(!stderr.contains("topsecret"), "the password is never shown: {stderr}");
}

#[tokio::test]
async fn concurrent_votes_on_one_topic_lose_no_update() {
    use pith::model::{Username, VoteTarget};
    use pith::store::Store;
    let (db, store, _admin, topic) = topic_fixture("Vote").await;
    let mut voters = Vec::new();
    for i in 0..24 {
        voters.push(
            store.create_user(Username::parse(&format!("voter{i}")).expect("name"), None, false).await.expect("voter"),
        );
    }
    // Each voter votes up three times at once (a double-clicked button):
    // without the row lock, each of the three would read "no vote yet" and
    // add one to the score.
    let tasks: Vec<_> = voters
        .iter()
        .flat_map(|voter| std::iter::repeat_n(voter.clone(), 3))
        .map(|voter| {
            let store = store.clone();
            tokio::spawn(async move { store.vote(&voter, VoteTarget::Topic(topic.id), 1).await.expect("vote") })
        })
        .collect();
    for task in tasks {
        task.await.expect("voter");
    }
    let (read, _) = store.topic_with_posts(topic.id, pith::store::PostSort::Best).await.expect("read");
    assert_eq!(read.score, 24);
    let row = db.client().await.query_one("SELECT count(*), sum(value)::bigint FROM votes", &[]).await.expect("votes");
    assert_eq!((row.get::<_, i64>(0), row.get::<_, i64>(1)), (24, 24));
    store.shutdown().await;
}

/// `pith serve --database URL` on a free port, killed when dropped.
struct Node {
    child: tokio::process::Child,
    base: String,
}

impl Node {
    async fn start(url: &str) -> Node {
        let port = crate::support::child::free_port();
        let mut cmd = tokio::process::Command::from(crate::support::child::pith());
        cmd.args(["serve", "--rate-limits", "false", "--listen", &format!("127.0.0.1:{port}"), "--database", url])
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .kill_on_drop(true);
        let mut child = cmd.spawn().expect("spawn pith serve");
        let base = format!("http://127.0.0.1:{port}");
        let probe = crate::support::helpers::client();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        loop {
            if let Ok(res) = probe.get(format!("{base}/healthz")).send().await
                && res.status() == 200
            {
                return Node { child, base };
            }
            assert!(child.try_wait().expect("try_wait").is_none(), "pith serve on PostgreSQL exited early");
            assert!(std::time::Instant::now() < deadline, "pith serve on PostgreSQL never became healthy");
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
    }
}

#[tokio::test]
async fn two_serve_processes_share_one_postgres_database() {
    let db = TestDb::create().await;
    let out = pith_ok(&["user", "add", "root", "--admin", "--database", &db.url]).await;
    let token = out.lines().last().expect("token").trim().to_owned();
    let (a, b) = (Node::start(&db.url).await, Node::start(&db.url).await);
    let http = crate::support::helpers::client();
    let made = http
        .post(format!("{}/api/v1/communities", a.base))
        .bearer_auth(&token)
        .json(&json!({"name": "raspi", "title": "Pi"}))
        .send()
        .await
        .expect("create community");
    assert_eq!(made.status(), 201);
    let topic: serde_json::Value = http
        .post(format!("{}/api/v1/communities/raspi/topics", b.base))
        .bearer_auth(&token)
        .json(&json!({"title": "Written through B"}))
        .send()
        .await
        .expect("create topic")
        .json()
        .await
        .expect("json");
    let id = topic["id"].as_i64().expect("id");
    let read: serde_json::Value =
        http.get(format!("{}/api/v1/topics/{id}", a.base)).send().await.expect("read").json().await.expect("json");
    assert_eq!(read["topic"]["title"], "Written through B", "{read}");

    // SIGTERM: each node stops cleanly.
    for mut node in [a, b] {
        let pid = node.child.id().expect("pid") as i32;
        // SAFETY: signalling our own child process.
        unsafe { libc::kill(pid, libc::SIGTERM) };
        let status = tokio::time::timeout(std::time::Duration::from_secs(20), node.child.wait())
            .await
            .expect("stops within 20 s")
            .expect("wait");
        assert!(status.success(), "{status}");
    }
}

/// Replies arriving at once to one topic all succeed: with a share lock on
/// the topic each reply then upgraded to bump the counts, PostgreSQL aborted
/// some as deadlocked (answered 503; found by bench/postgres.sh).
#[tokio::test]
async fn concurrent_replies_to_one_topic_all_succeed_and_are_counted() {
    use pith::model::{Body, Text};
    use pith::store::{NewPost, Store};
    let (_db, store, admin, topic) = topic_fixture("Busy").await;
    let tasks: Vec<_> = (0..64)
        .map(|i| {
            let (store, admin) = (store.clone(), admin.clone());
            tokio::spawn(async move {
                let reply = NewPost {
                    topic_id: topic.id,
                    parent_id: None,
                    body: Text::render(Body::parse(&format!("reply {i}")).expect("body")),
                    remote_id: None,
                };
                store.create_post(&admin, reply).await
            })
        })
        .collect();
    for task in tasks {
        task.await.expect("task").expect("every concurrent reply is stored");
    }
    let (read, posts) = store.topic_with_posts(topic.id, pith::store::PostSort::Old).await.expect("read");
    assert_eq!(posts.len(), 64);
    assert_eq!(read.post_count, 64);
    store.shutdown().await;
}

/// A fresh database with an admin, the community `raspi` and one topic
/// titled `title` in it, for the concurrency tests.
async fn topic_fixture(
    title: &str,
) -> (TestDb, std::sync::Arc<pith::store::postgres::PgStore>, pith::model::User, pith::model::Topic) {
    use pith::model::{CommunityName, Title, Username};
    use pith::store::{NewCommunity, NewTopic, Store};
    let db = TestDb::create().await;
    let store = std::sync::Arc::new(db.store().await);
    let admin = store.create_user(Username::parse("admin").expect("name"), None, true).await.expect("admin");
    let community = NewCommunity {
        name: CommunityName::parse("raspi").expect("name"),
        title: Title::parse("Pi").expect("title"),
        description: String::new(),
    };
    store.create_community(&admin, community).await.expect("community");
    let new = NewTopic {
        community: CommunityName::parse("raspi").expect("name"),
        title: Title::parse(title).expect("title"),
        body: None,
        url: None,
        remote_id: None,
    };
    let topic = store.create_topic(&admin, new).await.expect("topic");
    (db, store, admin, topic)
}
