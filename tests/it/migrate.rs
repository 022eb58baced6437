//! `pith migrate` with the real binary: a forum with rows in every table,
//! SQLite -> PostgreSQL -> SQLite; every table equal at the end, the same
//! topic JSON served from each copy, and a non-empty target refused.

use std::ffi::OsStr;
use std::path::Path;

use pith::app::AppState;
use pith::migrate::rows::TABLES;
use pith::server as http;
use pith::store::Store;
use pith::store::postgres::{PgOptions, PgStore};
use reqwest::Method;
use serde_json::{Value, json};

use crate::support::child::run_pith;
use crate::support::helpers::{spawn_app, spawn_app_in};

/// Every row of every table `pith migrate` copies (its own list, so a
/// table added there is checked here), sorted, as text.
fn dump(db: &Path) -> Vec<(String, Vec<String>)> {
    let conn = rusqlite::Connection::open(db).expect("open");
    TABLES
        .iter()
        .map(|t| {
            let mut stmt = conn.prepare(&format!("SELECT * FROM {t}")).expect("select");
            let n = stmt.column_count();
            let mut rows: Vec<String> = stmt
                .query_map([], |r| {
                    (0..n)
                        .map(|i| r.get::<_, rusqlite::types::Value>(i).map(|v| format!("{v:?}")))
                        .collect::<Result<Vec<_>, _>>()
                })
                .expect("query")
                .map(|r| r.expect("row").join("|"))
                .collect();
            rows.sort();
            (t.to_string(), rows)
        })
        .collect()
}

async fn migrate(from: &str, to: &str) -> std::process::Output {
    run_pith(&["migrate".as_ref(), "--from".as_ref(), OsStr::new(from), "--to".as_ref(), OsStr::new(to)]).await
}

#[tokio::test]
async fn a_forum_survives_sqlite_to_postgres_and_back_with_every_row_and_the_same_topic_json() {
    let app = spawn_app().await;
    let admin = app.admin_token.clone();
    let (bob, carol) = (app.user("bob").await, app.user("carol").await);
    // An address waiting for its link, and the mail that carries it.
    let link = pith::model::mail::MailLink {
        hash: [7; 32],
        expires_at: pith::model::Timestamp(2_000_000_000),
        url: Some("http://forum.example/verify/t".into()),
    };
    let email = pith::model::mail::Email::parse("dora@example.org").expect("email");
    let name = pith::model::Username::parse("dora").expect("name");
    app.state.store.register_with_email(name, "hash".into(), None, email, link).await.expect("dora");
    app.community("pis").await;
    let topic = app.topic("pis", &bob, "Migrating a Pi forum").await;
    let first = app.reply(topic, &carol, None, "Ünïcode, *markdown* and `code`").await;
    let rude = app.reply(topic, &bob, Some(first), "a rude reply").await;
    app.vote("topics", topic, &carol, 1).await;
    app.vote("posts", first, &bob, -1).await;
    let ok = |(s, b): (u16, Value)| assert!((200..300).contains(&s), "{s} {b}");
    ok(app.post(&format!("/api/v1/posts/{rude}/report"), Some(&carol), json!({"reason": "rude"})).await);
    ok(app.post(&format!("/api/v1/posts/{rude}/remove"), Some(&admin), json!({"reason": "rule 1"})).await);
    ok(app.post("/api/v1/communities/pis/bans", Some(&admin), json!({"username": "bob", "reason": "rude"})).await);
    ok(app.post("/api/v1/admin/invites", Some(&admin), json!({})).await);
    ok(app.send(Method::POST, &format!("/api/v1/topics/{topic}/save"), Some(&carol), None).await);
    ok(app.send(Method::POST, &format!("/api/v1/posts/{first}/save"), Some(&carol), None).await);
    ok(app.send(Method::POST, "/api/v1/communities/pis/block", Some(&bob), None).await);
    let (status, sent) = app.post("/api/v1/messages", Some(&carol), json!({"to": "bob", "body": "hi *bob*"})).await;
    ok((status, sent.clone()));
    let message = sent["id"].as_i64().expect("message id");
    ok(app.post(&format!("/api/v1/messages/{message}/report"), Some(&bob), json!({"reason": "spam"})).await);
    ok(app.send(Method::POST, "/api/v1/users/carol/block", Some(&bob), None).await);
    ok(app.send(Method::PUT, "/api/v1/admin/settings", Some(&admin), Some(json!({"registration": "invite"}))).await);
    // Two-factor secrets and recovery codes, and a deleted account.
    let store = &app.state.store;
    let carol_id = store.user_credentials("carol".into()).await.expect("read").expect("carol").0.id;
    store.begin_totp(carol_id, vec![7; 20]).await.expect("begin");
    assert!(store.enable_totp(carol_id, vec![7; 20], 1, vec![[1; 32], [2; 32]]).await.expect("2fa"));
    app.user("dan").await;
    let dan_id = store.user_credentials("dan".into()).await.expect("read").expect("dan").0.id;
    store.delete_user(dan_id, pith::model::ContentFate::KeepAnonymous).await.expect("delete dan");
    // A picture's row (its file is not the database's), and a post showing it.
    let picture = pith::model::media::Media {
        name: format!("{}-4x3.png", "ab".repeat(16)),
        owner_id: Some(carol_id),
        bytes: 120,
        width: 4,
        height: 3,
        content_type: "image/png".into(),
        created_at: pith::model::Timestamp(1_700_000_000),
    };
    let shown = format!("![a pixel](/media/{})", picture.name);
    store.record_media(picture, pith::model::media::MediaQuota::default()).await.expect("picture");
    app.reply(topic, &carol, None, &shown).await;
    // Federation's tables: a key, a remote follower, a queued delivery.
    use pith::model::federation::{ActorKey, ActorKind, NewDelivery, RemoteActor};
    let community = store.community("pis".into()).await.expect("community");
    let key = ActorKey { private_pem: "private".into(), public_pem: "public".into() };
    store.put_actor_key(ActorKind::Community, community.id, key).await.expect("key");
    let remote = RemoteActor {
        id: "https://a.example/u/r".into(),
        inbox: "https://a.example/u/r/inbox".into(),
        shared_inbox: None,
        key_id: "https://a.example/u/r#k".into(),
        public_key_pem: "pem".into(),
        name: "r".into(),
        fetched_at: 1_700_000_000,
        url: Some("https://a.example/@r".into()),
    };
    store.put_remote_actor(remote).await.expect("actor");
    store
        .add_follower(community.id, "https://a.example/u/r".into(), "https://a.example/f/1".into())
        .await
        .expect("follow");
    let delivery = NewDelivery {
        inbox: "https://a.example/u/r/inbox".into(),
        body: "{}".into(),
        signer: ActorKind::Community,
        signer_id: community.id,
        key_id: "k".into(),
    };
    store.queue_deliveries(vec![delivery], pith::model::Timestamp(1_700_000_000)).await.expect("queue");
    // A remote user and the topic its `Page` became.
    let remote = store.remote_user("https://a.example/u/r".into(), "r@a.example".into()).await.expect("remote user");
    let page = pith::store::NewTopic {
        community: pith::model::CommunityName::parse("pis").expect("name"),
        title: pith::model::Title::parse("From afar").expect("title"),
        body: None,
        url: None,
        remote_id: Some("https://a.example/post/1".into()),
    };
    store.create_topic(&remote, page).await.expect("remote topic");
    // A community on another server, and a local user's follow of it.
    let group = RemoteActor {
        id: "https://a.example/c/far".into(),
        inbox: "https://a.example/c/far/inbox".into(),
        shared_inbox: Some("https://a.example/inbox".into()),
        key_id: "https://a.example/c/far#k".into(),
        public_key_pem: "pem".into(),
        name: "far".into(),
        fetched_at: 1_700_000_000,
        url: None,
    };
    let far = store
        .put_remote_community(group, "far@a.example".into(), "Far".into(), String::new())
        .await
        .expect("remote community");
    let (carol_user, _) = store.user_credentials("carol".into()).await.expect("read").expect("carol");
    store.follow_remote(far.id, carol_user.id, "https://here/f/1".into()).await.expect("follow");
    let rule = pith::model::instances::InstanceRule::Block;
    store.set_instance_rule("spam.example".into(), Some((rule, "spam".into()))).await.expect("rule");
    let want = app.read_topic(topic, "old").await;
    let src_dir = app.stop().await;
    let src_db = src_dir.path().join("pith.db");
    let before = dump(&src_db);
    for (table, rows) in &before {
        assert!(!rows.is_empty(), "the seeded forum has rows in {table}");
    }

    let db = crate::support::pg::TestDb::create().await;
    let url = db.url.clone();
    let out = migrate(&src_dir.path().to_string_lossy(), &url).await;
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "to PostgreSQL: {stdout}{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("verified") && stdout.contains("posts"), "{stdout}");

    let again = migrate(&src_dir.path().to_string_lossy(), &url).await;
    assert!(!again.status.success(), "a second copy into the same database is refused");
    assert!(String::from_utf8_lossy(&again.stderr).contains("not empty"), "{}", String::from_utf8_lossy(&again.stderr));

    let back = tempfile::tempdir().expect("tempdir");
    let out = migrate(&url, &back.path().to_string_lossy()).await;
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "back to SQLite: {stdout}{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("verified"), "{stdout}");
    assert_eq!(dump(&back.path().join("pith.db")), before, "every table equal after the round trip");
    // The copied posts are in the search index (no trigger puts a new post
    // there: the copy indexes them), one entry per visible post.
    let (indexed, visible): (i64, i64) = rusqlite::Connection::open(back.path().join("pith.db"))
        .expect("open the copy")
        .query_row(
            "SELECT (SELECT count(*) FROM posts_fts_docsize), \
             (SELECT count(*) FROM posts WHERE deleted = 0 AND removed = 0)",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .expect("count");
    assert!(visible > 0);
    assert_eq!(indexed, visible, "every visible copied post is indexed");

    let copy = spawn_app_in(back).await;
    assert_eq!(copy.read_topic(topic, "old").await, want, "served from the SQLite copy");
    copy.stop().await;
    // Served from PostgreSQL: the same topic JSON, and writes work.
    let store = PgStore::connect(&url, &PgOptions::default()).await.expect("connect");
    let state = AppState::new(store, 1 << 20);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(http::run(listener, state, std::time::Duration::from_secs(30), async {
        let _ = stopped.await;
    }));
    let got: Value = reqwest::get(format!("http://{addr}/api/v1/topics/{topic}?sort=old"))
        .await
        .expect("get")
        .json()
        .await
        .expect("json");
    assert_eq!(got, want, "served from PostgreSQL");
    // The id sequences moved past the copied rows: a new post gets a new id.
    let res = reqwest::Client::new()
        .post(format!("http://{addr}/api/v1/topics/{topic}/posts"))
        .bearer_auth(&admin)
        .json(&json!({"body": "written after the move"}))
        .send()
        .await
        .expect("post");
    assert_eq!(res.status().as_u16(), 201, "a write on the migrated database");
    let _ = stop.send(());
    server.await.expect("join").expect("served");

    drop(db);
}

/// Misuse is a readable one-line error and a failed exit, and creates
/// nothing: a missing SQLite source, and two ends of the same kind.
#[tokio::test]
async fn pith_migrate_refuses_a_missing_source_and_two_ends_of_one_kind() {
    let dir = tempfile::tempdir().expect("tempdir");
    let missing = dir.path().join("no-such-dir").join("pith.db");
    let target = dir.path().join("copy").join("pith.db");
    let cases = [
        (missing.to_string_lossy().into_owned(), "postgres://postgres@127.0.0.1:1/none".to_owned(), "no-such-dir"),
        (missing.to_string_lossy().into_owned(), target.to_string_lossy().into_owned(), "pith backup"),
    ];
    for (from, to, says) in cases {
        let out = migrate(&from, &to).await;
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{from} -> {to}: {stderr}");
        let line =
            stderr.lines().find(|l| l.starts_with("pith: ")).unwrap_or_else(|| panic!("an error line: {stderr}"));
        assert!(line.contains(says), "{from} -> {to}: the error says `{says}`: {stderr}");
        assert!(!stderr.contains("panicked"), "{stderr}");
    }
    assert!(!dir.path().join("no-such-dir").exists(), "a refused source directory is not created");
    assert!(!dir.path().join("copy").exists(), "a refused target is not created");
}
