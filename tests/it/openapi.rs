//! The OpenAPI document (`docs/openapi.json`, served at
//! `/api/v1/openapi.json`) held against the server, so neither can drift:
//!
//! - the served document is the file, parses, and is internally consistent
//!   (every `$ref` and link target exists, every schema compiles);
//! - every operation in it is routed by the server (not a route 404, not a
//!   405), and every route under `/api/v1` is in it. axum cannot list its
//!   routes, so the test reads them from the `.route("PATH", get(..).post(..))`
//!   calls in `src/api/**/*.rs` and `src/server.rs` (every API module is
//!   nested under `/api/v1`; `src/server.rs` and `src/api/metrics.rs` may
//!   hold only the top-level routes in `TOP_LEVEL_ROUTES`), and confirms each against the running server. A new
//!   route therefore needs its operation in `docs/openapi.json`, or an entry
//!   in `UNDOCUMENTED` with the reason;
//! - a scripted session (accounts, communities, topics, replies, votes,
//!   listings, search, profiles, edits, moderation, registration modes, deletes and
//!   the errors of each) gets only documented statuses, content types,
//!   headers and bodies, checked with the `jsonschema` crate against the
//!   document's schemas, and exercises every documented operation
//!   successfully at least once.
//!
//! `tests/fuzz/schemathesis.sh` then fuzzes the server from the document.

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};

use reqwest::Method;
use serde_json::{Value, json};

use crate::support::helpers::{Reply, TestApp, fetch, spawn_app, spawn_federated_app};

/// Routes under `/api/v1` deliberately left out of the document.
const UNDOCUMENTED: &[(&str, &str)] = &[
    // Live updates: a WebSocket and an event stream, described by docs/LIVE.md.
    ("GET", "/live"),
    ("GET", "/live/sse"),
];

/// Routes `src/server.rs` and `src/api/metrics.rs` add outside `/api/v1`.
const TOP_LEVEL_ROUTES: &[&str] = &["/healthz", "/metrics"];

/// The files that route outside `/api/v1`.
const TOP_LEVEL_FILES: &[&str] = &["src/server.rs", "src/api/metrics.rs"];

fn manifest_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn document() -> Value {
    let text = std::fs::read_to_string(manifest_dir().join("docs/openapi.json")).expect("read docs/openapi.json");
    serde_json::from_str(&text).expect("docs/openapi.json is JSON")
}

/// Every documented (METHOD, path template) pair.
fn documented_operations(doc: &Value) -> BTreeSet<(String, String)> {
    let mut ops = BTreeSet::new();
    for (path, item) in doc["paths"].as_object().expect("paths") {
        for (key, _) in item.as_object().expect("path item") {
            if ["get", "put", "post", "delete", "options", "head", "patch", "trace"].contains(&key.as_str()) {
                ops.insert((key.to_ascii_uppercase(), path.clone()));
            }
        }
    }
    ops
}

/// Follows a local `$ref` (`#/components/...`) to what it names.
fn resolve<'a>(doc: &'a Value, value: &'a Value) -> &'a Value {
    let mut value = value;
    while let Some(r) = value.get("$ref").and_then(Value::as_str) {
        let pointer = r.strip_prefix('#').unwrap_or_else(|| panic!("only local $refs are used: {r}"));
        value = doc.pointer(pointer).unwrap_or_else(|| panic!("$ref {r} names nothing"));
    }
    value
}

// ---------------------------------------------------------------------------
// Routes in the source.

/// Source files of the JSON API, `src/api/**/*.rs`, and the server that
/// adds `/healthz`.
fn http_sources() -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).expect("read src/api") {
            let path = entry.expect("dir entry").path();
            if path.is_dir() {
                walk(&path, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }
    let mut files = Vec::new();
    walk(&manifest_dir().join("src/api"), &mut files);
    files.push(manifest_dir().join("src/server.rs"));
    files.sort();
    files
}

/// The source without comments (string literals kept intact), so a
/// commented-out route does not count.
fn strip_comments(src: &str) -> String {
    let mut out = String::with_capacity(src.len());
    let mut chars = src.chars().peekable();
    let mut in_string = false;
    while let Some(c) = chars.next() {
        if in_string {
            out.push(c);
            match c {
                '\\' => out.extend(chars.next()),
                '"' => in_string = false,
                _ => {}
            }
        } else if c == '\'' && chars.peek() == Some(&'"') {
            // The char literal '"' opens no string.
            out.push(c);
            out.extend(chars.next());
        } else if c == '"' {
            in_string = true;
            out.push(c);
        } else if c == '/' && chars.peek() == Some(&'/') {
            for c in chars.by_ref() {
                if c == '\n' {
                    out.push('\n');
                    break;
                }
            }
        } else if c == '/' && chars.peek() == Some(&'*') {
            chars.next();
            let mut prev = ' ';
            for c in chars.by_ref() {
                if prev == '*' && c == '/' {
                    break;
                }
                prev = c;
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// The `(METHOD, path)` pairs of every `.route("PATH", METHOD_ROUTER)` call
/// in `src`, the methods read from `get(..)`, `post(..)`, `.patch(..)` and
/// so on in the method router.
fn route_calls(src: &str, file: &Path) -> Vec<(String, String)> {
    const METHODS: &[&str] = &["get", "post", "put", "patch", "delete", "head", "options", "trace"];
    let mut found = Vec::new();
    for (at, _) in src.match_indices(".route(") {
        let rest = src[at + ".route(".len()..].trim_start();
        let Some(literal) = rest.strip_prefix('"') else {
            panic!(
                "{}: a route path that is not a string literal; teach tests/it/openapi.rs to read it",
                file.display()
            )
        };
        let end = literal.find('"').expect("end of the route path");
        let path = &literal[..end];
        // The method router: up to the `)` that closes `.route(`.
        let mut depth = 1;
        let mut in_string = false;
        let mut router_end = literal.len();
        let body = &literal[end + 1..];
        let mut escaped = false;
        for (i, c) in body.char_indices() {
            if in_string {
                match (escaped, c) {
                    (true, _) => escaped = false,
                    (false, '\\') => escaped = true,
                    (false, '"') => in_string = false,
                    _ => {}
                }
                continue;
            }
            match c {
                '"' => in_string = true,
                '(' => depth += 1,
                ')' => {
                    depth -= 1;
                    if depth == 0 {
                        router_end = i;
                        break;
                    }
                }
                _ => {}
            }
        }
        let router = &body[..router_end];
        let is_ident = |c: char| c.is_ascii_alphanumeric() || c == '_';
        let mut methods = Vec::new();
        for (i, _) in router.char_indices() {
            let before_ok = router[..i].chars().next_back().is_none_or(|c| !is_ident(c));
            if !before_ok {
                continue;
            }
            let word: String = router[i..].chars().take_while(|&c| is_ident(c)).collect();
            let after = &router[i + word.len()..];
            let called = after.starts_with('(') || after.starts_with("_service(");
            if !called {
                continue;
            }
            if METHODS.contains(&word.as_str()) {
                methods.push(word.to_ascii_uppercase());
            } else if word == "any" || word == "on" || word == "any_service" || word == "on_service" {
                panic!("{}: route {path} uses `{word}(..)`; list its methods in tests/it/openapi.rs", file.display());
            }
        }
        assert!(!methods.is_empty(), "{}: no method found for route {path} in `{router}`", file.display());
        found.extend(methods.into_iter().map(|m| (m, path.to_owned())));
    }
    found
}

/// Every `(METHOD, path)` routed under `/api/v1`, read from the source.
fn routes_in_source() -> BTreeSet<(String, String)> {
    let top_level: Vec<PathBuf> = TOP_LEVEL_FILES.iter().map(|f| manifest_dir().join(f)).collect();
    let mut routes = BTreeSet::new();
    for file in http_sources() {
        let src = strip_comments(&std::fs::read_to_string(&file).expect("read source"));
        let calls = route_calls(&src, &file);
        if top_level.contains(&file) {
            for (_, path) in &calls {
                assert!(
                    TOP_LEVEL_ROUTES.contains(&path.as_str()),
                    "{} routes {path}: add it to TOP_LEVEL_ROUTES (outside /api/v1) or teach this test \
                     where it is mounted",
                    file.display()
                );
            }
        } else {
            // A route module may mount a hot route outside the `/api/v1`
            // nest under its full path (`topics::item_router`).
            routes.extend(calls.into_iter().map(|(m, p)| match p.strip_prefix("/api/v1") {
                Some(rest) => (m, rest.to_owned()),
                None => (m, p),
            }));
        }
    }
    routes
}

/// What the server answers `METHOD path` with (path parameters filled in):
/// `Err` when the route does not exist (a route 404 or a 405). Only a 404's
/// body is read, so streaming routes do not hang the probe.
async fn probe(app: &TestApp, method: &str, template: &str) -> Result<u16, String> {
    let path: String = template
        .split('/')
        .map(|seg| match seg {
            "{id}" => "1",
            s if s.starts_with('{') => "probe",
            s => s,
        })
        .collect::<Vec<_>>()
        .join("/");
    let method = Method::from_bytes(method.as_bytes()).expect("method");
    let mut req = app.req(method.clone(), &format!("/api/v1{path}"));
    if [Method::POST, Method::PUT, Method::PATCH].contains(&method) {
        req = req.json(&json!({}));
    }
    let res = req.send().await.expect("probe request");
    let status = res.status().as_u16();
    match status {
        405 => Err(format!("{method} {path}: 405")),
        404 => {
            let body: Value = res.json().await.unwrap_or(Value::Null);
            let message = body["error"]["message"].as_str().unwrap_or_default();
            if message.starts_with("route ") { Err(format!("{method} {path}: 404 {body}")) } else { Ok(404) }
        }
        s => Ok(s),
    }
}

#[tokio::test]
async fn the_served_document_is_the_file_and_holds_together() {
    let app = spawn_app().await;
    let reply = fetch(app.req(Method::GET, "/api/v1/openapi.json")).await;
    assert_eq!(reply.status, 200);
    assert_eq!(reply.header("content-type"), Some("application/json"));
    let file = std::fs::read(manifest_dir().join("docs/openapi.json")).expect("read docs/openapi.json");
    assert!(reply.bytes == file, "the server serves docs/openapi.json as it is on disk (rebuild?)");
    let doc: Value = serde_json::from_slice(&reply.bytes).expect("the document is JSON");
    assert_eq!(doc["openapi"], "3.1.0");
    assert_eq!(doc["servers"][0]["url"], "/api/v1");

    // Every local $ref names something.
    fn refs<'a>(v: &'a Value, out: &mut Vec<&'a str>) {
        match v {
            Value::Object(m) => {
                if let Some(Value::String(r)) = m.get("$ref") {
                    out.push(r);
                }
                m.values().for_each(|v| refs(v, out));
            }
            Value::Array(a) => a.iter().for_each(|v| refs(v, out)),
            _ => {}
        }
    }
    let mut all = Vec::new();
    refs(&doc, &mut all);
    assert!(!all.is_empty());
    for r in all {
        let pointer = r.strip_prefix('#').unwrap_or_else(|| panic!("non-local $ref {r}"));
        assert!(doc.pointer(pointer).is_some(), "$ref {r} names nothing");
    }

    // Operation ids are unique, links name real operations, path templates
    // and path parameters agree, and every response schema compiles.
    let mut ids = BTreeSet::new();
    let mut link_targets = Vec::new();
    let mut contract = Contract::new(doc.clone());
    for (path, item) in doc["paths"].as_object().expect("paths") {
        let shared = item.get("parameters").and_then(Value::as_array).cloned().unwrap_or_default();
        for (method, op) in item.as_object().expect("path item") {
            if method == "parameters" {
                continue;
            }
            let id = op["operationId"].as_str().unwrap_or_else(|| panic!("{method} {path}: operationId"));
            assert!(ids.insert(id.to_owned()), "duplicate operationId {id}");
            let own = op.get("parameters").and_then(Value::as_array).cloned().unwrap_or_default();
            let declared: BTreeSet<String> = shared
                .iter()
                .chain(own.iter())
                .map(|p| resolve(&doc, p))
                .filter(|p| p["in"] == "path")
                .map(|p| p["name"].as_str().expect("name").to_owned())
                .collect();
            let in_template: BTreeSet<String> = path
                .split('/')
                .filter_map(|s| s.strip_prefix('{').and_then(|s| s.strip_suffix('}')))
                .map(str::to_owned)
                .collect();
            assert_eq!(declared, in_template, "{method} {path}: path parameters");
            for (status, response) in op["responses"].as_object().expect("responses") {
                let response = resolve(&doc, response);
                if let Some(schema) = response.pointer("/content/application~1json/schema") {
                    contract.validator(schema);
                }
                for link in response.get("links").and_then(Value::as_object).into_iter().flat_map(|l| l.values()) {
                    link_targets.push((format!("{method} {path} {status}"), link["operationId"].clone()));
                }
            }
        }
    }
    for (from, target) in link_targets {
        let target = target.as_str().unwrap_or_else(|| panic!("{from}: link without operationId"));
        assert!(ids.contains(target), "{from}: link to unknown operation {target}");
    }
}

#[tokio::test]
async fn the_document_and_the_router_list_the_same_routes() {
    let app = spawn_app().await;
    let doc = document();
    let documented = documented_operations(&doc);
    let routed = routes_in_source();

    // The scanner reads real routes: a few it must see, and every one it
    // sees answers.
    for known in [("GET", "/topics/{id}"), ("PATCH", "/posts/{id}"), ("POST", "/auth/register")] {
        assert!(routed.contains(&(known.0.to_owned(), known.1.to_owned())), "scanner missed {known:?}: {routed:?}");
    }
    let mut missing = Vec::new();
    for (method, path) in &routed {
        if let Err(e) = probe(&app, method, path).await {
            missing.push(format!("read from src/api but not routed: {e}"));
        }
    }
    // The probe tells a missing route from a missing thing.
    assert!(probe(&app, "PUT", "/topics/{id}").await.is_err(), "PUT /topics/1 is a 405");
    assert!(probe(&app, "GET", "/no/such/route").await.is_err(), "an unknown path is a route 404");
    assert_eq!(probe(&app, "GET", "/topics/{id}").await, Ok(404), "a missing topic is not a missing route");

    for (method, path) in &documented {
        if let Err(e) = probe(&app, method, path).await {
            missing.push(format!("documented but not routed: {e}"));
        }
    }
    for (method, path) in &routed {
        let skipped = UNDOCUMENTED.contains(&(method.as_str(), path.as_str()));
        if !skipped && !documented.contains(&(method.clone(), path.clone())) {
            missing.push(format!(
                "routed but not in docs/openapi.json: {method} {path} (document it, or add it to UNDOCUMENTED)"
            ));
        }
    }
    for (method, path) in UNDOCUMENTED {
        let key = ((*method).to_owned(), (*path).to_owned());
        if !routed.contains(&key) {
            missing.push(format!("UNDOCUMENTED lists {method} {path}, which is no longer routed"));
        }
        if documented.contains(&key) {
            missing.push(format!("UNDOCUMENTED lists {method} {path}, which the document describes"));
        }
    }
    assert!(missing.is_empty(), "the document and the router disagree:\n{}", missing.join("\n"));
}

// ---------------------------------------------------------------------------
// Responses against the document.

/// Checks responses against the document: status, content type, required
/// headers and body schema of the operation that served them.
struct Contract {
    doc: Value,
    validators: HashMap<String, jsonschema::Validator>,
}

impl Contract {
    fn new(doc: Value) -> Self {
        Contract { doc, validators: HashMap::new() }
    }

    /// A validator for `schema`, whose `$ref`s point into the document's
    /// components.
    fn validator(&mut self, schema: &Value) -> &jsonschema::Validator {
        let key = schema.to_string();
        if !self.validators.contains_key(&key) {
            let mut root = match schema {
                Value::Object(m) => m.clone(),
                other => panic!("a schema that is not an object: {other}"),
            };
            root.insert("$schema".into(), json!("https://json-schema.org/draft/2020-12/schema"));
            root.insert("components".into(), self.doc["components"].clone());
            let validator = jsonschema::options()
                .with_draft(jsonschema::Draft::Draft202012)
                .should_validate_formats(true)
                .build(&Value::Object(root))
                .unwrap_or_else(|e| panic!("schema {schema} does not compile: {e}"));
            self.validators.insert(key.clone(), validator);
        }
        &self.validators[&key]
    }

    /// The documented path template that `path` (no query) falls under;
    /// literal segments win over parameters.
    fn template(&self, path: &str) -> String {
        let segs: Vec<&str> = path.split('/').collect();
        let mut best: Option<(usize, &String)> = None;
        for template in self.doc["paths"].as_object().expect("paths").keys() {
            let tsegs: Vec<&str> = template.split('/').collect();
            if tsegs.len() != segs.len() {
                continue;
            }
            let fits = tsegs.iter().zip(&segs).all(|(t, s)| t.starts_with('{') || t == s);
            let literals = tsegs.iter().filter(|t| !t.starts_with('{')).count();
            if fits && best.is_none_or(|(n, _)| literals > n) {
                best = Some((literals, template));
            }
        }
        best.unwrap_or_else(|| panic!("no documented path matches {path}")).1.clone()
    }

    /// Panics unless `reply` is a documented response of `method template`.
    fn check(&mut self, method: &Method, template: &str, reply: &Reply) {
        let context = format!("{method} {template} -> {}", reply.status);
        let op = self.doc["paths"][template][method.as_str().to_ascii_lowercase()].clone();
        assert!(op.is_object(), "{context}: the operation is not documented");
        let response =
            op["responses"].get(reply.status.to_string()).or_else(|| op["responses"].get("default")).unwrap_or_else(
                || panic!("{context}: status not documented; body {}", String::from_utf8_lossy(&reply.bytes)),
            );
        let response = resolve(&self.doc, response).clone();

        for (name, header) in response.get("headers").and_then(Value::as_object).into_iter().flatten() {
            let header = resolve(&self.doc, header).clone();
            let value = reply.header(name);
            if header["required"] == true {
                assert!(value.is_some(), "{context}: required header {name} is missing");
            }
            if let Some(value) = value {
                let validator = self.validator(&header["schema"]);
                let errors: Vec<String> = validator.iter_errors(&json!(value)).map(|e| e.to_string()).collect();
                assert!(errors.is_empty(), "{context}: header {name}: {value:?}: {errors:?}");
            }
        }

        match response.pointer("/content/application~1json/schema") {
            Some(schema) => {
                let content_type = reply.header("content-type").unwrap_or_default();
                assert!(content_type.starts_with("application/json"), "{context}: content type {content_type:?}");
                let bytes = if reply.header("content-encoding") == Some("gzip") {
                    let mut plain = Vec::new();
                    std::io::Read::read_to_end(&mut flate2::read::GzDecoder::new(&reply.bytes[..]), &mut plain)
                        .unwrap_or_else(|e| panic!("{context}: a gzip body that does not decompress: {e}"));
                    plain
                } else {
                    reply.bytes.clone()
                };
                let body: Value = serde_json::from_slice(&bytes)
                    .unwrap_or_else(|e| panic!("{context}: body is not JSON ({e}): {:?}", reply.bytes));
                let validator = self.validator(&schema.clone());
                let errors: Vec<String> =
                    validator.iter_errors(&body).map(|e| format!("{} at {}", e, e.instance_path())).collect();
                assert!(errors.is_empty(), "{context}: body does not match the document: {errors:#?}\nbody: {body}");
            }
            None => assert!(reply.bytes.is_empty(), "{context}: a body where none is documented: {:?}", reply.bytes),
        }
    }
}

/// A client that checks every response against the document and records
/// which operations answered what.
struct Api<'a> {
    app: &'a TestApp,
    contract: Contract,
    seen: BTreeSet<(String, String, u16)>,
}

impl<'a> Api<'a> {
    fn new(app: &'a TestApp) -> Self {
        Api { app, contract: Contract::new(document()), seen: BTreeSet::new() }
    }

    /// Sends `method /api/v1{path}` as `build` finishes it, checks the
    /// response against the document and that its status is `want`.
    async fn raw(
        &mut self,
        method: Method,
        path: &str,
        build: impl FnOnce(reqwest::RequestBuilder) -> reqwest::RequestBuilder,
        want: u16,
    ) -> Reply {
        let template = self.contract.template(path.split('?').next().unwrap_or_default());
        let reply = fetch(build(self.app.req(method.clone(), &format!("/api/v1{path}")))).await;
        assert_eq!(reply.status, want, "{method} {path}: {}", String::from_utf8_lossy(&reply.bytes));
        self.contract.check(&method, &template, &reply);
        self.seen.insert((method.to_string(), template, reply.status));
        reply
    }

    /// A JSON request, with a bearer token when given; the JSON answer.
    async fn call(&mut self, method: Method, path: &str, token: Option<&str>, body: Option<Value>, want: u16) -> Value {
        let build = |mut req: reqwest::RequestBuilder| {
            if let Some(t) = token {
                req = req.bearer_auth(t);
            }
            if let Some(b) = &body {
                req = req.json(b);
            }
            req
        };
        self.raw(method, path, build, want).await.json()
    }

    /// Every documented operation answered with a 2xx at least once.
    fn assert_every_operation_succeeded(&self) {
        let ok: BTreeSet<(String, String)> = self
            .seen
            .iter()
            .filter(|(_, _, status)| (200..300).contains(status))
            .map(|(m, p, _)| (m.clone(), p.clone()))
            .collect();
        let missed: Vec<_> = documented_operations(&self.contract.doc).difference(&ok).cloned().collect();
        assert!(missed.is_empty(), "the scripted session never succeeded at {missed:?}: extend it");
    }
}

fn id(v: &Value) -> i64 {
    v["id"].as_i64().unwrap_or_else(|| panic!("no id in {v}"))
}

#[tokio::test]
async fn a_scripted_session_gets_only_documented_responses() {
    let app = spawn_app().await;
    let mut api = Api::new(&app);
    let admin = app.admin_token.clone();
    let (get, post, patch, delete) = (Method::GET, Method::POST, Method::PATCH, Method::DELETE);

    api.call(get.clone(), "/openapi.json", None, None, 200).await;

    // Accounts.
    let creds = json!({"username": "alice", "password": "password123"});
    let session = api.call(post.clone(), "/auth/register", None, Some(creds.clone()), 201).await;
    let alice = session["token"].as_str().expect("token").to_owned();
    let taken = json!({"username": "ALICE", "password": "password123"});
    api.call(post.clone(), "/auth/register", None, Some(taken), 409).await;
    let look_alike = json!({"username": "aIice", "password": "password123"});
    let refused = api.call(post.clone(), "/auth/register", None, Some(look_alike), 409).await;
    assert_eq!(refused["error"]["code"], "username_too_similar");
    let spaced = json!({"username": "a b", "password": "password123"});
    api.call(post.clone(), "/auth/register", None, Some(spaced), 422).await;
    let short = json!({"username": "carol", "password": "short"});
    api.call(post.clone(), "/auth/register", None, Some(short), 422).await;
    api.call(post.clone(), "/auth/register", None, Some(json!({"username": "carol"})), 422).await;
    let session = api.call(post.clone(), "/auth/login", None, Some(creds), 200).await;
    let alice2 = session["token"].as_str().expect("token").to_owned();
    let wrong = json!({"username": "alice", "password": "password124"});
    api.call(post.clone(), "/auth/login", None, Some(wrong), 401).await;
    let me = api.call(get.clone(), "/auth/me", Some(&alice), None, 200).await;
    assert_eq!(me["name"], "alice");
    api.call(get.clone(), "/auth/me", None, None, 401).await;
    api.call(get.clone(), "/auth/me", Some("not-a-token"), None, 401).await;
    let bob = app.user("bob").await;

    // Communities.
    let raspi = json!({"name": "raspi", "title": "The Pi", "description": "Small computers"});
    api.call(post.clone(), "/communities", Some(&admin), Some(raspi.clone()), 201).await;
    api.call(post.clone(), "/communities", Some(&admin), Some(raspi.clone()), 409).await;
    api.call(post.clone(), "/communities", Some(&alice), Some(json!({"name": "mine", "title": "Mine"})), 403).await;
    api.call(post.clone(), "/communities", None, Some(raspi), 401).await;
    let caps = json!({"name": "No Caps", "title": "x"});
    api.call(post.clone(), "/communities", Some(&admin), Some(caps), 422).await;
    api.call(get.clone(), "/communities", None, None, 200).await;
    api.call(get.clone(), "/communities/raspi", None, None, 200).await;
    api.call(get.clone(), "/communities/RasPi", None, None, 200).await;
    api.call(get.clone(), "/communities/nope", None, None, 404).await;
    api.call(get.clone(), "/communities/%FF", None, None, 400).await;

    // Topics.
    let new = json!({"title": "  Hello  ", "body": "First!", "url": "https://example.org/x"});
    let topic = api.call(post.clone(), "/communities/raspi/topics", Some(&alice), Some(new), 201).await;
    assert_eq!(topic["title"], "Hello");
    let t = id(&topic);
    let link = json!({"title": "Just a link", "url": "http://example.org", "body": "  "});
    let link = api.call(post.clone(), "/communities/raspi/topics", Some(&alice), Some(link), 201).await;
    assert_eq!(link["body"], Value::Null);
    let gone = id(&link);
    for bad in [json!({"title": "   "}), json!({"title": 5}), json!({"title": "x", "url": "javascript:alert(1)"})] {
        api.call(post.clone(), "/communities/raspi/topics", Some(&alice), Some(bad), 422).await;
    }
    let hi = json!({"title": "Hi"});
    api.call(post.clone(), "/communities/nope/topics", Some(&alice), Some(hi.clone()), 404).await;
    api.call(post.clone(), "/communities/raspi/topics", None, Some(hi), 401).await;

    // Replies.
    let posts = format!("/topics/{t}/posts");
    let p1 = id(&api.call(post.clone(), &posts, Some(&bob), Some(json!({"body": "Hi alice"})), 201).await);
    let reply = json!({"body": "Hi bob", "parent_id": p1});
    let p2 = id(&api.call(post.clone(), &posts, Some(&alice), Some(reply), 201).await);
    for parent in [-1, 0, i64::MAX] {
        let orphan = json!({"body": "x", "parent_id": parent});
        api.call(post.clone(), &posts, Some(&alice), Some(orphan), 422).await;
    }
    api.call(post.clone(), &posts, Some(&alice), Some(json!({"body": " \n "})), 422).await;
    for missing in ["/topics/0/posts", "/topics/-5/posts", "/topics/999999/posts"] {
        api.call(post.clone(), missing, Some(&alice), Some(json!({"body": "x"})), 404).await;
    }
    api.call(post.clone(), "/topics/abc/posts", Some(&alice), Some(json!({"body": "x"})), 400).await;

    // Votes.
    let vote = api.call(post.clone(), &format!("/topics/{t}/vote"), Some(&bob), Some(json!({"value": 1})), 200).await;
    assert_eq!(vote, json!({"score": 1, "vote": 1}));
    let down = json!({"value": -1});
    api.call(post.clone(), &format!("/posts/{p1}/vote"), Some(&alice), Some(down), 200).await;
    let withdraw = json!({"value": 0});
    api.call(post.clone(), &format!("/posts/{p1}/vote"), Some(&alice), Some(withdraw), 200).await;
    for bad in [json!({"value": 2}), json!({"value": "up"}), json!({})] {
        api.call(post.clone(), &format!("/topics/{t}/vote"), Some(&bob), Some(bad), 422).await;
    }
    api.call(post.clone(), "/topics/999999/vote", Some(&bob), Some(json!({"value": 1})), 404).await;
    api.call(post.clone(), "/posts/999999/vote", Some(&bob), Some(json!({"value": 1})), 404).await;
    api.call(post.clone(), &format!("/posts/{p1}/vote"), None, Some(json!({"value": 1})), 401).await;

    // The inbox: Alice hears of Bob's replies to her topic.
    let replies = format!("/topics/{gone}/posts");
    api.call(post.clone(), &replies, Some(&bob), Some(json!({"body": "thanks @alice"})), 201).await;
    api.call(post.clone(), &replies, Some(&bob), Some(json!({"body": "and again"})), 201).await;
    let inbox = api.call(get.clone(), "/inbox?limit=1", Some(&alice), None, 200).await;
    let first = id(&inbox["items"][0]);
    let next = inbox["next"].as_i64().expect("a second page");
    api.call(get.clone(), &format!("/inbox?unread=true&after={next}"), Some(&alice), None, 200).await;
    api.call(get.clone(), "/inbox?after=abc", Some(&alice), None, 400).await;
    api.call(get.clone(), "/inbox", None, None, 401).await;
    api.call(post.clone(), "/inbox/read", Some(&alice), Some(json!({"ids": [first]})), 200).await;
    api.call(post.clone(), "/inbox/read", Some(&alice), Some(json!({"all": true})), 200).await;
    api.call(post.clone(), "/inbox/read", Some(&alice), Some(json!({"ids": []})), 400).await;
    api.call(post.clone(), "/inbox/read", Some(&alice), Some(json!({"ids": "x"})), 422).await;
    api.call(post.clone(), "/inbox/read", None, Some(json!({"all": true})), 401).await;

    // Reads: the topic page and its cache validators.
    let page = api.raw(get.clone(), &format!("/topics/{t}"), |r| r, 200).await;
    let etag = page.header("etag").expect("etag").to_owned();
    assert_eq!(page.json()["posts"].as_array().map(Vec::len), Some(2));
    api.raw(get.clone(), &format!("/topics/{t}"), |r| r.header("if-none-match", etag), 304).await;
    api.raw(get.clone(), &format!("/topics/{t}?sort=old"), |r| r.header("accept-encoding", "gzip"), 200).await;
    api.call(get.clone(), &format!("/topics/{t}?sort=new"), None, None, 200).await;
    api.call(get.clone(), &format!("/topics/{t}?sort=top"), None, None, 400).await;
    for missing in ["/topics/0", "/topics/-1", "/topics/999999"] {
        api.call(get.clone(), missing, None, None, 404).await;
    }
    api.call(get.clone(), "/topics/abc", None, None, 400).await;
    api.call(get.clone(), "/topics/99999999999999999999", None, None, 400).await;

    // Listings.
    let first = api.call(get.clone(), "/topics?sort=new&limit=1", None, None, 200).await;
    let next = first["next"].as_str().expect("a second page").to_owned();
    api.call(get.clone(), &format!("/topics?sort=new&limit=1&after={next}"), None, None, 200).await;
    api.call(get.clone(), &format!("/topics?sort=hot&after={next}"), None, None, 400).await;
    for q in ["", "?sort=hot", "?sort=top&t=all", "?sort=top&t=week&limit=100"] {
        api.call(get.clone(), &format!("/topics{q}"), None, None, 200).await;
    }
    for q in ["?sort=best", "?t=decade", "?limit=0", "?limit=101", "?limit=x", "?after=garbage", "?limit=1&limit=2"] {
        api.call(get.clone(), &format!("/topics{q}"), None, None, 400).await;
    }
    api.call(get.clone(), "/communities/raspi/topics?sort=top&t=month", None, None, 200).await;
    api.call(get.clone(), "/communities/raspi/topics?sort=sideways", None, None, 400).await;
    api.call(get.clone(), "/communities/nope/topics", None, None, 404).await;

    // Search.
    let hits = api.call(get.clone(), "/search?q=hello", None, None, 200).await;
    assert_eq!(hits["hits"][0]["topic"]["id"], t);
    let page = api.call(get.clone(), "/search?q=hi&type=posts&community=raspi&limit=1", None, None, 200).await;
    assert_eq!((page["hits"][0]["type"].as_str(), page["next"].as_i64()), (Some("post"), Some(1)));
    api.call(get.clone(), "/search?q=hi&type=posts&after=1", None, None, 200).await;
    api.call(get.clone(), &format!("/search?q={}", "%22NEAR(%20-%5E".repeat(20)), None, None, 200).await;
    for q in ["", "?q=x&type=all", "?q=x&limit=0", "?q=x&after=1001", &format!("?q={}", "x".repeat(201))] {
        api.call(get.clone(), &format!("/search{q}"), None, None, 400).await;
    }
    api.call(get.clone(), "/search?q=x&community=nope", None, None, 404).await;

    // Profiles.
    let profile = api.call(get.clone(), "/users/alice", None, None, 200).await;
    assert_eq!(profile["topics"].as_array().map(Vec::len), Some(2));
    api.call(get.clone(), "/users/bob", None, None, 200).await;
    api.call(get.clone(), "/users/nobody", None, None, 404).await;
    api.call(get.clone(), "/users/%FF", None, None, 400).await;

    // Edits.
    let p1_path = format!("/posts/{p1}");
    let edited = api.call(patch.clone(), &p1_path, Some(&bob), Some(json!({"body": "edited"})), 200).await;
    assert!(edited["edited_at"].is_string());
    api.call(patch.clone(), &p1_path, Some(&alice), Some(json!({"body": "mine now"})), 403).await;
    api.call(patch.clone(), &p1_path, None, Some(json!({"body": "anon"})), 401).await;
    api.call(patch.clone(), &p1_path, Some(&bob), Some(json!({"body": ""})), 422).await;
    api.call(patch.clone(), "/posts/0", Some(&bob), Some(json!({"body": "x"})), 404).await;
    let t_path = format!("/topics/{t}");
    let cleared = api.call(patch.clone(), &t_path, Some(&alice), Some(json!({"body": null})), 200).await;
    assert_eq!(cleared["body"], Value::Null);
    api.call(patch.clone(), &t_path, Some(&alice), Some(json!({"body": "again"})), 200).await;
    api.call(patch.clone(), &t_path, Some(&alice), Some(json!({})), 422).await;
    api.call(patch.clone(), &t_path, Some(&bob), Some(json!({"body": "mine now"})), 403).await;
    api.call(patch.clone(), "/topics/0", Some(&alice), Some(json!({"body": "x"})), 404).await;

    // Moderation: moderators, removals (and the views they make), locks.
    let put = Method::PUT;
    let moddy = app.user("moddy").await;
    api.call(get.clone(), "/communities/raspi/moderators", None, None, 200).await;
    api.call(get.clone(), "/communities/nope/moderators", None, None, 404).await;
    api.call(put.clone(), "/communities/raspi/moderators/moddy", Some(&admin), None, 204).await;
    api.call(put.clone(), "/communities/raspi/moderators/moddy", Some(&bob), None, 403).await;
    api.call(put.clone(), "/communities/raspi/moderators/nobody", Some(&admin), None, 404).await;
    let reason = json!({"reason": "off topic"});
    api.call(post.clone(), &format!("/posts/{p1}/remove"), Some(&moddy), Some(reason.clone()), 204).await;
    api.call(post.clone(), &format!("/posts/{p1}/remove"), Some(&bob), Some(reason.clone()), 403).await;
    api.call(post.clone(), "/posts/999999/remove", Some(&moddy), Some(reason.clone()), 404).await;
    let public = api.call(get.clone(), &t_path, None, None, 200).await;
    let hidden = public["posts"].as_array().expect("posts").iter().find(|p| p["id"] == p1).cloned();
    assert_eq!(hidden.map(|p| (p["removed"].clone(), p["body"].clone())), Some((json!(true), json!(""))));
    let own = api.raw(get.clone(), &t_path, |r| r.bearer_auth(&bob), 200).await;
    assert_eq!(own.header("cache-control"), Some("private, no-cache"));
    api.call(post.clone(), &format!("/posts/{p1}/restore"), Some(&moddy), Some(json!({})), 204).await;
    api.call(post.clone(), &format!("/topics/{t}/lock"), Some(&moddy), Some(reason.clone()), 204).await;
    api.call(post.clone(), &posts, Some(&bob), Some(json!({"body": "locked?"})), 403).await;
    api.call(post.clone(), &format!("/topics/{t}/unlock"), Some(&moddy), Some(json!({"reason": null})), 204).await;
    api.call(post.clone(), &format!("/topics/{t}/remove"), Some(&moddy), Some(reason.clone()), 204).await;
    api.call(get.clone(), &t_path, None, None, 404).await;
    api.call(post.clone(), &format!("/topics/{t}/restore"), Some(&moddy), Some(reason.clone()), 204).await;
    let long = json!({"reason": "x".repeat(501)});
    api.call(post.clone(), &format!("/topics/{t}/lock"), Some(&moddy), Some(long), 422).await;

    // Reports.
    let rude = json!({"reason": "rude"});
    let report = api.call(post.clone(), &format!("/posts/{p1}/report"), Some(&alice), Some(rude.clone()), 201).await;
    api.call(post.clone(), &format!("/posts/{p1}/report"), Some(&alice), Some(rude), 409).await;
    api.call(post.clone(), &format!("/topics/{t}/report"), Some(&bob), Some(json!({"reason": "spam"})), 201).await;
    api.call(post.clone(), &format!("/topics/{t}/report"), Some(&bob), Some(json!({"reason": " "})), 422).await;
    api.call(post.clone(), "/topics/999999/report", Some(&bob), Some(json!({"reason": "spam"})), 404).await;
    api.call(get.clone(), "/communities/raspi/reports", Some(&moddy), None, 200).await;
    api.call(get.clone(), "/communities/raspi/reports?status=all&limit=1", Some(&moddy), None, 200).await;
    api.call(get.clone(), "/communities/raspi/reports", Some(&alice), None, 403).await;
    api.call(get.clone(), "/communities/raspi/reports?status=new", Some(&moddy), None, 400).await;
    let report_path = format!("/reports/{}", id(&report));
    api.call(patch.clone(), &report_path, Some(&moddy), Some(json!({"status": "dismissed"})), 200).await;
    api.call(patch.clone(), &report_path, Some(&alice), Some(json!({"status": "resolved"})), 403).await;
    api.call(patch.clone(), "/reports/999999", Some(&moddy), Some(json!({"status": "resolved"})), 404).await;

    // Bans, in a community and site-wide.
    let ban = json!({"username": "bob", "reason": "flaming", "duration_secs": 3600});
    api.call(post.clone(), "/communities/raspi/bans", Some(&moddy), Some(ban), 201).await;
    api.call(post.clone(), &posts, Some(&bob), Some(json!({"body": "banned?"})), 403).await;
    api.call(post.clone(), &format!("/topics/{t}/vote"), Some(&bob), Some(json!({"value": 1})), 403).await;
    api.call(get.clone(), "/communities/raspi/bans", Some(&moddy), None, 200).await;
    api.call(get.clone(), "/communities/raspi/bans", Some(&bob), None, 403).await;
    api.call(delete.clone(), "/communities/raspi/bans/bob", Some(&moddy), None, 204).await;
    api.call(delete.clone(), "/communities/raspi/bans/bob", Some(&moddy), None, 404).await;
    let zero = json!({"username": "bob", "duration_secs": 0});
    api.call(post.clone(), "/communities/raspi/bans", Some(&moddy), Some(zero), 422).await;
    api.call(post.clone(), "/admin/bans", Some(&admin), Some(json!({"username": "bob"})), 201).await;
    api.call(post.clone(), "/admin/bans", Some(&moddy), Some(json!({"username": "bob"})), 403).await;
    api.call(post.clone(), "/communities/raspi/topics", Some(&bob), Some(json!({"title": "x"})), 403).await;
    api.call(get.clone(), "/admin/bans", Some(&admin), None, 200).await;
    api.call(delete.clone(), "/admin/bans/bob", Some(&admin), None, 204).await;
    api.call(delete.clone(), "/admin/bans/bob", Some(&admin), None, 404).await;

    // The public moderation log.
    let log = api.call(get.clone(), "/communities/raspi/modlog?limit=2", None, None, 200).await;
    let next = log["next"].as_i64().expect("a second page");
    api.call(get.clone(), &format!("/communities/raspi/modlog?after={next}"), None, None, 200).await;
    api.call(get.clone(), "/modlog", None, None, 200).await;
    api.call(get.clone(), "/modlog?limit=101", None, None, 400).await;
    api.call(get.clone(), "/communities/nope/modlog", None, None, 404).await;
    api.call(delete.clone(), "/communities/raspi/moderators/moddy", Some(&admin), None, 204).await;
    api.call(delete.clone(), "/communities/raspi/moderators/moddy", Some(&admin), None, 404).await;

    // Registration by invitation.
    api.call(get.clone(), "/admin/settings", Some(&admin), None, 200).await;
    api.call(get.clone(), "/admin/settings", Some(&alice), None, 403).await;
    api.call(put.clone(), "/admin/settings", Some(&admin), Some(json!({"registration": "invite"})), 200).await;
    let dan = json!({"username": "dan", "password": "password123"});
    api.call(post.clone(), "/auth/register", None, Some(dan), 403).await;
    let invite =
        api.call(post.clone(), "/admin/invites", Some(&admin), Some(json!({"expires_in_secs": 60})), 201).await;
    let dan = json!({"username": "dan", "password": "password123", "invite": invite["code"]});
    api.call(post.clone(), "/auth/register", None, Some(dan), 201).await;
    api.call(post.clone(), "/admin/invites", Some(&alice), Some(json!({})), 403).await;
    api.call(put.clone(), "/admin/settings", Some(&admin), Some(json!({"registration": "open"})), 200).await;

    // Bodies that are not what the API takes.
    let bob_token: &str = &bob;
    let json_type = |body: &'static str| {
        move |r: reqwest::RequestBuilder| r.bearer_auth(bob_token).header("content-type", "application/json").body(body)
    };
    api.raw(post.clone(), &posts, json_type("{\"body\": "), 400).await;
    api.raw(post.clone(), &posts, json_type("[]"), 422).await;
    api.raw(post.clone(), &posts, json_type("null"), 422).await;
    let plain = |r: reqwest::RequestBuilder| r.bearer_auth(&alice).header("content-type", "text/plain").body("{}");
    api.raw(post.clone(), &posts, plain, 415).await;
    let huge = format!("{{\"body\":\"{}\"}}", "a".repeat(pith::net::MAX_BODY_BYTES + 1));
    let too_big =
        |r: reqwest::RequestBuilder| r.bearer_auth(&alice).header("content-type", "application/json").body(huge);
    api.raw(post.clone(), &posts, too_big, 413).await;
    let big_head = |r: reqwest::RequestBuilder| r.header("x-padding", "a".repeat(32 * 1024));
    api.raw(get.clone(), "/communities", big_head, 431).await;

    // Deletes: the thread keeps deleted posts in place.
    let p2_path = format!("/posts/{p2}");
    api.call(delete.clone(), &p2_path, Some(&bob), None, 403).await;
    api.call(delete.clone(), &p2_path, None, None, 401).await;
    api.call(delete.clone(), &p2_path, Some(&alice), None, 204).await;
    api.call(delete.clone(), &p2_path, Some(&alice), None, 404).await;
    api.call(post.clone(), &format!("{p2_path}/vote"), Some(&bob), Some(json!({"value": 1})), 422).await;
    api.call(delete.clone(), "/posts/abc", Some(&alice), None, 400).await;
    let thread = api.call(get.clone(), &t_path, None, None, 200).await;
    let deleted = thread["posts"].as_array().expect("posts").iter().find(|p| p["id"] == p2).cloned();
    assert_eq!(deleted.map(|p| (p["deleted"].clone(), p["author"].clone())), Some((json!(true), Value::Null)));
    let gone_path = format!("/topics/{gone}");
    api.call(delete.clone(), &gone_path, Some(&bob), None, 403).await;
    api.call(delete.clone(), &gone_path, Some(&alice), None, 204).await;
    api.call(delete.clone(), &gone_path, Some(&alice), None, 404).await;
    api.call(get.clone(), &gone_path, None, None, 200).await;
    api.call(post.clone(), &format!("{gone_path}/posts"), Some(&bob), Some(json!({"body": "late"})), 422).await;
    api.call(post.clone(), &format!("{gone_path}/vote"), Some(&bob), Some(json!({"value": 1})), 422).await;
    api.call(delete.clone(), "/topics/abc", Some(&alice), None, 400).await;
    api.call(delete.clone(), &t_path, None, None, 401).await;

    // Logging out revokes the token at once.
    api.call(post.clone(), "/auth/logout", Some(&alice2), None, 204).await;
    api.call(get.clone(), "/auth/me", Some(&alice2), None, 401).await;
    api.call(post.clone(), "/auth/logout", Some(&alice2), None, 401).await;
    api.call(get.clone(), "/auth/me", Some(&alice), None, 200).await;

    // Sessions and the password (issue 26).
    let session = api
        .call(post.clone(), "/auth/login", None, Some(json!({"username": "alice", "password": "password123"})), 200)
        .await;
    let alice3 = session["token"].as_str().expect("token").to_owned();
    let mine = api.call(get.clone(), "/me/sessions", Some(&alice3), None, 200).await;
    let current =
        mine["sessions"].as_array().expect("sessions").iter().find(|s| s["current"] == true).expect("current");
    let path = format!("/me/sessions/{}", current["id"].as_str().expect("id"));
    api.call(get.clone(), "/me/sessions", None, None, 401).await;
    api.call(delete.clone(), &path, None, None, 401).await;
    api.call(delete.clone(), &path, Some(&bob), None, 404).await;
    api.call(delete.clone(), &path, Some(&alice), None, 204).await;
    api.call(delete.clone(), &path, Some(&alice), None, 404).await;
    api.call(get.clone(), "/auth/me", Some(&alice3), None, 401).await;
    let change = |current: &str, new: &str| Some(json!({"current": current, "new": new}));
    api.call(post.clone(), "/me/password", Some(&alice), change("password124", "newpass456"), 403).await;
    api.call(post.clone(), "/me/password", Some(&alice), change("password123", "short"), 422).await;
    api.call(post.clone(), "/me/password", Some(&alice), Some(json!({"current": "password123"})), 422).await;
    api.call(post.clone(), "/me/password", None, change("password123", "newpass456"), 401).await;
    api.call(post.clone(), "/me/password", Some(&bob), change("", "newpass456"), 403).await;
    api.call(post.clone(), "/me/password", Some(&alice), change("password123", "newpass456"), 200).await;
    api.call(post.clone(), "/me/sessions/revoke-others", Some(&alice), None, 200).await;
    api.call(post.clone(), "/me/sessions/revoke-others", None, None, 401).await;
    api.call(get.clone(), "/auth/me", Some(&alice), None, 200).await;

    // Saves and community blocks (issue #21): idempotent, 204 each time.
    for _ in 0..2 {
        api.call(post.clone(), &format!("/topics/{t}/save"), Some(&bob), None, 204).await;
        api.call(post.clone(), &format!("/posts/{p1}/save"), Some(&bob), None, 204).await;
        api.call(post.clone(), "/communities/raspi/block", Some(&bob), None, 204).await;
    }
    let saved = api.call(get.clone(), "/saved", Some(&bob), None, 200).await;
    assert_eq!(saved["items"].as_array().map(Vec::len), Some(2), "{saved}");
    api.call(get.clone(), "/saved?after=", Some(&bob), None, 200).await;
    api.call(get.clone(), "/saved?after=nonsense", Some(&bob), None, 400).await;
    api.call(get.clone(), "/saved", None, None, 401).await;
    api.call(get.clone(), "/topics", Some(&bob), None, 200).await;
    for _ in 0..2 {
        api.call(delete.clone(), &format!("/topics/{t}/save"), Some(&bob), None, 204).await;
        api.call(delete.clone(), &format!("/posts/{p1}/save"), Some(&bob), None, 204).await;
        api.call(delete.clone(), "/communities/raspi/block", Some(&bob), None, 204).await;
    }
    api.call(post.clone(), "/topics/999999/save", Some(&bob), None, 404).await;
    api.call(delete.clone(), "/posts/999999/save", Some(&bob), None, 404).await;
    api.call(post.clone(), "/communities/nope/block", Some(&bob), None, 404).await;
    api.call(post.clone(), &format!("/topics/{t}/save"), None, None, 401).await;
    api.call(delete.clone(), "/communities/raspi/block", None, None, 401).await;
    api.call(post.clone(), "/posts/abc/save", Some(&bob), None, 400).await;

    // Private messages, their reports and user blocks (issue #21).
    let message = |to: &str, body: &str| Some(json!({"to": to, "body": body}));
    let sent = api.call(post.clone(), "/messages", Some(&alice), message("bob", "hi *bob*"), 201).await;
    let m = id(&sent);
    api.call(post.clone(), "/messages", Some(&alice), message("ALICE", "me"), 422).await;
    api.call(post.clone(), "/messages", Some(&alice), message("bob", " "), 422).await;
    api.call(post.clone(), "/messages", Some(&alice), Some(json!({"to": "bob"})), 422).await;
    api.call(post.clone(), "/messages", Some(&alice), message("nobody", "x"), 404).await;
    api.call(post.clone(), "/messages", None, message("bob", "x"), 401).await;
    api.call(get.clone(), "/messages", Some(&bob), None, 200).await;
    api.call(get.clone(), "/messages?after=0", Some(&bob), None, 400).await;
    api.call(get.clone(), "/messages", None, None, 401).await;
    api.call(get.clone(), "/messages/alice?limit=1", Some(&bob), None, 200).await;
    api.call(get.clone(), "/messages/nobody", Some(&bob), None, 404).await;
    let reason = || Some(json!({"reason": "spam"}));
    api.call(post.clone(), &format!("/messages/{m}/report"), Some(&alice), reason(), 404).await;
    api.call(post.clone(), "/messages/abc/report", Some(&bob), reason(), 400).await;
    api.call(post.clone(), &format!("/messages/{m}/report"), Some(&bob), Some(json!({"reason": ""})), 422).await;
    let report = api.call(post.clone(), &format!("/messages/{m}/report"), Some(&bob), reason(), 201).await;
    api.call(post.clone(), &format!("/messages/{m}/report"), Some(&bob), reason(), 409).await;
    api.call(get.clone(), "/admin/message-reports", Some(&bob), None, 403).await;
    api.call(get.clone(), "/admin/message-reports?status=nope", Some(&admin), None, 400).await;
    api.call(get.clone(), "/admin/message-reports?status=open", Some(&admin), None, 200).await;
    let resolve = |status: &str| Some(json!({"status": status}));
    let reports = format!("/admin/message-reports/{}", id(&report));
    api.call(patch.clone(), &reports, Some(&bob), resolve("resolved"), 403).await;
    api.call(patch.clone(), &reports, Some(&admin), resolve("open"), 422).await;
    api.call(patch.clone(), "/admin/message-reports/999999", Some(&admin), resolve("resolved"), 404).await;
    api.call(patch.clone(), &reports, Some(&admin), resolve("resolved"), 200).await;
    for _ in 0..2 {
        api.call(post.clone(), "/users/Alice/block", Some(&bob), None, 204).await;
    }
    let refused = api.call(post.clone(), "/messages", Some(&alice), message("bob", "again"), 403).await;
    assert_eq!(refused["error"]["code"], "blocked");
    let blocks = api.call(get.clone(), "/me/blocks", Some(&bob), None, 200).await;
    assert_eq!(blocks["users"], json!(["alice"]));
    api.call(get.clone(), "/me/blocks", None, None, 401).await;
    api.call(post.clone(), "/users/bob/block", Some(&bob), None, 422).await;
    api.call(post.clone(), "/users/nobody/block", Some(&bob), None, 404).await;
    api.call(delete.clone(), "/users/alice/block", None, None, 401).await;
    for _ in 0..2 {
        api.call(delete.clone(), "/users/alice/block", Some(&bob), None, 204).await;
    }
    // Email (issue #21): refused without SMTP, then against a real sink.
    let reset = |email: &str| Some(json!({"email": email}));
    api.call(post.clone(), "/auth/password-reset", None, reset("dora@example.org"), 403).await;
    let sink = crate::support::smtp::Sink::start().await;
    app.state.web.set_public_url(&app.addr, 0);
    let mail = pith::app::mail::MailConfig {
        smtp_url: Some(sink.url()),
        mail_from: Some("forum@example.org".into()),
        mail_retry_secs: 1,
        mail_poll_secs: 1,
        ..Default::default()
    };
    pith::app::mail::start(&app.state, &mail).expect("mail");
    let dora = json!({"username": "dora", "password": "password123", "email": "dora@example.org"});
    let session = api.call(post.clone(), "/auth/register", None, Some(dora), 201).await;
    let dora = session["token"].as_str().expect("token").to_owned();
    let taken = json!({"username": "dorb", "password": "password123", "email": "DORA@example.org"});
    api.call(post.clone(), "/auth/register", None, Some(taken), 409).await;
    let token = json!({"token": sink.nth(1).await.token("/verify/")});
    api.call(post.clone(), "/auth/verify-email", None, Some(token.clone()), 200).await;
    api.call(post.clone(), "/auth/verify-email", None, Some(token), 400).await;
    api.call(get.clone(), "/me/email", Some(&dora), None, 200).await;
    api.call(get.clone(), "/me/email", None, None, 401).await;
    let change = |password: &str| Some(json!({"email": "dora@new.example", "password": password}));
    api.call(Method::PUT, "/me/email", Some(&dora), change("password124"), 403).await;
    api.call(Method::PUT, "/me/email", Some(&dora), change("password123"), 202).await;
    api.call(Method::PUT, "/me/email", Some(&dora), Some(json!({"email": "x"})), 422).await;
    let digest = Some(json!({"digest": true}));
    api.call(Method::PUT, "/me/email/digest", Some(&dora), digest.clone(), 200).await;
    api.call(Method::PUT, "/me/email/digest", Some(&bob), digest, 422).await;
    api.call(post.clone(), "/auth/password-reset", None, reset("nobody@example.org"), 202).await;
    api.call(post.clone(), "/auth/password-reset", None, reset("dora@example.org"), 202).await;
    api.call(post.clone(), "/auth/password-reset", None, reset("no-at-sign"), 422).await;
    let mails = sink.wait_for(3).await;
    let reset_mail = mails.iter().find(|m| m.subject == "Reset your password").expect("reset mail");
    let confirm = json!({"token": reset_mail.token("/reset/"), "password": "password456"});
    api.call(post.clone(), "/auth/password-reset/confirm", None, Some(confirm.clone()), 204).await;
    api.call(post.clone(), "/auth/password-reset/confirm", None, Some(confirm), 400).await;
    // The account's export, two-factor login and deletion (issue #21).
    let export = api.call(get.clone(), "/me/export", Some(&alice), None, 200).await;
    assert_eq!(export["profile"]["name"], "alice");
    api.call(get.clone(), "/me/export", None, None, 401).await;
    api.call(get.clone(), "/me/two-factor", Some(&alice), None, 200).await;
    api.call(post.clone(), "/me/two-factor/confirm", Some(&alice), Some(json!({"code": "123456"})), 409).await;
    let start = api.call(post.clone(), "/me/two-factor", Some(&alice), None, 200).await;
    let secret = totp_rs::Secret::try_from_base32(start["secret"].as_str().expect("secret")).expect("base32");
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).expect("clock").as_secs();
    let totp = totp_rs::Builder::new().with_secret(secret).build().expect("totp").generate(now).to_string();
    api.call(post.clone(), "/me/two-factor/confirm", Some(&alice), Some(json!({"code": "nope"})), 403).await;
    let codes = api.call(post.clone(), "/me/two-factor/confirm", Some(&alice), Some(json!({"code": totp})), 200).await;
    let codes = codes["recovery_codes"].clone();
    api.call(post.clone(), "/me/two-factor", Some(&alice), None, 409).await;
    let login = |totp: Option<&Value>| Some(json!({"username": "alice", "password": "newpass456", "totp": totp}));
    api.call(post.clone(), "/auth/login", None, login(None), 401).await;
    api.call(post.clone(), "/auth/login", None, login(Some(&json!("000000x"))), 401).await;
    api.call(post.clone(), "/auth/login", None, login(Some(&codes[0])), 200).await;
    let off = |code: &Value| Some(json!({"password": "newpass456", "code": code}));
    api.call(post.clone(), "/me/two-factor/disable", Some(&alice), off(&codes[0]), 403).await;
    api.call(post.clone(), "/me/two-factor/disable", Some(&alice), off(&codes[1]), 204).await;
    api.call(post.clone(), "/me/two-factor/disable", Some(&alice), off(&codes[2]), 409).await;
    // Pictures, as multipart/form-data.
    let mut png = std::io::Cursor::new(Vec::new());
    image::DynamicImage::ImageRgb8(image::RgbImage::from_fn(16, 8, |x, y| image::Rgb([x as u8 * 16, y as u8 * 32, 7])))
        .write_to(&mut png, image::ImageFormat::Png)
        .expect("png");
    let png = png.into_inner();
    let form = |bytes: &[u8]| {
        let mut body = b"--b\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a.png\"\r\n\r\n".to_vec();
        body.extend_from_slice(bytes);
        body.extend_from_slice(b"\r\n--b--\r\n");
        body
    };
    let upload = |body: Vec<u8>, token: String| {
        move |r: reqwest::RequestBuilder| {
            r.bearer_auth(token).header("content-type", "multipart/form-data; boundary=b").body(body)
        }
    };
    api.raw(post.clone(), "/media", upload(form(&png), alice.clone()), 201).await;
    api.raw(post.clone(), "/media", upload(form(b"<svg xmlns='http://www.w3.org/2000/svg'/>"), alice.clone()), 415)
        .await;
    api.raw(post.clone(), "/media", upload(form(&png[..png.len() / 2]), alice.clone()), 422).await;
    api.raw(post.clone(), "/media", upload(b"--b--\r\n".to_vec(), alice.clone()), 400).await;
    api.call(post.clone(), "/media", Some(&alice), Some(json!({"file": "x"})), 415).await;
    api.call(post.clone(), "/media", None, None, 401).await;
    let usage = api.call(get.clone(), "/admin/media", Some(&admin), None, 200).await;
    assert_eq!(usage["stored"]["files"], 1);
    api.call(get.clone(), "/admin/media", Some(&alice), None, 403).await;

    let gone = |password: &str, content: &str| Some(json!({"password": password, "content": content}));
    api.call(delete.clone(), "/me", Some(&bob), gone("", "remove"), 403).await;
    api.call(delete.clone(), "/me", Some(&alice), gone("newpass456", "everything"), 422).await;
    api.call(delete.clone(), "/me", None, gone("newpass456", "remove"), 401).await;
    let purge = |content: &str| Some(json!({ "content": content }));
    api.call(delete.clone(), "/admin/users/nobody", Some(&admin), purge("remove"), 404).await;
    api.call(delete.clone(), "/admin/users/bob", Some(&alice), purge("remove"), 403).await;
    api.call(delete.clone(), "/admin/users/bob", Some(&admin), purge("keep"), 422).await;
    api.call(delete.clone(), "/admin/users/bob", Some(&admin), purge("remove"), 204).await;
    api.call(delete.clone(), "/me", Some(&alice), gone("newpass456", "keep_anonymous"), 204).await;
    api.call(get.clone(), "/auth/me", Some(&alice), None, 401).await;

    // Federation's routes, on two federated servers: `away` finds and
    // follows a community of `home`.
    api.seen.extend(federated_session().await);
    api.assert_every_operation_succeeded();
}

/// The routes that need federation on (and another server to talk to);
/// what was seen, for the caller's check that every operation succeeded.
async fn federated_session() -> BTreeSet<(String, String, u16)> {
    let (home, away) = (spawn_federated_app().await, spawn_federated_app().await);
    home.community("rust").await;
    let host = home.addr.trim_start_matches("http://").to_owned();
    let mut api = Api::new(&away);
    let ann = away.user("ann").await;
    let (get, post, delete) = (Method::GET, Method::POST, Method::DELETE);
    let q = |q: String| Some(json!({ "q": q }));
    api.call(post.clone(), "/resolve", Some(&ann), q("rust".into()), 400).await;
    api.call(post.clone(), "/resolve", None, q(format!("!rust@{host}")), 401).await;
    api.call(post.clone(), "/resolve", Some(&ann), q(format!("!nope@{host}")), 404).await;
    let found = api.call(post.clone(), "/resolve", Some(&ann), q(format!("!rust@{host}")), 200).await;
    let path = format!("/communities/{}/follow", found["name"].as_str().expect("name"));
    api.call(get.clone(), &path, Some(&ann), None, 200).await;
    api.call(post.clone(), &path, None, None, 401).await;
    api.call(post.clone(), &path, Some(&ann), None, 202).await;
    api.call(delete.clone(), &path, Some(&ann), None, 204).await;
    api.call(post.clone(), "/communities/nope/follow", Some(&ann), None, 404).await;
    api.seen
}
