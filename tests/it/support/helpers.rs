//! `spawn_app`: a real server on 127.0.0.1:0 over a fresh SQLite file in a
//! temporary directory, plus small request helpers and the checks every
//! module shares (the JSON error shape above all).

use std::path::PathBuf;
use std::time::Duration;

use pith::app::AppState;
use pith::app::RateConfig;
use pith::app::federation::FederationConfig;
use pith::app::media::MediaConfig;
use pith::live::LiveConfig;
use pith::model::Username;
use pith::server as http;
use pith::store::sqlite::{SqliteOptions, SqliteStore};
use pith::store::{Store, StoreError};
use reqwest::Method;
use serde_json::{Value, json};
use tokio::sync::oneshot;

/// Every request gives up after this long, so a hung server fails a test
/// instead of hanging the suite.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// A server on one store: SQLite unless a test asks for PostgreSQL
/// (`spawn_pg_app`).
pub struct TestApp<S: Store = SqliteStore> {
    pub addr: String,
    pub client: reqwest::Client,
    pub dir: tempfile::TempDir,
    /// An administrator's bearer token.
    pub admin_token: String,
    /// The server's own state: lets tests make accounts without paying for
    /// argon2, and look at the store behind the API.
    pub state: AppState<S>,
    stop: Option<oneshot::Sender<()>>,
    server: Option<tokio::task::JoinHandle<std::io::Result<()>>>,
}

pub async fn spawn_app() -> TestApp {
    let dir = tempfile::tempdir().expect("tempdir");
    spawn_app_in(dir).await
}

/// Serves the database in `dir` (creating it when missing); reuses the
/// `admin` account when a previous run made it.
pub async fn spawn_app_in(dir: tempfile::TempDir) -> TestApp {
    spawn_app_with(dir, Duration::from_secs(30)).await
}

/// `spawn_app_in` with the server's per-request time limit set.
pub async fn spawn_app_with(dir: tempfile::TempDir, request_timeout: Duration) -> TestApp {
    // Tests make many accounts and writes from one address in a burst: the
    // rate limits are tested on their own (limits.rs).
    spawn_app_full(dir, request_timeout, &RateConfig::off()).await
}

/// A server with the given rate limits.
pub async fn spawn_app_limited(rate: &RateConfig) -> TestApp {
    spawn_app_full(tempfile::tempdir().expect("tempdir"), Duration::from_secs(30), rate).await
}

async fn spawn_app_full(dir: tempfile::TempDir, request_timeout: Duration, rate: &RateConfig) -> TestApp {
    let path = dir.path().join("pith.db");
    let store =
        SqliteStore::open(&path, &SqliteOptions { readers: 2, ..SqliteOptions::default() }).expect("open store");
    serve_store(store, dir, request_timeout, rate, &MediaConfig::default()).await
}

/// A server on SQLite with the given rate limits and picture settings.
pub async fn spawn_app_media(dir: tempfile::TempDir, rate: &RateConfig, media: &MediaConfig) -> TestApp {
    let path = dir.path().join("pith.db");
    let store =
        SqliteStore::open(&path, &SqliteOptions { readers: 2, ..SqliteOptions::default() }).expect("open store");
    serve_store(store, dir, Duration::from_secs(30), rate, media).await
}

/// A server on the fresh PostgreSQL database `db`.
pub async fn spawn_pg_app(db: &crate::support::pg::TestDb) -> TestApp<pith::store::postgres::PgStore> {
    spawn_pg_app_media(db, &RateConfig::off(), &MediaConfig::default()).await
}

/// A server on PostgreSQL with the given rate limits and picture settings.
pub async fn spawn_pg_app_media(
    db: &crate::support::pg::TestDb,
    rate: &RateConfig,
    media: &MediaConfig,
) -> TestApp<pith::store::postgres::PgStore> {
    let dir = tempfile::tempdir().expect("tempdir");
    serve_store(db.store().await, dir, Duration::from_secs(30), rate, media).await
}

async fn serve_store<S: Store>(
    store: S,
    dir: tempfile::TempDir,
    request_timeout: Duration,
    rate: &RateConfig,
    media: &MediaConfig,
) -> TestApp<S> {
    serve_store_with(store, dir, request_timeout, rate, media, None).await
}

/// A server on SQLite with federation set (`--federation on`, loopback
/// allowed), its public address its own.
pub async fn spawn_federated_app() -> TestApp {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("pith.db");
    let store =
        SqliteStore::open(&path, &SqliteOptions { readers: 2, ..SqliteOptions::default() }).expect("open store");
    let fed = federation_on();
    serve_store_with(store, dir, Duration::from_secs(30), &RateConfig::off(), &MediaConfig::default(), Some(&fed)).await
}

/// `spawn_federated_app` with the given rate limits.
pub async fn spawn_federated_app_limited(rate: &RateConfig) -> TestApp {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("pith.db");
    let store =
        SqliteStore::open(&path, &SqliteOptions { readers: 2, ..SqliteOptions::default() }).expect("open store");
    serve_store_with(store, dir, Duration::from_secs(30), rate, &MediaConfig::default(), Some(&federation_on())).await
}

/// `spawn_federated_app` on the fresh PostgreSQL database `db`.
pub async fn spawn_federated_pg_app(db: &crate::support::pg::TestDb) -> TestApp<pith::store::postgres::PgStore> {
    let dir = tempfile::tempdir().expect("tempdir");
    let fed = federation_on();
    let (rate, media) = (RateConfig::off(), MediaConfig::default());
    serve_store_with(db.store().await, dir, Duration::from_secs(30), &rate, &media, Some(&fed)).await
}

fn federation_on() -> FederationConfig {
    FederationConfig { federation: pith::metrics::config::Switch::On, federation_allow_private: true }
}

async fn serve_store_with<S: Store>(
    store: S,
    dir: tempfile::TempDir,
    request_timeout: Duration,
    rate: &RateConfig,
    media: &MediaConfig,
    federation: Option<&FederationConfig>,
) -> TestApp<S> {
    // The first administrator is made the way `pith user add --admin` does.
    let admin = match store.create_user(Username::parse("admin").expect("name"), None, true).await {
        Ok(admin) => admin,
        Err(StoreError::Conflict(_)) => {
            store.user_credentials("admin".into()).await.expect("read admin").expect("admin exists").0
        }
        Err(e) => panic!("create admin: {e}"),
    };
    let admin_token = pith::app::auth::new_token();
    store.add_token(admin.id, pith::app::auth::token_digest(&admin_token)).await.expect("token");

    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = format!("http://{}", listener.local_addr().expect("addr"));
    let (stop, stopped) = oneshot::channel::<()>();
    let state = AppState::with_config(store, 16 << 20, &LiveConfig::default(), rate);
    state.media.set(media, dir.path());
    if let Some(federation) = federation {
        pith::app::federation::start(&state, federation);
        state.web.set_public_url(&addr, 0);
    }
    let server = tokio::spawn(http::run(listener, state.clone(), request_timeout, async {
        let _ = stopped.await;
    }));
    TestApp { addr, client: client(), dir, admin_token, state, stop: Some(stop), server: Some(server) }
}

pub fn client() -> reqwest::Client {
    reqwest::Client::builder().timeout(REQUEST_TIMEOUT).build().expect("client")
}

/// A response with everything a test may look at.
#[derive(Debug)]
pub struct Reply {
    pub status: u16,
    pub headers: reqwest::header::HeaderMap,
    pub bytes: Vec<u8>,
}

impl Reply {
    /// The body as JSON; `Null` when it is not JSON.
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.bytes).unwrap_or(Value::Null)
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
}

pub async fn fetch(req: reqwest::RequestBuilder) -> Reply {
    let res = req.send().await.expect("request");
    let status = res.status().as_u16();
    let headers = res.headers().clone();
    let bytes = res.bytes().await.expect("body").to_vec();
    Reply { status, headers, bytes }
}

impl<S: Store> TestApp<S> {
    pub fn db_path(&self) -> PathBuf {
        self.dir.path().join("pith.db")
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{}", self.addr, path)
    }

    /// Stops the server gracefully (commit, checkpoint) and hands back the
    /// data directory.
    pub async fn stop(mut self) -> tempfile::TempDir {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(server) = self.server.take() {
            server.await.expect("join").expect("server ran");
        }
        std::mem::replace(&mut self.dir, tempfile::tempdir().expect("tempdir"))
    }

    /// A request to `path`, to be finished by the caller and sent with `fetch`.
    pub fn req(&self, method: Method, path: &str) -> reqwest::RequestBuilder {
        self.client.request(method, self.url(path))
    }

    pub async fn get(&self, path: &str) -> (u16, Value) {
        self.send(Method::GET, path, None, None).await
    }

    pub async fn send(&self, method: Method, path: &str, token: Option<&str>, body: Option<Value>) -> (u16, Value) {
        let mut req = self.req(method, path);
        if let Some(t) = token {
            req = req.bearer_auth(t);
        }
        if let Some(b) = body {
            req = req.json(&b);
        }
        let reply = fetch(req).await;
        (reply.status, reply.json())
    }

    pub async fn post(&self, path: &str, token: Option<&str>, body: Value) -> (u16, Value) {
        self.send(Method::POST, path, token, Some(body)).await
    }

    pub async fn patch(&self, path: &str, token: Option<&str>, body: Value) -> (u16, Value) {
        self.send(Method::PATCH, path, token, Some(body)).await
    }

    pub async fn delete(&self, path: &str, token: Option<&str>) -> (u16, Value) {
        self.send(Method::DELETE, path, token, None).await
    }

    /// Registers `name` over HTTP (password `password123`) and returns its token.
    pub async fn register(&self, name: &str) -> String {
        let (status, body) =
            self.post("/api/v1/auth/register", None, json!({"username": name, "password": "password123"})).await;
        assert_eq!(status, 201, "register {name}: {body}");
        body["token"].as_str().expect("token").to_owned()
    }

    /// Makes an account straight in the store, the way `pith user add`
    /// does (no password, so no argon2), and returns a token for it.
    pub async fn user(&self, name: &str) -> String {
        let store = &self.state.store;
        let user = store.create_user(Username::parse(name).expect("name"), None, false).await.expect("create user");
        let token = pith::app::auth::new_token();
        store.add_token(user.id, pith::app::auth::token_digest(&token)).await.expect("token");
        token
    }

    /// Creates a community as the admin.
    pub async fn community(&self, name: &str) {
        let (status, body) = self
            .post("/api/v1/communities", Some(&self.admin_token), json!({"name": name, "title": format!("The {name}")}))
            .await;
        assert_eq!(status, 201, "{body}");
    }

    /// Creates a topic and returns its id.
    pub async fn topic(&self, community: &str, token: &str, title: &str) -> i64 {
        let (status, body) = self
            .post(&format!("/api/v1/communities/{community}/topics"), Some(token), json!({"title": title, "body": "b"}))
            .await;
        assert_eq!(status, 201, "{body}");
        body["id"].as_i64().expect("id")
    }

    /// Replies to a topic (to `parent` when given) and returns the post id.
    pub async fn reply(&self, topic: i64, token: &str, parent: Option<i64>, body: &str) -> i64 {
        let (status, post) = self
            .post(&format!("/api/v1/topics/{topic}/posts"), Some(token), json!({"body": body, "parent_id": parent}))
            .await;
        assert_eq!(status, 201, "{post}");
        post["id"].as_i64().expect("id")
    }

    /// Votes on `/api/v1/{what}/{id}/vote` (`what` is `topics` or `posts`)
    /// and returns the new score.
    pub async fn vote(&self, what: &str, id: i64, token: &str, value: i64) -> i64 {
        let (status, body) =
            self.post(&format!("/api/v1/{what}/{id}/vote"), Some(token), json!({"value": value})).await;
        assert_eq!(status, 200, "{body}");
        assert_eq!(body["vote"], value, "{body}");
        body["score"].as_i64().expect("score")
    }

    /// The topic JSON (`{"topic", "posts"}`) in the given post order.
    pub async fn read_topic(&self, id: i64, sort: &str) -> Value {
        let (status, body) = self.get(&format!("/api/v1/topics/{id}?sort={sort}")).await;
        assert_eq!(status, 200, "{body}");
        body
    }

    /// The ids of a listing page, and its `next` cursor.
    pub async fn list(&self, path_and_query: &str) -> (Vec<i64>, Option<String>) {
        let (status, body) = self.get(path_and_query).await;
        assert_eq!(status, 200, "{path_and_query}: {body}");
        (ids(&body["topics"]), body["next"].as_str().map(str::to_owned))
    }
}

/// A forum with one topic by alice ("raspi") holding enough posts that its
/// JSON is worth compressing; returns alice's token too.
pub async fn app_with_a_long_topic() -> (TestApp, i64, String) {
    let app = spawn_app().await;
    app.community("raspi").await;
    let alice = app.user("alice").await;
    let topic = app.topic("raspi", &alice, "A long thread").await;
    for i in 0..5 {
        app.reply(topic, &alice, None, &format!("post number {i}, which says the same thing as the others")).await;
    }
    (app, topic, alice)
}

/// A post object (as created, edited or found elsewhere) in the shape a
/// topic's post list gives it: no `topic_id`, no `body_html` unless
/// `html`, and `parent_id`, `edited_at`, `deleted` and `removed` only when
/// not null or false (docs/API.md).
pub fn listed(post: &Value, html: bool) -> Value {
    let mut p = post.clone();
    let o = p.as_object_mut().expect("a post object");
    o.remove("topic_id");
    if !html {
        o.remove("body_html");
    }
    o.retain(|k, v| {
        !(matches!(k.as_str(), "parent_id" | "edited_at" | "deleted" | "removed") && (v.is_null() || *v == false))
    });
    p
}

/// The `id` of every element of a JSON array.
pub fn ids(items: &Value) -> Vec<i64> {
    items.as_array().expect("array").iter().map(|v| v["id"].as_i64().expect("id")).collect()
}

/// Asserts the status and that the body is exactly the error shape
/// `{"error": {"code": CODE, "message": "..."}}`.
#[track_caller]
pub fn assert_error(context: &str, status: u16, body: &Value, want_status: u16, want_code: &str) {
    assert_eq!(status, want_status, "{context}: status; body {body}");
    assert_error_shape(context, body);
    assert_eq!(body["error"]["code"], want_code, "{context}: code; body {body}");
}

/// Asserts the body is `{"error": {"code": "...", "message": "..."}}` with
/// nothing else, whatever the code.
#[track_caller]
pub fn assert_error_shape(context: &str, body: &Value) {
    let top = body.as_object().unwrap_or_else(|| panic!("{context}: error body is not a JSON object: {body}"));
    assert_eq!(top.len(), 1, "{context}: only `error` at the top: {body}");
    let error = body["error"].as_object().unwrap_or_else(|| panic!("{context}: `error` is not an object: {body}"));
    assert_eq!(error.len(), 2, "{context}: `error` has exactly code and message: {body}");
    let code = error["code"].as_str().unwrap_or_default();
    assert!(!code.is_empty() && code.chars().all(|c| c.is_ascii_lowercase() || c == '_'), "{context}: code {body}");
    assert!(!error["message"].as_str().unwrap_or_default().is_empty(), "{context}: message {body}");
}
