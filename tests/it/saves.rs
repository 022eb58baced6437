//! Saving topics and posts, the saved list, and blocking communities from
//! the front page (issue #21), through the API on both stores. Every
//! write is idempotent and answers 204; the saved list pages newest first
//! and shows removed and deleted items without their text.

use std::collections::HashSet;

use pith::model::Marks;
use pith::store::Store;
use reqwest::Method;
use serde_json::{Value, json};

use crate::support::helpers::{TestApp, assert_error, ids, spawn_app, spawn_pg_app};
use crate::support::pg::TestDb;

async fn status<S: Store>(app: &TestApp<S>, method: Method, path: &str, token: Option<&str>) -> u16 {
    let (status, body) = app.send(method, path, token, None).await;
    assert!(status == 204 || status >= 400, "{path}: {status} {body}");
    status
}

/// Every page of the saved list, walked with `next`.
async fn saved_items<S: Store>(app: &TestApp<S>, token: &str) -> Vec<Value> {
    let (mut items, mut after) = (Vec::new(), String::new());
    loop {
        let (status, body) = app.send(Method::GET, &format!("/api/v1/saved?after={after}"), Some(token), None).await;
        assert_eq!(status, 200, "{body}");
        let page = body["items"].as_array().expect("items").clone();
        assert!(page.len() <= 25, "a page holds at most 25");
        items.extend(page);
        match body["next"].as_str() {
            Some(n) => after = n.to_owned(),
            None => return items,
        }
    }
}

async fn saving_story<S: Store>(app: &TestApp<S>) {
    app.community("raspi").await;
    let alice = app.user("alice").await;
    let bob = app.user("bob").await;
    let topic = app.topic("raspi", &bob, "Which SD card?").await;
    let post = app.reply(topic, &bob, None, "Any A2 card will do").await;

    // Saving twice and unsaving twice are each one change, all 204.
    for _ in 0..2 {
        assert_eq!(status(app, Method::POST, &format!("/api/v1/topics/{topic}/save"), Some(&alice)).await, 204);
        assert_eq!(status(app, Method::POST, &format!("/api/v1/posts/{post}/save"), Some(&alice)).await, 204);
    }
    let items = saved_items(app, &alice).await;
    assert_eq!(items.len(), 2, "{items:?}");
    let the_post = items.iter().find(|i| i["kind"] == "post").expect("the saved post");
    assert_eq!(
        (&the_post["topic_id"], &the_post["post_id"], &the_post["title"], &the_post["community"]),
        (&json!(topic), &json!(post), &json!("Which SD card?"), &json!("raspi"))
    );
    assert_eq!(the_post["excerpt"], "Any A2 card will do");
    assert_eq!((&the_post["removed"], &the_post["deleted"]), (&json!(false), &json!(false)));
    let the_topic = items.iter().find(|i| i["kind"] == "topic").expect("the saved topic");
    assert_eq!((&the_topic["topic_id"], the_topic.get("post_id")), (&json!(topic), None));
    assert!(the_topic["saved_at"].as_str().is_some_and(|t| t.ends_with('Z')), "RFC 3339: {the_topic}");
    assert!(saved_items(app, &bob).await.is_empty(), "saves are each user's own");

    // Removed and deleted items stay listed, without their text.
    let (s, body) = app.post(&format!("/api/v1/posts/{post}/remove"), Some(&app.admin_token), json!({})).await;
    assert_eq!(s, 204, "{body}");
    assert_eq!(app.delete(&format!("/api/v1/topics/{topic}"), Some(&bob)).await.0, 204);
    let items = saved_items(app, &alice).await;
    let the_post = items.iter().find(|i| i["kind"] == "post").expect("the saved post");
    assert_eq!((&the_post["removed"], &the_post["excerpt"]), (&json!(true), &Value::Null));
    let the_topic = items.iter().find(|i| i["kind"] == "topic").expect("the saved topic");
    assert_eq!((&the_topic["deleted"], &the_topic["excerpt"]), (&json!(true), &Value::Null));
    let (s, _) = app.post(&format!("/api/v1/topics/{topic}/remove"), Some(&app.admin_token), json!({})).await;
    assert_eq!(s, 204);
    for item in saved_items(app, &alice).await {
        assert_eq!((&item["removed"], &item["title"], &item["excerpt"]), (&json!(true), &Value::Null, &Value::Null));
    }

    for _ in 0..2 {
        assert_eq!(status(app, Method::DELETE, &format!("/api/v1/topics/{topic}/save"), Some(&alice)).await, 204);
        assert_eq!(status(app, Method::DELETE, &format!("/api/v1/posts/{post}/save"), Some(&alice)).await, 204);
    }
    assert!(saved_items(app, &alice).await.is_empty());

    // Thirty saves page as 25 and 5, newest first, none twice.
    let mut saved = Vec::new();
    for i in 0..30 {
        let t = app.topic("raspi", &bob, &format!("Topic {i}")).await;
        assert_eq!(status(app, Method::POST, &format!("/api/v1/topics/{t}/save"), Some(&alice)).await, 204);
        saved.push(t);
    }
    let items = saved_items(app, &alice).await;
    let listed: Vec<i64> = items.iter().map(|i| i["topic_id"].as_i64().expect("id")).collect();
    assert_eq!(listed.len(), 30);
    assert_eq!(listed.iter().copied().collect::<HashSet<_>>(), saved.iter().copied().collect());
    // RFC 3339 times of one format order as their text does.
    let keys: Vec<(&str, i64)> =
        items.iter().map(|i| (i["saved_at"].as_str().expect("at"), i["topic_id"].as_i64().expect("id"))).collect();
    assert!(keys.windows(2).all(|w| w[0] > w[1]), "newest first: {keys:?}");
}

async fn bad_input_story<S: Store>(app: &TestApp<S>) {
    app.community("raspi").await;
    let alice = app.user("alice").await;
    let topic = app.topic("raspi", &alice, "Hello").await;
    for (method, path) in [
        (Method::POST, "/api/v1/topics/999999/save".to_owned()),
        (Method::DELETE, "/api/v1/topics/999999/save".to_owned()),
        (Method::POST, "/api/v1/posts/999999/save".to_owned()),
        (Method::DELETE, "/api/v1/posts/-1/save".to_owned()),
        (Method::POST, "/api/v1/communities/nowhere/block".to_owned()),
        (Method::DELETE, "/api/v1/communities/nowhere/block".to_owned()),
    ] {
        let (s, body) = app.send(method.clone(), &path, Some(&alice), None).await;
        assert_error(&format!("{method} {path}"), s, &body, 404, "not_found");
    }
    for (method, path) in [
        (Method::POST, format!("/api/v1/topics/{topic}/save")),
        (Method::DELETE, format!("/api/v1/topics/{topic}/save")),
        (Method::POST, "/api/v1/posts/1/save".to_owned()),
        (Method::GET, "/api/v1/saved".to_owned()),
        (Method::POST, "/api/v1/communities/raspi/block".to_owned()),
        (Method::DELETE, "/api/v1/communities/raspi/block".to_owned()),
    ] {
        let (s, body) = app.send(method.clone(), &path, None, None).await;
        assert_error(&format!("{method} {path} signed out"), s, &body, 401, "unauthorized");
    }
    for bad in ["x", "1.2", "1.2.3", "1.0.0", "%00"] {
        let (s, body) = app.send(Method::GET, &format!("/api/v1/saved?after={bad}"), Some(&alice), None).await;
        assert_error(&format!("after={bad}"), s, &body, 400, "invalid_query");
    }
    let (s, body) = app.send(Method::POST, "/api/v1/topics/abc/save", Some(&alice), None).await;
    assert_error("a topic id that is no number", s, &body, 400, "invalid_path");
}

async fn blocking_story<S: Store>(app: &TestApp<S>) {
    app.community("raspi").await;
    app.community("arduino").await;
    let alice = app.user("alice").await;
    let bob = app.user("bob").await;
    let pi = app.topic("raspi", &bob, "Pi").await;
    let uno = app.topic("arduino", &bob, "Uno").await;
    let front = |token: Option<String>| async move {
        let (s, body) = app.send(Method::GET, "/api/v1/topics?sort=new", token.as_deref(), None).await;
        assert_eq!(s, 200, "{body}");
        ids(&body["topics"])
    };
    assert_eq!(front(Some(alice.clone())).await, [uno, pi]);
    for _ in 0..2 {
        assert_eq!(status(app, Method::POST, "/api/v1/communities/RasPi/block", Some(&alice)).await, 204);
    }
    assert_eq!(front(Some(alice.clone())).await, [uno], "alice's front page leaves raspi out");
    assert_eq!(front(None).await, [uno, pi], "the public front page is as it was");
    assert_eq!(front(Some(bob.clone())).await, [uno, pi], "blocks are each user's own");
    assert_eq!(front(Some("not-a-token".into())).await, [uno, pi], "a bad token reads the public listing");
    let (s, body) = app.send(Method::GET, "/api/v1/communities/raspi/topics", Some(&alice), None).await;
    assert_eq!((s, ids(&body["topics"])), (200, vec![pi]), "the community's own listing still shows it");
    for _ in 0..2 {
        assert_eq!(status(app, Method::DELETE, "/api/v1/communities/raspi/block", Some(&alice)).await, 204);
    }
    assert_eq!(front(Some(alice.clone())).await, [uno, pi]);
}

/// The personal layer's reads (`Store::marks`, `Store::topic_votes`): a
/// reader's own votes and saves on a topic and the posts of a page.
async fn marks_story<S: Store>(app: &TestApp<S>) {
    app.community("raspi").await;
    let alice = app.user("alice").await;
    let bob = app.user("bob").await;
    let me = app.send(Method::GET, "/api/v1/auth/me", Some(&alice), None).await.1;
    let alice_id = me["id"].as_i64().expect("id");
    let topic = app.topic("raspi", &bob, "Marks").await;
    let other = app.topic("raspi", &bob, "Other").await;
    let (p1, p2, p3) = (
        app.reply(topic, &bob, None, "one").await,
        app.reply(topic, &bob, None, "two").await,
        app.reply(topic, &bob, None, "three").await,
    );
    let store = &app.state.store;
    assert_eq!(store.marks(alice_id, topic, vec![p1, p2, p3]).await.expect("marks"), Marks::default());
    app.vote("topics", topic, &alice, 1).await;
    app.vote("topics", other, &alice, -1).await;
    app.vote("posts", p1, &alice, -1).await;
    app.vote("posts", p3, &alice, 1).await;
    app.vote("posts", p2, &bob, 1).await;
    assert_eq!(status(app, Method::POST, &format!("/api/v1/posts/{p2}/save"), Some(&alice)).await, 204);
    let mut marks = store.marks(alice_id, topic, vec![p1, p2]).await.expect("marks");
    marks.post_votes.sort();
    assert_eq!(
        marks,
        Marks {
            topic_vote: 1,
            topic_saved: false,
            post_votes: vec![(p1, -1)],
            posts_saved: vec![p2],
            blocked_authors: vec![]
        },
        "only the posts asked about, only alice's"
    );
    let mut votes = store.topic_votes(alice_id, vec![topic, other, 999_999]).await.expect("votes");
    votes.sort();
    assert_eq!(votes, [(topic, 1), (other, -1)]);
    assert!(store.topic_votes(alice_id, Vec::new()).await.expect("none").is_empty());
}

#[tokio::test]
async fn a_readers_marks_are_their_own_votes_and_saves_on_what_a_page_shows() {
    let app = spawn_app().await;
    marks_story(&app).await;
    app.stop().await;
}

#[tokio::test]
async fn marks_on_postgres() {
    let db = TestDb::create().await;
    let app = spawn_pg_app(&db).await;
    marks_story(&app).await;
    app.stop().await;
}

#[tokio::test]
async fn saves_are_idempotent_listed_newest_first_in_pages_and_gone_items_show_no_text() {
    let app = spawn_app().await;
    saving_story(&app).await;
    app.stop().await;
}

#[tokio::test]
async fn saves_on_postgres() {
    let db = TestDb::create().await;
    let app = spawn_pg_app(&db).await;
    saving_story(&app).await;
    app.stop().await;
}

#[tokio::test]
async fn saving_and_blocking_answer_404_401_and_400_with_a_code() {
    let app = spawn_app().await;
    bad_input_story(&app).await;
    app.stop().await;
}

#[tokio::test]
async fn saving_and_blocking_bad_input_on_postgres() {
    let db = TestDb::create().await;
    let app = spawn_pg_app(&db).await;
    bad_input_story(&app).await;
    app.stop().await;
}

#[tokio::test]
async fn a_blocked_community_leaves_only_its_blockers_front_page() {
    let app = spawn_app().await;
    blocking_story(&app).await;
    app.stop().await;
}

#[tokio::test]
async fn blocks_on_postgres() {
    let db = TestDb::create().await;
    let app = spawn_pg_app(&db).await;
    blocking_story(&app).await;
    app.stop().await;
}
