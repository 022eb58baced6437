//! The HTML forum over real sockets: every page, forms with
//! Post/Redirect/Get, cookie sessions and their flags, CSRF refusals,
//! escaping, security headers, fingerprinted assets, Atom feeds, and the
//! weight of a topic page.

use std::collections::HashMap;
use std::io::Read;

use pith::config::{Rate, RateConfig};
use pith::model::Username;
use pith::store::Store;
use reqwest::Method;

use crate::helpers::{Reply, TestApp, fetch, spawn_app, spawn_app_limited};

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
            .timeout(crate::helpers::REQUEST_TIMEOUT)
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
    let hash = pith::auth::hash_password(password).expect("hash");
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
        let gz = fetch(b.request(Method::GET, &url).header("accept-encoding", "gzip, br")).await;
        assert_eq!(gz.header("content-encoding"), Some("gzip"), "{url}");
        assert_eq!(gz.header("vary"), Some("accept-encoding"));
        assert!(gz.bytes.len() < plain.bytes.len());
        assert_eq!(gunzip(&gz.bytes), plain.bytes, "{url}");
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
