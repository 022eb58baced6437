//! Votes on topics and posts: one vote per user per item, changed or
//! withdrawn but never accumulated, and visible on the next read.

use serde_json::json;

use crate::support::helpers::{TestApp, assert_error, spawn_app};

/// Votes on `what` (`topics` or `posts`) and checks the running score,
/// then checks the score in the next read of the topic.
async fn a_users_vote_replaces_their_previous_one(
    app: &TestApp,
    what: &str,
    id: i64,
    score_in: impl Fn(&serde_json::Value) -> i64,
    topic: i64,
) {
    let alice = app.user("alice").await;
    let bob = app.user("bob").await;
    // (voter, value, score after)
    let steps = [
        (&alice, 1, 1),
        (&alice, 1, 1), // the same vote again: no change
        (&bob, 1, 2),
        (&alice, -1, 0), // alice changes her mind: -1 replaces +1
        (&alice, -1, 0),
        (&bob, 0, -1), // bob withdraws
        (&bob, 0, -1), // withdrawing twice is harmless
        (&alice, 0, 0),
    ];
    for (i, (voter, value, want)) in steps.into_iter().enumerate() {
        let score = app.vote(what, id, voter, value).await;
        assert_eq!(score, want, "step {i}: score in the vote answer");
        let read = app.read_topic(topic, "best").await;
        assert_eq!(score_in(&read), want, "step {i}: score in the next read of the topic");
    }
}

#[tokio::test]
async fn votes_on_a_topic_replace_each_other_and_show_on_the_next_read() {
    let app = spawn_app().await;
    app.community("raspi").await;
    let author = app.user("author").await;
    let topic = app.topic("raspi", &author, "Vote on me").await;
    a_users_vote_replaces_their_previous_one(
        &app,
        "topics",
        topic,
        |r| r["topic"]["score"].as_i64().expect("score"),
        topic,
    )
    .await;
    app.stop().await;
}

#[tokio::test]
async fn votes_on_a_post_replace_each_other_and_show_on_the_next_read() {
    let app = spawn_app().await;
    app.community("raspi").await;
    let author = app.user("author").await;
    let topic = app.topic("raspi", &author, "Hello").await;
    let post = app.reply(topic, &author, None, "vote on me").await;
    a_users_vote_replaces_their_previous_one(
        &app,
        "posts",
        post,
        |r| r["posts"][0]["score"].as_i64().expect("score"),
        topic,
    )
    .await;
    assert_eq!(app.read_topic(topic, "best").await["topic"]["score"], 0, "post votes leave the topic's score alone");
    app.stop().await;
}

#[tokio::test]
async fn a_vote_must_be_minus_one_zero_or_one_on_something_that_exists() {
    let app = spawn_app().await;
    app.community("raspi").await;
    let alice = app.user("alice").await;
    let topic = app.topic("raspi", &alice, "Hello").await;
    let post = app.reply(topic, &alice, None, "p").await;
    for target in [format!("topics/{topic}"), format!("posts/{post}")] {
        let path = format!("/api/v1/{target}/vote");
        for value in [json!(2), json!(-2), json!(100)] {
            let (status, body) = app.post(&path, Some(&alice), json!({"value": value})).await;
            assert_error(&format!("{path} {value}"), status, &body, 422, "invalid_field");
        }
        for value in [json!(1000), json!("up"), json!(0.5), json!(null)] {
            let (status, body) = app.post(&path, Some(&alice), json!({"value": value})).await;
            assert_error(&format!("{path} {value}"), status, &body, 422, "invalid_body");
        }
    }
    for path in ["/api/v1/topics/424242/vote", "/api/v1/posts/424242/vote"] {
        let (status, body) = app.post(path, Some(&alice), json!({"value": 1})).await;
        assert_error(path, status, &body, 404, "not_found");
    }
    let read = app.read_topic(topic, "best").await;
    assert_eq!((read["topic"]["score"].clone(), read["posts"][0]["score"].clone()), (json!(0), json!(0)));
    app.stop().await;
}

#[tokio::test]
async fn the_hot_listing_reorders_as_votes_come_in() {
    let app = spawn_app().await;
    app.community("raspi").await;
    let author = app.user("author").await;
    let voters = [app.user("voter1").await, app.user("voter2").await];
    let a = app.topic("raspi", &author, "A").await;
    let b = app.topic("raspi", &author, "B").await;
    let c = app.topic("raspi", &author, "C").await;
    assert_eq!(app.list("/api/v1/topics?sort=hot").await.0, vec![c, b, a], "unvoted: newest first");

    // Reddit's formula: a score of 1 weighs the same as 0; 2 lifts a topic
    // by log10(2) = 3.7 hours of age.
    for v in &voters {
        app.vote("topics", a, v, 1).await;
    }
    assert_eq!(app.list("/api/v1/topics?sort=hot").await.0, vec![a, c, b]);
    assert_eq!(app.list("/api/v1/communities/raspi/topics").await.0, vec![a, c, b], "hot is the default");
    for v in &voters {
        app.vote("topics", c, v, -1).await;
    }
    assert_eq!(app.list("/api/v1/topics?sort=hot").await.0, vec![a, b, c]);
    for v in &voters {
        app.vote("topics", a, v, 0).await;
    }
    assert_eq!(app.list("/api/v1/topics?sort=hot").await.0, vec![b, a, c], "withdrawn votes drop it back");
    app.stop().await;
}
