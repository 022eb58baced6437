//! Private messages and user blocks through the API, on both stores:
//! sending, the conversation list and one conversation in pages, read
//! marks, the recipient's `message` notification, every error code, the
//! per-user rate limit, a site ban, a recipient's report and the administrators' view
//! (reported messages only), and what blocking a user does: their
//! messages refused, their replies and mentions notify no one, `/me/blocks`.
//! The pages are in `pages::messages`, the live channel in `live`.

use reqwest::Method;
use serde_json::{Value, json};

use crate::support::helpers::{TestApp, assert_error, spawn_app, spawn_app_limited, spawn_pg_app};
use crate::support::pg::TestDb;
use pith::app::limits::{Rate, RateConfig};
use pith::store::Store;

async fn get<S: Store>(app: &TestApp<S>, token: &str, path: &str) -> Value {
    let (status, body) = app.send(Method::GET, &format!("/api/v1{path}"), Some(token), None).await;
    assert_eq!(status, 200, "{path}: {body}");
    body
}

async fn send<S: Store>(app: &TestApp<S>, from: &str, to: &str, body: &str) -> (u16, Value) {
    app.post("/api/v1/messages", Some(from), json!({"to": to, "body": body})).await
}

async fn sent<S: Store>(app: &TestApp<S>, from: &str, to: &str, body: &str) -> i64 {
    let (status, message) = send(app, from, to, body).await;
    assert_eq!(status, 201, "{message}");
    message["id"].as_i64().expect("id")
}

fn ids(page: &Value, list: &str) -> Vec<i64> {
    page[list].as_array().expect("list").iter().map(|m| m["id"].as_i64().expect("id")).collect()
}

/// Alice writes to Bob; Bob reads, answers, pages through, reports.
async fn messages_are_sent_listed_and_read<S: Store>(app: &TestApp<S>) {
    let (alice, bob, carol) = (app.user("alice").await, app.user("bob").await, app.user("carol").await);
    let (status, first) = send(app, &alice, "Bob", "Hello *Bob*").await;
    assert_eq!(status, 201, "{first}");
    let m1 = first["id"].as_i64().expect("id");
    let want = json!({"id": m1, "from": "alice", "to": "bob", "body": "Hello *Bob*",
        "body_html": "<p>Hello <em>Bob</em></p>\n", "created_at": first["created_at"], "read": false});
    assert_eq!(first, want, "rendered once, at write");

    // Bob's inbox hears of it; his list of conversations shows it unread.
    let inbox = get(app, &bob, "/inbox").await;
    let notice = &inbox["items"][0];
    assert_eq!((notice["kind"].as_str(), notice["from"].as_str()), (Some("message"), Some("alice")));
    assert_eq!((notice["topic_id"].clone(), notice["excerpt"].as_str()), (Value::Null, Some("Hello Bob")));
    assert_eq!(inbox["unread"], 1);
    let list = get(app, &bob, "/messages").await;
    let c = &list["conversations"][0];
    assert_eq!((c["with"].as_str(), c["last_id"].as_i64(), c["unread"].as_i64()), (Some("alice"), Some(m1), Some(1)));
    assert_eq!(
        (c["last_from"].as_str(), c["excerpt"].as_str(), &list["next"]),
        (Some("alice"), Some("Hello Bob"), &Value::Null)
    );
    assert_eq!(get(app, &alice, "/messages").await["conversations"][0]["unread"], 0, "her own are not unread");

    // More, both ways; one conversation in pages, newest first.
    let mut all = vec![m1];
    for i in 0..4 {
        let (from, to) = if i % 2 == 0 { (&bob, "alice") } else { (&alice, "bob") };
        all.push(sent(app, from, to, &format!("message {i}")).await);
    }
    all.reverse();
    let mut seen = Vec::new();
    let mut after = String::new();
    loop {
        let page = get(app, &alice, &format!("/messages/BOB?limit=2{after}")).await;
        assert_eq!(page["with"], "bob");
        seen.extend(ids(&page, "messages"));
        match page["next"].as_i64() {
            Some(n) => after = format!("&after={n}"),
            None => break,
        }
    }
    assert_eq!(seen, all, "every message once, newest first");

    // Reading marks the conversation read, and its notifications.
    assert_eq!(get(app, &bob, "/inbox").await["unread"], 3);
    let page = get(app, &bob, "/messages/alice?limit=1").await;
    assert_eq!(page["messages"][0]["read"], false, "shown as it was before this read");
    assert_eq!(get(app, &bob, "/inbox").await["unread"], 0);
    assert_eq!(get(app, &bob, "/messages").await["conversations"][0]["unread"], 0);
    let hers = get(app, &alice, "/messages/bob").await;
    let to_bob: Vec<bool> = hers["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .filter(|m| m["to"] == "bob")
        .map(|m| m["read"].as_bool().unwrap_or(false))
        .collect();
    assert_eq!(to_bob, [true, true, true], "alice sees bob read them");

    // A second conversation: the most recent first, in pages.
    sent(app, &carol, "bob", "hi from carol").await;
    let list = get(app, &bob, "/messages").await;
    let with: Vec<&str> =
        list["conversations"].as_array().expect("list").iter().filter_map(|c| c["with"].as_str()).collect();
    assert_eq!(with, ["carol", "alice"]);
    let first = get(app, &bob, "/messages?limit=1").await;
    let next = first["next"].as_i64().expect("a second page");
    let rest = get(app, &bob, &format!("/messages?limit=1&after={next}")).await;
    assert_eq!((rest["conversations"][0]["with"].as_str(), &rest["next"]), (Some("alice"), &Value::Null));
}

/// Every refusal of a message, with its code.
async fn messages_are_refused_with_codes<S: Store>(app: &TestApp<S>) {
    let (dave, erin) = (app.user("dave").await, app.user("erin").await);
    for to in ["dave", "DAVE"] {
        let (status, body) = send(app, &dave, to, "me").await;
        assert_error("to oneself", status, &body, 422, "message_to_self");
    }
    let (status, body) = send(app, &dave, "nobody", "x").await;
    assert_error("to no one", status, &body, 404, "not_found");
    let (status, body) = send(app, &dave, &"x".repeat(100), "x").await;
    assert_error("a long name", status, &body, 404, "not_found");
    for empty in ["", " \n "] {
        let (status, body) = send(app, &dave, "erin", empty).await;
        assert_error("empty", status, &body, 422, "invalid_field");
    }
    let (status, body) = send(app, &dave, "erin", &"x".repeat(40_001)).await;
    assert_error("oversized", status, &body, 422, "invalid_field");
    let (status, body) = app.post("/api/v1/messages", Some(&dave), json!({"to": "erin"})).await;
    assert_error("no body", status, &body, 422, "invalid_body");
    let (status, body) = app.post("/api/v1/messages", None, json!({"to": "erin", "body": "x"})).await;
    assert_error("signed out", status, &body, 401, "unauthorized");
    let (status, body) = app.get("/api/v1/messages").await;
    assert_error("signed out", status, &body, 401, "unauthorized");
    for query in ["?after=0", "?after=abc", "?limit=0", "?limit=101"] {
        let (status, body) = app.send(Method::GET, &format!("/api/v1/messages/erin{query}"), Some(&dave), None).await;
        assert_eq!(status, 400, "{query}: {body}");
    }
    let (status, body) = app.send(Method::GET, "/api/v1/messages/nobody", Some(&dave), None).await;
    assert_error("no one's conversation", status, &body, 404, "not_found");

    // Erin blocks Dave: his messages are refused until she unblocks him.
    let (status, _) = app.send(Method::POST, "/api/v1/users/dave/block", Some(&erin), None).await;
    assert_eq!(status, 204);
    let (status, body) = send(app, &dave, "erin", "are you there?").await;
    assert_error("blocked", status, &body, 403, "blocked");
    assert_eq!(get(app, &erin, "/inbox").await["unread"], 0, "nothing reached her");
    sent(app, &erin, "dave", "she may still write to him").await;
    let (status, _) = app.send(Method::DELETE, "/api/v1/users/dave/block", Some(&erin), None).await;
    assert_eq!(status, 204);
    sent(app, &dave, "erin", "thanks").await;

    // Banned from the site, Dave sends nothing until the ban is lifted; a
    // community's ban leaves his messages alone.
    let admin = app.admin_token.clone();
    let (status, body) = app.post("/api/v1/admin/bans", Some(&admin), json!({"username": "dave"})).await;
    assert_eq!(status, 201, "{body}");
    let (status, body) = send(app, &dave, "erin", "let me out").await;
    assert_error("site-banned", status, &body, 403, "banned");
    let (status, _) = app.send(Method::DELETE, "/api/v1/admin/bans/dave", Some(&admin), None).await;
    assert_eq!(status, 204);
    app.community("strict").await;
    let (status, body) = app.post("/api/v1/communities/strict/bans", Some(&admin), json!({"username": "dave"})).await;
    assert_eq!(status, 201, "{body}");
    sent(app, &dave, "erin", "still here").await;
}

/// Only its recipient reports a message; administrators read reported
/// messages, and no others.
async fn reported_messages_and_only_they_reach_the_administrators<S: Store>(app: &TestApp<S>) {
    let (frank, gina, hal) = (app.user("frank").await, app.user("gina").await, app.user("hal").await);
    let rude = sent(app, &frank, "gina", "something rude").await;
    sent(app, &frank, "gina", "something private").await;
    let path = format!("/api/v1/messages/{rude}/report");
    for who in [&frank, &hal] {
        let (status, body) = app.post(&path, Some(who), json!({"reason": "mine"})).await;
        assert_error("not the recipient", status, &body, 404, "not_found");
    }
    let (status, body) = app.post(&path, Some(&gina), json!({"reason": " "})).await;
    assert_error("no reason", status, &body, 422, "invalid_field");
    let (status, report) = app.post(&path, Some(&gina), json!({"reason": "abusive"})).await;
    assert_eq!(status, 201, "{report}");
    assert_eq!((report["reporter"].as_str(), report["status"].as_str()), (Some("gina"), Some("open")));
    assert_eq!(report["message"]["body"], "something rude");
    let (status, body) = app.post(&path, Some(&gina), json!({"reason": "again"})).await;
    assert_error("twice", status, &body, 409, "conflict");
    let (status, body) = app.post("/api/v1/messages/999999/report", Some(&gina), json!({"reason": "x"})).await;
    assert_error("no message", status, &body, 404, "not_found");

    let admin = app.admin_token.clone();
    let (status, body) = app.send(Method::GET, "/api/v1/admin/message-reports", Some(&gina), None).await;
    assert_error("not an admin", status, &body, 403, "forbidden");
    let reports = get(app, &admin, "/admin/message-reports?status=open").await;
    let bodies: Vec<&str> =
        reports["reports"].as_array().expect("reports").iter().filter_map(|r| r["message"]["body"].as_str()).collect();
    assert_eq!(bodies, ["something rude"], "the reported message, and not the private one");
    // The admin's own conversation with frank is theirs: it shows nothing
    // of frank's with gina.
    assert_eq!(get(app, &admin, "/messages/frank").await["messages"], json!([]));
    assert_eq!(get(app, &admin, "/messages").await["conversations"], json!([]));

    let resolve = format!("/api/v1/admin/message-reports/{}", report["id"]);
    let (status, body) = app.patch(&resolve, Some(&gina), json!({"status": "resolved"})).await;
    assert_error("not an admin", status, &body, 403, "forbidden");
    let (status, body) = app.patch(&resolve, Some(&admin), json!({"status": "maybe"})).await;
    assert_error("a bad status", status, &body, 422, "invalid_field");
    let (status, done) = app.patch(&resolve, Some(&admin), json!({"status": "dismissed"})).await;
    assert_eq!(
        (status, done["status"].as_str(), done["resolved_by"].as_str()),
        (200, Some("dismissed"), Some("admin"))
    );
    assert_eq!(get(app, &admin, "/admin/message-reports?status=open").await["reports"], json!([]));
    assert_eq!(get(app, &admin, "/admin/message-reports").await["reports"][0]["id"], report["id"]);
}

/// A blocked user's replies and mentions notify the blocker of nothing;
/// `/me/blocks` lists blocked users and communities; the errors.
async fn blocking_a_user<S: Store>(app: &TestApp<S>) {
    app.community("quiet").await;
    let (ivy, jack) = (app.user("ivy").await, app.user("jack").await);
    let topic = app.topic("quiet", &ivy, "Ivy's topic").await;
    let block = |method: Method, name: &'static str, token: Option<String>| async move {
        app.send(method, &format!("/api/v1/users/{name}/block"), token.as_deref(), None).await
    };
    for _ in 0..2 {
        assert_eq!(block(Method::POST, "Jack", Some(ivy.clone())).await.0, 204, "idempotent");
    }
    let (status, _) = app.send(Method::POST, "/api/v1/communities/quiet/block", Some(&ivy), None).await;
    assert_eq!(status, 204);
    assert_eq!(get(app, &ivy, "/me/blocks").await, json!({"users": ["jack"], "communities": ["quiet"]}));

    let reply = app.reply(topic, &jack, None, "hey @ivy").await;
    app.reply(topic, &jack, Some(reply), "@Ivy, answer me").await;
    assert_eq!(get(app, &ivy, "/inbox").await, json!({"items": [], "unread": 0, "next": null}));
    // The topic itself is the same for everyone.
    let topic_json = app.read_topic(topic, "old").await;
    assert_eq!(topic_json["posts"].as_array().map(Vec::len), Some(2));

    for _ in 0..2 {
        assert_eq!(block(Method::DELETE, "jack", Some(ivy.clone())).await.0, 204, "idempotent");
    }
    let heard = app.reply(topic, &jack, None, "now you hear me").await;
    let inbox = get(app, &ivy, "/inbox").await;
    assert_eq!((inbox["unread"].as_i64(), inbox["items"][0]["post_id"].as_i64()), (Some(1), Some(heard)));

    let (status, body) = block(Method::POST, "ivy", Some(ivy.clone())).await;
    assert_error("oneself", status, &body, 422, "block_self");
    let (status, body) = block(Method::POST, "nobody", Some(ivy.clone())).await;
    assert_error("no one", status, &body, 404, "not_found");
    let (status, body) = block(Method::DELETE, "jack", None).await;
    assert_error("signed out", status, &body, 401, "unauthorized");
    let (status, body) = app.get("/api/v1/me/blocks").await;
    assert_error("signed out", status, &body, 401, "unauthorized");
}

#[tokio::test]
async fn messages_reports_and_blocks_on_sqlite() {
    let app = spawn_app().await;
    messages_are_sent_listed_and_read(&app).await;
    messages_are_refused_with_codes(&app).await;
    reported_messages_and_only_they_reach_the_administrators(&app).await;
    blocking_a_user(&app).await;
    // Kept across a restart.
    let dir = app.stop().await;
    let app = crate::support::helpers::spawn_app_in(dir).await;
    let admin = app.admin_token.clone();
    assert_eq!(get(&app, &admin, "/admin/message-reports").await["reports"].as_array().map(Vec::len), Some(1));
    app.stop().await;
}

#[tokio::test]
async fn messages_reports_and_blocks_on_postgres() {
    let db = TestDb::create().await;
    let app = spawn_pg_app(&db).await;
    messages_are_sent_listed_and_read(&app).await;
    messages_are_refused_with_codes(&app).await;
    reported_messages_and_only_they_reach_the_administrators(&app).await;
    blocking_a_user(&app).await;
    app.stop().await;
}

#[tokio::test]
async fn messages_are_rate_limited_per_user() {
    let rate = Rate::parse("2/1h").expect("rate");
    let app = spawn_app_limited(&RateConfig { message_user: rate, ..RateConfig::default() }).await;
    let (kim, lee, max) = (app.user("kim").await, app.user("lee").await, app.user("max").await);
    sent(&app, &kim, "lee", "one").await;
    sent(&app, &kim, "max", "two").await;
    let (status, body) = send(&app, &kim, "lee", "three").await;
    assert_error("over the limit", status, &body, 429, "rate_limited");
    assert_eq!(get(&app, &lee, "/messages/kim").await["messages"].as_array().map(Vec::len), Some(1), "not sent");
    sent(&app, &lee, "kim", "another sender has their own").await;
    sent(&app, &max, "kim", "and so on").await;
    app.stop().await;
}
