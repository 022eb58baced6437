//! Issue 21's account lifecycle through the API, on both stores: the
//! export (its shape and content, streamed in chunks), deleting an
//! account (its content kept under no name or removed, its tokens dead,
//! its name reserved, the cached topic evicted), an administrator's purge
//! by API and by `pith user delete`, and two-factor login with real TOTP
//! codes (enrolment, the login's second step, replays, recovery codes,
//! wrong codes counting toward the login limits).

use std::time::Duration;

use pith::app::limits::{Rate, RateConfig};
use pith::store::Store;
use reqwest::Method;
use serde_json::{Value, json};

use crate::support::child::run_pith;
use crate::support::helpers::{TestApp, assert_error, spawn_app, spawn_app_in, spawn_app_limited, spawn_pg_app};
use crate::support::pg::TestDb;

/// A TOTP code of the base32 `secret` at Unix time `at`, as an
/// authenticator app computes it.
fn code(secret: &str, at: u64) -> String {
    let secret = totp_rs::Secret::try_from_base32(secret).expect("base32 secret");
    totp_rs::Builder::new().with_secret(secret).build().expect("totp").generate(at).to_string()
}

fn now() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).expect("clock").as_secs()
}

/// Registers `name` with the password `password123` over the API.
async fn member<S: Store>(app: &TestApp<S>, name: &str) -> String {
    let (status, body) =
        app.post("/api/v1/auth/register", None, json!({"username": name, "password": "password123"})).await;
    assert_eq!(status, 201, "{body}");
    body["token"].as_str().expect("token").to_owned()
}

async fn login<S: Store>(app: &TestApp<S>, name: &str, totp: Option<&str>) -> (u16, Value) {
    let mut body = json!({"username": name, "password": "password123"});
    if let Some(code) = totp {
        body["totp"] = json!(code);
    }
    app.post("/api/v1/auth/login", None, body).await
}

/// The export, read as the stream it is sent as: its chunks' sizes and
/// the parsed document.
async fn export<S: Store>(app: &TestApp<S>, token: &str) -> (Vec<usize>, Value) {
    let mut res = app.req(Method::GET, "/api/v1/me/export").bearer_auth(token).send().await.expect("export");
    assert_eq!(res.status(), 200);
    assert_eq!(res.headers()["content-type"], "application/json");
    assert!(res.headers().get("content-length").is_none(), "streamed, not sent whole");
    let mut chunks = Vec::new();
    let mut bytes = Vec::new();
    while let Some(chunk) = res.chunk().await.expect("chunk") {
        chunks.push(chunk.len());
        bytes.extend_from_slice(&chunk);
    }
    (chunks, serde_json::from_slice(&bytes).expect("the export is one JSON document"))
}

async fn export_story<S: Store>(app: &TestApp<S>) {
    app.community("raspi").await;
    let alice = member(app, "alice").await;
    let bob = app.user("bob").await;
    let topic = app.topic("raspi", &alice, "Alice's").await;
    let bobs = app.topic("raspi", &bob, "Bob's").await;
    let posts = pith::app::export::PAGE * 3 + 7;
    for i in 0..posts {
        app.reply(bobs, &alice, None, &format!("reply {i}")).await;
    }
    let reply = app.reply(topic, &bob, None, "@alice hello").await;
    app.vote("topics", bobs, &alice, 1).await;
    app.vote("posts", reply, &alice, -1).await;
    assert_eq!(app.send(Method::POST, &format!("/api/v1/posts/{reply}/save"), Some(&alice), None).await.0, 204);
    assert_eq!(app.send(Method::POST, "/api/v1/communities/raspi/block", Some(&alice), None).await.0, 204);
    // Private messages both ways, over more than a page, and a user block.
    let carol = member(app, "carol").await;
    let message = |to: &str, body: String| Some(json!({"to": to, "body": body}));
    let sent = pith::app::export::PAGE + 3;
    for i in 0..sent {
        let (s, body) =
            app.send(Method::POST, "/api/v1/messages", Some(&alice), message("carol", format!("m {i}"))).await;
        assert_eq!(s, 201, "{body}");
    }
    let (s, _) = app.send(Method::POST, "/api/v1/messages", Some(&carol), message("alice", "back".into())).await;
    assert_eq!(s, 201);
    let (s, _) = app.send(Method::POST, "/api/v1/messages", Some(&bob), message("alice", "from bob".into())).await;
    assert_eq!(s, 201);
    assert_eq!(app.send(Method::POST, "/api/v1/users/bob/block", Some(&alice), None).await.0, 204);

    let (chunks, doc) = export(app, &alice).await;
    assert_eq!(doc["user_blocks"], json!(["bob"]));
    let messages = doc["messages"].as_array().expect("messages");
    assert_eq!(messages.len(), sent + 2, "every message of every conversation, across pages");
    let ids: std::collections::HashSet<i64> = messages.iter().map(|m| m["id"].as_i64().expect("id")).collect();
    assert_eq!(ids.len(), sent + 2, "none twice");
    assert!(messages.iter().any(|m| m["from"] == "carol" && m["body"] == "back"));
    assert!(messages.iter().any(|m| m["from"] == "bob" && m["to"] == "alice"));
    assert_eq!(doc["format"], "pith-export/1");
    assert_eq!(doc["profile"]["name"], "alice");
    assert_eq!(doc["settings"], json!({"two_factor": false, "recovery_codes_left": 0}));
    assert_eq!(doc["sessions"].as_array().expect("sessions").len(), 1);
    assert!(doc["sessions"][0].get("hash").is_none() && doc["sessions"][0]["id"].is_string(), "no secrets");
    assert_eq!(doc["community_blocks"], json!(["raspi"]));
    assert_eq!(doc["topics"].as_array().expect("topics").len(), 1);
    assert_eq!(doc["topics"][0]["title"], "Alice's");
    let exported = doc["posts"].as_array().expect("posts");
    assert_eq!(exported.len(), posts, "every post, across pages");
    let bodies: Vec<&str> = exported.iter().map(|p| p["body"].as_str().expect("body")).collect();
    assert_eq!(bodies.first(), Some(&"reply 0"));
    assert_eq!(bodies.last().map(|b| b.to_string()), Some(format!("reply {}", posts - 1)), "oldest first");
    let ids: std::collections::HashSet<i64> = exported.iter().map(|p| p["id"].as_i64().expect("id")).collect();
    assert_eq!(ids.len(), posts, "none twice");
    assert_eq!(
        doc["votes"],
        json!([{"kind": "topic", "id": bobs, "value": 1}, {"kind": "post", "id": reply, "value": -1}])
    );
    assert_eq!(doc["saved"][0]["post_id"], reply);
    let inbox = doc["inbox"].as_array().expect("inbox");
    assert!(inbox.iter().any(|n| n["post_id"] == reply), "bob's reply: {inbox:?}");
    // Bounded: the document arrives in pieces, none near the whole.
    let total: usize = chunks.iter().sum();
    assert!(chunks.len() >= 4, "several chunks: {chunks:?}");
    assert!(chunks.iter().all(|&c| c < total / 2), "no chunk holds most of it: {chunks:?}");

    let (s, body) = app.get("/api/v1/me/export").await;
    assert_error("signed out", s, &body, 401, "unauthorized");
}

#[tokio::test]
async fn the_export_streams_everything_a_user_made_and_set_as_one_document() {
    let app = spawn_app().await;
    export_story(&app).await;
    app.stop().await;
}

#[tokio::test]
async fn the_export_on_postgres() {
    let db = TestDb::create().await;
    let app = spawn_pg_app(&db).await;
    export_story(&app).await;
    app.stop().await;
}

async fn deletion_story<S: Store>(app: &TestApp<S>) {
    app.community("raspi").await;
    let alice = member(app, "alice").await;
    let carol = member(app, "carol").await;
    let bob = app.user("bob").await;
    let carol_id = app.send(Method::GET, "/api/v1/auth/me", Some(&carol), None).await.1["id"].as_i64().expect("id");
    let bobs = app.topic("raspi", &bob, "Bob's").await;
    let alices = app.topic("raspi", &alice, "Alice's").await;
    let kept = app.reply(bobs, &alice, None, "alice was here").await;
    let carols = app.reply(bobs, &carol, None, "carol was here").await;
    // Messages both ways, and blocks both ways: all of it goes with her.
    let message = |to: &str| Some(json!({"to": to, "body": "a word"}));
    assert_eq!(app.send(Method::POST, "/api/v1/messages", Some(&alice), message("carol")).await.0, 201);
    assert_eq!(app.send(Method::POST, "/api/v1/messages", Some(&carol), message("alice")).await.0, 201);
    assert_eq!(app.send(Method::POST, "/api/v1/users/bob/block", Some(&alice), None).await.0, 204);
    assert_eq!(app.send(Method::POST, "/api/v1/users/alice/block", Some(&bob), None).await.0, 204);
    app.reply(bobs, &bob, Some(kept), "@alice @carol replying").await;
    let (_, second) = login(app, "alice", None).await;
    let second = second["token"].as_str().expect("token").to_owned();
    // The topic is rendered and cached with her name in it.
    let before = app.read_topic(bobs, "old").await;
    assert_eq!(before["posts"][0]["author"], "alice");

    // Refusals change nothing.
    let (s, body) = app
        .send(Method::DELETE, "/api/v1/me", Some(&alice), Some(json!({"password": "nope", "content": "remove"})))
        .await;
    assert_error("wrong password", s, &body, 403, "wrong_password");
    let (s, body) = app
        .send(Method::DELETE, "/api/v1/me", Some(&alice), Some(json!({"password": "password123", "content": "all"})))
        .await;
    assert_error("bad content", s, &body, 422, "invalid_field");
    let (s, body) =
        app.send(Method::DELETE, "/api/v1/me", None, Some(json!({"password": "x", "content": "remove"}))).await;
    assert_error("signed out", s, &body, 401, "unauthorized");
    assert_eq!(app.get("/api/v1/users/alice").await.0, 200);

    // Keeping her content: it stays, under no name.
    let (s, body) = app
        .send(
            Method::DELETE,
            "/api/v1/me",
            Some(&alice),
            Some(json!({"password": "password123", "content": "keep_anonymous"})),
        )
        .await;
    assert_eq!(s, 204, "{body}");
    let after = app.read_topic(bobs, "old").await;
    let post = after["posts"].as_array().expect("posts").iter().find(|p| p["id"] == kept).expect("kept").clone();
    assert_eq!((&post["author"], &post["body"]), (&Value::Null, &json!("alice was here")), "the cache was evicted");
    let (_, own) = app.get(&format!("/api/v1/topics/{alices}")).await;
    assert_eq!((&own["topic"]["author"], &own["topic"]["title"]), (&Value::Null, &json!("Alice's")));
    for token in [&alice, &second] {
        let (s, body) = app.send(Method::GET, "/api/v1/auth/me", Some(token), None).await;
        assert_error("a token of a deleted account", s, &body, 401, "unauthorized");
    }
    let (s, body) = login(app, "alice", None).await;
    assert_error("login", s, &body, 401, "bad_credentials");
    let (s, body) = app.get("/api/v1/users/alice").await;
    assert_error("profile", s, &body, 404, "not_found");
    let q = pith::store::ListInbox { unread_only: false, after: None, limit: 10 };
    assert!(!app.state.store.inbox(carol_id, q).await.expect("inbox").items.is_empty(), "carol's inbox, still");
    let q = pith::store::ListInbox { unread_only: false, after: None, limit: 10 };
    let carols_inbox = app.state.store.inbox(carol_id, q).await.expect("inbox").items;
    assert!(carols_inbox.iter().all(|n| n.kind != pith::model::NoticeKind::Message), "alice's message notice went");
    let (_, list) = app.send(Method::GET, "/api/v1/messages", Some(&carol), None).await;
    assert_eq!(list["conversations"], json!([]), "her messages went, both ways: {list}");
    let (_, blocks) = app.send(Method::GET, "/api/v1/me/blocks", Some(&bob), None).await;
    assert_eq!(blocks["users"], json!([]), "the blocks of her went: {blocks}");
    let (s, body) =
        app.post("/api/v1/auth/register", None, json!({"username": "Alice", "password": "password123"})).await;
    assert!(s == 409, "the name stays reserved: {s} {body}");

    // Removing hers: her text is gone, the thread keeps its place; her
    // inbox is purged.
    let (s, body) = app
        .send(Method::DELETE, "/api/v1/me", Some(&carol), Some(json!({"password": "password123", "content": "remove"})))
        .await;
    assert_eq!(s, 204, "{body}");
    let after = app.read_topic(bobs, "old").await;
    let post = after["posts"].as_array().expect("posts").iter().find(|p| p["id"] == carols).expect("in place").clone();
    assert_eq!((&post["author"], &post["body"], &post["deleted"]), (&Value::Null, &json!(""), &json!(true)));
    let (s, _) = app.send(Method::GET, "/api/v1/inbox", Some(&carol), None).await;
    assert_eq!(s, 401);
    let q = pith::store::ListInbox { unread_only: false, after: None, limit: 10 };
    assert!(app.state.store.inbox(carol_id, q).await.expect("inbox").items.is_empty(), "her inbox is purged");
}

#[tokio::test]
async fn deleting_an_account_keeps_or_removes_its_content_and_ends_every_way_in() {
    let app = spawn_app().await;
    deletion_story(&app).await;
    app.stop().await;
}

#[tokio::test]
async fn deleting_an_account_on_postgres() {
    let db = TestDb::create().await;
    let app = spawn_pg_app(&db).await;
    deletion_story(&app).await;
    app.stop().await;
}

async fn purge_story<S: Store>(app: &TestApp<S>) {
    app.community("raspi").await;
    let mallory = app.user("mallory").await;
    let bob = app.user("bob").await;
    let topic = app.topic("raspi", &mallory, "Spam spam").await;
    let purge = |name: &str, token: String, content: &str| {
        let path = format!("/api/v1/admin/users/{name}");
        let body = json!({ "content": content });
        async move { app.send(Method::DELETE, &path, Some(&token), Some(body)).await }
    };
    let (s, body) = purge("mallory", bob.clone(), "remove").await;
    assert_error("not an admin", s, &body, 403, "forbidden");
    let (s, body) = purge("nobody", app.admin_token.clone(), "remove").await;
    assert_error("no such user", s, &body, 404, "not_found");
    let (s, body) = purge("mallory", app.admin_token.clone(), "sometimes").await;
    assert_error("bad content", s, &body, 422, "invalid_field");
    let (s, body) = purge("admin", app.admin_token.clone(), "remove").await;
    assert_error("the last admin", s, &body, 403, "last_admin");
    let (s, body) = purge("mallory", app.admin_token.clone(), "remove").await;
    assert_eq!(s, 204, "{body}");
    let (_, read) = app.get(&format!("/api/v1/topics/{topic}")).await;
    assert_eq!((&read["topic"]["deleted"], &read["topic"]["title"]), (&json!(true), &json!("[deleted]")));
    let (s, _) = app.send(Method::GET, "/api/v1/auth/me", Some(&mallory), None).await;
    assert_eq!(s, 401);
    let (s, body) = purge("mallory", app.admin_token.clone(), "remove").await;
    assert_error("already gone", s, &body, 404, "not_found");
}

#[tokio::test]
async fn an_administrator_purges_an_account_through_the_api() {
    let app = spawn_app().await;
    purge_story(&app).await;
    app.stop().await;
}

#[tokio::test]
async fn an_administrator_purges_an_account_on_postgres() {
    let db = TestDb::create().await;
    let app = spawn_pg_app(&db).await;
    purge_story(&app).await;
    app.stop().await;
}

#[tokio::test]
async fn pith_user_delete_deletes_an_account_from_the_command_line() {
    let app = spawn_app().await;
    app.community("raspi").await;
    let eve = app.user("eve").await;
    let topic = app.topic("raspi", &eve, "Eve's words").await;
    let dir = app.stop().await;
    let data = dir.path().as_os_str();
    let args = |name: &'static str, content: &'static str| {
        ["user", "delete", name, "--content", content, "--data-dir"].map(std::ffi::OsStr::new).to_vec()
    };
    let mut bad = args("eve", "everything");
    bad.push(data);
    let out = run_pith(&bad).await;
    assert!(!out.status.success(), "a bad --content is refused");
    let mut nobody = args("nobody", "remove");
    nobody.push(data);
    let out = run_pith(&nobody).await;
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("there is no user nobody"));
    let mut eve_args = args("eve", "remove");
    eve_args.push(data);
    let out = run_pith(&eve_args).await;
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));

    let app = spawn_app_in(dir).await;
    let (s, _) = app.send(Method::GET, "/api/v1/auth/me", Some(&eve), None).await;
    assert_eq!(s, 401);
    let (_, read) = app.get(&format!("/api/v1/topics/{topic}")).await;
    assert_eq!((&read["topic"]["title"], &read["topic"]["author"]), (&json!("[deleted]"), &Value::Null));
    assert_eq!(app.get("/api/v1/users/eve").await.0, 404);
    app.stop().await;
}

/// Enrols `token`'s account; returns the base32 secret, the code that
/// confirmed it and the recovery codes.
async fn enrol<S: Store>(app: &TestApp<S>, token: &str) -> (String, String, Vec<String>) {
    let (s, start) = app.send(Method::POST, "/api/v1/me/two-factor", Some(token), None).await;
    assert_eq!(s, 200, "{start}");
    let secret = start["secret"].as_str().expect("secret").to_owned();
    let url = start["otpauth_url"].as_str().expect("url");
    assert!(url.starts_with("otpauth://totp/Pith:") && url.contains(&format!("secret={secret}")), "{url}");
    assert!(start["qr"].as_str().expect("qr").starts_with("data:image/svg+xml;base64,"));
    let (s, body) = app.post("/api/v1/me/two-factor/confirm", Some(token), json!({"code": "12345"})).await;
    assert_error("a malformed code", s, &body, 403, "totp_invalid");
    let confirm = code(&secret, now());
    let (s, body) = app.post("/api/v1/me/two-factor/confirm", Some(token), json!({"code": confirm})).await;
    assert_eq!(s, 200, "{body}");
    let codes: Vec<String> =
        body["recovery_codes"].as_array().expect("codes").iter().map(|c| c.as_str().expect("code").into()).collect();
    (secret, confirm, codes)
}

/// A six-digit code that is none of the codes valid around now.
fn wrong_code(secret: &str) -> String {
    let t = now();
    let valid: Vec<String> = [t - 60, t - 30, t, t + 30, t + 60].iter().map(|&at| code(secret, at)).collect();
    (0..).map(|n| format!("{:06}", n * 7919 % 1_000_000)).find(|c| !valid.contains(c)).expect("a wrong code")
}

async fn two_factor_story<S: Store>(app: &TestApp<S>) {
    let alice = member(app, "alice").await;
    let (s, body) = app.send(Method::GET, "/api/v1/me/two-factor", Some(&alice), None).await;
    assert_eq!((s, body), (200, json!({"enabled": false, "recovery_codes_left": 0})));
    let (s, body) = app.post("/api/v1/me/two-factor/confirm", Some(&alice), json!({"code": "123456"})).await;
    assert_error("nothing to confirm", s, &body, 409, "no_enrolment");
    let (secret, confirmed, recovery) = enrol(app, &alice).await;
    assert_eq!(recovery.len(), 10);
    let (s, body) = app.send(Method::POST, "/api/v1/me/two-factor", Some(&alice), None).await;
    assert_error("already on", s, &body, 409, "two_factor_on");

    let (s, body) = login(app, "alice", None).await;
    assert_error("no code", s, &body, 401, "totp_required");
    let (s, body) = login(app, "alice", Some(&wrong_code(&secret))).await;
    assert_error("a wrong code", s, &body, 401, "totp_invalid");
    let (s, body) = login(app, "alice", Some(&confirmed)).await;
    assert_error("the confirming code again", s, &body, 401, "totp_invalid");
    let next = code(&secret, now() + 30);
    let (s, body) = login(app, "alice", Some(&next)).await;
    assert_eq!(s, 200, "the next step's code: {body}");
    let (s, body) = login(app, "alice", Some(&next)).await;
    assert_error("a replayed code", s, &body, 401, "totp_invalid");
    let (s, body) = login(app, "alice", Some(&recovery[0].to_uppercase())).await;
    assert_eq!(s, 200, "a recovery code, as typed: {body}");
    let (s, body) = login(app, "alice", Some(&recovery[0])).await;
    assert_error("a recovery code twice", s, &body, 401, "totp_invalid");
    let (s, body) = app.send(Method::GET, "/api/v1/me/two-factor", Some(&alice), None).await;
    assert_eq!((s, body), (200, json!({"enabled": true, "recovery_codes_left": 9})));
    let (s, body) = login(app, "alice", Some(&"9".repeat(65))).await;
    assert_error("a huge code", s, &body, 401, "totp_invalid");

    // So does deleting the account while 2FA is on.
    let me = alice.as_str();
    let delete = |code: Option<&str>| {
        let mut body = json!({"password": "password123", "content": "keep_anonymous"});
        if let Some(code) = code {
            body["code"] = json!(code);
        }
        async move { app.send(Method::DELETE, "/api/v1/me", Some(me), Some(body)).await }
    };
    let (s, body) = delete(None).await;
    assert_error("deletion without a code", s, &body, 403, "totp_required");
    let (s, body) = delete(Some(&wrong_code(&secret))).await;
    assert_error("deletion with a wrong code", s, &body, 403, "totp_invalid");

    // Off takes the password and a code.
    let off = |password: &str, code: &str| {
        let body = json!({"password": password, "code": code});
        async move { app.post("/api/v1/me/two-factor/disable", Some(me), body).await }
    };
    let (s, body) = off("wrong-password", &recovery[1]).await;
    assert_error("wrong password", s, &body, 403, "wrong_password");
    let (s, body) = off("password123", &recovery[0]).await;
    assert_error("a used code", s, &body, 403, "totp_invalid");
    let (s, body) = off("password123", &recovery[1]).await;
    assert_eq!(s, 204, "{body}");
    let (s, body) = login(app, "alice", None).await;
    assert_eq!(s, 200, "no code needed any more: {body}");
    let (s, body) = off("password123", &recovery[2]).await;
    assert_error("already off", s, &body, 409, "two_factor_off");
    let (s, body) = delete(None).await;
    assert_eq!(s, 204, "with 2FA off the password deletes: {body}");
}

#[tokio::test]
async fn two_factor_login_takes_a_fresh_code_or_a_recovery_code_once() {
    let app = spawn_app().await;
    two_factor_story(&app).await;
    app.stop().await;
}

#[tokio::test]
async fn two_factor_login_on_postgres() {
    let db = TestDb::create().await;
    let app = spawn_pg_app(&db).await;
    two_factor_story(&app).await;
    app.stop().await;
}

/// Each wrong code costs a second login attempt: with six attempts
/// allowed, three wrong codes use them all, and the right code is then
/// refused too (without the extra charge it would be the fourth of six).
#[tokio::test]
async fn wrong_codes_count_toward_the_login_limit() {
    let rate = Rate { count: 6, per: Duration::from_secs(15 * 60) };
    let app = spawn_app_limited(&RateConfig {
        login_user: rate,
        login_ip: Rate { count: 1000, per: Duration::from_secs(60) },
        ..RateConfig::default()
    })
    .await;
    let alice = member(&app, "alice").await;
    let (secret, ..) = enrol(&app, &alice).await;
    for _ in 0..3 {
        let (s, body) = login(&app, "alice", Some(&wrong_code(&secret))).await;
        assert_error("a wrong code", s, &body, 401, "totp_invalid");
    }
    let (s, body) = login(&app, "alice", Some(&code(&secret, now() + 30))).await;
    assert_error("the limit is spent", s, &body, 429, "rate_limited");
    app.stop().await;
}
