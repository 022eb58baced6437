//! The inbox end to end, on both stores: a reply, an @mention and a
//! moderator's action each leave a notification (never for one's own
//! doing), which survives a restart; paging, unread counts, marking read,
//! and the errors. The live side is in `live`, the page in `pages::inbox`.

use reqwest::Method;
use serde_json::{Value, json};

use crate::support::helpers::{TestApp, assert_error, spawn_app, spawn_app_in, spawn_pg_app};
use crate::support::pg::TestDb;
use pith::store::Store;

async fn inbox<S: Store>(app: &TestApp<S>, token: &str, query: &str) -> Value {
    let (status, body) = app.send(Method::GET, &format!("/api/v1/inbox{query}"), Some(token), None).await;
    assert_eq!(status, 200, "{body}");
    body
}

fn kinds(page: &Value) -> Vec<(String, i64)> {
    page["items"]
        .as_array()
        .expect("items")
        .iter()
        .map(|n| (n["kind"].as_str().unwrap_or_default().to_owned(), n["post_id"].as_i64().unwrap_or(0)))
        .collect()
}

/// Who is notified of what: `alice` owns the topic, `bob` replies.
struct Story {
    alice: String,
    bob: String,
    carol: String,
    topic: i64,
}

async fn notifications_are_written<S: Store>(app: &TestApp<S>) -> Story {
    app.community("raspi").await;
    let (alice, bob, carol) = (app.user("alice").await, app.user("bob").await, app.user("carol").await);
    let topic = app.topic("raspi", &alice, "Pi cases").await;

    // A reply to Alice's topic that also mentions her and Carol: one reply
    // for Alice (not a mention too), one mention for Carol; none for Bob,
    // who mentions himself, nor for a name of no one.
    let body = "Hi @alice, ask @Carol and @bob and @nobody_here. `@dave` is code. mail@carol.example";
    let first = app.reply(topic, &bob, None, body).await;
    let page = inbox(app, &alice, "").await;
    assert_eq!(kinds(&page), [("reply".to_owned(), first)]);
    assert_eq!(page["unread"], 1);
    let item = &page["items"][0];
    assert_eq!(item["from"], "bob");
    assert_eq!(item["topic_id"], topic);
    assert_eq!(item["read"], false);
    assert!(item["excerpt"].as_str().is_some_and(|e| e.starts_with("Hi @alice, ask @Carol")), "{item}");
    assert!(item["created_at"].is_string());
    assert_eq!(kinds(&inbox(app, &carol, "").await), [("mention".to_owned(), first)]);
    assert_eq!(inbox(app, &bob, "").await, json!({"items": [], "unread": 0, "next": null}));

    // Replying to oneself notifies no one; Alice's answer to Bob notifies Bob.
    let own = app.reply(topic, &bob, Some(first), "and me").await;
    assert_eq!(inbox(app, &bob, "").await["unread"], 0);
    let answer = app.reply(topic, &alice, Some(own), "thanks").await;
    assert_eq!(kinds(&inbox(app, &bob, "").await), [("reply".to_owned(), answer)]);

    // The admin removes Bob's post: Bob hears of it, with the reason; an
    // action that changes nothing (removing it again) says nothing more.
    let path = format!("/api/v1/posts/{own}/remove");
    for _ in 0..2 {
        let (status, body) = app.post(&path, Some(&app.admin_token), json!({"reason": "off topic"})).await;
        assert_eq!(status, 204, "{body}");
    }
    let page = inbox(app, &bob, "").await;
    assert_eq!(kinds(&page), [("moderation".to_owned(), own), ("reply".to_owned(), answer)]);
    assert_eq!(page["items"][0]["excerpt"], "Your comment was removed by a moderator: off topic");
    assert_eq!(page["items"][0]["from"], Value::Null);
    // A lock of Alice's topic, too.
    let (status, _) = app.post(&format!("/api/v1/topics/{topic}/lock"), Some(&app.admin_token), json!({})).await;
    assert_eq!(status, 204);
    assert_eq!(kinds(&inbox(app, &alice, "").await)[0], ("moderation".to_owned(), 0));

    // A topic's text mentions too (its author aside): no post, the topic.
    let new = json!({"title": "For Carol", "body": "@carol and @bob, look"});
    let (status, created) = app.post("/api/v1/communities/raspi/topics", Some(&bob), new).await;
    assert_eq!(status, 201, "{created}");
    let page = inbox(app, &carol, "").await;
    assert_eq!(kinds(&page)[0], ("mention".to_owned(), 0));
    assert_eq!(
        (&page["items"][0]["topic_id"], &page["items"][0]["excerpt"]),
        (&created["id"], &json!("@carol and @bob, look"))
    );
    assert_eq!(inbox(app, &bob, "?unread=true").await["unread"], 2, "Bob's own mention is not news");
    Story { alice, bob, carol, topic }
}

async fn paging_and_marking_read<S: Store>(app: &TestApp<S>, story: &Story) {
    let Story { alice, bob, carol, .. } = story;
    let page = inbox(app, bob, "?limit=1").await;
    assert_eq!(page["items"].as_array().map(Vec::len), Some(1));
    let next = page["next"].as_i64().expect("a next page");
    let rest = inbox(app, bob, &format!("?limit=1&after={next}")).await;
    assert_eq!(kinds(&rest)[0].0, "reply");
    assert_eq!(rest["next"], Value::Null);
    assert_eq!(rest["unread"], 2);

    // Marking one read; Carol's id from Bob changes nothing of Carol's.
    let newest = page["items"][0]["id"].as_i64().expect("id");
    let carols = inbox(app, carol, "").await["items"][0]["id"].as_i64().expect("id");
    for _ in 0..2 {
        let (status, body) = app.post("/api/v1/inbox/read", Some(bob), json!({"ids": [newest, carols]})).await;
        assert_eq!((status, body), (200, json!({"unread": 1})), "idempotent");
    }
    assert_eq!(inbox(app, carol, "").await["unread"], 2);
    let unread = inbox(app, bob, "?unread=true").await;
    assert_eq!(unread["items"].as_array().map(Vec::len), Some(1));
    assert_eq!(unread["items"][0]["read"], false);
    assert_eq!(inbox(app, bob, "").await["items"][0]["read"], true);

    let (status, body) = app.post("/api/v1/inbox/read", Some(alice), json!({"all": true})).await;
    assert_eq!((status, body), (200, json!({"unread": 0})));
    assert_eq!(inbox(app, alice, "?unread=true").await["items"], json!([]));
}

async fn errors<S: Store>(app: &TestApp<S>, token: &str) {
    let (status, body) = app.get("/api/v1/inbox").await;
    assert_error("anonymous", status, &body, 401, "unauthorized");
    let (status, body) = app.post("/api/v1/inbox/read", None, json!({"all": true})).await;
    assert_error("anonymous marks", status, &body, 401, "unauthorized");
    for query in ["?after=abc", "?after=-1", "?after=0", "?limit=0", "?limit=101", "?unread=maybe"] {
        let (status, body) = app.send(Method::GET, &format!("/api/v1/inbox{query}"), Some(token), None).await;
        assert!(status == 400, "{query}: {status} {body}");
        assert!(body["error"]["code"].is_string(), "{query}: {body}");
    }
    for bad in
        [json!({}), json!({"ids": []}), json!({"ids": [0]}), json!({"all": false}), json!({"ids": [1], "all": true})]
    {
        let (status, body) = app.post("/api/v1/inbox/read", Some(token), bad.clone()).await;
        assert_error(&bad.to_string(), status, &body, 400, "invalid_ids");
    }
    let (status, body) = app.post("/api/v1/inbox/read", Some(token), json!({"ids": "all"})).await;
    assert!((400..500).contains(&status), "{body}");
}

#[tokio::test]
async fn replies_mentions_and_moderation_fill_the_inbox_on_sqlite_and_survive_a_restart() {
    let app = spawn_app().await;
    let story = notifications_are_written(&app).await;
    let before = inbox(&app, &story.bob, "").await;
    let dir = app.stop().await;
    let app = spawn_app_in(dir).await;
    assert_eq!(inbox(&app, &story.bob, "").await, before, "the same after a restart");
    paging_and_marking_read(&app, &story).await;
    errors(&app, &story.carol).await;
    assert!(story.topic > 0);
    app.stop().await;
}

#[tokio::test]
async fn replies_mentions_and_moderation_fill_the_inbox_on_postgres_and_survive_a_restart() {
    let db = TestDb::create().await;
    let app = spawn_pg_app(&db).await;
    let story = notifications_are_written(&app).await;
    let before = inbox(&app, &story.bob, "").await;
    app.stop().await;
    let app = spawn_pg_app(&db).await;
    assert_eq!(inbox(&app, &story.bob, "").await, before, "the same after a restart");
    paging_and_marking_read(&app, &story).await;
    errors(&app, &story.carol).await;
    app.stop().await;
}

#[tokio::test]
async fn the_unread_count_stops_at_a_thousand() {
    use pith::model::{Body, Text};
    let app = spawn_app().await;
    app.community("raspi").await;
    let alice = app.user("alice").await;
    let topic = app.topic("raspi", &alice, "Popular").await;
    let store = &app.state.store;
    let bob = store.create_user(pith::model::Username::parse("bob").expect("name"), None, false).await.expect("bob");
    let replies = (0..1001).map(|i| {
        let body = Text::render(Body::parse(&format!("reply {i}")).expect("body"));
        store.create_post(&bob, pith::store::NewPost { topic_id: topic, parent_id: None, body, remote_id: None })
    });
    for post in futures_util::future::join_all(replies).await {
        post.expect("reply");
    }
    let page = inbox(&app, &alice, "?limit=1").await;
    assert_eq!(page["unread"], 1000);
    assert!(page["items"][0]["excerpt"].as_str().is_some_and(|e| e.starts_with("reply ")), "{page}");
    app.stop().await;
}

/// SQLite stores each user's unread count (migration 0018): it stays the
/// count of their unread notifications through replies, marking read by id
/// and all at once, reading a conversation, and the deletion of senders'
/// accounts (which takes their notifications), and after a restart.
#[tokio::test]
async fn the_stored_unread_count_follows_every_change_to_the_notifications() {
    use pith::model::{Body, ContentFate, MarkRead, Text, Username};
    use pith::store::NewPost;
    let app = spawn_app().await;
    app.community("raspi").await;
    let token = app.user("alice").await;
    let topic = app.topic("raspi", &token, "Counted").await;
    let store = &app.state.store;
    let (alice, _) = store.user_credentials("alice".into()).await.expect("read").expect("alice");
    let mut others = Vec::new();
    for name in ["bob", "carol", "dave"] {
        others.push(store.create_user(Username::parse(name).expect("name"), None, false).await.expect("user"));
    }
    let text = |s: &str| Text::render(Body::parse(s).expect("body"));
    for (i, user) in others.iter().enumerate() {
        for j in 0..=i + 2 {
            let new = NewPost { topic_id: topic, parent_id: None, body: text(&format!("reply {j}")), remote_id: None };
            store.create_post(user, new).await.expect("reply");
        }
    }
    // Every user's stored count against a count of the rows, and the store's answer.
    let db = app.db_path();
    let check = |step: &'static str| {
        let conn = rusqlite::Connection::open(&db).expect("open");
        let rows = |sql: &str| -> Vec<(i64, i64)> {
            conn.prepare(sql).and_then(|mut s| s.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?.collect()).expect(sql)
        };
        let stored = rows("SELECT user_id, unread FROM inbox_unread WHERE unread > 0 ORDER BY user_id");
        let counted =
            rows("SELECT user_id, count(*) FROM notifications WHERE read = 0 GROUP BY user_id ORDER BY user_id");
        assert_eq!(stored, counted, "{step}");
        counted.iter().find(|(u, _)| *u == alice.id).map_or(0, |(_, n)| *n)
    };
    assert_eq!(check("replies"), 12);
    assert_eq!(store.unread_count(alice.id).await.expect("count"), 12);

    let page = store
        .inbox(alice.id, pith::store::ListInbox { unread_only: false, after: None, limit: 3 })
        .await
        .expect("inbox");
    let mut ids: Vec<i64> = page.items.iter().map(|n| n.id).collect();
    ids.push(ids[0]); // twice: counted once
    assert_eq!(store.mark_read(alice.id, MarkRead::Ids(ids.clone())).await.expect("mark"), 9);
    assert_eq!(store.mark_read(alice.id, MarkRead::Ids(ids)).await.expect("again"), 9, "already read");
    assert_eq!(store.mark_read(others[0].id, MarkRead::Ids(vec![page.items[0].id])).await.expect("other's"), 0);
    assert_eq!(check("marked by id"), 9);

    store.send_message(&others[0], "alice".into(), text("hello")).await.expect("message");
    store.send_message(&others[0], "alice".into(), text("again")).await.expect("message");
    assert_eq!(check("two messages"), 11);
    assert_eq!(store.mark_conversation_read(alice.id, others[0].id).await.expect("read"), Some(9));
    assert_eq!(check("conversation read"), 9);
    store.send_message(&others[1], "alice".into(), text("from carol")).await.expect("message");
    assert_eq!(check("a message from carol"), 10);

    // carol's replies (4, some read) and message go with her account; dave's
    // replies stay (only his messages would go).
    store.delete_user(others[1].id, ContentFate::Remove).await.expect("delete carol");
    let left = check("carol deleted");
    assert_eq!(left, 5, "her 4 replies and her message, all unread, are gone");
    assert_eq!(store.unread_count(alice.id).await.expect("count"), left);
    store.delete_user(others[2].id, ContentFate::KeepAnonymous).await.expect("delete dave");
    assert_eq!(check("dave deleted"), left, "his replies' notifications stay");
    let dir = app.stop().await;
    let app = spawn_app_in(dir).await;
    assert_eq!(app.state.store.unread_count(alice.id).await.expect("count"), left, "after a restart");
    assert_eq!(app.state.store.mark_read(alice.id, MarkRead::All).await.expect("all"), 0);
    let db = app.db_path();
    let stored: i64 = rusqlite::Connection::open(&db)
        .expect("open")
        .query_row("SELECT coalesce(sum(unread), 0) FROM inbox_unread WHERE user_id = ?1", [alice.id], |r| r.get(0))
        .expect("stored");
    assert_eq!(stored, 0);
    app.stop().await;
}
