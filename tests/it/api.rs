//! The JSON API end to end: topics and posts (create, read, edit, delete,
//! nesting, post order) and the health check.

use reqwest::Method;
use serde_json::{Value, json};

use crate::support::helpers::{assert_error, fetch, ids, listed, spawn_app};

#[tokio::test]
async fn the_health_check_answers_ok() {
    let app = spawn_app().await;
    let reply = fetch(app.req(Method::GET, "/healthz")).await;
    assert_eq!(reply.status, 200);
    assert_eq!(reply.bytes, b"ok\n");
    app.stop().await;
}

#[tokio::test]
async fn a_reply_is_visible_in_the_next_read_of_its_topic() {
    let app = spawn_app().await;
    app.community("raspi").await;
    let alice = app.register("alice").await;
    let topic = app.topic("raspi", &alice, "Hello").await;
    let (status, before) = app.get(&format!("/api/v1/topics/{topic}")).await;
    assert_eq!(status, 200);
    assert_eq!(before["posts"].as_array().map(Vec::len), Some(0));

    let (status, post) =
        app.post(&format!("/api/v1/topics/{topic}/posts"), Some(&alice), json!({"body": "first!"})).await;
    assert_eq!(status, 201, "{post}");
    assert_eq!(post["author"], "alice");
    assert_eq!(post["parent_id"], serde_json::Value::Null);

    let (_, after) = app.get(&format!("/api/v1/topics/{topic}")).await;
    assert_eq!(after["posts"][0]["body"], "first!");
    assert_eq!(after["topic"]["post_count"], 1);
    app.stop().await;
}

#[tokio::test]
async fn a_new_topic_is_answered_with_its_location_and_reads_back_the_same() {
    let app = spawn_app().await;
    app.community("raspi").await;
    let alice = app.user("alice").await;
    let reply = fetch(app.req(Method::POST, "/api/v1/communities/raspi/topics").bearer_auth(&alice).json(&json!({
        "title": "  Which SD card?  ",
        "body": "For a Pi 5.\nThanks!",
        "url": "https://example.org/cards"
    })))
    .await;
    assert_eq!(reply.status, 201, "{:?}", reply.json());
    let topic = reply.json();
    let id = topic["id"].as_i64().expect("id");
    assert_eq!(reply.header("location"), Some(format!("/api/v1/topics/{id}").as_str()));
    assert_eq!(topic["title"], "Which SD card?", "the title is trimmed");
    assert_eq!(topic["body"], "For a Pi 5.\nThanks!");
    assert_eq!(topic["url"], "https://example.org/cards");
    assert_eq!(topic["community"], "raspi");
    assert_eq!(topic["author"], "alice");
    assert_eq!((topic["score"].clone(), topic["post_count"].clone()), (json!(0), json!(0)));
    assert_eq!((topic["deleted"].clone(), topic["edited_at"].clone()), (json!(false), Value::Null));
    assert!(topic["created_at"].as_str().is_some_and(|t| t.ends_with('Z')), "{topic}");

    let read = app.read_topic(id, "best").await;
    assert_eq!(read, json!({"topic": topic, "posts": []}));
    app.stop().await;
}

#[tokio::test]
async fn a_topic_may_be_a_bare_title_and_its_community_name_is_case_insensitive() {
    let app = spawn_app().await;
    app.community("raspi").await;
    let alice = app.user("alice").await;
    let (status, topic) =
        app.post("/api/v1/communities/RasPi/topics", Some(&alice), json!({"title": "Just this"})).await;
    assert_eq!(status, 201, "{topic}");
    assert_eq!(
        (topic["community"].clone(), topic["body"].clone(), topic["url"].clone()),
        (json!("raspi"), Value::Null, Value::Null)
    );
    let (status, body) = app.post("/api/v1/communities/nowhere/topics", Some(&alice), json!({"title": "Lost"})).await;
    assert_error("unknown community", status, &body, 404, "not_found");
    app.stop().await;
}

#[tokio::test]
async fn only_the_author_may_edit_a_topic() {
    let app = spawn_app().await;
    app.community("raspi").await;
    let alice = app.user("alice").await;
    let bob = app.user("bob").await;
    let id = app.topic("raspi", &alice, "Hello").await;
    let path = format!("/api/v1/topics/{id}");

    let (status, body) = app.patch(&path, Some(&bob), json!({"body": "vandalised"})).await;
    assert_error("someone else", status, &body, 403, "forbidden");
    assert_eq!(app.read_topic(id, "best").await["topic"]["body"], "b");

    let (status, edited) = app.patch(&path, Some(&alice), json!({"body": "better"})).await;
    assert_eq!(status, 200, "{edited}");
    assert_eq!(edited["body"], "better");
    assert!(edited["edited_at"].is_string(), "{edited}");
    assert_eq!(app.read_topic(id, "best").await["topic"], edited);

    let (status, body) = app.patch("/api/v1/topics/424242", Some(&alice), json!({"body": "x"})).await;
    assert_error("unknown topic", status, &body, 404, "not_found");
    app.stop().await;
}

#[tokio::test]
async fn only_the_author_may_delete_a_topic_which_then_leaves_listings_and_takes_no_replies() {
    let app = spawn_app().await;
    app.community("raspi").await;
    let alice = app.user("alice").await;
    let bob = app.user("bob").await;
    let keep = app.topic("raspi", &alice, "Keep").await;
    let id = app.topic("raspi", &alice, "Hello").await;
    app.reply(id, &bob, None, "a reply").await;
    let path = format!("/api/v1/topics/{id}");

    let (status, body) = app.delete(&path, Some(&bob)).await;
    assert_error("someone else", status, &body, 403, "forbidden");
    assert_eq!(app.list("/api/v1/topics?sort=new").await.0, vec![id, keep]);

    let (status, body) = app.delete(&path, Some(&alice)).await;
    assert_eq!(status, 204, "{body}");
    let read = app.read_topic(id, "best").await;
    assert_eq!(read["topic"]["deleted"], true);
    assert_eq!((read["topic"]["author"].clone(), read["topic"]["body"].clone()), (Value::Null, Value::Null));
    assert_eq!(app.list("/api/v1/topics?sort=new").await.0, vec![keep]);
    assert_eq!(app.list("/api/v1/communities/raspi/topics?sort=new").await.0, vec![keep]);

    let (status, body) = app.delete(&path, Some(&alice)).await;
    assert_error("deleted twice", status, &body, 404, "not_found");
    let (status, body) = app.patch(&path, Some(&alice), json!({"body": "back"})).await;
    assert_error("edit after delete", status, &body, 404, "not_found");
    let (status, body) = app.post(&format!("{path}/posts"), Some(&bob), json!({"body": "late"})).await;
    assert_error("reply after delete", status, &body, 422, "invalid_field");
    let (status, body) = app.post(&format!("{path}/vote"), Some(&bob), json!({"value": 1})).await;
    assert_error("vote after delete", status, &body, 422, "invalid_field");
    app.stop().await;
}

#[tokio::test]
async fn replies_nest_under_their_parent() {
    let app = spawn_app().await;
    app.community("raspi").await;
    let alice = app.user("alice").await;
    let bob = app.user("bob").await;
    let topic = app.topic("raspi", &alice, "Hello").await;
    let root = app.reply(topic, &alice, None, "root").await;
    let child = app.reply(topic, &bob, Some(root), "child").await;
    let grandchild = app.reply(topic, &alice, Some(child), "grandchild").await;

    let read = app.read_topic(topic, "old").await;
    assert_eq!(ids(&read["posts"]), vec![root, child, grandchild]);
    let parents: Vec<Value> = read["posts"].as_array().expect("posts").iter().map(|p| p["parent_id"].clone()).collect();
    assert_eq!(parents, vec![Value::Null, json!(root), json!(child)]);
    assert_eq!(read["topic"]["post_count"], 3);
    app.stop().await;
}

#[tokio::test]
async fn a_reply_to_a_post_of_another_topic_or_to_no_post_is_refused() {
    let app = spawn_app().await;
    app.community("raspi").await;
    let alice = app.user("alice").await;
    let here = app.topic("raspi", &alice, "Here").await;
    let there = app.topic("raspi", &alice, "There").await;
    let elsewhere = app.reply(there, &alice, None, "over there").await;

    for parent in [elsewhere, 424242, -1] {
        let (status, body) = app
            .post(&format!("/api/v1/topics/{here}/posts"), Some(&alice), json!({"body": "x", "parent_id": parent}))
            .await;
        assert_error(&format!("parent {parent}"), status, &body, 422, "invalid_field");
    }
    assert_eq!(app.read_topic(here, "best").await["posts"], json!([]));
    app.stop().await;
}

#[tokio::test]
async fn posts_come_in_best_new_or_old_order() {
    let app = spawn_app().await;
    app.community("raspi").await;
    let alice = app.user("alice").await;
    let bob = app.user("bob").await;
    let topic = app.topic("raspi", &alice, "Hello").await;
    let p1 = app.reply(topic, &alice, None, "one").await;
    let p2 = app.reply(topic, &alice, None, "two").await;
    let p3 = app.reply(topic, &alice, None, "three").await;
    let p4 = app.reply(topic, &alice, None, "four").await;
    app.vote("posts", p3, &alice, 1).await;
    app.vote("posts", p3, &bob, 1).await;
    app.vote("posts", p2, &bob, 1).await;
    app.vote("posts", p1, &bob, -1).await;

    assert_eq!(ids(&app.read_topic(topic, "best").await["posts"]), vec![p3, p2, p4, p1]);
    assert_eq!(ids(&app.read_topic(topic, "new").await["posts"]), vec![p4, p3, p2, p1]);
    assert_eq!(ids(&app.read_topic(topic, "old").await["posts"]), vec![p1, p2, p3, p4]);
    let (_, default) = app.get(&format!("/api/v1/topics/{topic}")).await;
    assert_eq!(ids(&default["posts"]), vec![p3, p2, p4, p1], "best is the default");
    app.stop().await;
}

#[tokio::test]
async fn only_the_author_may_edit_a_post_and_the_edit_shows_on_the_next_read() {
    let app = spawn_app().await;
    app.community("raspi").await;
    let alice = app.user("alice").await;
    let bob = app.user("bob").await;
    let topic = app.topic("raspi", &alice, "Hello").await;
    let post = app.reply(topic, &alice, None, "tpyo").await;
    app.read_topic(topic, "best").await; // cached now
    let path = format!("/api/v1/posts/{post}");

    let (status, body) = app.patch(&path, Some(&bob), json!({"body": "hijacked"})).await;
    assert_error("someone else", status, &body, 403, "forbidden");

    let (status, edited) = app.patch(&path, Some(&alice), json!({"body": "typo"})).await;
    assert_eq!(status, 200, "{edited}");
    assert_eq!((edited["id"].clone(), edited["body"].clone()), (json!(post), json!("typo")));
    assert!(edited["edited_at"].is_string(), "{edited}");
    assert_eq!(app.read_topic(topic, "best&html=true").await["posts"][0], listed(&edited, true));

    let (status, body) = app.patch("/api/v1/posts/424242", Some(&alice), json!({"body": "x"})).await;
    assert_error("unknown post", status, &body, 404, "not_found");
    app.stop().await;
}

#[tokio::test]
async fn a_topics_posts_carry_their_html_only_when_asked() {
    let app = spawn_app().await;
    app.community("raspi").await;
    let alice = app.user("alice").await;
    let topic = app.topic("raspi", &alice, "Hello").await;
    let (status, post) =
        app.post(&format!("/api/v1/topics/{topic}/posts"), Some(&alice), json!({"body": "*one* text"})).await;
    assert_eq!(status, 201, "{post}");
    assert_eq!(post["body_html"], "<p><em>one</em> text</p>\n");

    // By default each text is there once, as its Markdown source.
    let lean = app.read_topic(topic, "best").await;
    let lean_post = lean["posts"][0].as_object().expect("a post");
    assert_eq!(lean_post.get("body"), Some(&json!("*one* text")));
    assert!(!lean_post.contains_key("body_html"), "{lean}");
    // With html=true, the post as created, with its HTML, in the list's
    // shape: nothing the topic already says or that is at its default.
    let full = app.read_topic(topic, "best&html=true").await;
    assert_eq!(full["posts"][0], listed(&post, true));
    assert_eq!(lean["posts"][0], listed(&post, false));
    let mut keys: Vec<&str> = lean_post.keys().map(String::as_str).collect();
    keys.sort_unstable();
    assert_eq!(keys, ["author", "body", "created_at", "id", "score"], "{lean}");
    // The topic itself carries both either way.
    assert_eq!(lean["topic"], full["topic"]);
    // Both are cached as variants of their own with their own validators.
    let a = fetch(app.req(Method::GET, &format!("/api/v1/topics/{topic}"))).await;
    let b = fetch(app.req(Method::GET, &format!("/api/v1/topics/{topic}?html=true"))).await;
    assert!(a.header("etag").is_some() && a.header("etag") != b.header("etag"));
    let (status, body) = app.get(&format!("/api/v1/topics/{topic}?html=false")).await;
    assert_eq!((status, &body), (200, &lean));

    let (status, body) = app.get(&format!("/api/v1/topics/{topic}?html=yes")).await;
    assert_error("html=yes", status, &body, 400, "invalid_query");
    assert!(body["error"]["message"].as_str().is_some_and(|m| m.contains("html")), "{body}");
    app.stop().await;
}

#[tokio::test]
async fn a_deleted_post_keeps_its_place_and_its_replies_but_loses_body_and_author() {
    let app = spawn_app().await;
    app.community("raspi").await;
    let alice = app.user("alice").await;
    let bob = app.user("bob").await;
    let topic = app.topic("raspi", &alice, "Hello").await;
    let parent = app.reply(topic, &alice, None, "regrettable").await;
    let child = app.reply(topic, &bob, Some(parent), "a reply").await;
    app.read_topic(topic, "old").await; // cached now
    let path = format!("/api/v1/posts/{parent}");

    let (status, body) = app.delete(&path, Some(&bob)).await;
    assert_error("someone else", status, &body, 403, "forbidden");
    let (status, body) = app.delete(&path, Some(&alice)).await;
    assert_eq!(status, 204, "{body}");

    let read = app.read_topic(topic, "old").await;
    let gone = &read["posts"][0];
    assert_eq!(gone["id"], parent);
    assert_eq!(
        (gone["deleted"].clone(), gone["body"].clone(), gone["author"].clone()),
        (json!(true), json!(""), Value::Null)
    );
    let reply = &read["posts"][1];
    assert_eq!(
        (reply["id"].clone(), reply["parent_id"].clone(), reply["body"].clone()),
        (json!(child), json!(parent), json!("a reply"))
    );

    let (status, body) = app.delete(&path, Some(&alice)).await;
    assert_error("deleted twice", status, &body, 404, "not_found");
    let (status, body) = app.patch(&path, Some(&alice), json!({"body": "undo"})).await;
    assert_error("edit after delete", status, &body, 404, "not_found");
    let (status, body) = app.post(&format!("{path}/vote"), Some(&bob), json!({"value": 1})).await;
    assert_error("vote after delete", status, &body, 422, "invalid_field");
    app.stop().await;
}
