//! Communities over HTTP: listing, showing and creating them.

use serde_json::json;

use crate::support::helpers::{assert_error, fetch, spawn_app};

#[tokio::test]
async fn an_admin_creates_a_community_that_then_shows_in_the_list_and_by_name() {
    let app = spawn_app().await;
    let (_, empty) = app.get("/api/v1/communities").await;
    assert_eq!(empty, json!({"communities": []}));

    let reply =
        fetch(app.req(reqwest::Method::POST, "/api/v1/communities").bearer_auth(&app.admin_token).json(&json!({
            "name": "raspi",
            "title": "Raspberry Pi",
            "description": "Small computers."
        })))
        .await;
    assert_eq!(reply.status, 201, "{:?}", reply.json());
    assert_eq!(reply.header("location"), Some("/api/v1/communities/raspi"));
    let created = reply.json();
    assert_eq!(created["name"], "raspi");
    assert_eq!(created["title"], "Raspberry Pi");
    assert_eq!(created["description"], "Small computers.");
    assert_eq!(created["topic_count"], 0);
    app.community("arduino").await;

    let (status, list) = app.get("/api/v1/communities").await;
    assert_eq!(status, 200);
    let names: Vec<_> = list["communities"].as_array().expect("array").iter().map(|c| c["name"].clone()).collect();
    assert_eq!(names, vec![json!("arduino"), json!("raspi")], "sorted by name");

    let (status, one) = app.get("/api/v1/communities/raspi").await;
    assert_eq!(status, 200);
    assert_eq!(one, created);
    app.stop().await;
}

#[tokio::test]
async fn a_community_counts_its_live_topics() {
    let app = spawn_app().await;
    app.community("raspi").await;
    let alice = app.user("alice").await;
    app.topic("raspi", &alice, "One").await;
    let two = app.topic("raspi", &alice, "Two").await;
    assert_eq!(app.get("/api/v1/communities/raspi").await.1["topic_count"], 2);
    assert_eq!(app.delete(&format!("/api/v1/topics/{two}"), Some(&alice)).await.0, 204);
    assert_eq!(app.get("/api/v1/communities/raspi").await.1["topic_count"], 1);
    app.stop().await;
}

#[tokio::test]
async fn only_an_admin_may_create_a_community() {
    let app = spawn_app().await;
    let alice = app.user("alice").await;
    let (status, body) = app.post("/api/v1/communities", Some(&alice), json!({"name": "mine", "title": "Mine"})).await;
    assert_error("normal user", status, &body, 403, "forbidden");
    let (status, body) = app.post("/api/v1/communities", None, json!({"name": "mine", "title": "Mine"})).await;
    assert_error("anonymous", status, &body, 401, "unauthorized");
    let (status, body) = app.get("/api/v1/communities/mine").await;
    assert_error("never created", status, &body, 404, "not_found");
    app.stop().await;
}

#[tokio::test]
async fn a_community_name_can_be_taken_only_once() {
    let app = spawn_app().await;
    app.community("raspi").await;
    let (status, body) =
        app.post("/api/v1/communities", Some(&app.admin_token), json!({"name": "raspi", "title": "Again"})).await;
    assert_error("duplicate", status, &body, 409, "conflict");
    let (_, list) = app.get("/api/v1/communities").await;
    assert_eq!(list["communities"].as_array().map(Vec::len), Some(1));
    app.stop().await;
}

#[tokio::test]
async fn community_names_and_titles_are_validated() {
    let app = spawn_app().await;
    let bad = [
        json!({"name": "ab", "title": "Too short"}),
        json!({"name": "a".repeat(22), "title": "Too long"}),
        json!({"name": "Raspi", "title": "Upper case"}),
        json!({"name": "ras pi", "title": "Space"}),
        json!({"name": "ras-pi", "title": "Dash"}),
        json!({"name": "raspi", "title": ""}),
        json!({"name": "raspi", "title": "   "}),
        json!({"name": "raspi", "title": "t".repeat(301)}),
        json!({"name": "raspi", "title": "bell\u{7}"}),
        json!({"name": "raspi", "title": "ok", "description": "d".repeat(10_001)}),
    ];
    for req in bad {
        let (status, body) = app.post("/api/v1/communities", Some(&app.admin_token), req.clone()).await;
        assert_error(&req.to_string(), status, &body, 422, "invalid_field");
    }
    let (_, list) = app.get("/api/v1/communities").await;
    assert_eq!(list, json!({"communities": []}));
    app.stop().await;
}
