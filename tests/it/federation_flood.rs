//! A flood of 10,000 signed votes from one remote server is absorbed
//! (docs/FEDERATION.md, "Safety"): its rate limit answers 429 past the
//! limit and nothing answers 5xx; what the accepted votes queue for the
//! community's other followers stays within what was accepted and is
//! delivered; and local reads keep answering, correctly, throughout.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use bytes::Bytes;
use pith::app::limits::{Rate, RateConfig};
use pith::bench::fedsim::Sim;
use pith::store::Store;
use reqwest::Method;
use serde_json::json;

use crate::support::helpers::{fetch, spawn_federated_app_limited};

const INBOX: &str = "/ap/c/rust/inbox";
/// The flooding server's allowance: a burst of this many, then one every
/// 7 s or so, which adds nothing in the flood's few seconds.
const LIMIT: usize = 500;

#[tokio::test]
async fn a_flood_of_ten_thousand_votes_from_one_server_is_absorbed_without_failing_local_reads() {
    let rate = RateConfig {
        instance: Rate::parse(&format!("{LIMIT}/1h")).expect("rate"),
        vote_user: Rate::parse("100000/1m").expect("rate"),
        ..RateConfig::default()
    };
    let app = Arc::new(spawn_federated_app_limited(&rate).await);
    app.community("rust").await;
    let author = app.user("author").await;
    let topics = [app.topic("rust", &author, "First").await, app.topic("rust", &author, "Second").await];
    let authority = app.addr.trim_start_matches("http://").to_owned();
    let group = format!("{}/ap/c/rust", app.addr);

    // Host 0 floods; host 1's user follows, so each vote taken is queued
    // for delivery to it (the Group's Announce).
    let sim = Sim::start(2, 20).await.expect("simulated servers");
    let group_key = fetch(app.req(Method::GET, "/ap/c/rust").header("accept", "application/activity+json")).await;
    let pem = group_key.json()["publicKey"]["publicKeyPem"].as_str().expect("key").to_owned();
    sim.tally.reset(Some(&pem), false).expect("reset");
    let follower = &sim.hosts[1];
    let follow = Bytes::from(
        json!({"id": format!("{}/follows/1", follower.actor(0)), "type": "Follow", "actor": follower.actor(0), "object": group})
            .to_string(),
    );
    let signed = follower.sign(0, &authority, INBOX, &follow).expect("sign");
    assert_eq!(post(&app.client, &app.addr, follow, &signed).await, 202);
    for _ in 0..400 {
        if sim.tally.accepted.load(Ordering::Relaxed) == 1
            && app.state.store.queued_deliveries().await.expect("count") == 0
        {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }
    assert_eq!(sim.tally.accepted.load(Ordering::Relaxed), 1, "the follower's Accept");

    // 100 distinct votes (20 users, Like and Dislike of both topics, signed
    // once each, as a replaying flooder would), each sent 100 times.
    let flooder = &sim.hosts[0];
    let mut votes = Vec::new();
    for n in 0..100 {
        let (user, kind, topic) = (n % 20, if n % 2 == 0 { "Like" } else { "Dislike" }, topics[(n / 20) % 2]);
        let body = Bytes::from(
            json!({"id": format!("{}/votes/{n}", flooder.actor(user)), "type": kind, "actor": flooder.actor(user),
                   "object": format!("{}/ap/t/{topic}", app.addr), "audience": group})
            .to_string(),
        );
        let signed = flooder.sign(user, &authority, INBOX, &body).expect("sign");
        votes.push((body, signed));
    }
    let votes = Arc::new(votes);

    let done = Arc::new(AtomicBool::new(false));
    let reader = {
        let (app, done) = (app.clone(), done.clone());
        tokio::spawn(async move {
            let mut reads = 0;
            while !done.load(Ordering::Relaxed) {
                let (status, body) = app.get(&format!("/api/v1/topics/{}", topics[reads % 2])).await;
                assert_eq!(status, 200, "{body}");
                assert_eq!(body["topic"]["title"], if reads % 2 == 0 { "First" } else { "Second" }, "{body}");
                let (status, list) = app.get("/api/v1/communities/rust/topics").await;
                assert_eq!(status, 200, "{list}");
                assert_eq!(list["topics"].as_array().map(Vec::len), Some(2), "{list}");
                reads += 1;
            }
            reads
        })
    };
    let most_queued = Arc::new(AtomicUsize::new(0));
    let watcher = {
        let (app, done, most) = (app.clone(), done.clone(), most_queued.clone());
        tokio::spawn(async move {
            while !done.load(Ordering::Relaxed) {
                let queued = app.state.store.queued_deliveries().await.expect("count");
                most.fetch_max(queued as usize, Ordering::Relaxed);
                tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            }
        })
    };
    let next = Arc::new(AtomicUsize::new(0));
    let started = std::time::Instant::now();
    let mut senders = Vec::new();
    for _ in 0..16 {
        let (votes, next, addr) = (votes.clone(), next.clone(), app.addr.clone());
        let client = reqwest::Client::new();
        senders.push(tokio::spawn(async move {
            let mut statuses = std::collections::BTreeMap::<u16, usize>::new();
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= 10_000 {
                    return statuses;
                }
                let (body, signed) = &votes[i % votes.len()];
                *statuses.entry(post(&client, &addr, body.clone(), signed).await).or_default() += 1;
            }
        }));
    }
    let mut statuses = std::collections::BTreeMap::<u16, usize>::new();
    for s in senders {
        for (status, n) in s.await.expect("sender") {
            *statuses.entry(status).or_default() += n;
        }
    }
    done.store(true, Ordering::Relaxed);
    let reads = reader.await.expect("reads answered correctly");
    watcher.await.expect("watcher");

    eprintln!(
        "flood: {statuses:?} in {:.1} s; {reads} rounds of local reads; at most {} deliveries queued",
        started.elapsed().as_secs_f64(),
        most_queued.load(Ordering::Relaxed)
    );
    let taken = statuses.get(&202).copied().unwrap_or(0);
    let limited = statuses.get(&429).copied().unwrap_or(0);
    assert_eq!(taken + limited, 10_000, "only 202 and 429: {statuses:?}");
    assert!((LIMIT..=LIMIT + 5).contains(&taken), "the limit took {taken}: {statuses:?}");
    assert!(reads > 0, "no read finished during the flood");
    // One delivery per vote taken, at most, and never more queued.
    let most = most_queued.load(Ordering::Relaxed);
    assert!(most <= taken, "{most} deliveries queued for {taken} votes taken");
    // The queue drains to the follower's inbox.
    for _ in 0..600 {
        if app.state.store.queued_deliveries().await.expect("count") == 0 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert_eq!(app.state.store.queued_deliveries().await.expect("count"), 0);
    assert_eq!(sim.tally.bad_signatures.load(Ordering::Relaxed), 0);
    assert!(sim.tally.most_announces() as usize <= taken);
}

/// POSTs a signed activity to the inbox; the status.
async fn post(client: &reqwest::Client, addr: &str, body: Bytes, signed: &[(&'static str, String)]) -> u16 {
    let mut req = client.post(format!("{addr}{INBOX}")).header("content-type", "application/activity+json").body(body);
    for (name, value) in signed {
        req = req.header(*name, value);
    }
    req.send().await.expect("send").status().as_u16()
}
