//! Federation (docs/FEDERATION.md), over real sockets: off by default with
//! every route a 404; WebFinger, NodeInfo and the actor and object
//! documents; the inbox's HTTP signature checks, each refusal; a Follow
//! from a remote actor (a small ActivityPub server run here, with its own
//! key) accepted by a signed Accept delivered to its inbox, and its Undo;
//! the delivery queue (leases, retries, a restart, a server that never
//! answers holding up no other); on SQLite and
//! PostgreSQL. tests/federation/run.sh does the same against
//! Fedify.

use std::sync::{Arc, Mutex};

use axum::extract::State;
use axum::http::HeaderMap;
use axum::routing::{get, post};
use pith::app::federation::{instances, keys, signature};
use pith::app::limits::RateConfig;
use pith::model::Timestamp;
use pith::model::federation::{ActorKey, ActorKind, NewDelivery};
use pith::model::instances::InstanceRule;
use pith::model::mail::Delivery;
use pith::store::Store;
use pith::store::sqlite::{SqliteOptions, SqliteStore};
use reqwest::Method;
use serde_json::{Value, json};

use crate::support::helpers::{
    Reply, TestApp, fetch, spawn_app, spawn_federated_app, spawn_federated_app_limited, spawn_federated_pg_app,
};
use crate::support::pg::TestDb;

const AP: &str = "application/activity+json";

#[tokio::test]
async fn with_federation_off_every_federation_route_is_an_unknown_path() {
    let app = spawn_app().await;
    app.community("rust").await;
    let unknown = fetch(app.req(Method::GET, "/no/such/route")).await;
    assert_eq!(unknown.status, 404);
    for path in [
        "/.well-known/webfinger?resource=acct:rust@localhost",
        "/.well-known/nodeinfo",
        "/nodeinfo/2.1",
        "/ap/c/rust",
        "/ap/site",
        "/ap/u/admin",
    ] {
        let r = fetch(app.req(Method::GET, path).header("accept", AP)).await;
        assert_eq!(r.status, 404, "{path}");
        assert_eq!(r.json()["error"]["code"], "not_found", "{path}");
    }
    for path in ["/ap/inbox", "/ap/c/rust/inbox"] {
        let r = fetch(app.req(Method::POST, path).header("content-type", AP).body("{}")).await;
        assert_eq!(r.status, 404, "{path}");
    }
    assert!(app.state.store.actor_key(pith::model::federation::ActorKind::Community, 1).await.expect("read").is_none());
}

/// Keys made by `counted_key`, for the test that asks for one key many
/// times at once (the only caller of `counted_key`).
static KEYS_MADE: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

fn counted_key() -> Result<ActorKey, String> {
    KEYS_MADE.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    keys::generate()
}

#[tokio::test]
async fn a_key_asked_for_by_many_at_once_is_made_once() {
    let app = spawn_app().await;
    let asks = (0..16).map(|_| {
        let state = app.state.clone();
        tokio::spawn(async move { keys::key_made_by(&state, ActorKind::Site, 0, counted_key).await })
    });
    let got: Vec<ActorKey> =
        futures_util::future::join_all(asks).await.into_iter().map(|r| r.expect("task").expect("key")).collect();
    assert_eq!(KEYS_MADE.load(std::sync::atomic::Ordering::SeqCst), 1, "one key made for sixteen asks");
    assert!(got.iter().all(|k| k.public_pem == got[0].public_pem), "every ask got the key kept");
    let kept = app.state.store.actor_key(ActorKind::Site, 0).await.expect("read").expect("kept");
    assert_eq!(kept.public_pem, got[0].public_pem);
    // Asked again, the kept key is read, not made.
    keys::key_made_by(&app.state, ActorKind::Site, 0, counted_key).await.expect("key");
    assert_eq!(KEYS_MADE.load(std::sync::atomic::Ordering::SeqCst), 1);
}

/// What a remote inbox was sent: each request's headers and body.
type Received = Arc<Mutex<Vec<(HeaderMap, Vec<u8>)>>>;

/// A remote ActivityPub server: one actor with its own key, whose inbox
/// keeps what it is sent.
struct Remote {
    base: String,
    key: ActorKey,
    received: Received,
}

impl Remote {
    async fn start() -> Remote {
        Remote::start_as("remote").await
    }

    /// A server whose one actor is `/users/NAME`... named "remote" in its
    /// paths whatever `name` is (`preferredUsername`).
    async fn start_as(name: &str) -> Remote {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let base = format!("http://{}", listener.local_addr().expect("addr"));
        let key = keys::generate().expect("key");
        let received = Arc::new(Mutex::new(Vec::new()));
        let actor = json!({
            "@context": ["https://www.w3.org/ns/activitystreams", "https://w3id.org/security/v1"],
            "id": format!("{base}/users/remote"), "type": "Person", "preferredUsername": name,
            "url": format!("{base}/@{name}"),
            "inbox": format!("{base}/users/remote/inbox"),
            "publicKey": {"id": format!("{base}/users/remote#main-key"), "owner": format!("{base}/users/remote"),
                          "publicKeyPem": key.public_pem},
        });
        let router = axum::Router::new()
            .route("/users/remote", get(move || std::future::ready(axum::Json(actor.clone()))))
            .route(
                "/users/remote/inbox",
                post(|State(got): State<Received>, headers: HeaderMap, body: axum::body::Bytes| async move {
                    got.lock().expect("lock").push((headers, body.to_vec()));
                    axum::http::StatusCode::ACCEPTED
                }),
            )
            .with_state(received.clone());
        tokio::spawn(async move { axum::serve(listener, router).await });
        Remote { base, key, received }
    }

    fn actor(&self) -> String {
        format!("{}/users/remote", self.base)
    }

    /// Posts `body` to `path` of `app`, signed by this actor's key (or
    /// `with` instead), with `tweak` applied to the signed headers.
    async fn post<S: Store>(
        &self,
        app: &TestApp<S>,
        path: &str,
        body: &[u8],
        with: Option<&ActorKey>,
        tweak: impl FnOnce(&mut Vec<(&'static str, String)>),
    ) -> Reply {
        let host = app.addr.trim_start_matches("http://");
        let key = with.unwrap_or(&self.key);
        let key_id = format!("{}#main-key", self.actor());
        let mut headers =
            signature::sign_request(&key_id, &key.private_pem, "POST", host, path, Some(body)).expect("sign");
        tweak(&mut headers);
        let mut req = app.req(Method::POST, path).header("content-type", AP).body(body.to_vec());
        for (name, value) in headers {
            req = req.header(name, value);
        }
        fetch(req).await
    }

    async fn wait_for(&self, n: usize) -> Vec<(HeaderMap, Vec<u8>)> {
        for _ in 0..200 {
            let got = self.received.lock().expect("lock").clone();
            if got.len() >= n {
                return got;
            }
            tokio::time::sleep(std::time::Duration::from_millis(25)).await;
        }
        panic!("the remote inbox did not get {n} deliveries");
    }
}

async fn get_ap<S: Store>(app: &TestApp<S>, path: &str) -> Reply {
    fetch(app.req(Method::GET, path).header("accept", AP)).await
}

async fn discovery_and_documents<S: Store>(app: TestApp<S>) {
    app.community("rust").await;
    app.community("clash").await;
    let ferris = app.user("ferris").await;
    app.user("clash").await;
    let base = app.addr.clone();
    let host = base.trim_start_matches("http://");

    let wf = fetch(app.req(Method::GET, &format!("/.well-known/webfinger?resource=acct:rust@{host}"))).await;
    assert_eq!(wf.status, 200, "{:?}", wf.json());
    assert_eq!(wf.header("content-type"), Some("application/jrd+json"));
    let links = wf.json()["links"].clone();
    assert_eq!(links[1]["href"], format!("{base}/ap/c/rust"));
    assert_eq!(links[1]["properties"]["https://www.w3.org/ns/activitystreams#type"], "Group");
    assert_eq!(links[0]["href"], format!("{base}/c/rust"));

    // A name both a user's and a community's: both, the Group last; `!`
    // and `@` pick one; the actor's id names it too.
    let kinds = |r: &Reply| -> Vec<String> {
        r.json()["links"]
            .as_array()
            .expect("links")
            .iter()
            .filter(|l| l["rel"] == "self")
            .map(|l| l["properties"]["https://www.w3.org/ns/activitystreams#type"].as_str().expect("type").to_owned())
            .collect()
    };
    let both = fetch(app.req(Method::GET, &format!("/.well-known/webfinger?resource=acct:clash@{host}"))).await;
    assert_eq!(kinds(&both), ["Person", "Group"]);
    let group = fetch(app.req(Method::GET, &format!("/.well-known/webfinger?resource=acct:!clash@{host}"))).await;
    assert_eq!(kinds(&group), ["Group"]);
    let person = fetch(app.req(Method::GET, &format!("/.well-known/webfinger?resource=acct:@clash@{host}"))).await;
    assert_eq!(kinds(&person), ["Person"]);
    let by_id = fetch(app.req(Method::GET, &format!("/.well-known/webfinger?resource={base}/ap/c/clash"))).await;
    assert_eq!(kinds(&by_id), ["Group"]);
    for (query, status) in [
        ("resource=acct:rust@elsewhere.example", 404),
        ("resource=acct:nobody@HOST", 404),
        ("", 400),
        ("resource=rust", 400),
    ] {
        let r = fetch(app.req(Method::GET, &format!("/.well-known/webfinger?{}", query.replace("HOST", host)))).await;
        assert_eq!(r.status, status, "{query}: {:?}", r.json());
    }

    let links = fetch(app.req(Method::GET, "/.well-known/nodeinfo")).await.json();
    assert_eq!(links["links"][0]["href"], format!("{base}/nodeinfo/2.1"));
    let info = fetch(app.req(Method::GET, "/nodeinfo/2.1")).await.json();
    assert_eq!((info["version"].as_str(), info["software"]["name"].as_str()), (Some("2.1"), Some("pith")));
    assert_eq!(info["protocols"], json!(["activitypub"]));

    let g = get_ap(&app, "/ap/c/rust").await;
    assert_eq!((g.status, g.header("content-type"), g.header("vary")), (200, Some(AP), Some("Accept")));
    let g = g.json();
    let id = format!("{base}/ap/c/rust");
    assert_eq!(g["type"], "Group");
    assert_eq!(g["id"], id);
    assert_eq!(g["preferredUsername"], "rust");
    assert_eq!(g["name"], "The rust");
    for (field, want) in
        [("inbox", "/inbox"), ("outbox", "/outbox"), ("followers", "/followers"), ("attributedTo", "/moderators")]
    {
        assert_eq!(g[field], format!("{id}{want}"), "{field}");
    }
    assert_eq!(g["endpoints"]["sharedInbox"], format!("{base}/ap/inbox"));
    assert_eq!(g["publicKey"]["id"], format!("{id}#main-key"));
    assert_eq!(g["publicKey"]["owner"], id);
    let pem = g["publicKey"]["publicKeyPem"].as_str().expect("pem").to_owned();
    keys::public_der(&pem).expect("an RSA public key");
    // The key is made once and kept.
    assert_eq!(get_ap(&app, "/ap/c/rust").await.json()["publicKey"]["publicKeyPem"], pem);
    let mods = get_ap(&app, "/ap/c/rust/moderators").await.json();
    assert_eq!(mods["orderedItems"], json!([format!("{base}/ap/u/admin")]));

    // A browser asking the id is sent to the page.
    let no_redirects = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().expect("client");
    let page = fetch(no_redirects.get(app.url("/ap/c/rust")).header("accept", "text/html,application/xhtml+xml")).await;
    assert_eq!((page.status, page.header("location"), page.header("vary")), (303, Some("/c/rust"), Some("Accept")));
    let ld = fetch(
        app.req(Method::GET, "/ap/c/rust")
            .header("accept", "application/ld+json; profile=\"https://www.w3.org/ns/activitystreams\""),
    )
    .await;
    assert_eq!(ld.json()["type"], "Group");

    let p = get_ap(&app, "/ap/u/ferris").await.json();
    assert_eq!((p["type"].as_str(), p["preferredUsername"].as_str()), (Some("Person"), Some("ferris")));
    assert_eq!(p["inbox"], format!("{base}/ap/u/ferris/inbox"));
    assert_ne!(p["publicKey"]["publicKeyPem"], pem, "each actor has its own key");
    assert_eq!(get_ap(&app, "/ap/c/nope").await.status, 404);
    assert_eq!(get_ap(&app, "/ap/u/nope").await.status, 404);

    let topic = app.topic("rust", &ferris, "Borrowing").await;
    let post = app.reply(topic, &ferris, None, "a *reply*").await;
    let reply = app.reply(topic, &ferris, Some(post), "deeper").await;
    let t = get_ap(&app, &format!("/ap/t/{topic}")).await.json();
    assert_eq!((t["type"].as_str(), t["name"].as_str()), (Some("Page"), Some("Borrowing")));
    assert_eq!(t["audience"], id);
    assert_eq!(t["attributedTo"], format!("{base}/ap/u/ferris"));
    let n = get_ap(&app, &format!("/ap/t/{topic}/p/{post}")).await.json();
    assert_eq!(n["type"], "Note");
    assert_eq!(n["inReplyTo"], format!("{base}/ap/t/{topic}"));
    assert_eq!(n["content"], "<p>a <em>reply</em></p>\n");
    let deeper = get_ap(&app, &format!("/ap/t/{topic}/p/{reply}")).await.json();
    assert_eq!(deeper["inReplyTo"], format!("{base}/ap/t/{topic}/p/{post}"));
    let outbox = get_ap(&app, "/ap/c/rust/outbox").await.json();
    // Each entry as Lemmy reads an outbox: the Group's Announce of the
    // author's Create, both addressed (Lemmy parses none without `cc`).
    let item = &outbox["orderedItems"][0];
    assert_eq!((item["type"].as_str(), item["actor"].as_str()), (Some("Announce"), Some(id.as_str())));
    assert_eq!(item["cc"], json!([format!("{id}/followers")]));
    assert_eq!(item["object"]["type"], "Create");
    assert_eq!(item["object"]["actor"], format!("{base}/ap/u/ferris"));
    assert_eq!(item["object"]["cc"], json!([id]));
    assert_eq!(item["object"]["object"]["id"], format!("{base}/ap/t/{topic}"));
    assert_eq!(item["object"]["object"]["@context"], Value::Null);
    let site = get_ap(&app, "/ap/site").await.json();
    assert_eq!(site["type"], "Application");
}

#[tokio::test]
async fn webfinger_nodeinfo_and_actor_documents_on_sqlite() {
    discovery_and_documents(spawn_federated_app().await).await;
}

#[tokio::test]
async fn webfinger_nodeinfo_and_actor_documents_on_postgres() {
    let db = TestDb::create().await;
    discovery_and_documents(spawn_federated_pg_app(&db).await).await;
}

fn follow(remote: &Remote, object: &str) -> Value {
    json!({"@context": "https://www.w3.org/ns/activitystreams", "id": format!("{}/follows/1", remote.base),
           "type": "Follow", "actor": remote.actor(), "object": object})
}

async fn followers<S: Store>(app: &TestApp<S>) -> i64 {
    get_ap(app, "/ap/c/rust/followers").await.json()["totalItems"].as_i64().expect("count")
}

async fn inbox_checks_and_follows<S: Store>(app: TestApp<S>) {
    app.community("rust").await;
    let remote = Remote::start().await;
    let group = format!("{}/ap/c/rust", app.addr);
    let body = serde_json::to_vec(&follow(&remote, &group)).expect("json");
    let path = "/ap/c/rust/inbox";
    let code = |r: &Reply| (r.status, r.json()["error"]["code"].as_str().unwrap_or("").to_owned());

    let unsigned = fetch(app.req(Method::POST, path).header("content-type", AP).body(body.clone())).await;
    assert_eq!(code(&unsigned), (401, "bad_signature".into()));
    let stranger = keys::generate().expect("key");
    let wrong_key = remote.post(&app, path, &body, Some(&stranger), |_| {}).await;
    assert_eq!(code(&wrong_key), (401, "bad_signature".into()));
    let stale = remote
        .post(&app, path, &body, None, |h| {
            let old = httpdate::fmt_http_date(std::time::SystemTime::now() - std::time::Duration::from_secs(7200));
            h.iter_mut().filter(|(n, _)| *n == "date").for_each(|(_, v)| *v = old.clone());
        })
        .await;
    assert_eq!(code(&stale), (401, "bad_signature".into()));
    let digest = remote
        .post(&app, path, &body, None, |h| {
            h.iter_mut().filter(|(n, _)| *n == "digest").for_each(|(_, v)| *v = signature::digest(b"other"));
        })
        .await;
    assert_eq!(code(&digest), (401, "bad_signature".into()));
    let huge = vec![b' '; 300 << 10];
    let too_large = remote.post(&app, path, &huge, None, |_| {}).await;
    assert_eq!(code(&too_large), (413, "payload_too_large".into()));
    let not_json = remote.post(&app, path, b"{not json", None, |_| {}).await;
    assert_eq!(code(&not_json), (400, "bad_activity".into()));
    let mut impostor = follow(&remote, &group);
    impostor["actor"] = json!("http://127.0.0.1:1/users/someone-else");
    let impostor = remote.post(&app, path, &serde_json::to_vec(&impostor).expect("json"), None, |_| {}).await;
    assert_eq!(code(&impostor), (401, "actor_mismatch".into()));
    let elsewhere = serde_json::to_vec(&follow(&remote, &format!("{}/ap/c/nope", app.addr))).expect("json");
    assert_eq!(remote.post(&app, "/ap/inbox", &elsewhere, None, |_| {}).await.status, 404);
    assert_eq!(followers(&app).await, 0);
    assert!(remote.received.lock().expect("lock").is_empty());

    // A real Follow: 202, stored, and a signed Accept delivered.
    let ok = remote.post(&app, path, &body, None, |_| {}).await;
    assert_eq!(ok.status, 202, "{:?}", ok.json());
    assert_eq!(followers(&app).await, 1);
    let got = remote.wait_for(1).await;
    let (headers, accept_body) = &got[0];
    let accept: Value = serde_json::from_slice(accept_body).expect("json");
    assert_eq!(accept["type"], "Accept");
    assert_eq!(accept["actor"], group);
    assert_eq!(accept["object"]["id"], format!("{}/follows/1", remote.base));
    assert_eq!(accept["object"]["type"], "Follow");
    // Its signature is the Group's, over the delivery as sent.
    let header = |n: &str| headers.get(n).and_then(|v| v.to_str().ok()).map(str::to_owned);
    let sig = signature::parse(&header("signature").expect("signed")).expect("parses");
    assert_eq!(sig.key_id, format!("{group}#main-key"));
    let now = time::OffsetDateTime::now_utc().unix_timestamp();
    signature::check(&sig, header("date").as_deref(), header("digest").as_deref(), Some(accept_body.as_slice()), now)
        .expect("checks");
    let text = signature::signing_string(&sig.headers, "POST", "/users/remote/inbox", header).expect("string");
    let pem = get_ap(&app, "/ap/c/rust").await.json()["publicKey"]["publicKeyPem"].as_str().expect("pem").to_owned();
    assert!(keys::verify(&pem, text.as_bytes(), &sig.signature), "the Accept verifies with the Group's key");

    // Following again keeps one follower; the shared inbox takes it too.
    assert_eq!(remote.post(&app, "/ap/inbox", &body, None, |_| {}).await.status, 202);
    assert_eq!(followers(&app).await, 1);

    // A local topic, reply, edit and deletion reach the follower, each
    // announced by the Group.
    let ferris = app.user("ferris").await;
    // (Each waits for the one before: an activity is built from what is
    // stored when it is queued, and a deleted post's edit says nothing.)
    let topic = app.topic("rust", &ferris, "Lifetimes").await;
    remote.wait_for(3).await;
    let post = app.reply(topic, &ferris, None, "first").await;
    remote.wait_for(4).await;
    let (status, _) = app.patch(&format!("/api/v1/posts/{post}"), Some(&ferris), json!({"body": "edited"})).await;
    assert_eq!(status, 200);
    remote.wait_for(5).await;
    let (status, _) = app.delete(&format!("/api/v1/posts/{post}"), Some(&ferris)).await;
    assert_eq!(status, 204);
    // The first two are the Accepts of the two Follows.
    let got = remote.wait_for(6).await;
    let mut seen: Vec<(String, String)> = got[2..]
        .iter()
        .map(|(_, body)| {
            let a: Value = serde_json::from_slice(body).expect("json");
            assert_eq!((a["type"].as_str(), a["actor"].as_str()), (Some("Announce"), Some(group.as_str())));
            (
                a["object"]["type"].as_str().unwrap_or("").to_owned(),
                a["object"]["object"]["type"].as_str().unwrap_or("").to_owned(),
            )
        })
        .collect();
    seen.sort();
    // The deletion is its author's `Delete` of the Note's id (as Lemmy
    // takes it), not the Group's.
    let want = [("Create", "Note"), ("Create", "Page"), ("Delete", ""), ("Update", "Note")];
    assert_eq!(seen, want.map(|(a, b)| (a.to_owned(), b.to_owned())));
    let delete = got[2..]
        .iter()
        .map(|(_, body)| serde_json::from_slice::<Value>(body).expect("json"))
        .find(|a| a["object"]["type"] == "Delete")
        .expect("the deletion");
    assert_eq!(delete["object"]["actor"], format!("{}/ap/u/ferris", app.addr));
    assert_eq!(delete["object"]["object"], format!("{}/ap/t/{topic}/p/{post}", app.addr));
    assert!(delete["object"].get("summary").is_none(), "a deletion has no summary: {delete}");
    let create_page = got[2..]
        .iter()
        .map(|(_, body)| serde_json::from_slice::<Value>(body).expect("json"))
        .find(|a| a["object"]["object"]["type"] == "Page")
        .expect("the topic");
    assert_eq!(create_page["object"]["actor"], format!("{}/ap/u/ferris", app.addr));
    assert_eq!(create_page["object"]["object"]["name"], "Lifetimes");

    // A vote on something not ours (the Group itself) is taken and dropped.
    let like =
        json!({"id": format!("{}/likes/1", remote.base), "type": "Like", "actor": remote.actor(), "object": group});
    assert_eq!(remote.post(&app, path, &serde_json::to_vec(&like).expect("json"), None, |_| {}).await.status, 202);

    let undo = json!({"id": format!("{}/follows/1/undo", remote.base), "type": "Undo", "actor": remote.actor(),
                      "object": follow(&remote, &group)});
    assert_eq!(remote.post(&app, path, &serde_json::to_vec(&undo).expect("json"), None, |_| {}).await.status, 202);
    assert_eq!(followers(&app).await, 0);
}

#[tokio::test]
async fn the_inbox_refuses_bad_signatures_and_accepts_a_follow_on_sqlite() {
    inbox_checks_and_follows(spawn_federated_app().await).await;
}

#[tokio::test]
async fn the_inbox_refuses_bad_signatures_and_accepts_a_follow_on_postgres() {
    let db = TestDb::create().await;
    inbox_checks_and_follows(spawn_federated_pg_app(&db).await).await;
}

fn delivery(inbox: &str) -> NewDelivery {
    NewDelivery {
        inbox: inbox.to_owned(),
        body: "{}".into(),
        signer: ActorKind::Community,
        signer_id: 1,
        key_id: "https://here.example/ap/c/rust#main-key".into(),
    }
}

/// The queue as the sender uses it: claims are bounded and leased, a
/// retry counts and waits, a delivery done or given up goes.
async fn queue_story(store: &impl Store) {
    let now = Timestamp(1_000_000);
    let inboxes = ["https://a.example/inbox", "https://b.example/inbox", "https://c.example/inbox"];
    store.queue_deliveries(inboxes.iter().map(|i| delivery(i)).collect(), now).await.expect("queue");
    assert_eq!(store.queued_deliveries().await.expect("count"), 3);
    let first = store.claim_deliveries(now, 120, 2).await.expect("claim");
    assert_eq!(first.iter().map(|d| d.delivery.inbox.as_str()).collect::<Vec<_>>(), &inboxes[..2]);
    assert_eq!((first[0].attempts, first[0].created_at), (0, now.0));
    assert_eq!(first[0].delivery, delivery(inboxes[0]));
    let rest = store.claim_deliveries(now, 120, 10).await.expect("claim");
    assert_eq!(rest.len(), 1, "the leased ones are not taken twice");
    assert!(store.claim_deliveries(now, 120, 10).await.expect("claim").is_empty());

    store.finish_delivery(first[0].id, Delivery::Sent).await.expect("sent");
    store
        .finish_delivery(first[1].id, Delivery::Retry { at: Timestamp(now.0 + 60), error: "down".into() })
        .await
        .expect("retry");
    store.finish_delivery(rest[0].id, Delivery::Failed { error: "gone".into() }).await.expect("failed");
    assert_eq!(store.queued_deliveries().await.expect("count"), 1);
    assert!(store.claim_deliveries(Timestamp(now.0 + 59), 120, 10).await.expect("claim").is_empty());
    let again = store.claim_deliveries(Timestamp(now.0 + 60), 120, 10).await.expect("claim");
    assert_eq!((again.len(), again[0].attempts), (1, 1));
    // A sender that died holding it: taken again once its lease is over.
    assert_eq!(store.claim_deliveries(Timestamp(now.0 + 181), 120, 10).await.expect("claim").len(), 1);
}

#[tokio::test]
async fn the_delivery_queue_leases_retries_and_survives_a_restart_on_sqlite() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("pith.db");
    let opts = SqliteOptions { readers: 1, ..SqliteOptions::default() };
    let store = SqliteStore::open(&path, &opts).expect("open");
    queue_story(&store).await;
    store.shutdown().await;
    drop(store);
    let store = SqliteStore::open(&path, &opts).expect("reopen");
    assert_eq!(store.queued_deliveries().await.expect("count"), 1, "the queue is on disk");
    store.shutdown().await;
}

#[tokio::test]
async fn the_delivery_queue_leases_retries_and_survives_a_restart_on_postgres() {
    let db = TestDb::create().await;
    let store = db.store().await;
    queue_story(&store).await;
    store.shutdown().await;
    drop(store);
    let store = db.store().await;
    assert_eq!(store.queued_deliveries().await.expect("count"), 1, "the queue is in the database");
    store.shutdown().await;
}

#[tokio::test]
async fn an_accept_to_an_inbox_that_is_down_stays_queued_for_a_retry() {
    let app = spawn_federated_app().await;
    app.community("rust").await;
    let remote = Remote::start().await;
    // Its actor is fetched and stored, then its server's inbox goes away.
    let group = format!("{}/ap/c/rust", app.addr);
    let body = serde_json::to_vec(&follow(&remote, &group)).expect("json");
    let mut actor = pith::app::federation::actors::parse_actor(
        &reqwest::get(remote.actor()).await.expect("get").json().await.expect("json"),
        &remote.actor(),
    )
    .expect("actor");
    actor.inbox = format!("http://127.0.0.1:{}/inbox", crate::support::child::free_port());
    app.state.store.put_remote_actor(actor).await.expect("store");
    assert_eq!(remote.post(&app, "/ap/c/rust/inbox", &body, None, |_| {}).await.status, 202);
    for _ in 0..200 {
        let row = pith_deliveries(&app).await;
        if row.1 > 0 {
            assert_eq!(row.0, 1, "one delivery, kept for its retry");
            assert!(row.2 > Timestamp::now().0 + 30, "retried in about a minute");
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }
    panic!("the delivery was never tried");
}

/// A server that takes connections and never answers a byte, as a host
/// whose service hangs does: each delivery to it waits for the client's
/// whole time limit. Its base URL, and how many connections it took.
async fn silent_server() -> (String, Arc<std::sync::atomic::AtomicUsize>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let base = format!("http://{}", listener.local_addr().expect("addr"));
    let taken = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let count = taken.clone();
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((socket, _)) = listener.accept().await {
            count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            held.push(socket);
        }
    });
    (base, taken)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_never_answers_does_not_hold_up_deliveries_to_the_others() {
    use pith::app::federation::queue::{HELD, PER_HOST, enqueue};
    let app = spawn_federated_app().await;
    app.community("rust").await;
    let live = Remote::start().await;
    let (silent, taken) = silent_server().await;
    // More for the silent server than the sender holds at once, queued
    // first, then a few for a server that answers.
    let mut queued: Vec<NewDelivery> = (0..HELD + 44).map(|i| delivery(&format!("{silent}/inbox/{i}"))).collect();
    queued.extend((0..20).map(|_| delivery(&format!("{}/users/remote/inbox", live.base))));
    let fed = app.state.federation.get().expect("federation on").clone();
    let (started, queued_at) = (std::time::Instant::now(), Timestamp::now());
    enqueue(&app.state, &fed, queued).await.expect("queue");
    // Once the silent server's first deliveries time out (10 s), its
    // others are put back without being tried, and the sender gets to the
    // answering server; before, they held every place until their leases
    // were nearly over (~100 s) and were then claimed again first.
    while live.received.lock().expect("lock").len() < 20 {
        assert!(started.elapsed() < std::time::Duration::from_secs(45), "the answering server still waits");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let tried = taken.load(std::sync::atomic::Ordering::SeqCst);
    assert!((1..=PER_HOST).contains(&tried), "one round of {PER_HOST} tried the silent server, not {tried}");
    // Every delivery to it is still queued, for after its pause.
    let conn = rusqlite::Connection::open(app.db_path()).expect("open");
    let (rows, soonest): (i64, i64) = conn
        .query_row(
            "SELECT count(*), min(next_at) FROM ap_deliveries WHERE inbox LIKE ?1",
            [format!("{silent}/%")],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .expect("read");
    assert_eq!(rows, (HELD + 44) as i64, "none dropped");
    // Its first round failed 10 s (the time limit) after they were queued
    // at the earliest, and its pause is 30 s from then.
    assert!(soonest >= queued_at.0 + 10 + 30 - 1, "none due before its pause is over: {soonest} ({})", queued_at.0);
    app.stop().await;
}

/// (rows, attempts of the first, its next_at), read from the file.
async fn pith_deliveries(app: &TestApp) -> (i64, i64, i64) {
    let conn = rusqlite::Connection::open(app.db_path()).expect("open");
    conn.query_row(
        "SELECT count(*), coalesce(max(attempts), 0), coalesce(max(next_at), 0) FROM ap_deliveries",
        [],
        |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
    )
    .expect("read")
}

const PUBLIC: &str = "https://www.w3.org/ns/activitystreams#Public";

/// Sends `activity` signed by `remote` to `path`.
async fn deliver<S: Store>(remote: &Remote, app: &TestApp<S>, path: &str, activity: &Value) -> Reply {
    remote.post(app, path, &serde_json::to_vec(activity).expect("json"), None, |_| {}).await
}

/// `kind` of `object` by the remote actor, addressed to the Group.
fn activity(remote: &Remote, group: &str, kind: &str, n: u32, object: Value) -> Value {
    json!({"@context": "https://www.w3.org/ns/activitystreams",
           "id": format!("{}/activities/{}/{n}", remote.base, kind.to_ascii_lowercase()), "type": kind,
           "actor": remote.actor(), "to": [PUBLIC], "cc": [group], "audience": group, "object": object})
}

/// The remote object `id` became this topic or post.
async fn local<S: Store>(app: &TestApp<S>, id: &str) -> pith::model::VoteTarget {
    app.state.store.remote_object(id.to_owned()).await.expect("read").expect("mapped").target
}

/// The Announces `remote` got after its first `skip` deliveries, as
/// (inner type, inner actor, inner object's id or the object).
fn announced(got: &[(HeaderMap, Vec<u8>)], skip: usize) -> Vec<(String, String, String)> {
    got[skip..]
        .iter()
        .map(|(_, body)| {
            let a: Value = serde_json::from_slice(body).expect("json");
            assert_eq!(a["type"], "Announce", "{a}");
            let inner = &a["object"];
            let object = inner["object"]["id"].as_str().or(inner["object"].as_str()).unwrap_or("").to_owned();
            (inner["type"].as_str().unwrap_or("").to_owned(), inner["actor"].as_str().unwrap_or("").to_owned(), object)
        })
        .collect()
}

/// A remote user posts into a local community (FEP-1b12): a Page, a Note
/// replying to it and one replying to a local topic, an Update by the
/// author and one refused from another server, votes and their Undo,
/// a Delete; each taken announced to the other follower, not back to its
/// origin; a local vote sent out; a moderator's removal sent as the
/// Group's Delete; a banned remote user refused.
async fn remote_content<S: Store>(app: TestApp<S>) {
    app.community("rust").await;
    let remote = Remote::start().await;
    let other = Remote::start_as("other").await;
    let group = format!("{}/ap/c/rust", app.addr);
    let inbox = "/ap/c/rust/inbox";
    for r in [&remote, &other] {
        assert_eq!(deliver(r, &app, inbox, &follow(r, &group)).await.status, 202);
        r.wait_for(1).await;
    }
    let host = remote.base.trim_start_matches("http://").to_owned();
    let name = format!("remote@{host}");
    let ferris = app.user("ferris").await;
    let local_topic = app.topic("rust", &ferris, "Local things").await;

    // A Page with its Markdown source: a topic by `remote@HOST`, rendered
    // by Pith from the source.
    let page_id = format!("{}/post/1", remote.base);
    let page = json!({"id": page_id, "type": "Page", "attributedTo": remote.actor(), "to": [group, PUBLIC],
                      "audience": group, "name": "From afar", "content": "<p>ignored <b>HTML</b></p>",
                      "mediaType": "text/html",
                      "source": {"content": "Hello from *afar* <script>x()</script>", "mediaType": "text/markdown"}});
    let create = activity(&remote, &group, "Create", 1, page.clone());
    let r = deliver(&remote, &app, inbox, &create).await;
    assert_eq!(r.status, 202, "{:?}", r.json());
    let pith::model::VoteTarget::Topic(topic) = local(&app, &page_id).await else { panic!("a topic") };
    let (status, t) = app.get(&format!("/api/v1/topics/{topic}")).await;
    assert_eq!(status, 200);
    assert_eq!((t["topic"]["author"].as_str(), t["topic"]["title"].as_str()), (Some(name.as_str()), Some("From afar")));
    assert_eq!(t["topic"]["body"], "Hello from *afar* <script>x()</script>");
    let html = t["topic"]["body_html"].as_str().expect("html");
    assert!(html.contains("<em>afar</em>") && !html.contains("<script"), "{html}");
    // Shown with its home instance: in the API and on its page.
    let (status, profile) = app.get(&format!("/api/v1/users/{name}")).await;
    assert_eq!((status, profile["home"].as_str()), (200, Some(format!("{}/@remote", remote.base).as_str())));
    let page_html = fetch(app.req(Method::GET, &format!("/u/{name}"))).await;
    assert!(String::from_utf8_lossy(&page_html.bytes).contains(&format!("{}/@remote", remote.base)));
    // Our id of its topic sends the asker to the Page at home, as Lemmy does.
    let no_redirects = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().expect("client");
    let ours = fetch(no_redirects.get(app.url(&format!("/ap/t/{topic}"))).header("accept", AP)).await;
    assert_eq!((ours.status, ours.header("location")), (308, Some(page_id.as_str())));
    // It is no actor of ours, and it cannot log in.
    assert_eq!(get_ap(&app, &format!("/ap/u/{name}")).await.status, 404);
    let login = app.post("/api/v1/auth/login", None, json!({"username": name, "password": "password123"})).await;
    assert_eq!(login.0, 401, "{}", login.1);
    let wf = fetch(app.req(
        Method::GET,
        &format!("/.well-known/webfinger?resource=acct:{name}@{}", app.addr.trim_start_matches("http://")),
    ))
    .await;
    assert_eq!(wf.status, 404);
    // Nor can it be made a moderator (it could never act as one).
    let seat = format!("/api/v1/communities/rust/moderators/{name}");
    let (status, body) = app.send(Method::PUT, &seat, Some(&app.admin_token), None).await;
    assert_eq!((status, body["error"]["code"].as_str()), (422, Some("remote_user")), "{body}");

    // The same Create again changes nothing.
    assert_eq!(deliver(&remote, &app, "/ap/inbox", &create).await.status, 202);
    assert_eq!(app.state.store.community("rust".into()).await.expect("community").topic_count, 2);

    // A Note replying to the Page, with HTML only (no source), through
    // the shared inbox; and one replying to a local topic.
    let note_id = format!("{}/comment/1", remote.base);
    let note = json!({"id": note_id, "type": "Note", "attributedTo": remote.actor(), "inReplyTo": page_id,
                      "to": [PUBLIC], "cc": [group],
                      "content": "<p>A <b>reply</b> &amp; <script>alert(1)</script>more *text*</p>"});
    // The topic was read (and cached) before: the reply goes into the
    // cached rendering in place, byte for byte as a render puts it.
    let rendering = format!("/api/v1/topics/{topic}?sort=best&html=true");
    assert_eq!(fetch(app.req(Method::GET, &rendering)).await.status, 200);
    assert_eq!(deliver(&remote, &app, "/ap/inbox", &activity(&remote, &group, "Create", 2, note)).await.status, 202);
    let cached = fetch(app.req(Method::GET, &rendering)).await.bytes;
    app.state.cache.clear();
    let rendered = fetch(app.req(Method::GET, &rendering)).await.bytes;
    assert_eq!(String::from_utf8_lossy(&cached), String::from_utf8_lossy(&rendered));
    let pith::model::VoteTarget::Post(reply) = local(&app, &note_id).await else { panic!("a post") };
    let t = app.read_topic(topic, "old").await;
    assert_eq!(t["posts"][0]["id"], reply);
    assert_eq!(t["posts"][0]["author"], name.as_str());
    assert_eq!(t["posts"][0]["body"], "A reply & more \\*text\\*");
    let local_note = json!({"id": format!("{}/comment/2", remote.base), "type": "Note",
                            "attributedTo": remote.actor(), "inReplyTo": format!("{}/ap/t/{local_topic}", app.addr),
                            "content": "<p>nice</p>"});
    assert_eq!(deliver(&remote, &app, inbox, &activity(&remote, &group, "Create", 3, local_note)).await.status, 202);
    assert_eq!(app.read_topic(local_topic, "old").await["posts"][0]["body"], "nice");
    // The topic's page shows the remote author like any other.
    let shown = fetch(app.req(Method::GET, &format!("/t/{topic}"))).await;
    assert_eq!(shown.status, 200);
    assert!(String::from_utf8_lossy(&shown.bytes).contains(&format!("/u/{name}")));
    // A locked topic takes no remote reply either.
    let lock = app.post(&format!("/api/v1/topics/{local_topic}/lock"), Some(&app.admin_token), json!({})).await;
    assert_eq!(lock.0, 204, "{}", lock.1);
    let late = json!({"id": format!("{}/comment/3", remote.base), "type": "Note", "attributedTo": remote.actor(),
                      "inReplyTo": format!("{}/ap/t/{local_topic}", app.addr), "content": "<p>late</p>"});
    let refused = deliver(&remote, &app, inbox, &activity(&remote, &group, "Create", 5, late)).await;
    assert_eq!((refused.status, refused.json()["error"]["code"].as_str()), (403, Some("topic_locked")));

    // An Update by its author replaces the body and the title; one from
    // another server (claiming the Page as its own) is refused and changes
    // nothing.
    let mut edited = page.clone();
    edited["source"]["content"] = json!("Edited from afar");
    edited["name"] = json!("Retitled from afar");
    assert_eq!(
        deliver(&remote, &app, inbox, &activity(&remote, &group, "Update", 1, edited.clone())).await.status,
        202
    );
    let mut stolen = edited.clone();
    stolen["attributedTo"] = json!(other.actor());
    stolen["source"]["content"] = json!("Defaced");
    let refused = deliver(&other, &app, inbox, &activity(&other, &group, "Update", 1, stolen)).await;
    assert_eq!((refused.status, refused.json()["error"]["code"].as_str()), (403, Some("not_author")));
    let t = app.read_topic(topic, "old").await;
    assert_eq!(
        (t["topic"]["body"].as_str(), t["topic"]["title"].as_str()),
        (Some("Edited from afar"), Some("Retitled from afar"))
    );
    // And a search finds it by its new title.
    let (_, found) = app.get("/api/v1/search?q=retitled").await;
    assert_eq!(found["hits"][0]["topic"]["id"], topic, "{found}");

    // Votes: a Like of a local topic, a Dislike of the Page and its Undo.
    let like = activity(&remote, &group, "Like", 1, json!(format!("{}/ap/t/{local_topic}", app.addr)));
    assert_eq!(deliver(&remote, &app, inbox, &like).await.status, 202);
    assert_eq!(app.read_topic(local_topic, "old").await["topic"]["score"], 1);
    let dislike = activity(&remote, &group, "Dislike", 1, json!(page_id));
    assert_eq!(deliver(&remote, &app, inbox, &dislike).await.status, 202);
    assert_eq!(app.read_topic(topic, "old").await["topic"]["score"], -1);
    let undo = activity(&remote, &group, "Undo", 9, dislike.clone());
    assert_eq!(deliver(&remote, &app, inbox, &undo).await.status, 202);
    assert_eq!(app.read_topic(topic, "old").await["topic"]["score"], 0);
    // A vote on something that is not ours: 202, and dropped.
    let elsewhere = activity(&remote, &group, "Like", 2, json!("https://elsewhere.example/post/9"));
    assert_eq!(deliver(&remote, &app, inbox, &elsewhere).await.status, 202);

    // The author deletes its Note (as a Tombstone).
    let tombstone = json!({"id": note_id, "type": "Tombstone"});
    assert_eq!(deliver(&remote, &app, inbox, &activity(&remote, &group, "Delete", 1, tombstone)).await.status, 202);
    assert_eq!(app.read_topic(topic, "old").await["posts"][0]["deleted"], true);

    // Each activity taken reached the other follower in the Group's
    // Announce, with the remote user as its actor; none went back to the
    // server it came from.
    let mut want: Vec<(String, String, String)> = [
        ("Create", page_id.as_str()),
        ("Create", note_id.as_str()),
        ("Create", &format!("{}/comment/2", remote.base)),
        ("Update", page_id.as_str()),
        ("Like", &format!("{}/ap/t/{local_topic}", app.addr)),
        ("Dislike", page_id.as_str()),
        ("Undo", ""),
        ("Delete", note_id.as_str()),
    ]
    .iter()
    .map(|(kind, object)| (kind.to_string(), remote.actor(), object.to_string()))
    .collect();
    // (the Accept, the local topic's Create and its lock's Update, and these, in whatever order
    // the queue's concurrent deliveries arrive)
    let mut got = announced(&other.wait_for(3 + want.len()).await, 1);
    got.retain(|(_, actor, _)| *actor == remote.actor());
    got.iter_mut().filter(|g| g.0 == "Undo").for_each(|g| g.2.clear());
    got.sort();
    want.sort();
    assert_eq!(got, want);
    let back = announced(&remote.received.lock().expect("lock").clone(), 1);
    assert!(back.iter().all(|(_, actor, _)| *actor != remote.actor()), "{back:?}");

    // A local vote on the remote Page goes out as ferris's Like of it.
    app.vote("topics", topic, &ferris, 1).await;
    let ferris_id = format!("{}/ap/u/ferris", app.addr);
    let seen = other.wait_for(3 + want.len() + 1).await;
    let last = announced(&seen, seen.len() - 1);
    assert_eq!(last, [("Like".to_owned(), ferris_id.clone(), page_id.clone())]);
    app.vote("topics", topic, &ferris, 0).await;
    let seen = other.wait_for(3 + want.len() + 2).await;
    let undo: Value = serde_json::from_slice(&seen[seen.len() - 1].1).expect("json");
    assert_eq!(
        (undo["object"]["type"].as_str(), undo["object"]["object"]["type"].as_str()),
        (Some("Undo"), Some("Like"))
    );

    // A remote user moderates nothing here: its Lock of its own topic is
    // refused by the same rule as a local member's, and the topic stays
    // unlocked.
    let lock = deliver(&remote, &app, inbox, &activity(&remote, &group, "Lock", 1, json!(page_id))).await;
    assert_eq!((lock.status, lock.json()["error"]["code"].as_str()), (403, Some("forbidden")), "{:?}", lock.json());
    assert_eq!(app.read_topic(topic, "old").await["topic"]["locked"], false);

    // A moderator locks, unlocks and removes the remote topic: their own
    // Lock, its Undo and their Delete of its id with the reason as
    // `summary` (which tells Lemmy it is a removal), each announced.
    for action in ["lock", "unlock"] {
        let (status, body) =
            app.post(&format!("/api/v1/topics/{topic}/{action}"), Some(&app.admin_token), json!({})).await;
        assert_eq!(status, 204, "{body}");
    }
    let (status, body) =
        app.post(&format!("/api/v1/topics/{topic}/remove"), Some(&app.admin_token), json!({"reason": "spam"})).await;
    assert_eq!(status, 204, "{body}");
    let admin = format!("{}/ap/u/admin", app.addr);
    let seen = other.wait_for(3 + want.len() + 5).await;
    let last: Vec<Value> =
        seen[seen.len() - 3..].iter().map(|(_, b)| serde_json::from_slice::<Value>(b).expect("json")).collect();
    let lock = last.iter().find(|a| a["object"]["type"] == "Lock").expect("the Lock");
    assert_eq!((&lock["object"]["actor"], &lock["object"]["object"]), (&json!(admin), &json!(page_id)));
    let unlock = last.iter().find(|a| a["object"]["type"] == "Undo").expect("the Undo(Lock)");
    assert_eq!(unlock["object"]["object"]["type"], "Lock");
    let removal = last.iter().find(|a| a["object"]["type"] == "Delete").expect("the removal");
    assert_eq!((&removal["object"]["actor"], &removal["object"]["object"]), (&json!(admin), &json!(page_id)));
    assert_eq!(removal["object"]["summary"], "spam");
    // Restored: the moderator's Undo of that Delete, as Lemmy restores.
    let (status, body) = app.post(&format!("/api/v1/topics/{topic}/restore"), Some(&app.admin_token), json!({})).await;
    assert_eq!(status, 204, "{body}");
    let seen = other.wait_for(3 + want.len() + 6).await;
    let restore: Value = serde_json::from_slice(&seen[seen.len() - 1].1).expect("json");
    let undo = &restore["object"];
    assert_eq!((undo["type"].as_str(), undo["actor"].as_str()), (Some("Undo"), Some(admin.as_str())), "{restore}");
    assert_eq!(
        (undo["object"]["type"].as_str(), undo["object"]["object"].as_str()),
        (Some("Delete"), Some(page_id.as_str()))
    );
    assert!(undo["object"]["summary"].is_string(), "a removal's Delete, undone: {restore}");

    // Banned from the community, the remote user's Create is refused.
    let (status, body) = app
        .post("/api/v1/communities/rust/bans", Some(&app.admin_token), json!({"username": name, "reason": "spam"}))
        .await;
    assert!((200..300).contains(&status), "{status} {body}");
    let page2 = json!({"id": format!("{}/post/2", remote.base), "type": "Page", "attributedTo": remote.actor(),
                       "audience": group, "name": "Again", "content": "<p>spam</p>"});
    let refused = deliver(&remote, &app, inbox, &activity(&remote, &group, "Create", 4, page2)).await;
    assert_eq!((refused.status, refused.json()["error"]["code"].as_str()), (403, Some("banned")));
    assert!(app.state.store.remote_object(format!("{}/post/2", remote.base)).await.expect("read").is_none());

    // An administrator deletes the remote account: it posts no more, even
    // once the ban is lifted.
    let (status, body) = app.delete(&format!("/api/v1/communities/rust/bans/{name}"), Some(&app.admin_token)).await;
    assert!((200..300).contains(&status), "{status} {body}");
    let purge = json!({"content": "keep_anonymous"});
    let (status, body) =
        app.send(Method::DELETE, &format!("/api/v1/admin/users/{name}"), Some(&app.admin_token), Some(purge)).await;
    assert_eq!(status, 204, "{body}");
    let page3 = json!({"id": format!("{}/post/3", remote.base), "type": "Page", "attributedTo": remote.actor(),
                       "audience": group, "name": "Back", "content": "<p>again</p>"});
    let refused = deliver(&remote, &app, inbox, &activity(&remote, &group, "Create", 6, page3)).await;
    assert_eq!((refused.status, refused.json()["error"]["code"].as_str()), (403, Some("banned")));
}

#[tokio::test]
async fn a_remote_user_posts_edits_votes_and_deletes_and_the_group_announces_it_on_sqlite() {
    remote_content(spawn_federated_app().await).await;
}

#[tokio::test]
async fn a_remote_user_posts_edits_votes_and_deletes_and_the_group_announces_it_on_postgres() {
    let db = TestDb::create().await;
    remote_content(spawn_federated_pg_app(&db).await).await;
}

/// A server that follows after the Group has announced to others (and
/// kept its list of followers) gets what comes after, and once it leaves,
/// nothing more: each Follow and Undo is a `Change` that every node's kept
/// list hears (`app::federation::known`).
#[tokio::test]
async fn followers_who_come_and_go_are_announced_to_from_their_follow_until_they_leave() {
    let app = spawn_federated_app().await;
    app.community("rust").await;
    let ferris = app.user("ferris").await;
    let topic = app.topic("rust", &ferris, "Local things").await;
    let (early, voter, late) = (Remote::start().await, Remote::start_as("voter").await, Remote::start_as("late").await);
    let group = format!("{}/ap/c/rust", app.addr);
    let inbox = "/ap/c/rust/inbox";
    let topic_id = json!(format!("{}/ap/t/{topic}", app.addr));
    let vote = |kind: &str, n: u32| activity(&voter, &group, kind, n, topic_id.clone());
    let inner_kinds = |r: &Remote| -> Vec<String> {
        let got = r.received.lock().expect("lock").clone();
        announced(&got, 1).into_iter().map(|(kind, ..)| kind).collect()
    };

    assert_eq!(deliver(&early, &app, inbox, &follow(&early, &group)).await.status, 202);
    early.wait_for(1).await;
    assert_eq!(deliver(&voter, &app, inbox, &vote("Like", 1)).await.status, 202);
    early.wait_for(2).await;

    // The community's name in another case is the same inbox.
    assert_eq!(deliver(&late, &app, "/ap/c/RUST/inbox", &follow(&late, &group)).await.status, 202);
    late.wait_for(1).await;
    assert_eq!(deliver(&voter, &app, inbox, &vote("Dislike", 2)).await.status, 202);
    early.wait_for(3).await;
    late.wait_for(2).await;
    assert_eq!(inner_kinds(&late), ["Dislike"]);

    let leave = activity(&late, &group, "Undo", 1, follow(&late, &group));
    assert_eq!(deliver(&late, &app, inbox, &leave).await.status, 202);
    assert_eq!(deliver(&voter, &app, inbox, &vote("Like", 3)).await.status, 202);
    early.wait_for(4).await;
    // Nothing is left to send: the late server was never sent the Like.
    let queued = || async { pith_deliveries(&app).await.0 };
    eventually("the delivery queue to empty", || async { (queued().await == 0).then_some(()) }).await;
    assert_eq!(inner_kinds(&late), ["Dislike"]);
    assert_eq!(inner_kinds(&early), ["Like", "Dislike", "Like"]);
}

/// An actor's `Delete` of itself (its account deleted at home, as Mastodon
/// and Lemmy send it): its user here is deleted as a local account is,
/// its content kept under no name or, with `removeData`, erased; it acts
/// no more. An actor that never acted here has nothing deleted, and can
/// act later.
async fn actors_deleting_themselves<S: Store>(app: TestApp<S>) {
    app.community("rust").await;
    let (keep, wipe, stranger) =
        (Remote::start_as("keep").await, Remote::start_as("wipe").await, Remote::start_as("stranger").await);
    let group = format!("{}/ap/c/rust", app.addr);
    let inbox = "/ap/c/rust/inbox";
    let page = |r: &Remote, n: u32, title: &str| {
        let page = json!({"id": format!("{}/post/{n}", r.base), "type": "Page", "attributedTo": r.actor(),
                          "audience": group, "name": title, "content": "<p>words</p>"});
        activity(r, &group, "Create", n, page)
    };
    let name = |r: &Remote, preferred: &str| format!("{preferred}@{}", r.base.trim_start_matches("http://"));
    let mut topics = Vec::new();
    for (r, title) in [(&keep, "Kept"), (&wipe, "Wiped")] {
        let created = deliver(r, &app, inbox, &page(r, 1, title)).await;
        assert_eq!(created.status, 202, "{:?}", created.json());
        let pith::model::VoteTarget::Topic(t) = local(&app, &format!("{}/post/1", r.base)).await else {
            panic!("a topic")
        };
        topics.push(t);
    }
    let ferris = app.user("ferris").await;
    let (status, body) = app
        .post(&format!("/api/v1/topics/{}/posts", topics[0]), Some(&ferris), json!({"body": "A reply that stays"}))
        .await;
    assert_eq!(status, 201, "{body}");
    for (r, preferred) in [(&keep, "keep"), (&wipe, "wipe")] {
        assert_eq!(app.get(&format!("/api/v1/users/{}", name(r, preferred))).await.0, 200);
    }

    let gone = |r: &Remote, n: u32, remove: Option<bool>| {
        let mut delete = activity(r, &group, "Delete", n, json!(r.actor()));
        if let Some(remove) = remove {
            delete["removeData"] = json!(remove);
        }
        delete
    };
    assert_eq!(deliver(&keep, &app, "/ap/inbox", &gone(&keep, 2, None)).await.status, 202);
    assert_eq!(deliver(&wipe, &app, "/ap/inbox", &gone(&wipe, 2, Some(true))).await.status, 202);

    // Kept under no name; the local reply to it stays.
    let kept = app.read_topic(topics[0], "old").await;
    assert_eq!((&kept["topic"]["author"], &kept["topic"]["title"]), (&Value::Null, &json!("Kept")), "{kept}");
    assert_eq!(kept["posts"][0]["body"], "A reply that stays");
    // Erased, its place kept.
    let wiped = app.read_topic(topics[1], "old").await;
    assert_eq!(wiped["topic"]["deleted"], true, "{wiped}");
    assert_ne!(wiped["topic"]["title"], "Wiped");
    for (r, preferred) in [(&keep, "keep"), (&wipe, "wipe")] {
        let (status, body) = app.get(&format!("/api/v1/users/{}", name(r, preferred))).await;
        assert_eq!(status, 404, "{body}");
        // And it acts no more.
        let again = deliver(r, &app, inbox, &page(r, 3, "Back")).await;
        assert_eq!((again.status, again.json()["error"]["code"].as_str()), (403, Some("banned")));
    }

    // A server's user that never acted here: nothing to delete, and
    // nothing kept that would stop it acting later.
    assert_eq!(deliver(&stranger, &app, "/ap/inbox", &gone(&stranger, 1, Some(true))).await.status, 202);
    assert_eq!(app.get(&format!("/api/v1/users/{}", name(&stranger, "stranger"))).await.0, 404);
    assert_eq!(deliver(&stranger, &app, inbox, &page(&stranger, 2, "Hello")).await.status, 202);
    assert_eq!(app.get(&format!("/api/v1/users/{}", name(&stranger, "stranger"))).await.0, 200);
}

#[tokio::test]
async fn an_actor_deleting_itself_deletes_its_user_here_on_sqlite() {
    actors_deleting_themselves(spawn_federated_app().await).await;
}

#[tokio::test]
async fn an_actor_deleting_itself_deletes_its_user_here_on_postgres() {
    let db = TestDb::create().await;
    actors_deleting_themselves(spawn_federated_pg_app(&db).await).await;
}

/// A Note replying to nothing, as Mastodon sends a post naming the Group:
/// a topic, titled by its first line past the mention; one with nothing
/// past the mention is refused.
#[tokio::test]
async fn a_note_replying_to_nothing_starts_a_topic() {
    let app = spawn_federated_app().await;
    app.community("rust").await;
    let remote = Remote::start().await;
    let group = format!("{}/ap/c/rust", app.addr);
    let name = format!("remote@{}", remote.base.trim_start_matches("http://"));
    let mention =
        format!("<span class=\"h-card\"><a href=\"{group}\" class=\"u-url mention\">@<span>rust</span></a></span>");
    let toot = |n: u32, content: String| {
        json!({"id": format!("{}/statuses/{n}", remote.base), "type": "Note", "attributedTo": remote.actor(),
               "to": [PUBLIC], "cc": [group], "inReplyTo": null, "content": content,
               "tag": [{"type": "Mention", "href": group, "name": "@rust"}]})
    };
    let create =
        activity(&remote, &group, "Create", 1, toot(1, format!("<p>{mention} Borrow checker &amp; me<br>It won.</p>")));
    let r = deliver(&remote, &app, "/ap/inbox", &create).await;
    assert_eq!(r.status, 202, "{:?}", r.json());
    let pith::model::VoteTarget::Topic(topic) = local(&app, &format!("{}/statuses/1", remote.base)).await else {
        panic!("a topic")
    };
    let (_, t) = app.get(&format!("/api/v1/topics/{topic}")).await;
    assert_eq!(
        (t["topic"]["title"].as_str(), t["topic"]["author"].as_str(), t["topic"]["community"].as_str()),
        (Some("Borrow checker & me"), Some(name.as_str()), Some("rust"))
    );
    assert!(t["topic"]["body"].as_str().is_some_and(|b| b.contains("It won.")), "{t}");

    let empty = activity(&remote, &group, "Create", 2, toot(2, format!("<p>{mention}</p>")));
    let r = deliver(&remote, &app, "/ap/inbox", &empty).await;
    assert_eq!((r.status, r.json()["error"]["code"].as_str()), (400, Some("bad_activity")));
    assert_eq!(app.state.store.community("rust".into()).await.expect("community").topic_count, 1);
}

// ---------------------------------------------------------------------------
// The administrators' rules for other servers, and each server's rate limit.

/// The site administrator, as the store has it.
async fn admin_user<S: Store>(app: &TestApp<S>) -> pith::model::User {
    app.state.store.user_credentials("admin".into()).await.expect("read").expect("admin").0
}

async fn set_rule<S: Store>(app: &TestApp<S>, host: &str, rule: Option<InstanceRule>) {
    let admin = admin_user(app).await;
    instances::set_rule(&app.state, &admin, host, rule, "test").await.expect("rule set");
}

async fn server_rules<S: Store>(app: TestApp<S>) {
    app.community("rust").await;
    let remote = Remote::start().await;
    let group = format!("{}/ap/c/rust", app.addr);
    let body = serde_json::to_vec(&follow(&remote, &group)).expect("json");
    let path = "/ap/c/rust/inbox";
    let code = |r: &Reply| (r.status, r.json()["error"]["code"].as_str().unwrap_or("").to_owned());
    let key_id = format!("{}#main-key", remote.actor());

    // Blocked: refused before its actor is fetched, so nothing is stored.
    set_rule(&app, "127.0.0.1", Some(InstanceRule::Block)).await;
    let blocked = remote.post(&app, path, &body, None, |_| {}).await;
    assert_eq!(code(&blocked), (403, "instance_blocked".into()), "{:?}", blocked.json());
    assert!(blocked.json()["error"]["message"].as_str().expect("message").contains("127.0.0.1"));
    assert!(app.state.store.remote_actor_by_key(key_id.clone()).await.expect("read").is_none());
    assert_eq!(followers(&app).await, 0);

    // An allowlist that leaves the server out refuses it too.
    set_rule(&app, "127.0.0.1", None).await;
    set_rule(&app, "friends.example", Some(InstanceRule::Allow)).await;
    let not_allowed = remote.post(&app, path, &body, None, |_| {}).await;
    assert_eq!(code(&not_allowed), (403, "instance_blocked".into()));
    // Allowed, it follows and gets its Accept.
    set_rule(&app, "127.0.0.1", Some(InstanceRule::Allow)).await;
    let accepted = remote.post(&app, path, &body, None, |_| {}).await;
    assert_eq!(accepted.status, 202, "{:?}", accepted.json());
    assert_eq!(followers(&app).await, 1);
    let got = remote.wait_for(1).await;
    assert_eq!(serde_json::from_slice::<Value>(&got[0].1).expect("json")["type"], "Accept");

    // Blocked after it follows: what the community does next is not sent.
    set_rule(&app, "127.0.0.1", Some(InstanceRule::Block)).await;
    let author = app.user("alice").await;
    app.topic("rust", &author, "Not for blocked servers").await;
    for _ in 0..200 {
        if app.state.store.queued_deliveries().await.expect("count") == 0 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }
    assert_eq!(app.state.store.queued_deliveries().await.expect("count"), 0, "the delivery was dropped");
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    assert_eq!(remote.received.lock().expect("lock").len(), 1, "only the Accept reached the blocked server");

    // Rules are for administrators only.
    let bob = app.state.store.create_user(pith::model::Username::parse("bob").expect("name"), None, false);
    let bob = bob.await.expect("bob");
    let refused = instances::set_rule(&app.state, &bob, "x.example", Some(InstanceRule::Block), "").await;
    assert!(matches!(refused, Err(pith::app::AppError::Forbidden(_))), "{refused:?}");
    let bad = instances::set_rule(&app.state, &admin_user(&app).await, "https://x.example/", None, "").await;
    assert!(matches!(bad, Err(pith::app::AppError::Validation(_))), "{bad:?}");
    let hosts: Vec<String> =
        app.state.store.instance_rules().await.expect("rules").into_iter().map(|r| r.host).collect();
    assert_eq!(hosts, ["127.0.0.1", "friends.example"]);
}

#[tokio::test]
async fn blocked_and_unlisted_servers_are_refused_and_sent_nothing_on_sqlite() {
    server_rules(spawn_federated_app().await).await;
}

#[tokio::test]
async fn blocked_and_unlisted_servers_are_refused_and_sent_nothing_on_postgres() {
    let db = TestDb::create().await;
    server_rules(spawn_federated_pg_app(&db).await).await;
}

#[tokio::test]
async fn each_server_has_its_own_rate_limit_counted_after_its_signature() {
    let one = pith::app::limits::Rate::parse("3/1h").expect("rate");
    let app = spawn_federated_app_limited(&RateConfig { instance: one, ..RateConfig::default() }).await;
    app.community("rust").await;
    let remote = Remote::start().await;
    let group = format!("{}/ap/c/rust", app.addr);
    let body = serde_json::to_vec(&follow(&remote, &group)).expect("json");
    // Forged requests do not spend the server's allowance.
    let stranger = keys::generate().expect("key");
    for _ in 0..5 {
        let forged = remote.post(&app, "/ap/c/rust/inbox", &body, Some(&stranger), |_| {}).await;
        assert_eq!(forged.status, 401);
    }
    for n in 0..3 {
        let r = remote.post(&app, "/ap/c/rust/inbox", &body, None, |_| {}).await;
        assert_eq!(r.status, 202, "activity {n}: {:?}", r.json());
    }
    let over = remote.post(&app, "/ap/c/rust/inbox", &body, None, |_| {}).await;
    assert_eq!(over.status, 429, "{:?}", over.json());
    assert_eq!(over.json()["error"]["code"], "rate_limited");
    assert!(over.header("retry-after").is_some_and(|s| s.parse::<u64>().is_ok_and(|secs| secs > 0)));
}

#[tokio::test]
async fn a_servers_users_are_limited_each_by_their_account_not_by_the_address_they_share() {
    let one = pith::app::limits::Rate::parse("1/1h").expect("rate");
    let rate = RateConfig { post_ip: one, post_user: one, ..RateConfig::default() };
    let app = spawn_federated_app_limited(&rate).await;
    app.community("rust").await;
    let (remote, other) = (Remote::start().await, Remote::start_as("other").await);
    let group = format!("{}/ap/c/rust", app.addr);
    let page = |r: &Remote, n: u32| {
        let page = json!({"id": format!("{}/post/{n}", r.base), "type": "Page", "attributedTo": r.actor(),
                          "to": [group, PUBLIC], "audience": group, "name": format!("Page {n}"),
                          "content": "<p>hello</p>", "mediaType": "text/html"});
        activity(r, &group, "Create", n, page)
    };
    // Two users of servers on the same address (127.0.0.1), over a
    // per-address limit of one post: each posts.
    for r in [&remote, &other] {
        let created = deliver(r, &app, "/ap/c/rust/inbox", &page(r, 1)).await;
        assert_eq!(created.status, 202, "{:?}", created.json());
    }
    // Each user's own limit still holds.
    let again = deliver(&remote, &app, "/ap/c/rust/inbox", &page(&remote, 2)).await;
    assert_eq!((again.status, again.json()["error"]["code"].as_str()), (429, Some("rate_limited")));
    // A local user on that address is counted by it as before.
    let alice = app.user("alice").await;
    let (status, _) =
        app.post("/api/v1/communities/rust/topics", Some(&alice), json!({"title": "Local", "body": "x"})).await;
    assert_eq!(status, 201);
    let (status, body) = app
        .post("/api/v1/communities/rust/topics", Some(&app.user("bob").await), json!({"title": "Two", "body": "y"}))
        .await;
    assert_eq!(status, 429, "{body}");
}

#[tokio::test]
async fn pith_federation_sets_lists_and_clears_rules_from_the_command_line() {
    use crate::support::child::run_pith;
    use std::ffi::OsStr;
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().as_os_str();
    let run = |args: Vec<&'static str>| {
        let mut all: Vec<&OsStr> = vec!["federation".as_ref()];
        all.extend(args.into_iter().map(OsStr::new));
        all.extend([OsStr::new("--data-dir"), data]);
        async move { run_pith(&all).await }
    };
    let out = run(vec!["block", "Spam.Example", "--reason", "spam waves"]).await;
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "spam.example: block");
    assert!(run(vec!["allow", "friends.example"]).await.status.success());
    let list = run(vec!["list"]).await;
    let listed = String::from_utf8_lossy(&list.stdout).into_owned();
    assert!(list.status.success());
    let lines: Vec<&str> = listed.lines().collect();
    assert!(lines[0].starts_with("friends.example  allow"), "{listed}");
    assert!(lines[1].starts_with("spam.example     block") && lines[1].ends_with("spam waves"), "{listed}");
    assert!(listed.contains("allowlist"), "{listed}");
    assert!(run(vec!["clear", "friends.example"]).await.status.success());
    let again = run(vec!["clear", "friends.example"]).await;
    assert_eq!(again.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&again.stderr).contains("friends.example has no rule"));
    let bad = run(vec!["block", "https://x.example/"]).await;
    assert_eq!(bad.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("give the host alone"), "{bad:?}");
    // The server reads them from the same database.
    let store = SqliteStore::open(&dir.path().join("pith.db"), &SqliteOptions::default()).expect("open");
    let rules = store.instance_rules().await.expect("rules");
    assert_eq!(rules.len(), 1);
    assert_eq!(
        (rules[0].host.as_str(), rules[0].rule, rules[0].reason.as_str()),
        ("spam.example", InstanceRule::Block, "spam waves")
    );
    store.shutdown().await;
}

/// The next text message of a live socket, as JSON; fails after 10 s.
async fn next_text<S>(ws: &mut S) -> Value
where
    S: futures_util::Stream<
            Item = Result<tokio_tungstenite::tungstenite::Message, tokio_tungstenite::tungstenite::Error>,
        > + Unpin,
{
    use futures_util::StreamExt;
    loop {
        let msg = tokio::time::timeout(std::time::Duration::from_secs(10), ws.next()).await.expect("a message in time");
        if let tokio_tungstenite::tungstenite::Message::Text(t) = msg.expect("open").expect("valid") {
            return serde_json::from_str(&t).expect("json");
        }
    }
}

/// Polls `check` until it gives `Some`, or fails after ~10 s.
async fn eventually<T, F: std::future::Future<Output = Option<T>>>(what: &str, mut check: impl FnMut() -> F) -> T {
    for _ in 0..400 {
        if let Some(v) = check().await {
            return v;
        }
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }
    panic!("{what}: not seen in time");
}

/// Phase 2, Pith to Pith over real sockets: a user of `away` finds
/// `!rust@home`, follows it (its Group accepts), gets what home's users
/// post, replies and votes back to home; home's reply reaches away in
/// turn; the pages show the remote community and the follow; unfollow
/// ends it. Each server checks the other's signatures.
async fn joining_a_remote_community<A: Store, B: Store>(home: TestApp<A>, away: TestApp<B>) {
    home.community("rust").await;
    let home_host = home.addr.trim_start_matches("http://").to_owned();
    let away_host = away.addr.trim_start_matches("http://").to_owned();
    let bob = home.user("bob").await;
    let ann = away.user("ann").await;
    let remote_name = format!("rust@{home_host}");

    // Finding it: bad handles, unknown communities, then the real one.
    let (status, body) = away.post("/api/v1/resolve", Some(&ann), json!({"q": "rust"})).await;
    assert_eq!((status, body["error"]["code"].as_str()), (400, Some("bad_community")), "{body}");
    let (status, body) = away.post("/api/v1/resolve", Some(&ann), json!({"q": format!("!nope@{home_host}")})).await;
    assert_eq!((status, body["error"]["code"].as_str()), (404, Some("not_found")), "{body}");
    let (status, body) = away.post("/api/v1/resolve", None, json!({"q": format!("!rust@{home_host}")})).await;
    assert_eq!(status, 401, "{body}");
    let (status, c) = away.post("/api/v1/resolve", Some(&ann), json!({"q": format!("!rust@{home_host}")})).await;
    assert_eq!(status, 200, "{c}");
    assert_eq!((c["name"].as_str(), c["title"].as_str()), (Some(remote_name.as_str()), Some("The rust")));
    // Its page at home (the Group's `url`).
    assert_eq!(c["home"], format!("{}/c/rust", home.addr));
    // Found again: the same community.
    let (_, again) = away.post("/api/v1/resolve", Some(&ann), json!({"q": format!("{}/ap/c/rust", home.addr)})).await;
    assert_eq!(again["id"], c["id"]);
    // It is no actor of away's, and cannot be created there by name.
    assert_eq!(get_ap(&away, &format!("/ap/c/{remote_name}")).await.status, 404);
    let made = away
        .post("/api/v1/communities", Some(&away.admin_token), json!({"name": "x@evil.example", "title": "x"}))
        .await;
    assert_eq!(made.0, 422, "{}", made.1);
    // A local community has nothing to follow.
    away.community("local").await;
    let (status, body) = away.post("/api/v1/communities/local/follow", Some(&ann), json!({})).await;
    assert_eq!((status, body["error"]["code"].as_str()), (400, Some("not_remote")), "{body}");

    // Following: pending, then accepted by home's Group.
    let follow_path = format!("/api/v1/communities/{remote_name}/follow");
    let (status, body) = away.post(&follow_path, Some(&ann), json!({})).await;
    assert_eq!((status, body["following"].as_str()), (202, Some("pending")), "{body}");
    let home_rust = home.state.store.community("rust".into()).await.expect("rust");
    eventually("home has a follower", || async {
        (home.state.store.followers(home_rust.id).await.expect("read").len() == 1).then_some(())
    })
    .await;
    eventually("the follow accepted", || async {
        let (_, body) = away.send(Method::GET, &follow_path, Some(&ann), None).await;
        (body["following"] == "accepted").then_some(())
    })
    .await;

    // Home's user posts: the topic reaches away, by `bob@home`.
    let topic = home.topic("rust", &bob, "News from home").await;
    let page_id = format!("{}/ap/t/{topic}", home.addr);
    let mirrored = eventually("the topic at away", || async {
        away.state.store.remote_object(page_id.clone()).await.expect("read").map(|o| o.topic_id)
    })
    .await;
    let (status, t) = away.get(&format!("/api/v1/topics/{mirrored}")).await;
    assert_eq!(status, 200);
    assert_eq!(t["topic"]["title"], "News from home");
    assert_eq!(t["topic"]["author"], format!("bob@{home_host}"));
    assert_eq!(t["topic"]["community"], remote_name.as_str());
    let (ids, _) = away.list(&format!("/api/v1/communities/{remote_name}/topics?sort=new")).await;
    assert_eq!(ids, vec![mirrored]);

    // Away's user replies and votes there: both reach home, as `ann@away`.
    let before = home.read_topic(topic, "old").await["topic"]["score"].as_i64().expect("score");
    let reply = away.reply(mirrored, &ann, None, "Hello from *away*").await;
    let note_id = format!("{}/ap/t/{mirrored}/p/{reply}", away.addr);
    let at_home = eventually("the reply at home", || async {
        home.state.store.remote_object(note_id.clone()).await.expect("read")
    })
    .await;
    assert_eq!(at_home.topic_id, topic);
    // The row is there once committed; the topic's cached rendering takes
    // the reply just after (`app::apply`), before home answers away's POST.
    let posts = eventually("the reply in home's topic", || async {
        let posts = home.read_topic(topic, "old").await["posts"].clone();
        (posts.as_array().is_some_and(|p| !p.is_empty())).then_some(posts)
    })
    .await;
    assert_eq!(posts[0]["author"], format!("ann@{away_host}"));
    assert_eq!(posts[0]["body"], "Hello from *away*");
    away.vote("topics", mirrored, &ann, 1).await;
    eventually("the vote at home", || async {
        let score = home.read_topic(topic, "old").await["topic"]["score"].as_i64().expect("score");
        (score == before + 1).then_some(())
    })
    .await;
    // Away does not take its own activities back: one reply, not two.
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert_eq!(away.read_topic(mirrored, "old").await["posts"].as_array().map(Vec::len), Some(1));

    // Home's user answers ann: the reply reaches away under hers, and
    // away's live subscribers to the topic get it as any new post.
    let ws_url = format!("ws://{away_host}/api/v1/live?topics={mirrored}");
    let (mut live, _) = tokio_tungstenite::connect_async(ws_url).await.expect("live");
    let greeting = next_text(&mut live).await;
    assert_eq!(greeting["type"], "subscribed", "{greeting}");
    let home_reply = at_home.target;
    let pith::model::VoteTarget::Post(ann_at_home) = home_reply else { panic!("a post") };
    let answer = home.reply(topic, &bob, Some(ann_at_home), "Welcome!").await;
    let answer_id = format!("{}/ap/t/{topic}/p/{answer}", home.addr);
    eventually("the answer at away", || async {
        away.state.store.remote_object(answer_id.clone()).await.expect("read")
    })
    .await;
    let posts = eventually("the answer in away's topic", || async {
        let posts = away.read_topic(mirrored, "old").await["posts"].clone();
        posts.get(1).is_some().then_some(posts)
    })
    .await;
    assert_eq!(posts[1]["body"], "Welcome!");
    assert_eq!(posts[1]["parent_id"], reply);
    let event = next_text(&mut live).await;
    assert_eq!((event["type"].as_str(), event["post"]["body"].as_str()), (Some("post"), Some("Welcome!")), "{event}");
    assert_eq!(event["post"]["author"], format!("bob@{home_host}"));

    // Home's moderator removes the answer: its Group announces the
    // removal, which away's copy of the community takes, made by the
    // Group's user (its moderator there) and logged.
    let (status, body) = home.post(&format!("/api/v1/posts/{answer}/remove"), Some(&home.admin_token), json!({})).await;
    assert_eq!(status, 204, "{body}");
    eventually("the removal at away", || async {
        let posts = away.read_topic(mirrored, "old").await["posts"].clone();
        (posts[1]["removed"] == true).then_some(())
    })
    .await;
    let (_, log) = away.get(&format!("/api/v1/communities/{remote_name}/modlog")).await;
    assert_eq!(log["entries"][0]["actor"], remote_name.as_str(), "{log}");
    assert_eq!(log["entries"][0]["action"], "remove_post");
    // And restores it: the moderator's Undo of the removal, announced,
    // restores away's copy too.
    let (status, body) =
        home.post(&format!("/api/v1/posts/{answer}/restore"), Some(&home.admin_token), json!({})).await;
    assert_eq!(status, 204, "{body}");
    eventually("the restore at away", || async {
        let posts = away.read_topic(mirrored, "old").await["posts"].clone();
        // (`removed` is left out of a post that is not.)
        (posts[1].get("removed").is_none() && posts[1]["body"] == "Welcome!").then_some(())
    })
    .await;

    // Home's moderator locks the topic, then unlocks it: the moderator's
    // Lock and its Undo, announced by the Group, lock and unlock away's
    // copy (by the Group's user), and ann cannot reply there meanwhile.
    for (action, locked) in [("lock", true), ("unlock", false)] {
        let (status, body) =
            home.post(&format!("/api/v1/topics/{topic}/{action}"), Some(&home.admin_token), json!({})).await;
        assert_eq!(status, 204, "{body}");
        eventually(&format!("the {action} at away"), || async {
            (away.read_topic(mirrored, "old").await["topic"]["locked"] == locked).then_some(())
        })
        .await;
        if locked {
            let (status, body) =
                away.post(&format!("/api/v1/topics/{mirrored}/posts"), Some(&ann), json!({"body": "Too late"})).await;
            assert_eq!(status, 403, "{body}");
        }
    }
    let (_, log) = away.get(&format!("/api/v1/communities/{remote_name}/modlog")).await;
    let actions: Vec<_> = log["entries"].as_array().expect("entries").iter().map(|e| e["action"].clone()).collect();
    let want = ["unlock_topic", "lock_topic", "restore_post", "remove_post"].map(|a| json!(a));
    assert_eq!(actions[..4], want, "{log}");

    // The pages: the community listed as on another server, its page with
    // the follow state and a link home.
    let list = fetch(away.req(Method::GET, "/c")).await;
    assert!(String::from_utf8_lossy(&list.bytes).contains("on another server"));
    let page = fetch(away.req(Method::GET, &format!("/c/{remote_name}"))).await;
    let html = String::from_utf8_lossy(&page.bytes).to_string();
    assert_eq!(page.status, 200);
    assert!(html.contains(&format!("{}/c/rust", home.addr)) && html.contains("News from home"), "{html}");

    // Ann posts a topic there too, then deletes it and her reply: each
    // reaches home as her own Create and Delete.
    let ann_topic = away.topic(&remote_name, &ann, "Asked from away").await;
    let ann_page = format!("{}/ap/t/{ann_topic}", away.addr);
    let ann_topic_home = eventually("ann's topic at home", || async {
        home.state.store.remote_object(ann_page.clone()).await.expect("read").map(|o| o.topic_id)
    })
    .await;
    let t = home.read_topic(ann_topic_home, "old").await;
    assert_eq!(
        (t["topic"]["title"].as_str(), t["topic"]["community"].as_str()),
        (Some("Asked from away"), Some("rust"))
    );
    let (status, _) = away.delete(&format!("/api/v1/posts/{reply}"), Some(&ann)).await;
    assert_eq!(status, 204);
    let (status, _) = away.delete(&format!("/api/v1/topics/{ann_topic}"), Some(&ann)).await;
    assert_eq!(status, 204);
    eventually("ann's deletions at home", || async {
        let reply_gone = home.read_topic(topic, "old").await["posts"][0]["deleted"] == true;
        let (_, t) = home.get(&format!("/api/v1/topics/{ann_topic_home}")).await;
        (reply_gone && t["topic"]["deleted"] == true).then_some(())
    })
    .await;

    // Unfollowing: home's Group loses its follower; away takes no more.
    let (status, _) = away.delete(&follow_path, Some(&ann)).await;
    assert_eq!(status, 204);
    eventually("home lost its follower", || async {
        home.state.store.followers(home_rust.id).await.expect("read").is_empty().then_some(())
    })
    .await;
    let (_, body) = away.send(Method::GET, &follow_path, Some(&ann), None).await;
    assert_eq!(body["following"], "no");
}

#[tokio::test]
async fn a_user_joins_a_community_on_another_server() {
    joining_a_remote_community(spawn_federated_app().await, spawn_federated_app().await).await;
}

#[tokio::test]
async fn a_user_joins_a_community_on_another_server_pg() {
    let db = TestDb::create().await;
    // Home on SQLite, away on PostgreSQL: both stores take both sides.
    joining_a_remote_community(spawn_federated_app().await, spawn_federated_pg_app(&db).await).await;
    let db2 = TestDb::create().await;
    joining_a_remote_community(spawn_federated_pg_app(&db2).await, spawn_federated_app().await).await;
}
