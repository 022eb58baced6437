//! The real `pith` binary as a child process: every write acknowledged
//! before a SIGKILL survives the restart, and SIGTERM stops it cleanly with
//! the WAL checkpointed away.

use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::json;

use crate::support::child::{Server, user_add};
use crate::support::helpers::{client, fetch};

/// How long a child gets to start or stop before the test gives up on it.
const PATIENCE: Duration = Duration::from_secs(20);

/// Makes `loadtest` (who writes) and `boss` (an admin, for the community)
/// with the CLI, then starts serving; returns the server, loadtest's token
/// and two topic ids.
async fn forum(root: &Path) -> (Server, String, Vec<i64>) {
    let data = root.join("data");
    let token = user_add(&data, "loadtest", false).await;
    let boss = user_add(&data, "boss", true).await;
    let server = Server::start(&data, root.join("serve-1.log"), PATIENCE).await;
    let http = client();
    let reply = fetch(
        http.post(server.url("/api/v1/communities")).bearer_auth(&boss).json(&json!({"name": "load", "title": "Load"})),
    )
    .await;
    assert_eq!(reply.status, 201, "{:?}", reply.json());
    let mut topics = Vec::new();
    for t in 0..2 {
        let reply = fetch(
            http.post(server.url("/api/v1/communities/load/topics"))
                .bearer_auth(&token)
                .json(&json!({"title": format!("topic {t}")})),
        )
        .await;
        assert_eq!(reply.status, 201, "{:?}", reply.json());
        topics.push(reply.json()["id"].as_i64().expect("id"));
    }
    (server, token, topics)
}

/// Every post stored in `topics`, as (id, body).
async fn stored_posts(server: &Server, topics: &[i64]) -> Vec<(i64, String)> {
    let http = client();
    let mut all = Vec::new();
    for t in topics {
        let reply = fetch(http.get(server.url(&format!("/api/v1/topics/{t}?sort=old")))).await;
        assert_eq!(reply.status, 200);
        for p in reply.json()["posts"].as_array().expect("posts") {
            all.push((p["id"].as_i64().expect("id"), p["body"].as_str().expect("body").to_owned()));
        }
    }
    all
}

const LOADERS: usize = 6;
/// Acknowledged posts to wait for before pulling the plug.
const ACKED_BEFORE_KILL: usize = 150;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_post_acknowledged_before_a_sigkill_is_there_after_a_restart() {
    let root = tempfile::tempdir().expect("tempdir");
    let (mut server, token, topics) = forum(root.path()).await;

    let acked = Arc::new(Mutex::new(Vec::<(i64, String)>::new()));
    let count = Arc::new(AtomicUsize::new(0));
    let loaders: Vec<_> = (0..LOADERS)
        .map(|l| {
            let (url, token, topics) = (server.url("/api/v1/topics"), token.clone(), topics.clone());
            let (acked, count) = (acked.clone(), count.clone());
            tokio::spawn(async move {
                let http = client();
                for i in 0.. {
                    let body = format!("loader {l} post {i}");
                    let topic = topics[i % topics.len()];
                    let sent = http
                        .post(format!("{url}/{topic}/posts"))
                        .bearer_auth(&token)
                        .json(&json!({"body": body}))
                        .send()
                        .await;
                    let res = match sent {
                        Ok(res) => res,
                        Err(_) => return, // the server is gone
                    };
                    let status = res.status().as_u16();
                    let Ok(post) = res.json::<serde_json::Value>().await else { return };
                    assert_eq!(status, 201, "loader {l} post {i} before the kill: {post}");
                    acked.lock().expect("lock").push((post["id"].as_i64().expect("id"), body));
                    count.fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();

    let deadline = Instant::now() + PATIENCE;
    while count.load(Ordering::Relaxed) < ACKED_BEFORE_KILL {
        assert!(Instant::now() < deadline, "the load never got going:\n{}", server.log_text());
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    server.kill9();
    for l in loaders {
        l.await.expect("loader task");
    }
    let acked = std::mem::take(&mut *acked.lock().expect("lock"));
    assert!(acked.len() >= ACKED_BEFORE_KILL);

    let server = Server::start(&root.path().join("data"), root.path().join("serve-2.log"), PATIENCE).await;
    let stored = stored_posts(&server, &topics).await;
    for (id, body) in &acked {
        assert!(stored.contains(&(*id, body.clone())), "acknowledged post {id} ({body}) was lost in the crash");
    }
    // Each loader had at most one request in flight when the server died.
    assert!(stored.len() <= acked.len() + LOADERS, "{} stored, {} acknowledged", stored.len(), acked.len());
    let (status, log) = server.terminate().await;
    assert!(status.success(), "{status}:\n{log}");
}

#[tokio::test]
async fn sigterm_while_idle_exits_0_with_the_wal_checkpointed_away() {
    let root = tempfile::tempdir().expect("tempdir");
    let (server, token, topics) = forum(root.path()).await;
    let http = client();
    for i in 0..20 {
        let reply = fetch(
            http.post(server.url(&format!("/api/v1/topics/{}/posts", topics[i % 2])))
                .bearer_auth(&token)
                .json(&json!({"body": format!("post {i}")})),
        )
        .await;
        assert_eq!(reply.status, 201);
    }
    let wal = root.path().join("data").join("pith.db-wal");
    assert!(wal.metadata().map(|m| m.len()).unwrap_or(0) > 0, "the writes went through the WAL");

    let (status, log) = server.terminate().await;
    assert_eq!(status.code(), Some(0), "{status}:\n{log}");
    let left = wal.metadata().map(|m| m.len()).unwrap_or(0);
    assert_eq!(left, 0, "the WAL is truncated or gone after a clean stop");

    let server = Server::start(&root.path().join("data"), root.path().join("serve-2.log"), PATIENCE).await;
    assert_eq!(stored_posts(&server, &topics).await.len(), 20);
    let (status, log) = server.terminate().await;
    assert!(status.success(), "{status}:\n{log}");
}
