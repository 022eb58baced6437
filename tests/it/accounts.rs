//! Accounts over HTTP: register, log in, log out, who am I, profiles, and
//! every way a request can fail to authenticate.

use reqwest::Method;
use serde_json::{Value, json};

use crate::support::helpers::{assert_error, fetch, ids, spawn_app};

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
