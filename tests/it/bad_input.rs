//! Hostile and broken requests: each is refused with a 4xx and the JSON
//! error shape, never a 5xx, and none of them writes anything.

use reqwest::Method;
use serde_json::{Value, json};

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::support::helpers::{TestApp, assert_error, fetch, ids, spawn_app, spawn_app_with};

/// Who a case authenticates as.
#[derive(Clone, Copy)]
enum Auth {
    Anonymous,
    Alice,
    /// A raw `Authorization` header value, bytes and all.
    Header(&'static [u8]),
}

struct Case {
    what: &'static str,
    method: Method,
    path: String,
    auth: Auth,
    /// `Content-Type`; `None` sends none.
    content_type: Option<&'static str>,
    /// `None` sends no body at all.
    body: Option<Vec<u8>>,
    status: u16,
    code: &'static str,
}

fn case(what: &'static str, method: Method, path: impl Into<String>, status: u16, code: &'static str) -> Case {
    Case { what, method, path: path.into(), auth: Auth::Anonymous, content_type: None, body: None, status, code }
}

impl Case {
    fn by_alice(mut self) -> Case {
        self.auth = Auth::Alice;
        self
    }

    fn auth_header(mut self, value: &'static [u8]) -> Case {
        self.auth = Auth::Header(value);
        self
    }

    fn json(self, v: Value) -> Case {
        self.raw("application/json", serde_json::to_vec(&v).expect("json"))
    }

    fn raw(mut self, content_type: &'static str, body: impl Into<Vec<u8>>) -> Case {
        self.content_type = Some(content_type);
        self.body = Some(body.into());
        self
    }

    fn bare(mut self, body: impl Into<Vec<u8>>) -> Case {
        self.content_type = None;
        self.body = Some(body.into());
        self
    }

    async fn run(&self, app: &TestApp, alice: &str) {
        let mut req = app.req(self.method.clone(), &self.path);
        match self.auth {
            Auth::Anonymous => {}
            Auth::Alice => req = req.bearer_auth(alice),
            Auth::Header(h) => {
                req = req.header("authorization", reqwest::header::HeaderValue::from_bytes(h).expect("header"))
            }
        }
        if let Some(ct) = self.content_type {
            req = req.header("content-type", ct);
        }
        if let Some(b) = &self.body {
            req = req.body(b.clone());
        }
        let reply = fetch(req).await;
        let context = format!("{} ({} {})", self.what, self.method, self.path);
        assert!(reply.status < 500, "{context}: a 5xx {} {:?}", reply.status, String::from_utf8_lossy(&reply.bytes));
        assert_eq!(reply.header("content-type"), Some("application/json"), "{context}");
        assert_error(&context, reply.status, &reply.json(), self.status, self.code);
        match self.status {
            401 => assert_eq!(reply.header("www-authenticate"), Some("Bearer"), "{context}"),
            405 => {
                assert!(reply.header("allow").is_some_and(|a| !a.is_empty()), "{context}: a 405 says what is allowed")
            }
            _ => {}
        }
    }
}

fn cases(topic: i64, post: i64) -> Vec<Case> {
    use Method as M;
    let topics = "/api/v1/communities/raspi/topics";
    let posts = format!("/api/v1/topics/{topic}/posts");
    let edit_post = format!("/api/v1/posts/{post}");
    let edit_topic = format!("/api/v1/topics/{topic}");
    let register = "/api/v1/auth/register";
    let reg = |name: &str, password: &str| json!({"username": name, "password": password});
    let huge = format!("{{\"title\":\"big\",\"body\":\"{}\"}}", "a".repeat(pith::net::MAX_BODY_BYTES + 1));
    vec![
        // Bodies that are not the JSON asked for.
        case("truncated JSON", M::POST, topics, 400, "invalid_json").by_alice().raw("application/json", r#"{"title":"#),
        case("trailing garbage", M::POST, topics, 400, "invalid_json")
            .by_alice()
            .raw("application/json", r#"{"title":"x"} x"#),
        case("not JSON at all", M::POST, topics, 400, "invalid_json").by_alice().raw("application/json", "title=x"),
        case("empty body", M::POST, topics, 400, "invalid_json").by_alice().raw("application/json", ""),
        case("invalid UTF-8 in a string", M::POST, topics, 400, "invalid_json")
            .by_alice()
            .raw("application/json", b"{\"title\":\"\xff\xfe\",\"body\":\"x\"}".to_vec()),
        case("invalid UTF-8 in a post", M::POST, posts.clone(), 400, "invalid_json")
            .by_alice()
            .raw("application/json", b"{\"body\":\"caf\xc3\"}".to_vec()),
        case("a lone surrogate escape", M::POST, posts.clone(), 400, "invalid_json")
            .by_alice()
            .raw("application/json", r#"{"body":"\ud800"}"#),
        case("title of the wrong type", M::POST, topics, 422, "invalid_body").by_alice().json(json!({"title": 5})),
        case("body of the wrong type", M::POST, topics, 422, "invalid_body")
            .by_alice()
            .json(json!({"title": "t", "body": ["x"]})),
        case("an array instead of an object", M::POST, topics, 422, "invalid_body").by_alice().json(json!([])),
        case("null instead of an object", M::POST, topics, 422, "invalid_body").by_alice().json(json!(null)),
        case("missing title", M::POST, topics, 422, "invalid_body").by_alice().json(json!({"body": "b"})),
        case("missing post body", M::POST, posts.clone(), 422, "invalid_body").by_alice().json(json!({})),
        case("parent_id a string", M::POST, posts.clone(), 422, "invalid_body")
            .by_alice()
            .json(json!({"body": "b", "parent_id": "1"})),
        case("parent_id past i64", M::POST, posts.clone(), 422, "invalid_body")
            .by_alice()
            .raw("application/json", r#"{"body":"b","parent_id":99999999999999999999}"#),
        case("parent_id a float", M::POST, posts.clone(), 422, "invalid_body")
            .by_alice()
            .json(json!({"body": "b", "parent_id": 1.5})),
        case("missing edit body", M::PATCH, edit_post.clone(), 422, "invalid_body").by_alice().json(json!({})),
        case("edit body a number", M::PATCH, edit_topic.clone(), 422, "invalid_body")
            .by_alice()
            .json(json!({"body": 5})),
        case("missing password", M::POST, register, 422, "invalid_body").json(json!({"username": "mallory"})),
        case("username a number", M::POST, register, 422, "invalid_body")
            .json(json!({"username": 12345, "password": "password123"})),
        case("login with broken JSON", M::POST, "/api/v1/auth/login", 400, "invalid_json").raw("application/json", "{"),
        // Bodies sent the wrong way.
        case("text/plain", M::POST, topics, 415, "unsupported_media_type")
            .by_alice()
            .raw("text/plain", r#"{"title":"t"}"#),
        case("a form", M::POST, topics, 415, "unsupported_media_type")
            .by_alice()
            .raw("application/x-www-form-urlencoded", "title=t"),
        case("no content type", M::POST, posts.clone(), 415, "unsupported_media_type")
            .by_alice()
            .bare(r#"{"body":"b"}"#),
        case("no content type, registering", M::POST, register, 415, "unsupported_media_type")
            .bare(r#"{"username":"mallory","password":"password123"}"#),
        case("a body over the size limit", M::POST, topics, 413, "payload_too_large")
            .by_alice()
            .raw("application/json", huge.clone()),
        case("a reply over the size limit", M::POST, posts.clone(), 413, "payload_too_large")
            .by_alice()
            .raw("application/json", huge),
        // Fields that break a rule.
        case("title of 301 characters", M::POST, topics, 422, "invalid_field")
            .by_alice()
            .json(json!({"title": "t".repeat(301)})),
        case("empty title", M::POST, topics, 422, "invalid_field").by_alice().json(json!({"title": ""})),
        case("blank title", M::POST, topics, 422, "invalid_field").by_alice().json(json!({"title": " \t "})),
        case("a bell in a title", M::POST, topics, 422, "invalid_field").by_alice().json(json!({"title": "ding\u{7}"})),
        case("a newline in a title", M::POST, topics, 422, "invalid_field")
            .by_alice()
            .json(json!({"title": "two\nlines"})),
        case("NUL in a title", M::POST, topics, 422, "invalid_field").by_alice().json(json!({"title": "a\u{0}b"})),
        case("topic body of 40,001 characters", M::POST, topics, 422, "invalid_field")
            .by_alice()
            .json(json!({"title": "t", "body": "b".repeat(40_001)})),
        case("an escape sequence in a topic body", M::POST, topics, 422, "invalid_field")
            .by_alice()
            .json(json!({"title": "t", "body": "\u{1b}[2J"})),
        case("a javascript: link", M::POST, topics, 422, "invalid_field")
            .by_alice()
            .json(json!({"title": "t", "url": "javascript:alert(1)"})),
        case("a link with a space", M::POST, topics, 422, "invalid_field")
            .by_alice()
            .json(json!({"title": "t", "url": "https://exa mple.org"})),
        case("post body of 40,001 characters", M::POST, posts.clone(), 422, "invalid_field")
            .by_alice()
            .json(json!({"body": "é".repeat(40_001)})),
        case("empty post body", M::POST, posts.clone(), 422, "invalid_field").by_alice().json(json!({"body": ""})),
        case("blank post body", M::POST, posts.clone(), 422, "invalid_field").by_alice().json(json!({"body": "\n \t"})),
        case("NUL in a post", M::POST, posts.clone(), 422, "invalid_field")
            .by_alice()
            .json(json!({"body": "nul\u{0}"})),
        case("DEL in a post", M::POST, posts.clone(), 422, "invalid_field")
            .by_alice()
            .json(json!({"body": "del\u{7f}"})),
        case("a C1 control in a post", M::POST, posts.clone(), 422, "invalid_field")
            .by_alice()
            .json(json!({"body": "c1\u{85}"})),
        case("edit to 40,001 characters", M::PATCH, edit_post.clone(), 422, "invalid_field")
            .by_alice()
            .json(json!({"body": "b".repeat(40_001)})),
        case("edit to blank", M::PATCH, edit_post.clone(), 422, "invalid_field").by_alice().json(json!({"body": "  "})),
        case("topic edit with NUL", M::PATCH, edit_topic.clone(), 422, "invalid_field")
            .by_alice()
            .json(json!({"body": "\u{0}"})),
        case("username of 2", M::POST, register, 422, "invalid_field").json(reg("ab", "password123")),
        case("username of 21", M::POST, register, 422, "invalid_field").json(reg(&"u".repeat(21), "password123")),
        case("empty username", M::POST, register, 422, "invalid_field").json(reg("", "password123")),
        case("username with a space", M::POST, register, 422, "invalid_field").json(reg("mal lory", "password123")),
        case("username with an accent", M::POST, register, 422, "invalid_field").json(reg("mélanie", "password123")),
        case("username with a newline", M::POST, register, 422, "invalid_field").json(reg("mal\nlory", "password123")),
        case("username with a slash", M::POST, register, 422, "invalid_field").json(reg("../admin", "password123")),
        case("password of 7", M::POST, register, 422, "invalid_field").json(reg("mallory", "passwor")),
        case("password of 257", M::POST, register, 422, "invalid_field").json(reg("mallory", &"p".repeat(257))),
        // Ids that are not ids, or not there.
        case("a word for an id", M::GET, "/api/v1/topics/abc", 400, "invalid_path"),
        case("an id past i64", M::GET, "/api/v1/topics/99999999999999999999999", 400, "invalid_path"),
        case("a fractional id", M::GET, "/api/v1/topics/1.5", 400, "invalid_path"),
        case("a blank id", M::GET, "/api/v1/topics/%20", 400, "invalid_path"),
        case("a hex id", M::GET, "/api/v1/topics/0x10", 400, "invalid_path"),
        case("a negative id", M::GET, "/api/v1/topics/-1", 404, "not_found"),
        case("id zero", M::GET, "/api/v1/topics/0", 404, "not_found"),
        case("the largest id", M::GET, format!("/api/v1/topics/{}", i64::MAX), 404, "not_found"),
        case("an unknown topic", M::GET, "/api/v1/topics/424242", 404, "not_found"),
        case("reply to a word", M::POST, "/api/v1/topics/abc/posts", 400, "invalid_path")
            .by_alice()
            .json(json!({"body": "b"})),
        case("edit a word", M::PATCH, "/api/v1/posts/abc", 400, "invalid_path").by_alice().json(json!({"body": "b"})),
        case("delete a word", M::DELETE, "/api/v1/topics/abc", 400, "invalid_path").by_alice(),
        case("vote on a huge id", M::POST, "/api/v1/posts/99999999999999999999999/vote", 400, "invalid_path")
            .by_alice()
            .json(json!({"value": 1})),
        case("vote on a negative id", M::POST, "/api/v1/posts/-5/vote", 404, "not_found")
            .by_alice()
            .json(json!({"value": 1})),
        case("reply to an unknown topic", M::POST, "/api/v1/topics/424242/posts", 404, "not_found")
            .by_alice()
            .json(json!({"body": "b"})),
        case("edit an unknown post", M::PATCH, "/api/v1/posts/424242", 404, "not_found")
            .by_alice()
            .json(json!({"body": "b"})),
        case("delete an unknown post", M::DELETE, "/api/v1/posts/424242", 404, "not_found").by_alice(),
        case("delete an unknown topic", M::DELETE, "/api/v1/topics/424242", 404, "not_found").by_alice(),
        case("an unknown user", M::GET, "/api/v1/users/nobody", 404, "not_found"),
        case("a user name of invalid UTF-8", M::GET, "/api/v1/users/%FF", 400, "invalid_path"),
        case("a community name of invalid UTF-8", M::GET, "/api/v1/communities/%C3/topics", 400, "invalid_path"),
        case("an overlong user name", M::GET, format!("/api/v1/users/{}", "u".repeat(100)), 404, "not_found"),
        case("an unknown community", M::GET, "/api/v1/communities/nowhere", 404, "not_found"),
        case("an overlong community", M::GET, format!("/api/v1/communities/{}", "c".repeat(100)), 404, "not_found"),
        case("topics of an unknown community", M::GET, "/api/v1/communities/nowhere/topics", 404, "not_found"),
        case("a topic in an unknown community", M::POST, "/api/v1/communities/nowhere/topics", 404, "not_found")
            .by_alice()
            .json(json!({"title": "t"})),
        case("a topic in an unnameable community", M::POST, "/api/v1/communities/no%20where/topics", 404, "not_found")
            .by_alice()
            .json(json!({"title": "t"})),
        // Query strings.
        case("sort=rising", M::GET, "/api/v1/topics?sort=rising", 400, "invalid_query"),
        case("sort in capitals", M::GET, "/api/v1/topics?sort=NEW", 400, "invalid_query"),
        case("sort twice", M::GET, "/api/v1/topics?sort=new&sort=hot", 400, "invalid_query"),
        case("sort of invalid UTF-8", M::GET, "/api/v1/topics?sort=%FF", 400, "invalid_query"),
        case("t=decade", M::GET, "/api/v1/topics?sort=top&t=decade", 400, "invalid_query"),
        case("t=decade without top", M::GET, "/api/v1/topics?t=decade", 400, "invalid_query"),
        case("limit=0", M::GET, "/api/v1/topics?limit=0", 400, "invalid_query"),
        case("limit=101", M::GET, "/api/v1/topics?limit=101", 400, "invalid_query"),
        case("limit=-1", M::GET, "/api/v1/topics?limit=-1", 400, "invalid_query"),
        case("limit=abc", M::GET, "/api/v1/topics?limit=abc", 400, "invalid_query"),
        case("limit=1e3", M::GET, "/api/v1/topics?limit=1e3", 400, "invalid_query"),
        case("limit past u64", M::GET, "/api/v1/topics?limit=99999999999999999999999", 400, "invalid_query"),
        case("limit empty", M::GET, "/api/v1/topics?limit=", 400, "invalid_query"),
        case("after=garbage", M::GET, "/api/v1/topics?after=garbage", 400, "invalid_query"),
        case("after=!!!", M::GET, "/api/v1/topics?after=%21%21%21", 400, "invalid_query"),
        case("an overlong cursor", M::GET, format!("/api/v1/topics?after={}", "A".repeat(500)), 400, "invalid_query"),
        case("a forged cursor", M::GET, "/api/v1/topics?sort=new&after=bjp4OjE", 400, "invalid_query"),
        case("bad sort on a community", M::GET, "/api/v1/communities/raspi/topics?sort=best", 400, "invalid_query"),
        case("bad limit on a community", M::GET, "/api/v1/communities/raspi/topics?limit=1000", 400, "invalid_query"),
        case("sort=top for posts", M::GET, format!("/api/v1/topics/{topic}?sort=top"), 400, "invalid_query"),
        case("sort=hot for posts", M::GET, format!("/api/v1/topics/{topic}?sort=hot"), 400, "invalid_query"),
        // Routes that do not exist, and methods a route does not take.
        case("unknown API route", M::GET, "/api/v1/nope", 404, "not_found"),
        case("unknown route", M::GET, "/nope", 404, "not_found"),
        case("another API version", M::GET, "/api/v2/topics", 404, "not_found"),
        case("the API root", M::GET, "/api/v1", 404, "not_found"),
        case("below a topic", M::GET, format!("/api/v1/topics/{topic}/nope"), 404, "not_found"),
        case("a trailing slash", M::GET, "/api/v1/topics/", 404, "not_found"),
        case("POST to an unknown route", M::POST, "/api/v1/nope", 404, "not_found").json(json!({})),
        case("DELETE the front page", M::DELETE, "/api/v1/topics", 405, "method_not_allowed").by_alice(),
        case("PUT a topic", M::PUT, edit_topic.clone(), 405, "method_not_allowed")
            .by_alice()
            .json(json!({"body": "b"})),
        case("GET a post", M::GET, edit_post.clone(), 405, "method_not_allowed"),
        case("GET login", M::GET, "/api/v1/auth/login", 405, "method_not_allowed"),
        case("GET a vote", M::GET, format!("/api/v1/topics/{topic}/vote"), 405, "method_not_allowed"),
        case("PATCH communities", M::PATCH, "/api/v1/communities", 405, "method_not_allowed")
            .by_alice()
            .json(json!({})),
        case("POST the health check", M::POST, "/healthz", 405, "method_not_allowed"),
        // Credentials that are not credentials.
        case("non-ASCII token", M::GET, "/api/v1/auth/me", 401, "unauthorized").auth_header(b"Bearer \xff\xfe"),
        case("lower-case scheme, unknown token", M::GET, "/api/v1/auth/me", 401, "unauthorized")
            .auth_header(b"bearer nope"),
    ]
}

#[tokio::test]
async fn every_bad_request_gets_a_4xx_with_the_error_shape_and_writes_nothing() {
    let app = spawn_app().await;
    app.community("raspi").await;
    let alice = app.user("alice").await;
    let topic = app.topic("raspi", &alice, "The only topic").await;
    let post = app.reply(topic, &alice, None, "the only post").await;
    let before = app.read_topic(topic, "best").await;

    for case in cases(topic, post) {
        case.run(&app, &alice).await;
    }

    let (status, _) = app.get("/healthz").await;
    assert_eq!(status, 200, "still serving");
    assert_eq!(app.read_topic(topic, "best").await, before, "the topic and its post are untouched");
    assert_eq!(app.list("/api/v1/topics?sort=new&limit=100").await.0, vec![topic], "no new topics");
    let (_, communities) = app.get("/api/v1/communities").await;
    assert_eq!(communities["communities"].as_array().map(Vec::len), Some(1), "no new communities");
    let (_, profile) = app.get("/api/v1/users/alice").await;
    assert_eq!((ids(&profile["topics"]), ids(&profile["posts"])), (vec![topic], vec![post]));
    for name in ["mallory", "ab", "mélanie"] {
        assert_eq!(app.get(&format!("/api/v1/users/{name}")).await.0, 404, "no account {name}");
    }
    // And the writer still takes writes.
    app.reply(topic, &alice, None, "still writable").await;
    app.stop().await;
}

#[tokio::test]
async fn the_largest_valid_inputs_are_accepted() {
    let app = spawn_app().await;
    app.community("raspi").await;
    let alice = app.user("alice").await;
    let title = "t".repeat(300);
    let body = "é".repeat(40_000); // characters, not bytes, are counted
    let (status, topic) =
        app.post("/api/v1/communities/raspi/topics", Some(&alice), json!({"title": title, "body": body})).await;
    assert_eq!(status, 201, "{topic}");
    assert_eq!((topic["title"].as_str(), topic["body"].as_str()), (Some(title.as_str()), Some(body.as_str())));
    let id = topic["id"].as_i64().expect("id");
    let long_post = "🥧".repeat(40_000);
    let post = app.reply(id, &alice, None, &long_post).await;
    let tabs = "line one\r\n\tline two\n";
    let (status, edited) = app.patch(&format!("/api/v1/posts/{post}"), Some(&alice), json!({"body": tabs})).await;
    assert_eq!((status, edited["body"].as_str()), (200, Some(tabs)));

    // Nesting 100,000 deep in a field the server ignores: the parser must
    // walk it without recursing itself into a stack overflow.
    let deep = format!(r#"{{"title":"deep","extra":{}{}}}"#, "[".repeat(100_000), "]".repeat(100_000));
    let reply = fetch(
        app.req(Method::POST, "/api/v1/communities/raspi/topics")
            .bearer_auth(&alice)
            .header("content-type", "application/json")
            .body(deep),
    )
    .await;
    assert_eq!((reply.status, reply.json()["title"].as_str()), (201, Some("deep")));

    for (name, password) in [("abc", "12345678"), ("A_name-of-20-chars_1", &*"p".repeat(256))] {
        let (status, body) =
            app.post("/api/v1/auth/register", None, json!({"username": name, "password": password})).await;
        assert_eq!(status, 201, "{name}: {body}");
    }
    app.stop().await;
}

#[tokio::test]
async fn a_40000_character_post_fits_the_body_limit_even_with_every_character_escaped() {
    let app = spawn_app().await;
    app.community("raspi").await;
    let alice = app.user("alice").await;
    let topic = app.topic("raspi", &alice, "Emoji").await;
    // What Python's json.dumps sends by default (ensure_ascii=True): every
    // character outside the BMP becomes a 12-byte surrogate-pair escape.
    let body = format!("{{\"body\":\"{}\"}}", "\\ud83e\\udd67".repeat(40_000));
    let reply = fetch(
        app.req(Method::POST, &format!("/api/v1/topics/{topic}/posts"))
            .bearer_auth(&alice)
            .header("content-type", "application/json")
            .body(body),
    )
    .await;
    assert_eq!(reply.status, 201, "{:?}", reply.json());
    assert_eq!(reply.json()["body"].as_str().map(|b| b.chars().count()), Some(40_000));
    app.stop().await;
}

/// Each route reads no more than its fields can use: a declared length
/// over the route's limit is refused before the body is read, and a body
/// that lies about its length is cut off at the limit.
#[tokio::test]
async fn each_route_has_its_own_body_limit() {
    let app = spawn_app().await;
    app.community("raspi").await;
    let alice = app.user("alice").await;
    let topic = app.topic("raspi", &alice, "Limits").await;
    // JSON followed by spaces up to `size` bytes: still valid JSON.
    let padded = |json: &str, size: usize| format!("{json}{}", " ".repeat(size - json.len()));
    let cases = [
        ("/api/v1/auth/login", None, padded(r#"{"username":"alice","password":"x"}"#, 9 * 1024), 413),
        ("/api/v1/auth/register", None, padded(r#"{"username":"bob","password":"x"}"#, 9 * 1024), 413),
        (&*format!("/api/v1/topics/{topic}/vote"), Some(&alice), padded(r#"{"value":1}"#, 2 * 1024), 413),
        ("/api/v1/communities", Some(&app.admin_token), padded(r#"{"name":"big","title":"t"}"#, 129 * 1024), 413),
        (&*format!("/api/v1/topics/{topic}/report"), Some(&alice), padded(r#"{"reason":"spam"}"#, 17 * 1024), 413),
        ("/api/v1/admin/invites", Some(&app.admin_token), padded("{}", 17 * 1024), 413),
        // Under the limits: the request is judged on its fields.
        (&*format!("/api/v1/topics/{topic}/vote"), Some(&alice), padded(r#"{"value":1}"#, 1000), 200),
        ("/api/v1/auth/login", None, padded(r#"{"username":"alice","password":"x"}"#, 8000), 401),
        (&*format!("/api/v1/topics/{topic}/posts"), Some(&alice), padded(r#"{"body":"big room"}"#, 400 * 1024), 201),
    ];
    for (path, token, body, want) in cases {
        let mut req = app.req(Method::POST, path).header("content-type", "application/json").body(body.clone());
        if let Some(token) = token {
            req = req.bearer_auth(token);
        }
        let reply = fetch(req).await;
        let context = format!("POST {path} with {} bytes", body.len());
        if want == 413 {
            assert_error(&context, reply.status, &reply.json(), 413, "payload_too_large");
        } else {
            assert_eq!(reply.status, want, "{context}: {:?}", reply.json());
        }
    }
    // A body longer than its Content-Length claims is cut at the limit.
    let mut socket = tokio::net::TcpStream::connect(app.addr.trim_start_matches("http://")).await.expect("connect");
    let head = format!(
        "POST /api/v1/topics/{topic}/vote HTTP/1.1\r\nHost: pith\r\nContent-Type: application/json\r\n\
         Authorization: Bearer {alice}\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
    );
    socket.write_all(head.as_bytes()).await.expect("write head");
    let chunk = " ".repeat(1500);
    let chunked = format!("{:x}\r\n{chunk}\r\n0\r\n\r\n", chunk.len());
    socket.write_all(chunked.as_bytes()).await.expect("write body");
    let mut answer = Vec::new();
    tokio::time::timeout(Duration::from_secs(20), socket.read_to_end(&mut answer))
        .await
        .expect("an answer")
        .expect("read");
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.starts_with("HTTP/1.1 413"), "a chunked body over the limit: {answer}");
    assert!(answer.contains("payload_too_large"), "{answer}");
    app.stop().await;
}

#[tokio::test]
async fn a_client_that_stalls_mid_body_gets_a_408_with_the_error_shape() {
    let app = spawn_app_with(tempfile::tempdir().expect("tempdir"), Duration::from_millis(200)).await;
    let mut socket = tokio::net::TcpStream::connect(app.addr.trim_start_matches("http://")).await.expect("connect");
    // Promise 100 bytes of body, send 10, and go quiet.
    let head = "POST /api/v1/auth/register HTTP/1.1\r\nHost: pith\r\nContent-Type: application/json\r\n\
                Content-Length: 100\r\nConnection: close\r\n\r\n{\"username";
    socket.write_all(head.as_bytes()).await.expect("write");
    let mut answer = Vec::new();
    tokio::time::timeout(Duration::from_secs(20), socket.read_to_end(&mut answer))
        .await
        .expect("the server answers a stalled request")
        .expect("read");
    let answer = String::from_utf8_lossy(&answer);
    let (head, body) = answer.split_once("\r\n\r\n").expect("an HTTP response");
    assert!(head.starts_with("HTTP/1.1 408"), "{answer}");
    assert!(head.to_ascii_lowercase().contains("content-type: application/json"), "{answer}");
    let body: Value = serde_json::from_str(body).unwrap_or(Value::Null);
    assert_error("stalled body", 408, &body, 408, "timeout");
    app.stop().await;
}
