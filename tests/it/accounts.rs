//! Accounts over HTTP: register, log in, log out, who am I, profiles, and
//! every way a request can fail to authenticate; look-alike names, the
//! sessions list, revoking, idle expiry and password changes (issue 26);
//! `pith user add` and `pith user token`.

use pith::app::RateConfig;
use pith::model::Username;
use pith::store::{Store, StoreError};
use reqwest::Method;
use serde_json::{Value, json};

use crate::support::child::{run_pith, user_add};
use crate::support::helpers::{
    TestApp, assert_error, fetch, ids, spawn_app, spawn_app_in, spawn_app_limited, spawn_pg_app,
};
use crate::support::pg::TestDb;

#[tokio::test]
async fn a_new_account_gets_a_token_that_says_who_it_is() {
    let app = spawn_app().await;
    let (status, session) =
        app.post("/api/v1/auth/register", None, json!({"username": "alice", "password": "password123"})).await;
    assert_eq!(status, 201, "{session}");
    assert_eq!(session["user"]["name"], "alice");
    assert_eq!(session["user"]["is_admin"], false);
    assert!(session["user"].get("password_hash").is_none(), "no secrets in the session: {session}");
    let token = session["token"].as_str().expect("token");

    let (status, me) = app.send(Method::GET, "/api/v1/auth/me", Some(token), None).await;
    assert_eq!(status, 200, "{me}");
    assert_eq!(me, session["user"]);
    app.stop().await;
}

#[tokio::test]
async fn a_taken_username_cannot_be_registered_again_in_any_case() {
    let app = spawn_app().await;
    app.register("alice").await;
    for name in ["alice", "ALICE", "Alice"] {
        let (status, body) =
            app.post("/api/v1/auth/register", None, json!({"username": name, "password": "password123"})).await;
        assert_error(name, status, &body, 409, "conflict");
    }
    app.stop().await;
}

#[tokio::test]
async fn logging_in_issues_a_fresh_token_and_a_wrong_password_is_refused() {
    let app = spawn_app().await;
    let first = app.register("alice").await;

    let (status, session) =
        app.post("/api/v1/auth/login", None, json!({"username": "alice", "password": "password123"})).await;
    assert_eq!(status, 200, "{session}");
    let second = session["token"].as_str().expect("token");
    assert_ne!(second, first);
    assert_eq!(session["user"]["name"], "alice");
    let (status, me) = app.send(Method::GET, "/api/v1/auth/me", Some(second), None).await;
    assert_eq!((status, me["name"].clone()), (200, json!("alice")));

    let wrong = [
        json!({"username": "alice", "password": "password124"}),
        json!({"username": "nobody", "password": "password123"}),
        json!({"username": "alice", "password": ""}),
        json!({"username": "a".repeat(100), "password": "password123"}),
    ];
    for creds in wrong {
        let reply = fetch(app.req(Method::POST, "/api/v1/auth/login").json(&creds)).await;
        assert_error(&creds.to_string(), reply.status, &reply.json(), 401, "bad_credentials");
        assert_eq!(reply.header("www-authenticate"), Some("Bearer"));
    }
    app.stop().await;
}

#[tokio::test]
async fn an_account_made_without_a_password_cannot_log_in_with_one() {
    let app = spawn_app().await;
    app.user("tokenonly").await;
    let (status, body) =
        app.post("/api/v1/auth/login", None, json!({"username": "tokenonly", "password": "password123"})).await;
    assert_error("password-less account", status, &body, 401, "bad_credentials");
    app.stop().await;
}

#[tokio::test]
async fn logging_out_revokes_that_token_at_once_and_no_other() {
    let app = spawn_app().await;
    let first = app.register("alice").await;
    let (_, session) =
        app.post("/api/v1/auth/login", None, json!({"username": "alice", "password": "password123"})).await;
    let second = session["token"].as_str().expect("token").to_owned();
    // Put the token in the server's token cache first: revocation must
    // reach past it.
    let (status, _) = app.send(Method::GET, "/api/v1/auth/me", Some(&first), None).await;
    assert_eq!(status, 200);

    let (status, body) = app.send(Method::POST, "/api/v1/auth/logout", Some(&first), None).await;
    assert_eq!(status, 204, "{body}");

    let reply = fetch(app.req(Method::GET, "/api/v1/auth/me").bearer_auth(&first)).await;
    assert_error("revoked token", reply.status, &reply.json(), 401, "unauthorized");
    assert_eq!(reply.header("www-authenticate"), Some("Bearer"));
    let (status, body) = app.send(Method::POST, "/api/v1/auth/logout", Some(&first), None).await;
    assert_error("logout twice", status, &body, 401, "unauthorized");

    let (status, me) = app.send(Method::GET, "/api/v1/auth/me", Some(&second), None).await;
    assert_eq!((status, me["name"].clone()), (200, json!("alice")), "the other session survives");
    app.stop().await;
}

/// Each way to fail authentication, tried on a read and on writes.
#[tokio::test]
async fn every_unauthenticated_request_gets_401_with_the_error_shape_and_a_bearer_challenge() {
    let app = spawn_app().await;
    app.community("raspi").await;
    let alice = app.user("alice").await;
    let topic = app.topic("raspi", &alice, "Hello").await;
    let revoked = app.user("bob").await;
    let (status, _) = app.send(Method::POST, "/api/v1/auth/logout", Some(&revoked), None).await;
    assert_eq!(status, 204);

    let long = format!("Bearer {}", "x".repeat(200));
    let revoked_header = format!("Bearer {revoked}");
    let headers: [(&str, Option<&str>); 8] = [
        ("missing header", None),
        ("wrong scheme", Some("Basic YWxpY2U6cGFzc3dvcmQxMjM=")),
        ("scheme alone", Some("Bearer")),
        ("empty token", Some("Bearer ")),
        ("unknown token", Some("Bearer AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA")),
        ("token without scheme", Some(&alice)),
        ("overlong token", Some(&long)),
        ("revoked token", Some(&revoked_header)),
    ];
    let requests: [(Method, String, Option<Value>); 5] = [
        (Method::GET, "/api/v1/auth/me".into(), None),
        (Method::POST, "/api/v1/auth/logout".into(), None),
        (Method::POST, "/api/v1/communities/raspi/topics".into(), Some(json!({"title": "t"}))),
        (Method::POST, format!("/api/v1/topics/{topic}/posts"), Some(json!({"body": "b"}))),
        (Method::POST, format!("/api/v1/topics/{topic}/vote"), Some(json!({"value": 1}))),
    ];
    for (what, header) in headers {
        for (method, path, body) in &requests {
            let mut req = app.req(method.clone(), path);
            if let Some(h) = header {
                req = req.header("authorization", h);
            }
            if let Some(b) = body {
                req = req.json(b);
            }
            let reply = fetch(req).await;
            let context = format!("{what}: {method} {path}");
            assert_error(&context, reply.status, &reply.json(), 401, "unauthorized");
            assert_eq!(reply.header("www-authenticate"), Some("Bearer"), "{context}");
        }
    }

    let (_, read) = app.get(&format!("/api/v1/topics/{topic}")).await;
    assert_eq!(read["posts"], json!([]), "no rejected reply was stored");
    assert_eq!(read["topic"]["score"], 0, "no rejected vote was stored");
    let (topics, _) = app.list("/api/v1/topics?sort=new").await;
    assert_eq!(topics, vec![topic], "no rejected topic was stored");
    app.stop().await;
}

#[tokio::test]
async fn a_profile_shows_recent_topics_and_posts_newest_first_without_deleted_ones() {
    let app = spawn_app().await;
    app.community("raspi").await;
    let alice = app.user("alice").await;
    let bob = app.user("bob").await;
    let t1 = app.topic("raspi", &alice, "First").await;
    let t2 = app.topic("raspi", &alice, "Second").await;
    let gone = app.topic("raspi", &alice, "Regretted").await;
    app.topic("raspi", &bob, "Bob's").await;
    let p1 = app.reply(t1, &alice, None, "one").await;
    let p2 = app.reply(t2, &alice, None, "two").await;
    let deleted_post = app.reply(t2, &alice, None, "oops").await;
    app.reply(t1, &bob, None, "bob's reply").await;
    assert_eq!(app.delete(&format!("/api/v1/topics/{gone}"), Some(&alice)).await.0, 204);
    assert_eq!(app.delete(&format!("/api/v1/posts/{deleted_post}"), Some(&alice)).await.0, 204);

    let (status, profile) = app.get("/api/v1/users/alice").await;
    assert_eq!(status, 200, "{profile}");
    assert_eq!(profile["user"]["name"], "alice");
    assert!(profile["user"].get("password_hash").is_none());
    assert_eq!(ids(&profile["topics"]), vec![t2, t1]);
    assert_eq!(ids(&profile["posts"]), vec![p2, p1]);
    assert_eq!(profile["posts"][0]["body"], "two");

    let (status, body) = app.get("/api/v1/users/nobody").await;
    assert_error("unknown user", status, &body, 404, "not_found");
    app.stop().await;
}

// Issue 26: look-alike names, and sessions that can be listed, revoked and
// that end (docs/SECURITY.md).

/// Registration, first-run setup and `pith user add` refuse a name that
/// reads as one on record; run on each store.
async fn look_alike_names_are_refused<S: Store>(app: &TestApp<S>) {
    app.register("alice").await;
    app.register("mod1").await;
    app.register("ALEX").await;
    for (name, like) in [
        ("aIice", "alice"),
        ("rnod1", "mod1"),
        ("rnodl", "mod1"),
        ("AIice", "alice"),
        ("a1ice", "alice"),
        ("aIex", "ALEX"),
    ] {
        let (status, body) =
            app.post("/api/v1/auth/register", None, json!({"username": name, "password": "password123"})).await;
        assert_error(name, status, &body, 409, "username_too_similar");
        assert!(body["error"]["message"].as_str().is_some_and(|m| m.contains(like)), "{name}: names {like}: {body}");
    }
    // The same name in another case is still "taken", not "similar".
    let (status, body) =
        app.post("/api/v1/auth/register", None, json!({"username": "Alice", "password": "password123"})).await;
    assert_error("Alice", status, &body, 409, "conflict");
    for name in ["alicia", "kai", "kal", "mod2"] {
        app.register(name).await;
    }
    let (status, body) =
        app.post("/api/v1/auth/register", None, json!({"username": "MOD2", "password": "password123"})).await;
    assert_error("MOD2", status, &body, 409, "conflict");
    // The store refuses it for every door: `pith user add` uses this call.
    let taken = app.state.store.create_user(Username::parse("rnod2").expect("name"), None, false).await;
    assert!(matches!(taken, Err(StoreError::Taken("username_too_similar", _))), "{taken:?}");
}

#[tokio::test]
async fn a_look_alike_username_is_refused_on_sqlite() {
    let app = spawn_app().await;
    look_alike_names_are_refused(&app).await;
    app.stop().await;
}

#[tokio::test]
async fn a_look_alike_username_is_refused_on_postgres() {
    let db = TestDb::create().await;
    let app = spawn_pg_app(&db).await;
    look_alike_names_are_refused(&app).await;
    app.stop().await;
}

/// Names on record before look-alike keys existed get them when the
/// database opens, and are protected like new ones.
#[tokio::test]
async fn names_stored_without_look_alike_keys_get_them_when_the_database_opens() {
    let app = spawn_app().await;
    app.user("alice").await;
    let dir = app.stop().await;
    let db = rusqlite::Connection::open(dir.path().join("pith.db")).expect("open");
    db.execute("UPDATE users SET skeleton = NULL, skeleton_folded = NULL", []).expect("forget the keys");
    drop(db);
    let app = spawn_app_in(dir).await;
    let (status, body) =
        app.post("/api/v1/auth/register", None, json!({"username": "aIice", "password": "password123"})).await;
    assert_error("aIice", status, &body, 409, "username_too_similar");
    app.stop().await;
}

async fn login<S: Store>(app: &TestApp<S>, name: &str, password: &str) -> String {
    let (status, session) = app.post("/api/v1/auth/login", None, json!({"username": name, "password": password})).await;
    assert_eq!(status, 200, "{session}");
    session["token"].as_str().expect("token").to_owned()
}

async fn me<S: Store>(app: &TestApp<S>, token: &str) -> u16 {
    app.send(Method::GET, "/api/v1/auth/me", Some(token), None).await.0
}

/// The sessions API told as one story; run on each store.
async fn sessions_can_be_listed_revoked_and_ended_by_a_password_change<S: Store>(app: &TestApp<S>) {
    let first = app.register("alice").await;
    let second = login(app, "alice", "password123").await;
    let third = login(app, "alice", "password123").await;
    for t in [&first, &second, &third] {
        assert_eq!(me(app, t).await, 200, "every token cached before any revocation");
    }

    let (status, list) = app.send(Method::GET, "/api/v1/me/sessions", Some(&second), None).await;
    assert_eq!(status, 200, "{list}");
    let sessions = list["sessions"].as_array().expect("sessions");
    assert_eq!(sessions.len(), 3, "{list}");
    let current: Vec<&Value> = sessions.iter().filter(|s| s["current"] == true).collect();
    assert_eq!(current.len(), 1, "{list}");
    for s in sessions {
        assert_eq!(s["kind"], "api", "{s}");
        let id = s["id"].as_str().expect("id");
        assert!(id.len() == 12 && ![&first, &second, &third].iter().any(|t| t.contains(id)), "{s}");
        assert!(s["created_at"].is_string() && s["last_used_at"].is_string(), "{s}");
    }
    let text = list.to_string();
    assert!(![&first, &second, &third].iter().any(|t| text.contains(t.as_str())), "no token in the list");

    // Revoke one by its id: that token stops at once, the others work.
    let other = sessions.iter().find(|s| s["current"] == false).expect("another");
    let path = format!("/api/v1/me/sessions/{}", other["id"].as_str().expect("id"));
    assert_eq!(app.delete(&path, Some(&second)).await.0, 204);
    let (status, body) = app.delete(&path, Some(&second)).await;
    assert_error("revoked twice", status, &body, 404, "not_found");
    let (_, list) = app.send(Method::GET, "/api/v1/me/sessions", Some(&second), None).await;
    assert_eq!(list["sessions"].as_array().map(Vec::len), Some(2));
    let alive: Vec<u16> = [me(app, &first).await, me(app, &third).await].into();
    assert!(alive.contains(&401) && alive.contains(&200), "exactly the revoked one ended: {alive:?}");
    let survivor = if me(app, &first).await == 200 { first.clone() } else { third.clone() };

    // Nobody revokes another user's session, even knowing its id.
    let bob = app.register("bob").await;
    let (_, bobs) = app.send(Method::GET, "/api/v1/me/sessions", Some(&bob), None).await;
    let bob_id = bobs["sessions"][0]["id"].as_str().expect("id").to_owned();
    let (status, body) = app.delete(&format!("/api/v1/me/sessions/{bob_id}"), Some(&second)).await;
    assert_error("another user's session", status, &body, 404, "not_found");
    assert_eq!(me(app, &bob).await, 200);

    // A wrong current password or a bad new one changes nothing.
    let change = |current: &str, new: &str| json!({"current": current, "new": new});
    let (status, body) = app.post("/api/v1/me/password", Some(&second), change("password124", "newpass456")).await;
    assert_error("wrong current password", status, &body, 403, "wrong_password");
    let (status, body) = app.post("/api/v1/me/password", Some(&second), change("password123", "short")).await;
    assert_error("short new password", status, &body, 422, "invalid_field");
    let (status, body) = app.post("/api/v1/me/password", None, change("password123", "newpass456")).await;
    assert_error("no token", status, &body, 401, "unauthorized");
    assert_eq!(me(app, &survivor).await, 200);

    // The change keeps the caller's token and ends every other one.
    let (status, body) = app.post("/api/v1/me/password", Some(&second), change("password123", "newpass456")).await;
    assert_eq!((status, body["revoked"].clone()), (200, json!(1)), "{body}");
    assert_eq!(me(app, &survivor).await, 401, "the other token ended at once");
    assert_eq!(me(app, &second).await, 200, "the caller's stays");
    let (status, body) =
        app.post("/api/v1/auth/login", None, json!({"username": "alice", "password": "password123"})).await;
    assert_error("old password", status, &body, 401, "bad_credentials");
    let fourth = login(app, "alice", "newpass456").await;
    let fifth = login(app, "alice", "newpass456").await;
    assert_eq!(me(app, &fourth).await, 200);

    // Sign out everywhere else.
    let (status, body) = app.post("/api/v1/me/sessions/revoke-others", Some(&fifth), json!({})).await;
    assert_eq!((status, body["revoked"].clone()), (200, json!(2)), "{body}");
    assert_eq!((me(app, &second).await, me(app, &fourth).await, me(app, &fifth).await), (401, 401, 200));
    let (_, list) = app.send(Method::GET, "/api/v1/me/sessions", Some(&fifth), None).await;
    assert_eq!(list["sessions"].as_array().map(Vec::len), Some(1), "{list}");
    assert_eq!(me(app, &bob).await, 200, "other users keep theirs");
}

#[tokio::test]
async fn sessions_can_be_listed_revoked_and_ended_by_a_password_change_on_sqlite() {
    let app = spawn_app().await;
    sessions_can_be_listed_revoked_and_ended_by_a_password_change(&app).await;
    app.stop().await;
}

#[tokio::test]
async fn sessions_can_be_listed_revoked_and_ended_by_a_password_change_on_postgres() {
    let db = TestDb::create().await;
    let app = spawn_pg_app(&db).await;
    sessions_can_be_listed_revoked_and_ended_by_a_password_change(&app).await;
    app.stop().await;
}

#[tokio::test]
async fn an_account_without_a_password_has_none_to_change() {
    let app = spawn_app().await;
    let token = app.user("scripted").await;
    let (status, body) =
        app.post("/api/v1/me/password", Some(&token), json!({"current": "", "new": "newpass456"})).await;
    assert_error("no password", status, &body, 403, "no_password");
    app.stop().await;
}

#[tokio::test]
async fn changing_the_password_counts_against_the_login_rate_limit() {
    let app = spawn_app_limited(&RateConfig::default()).await;
    let token = app.register("alice").await;
    let mut statuses = Vec::new();
    for _ in 0..12 {
        let (status, _) =
            app.post("/api/v1/me/password", Some(&token), json!({"current": "guess-guess", "new": "newpass456"})).await;
        statuses.push(status);
    }
    assert_eq!(statuses.first(), Some(&403), "{statuses:?}");
    assert!(statuses.contains(&429), "guessing the current password is rate limited: {statuses:?}");
    app.stop().await;
}

/// Alice's tokens, in SQL.
const ALICE: &str = "user_id = (SELECT id FROM users WHERE name = 'alice')";

/// Tokens idle past their kind's limit are refused like unknown ones and
/// deleted; a use is recorded at most once a minute.
#[tokio::test]
async fn an_api_token_unused_past_the_idle_limit_is_refused_and_deleted() {
    let app = spawn_app().await;
    let token = app.register("alice").await;
    assert_eq!(me(&app, &token).await, 200);
    let dir = app.stop().await;
    let db = rusqlite::Connection::open(dir.path().join("pith.db")).expect("open");
    let last = |db: &rusqlite::Connection| -> i64 {
        db.query_row(&format!("SELECT last_used_at FROM tokens WHERE {ALICE}"), [], |r| r.get(0)).expect("token row")
    };
    // A use a minute after the last one recorded is written down.
    db.execute(&format!("UPDATE tokens SET last_used_at = last_used_at - 120 WHERE {ALICE}"), []).expect("age");
    let before = last(&db);
    let app = spawn_app_in(dir).await;
    assert_eq!(me(&app, &token).await, 200);
    assert!(last(&db) >= before + 120, "the use is recorded");
    let dir = app.stop().await;

    // 366 days unused: the default limit for API tokens is 365.
    let aged = format!("UPDATE tokens SET last_used_at = last_used_at - 366 * 86400 WHERE {ALICE}");
    db.execute(&aged, []).expect("age a year");
    let app = spawn_app_in(dir).await;
    let (status, body) = app.send(Method::GET, "/api/v1/auth/me", Some(&token), None).await;
    assert_error("expired token", status, &body, 401, "unauthorized");
    let left: i64 =
        db.query_row(&format!("SELECT count(*) FROM tokens WHERE {ALICE}"), [], |r| r.get(0)).expect("count");
    assert_eq!(left, 0, "deleted");
    app.stop().await;
}

/// Housekeeping deletes the tokens nobody presents again once they are past
/// their idle limit, and keeps the rest working.
#[tokio::test]
async fn housekeeping_deletes_tokens_unused_past_the_idle_limit_that_nobody_presents() {
    let app = spawn_app().await;
    let old = app.register("alice").await;
    let kept = app.register("bob").await;
    let dir = app.stop().await;
    let db = rusqlite::Connection::open(dir.path().join("pith.db")).expect("open");
    db.execute(&format!("UPDATE tokens SET last_used_at = last_used_at - 366 * 86400 WHERE {ALICE}"), []).expect("age");
    let app = spawn_app_in(dir).await;
    let swept = pith::app::housekeeping::sweep(&app.state, pith::model::Timestamp::now()).await.expect("sweep");
    assert_eq!(swept, 1, "alice's year-old token, not bob's");
    let left: i64 =
        db.query_row(&format!("SELECT count(*) FROM tokens WHERE {ALICE}"), [], |r| r.get(0)).expect("count");
    assert_eq!(left, 0);
    assert_eq!(me(&app, &kept).await, 200);
    assert_eq!(me(&app, &old).await, 401);
    app.stop().await;
}

#[tokio::test]
async fn the_idle_limits_are_settings_and_zero_means_never() {
    use pith::app::SessionConfig;
    let app = spawn_app().await;
    let token = app.register("alice").await;
    app.state.sessions.set(&SessionConfig { session_idle_days: 1, api_idle_days: 0 });
    let dir = app.stop().await;
    let db = rusqlite::Connection::open(dir.path().join("pith.db")).expect("open");
    db.execute("UPDATE tokens SET last_used_at = last_used_at - 5000 * 86400", []).expect("age");
    let app = spawn_app_in(dir).await;
    app.state.sessions.set(&SessionConfig { session_idle_days: 1, api_idle_days: 0 });
    assert_eq!(me(&app, &token).await, 200, "API tokens without an idle limit");
    app.stop().await;
}

/// `pith user add` on a name that exists says so and fails; `pith user
/// token` issues a new API token to an existing account.
#[tokio::test]
async fn pith_user_add_refuses_an_existing_name_and_pith_user_token_issues_a_new_token() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().as_os_str();
    let first = user_add(dir.path(), "alice", false).await;

    let out = run_pith(&["user".as_ref(), "add".as_ref(), "alice".as_ref(), "--data-dir".as_ref(), data]).await;
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(err.contains("user alice already exists") && err.contains("pith user token alice"), "{err}");
    assert!(out.stdout.is_empty(), "no token printed");
    let out = run_pith(&["user".as_ref(), "add".as_ref(), "aIice".as_ref(), "--data-dir".as_ref(), data]).await;
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("too similar to the existing user alice"), "{err}");

    let out = run_pith(&["user".as_ref(), "token".as_ref(), "ALICE".as_ref(), "--data-dir".as_ref(), data]).await;
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let second = String::from_utf8(out.stdout).expect("utf-8").lines().last().expect("token").trim().to_owned();
    assert_ne!(second, first);
    let out = run_pith(&["user".as_ref(), "token".as_ref(), "nobody".as_ref(), "--data-dir".as_ref(), data]).await;
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("there is no user nobody"), "{err}");

    let app = spawn_app_in(dir).await;
    for token in [&first, &second] {
        let (status, me) = app.send(Method::GET, "/api/v1/auth/me", Some(token), None).await;
        assert_eq!((status, me["name"].clone()), (200, json!("alice")), "both tokens work");
    }
    let (_, list) = app.send(Method::GET, "/api/v1/me/sessions", Some(&second), None).await;
    let labels: Vec<&str> =
        list["sessions"].as_array().expect("list").iter().filter_map(|s| s["label"].as_str()).collect();
    assert!(labels.contains(&"pith user add") && labels.contains(&"pith user token"), "{list}");
    app.stop().await;
}

/// A remote user (`name@host`, made when its server first sent an
/// activity) gets no token and no reset link from the command line:
/// nothing ever lets it sign in here.
#[tokio::test]
async fn pith_user_token_and_reset_link_refuse_a_remote_user() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().as_os_str();
    {
        let store = pith::store::sqlite::SqliteStore::open(
            &dir.path().join("pith.db"),
            &pith::store::sqlite::SqliteOptions::default(),
        )
        .expect("open");
        let key = pith::app::federation::keys::generate().expect("key");
        let actor = pith::model::federation::RemoteActor {
            id: "https://a.example/u/eve".into(),
            inbox: "https://a.example/u/eve/inbox".into(),
            shared_inbox: None,
            key_id: "https://a.example/u/eve#main-key".into(),
            public_key_pem: key.public_pem,
            name: "eve".into(),
            fetched_at: 0,
            url: None,
        };
        store.put_remote_actor(actor).await.expect("actor");
        let eve = store.remote_user("https://a.example/u/eve".into(), "eve@a.example".into()).await.expect("user");
        assert_eq!(eve.name, "eve@a.example");
        store.shutdown().await;
    }
    for command in ["token", "reset-link"] {
        let out =
            run_pith(&["user".as_ref(), command.as_ref(), "eve@a.example".as_ref(), "--data-dir".as_ref(), data]).await;
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success() && err.contains("a user of another instance"), "{command}: {err}");
        assert!(out.stdout.is_empty(), "{command}: nothing printed");
    }
}
