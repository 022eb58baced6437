//! Rate limits over real sockets: brute-forced logins stall, posting,
//! editing, reporting, voting and registering are limited per account and
//! per address, every refusal is a 429 with `Retry-After` and the JSON
//! error shape, and the limits can be set by flag. Clients bind 127.0.0.x source addresses to
//! act as different machines.

use std::net::{IpAddr, Ipv4Addr};
use std::time::Duration;

use pith::app::limits::{Rate, RateConfig};
use reqwest::Method;
use serde_json::json;

use crate::support::child::run_pith;
use crate::support::helpers::{Reply, TestApp, assert_error, fetch, spawn_app_limited};

fn rate(s: &str) -> Rate {
    Rate::parse(s).expect("rate")
}

/// A client whose connections come from 127.0.0.`n`.
fn client_from(n: u8) -> reqwest::Client {
    reqwest::Client::builder()
        .local_address(IpAddr::V4(Ipv4Addr::new(127, 0, 0, n)))
        .timeout(Duration::from_secs(30))
        .build()
        .expect("client")
}

async fn login(app: &TestApp, client: &reqwest::Client, name: &str, password: &str) -> Reply {
    fetch(client.post(app.url("/api/v1/auth/login")).json(&json!({"username": name, "password": password}))).await
}

/// Checks a refusal: 429, the error shape, and a `Retry-After` in whole
/// seconds within `most`.
fn assert_limited(context: &str, reply: &Reply, most: u64) {
    assert_error(context, reply.status, &reply.json(), 429, "rate_limited");
    let after: u64 = reply
        .header("retry-after")
        .unwrap_or_else(|| panic!("{context}: no Retry-After"))
        .parse()
        .unwrap_or_else(|_| panic!("{context}: Retry-After is not whole seconds"));
    assert!((1..=most).contains(&after), "{context}: Retry-After {after} s, expected 1..={most}");
}

#[tokio::test]
async fn sixty_wrong_passwords_in_a_row_start_getting_429() {
    // The shipped defaults, as `pith serve` runs with no configuration.
    let app = spawn_app_limited(&RateConfig::default()).await;
    app.register("victim").await;
    let client = client_from(1);
    let mut statuses = Vec::new();
    for i in 0..60 {
        let reply = login(&app, &client, "victim", &format!("guess-{i}")).await;
        if reply.status == 429 {
            assert_limited("throttled login", &reply, 15 * 60);
        } else {
            assert_error("wrong password", reply.status, &reply.json(), 401, "bad_credentials");
        }
        statuses.push(reply.status);
    }
    let first = statuses.iter().position(|&s| s == 429).expect("60 wrong passwords never got a 429");
    assert!(first <= 10, "the first 429 came after {first} wrong passwords");
    assert!(statuses[first..].iter().all(|&s| s == 429), "throttling let a guess through: {statuses:?}");
    // While throttled even the right password is refused, so a guesser
    // cannot tell when it has found it.
    let right = login(&app, &client, "victim", "password123").await;
    assert_limited("right password while throttled", &right, 15 * 60);
}

#[tokio::test]
async fn guessing_one_account_from_many_addresses_still_stalls() {
    let app = spawn_app_limited(&RateConfig {
        login_user: rate("5/15m"),
        login_ip: rate("1000/1m"),
        ..RateConfig::default()
    })
    .await;
    app.register("target").await;
    let mut refused = 0;
    for n in 0..12u8 {
        let reply = login(&app, &client_from(10 + n), "TARGET", "not-it-at-all").await;
        if reply.status == 429 {
            refused += 1;
        }
    }
    assert_eq!(refused, 7, "the account allows 5 attempts, whatever address they come from");
    // Another account is untouched.
    app.register("bystander").await;
    let ok = login(&app, &client_from(30), "bystander", "password123").await;
    assert_eq!(ok.status, 200, "{:?}", ok.json());
}

#[tokio::test]
async fn one_address_guessing_many_accounts_stalls() {
    let app = spawn_app_limited(&RateConfig {
        login_user: rate("1000/1m"),
        login_ip: rate("8/15m"),
        ..RateConfig::default()
    })
    .await;
    let attacker = client_from(40);
    let mut statuses = Vec::new();
    for i in 0..12 {
        statuses.push(login(&app, &attacker, &format!("user{i}"), "password123").await.status);
    }
    assert_eq!(statuses.iter().filter(|&&s| s == 401).count(), 8, "{statuses:?}");
    assert_eq!(statuses.iter().filter(|&&s| s == 429).count(), 4, "{statuses:?}");
    // A neighbour on another address logs in.
    app.register("neighbour").await;
    assert_eq!(login(&app, &client_from(41), "neighbour", "password123").await.status, 200);
}

// Limits below refill over an hour, so a test slowed down by a busy
// machine cannot see a token come back mid-test.
#[tokio::test]
async fn posting_is_limited_per_account_and_per_address() {
    let app =
        spawn_app_limited(&RateConfig { post_user: rate("3/1h"), post_ip: rate("5/1h"), ..RateConfig::default() })
            .await;
    app.community("pies").await;
    let alice = app.user("alice").await;
    let bob = app.user("bob").await;
    let topic = app.topic("pies", &alice, "first").await; // alice: 1 of 3
    app.reply(topic, &alice, None, "two").await;
    app.reply(topic, &alice, None, "three").await;
    let over = fetch(
        app.req(Method::POST, &format!("/api/v1/topics/{topic}/posts"))
            .bearer_auth(&alice)
            .json(&json!({"body": "four"})),
    )
    .await;
    assert_limited("alice's fourth post", &over, 1200);
    let topic_over = fetch(
        app.req(Method::POST, "/api/v1/communities/pies/topics").bearer_auth(&alice).json(&json!({"title": "again"})),
    )
    .await;
    assert_limited("alice's topic over the limit", &topic_over, 1200);
    // Nothing refused was stored.
    let read = app.read_topic(topic, "old").await;
    assert_eq!(read["posts"].as_array().map(Vec::len), Some(2), "{read}");
    // Bob has his own bucket but shares the address's, 5 in all, and the
    // address paid for alice's refused attempts too: a flood from one
    // address spends that address's budget whoever it posts as.
    let shared = fetch(
        app.req(Method::POST, &format!("/api/v1/topics/{topic}/posts")).bearer_auth(&bob).json(&json!({"body": "3"})),
    )
    .await;
    assert_limited("the address's sixth post", &shared, 720);
    // Bob on another address gets on with it.
    let elsewhere = fetch(
        client_from(50)
            .post(app.url(&format!("/api/v1/topics/{topic}/posts")))
            .bearer_auth(&bob)
            .json(&json!({"body": "from home"})),
    )
    .await;
    assert_eq!(elsewhere.status, 201, "{:?}", elsewhere.json());
}

#[tokio::test]
async fn voting_is_limited_per_account() {
    let app = spawn_app_limited(&RateConfig { vote_user: rate("4/1h"), ..RateConfig::default() }).await;
    app.community("pies").await;
    let alice = app.user("alice").await;
    let topic = app.topic("pies", &alice, "vote on me").await;
    for value in [1, -1, 0, 1] {
        app.vote("topics", topic, &alice, value).await;
    }
    let over = fetch(
        app.req(Method::POST, &format!("/api/v1/topics/{topic}/vote")).bearer_auth(&alice).json(&json!({"value": -1})),
    )
    .await;
    assert_limited("fifth vote", &over, 900);
    let read = app.read_topic(topic, "old").await;
    assert_eq!(read["topic"]["score"], 1, "the refused vote changed nothing: {read}");
}

#[tokio::test]
async fn registration_is_limited_per_address() {
    let app = spawn_app_limited(&RateConfig { register_ip: rate("2/1h"), ..RateConfig::default() }).await;
    let from = client_from(60);
    let register = |name: &'static str, client: reqwest::Client| {
        let url = app.url("/api/v1/auth/register");
        async move { fetch(client.post(url).json(&json!({"username": name, "password": "password123"}))).await }
    };
    assert_eq!(register("one", from.clone()).await.status, 201);
    assert_eq!(register("two", from.clone()).await.status, 201);
    assert_limited("third registration", &register("three", from.clone()).await, 3600);
    assert_eq!(register("four", client_from(61)).await.status, 201, "another address registers");
    // The refused account does not exist.
    assert_eq!(app.get("/api/v1/users/three").await.0, 404);
}

#[tokio::test]
async fn a_forwarded_address_counts_only_when_configured() {
    let limited = RateConfig { register_ip: rate("1/1h"), ..RateConfig::default() };
    let register = |app: &TestApp, name: &str, forwarded: &str| {
        fetch(
            app.req(Method::POST, "/api/v1/auth/register")
                .header("x-forwarded-for", forwarded)
                .json(&json!({"username": name, "password": "password123"})),
        )
    };
    // Without the setting a client cannot dodge its limit with the header.
    let direct = spawn_app_limited(&limited).await;
    assert_eq!(register(&direct, "anna1", "198.51.100.1").await.status, 201);
    assert_eq!(register(&direct, "anna2", "198.51.100.2").await.status, 429);
    // Behind a proxy the last X-Forwarded-For entry is the client.
    let proxied =
        spawn_app_limited(&RateConfig { real_ip_header: Some("X-Forwarded-For".into()), ..limited.clone() }).await;
    assert_eq!(register(&proxied, "bert1", "203.0.113.9, 198.51.100.1").await.status, 201);
    assert_eq!(register(&proxied, "bert2", "198.51.100.2").await.status, 201);
    assert_eq!(register(&proxied, "bert3", "10.9.9.9, 198.51.100.1").await.status, 429);
}

#[tokio::test]
async fn a_bad_limit_setting_is_a_readable_error() {
    for (flag, value) in [("--limit-post-user", "ten/1m"), ("--limit-login-ip", "5"), ("--limit-vote-ip", "0/1m")] {
        let out =
            run_pith(&["serve".as_ref(), flag.as_ref(), value.as_ref(), "--listen".as_ref(), "127.0.0.1:0".as_ref()])
                .await;
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{flag} {value} was accepted");
        assert!(err.contains(flag) && err.contains("rate"), "{flag} {value}: {err}");
    }
}

#[tokio::test]
async fn searching_is_limited_per_address_across_api_and_pages() {
    let app = spawn_app_limited(&RateConfig { search_ip: rate("3/1h"), ..RateConfig::default() }).await;
    let from = client_from(70);
    let api = fetch(from.get(app.url("/api/v1/search?q=pi"))).await;
    assert_eq!(api.status, 200, "{:?}", api.json());
    let page = fetch(from.get(app.url("/search?q=pi"))).await;
    assert_eq!(page.status, 200);
    assert_eq!(fetch(from.get(app.url("/api/v1/search?q=zero"))).await.status, 200);
    // The fourth search, by API or page, is refused.
    assert_limited("fourth search", &fetch(from.get(app.url("/api/v1/search?q=pi"))).await, 1200);
    let page = fetch(from.get(app.url("/search?q=pi"))).await;
    assert_eq!(page.status, 429, "the page shares the budget");
    assert!(page.header("retry-after").is_some(), "the page says when to come back");
    // An empty query costs nothing on the page, and another address searches.
    assert_eq!(fetch(from.get(app.url("/search?q="))).await.status, 200);
    assert_eq!(fetch(client_from(71).get(app.url("/api/v1/search?q=pi"))).await.status, 200);
}

#[tokio::test]
async fn editing_is_limited_per_account_across_topics_and_posts_then_per_address() {
    let app =
        spawn_app_limited(&RateConfig { edit_user: rate("3/1h"), edit_ip: rate("5/1h"), ..RateConfig::default() })
            .await;
    app.community("pies").await;
    let alice = app.user("alice").await;
    let bob = app.user("bob").await;
    let topic = app.topic("pies", &alice, "first").await;
    let post = app.reply(topic, &alice, None, "typo").await;
    let bobs = app.reply(topic, &bob, None, "bob's").await;
    let edit_post = |token: &str, id: i64, body: &str| {
        fetch(app.req(Method::PATCH, &format!("/api/v1/posts/{id}")).bearer_auth(token).json(&json!({"body": body})))
    };
    // Posts and topics share the bucket: three edits in all, then 429.
    assert_eq!(edit_post(&alice, post, "fixed").await.status, 200);
    let topic_edit = fetch(
        app.req(Method::PATCH, &format!("/api/v1/topics/{topic}")).bearer_auth(&alice).json(&json!({"body": "intro"})),
    )
    .await;
    assert_eq!(topic_edit.status, 200, "{:?}", topic_edit.json());
    assert_eq!(edit_post(&alice, post, "fixed again").await.status, 200);
    assert_limited("alice's fourth edit", &edit_post(&alice, post, "once more").await, 1200);
    let topic_over = fetch(
        app.req(Method::PATCH, &format!("/api/v1/topics/{topic}")).bearer_auth(&alice).json(&json!({"body": "x"})),
    )
    .await;
    assert_limited("alice's topic edit over the limit", &topic_over, 1200);
    // Nothing refused was stored.
    let read = app.read_topic(topic, "old").await;
    assert_eq!(read["posts"][0]["body"], "fixed again", "{read}");
    // Posting is counted apart.
    app.reply(topic, &alice, None, "still may post").await;
    // Bob has his own bucket but shares the address's 5, all spent.
    assert_limited("the address's sixth edit", &edit_post(&bob, bobs, "bob edits").await, 720);
    let elsewhere = fetch(
        client_from(80)
            .patch(app.url(&format!("/api/v1/posts/{bobs}")))
            .bearer_auth(&bob)
            .json(&json!({"body": "from home"})),
    )
    .await;
    assert_eq!(elsewhere.status, 200, "{:?}", elsewhere.json());
}

#[tokio::test]
async fn a_burst_of_markdown_bomb_edits_gets_429_with_retry_after() {
    // The shipped defaults, as `pith serve` runs with no configuration.
    let app = spawn_app_limited(&RateConfig::default()).await;
    app.community("pies").await;
    let alice = app.user("alice").await;
    let topic = app.topic("pies", &alice, "bombs").await;
    let post = app.reply(topic, &alice, None, "harmless").await;
    let bomb = "> - ".repeat(9_999) + "x";
    let mut statuses = Vec::new();
    let mut stored = json!(null);
    while statuses.len() < 40 && !statuses.contains(&429) {
        let reply = fetch(
            app.req(Method::PATCH, &format!("/api/v1/posts/{post}")).bearer_auth(&alice).json(&json!({"body": bomb})),
        )
        .await;
        if reply.status == 429 {
            assert_limited("a bomb edit over the limit", &reply, 60);
        } else {
            stored = reply.json();
        }
        statuses.push(reply.status);
    }
    // The default is a burst of 20 that refills one every 3 s, so a slow
    // machine may see a few more go through before the 429.
    let first = statuses.iter().position(|&s| s == 429).expect("40 edits in a row never got a 429");
    assert!(first >= 20, "the default allows a burst of 20 edits: {statuses:?}");
    assert!(statuses[..first].iter().all(|&s| s == 200), "{statuses:?}");
    // What was stored renders as escaped text, not 9,999 nested lists.
    let html = stored["body_html"].as_str().unwrap_or_default();
    assert!(html.starts_with("<p>&gt; - &gt; - "), "{}", &html[..html.len().min(80)]);
}

#[tokio::test]
async fn reporting_is_limited_per_account() {
    let app = spawn_app_limited(&RateConfig { report_user: rate("2/1h"), ..RateConfig::default() }).await;
    app.community("pies").await;
    let alice = app.user("alice").await;
    let bob = app.user("bob").await;
    let topic = app.topic("pies", &alice, "reported").await;
    let posts = [
        app.reply(topic, &alice, None, "one").await,
        app.reply(topic, &alice, None, "two").await,
        app.reply(topic, &alice, None, "three").await,
    ];
    let report = |id: i64| {
        fetch(
            app.req(Method::POST, &format!("/api/v1/posts/{id}/report"))
                .bearer_auth(&bob)
                .json(&json!({"reason": "spam"})),
        )
    };
    assert_eq!(report(posts[0]).await.status, 201);
    assert_eq!(report(posts[1]).await.status, 201);
    assert_limited("bob's third report", &report(posts[2]).await, 1800);
}
