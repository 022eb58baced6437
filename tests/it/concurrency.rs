//! Many writers and readers at once: every acknowledged post is stored
//! exactly once, and a writer always reads its own write (the topic cache
//! must never hand back a render from before the write).

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use serde_json::{Value, json};

use crate::support::helpers::{TestApp, ids, spawn_app};

const WRITERS: usize = 20;
const POSTS_EACH: usize = 25;
const TOPICS: usize = 3;
const READERS: usize = 4;

/// A post as the writer saw it acknowledged.
struct Acked {
    id: i64,
    topic: i64,
    body: String,
}

/// Posts `POSTS_EACH` replies, reading the topic back after each 201.
async fn writer(app: Arc<TestApp>, token: String, topics: Vec<i64>, w: usize) -> Vec<Acked> {
    let mut acked = Vec::new();
    for i in 0..POSTS_EACH {
        let topic = topics[(w + i) % topics.len()];
        let body = format!("writer {w} post {i}");
        // Every other post replies to this writer's latest post in the
        // topic, so nested replies race too.
        let parent =
            if i % 2 == 1 { acked.iter().rev().find(|a: &&Acked| a.topic == topic).map(|a| a.id) } else { None };
        let (status, post) = app
            .post(&format!("/api/v1/topics/{topic}/posts"), Some(&token), json!({"body": body, "parent_id": parent}))
            .await;
        assert_eq!(status, 201, "writer {w} post {i}: {post}");
        let id = post["id"].as_i64().expect("id");
        acked.push(Acked { id, topic, body });

        let sort = ["best", "new", "old"][i % 3];
        let read = app.read_topic(topic, sort).await;
        assert!(
            read["posts"].as_array().expect("posts").iter().any(|p| p["id"] == id),
            "writer {w} does not see its post {id} in topic {topic} ({sort}) right after its 201"
        );
    }
    acked
}

/// Reads topics until told to stop; every read must be one consistent
/// snapshot. Returns how many reads it made.
async fn reader(app: Arc<TestApp>, topics: Vec<i64>, stop: Arc<AtomicBool>, r: usize) -> usize {
    let mut reads = 0;
    while !stop.load(Ordering::Relaxed) {
        let topic = topics[(r + reads) % topics.len()];
        let sort = ["old", "best", "new"][reads % 3];
        let read: Value = app.read_topic(topic, sort).await;
        let posts = read["posts"].as_array().expect("posts").len();
        assert_eq!(read["topic"]["post_count"], posts, "reader {r}: post_count agrees with the posts in the same read");
        reads += 1;
    }
    reads
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_writers_each_see_their_own_post_and_every_acknowledged_post_is_stored_once() {
    let app = Arc::new(spawn_app().await);
    app.community("raspi").await;
    let owner = app.user("owner").await;
    let mut topics = Vec::new();
    for t in 0..TOPICS {
        topics.push(app.topic("raspi", &owner, &format!("busy topic {t}")).await);
    }
    let mut tokens = Vec::new();
    for w in 0..WRITERS {
        tokens.push(app.user(&format!("writer{w}")).await);
    }

    let stop = Arc::new(AtomicBool::new(false));
    let readers: Vec<_> =
        (0..READERS).map(|r| tokio::spawn(reader(app.clone(), topics.clone(), stop.clone(), r))).collect();
    let writers: Vec<_> = tokens
        .into_iter()
        .enumerate()
        .map(|(w, token)| tokio::spawn(writer(app.clone(), token, topics.clone(), w)))
        .collect();
    let mut acked = Vec::new();
    for w in writers {
        acked.extend(w.await.expect("writer task"));
    }
    stop.store(true, Ordering::Relaxed);
    let mut reads = 0;
    for r in readers {
        reads += r.await.expect("reader task");
    }
    assert!(reads > 0, "the readers ran alongside the writers");
    assert_eq!(acked.len(), WRITERS * POSTS_EACH);

    let mut stored: HashMap<i64, (i64, Value)> = HashMap::new();
    for &topic in &topics {
        let read = app.read_topic(topic, "old").await;
        let posts = read["posts"].as_array().expect("posts");
        assert_eq!(read["topic"]["post_count"], posts.len());
        let order = ids(&read["posts"]);
        assert!(order.windows(2).all(|w| w[0] < w[1]), "topic {topic}: old order, each post once");
        for p in posts {
            stored.insert(p["id"].as_i64().expect("id"), (topic, p.clone()));
        }
    }
    assert_eq!(stored.len(), acked.len(), "nothing stored that was not acknowledged, nothing acknowledged lost");
    for a in &acked {
        let (topic, post) = stored.get(&a.id).unwrap_or_else(|| panic!("acknowledged post {} is missing", a.id));
        assert_eq!((*topic, post["body"].as_str()), (a.topic, Some(a.body.as_str())));
    }
    let Ok(app) = Arc::try_unwrap(app) else { panic!("a task still holds the app") };
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn racing_for_one_name_exactly_one_wins_and_the_others_get_409() {
    let app = Arc::new(spawn_app().await);
    let racers = 8;
    let registrations: Vec<_> = (0..racers)
        .map(|_| {
            let app = app.clone();
            tokio::spawn(async move {
                app.post("/api/v1/auth/register", None, json!({"username": "popular", "password": "password123"})).await
            })
        })
        .collect();
    let communities: Vec<_> = (0..racers)
        .map(|_| {
            let app = app.clone();
            tokio::spawn(async move {
                app.post("/api/v1/communities", Some(&app.admin_token), json!({"name": "popular", "title": "P"})).await
            })
        })
        .collect();
    for (what, tasks) in [("register", registrations), ("community", communities)] {
        let mut statuses = Vec::new();
        for t in tasks {
            let (status, body) = t.await.expect("task");
            if status != 201 {
                crate::support::helpers::assert_error(what, status, &body, 409, "conflict");
            }
            statuses.push(status);
        }
        assert_eq!(statuses.iter().filter(|s| **s == 201).count(), 1, "{what}: {statuses:?}");
    }
    let Ok(app) = Arc::try_unwrap(app) else { panic!("a task still holds the app") };
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_votes_add_up_to_exactly_one_per_voter() {
    let app = Arc::new(spawn_app().await);
    app.community("raspi").await;
    let owner = app.user("owner").await;
    let topic = app.topic("raspi", &owner, "Vote").await;
    let post = app.reply(topic, &owner, None, "vote").await;
    let voters = 20;
    let mut tasks = Vec::new();
    for v in 0..voters {
        let token = app.user(&format!("voter{v}")).await;
        let app = app.clone();
        tasks.push(tokio::spawn(async move {
            // Changing one's mind many times still counts once.
            for value in [1, -1, 0, -1, 1] {
                app.vote("topics", topic, &token, value).await;
                app.vote("posts", post, &token, value).await;
            }
        }));
    }
    for t in tasks {
        t.await.expect("voter");
    }
    let read = app.read_topic(topic, "best").await;
    assert_eq!((read["topic"]["score"].clone(), read["posts"][0]["score"].clone()), (json!(voters), json!(voters)));
    let (_, listing) = app.get("/api/v1/topics?sort=top&t=all").await;
    assert_eq!(listing["topics"][0]["score"], voters);
    let Ok(app) = Arc::try_unwrap(app) else { panic!("a task still holds the app") };
    app.stop().await;
}
