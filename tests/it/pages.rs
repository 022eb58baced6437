//! The HTML forum over real sockets: every page, forms with
//! Post/Redirect/Get, cookie sessions and their flags, CSRF refusals,
//! escaping, security headers, fingerprinted assets, Atom feeds, and the
//! weight of a topic page.

use std::collections::HashMap;
use std::io::Read;

use pith::app::limits::{Rate, RateConfig};
use pith::model::Username;
use pith::store::Store;
use reqwest::Method;

use crate::support::helpers::{Reply, TestApp, fetch, spawn_app, spawn_app_limited};

/// Issue 21's account lifecycle: 2FA, export, deletion; moderators; locks.
mod account;
/// Issue 21's inbox: the page, the header's count, the live stream.
mod inbox;
/// Issue 23's phase 2: finding and following a community on another server.
mod joining;
/// Issue 21's private messages, user blocks and the blocks page.
mod messages;
/// Issue 22's pictures in the new-topic and comment forms, JavaScript off.
mod pictures;
/// Issue 21's own votes after a reload, saves and community blocks.
mod saves;
/// Issue 26's regressions: edit forms, CSRF by cookie tossing, redirects.
mod security;
/// Issue 26's sessions: the settings page, idle expiry.
mod settings;

/// A browser without JavaScript: keeps cookies, follows no redirects.
struct Browser<'a> {
    app: &'a TestApp,
    client: reqwest::Client,
    cookies: HashMap<String, String>,
}

impl<'a> Browser<'a> {
    fn new(app: &'a TestApp) -> Browser<'a> {
        let client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .timeout(crate::support::helpers::REQUEST_TIMEOUT)
            .build()
            .expect("client");
        Browser { app, client, cookies: HashMap::new() }
    }

    fn request(&self, method: Method, path: &str) -> reqwest::RequestBuilder {
        let mut req = self.client.request(method, self.app.url(path)).header("accept", "text/html");
        if !self.cookies.is_empty() {
            let jar: Vec<String> = self.cookies.iter().map(|(k, v)| format!("{k}={v}")).collect();
            req = req.header("cookie", jar.join("; "));
        }
        req
    }

    async fn send(&mut self, req: reqwest::RequestBuilder) -> Reply {
        let reply = fetch(req).await;
        for c in reply.headers.get_all("set-cookie") {
            let c = c.to_str().expect("ascii cookie");
            let (pair, attrs) = c.split_once(';').unwrap_or((c, ""));
            let (k, v) = pair.split_once('=').expect("name=value");
            if v.is_empty() || attrs.contains("Max-Age=0") {
                self.cookies.remove(k);
            } else {
                self.cookies.insert(k.to_owned(), v.to_owned());
            }
        }
        reply
    }

    async fn get(&mut self, path: &str) -> Reply {
        let req = self.request(Method::GET, path);
        self.send(req).await
    }

    async fn post(&mut self, path: &str, form: &[(&str, &str)]) -> Reply {
        let req = self
            .request(Method::POST, path)
            .header("content-type", "application/x-www-form-urlencoded")
            .body(encode(form));
        self.send(req).await
    }

    /// Posts a form with the CSRF token of the page at `page`.
    async fn submit(&mut self, page: &str, action: &str, form: &[(&str, &str)]) -> Reply {
        let html = text(&self.get(page).await);
        let csrf = csrf_of(&html);
        let mut all = vec![("csrf", csrf.as_str())];
        all.extend_from_slice(form);
        self.post(action, &all).await
    }

    async fn login(&mut self, name: &str, password: &str) -> Reply {
        self.submit("/login", "/login", &[("username", name), ("password", password), ("next", "/")]).await
    }
}

fn encode(form: &[(&str, &str)]) -> String {
    let enc = |s: &str| {
        s.bytes()
            .map(|b| match b {
                b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => (b as char).to_string(),
                b' ' => "+".into(),
                _ => format!("%{b:02X}"),
            })
            .collect::<String>()
    };
    form.iter().map(|(k, v)| format!("{}={}", enc(k), enc(v))).collect::<Vec<_>>().join("&")
}

fn text(r: &Reply) -> String {
    String::from_utf8(r.bytes.clone()).expect("utf-8 page")
}

/// The first CSRF token in a page's forms.
fn csrf_of(html: &str) -> String {
    let at = html.find("name=\"csrf\" value=\"").expect("a form with a CSRF token") + 19;
    html[at..].split('"').next().expect("token").to_owned()
}

fn gunzip(bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    flate2::read::GzDecoder::new(bytes).read_to_end(&mut out).expect("gzip");
    out
}

/// A user with a password, made in the store (one argon2 hash).
async fn user_with_password(app: &TestApp, name: &str, password: &str) {
    let hash = pith::app::auth::hash_password(password).expect("hash");
    app.state.store.create_user(Username::parse(name).expect("name"), Some(hash), false).await.expect("create user");
}

/// A community, a topic by `alice` and a reply.
async fn forum(app: &TestApp) -> i64 {
    app.community("rust").await;
    let alice = app.user("alice").await;
    let topic = app.topic("rust", &alice, "Borrowing, explained").await;
    app.reply(topic, &alice, None, "The first *reply*").await;
    topic
}

#[tokio::test]
async fn every_page_renders_with_its_content_and_security_headers() {
    let app = spawn_app().await;
    let topic = forum(&app).await;
    let mut b = Browser::new(&app);
    let topic_path = format!("/t/{topic}");
    let pages: [(&str, &str); 9] = [
        ("/", "Borrowing, explained"),
        ("/?sort=new", "Borrowing, explained"),
        ("/?sort=top&t=all", "Borrowing, explained"),
        ("/c", "c/rust"),
        ("/c/rust", "Borrowing, explained"),
        (&topic_path, "The first <em>reply</em>"),
        ("/u/alice", "Borrowing, explained"),
        ("/login", "Log in"),
        ("/register", "Create an account"),
    ];
    for (path, want) in pages {
        let r = b.get(path).await;
        assert_eq!(r.status, 200, "{path}");
        assert_eq!(r.header("content-type"), Some("text/html; charset=utf-8"), "{path}");
        let html = text(&r);
        assert!(html.contains(want), "{path} lacks {want:?}");
        assert!(html.contains("<main id=\"main\""), "{path}: landmarks");
        assert_eq!(r.header("content-security-policy"), Some(pith::web::CSP), "{path}");
        assert_eq!(r.header("x-content-type-options"), Some("nosniff"), "{path}");
        assert_eq!(r.header("referrer-policy"), Some("same-origin"), "{path}");
    }
    // The policy forbids inline script; the pages carry none.
    let html = text(&b.get(&topic_path).await);
    assert!(!html.contains("<script>") && !html.contains(" style="), "no inline script or style");
    // Pages that need an account send a visitor to log in first.
    let r = b.get("/submit?c=rust").await;
    assert_eq!(r.status, 303);
    assert_eq!(r.header("location"), Some("/login?next=/submit%3Fc%3Drust"));
    // A signed-out visitor's topic page sets no cookie and carries no token:
    // every visitor gets the same bytes, so it can be cached.
    let (one, two) = (Browser::new(&app).get(&topic_path).await, Browser::new(&app).get(&topic_path).await);
    assert!(one.header("set-cookie").is_none());
    assert_eq!(one.bytes, two.bytes);
    // A slug is accepted and redirects to the canonical URL.
    let r = b.get(&format!("/t/{topic}/borrowing-explained")).await;
    assert_eq!((r.status, r.header("location")), (308, Some(topic_path.as_str())));
}

#[tokio::test]
async fn hostile_titles_bodies_and_descriptions_are_escaped() {
    let app = spawn_app().await;
    let (status, body) = app
        .post(
            "/api/v1/communities",
            Some(&app.admin_token),
            serde_json::json!({"name": "evil", "title": "<b>bold</b>", "description": "<script>alert('d')</script>"}),
        )
        .await;
    assert_eq!(status, 201, "{body}");
    let token = app.user("mallory").await;
    let (status, body) = app
        .post(
            "/api/v1/communities/evil/topics",
            Some(&token),
            serde_json::json!({
                "title": "<script>alert(\"t\")</script>",
                "body": "<img src=x onerror=alert(1)> [click](javascript:alert(2)) <a href=\"x\" onclick=\"alert(3)\">a</a>",
                "url": "https://example.org/\"><script>alert(4)</script>"
            }),
        )
        .await;
    assert_eq!(status, 201, "{body}");
    let id = body["id"].as_i64().expect("id");
    app.reply(id, &token, None, "<script>alert(5)</script><iframe src=//evil>").await;
    let mut b = Browser::new(&app);
    for path in ["/".to_owned(), "/c/evil".into(), format!("/t/{id}"), "/u/mallory".into(), "/c".into()] {
        let html = text(&b.get(&path).await);
        // Markup that would be live; the same words escaped as text are inert.
        for bad in ["<script>alert", "<img src=x", "<a href=\"x\" onclick", "href=\"javascript:", "<iframe", "<b>bold"]
        {
            assert!(!html.contains(bad), "{path} contains {bad:?}");
        }
    }
    let html = text(&b.get(&format!("/t/{id}")).await);
    assert!(html.contains(">&#60;script&#62;alert(&#34;t&#34;)&#60;/script&#62;</a>"), "the title shows as text");
    assert!(html.contains("href=\"https://example.org/&#34;&#62;&#60;script&#62;"), "the link stays in its attribute");
    assert!(html.contains("&lt;img src=x onerror=alert(1)&gt;"), "raw HTML in Markdown shows as text");
}

#[tokio::test]
async fn a_form_without_the_right_csrf_token_is_refused_with_403() {
    let app = spawn_app().await;
    let topic = forum(&app).await;
    user_with_password(&app, "bob", "password123").await;
    let mut b = Browser::new(&app);
    assert_eq!(b.login("bob", "password123").await.status, 303);
    let reply = format!("/t/{topic}/reply");
    for form in [vec![("body", "hi")], vec![("body", "hi"), ("csrf", "forged")]] {
        let r = b.post(&reply, &form).await;
        assert_eq!(r.status, 403, "{form:?}");
        assert!(text(&r).contains("CSRF check failed"), "a clear message");
    }
    // The anonymous double-submit token of another browser does not work either.
    let mut other = Browser::new(&app);
    let foreign = csrf_of(&text(&other.get("/login").await));
    let r = b.post(&reply, &[("body", "hi"), ("csrf", &foreign)]).await;
    assert_eq!(r.status, 403);
    // Nor does the login form without its cookie.
    let mut fresh = Browser::new(&app);
    let r = fresh.post("/login", &[("username", "bob"), ("password", "password123"), ("csrf", &foreign)]).await;
    assert_eq!(r.status, 403);
    assert!(!fresh.cookies.contains_key("pith_session"), "no session was started");
    // Nothing was posted.
    assert_eq!(app.read_topic(topic, "old").await["posts"].as_array().map(Vec::len), Some(1));
}

#[tokio::test]
async fn session_cookies_are_http_only_lax_and_secure_behind_tls() {
    let app = spawn_app().await;
    user_with_password(&app, "carol", "password123").await;
    let mut b = Browser::new(&app);
    let r = b.login("carol", "password123").await;
    let cookie = r.header("set-cookie").expect("session cookie").to_owned();
    assert!(cookie.starts_with("pith_session="), "{cookie}");
    for attr in ["HttpOnly", "SameSite=Lax", "Path=/", "Max-Age="] {
        assert!(cookie.contains(attr), "{cookie} lacks {attr}");
    }
    assert!(!cookie.contains("Secure"), "plain http: {cookie}");
    // Over TLS (a proxy says so), or when configured, cookies are Secure.
    let mut tls = Browser::new(&app);
    let r = tls.send(tls.request(Method::GET, "/login").header("x-forwarded-proto", "https")).await;
    assert!(r.header("set-cookie").expect("csrf cookie").contains("; Secure"));
    app.state.web.set_secure_cookies(true);
    let mut configured = Browser::new(&app);
    let r = configured.get("/login").await;
    assert!(r.header("set-cookie").expect("csrf cookie").contains("; Secure"));
}

#[tokio::test]
async fn logging_in_and_out_with_forms_redirects_and_revokes_the_session() {
    let app = spawn_app().await;
    user_with_password(&app, "dave", "password123").await;
    let mut b = Browser::new(&app);
    // A wrong password re-renders the form with the error.
    let r = b.login("dave", "wrong-password").await;
    assert_eq!(r.status, 401);
    assert!(text(&r).contains("Wrong username or password"));
    // The right one redirects to `next` with a session.
    let r = b
        .submit("/login?next=/c", "/login", &[("username", "dave"), ("password", "password123"), ("next", "/c")])
        .await;
    assert_eq!((r.status, r.header("location")), (303, Some("/c")));
    let session = b.cookies.get("pith_session").expect("session").clone();
    let html = text(&b.get("/").await);
    assert!(html.contains("href=\"/u/dave\""), "signed in");
    // `next` never leaves the site.
    let mut evil = Browser::new(&app);
    let r = evil
        .submit("/login", "/login", &[("username", "dave"), ("password", "password123"), ("next", "//evil.example/")])
        .await;
    assert_eq!(r.header("location"), Some("/"));
    // Logging out redirects home, clears the cookie and revokes the token.
    let r = b.submit("/", "/logout", &[]).await;
    assert_eq!((r.status, r.header("location")), (303, Some("/")));
    assert!(r.header("set-cookie").expect("cleared").contains("Max-Age=0"));
    assert!(!b.cookies.contains_key("pith_session"));
    b.cookies.insert("pith_session".into(), session);
    let html = text(&b.get("/").await);
    assert!(!html.contains("href=\"/u/dave\""), "the old cookie no longer signs in");
}

#[tokio::test]
async fn registering_with_the_form_follows_the_api_rules_and_signs_in() {
    let app = spawn_app().await;
    let mut b = Browser::new(&app);
    let r = b.submit("/register", "/register", &[("username", "erin"), ("password", "short")]).await;
    assert_eq!(r.status, 422);
    let html = text(&r);
    assert!(html.contains("Password must be at least 8 characters"), "the error is shown");
    assert!(html.contains("value=\"erin\""), "the form keeps what was typed");
    let r = b.submit("/register", "/register", &[("username", "erin"), ("password", "password123")]).await;
    assert_eq!((r.status, r.header("location")), (303, Some("/")));
    assert!(text(&b.get("/").await).contains("href=\"/u/erin\""));
    let mut again = Browser::new(&app);
    let r = again.submit("/register", "/register", &[("username", "ERIN"), ("password", "password123")]).await;
    assert_eq!(r.status, 409, "names are unique, case-insensitively");
}

#[tokio::test]
async fn posting_replying_and_voting_with_forms_use_post_redirect_get() {
    let app = spawn_app().await;
    app.community("rust").await;
    user_with_password(&app, "frank", "password123").await;
    let mut b = Browser::new(&app);
    b.login("frank", "password123").await;
    let r = b.submit("/submit", "/submit", &[("community", "rust"), ("title", "  "), ("body", "")]).await;
    assert_eq!(r.status, 422, "an empty title re-renders the form");
    let r = b.submit("/submit", "/submit", &[("community", "rust"), ("title", "From a form"), ("body", "Body")]).await;
    assert_eq!(r.status, 303);
    let topic_path = r.header("location").expect("location").to_owned();
    let id: i64 = topic_path.trim_start_matches("/t/").parse().expect("topic id");
    let r = b.submit(&topic_path, &format!("/t/{id}/reply"), &[("body", "A reply"), ("parent", "")]).await;
    assert_eq!(r.status, 303);
    let location = r.header("location").expect("location").to_owned();
    let post: i64 = location.rsplit("#p").next().and_then(|p| p.parse().ok()).expect("post anchor");
    let r =
        b.submit(&topic_path, &format!("/t/{id}/reply"), &[("body", "Nested"), ("parent", &post.to_string())]).await;
    assert_eq!(r.status, 303);
    // An empty reply re-renders the reply form with the error.
    let r = b.submit(&topic_path, &format!("/t/{id}/reply"), &[("body", " "), ("parent", "")]).await;
    assert_eq!(r.status, 422);
    assert!(text(&r).contains("Body must not be empty"));
    let r = b.submit(&topic_path, &format!("/p/{post}/vote"), &[("value", "1"), ("back", &topic_path)]).await;
    assert_eq!((r.status, r.header("location")), (303, Some(topic_path.as_str())));
    let json = app.read_topic(id, "old").await;
    assert_eq!(json["posts"][0]["score"], 1);
    assert_eq!(json["posts"][1]["parent_id"], post);
    // The script's variant: JSON for a vote, the post's HTML for a reply.
    let html = text(&b.get(&topic_path).await);
    let csrf = csrf_of(&html);
    let req = b
        .request(Method::POST, &format!("/t/{id}/vote"))
        .header("x-pith-fetch", "1")
        .header("content-type", "application/x-www-form-urlencoded")
        .body(encode(&[("csrf", &csrf), ("value", "1")]));
    let r = b.send(req).await;
    assert_eq!((r.status, r.json()["score"].as_i64()), (200, Some(1)));
    let req = b
        .request(Method::POST, &format!("/t/{id}/reply"))
        .header("x-pith-fetch", "1")
        .header("content-type", "application/x-www-form-urlencoded")
        .body(encode(&[("csrf", &csrf), ("body", "Live **bold**")]));
    let r = b.send(req).await;
    assert_eq!(r.status, 201);
    assert!(text(&r).starts_with("<article class=\"post\" id=\"p"), "{}", text(&r));
    assert!(text(&r).contains("<strong>bold</strong>"));
    // Editing and deleting one's own post.
    let edit = format!("/t/{id}/p/{post}/edit");
    let r = b.submit(&edit, &edit, &[("body", "Edited")]).await;
    assert_eq!(r.status, 303);
    let r = b.submit(&topic_path, &format!("/t/{id}/p/{post}/delete"), &[]).await;
    assert_eq!(r.status, 303);
    assert_eq!(app.read_topic(id, "old").await["posts"][0]["deleted"], true);
    // A deleted topic keeps its page and comments, and takes no more.
    let r = b.submit(&topic_path, &format!("/t/{id}/delete"), &[]).await;
    assert_eq!((r.status, r.header("location")), (303, Some("/c/rust")));
    let html = text(&b.get(&topic_path).await);
    assert!(html.contains("deleted by its author") && html.contains("Nested"));
    assert!(!html.contains("id=\"reply-top\""));
}

#[tokio::test]
async fn static_assets_are_fingerprinted_immutable_and_precompressed() {
    let app = spawn_app().await;
    let mut b = Browser::new(&app);
    let html = text(&b.get("/").await);
    for marker in ["<link rel=\"stylesheet\" href=\"", "<script src=\""] {
        let at = html.find(marker).expect("asset reference") + marker.len();
        let url = html[at..].split('"').next().expect("url").to_owned();
        let name: Vec<&str> = url.trim_start_matches("/static/").split('.').collect();
        assert!(name.len() == 3 && name[1].len() == 12, "fingerprinted: {url}");
        assert!(name[1].chars().all(|c| c.is_ascii_hexdigit()), "{url}");
        let plain = fetch(b.request(Method::GET, &url)).await;
        assert_eq!(plain.status, 200, "{url}");
        assert_eq!(plain.header("cache-control"), Some("public, max-age=31536000, immutable"));
        assert_eq!(plain.header("content-encoding"), None);
        let gz = fetch(b.request(Method::GET, &url).header("accept-encoding", "gzip")).await;
        assert_eq!(gz.header("content-encoding"), Some("gzip"), "{url}");
        assert_eq!(gz.header("vary"), Some("accept-encoding"));
        assert!(gz.bytes.len() < plain.bytes.len());
        assert_eq!(gunzip(&gz.bytes), plain.bytes, "{url}");
        // Precompressed in every coding.
        let br = fetch(b.request(Method::GET, &url).header("accept-encoding", "gzip, deflate, br")).await;
        assert_eq!(br.header("content-encoding"), Some("br"), "{url}");
        let mut unbr = Vec::new();
        std::io::Read::read_to_end(&mut brotli::Decompressor::new(&br.bytes[..], 4096), &mut unbr).expect("br");
        assert_eq!(unbr, plain.bytes, "{url}");
        let zst = fetch(b.request(Method::GET, &url).header("accept-encoding", "zstd, gzip;q=0.5")).await;
        assert_eq!(zst.header("content-encoding"), Some("zstd"), "{url}");
        assert_eq!(zstd::stream::decode_all(&zst.bytes[..]).expect("zstd"), plain.bytes, "{url}");
        assert!(br.bytes.len() <= gz.bytes.len() && zst.bytes.len() <= plain.bytes.len(), "{url}");
        let browser = fetch(b.request(Method::GET, &url).header("accept-encoding", "gzip, deflate, br, zstd")).await;
        let smallest = if br.bytes.len() <= zst.bytes.len() { "br" } else { "zstd" };
        assert_eq!(browser.header("content-encoding"), Some(smallest), "a browser gets the smallest: {url}");
    }
    let r = b.get("/static/app.000000000000.css").await;
    assert_eq!(r.status, 404, "an old fingerprint is not served");
}

#[tokio::test]
async fn feeds_are_atom_with_the_newest_topics_escaped() {
    let app = spawn_app().await;
    app.community("rust").await;
    app.community("golang").await;
    let token = app.user("gina").await;
    app.topic("rust", &token, "First <rust> & more").await;
    app.topic("golang", &token, "Gophers").await;
    let mut b = Browser::new(&app);
    for (path, titles) in
        [("/feed.atom", vec!["Gophers", "First <rust> & more"]), ("/c/rust/feed.atom", vec!["First <rust> & more"])]
    {
        let r = b.get(path).await;
        assert_eq!(r.status, 200, "{path}");
        assert_eq!(r.header("content-type"), Some("application/atom+xml; charset=utf-8"));
        let xml = text(&r);
        let doc = roxmltree::Document::parse(&xml).unwrap_or_else(|e| panic!("{path} is not XML: {e}\n{xml}"));
        let root = doc.root_element();
        assert_eq!(root.tag_name().namespace(), Some("http://www.w3.org/2005/Atom"));
        assert_eq!(root.tag_name().name(), "feed");
        let child = |n: roxmltree::Node<'_, '_>, name: &str| {
            n.children().find(|c| c.tag_name().name() == name).and_then(|c| c.text()).map(str::to_owned)
        };
        assert!(child(root, "id").is_some_and(|id| id.starts_with("http://")), "absolute feed id");
        assert!(child(root, "updated").is_some());
        let entries: Vec<_> = root.children().filter(|c| c.tag_name().name() == "entry").collect();
        let got: Vec<String> = entries.iter().filter_map(|e| child(*e, "title")).collect();
        assert_eq!(got, titles, "{path}");
        for e in &entries {
            assert!(child(*e, "id").is_some() && child(*e, "updated").is_some(), "{path}: required fields");
            assert_eq!(child(*e, "content").as_deref(), Some("<p>b</p>\n"), "{path}: HTML content, escaped");
        }
    }
    assert_eq!(b.get("/c/nope/feed.atom").await.status, 404);
}

#[tokio::test]
async fn unknown_pages_get_an_html_404_and_api_paths_keep_json() {
    let app = spawn_app().await;
    let mut b = Browser::new(&app);
    for path in ["/nope", "/t/999999", "/t/abc", "/c/missing", "/u/nobody"] {
        let r = b.get(path).await;
        assert_eq!(r.status, 404, "{path}");
        assert_eq!(r.header("content-type"), Some("text/html; charset=utf-8"), "{path}");
        assert!(text(&r).contains("Not found"), "{path}");
    }
    let r = b.get("/api/v1/nope").await;
    assert_eq!(r.status, 404);
    assert_eq!(r.json()["error"]["code"], "not_found");
    let r = fetch(app.req(Method::GET, "/nope")).await;
    assert_eq!(r.json()["error"]["code"], "not_found", "API clients still get JSON");
}

#[tokio::test]
async fn the_login_form_counts_against_the_login_rate_limit() {
    let one = Rate { count: 2, per: std::time::Duration::from_secs(3600) };
    let app = spawn_app_limited(&RateConfig { login_user: one, ..RateConfig::default() }).await;
    user_with_password(&app, "hank", "password123").await;
    let mut b = Browser::new(&app);
    assert_eq!(b.login("hank", "nope-nope").await.status, 401);
    assert_eq!(b.login("hank", "nope-nope").await.status, 401);
    let r = b.login("hank", "password123").await;
    assert_eq!(r.status, 429);
    assert!(text(&r).contains("Too many login attempts"));
}

#[tokio::test]
async fn an_empty_topic_page_with_its_css_and_js_weighs_under_30_kb_gzipped() {
    let app = spawn_app().await;
    app.community("rust").await;
    let token = app.user("ivy").await;
    let id = app.topic("rust", &token, "An empty topic").await;
    let b = Browser::new(&app);
    let page = fetch(b.request(Method::GET, &format!("/t/{id}")).header("accept-encoding", "gzip")).await;
    assert_eq!(page.header("content-encoding"), Some("gzip"));
    let html = String::from_utf8(gunzip(&page.bytes)).expect("utf-8");
    let mut total = page.bytes.len();
    let mut parts = vec![format!("html {} B", page.bytes.len())];
    for marker in ["<link rel=\"stylesheet\" href=\"", "<script src=\""] {
        let at = html.find(marker).expect("asset reference") + marker.len();
        let url = html[at..].split('"').next().expect("url");
        let asset = fetch(b.request(Method::GET, url).header("accept-encoding", "gzip")).await;
        assert_eq!(asset.status, 200);
        total += asset.bytes.len();
        parts.push(format!("{url} {} B", asset.bytes.len()));
    }
    eprintln!("topic page weight over the wire: {total} B ({})", parts.join(", "));
    assert!(total < 30 * 1024, "{total} B: {parts:?}");
}

// ---------------------------------------------------------------------------
// Moderation in the forum, and the cached signed-out topic page.

/// A browser signed in as a new account `name` (its session cookie holds a
/// token made in the store: no argon2), and that token for the API.
async fn signed_in<'a>(app: &'a TestApp, name: &str) -> (Browser<'a>, String) {
    let token = app.user(name).await;
    let mut b = Browser::new(app);
    b.cookies.insert("pith_session".into(), token.clone());
    (b, token)
}

/// The admin, signed in to the forum.
fn admin_browser(app: &TestApp) -> Browser<'_> {
    let mut b = Browser::new(app);
    b.cookies.insert("pith_session".into(), app.admin_token.clone());
    b
}

async fn appoint(app: &TestApp, community: &str, user: &str) {
    let path = format!("/api/v1/communities/{community}/moderators/{user}");
    let (status, body) = app.send(Method::PUT, &path, Some(&app.admin_token), None).await;
    assert_eq!(status, 204, "{body}");
}

/// c/rust moderated by `mona`, c/golang by `gopher`; a topic in c/rust by
/// alice with a comment by bob. Returns (topic, post, bob's token).
async fn moderated_forum(app: &TestApp) -> (i64, i64, String) {
    app.community("rust").await;
    app.community("golang").await;
    let alice = app.user("alice").await;
    let bob = app.user("bob").await;
    let topic = app.topic("rust", &alice, "Lifetimes, again").await;
    let post = app.reply(topic, &bob, None, "A comment worth *removing*").await;
    (topic, post, bob)
}

#[tokio::test]
async fn moderators_remove_restore_lock_and_unlock_from_the_topic_page_and_pages_agree_with_the_api() {
    let app = spawn_app().await;
    let (topic, post, bob) = moderated_forum(&app).await;
    let (mut mona, _) = signed_in(&app, "mona").await;
    appoint(&app, "rust", "mona").await;
    let page = format!("/t/{topic}");
    let html = text(&mona.get(&page).await);
    assert!(html.contains(&format!("action=\"/t/{topic}/moderate\"")), "the moderator's bar");
    assert!(html.contains(&format!("formaction=\"/t/{topic}/p/{post}/moderate\" name=\"action\" value=\"remove\"")));
    assert!(html.contains("href=\"/c/rust/bans?user=bob\""), "a link to ban the author");
    // The public page is cached before the removal; the removal evicts it.
    let mut anon = Browser::new(&app);
    assert!(text(&anon.get(&page).await).contains("A comment worth <em>removing</em>"));
    let r =
        mona.submit(&page, &format!("/t/{topic}/p/{post}/moderate"), &[("action", "remove"), ("back", &page)]).await;
    assert_eq!((r.status, r.header("location")), (303, Some(format!("/t/{topic}#p{post}").as_str())));
    let public = text(&anon.get(&page).await);
    assert!(!public.contains("worth <em>removing</em>") && public.contains("[removed by a moderator]"), "hidden");
    assert_eq!(app.read_topic(topic, "best").await["posts"][0]["body"], "", "the API agrees");
    let moderator = text(&mona.get(&page).await);
    assert!(moderator.contains("worth <em>removing</em>") && moderator.contains("<span class=\"tag\">removed</span>"));
    assert!(moderator.contains("value=\"restore\""), "a restore button");
    let mut author = Browser::new(&app);
    author.cookies.insert("pith_session".into(), bob.clone());
    assert!(text(&author.get(&page).await).contains("worth <em>removing</em>"), "its author still sees it");
    let r = mona.submit(&page, &format!("/t/{topic}/p/{post}/moderate"), &[("action", "restore")]).await;
    assert_eq!(r.status, 303);
    assert!(text(&anon.get(&page).await).contains("worth <em>removing</em>"), "restored for everyone");
    // Locking: a notice and no reply form for the public and plain users;
    // moderators may still comment.
    let r = mona.submit(&page, &format!("/t/{topic}/moderate"), &[("action", "lock"), ("reason", "heated")]).await;
    assert_eq!((r.status, r.header("location")), (303, Some(page.as_str())));
    assert_eq!(app.read_topic(topic, "best").await["topic"]["locked"], true);
    for html in [text(&anon.get(&page).await), text(&author.get(&page).await)] {
        assert!(html.contains("This topic is locked") && !html.contains("id=\"reply-top\""));
    }
    let html = text(&mona.get(&page).await);
    assert!(html.contains("only moderators can comment") && html.contains("id=\"reply-top\""));
    let r = author.submit(&page, &format!("/t/{topic}/reply"), &[("body", "let me in"), ("parent", "")]).await;
    assert_eq!(r.status, 403);
    assert!(text(&r).contains("locked"), "{}", text(&r));
    let r = mona.submit(&page, &format!("/t/{topic}/reply"), &[("body", "Mods may speak"), ("parent", "")]).await;
    assert_eq!(r.status, 303);
    mona.submit(&page, &format!("/t/{topic}/moderate"), &[("action", "unlock")]).await;
    assert!(!text(&anon.get(&page).await).contains("This topic is locked"));
    // Removing the topic: gone for the public (404, page and API alike),
    // kept with a notice for moderators.
    let r = mona.submit(&page, &format!("/t/{topic}/moderate"), &[("action", "remove")]).await;
    assert_eq!(r.status, 303);
    assert_eq!(anon.get(&page).await.status, 404);
    assert_eq!(app.get(&format!("/api/v1/topics/{topic}")).await.0, 404);
    let html = text(&mona.get(&page).await);
    assert!(html.contains("A moderator removed this topic") && html.contains("value=\"restore\""));
    mona.submit(&page, &format!("/t/{topic}/moderate"), &[("action", "restore")]).await;
    assert_eq!(anon.get(&page).await.status, 200);
    // Plain users see none of it, but may report.
    let html = text(&author.get(&page).await);
    assert!(!html.contains("/moderate\"") && html.contains(&format!("href=\"/t/{topic}/report\"")));
}

#[tokio::test]
async fn moderation_pages_and_actions_refuse_plain_users_and_moderators_of_other_communities() {
    let app = spawn_app().await;
    let (topic, post, _) = moderated_forum(&app).await;
    let (mut plain, _) = signed_in(&app, "carol").await;
    let (mut gopher, _) = signed_in(&app, "gopher").await;
    appoint(&app, "golang", "gopher").await;
    let alice_report = {
        let (status, body) = app
            .post(
                &format!("/api/v1/posts/{post}/report"),
                Some(&app.user("dan").await),
                serde_json::json!({"reason": "spam"}),
            )
            .await;
        assert_eq!(status, 201, "{body}");
        body["id"].as_i64().expect("report id")
    };
    let page = format!("/t/{topic}");
    for b in [&mut plain, &mut gopher] {
        let html = text(&b.get(&page).await);
        assert!(!html.contains("/moderate\""), "no moderation controls");
        let posts = [
            (format!("/t/{topic}/moderate"), vec![("action", "remove")]),
            (format!("/t/{topic}/moderate"), vec![("action", "lock")]),
            (format!("/t/{topic}/p/{post}/moderate"), vec![("action", "remove")]),
            (format!("/c/rust/reports/{alice_report}"), vec![("status", "dismissed")]),
            ("/c/rust/bans".to_owned(), vec![("username", "bob"), ("duration", "")]),
            ("/c/rust/unban".to_owned(), vec![("username", "bob")]),
            ("/admin/settings".to_owned(), vec![("registration", "closed")]),
            ("/admin/invites".to_owned(), vec![("expires", "")]),
            ("/admin/bans".to_owned(), vec![("username", "bob"), ("duration", "")]),
            ("/admin/federation".to_owned(), vec![("host", "spam.example"), ("rule", "block")]),
        ];
        for (action, form) in posts {
            let r = b.submit(&page, &action, &form).await;
            assert_eq!(r.status, 403, "{action}");
            assert!(text(&r).contains("Not allowed"), "{action}: the 403 page");
        }
        for path in ["/c/rust/reports", "/c/rust/bans", "/admin", "/admin/federation"] {
            assert_eq!(b.get(path).await.status, 403, "{path}");
        }
    }
    // Nothing changed.
    assert!(app.state.store.instance_rules().await.expect("rules").is_empty());
    let json = app.read_topic(topic, "best").await;
    // (A post list leaves `removed` out while it is false.)
    assert_eq!((json["topic"]["locked"].clone(), json["posts"][0].get("removed")), (false.into(), None), "{json}");
    let log = app.get("/api/v1/modlog").await.1;
    assert!(log["entries"].as_array().expect("log").iter().all(|e| e["action"] == "appoint_moderator"), "{log}");
    // The moderator of c/golang does moderate there.
    let gophers = app.topic("golang", &app.user("erin").await, "Generics").await;
    let r = gopher.submit(&format!("/t/{gophers}"), &format!("/t/{gophers}/moderate"), &[("action", "lock")]).await;
    assert_eq!(r.status, 303);
    // Signed out, every moderation page asks to log in first.
    let mut anon = Browser::new(&app);
    for path in ["/c/rust/reports", "/c/rust/bans", "/admin", &format!("/t/{topic}/report")] {
        let r = anon.get(path).await;
        assert_eq!(r.status, 303, "{path}");
        assert!(r.header("location").is_some_and(|l| l.starts_with("/login?next=")), "{path}");
    }
}

#[tokio::test]
async fn administrators_block_allow_and_clear_other_servers_on_the_federation_page() {
    let app = spawn_app().await;
    let mut admin = admin_browser(&app);
    let html = text(&admin.get("/admin").await);
    assert!(html.contains("href=\"/admin/federation\""), "the site settings link to it");
    let page = text(&admin.get("/admin/federation").await);
    assert!(page.contains("No rules: every server may federate."), "{page}");
    assert!(page.contains("Federation is off on this server"), "federation is off in this app");
    let r = admin
        .submit(
            "/admin/federation",
            "/admin/federation",
            &[("host", "Spam.Example"), ("rule", "block"), ("reason", "floods <b>us</b>")],
        )
        .await;
    assert_eq!((r.status, r.header("location")), (303, Some("/admin/federation")));
    let page = text(&admin.get("/admin/federation").await);
    assert!(page.contains("<strong>spam.example</strong>: blocked"), "{page}");
    assert!(
        page.contains("floods &#60;b&#62;us&#60;/b&#62;") || page.contains("floods &lt;b&gt;us&lt;/b&gt;"),
        "escaped: {page}"
    );
    assert!(!page.contains("Allowlist:"), "{page}");
    // A bad host is shown again with its error, and nothing is stored.
    let r = admin
        .submit("/admin/federation", "/admin/federation", &[("host", "https://x.example/"), ("rule", "allow")])
        .await;
    assert_eq!(r.status, 422);
    let refused = text(&r);
    assert!(refused.contains("role=\"alert\"") && refused.contains("Give the host alone"), "{refused}");
    assert!(refused.contains("value=\"https://x.example/\""), "the form keeps what was typed");
    let r =
        admin.submit("/admin/federation", "/admin/federation", &[("host", "friends.example"), ("rule", "allow")]).await;
    assert_eq!(r.status, 303);
    assert!(text(&admin.get("/admin/federation").await).contains("Allowlist:"));
    let r =
        admin.submit("/admin/federation", "/admin/federation", &[("host", "spam.example"), ("rule", "clear")]).await;
    assert_eq!(r.status, 303);
    let rules = app.state.store.instance_rules().await.expect("rules");
    assert_eq!(
        rules.iter().map(|r| (r.host.as_str(), r.rule.as_str())).collect::<Vec<_>>(),
        [("friends.example", "allow")]
    );
    // Without the CSRF token the form changes nothing.
    let r = admin.post("/admin/federation", &[("host", "friends.example"), ("rule", "clear")]).await;
    assert_eq!(r.status, 403);
    assert_eq!(app.state.store.instance_rules().await.expect("rules").len(), 1);
}

#[tokio::test]
async fn users_report_with_a_reason_and_moderators_resolve_and_dismiss_in_the_queue() {
    let app = spawn_app().await;
    let (topic, post, _) = moderated_forum(&app).await;
    let (mut mona, _) = signed_in(&app, "mona").await;
    appoint(&app, "rust", "mona").await;
    let (mut carol, _) = signed_in(&app, "carol").await;
    let html = text(&carol.get(&format!("/t/{topic}")).await);
    let form = format!("/t/{topic}/report?post={post}");
    assert!(html.contains(&format!("href=\"{form}\"")), "a report link on the comment");
    let html = text(&carol.get(&form).await);
    assert!(html.contains("Report a comment") && html.contains("A comment worth <em>removing</em>"));
    // A reason is required.
    let r = carol.submit(&form, &format!("/t/{topic}/report"), &[("post", &post.to_string()), ("reason", " ")]).await;
    assert_eq!(r.status, 422);
    assert!(text(&r).contains("Reason must be at least 1 characters"), "{}", text(&r));
    let r = carol
        .submit(&form, &format!("/t/{topic}/report"), &[("post", &post.to_string()), ("reason", "Off <topic>")])
        .await;
    let thanks = format!("/t/{topic}/report?post={post}&sent=1");
    assert_eq!((r.status, r.header("location")), (303, Some(thanks.as_str())));
    assert!(text(&carol.get(&thanks).await).contains("Report sent"));
    let r =
        carol.submit(&format!("/t/{topic}/report"), &format!("/t/{topic}/report"), &[("reason", "Bad title")]).await;
    assert_eq!(r.header("location"), Some(format!("/t/{topic}/report?sent=1").as_str()));
    // The queue: newest first, escaped, with resolve and dismiss.
    let html = text(&mona.get("/c/rust/reports").await);
    let (a, b) = (html.find("Bad title").expect("topic report"), html.find("Off &#60;topic&#62;").expect("escaped"));
    assert!(a < b, "newest first");
    assert!(html.contains(&format!("href=\"/t/{topic}#p{post}\"")), "a link to the comment");
    let (_, body) = app.send(Method::GET, "/api/v1/communities/rust/reports", Some(&app.admin_token), None).await;
    let ids: Vec<i64> = body["reports"].as_array().expect("reports").iter().filter_map(|r| r["id"].as_i64()).collect();
    assert_eq!(ids.len(), 2);
    let r = mona.submit("/c/rust/reports", &format!("/c/rust/reports/{}", ids[0]), &[("status", "resolved")]).await;
    assert_eq!((r.status, r.header("location")), (303, Some("/c/rust/reports")));
    let r = mona.submit("/c/rust/reports", &format!("/c/rust/reports/{}", ids[1]), &[("status", "dismissed")]).await;
    assert_eq!(r.status, 303);
    assert!(text(&mona.get("/c/rust/reports").await).contains("No reports here."));
    let html = text(&mona.get("/c/rust/reports?status=resolved").await);
    assert!(html.contains("Bad title") && html.contains("by mona") && !html.contains("Off &#60;topic"));
    assert!(text(&mona.get("/c/rust/reports?status=all").await).contains("Off &#60;topic"));
    assert_eq!(mona.get("/c/rust/reports?status=nope").await.status, 400);
    assert_eq!(mona.get("/c/nowhere/reports").await.status, 404);
}

#[tokio::test]
async fn moderators_ban_with_a_reason_and_duration_banned_users_are_told_why_and_the_log_is_public() {
    let app = spawn_app().await;
    let (topic, post, bob_token) = moderated_forum(&app).await;
    let (mut mona, _) = signed_in(&app, "mona").await;
    appoint(&app, "rust", "mona").await;
    // The ban link on the topic page fills in the name.
    let html = text(&mona.get("/c/rust/bans?user=bob").await);
    assert!(html.contains("value=\"bob\"") && html.contains("Nobody is banned."));
    let form = [("username", "bob"), ("reason", "flame <wars>"), ("duration", "86400")];
    let r = mona.submit("/c/rust/bans", "/c/rust/bans", &form).await;
    assert_eq!((r.status, r.header("location")), (303, Some("/c/rust/bans")));
    let html = text(&mona.get("/c/rust/bans").await);
    assert!(html.contains("href=\"/u/bob\"") && html.contains("flame &#60;wars&#62;") && html.contains("until"));
    // A name that does not exist is shown on the form.
    let r = mona.submit("/c/rust/bans", "/c/rust/bans", &[("username", "nobody"), ("duration", "")]).await;
    assert_eq!(r.status, 404);
    assert!(text(&r).contains("User not found") && text(&r).contains("value=\"nobody\""));
    // Bob is told, on the form and on the error page.
    let mut bob = Browser::new(&app);
    bob.cookies.insert("pith_session".into(), bob_token.clone());
    let page = format!("/t/{topic}");
    let r = bob.submit(&page, &format!("/t/{topic}/reply"), &[("body", "still here"), ("parent", "")]).await;
    assert_eq!(r.status, 403);
    let html = text(&r);
    assert!(
        html.contains("You are banned from community rust until") && html.contains("flame &#60;wars&#62;"),
        "{html}"
    );
    let r = bob.submit(&page, &format!("/p/{post}/vote"), &[("value", "1"), ("back", &page)]).await;
    assert_eq!(r.status, 403);
    assert!(text(&r).contains("<h1>You are banned</h1>"), "{}", text(&r));
    // The public log, for the community and the site.
    for path in ["/c/rust/modlog", "/modlog"] {
        let html = text(&Browser::new(&app).get(path).await);
        assert!(html.contains("href=\"/u/mona\">mona</a> banned <a href=\"/u/bob\">bob</a> until"), "{path}: {html}");
        assert!(html.contains("Reason: flame &#60;wars&#62;"), "{path}");
    }
    assert!(text(&Browser::new(&app).get("/c/golang/modlog").await).contains("Nothing logged yet."));
    assert_eq!(Browser::new(&app).get("/c/nowhere/modlog").await.status, 404);
    // Lifted: bob writes again.
    let r = mona.submit("/c/rust/bans", "/c/rust/unban", &[("username", "bob")]).await;
    assert_eq!(r.status, 303);
    let r = bob.submit(&page, &format!("/t/{topic}/reply"), &[("body", "back again"), ("parent", "")]).await;
    assert_eq!(r.status, 303);
    assert!(text(&Browser::new(&app).get("/c/rust/modlog").await).contains("lifted the ban of"));
}

#[tokio::test]
async fn admins_set_registration_make_invite_codes_shown_once_and_ban_site_wide() {
    let app = spawn_app().await;
    let (topic, _, bob_token) = moderated_forum(&app).await;
    let mut admin = admin_browser(&app);
    let html = text(&admin.get("/").await);
    assert!(html.contains("href=\"/admin\""), "admins get a link");
    let html = text(&admin.get("/admin").await);
    assert!(html.contains("value=\"open\" checked"));
    let r = admin.submit("/admin", "/admin/settings", &[("registration", "invite")]).await;
    assert_eq!((r.status, r.header("location")), (303, Some("/admin")));
    assert!(text(&Browser::new(&app).get("/register").await).contains("Invite code"));
    // A code: handed to the next page in a cookie, shown once, then gone.
    let r = admin.submit("/admin", "/admin/invites", &[("expires", "604800")]).await;
    assert_eq!((r.status, r.header("location")), (303, Some("/admin#invite")));
    let cookie = r.header("set-cookie").expect("flash cookie").to_owned();
    assert!(cookie.starts_with("pith_invite=") && cookie.contains("Path=/admin") && cookie.contains("HttpOnly"));
    let r = admin.get("/admin").await;
    assert_eq!(r.header("cache-control"), Some("no-store"));
    assert!(r.header("set-cookie").is_some_and(|c| c.contains("Max-Age=0")), "cleared");
    let html = text(&r);
    let at = html.find("<code class=\"code-once\">").expect("the code is shown") + 24;
    let code = html[at..].split('<').next().expect("code").to_owned();
    assert_eq!(code.len(), 43);
    assert!(!text(&admin.get("/admin").await).contains("code-once"), "shown only once");
    let (status, body) = app
        .post(
            "/api/v1/auth/register",
            None,
            serde_json::json!({"username": "newbie", "password": "password123", "invite": code}),
        )
        .await;
    assert_eq!(status, 201, "{body}");
    // A site ban, with a reason; bob can no longer write anywhere.
    let r = admin.submit("/admin", "/admin/bans", &[("username", "bob"), ("reason", "spam"), ("duration", "")]).await;
    assert_eq!((r.status, r.header("location")), (303, Some("/admin#bans")));
    assert!(text(&admin.get("/admin").await).contains("href=\"/u/bob\">bob</a>, by admin"));
    let (status, body) =
        app.post(&format!("/api/v1/topics/{topic}/posts"), Some(&bob_token), serde_json::json!({"body": "hi"})).await;
    assert_eq!((status, body["error"]["code"].as_str()), (403, Some("banned")));
    assert!(text(&Browser::new(&app).get("/modlog").await).contains("permanently"));
    let r = admin.submit("/admin", "/admin/unban", &[("username", "bob")]).await;
    assert_eq!(r.status, 303);
    let (status, _) =
        app.post(&format!("/api/v1/topics/{topic}/posts"), Some(&bob_token), serde_json::json!({"body": "hi"})).await;
    assert_eq!(status, 201);
}

#[tokio::test]
async fn the_community_page_lists_its_moderators_and_links_them_to_reports_and_bans() {
    let app = spawn_app().await;
    moderated_forum(&app).await;
    app.user("mona").await;
    let mut anon = Browser::new(&app);
    let html = text(&anon.get("/c/rust").await);
    // Whoever creates a community moderates it.
    assert!(html.contains("Moderators: <a href=\"/u/admin\">admin</a>") && html.contains("href=\"/c/rust/modlog\""));
    appoint(&app, "rust", "mona").await;
    let html = text(&anon.get("/c/rust").await);
    assert!(html.contains("Moderators: <a href=\"/u/admin\">admin</a>, <a href=\"/u/mona\">mona</a>"));
    assert!(!html.contains("href=\"/c/rust/reports\""), "the queue is for moderators");
    let mut mona = Browser::new(&app);
    mona.cookies.insert("pith_session".into(), {
        let (_, body) = app.get("/api/v1/communities/rust/moderators").await;
        assert_eq!(body["moderators"][1]["name"], "mona");
        let token = pith::app::auth::new_token();
        let user = app.state.store.user_credentials("mona".into()).await.expect("read").expect("mona").0;
        app.state.store.add_token(user.id, pith::app::auth::token_digest(&token)).await.expect("token");
        token
    });
    let html = text(&mona.get("/c/rust").await);
    assert!(html.contains("href=\"/c/rust/reports\"") && html.contains("href=\"/c/rust/bans\""));
    assert!(!text(&mona.get("/c/golang").await).contains("href=\"/c/golang/reports\""));
}

#[tokio::test]
async fn the_signed_out_topic_page_is_cached_with_etag_304_and_gzip_and_is_fresh_after_every_write() {
    use pith::cache::Variant;
    use pith::store::PostSort;
    let app = spawn_app().await;
    let (topic, post, bob) = moderated_forum(&app).await;
    let page = format!("/t/{topic}");
    let b = Browser::new(&app);
    let get = |headers: &[(&str, &str)]| {
        let mut req = b.request(Method::GET, &page);
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        fetch(req)
    };
    let first = get(&[]).await;
    assert_eq!(first.status, 200);
    let etag = first.header("etag").expect("an ETag").to_owned();
    assert_eq!(first.header("cache-control"), Some("no-cache"));
    assert_eq!(first.header("vary"), Some("accept-encoding, cookie"));
    assert_eq!(first.header("link"), Some(format!("</t/{topic}>; rel=\"canonical\"").as_str()));
    assert_eq!(first.header("content-security-policy"), Some(pith::web::CSP), "still hardened");
    assert!(app.state.cache.get((topic, Variant::Page(PostSort::Best))).is_some(), "in the shared cache");
    // The same bytes whatever query came along; a sort order of its own.
    assert_eq!(fetch(b.request(Method::GET, &format!("{page}?sort=best&x=1"))).await.bytes, first.bytes);
    let new = fetch(b.request(Method::GET, &format!("{page}?sort=new"))).await;
    assert_ne!(new.header("etag"), Some(etag.as_str()));
    assert!(app.state.cache.get((topic, Variant::Page(PostSort::New))).is_some());
    // Revalidation and compression.
    let not_modified = get(&[("if-none-match", &etag)]).await;
    assert_eq!(not_modified.status, 304);
    assert!(not_modified.bytes.is_empty());
    assert_eq!((not_modified.header("etag"), not_modified.header("vary")), (Some(etag.as_str()), first.header("vary")));
    let gz = get(&[("accept-encoding", "gzip")]).await;
    assert_eq!(gz.header("content-encoding"), Some("gzip"));
    assert_eq!(gunzip(&gz.bytes), first.bytes);
    let gz_etag = etag.trim_end_matches('"').to_owned() + "-gzip\"";
    assert_eq!(gz.header("etag"), Some(gz_etag.as_str()), "an ETag of its own");
    // Brotli, made off the request path, on a later request.
    get(&[("accept-encoding", "br")]).await;
    app.state.cache.encoded().await;
    let br = get(&[("accept-encoding", "br")]).await;
    assert_eq!((br.header("content-encoding"), br.header("vary")), (Some("br"), first.header("vary")));
    let mut unbr = Vec::new();
    std::io::Read::read_to_end(&mut brotli::Decompressor::new(&br.bytes[..], 4096), &mut unbr).expect("br");
    assert_eq!(unbr, first.bytes);
    // A signed-in reader gets a page of their own, never the shared one.
    let (mut carol, _) = signed_in(&app, "carol").await;
    let mine = carol.get(&page).await;
    assert_eq!((mine.header("etag"), mine.header("cache-control")), (None, Some("private, no-cache")));
    assert!(text(&mine).contains("href=\"/u/carol\""));
    // Each kind of write evicts the page (and the API's JSON with it).
    let mut last = etag;
    let api = (topic, Variant::Json(PostSort::Best));
    let mut check = async |what: &str, want: &str| {
        let r = get(&[("if-none-match", &last)]).await;
        assert_eq!(r.status, 200, "after {what}: a stale ETag no longer matches");
        assert!(text(&r).contains(want), "after {what}: {want:?}");
        last = r.header("etag").expect("etag").to_owned();
    };
    app.read_topic(topic, "best").await;
    app.reply(topic, &bob, Some(post), "A fresh **reply**").await;
    // The write evicted the JSON; a background task may already have
    // rendered it again, but never from before the reply.
    if let Some(json) = app.state.cache.get(api) {
        assert!(String::from_utf8_lossy(&json.body).contains("A fresh **reply**"), "the stale JSON went with it");
    }
    check("a reply", "A fresh <strong>reply</strong>").await;
    let (status, _) =
        app.patch(&format!("/api/v1/posts/{post}"), Some(&bob), serde_json::json!({"body": "Edited *text*"})).await;
    assert_eq!(status, 200);
    check("an edit", "Edited <em>text</em>").await;
    app.vote("topics", topic, &bob, 1).await;
    check("a vote", "<span class=\"score\" data-score>1</span>").await;
    appoint(&app, "rust", "carol").await;
    let r = carol.submit(&page, &format!("/t/{topic}/p/{post}/moderate"), &[("action", "remove")]).await;
    assert_eq!(r.status, 303);
    check("a removal", "[removed by a moderator]").await;
    assert!(app.state.cache.get((topic, Variant::Page(PostSort::New))).is_none(), "every order went");
}

#[tokio::test]
async fn the_live_scripts_post_fragment_comes_from_the_cache_for_signed_out_readers() {
    use pith::cache::Variant;
    let app = spawn_app().await;
    let (topic, post, bob) = moderated_forum(&app).await;
    let b = Browser::new(&app);
    let path = format!("/t/{topic}/p/{post}");
    let r = fetch(b.request(Method::GET, &path).header("x-pith-fetch", "1")).await;
    assert_eq!(r.status, 200);
    assert!(text(&r).starts_with(&format!("<article class=\"post\" id=\"p{post}\"")));
    assert!(r.header("etag").is_some());
    assert!(app.state.cache.get((topic, Variant::Post(post))).is_some(), "kept for the next reader");
    app.reply(topic, &bob, None, "another").await;
    assert!(app.state.cache.get((topic, Variant::Post(post))).is_none(), "evicted by the next write");
    assert_eq!(
        fetch(b.request(Method::GET, &format!("/t/{topic}/p/999999")).header("x-pith-fetch", "1")).await.status,
        404
    );
    // The topic page carries the template the script fills from a live
    // event, with the controls this viewer gets.
    let html = text(&Browser::new(&app).get(&format!("/t/{topic}")).await);
    assert!(html.contains("<template id=\"post-proto\" data-id=\"9007199254740991\" data-author=\"~author~\">"));
    let (mut carol, _) = signed_in(&app, "carol").await;
    let html = text(&carol.get(&format!("/t/{topic}")).await);
    assert!(html.contains("report?post=9007199254740991"), "signed in: a report link");
}

#[tokio::test]
async fn search_shows_matching_topics_and_comments_with_their_matches_marked() {
    let app = spawn_app().await;
    let topic = forum(&app).await;
    let bob = app.user("bob").await;
    let post = app.reply(topic, &bob, None, "Borrowing <script>alert(1)</script> is in the book").await;
    let mut b = Browser::new(&app);
    let r = b.get("/search?q=borrowing").await;
    assert_eq!(r.status, 200);
    let html = text(&r);
    assert!(!html.contains("not available"), "search works");
    assert!(html.contains(&format!("<a href=\"/t/{topic}\">Borrowing, explained</a>")), "the topic, linked");
    assert!(html.contains(&format!("href=\"/t/{topic}#p{post}\"")), "the comment, linked in its topic");
    assert!(html.contains("<mark>Borrowing</mark> &lt;script&gt;alert(1)&lt;/script&gt; is in the book"), "{html}");
    assert!(!html.contains("<script>alert"), "snippets are escaped");
    let html = text(&b.get("/search?q=zebra").await);
    assert!(html.contains("No topics match.") && html.contains("No comments match."));
    let r = b.get("/search?q=%22%3Cscript%3E%20NEAR(%20-%5E").await;
    assert_eq!(r.status, 200, "any query renders");
    assert!(!text(&r).contains("<script>"));
}

/// WCAG AA: every text colour of the stylesheet, in the light and the dark
/// theme, has a contrast ratio of at least 4.5:1 on the backgrounds it is
/// drawn on. Read from static/app.css itself, so a colour change that
/// breaks contrast fails here.
#[test]
fn text_colours_meet_wcag_aa_contrast_in_both_themes() {
    let css = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/static/app.css")).expect("app.css");
    let dark_at = css.find("prefers-color-scheme: dark").expect("a dark theme");
    let themes = [("light", &css[..dark_at]), ("dark", &css[dark_at..])];
    let var = |block: &str, name: &str| -> [f64; 3] {
        let at = block.find(&format!("--{name}:")).unwrap_or_else(|| panic!("--{name} missing"));
        let value = block[at..].split(':').nth(1).expect("value").split(';').next().expect("value").trim();
        let hex = value.trim_start_matches('#');
        let hex: String = if hex.len() == 3 { hex.chars().flat_map(|c| [c, c]).collect() } else { hex.to_owned() };
        let channel = |i: usize| u8::from_str_radix(&hex[i..i + 2], 16).expect("hex colour") as f64 / 255.0;
        [channel(0), channel(2), channel(4)]
    };
    let luminance = |c: [f64; 3]| {
        let lin = |x: f64| if x <= 0.03928 { x / 12.92 } else { ((x + 0.055) / 1.055).powf(2.4) };
        0.2126 * lin(c[0]) + 0.7152 * lin(c[1]) + 0.0722 * lin(c[2])
    };
    let contrast = |a: [f64; 3], b: [f64; 3]| {
        let (x, y) = (luminance(a), luminance(b));
        (x.max(y) + 0.05) / (x.min(y) + 0.05)
    };
    let pairs = [
        ("text", "bg"),
        ("text", "card"),
        ("muted", "bg"),
        ("muted", "card"),
        ("link", "bg"),
        ("link", "card"),
        ("up", "card"),
        ("down", "card"),
        ("accent-text", "accent"),
        ("error", "error-bg"),
    ];
    for (theme, block) in themes {
        for (fg, bg) in pairs {
            let ratio = contrast(var(block, fg), var(block, bg));
            assert!(ratio >= 4.5, "{theme}: --{fg} on --{bg} has contrast {ratio:.2}, under AA's 4.5");
        }
    }
}

/// A multipart/form-data body: `fields` first, then the picture as `file`.
fn picture_form(fields: &[(&str, &str)], picture: &[u8]) -> Vec<u8> {
    let mut body = Vec::new();
    for (name, value) in fields {
        body.extend(format!("--b\r\nContent-Disposition: form-data; name=\"{name}\"\r\n\r\n{value}\r\n").into_bytes());
    }
    body.extend(b"--b\r\nContent-Disposition: form-data; name=\"file\"; filename=\"p.png\"\r\n\r\n");
    body.extend_from_slice(picture);
    body.extend(b"\r\n--b--\r\n");
    body
}

#[tokio::test]
async fn a_page_uploads_a_picture_with_its_session_and_csrf_token() {
    let app = spawn_app().await;
    let (mut b, _) = signed_in(&app, "pat").await;
    let csrf = csrf_of(&text(&b.get("/submit").await));
    let mut png = std::io::Cursor::new(Vec::new());
    image::DynamicImage::ImageRgb8(image::RgbImage::from_fn(20, 10, |x, _| image::Rgb([x as u8 * 12, 3, 9])))
        .write_to(&mut png, image::ImageFormat::Png)
        .expect("png");
    let png = png.into_inner();
    let upload = |b: &Browser, fields: &[(&str, &str)], header: Option<&str>| {
        let mut req = b
            .request(Method::POST, "/media")
            .header("content-type", "multipart/form-data; boundary=b")
            .body(picture_form(fields, &png));
        if let Some(token) = header {
            req = req.header("x-csrf-token", token);
        }
        req
    };

    // The token as the form's field, or in the script's header.
    let req = upload(&b, &[("csrf", &csrf)], None);
    let r = b.send(req).await;
    assert_eq!(r.status, 201, "{}", text(&r));
    let url = r.json()["url"].as_str().expect("url").to_owned();
    let req = upload(&b, &[], Some(&csrf));
    let r = b.send(req).await;
    assert_eq!((r.status, r.json()["url"].as_str()), (201, Some(url.as_str())), "the same picture");
    let served = b.get(&url).await;
    assert_eq!((served.status, served.header("content-type")), (200, Some("image/png")));

    // No token, a wrong one, no session.
    for (fields, header) in [(vec![], None), (vec![("csrf", "forged")], None), (vec![], Some("forged"))] {
        let req = upload(&b, &fields, header);
        let r = b.send(req).await;
        assert_eq!(
            (r.status, &r.json()["error"]["code"]),
            (403, &serde_json::json!("csrf_failed")),
            "{fields:?} {header:?}"
        );
    }
    let anonymous = Browser::new(&app);
    let req = upload(&anonymous, &[("csrf", &csrf)], None);
    assert_eq!(fetch(req).await.status, 401);
    app.stop().await;
}
