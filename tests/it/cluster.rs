//! Several nodes on one PostgreSQL: two real servers (in-process
//! `server::run`, each its own store, cache, hub and bus connection) on a
//! fresh database; a WebSocket subscriber on node B gets a post made on
//! node A, and B's cached topic shows the post after it; a token revoked
//! on node A stops working on node B at once. Over the default
//! LISTEN/NOTIFY bus and over NATS (127.0.0.1:4222, provided by test.sh).
//! Databases come from `crate::support::pg::TestDb` (fresh per test).

use std::time::{Duration, Instant};

use futures_util::StreamExt;
use pith::app::AppState;
use pith::app::RateConfig;
use pith::cluster::Bus;
use pith::live::LiveConfig;
use pith::model::Username;
use pith::server as http;
use pith::store::Store;
use pith::store::postgres::{PgOptions, PgStore};
use serde_json::{Value, json};
use tokio::sync::oneshot;
use tokio_tungstenite::tungstenite::Message;

/// One `pith serve` node, in process.
struct Node {
    addr: String,
    state: AppState<PgStore>,
    stop: Option<oneshot::Sender<()>>,
    server: Option<tokio::task::JoinHandle<std::io::Result<()>>>,
}

impl Node {
    async fn start(url: &str, bus: &Bus, id: &str) -> Node {
        let store = PgStore::connect(url, &PgOptions { pool_size: 4, ..PgOptions::default() }).await.expect("connect");
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr").to_string();
        let state = AppState::with_config(store, 16 << 20, &LiveConfig::default(), &RateConfig::off());
        let sink = pith::app::bus::attach(&state, bus, id).expect("a bus");
        // Serve only once the bus listens, as a node behind a proxy would be
        // put in rotation once up.
        let deadline = Instant::now() + Duration::from_secs(5);
        while !sink.connected() {
            assert!(Instant::now() < deadline, "node {id} connected its bus");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let (stop, stopped) = oneshot::channel::<()>();
        let server = tokio::spawn(http::run(listener, state.clone(), Duration::from_secs(30), async {
            let _ = stopped.await;
        }));
        Node { addr, state, stop: Some(stop), server: Some(server) }
    }

    async fn send(&self, method: reqwest::Method, path: &str, token: &str, body: Value) -> (u16, Value) {
        let res = reqwest::Client::new()
            .request(method, format!("http://{}{path}", self.addr))
            .bearer_auth(token)
            .json(&body)
            .timeout(Duration::from_secs(30))
            .send()
            .await
            .expect("request");
        let status = res.status().as_u16();
        (status, res.json().await.unwrap_or(Value::Null))
    }

    async fn read_topic(&self, id: i64) -> Value {
        let res = reqwest::get(format!("http://{}/api/v1/topics/{id}", self.addr)).await.expect("get");
        assert_eq!(res.status().as_u16(), 200);
        res.json().await.expect("json")
    }

    async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(server) = self.server.take() {
            server.await.expect("join").expect("server ran");
        }
    }
}

/// An administrator made straight in the store; returns a token.
async fn admin(node: &Node) -> String {
    let store = &node.state.store;
    let user = store.create_user(Username::parse("admin").expect("name"), None, true).await.expect("admin");
    let token = pith::app::auth::new_token();
    store.add_token(user.id, pith::app::auth::token_digest(&token)).await.expect("token");
    token
}

/// The next text message as JSON, skipping control frames; fails after 5 s.
async fn next_json(
    ws: &mut tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>,
) -> Value {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let msg = tokio::time::timeout(left, ws.next()).await.expect("a message within 5 s");
        match msg.expect("stream open").expect("valid message") {
            Message::Text(t) => return serde_json::from_str(&t).expect("json"),
            Message::Ping(_) | Message::Pong(_) => continue,
            other => panic!("expected text, got {other:?}"),
        }
    }
}

/// Polls `read` until `cond` holds, for up to 5 seconds.
async fn eventually<F, Fut>(what: &str, mut read: F, cond: impl Fn(&Value) -> bool) -> Value
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Value>,
{
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let v = read().await;
        if cond(&v) {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}: last {v}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn bodies(topic: &Value) -> Vec<String> {
    topic["posts"]
        .as_array()
        .map_or(Vec::new(), |p| p.iter().filter_map(|p| p["body"].as_str().map(str::to_owned)).collect())
}

/// The whole story on one bus: live events and cache evictions cross.
async fn two_nodes_share_writes(bus: impl Fn(&str) -> Bus) {
    let db = crate::support::pg::TestDb::create().await;
    let url = db.url.clone();
    let a = Node::start(&url, &bus(&url), "node-a").await;
    let b = Node::start(&url, &bus(&url), "node-b").await;
    if matches!(bus(&url), Bus::Postgres(_)) {
        let (client, conn) = tokio_postgres::connect(&url, tokio_postgres::NoTls).await.expect("connect");
        tokio::spawn(conn);
        bus_sessions(&client, 2).await;
    }
    let token = admin(&a).await;
    let (status, body) =
        a.send(reqwest::Method::POST, "/api/v1/communities", &token, json!({"name": "pis", "title": "Pis"})).await;
    assert_eq!(status, 201, "{body}");
    let (status, topic) = a
        .send(
            reqwest::Method::POST,
            "/api/v1/communities/pis/topics",
            &token,
            json!({"title": "Clusters", "body": "b"}),
        )
        .await;
    assert_eq!(status, 201, "{topic}");
    let id = topic["id"].as_i64().expect("id");

    // B reads the topic and caches it.
    assert!(bodies(&b.read_topic(id).await).is_empty());
    assert!(b.state.cache.bytes() > 0, "node B cached the topic");

    let (mut ws, _) =
        tokio_tungstenite::connect_async(format!("ws://{}/api/v1/live?topics={id}", b.addr)).await.expect("ws");
    assert_eq!(next_json(&mut ws).await["type"], "subscribed");

    // A short post and one too long for a NOTIFY payload (it spills).
    let long = "long ".repeat(4_000);
    for text in ["made on node A", long.trim_end()] {
        let (status, post) =
            a.send(reqwest::Method::POST, &format!("/api/v1/topics/{id}/posts"), &token, json!({"body": text})).await;
        assert_eq!(status, 201, "{post}");
        let event = next_json(&mut ws).await;
        assert_eq!((event["type"].as_str(), event["post"]["body"].as_str()), (Some("post"), Some(text)), "on B");
        eventually("node B's topic to show the post", || b.read_topic(id), |t| bodies(t).iter().any(|b| b == text))
            .await;
    }
    drop(ws);
    a.stop().await;
    b.stop().await;
    drop(db);
}

#[tokio::test]
async fn over_listen_notify_a_post_on_node_a_reaches_node_b_live_and_in_its_cache() {
    two_nodes_share_writes(|db| Bus::Postgres(db.to_owned())).await;
}

#[tokio::test]
async fn over_nats_a_post_on_node_a_reaches_node_b_live_and_in_its_cache() {
    let nats = std::env::var("PITH_TEST_NATS_URL").unwrap_or_else(|_| "nats://127.0.0.1:4222".to_owned());
    two_nodes_share_writes(|_| Bus::Nats(nats.clone())).await;
}

#[tokio::test]
async fn after_its_bus_connection_is_cut_a_node_drops_its_cache_and_hears_the_others_again() {
    let db = crate::support::pg::TestDb::create().await;
    let url = db.url.clone();
    let bus = Bus::Postgres(url.clone());
    let a = Node::start(&url, &bus, "node-a").await;
    let b = Node::start(&url, &bus, "node-b").await;
    let token = admin(&a).await;
    let (status, body) =
        a.send(reqwest::Method::POST, "/api/v1/communities", &token, json!({"name": "pis", "title": "Pis"})).await;
    assert_eq!(status, 201, "{body}");
    let (status, topic) = a
        .send(reqwest::Method::POST, "/api/v1/communities/pis/topics", &token, json!({"title": "Cut", "body": "b"}))
        .await;
    assert_eq!(status, 201, "{topic}");
    let id = topic["id"].as_i64().expect("id");
    b.read_topic(id).await;
    assert!(b.state.cache.bytes() > 0, "node B cached the topic");

    // Cut both nodes' bus sessions, as a database restart or a network
    // blip would.
    let (admin_client, conn) = tokio_postgres::connect(&url, tokio_postgres::NoTls).await.expect("connect");
    tokio::spawn(conn);
    bus_sessions(&admin_client, 2).await;
    let cut = admin_client
        .query(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1 AND datname = current_database()",
            &[&pith::cluster::postgres::APPLICATION_NAME],
        )
        .await
        .expect("terminate");
    assert_eq!(cut.len(), 2, "one bus session per node");
    let deadline = Instant::now() + Duration::from_secs(5);
    while b.state.cache.bytes() > 0 {
        assert!(Instant::now() < deadline, "node B flushed its cache after reconnecting");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    // The bus works again: a post on A reaches a subscriber on B.
    let (mut ws, _) =
        tokio_tungstenite::connect_async(format!("ws://{}/api/v1/live?topics={id}", b.addr)).await.expect("ws");
    assert_eq!(next_json(&mut ws).await["type"], "subscribed");
    bus_sessions(&admin_client, 2).await;
    let (status, post) = a
        .send(reqwest::Method::POST, &format!("/api/v1/topics/{id}/posts"), &token, json!({"body": "after the cut"}))
        .await;
    assert_eq!(status, 201, "{post}");
    assert_eq!(next_json(&mut ws).await["post"]["body"], "after the cut");
    drop(ws);
    a.stop().await;
    b.stop().await;
    drop(db);
}

/// Waits (up to 5 s) until `n` bus sessions are connected to the database.
async fn bus_sessions(client: &tokio_postgres::Client, n: usize) {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let rows = client
            .query(
                "SELECT 1 FROM pg_stat_activity WHERE application_name = $1 AND datname = current_database()",
                &[&pith::cluster::postgres::APPLICATION_NAME],
            )
            .await
            .expect("activity");
        if rows.len() == n {
            return;
        }
        assert!(Instant::now() < deadline, "{n} bus sessions connected (have {})", rows.len());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Issue 26: a session revoked on one node stops working on the others at
/// once, not when their token caches expire a minute later.
#[tokio::test]
async fn a_token_revoked_on_node_a_stops_working_on_node_b_at_once() {
    let db = crate::support::pg::TestDb::create().await;
    let url = db.url.clone();
    let a = Node::start(&url, &Bus::Postgres(url.clone()), "node-a").await;
    let b = Node::start(&url, &Bus::Postgres(url.clone()), "node-b").await;
    let keep = admin(&a).await;
    let store = &a.state.store;
    let (admin, _) = store.user_credentials("admin".into()).await.expect("read").expect("admin");
    let other = pith::app::auth::new_token();
    store.add_token(admin.id, pith::app::auth::token_digest(&other)).await.expect("token");
    let get = reqwest::Method::GET;
    // Node B caches both tokens.
    assert_eq!(b.send(get.clone(), "/api/v1/auth/me", &other, Value::Null).await.0, 200);
    assert_eq!(b.send(get.clone(), "/api/v1/auth/me", &keep, Value::Null).await.0, 200);

    let (status, body) = a.send(reqwest::Method::POST, "/api/v1/me/sessions/revoke-others", &keep, json!({})).await;
    assert_eq!((status, body["revoked"].clone()), (200, json!(1)), "{body}");
    let deadline = Instant::now() + Duration::from_secs(5);
    while b.send(get.clone(), "/api/v1/auth/me", &other, Value::Null).await.0 != 401 {
        assert!(Instant::now() < deadline, "node B still takes the revoked token from its cache");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(b.send(get, "/api/v1/auth/me", &keep, Value::Null).await.0, 200, "the kept one still works");
    a.stop().await;
    b.stop().await;
}
