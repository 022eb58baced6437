//! Regressions of issue 26's probe of the forms (docs/SECURITY.md, "The
//! browser"): removed content through the edit forms, CSRF by cookie
//! tossing, the open-redirect filter, absolute links under a forged Host,
//! HSTS, and CSRF tokens masked per page (BREACH).

use std::time::Duration;

use reqwest::Method;
use serde_json::json;

use super::{Browser, appoint, csrf_of, signed_in, text, user_with_password};
use crate::support::child::Server;
use crate::support::helpers::spawn_app;

/// What the edit form answers (status, whether `secret` shows) and what
/// the API's edit answers, for one user's browser and token.
async fn form_and_api(b: &mut Browser<'_>, token: &str, form: &str, api: &str, secret: &str) -> (u16, bool, u16) {
    let r = b.get(form).await;
    let shown = text(&r).contains(secret);
    let (api_status, _) = b.app.patch(api, Some(token), json!({"body": "edited"})).await;
    (r.status, shown, api_status)
}

#[tokio::test]
async fn edit_forms_are_the_authors_only_and_never_show_removed_content() {
    let app = spawn_app().await;
    app.community("rust").await;
    let (mut alice, alice_t) = signed_in(&app, "alice").await;
    let (mut bob, bob_t) = signed_in(&app, "bob").await;
    let (mut carol, carol_t) = signed_in(&app, "carol").await;
    let (mut mona, mona_t) = signed_in(&app, "mona").await;
    appoint(&app, "rust", "mona").await;
    let (status, body) = app
        .post("/api/v1/communities/rust/topics", Some(&alice_t), json!({"title": "T", "body": "topic-secret-source"}))
        .await;
    assert_eq!(status, 201, "{body}");
    let topic = body["id"].as_i64().expect("id");
    let post = app.reply(topic, &bob_t, None, "post-secret-source").await;
    let (tf, ta) = (format!("/t/{topic}/edit"), format!("/api/v1/topics/{topic}"));
    let (pf, pa) = (format!("/t/{topic}/p/{post}/edit"), format!("/api/v1/posts/{post}"));

    // Before any removal: the authors get their forms, with their text.
    assert_eq!(alice.get(&tf).await.status, 200);
    assert!(text(&alice.get(&tf).await).contains("topic-secret-source"));
    assert!(text(&bob.get(&pf).await).contains("post-secret-source"));
    // Anyone else gets what the API's edit answers (403), without the text.
    for (b, t) in [(&mut carol, &carol_t), (&mut mona, &mona_t)] {
        assert_eq!(form_and_api(b, t, &tf, &ta, "topic-secret-source").await, (403, false, 403));
        assert_eq!(form_and_api(b, t, &pf, &pa, "post-secret-source").await, (403, false, 403));
    }

    // A moderator removes the post, then the topic: nobody gets a form
    // for removed content (an edit of it is refused), nor its text.
    let (status, _) = app.post(&format!("/api/v1/posts/{post}/remove"), Some(&mona_t), json!({})).await;
    assert_eq!(status, 204);
    for (b, t) in [(&mut bob, &bob_t), (&mut carol, &carol_t)] {
        assert_eq!(form_and_api(b, t, &pf, &pa, "post-secret-source").await, (403, false, 403));
    }
    let (status, _) = app.post(&format!("/api/v1/topics/{topic}/remove"), Some(&mona_t), json!({})).await;
    assert_eq!(status, 204);
    for (b, t) in [(&mut alice, &alice_t), (&mut carol, &carol_t)] {
        assert_eq!(form_and_api(b, t, &tf, &ta, "topic-secret-source").await, (403, false, 403));
    }
    for (b, t) in [(&mut bob, &bob_t), (&mut carol, &carol_t)] {
        assert_eq!(form_and_api(b, t, &pf, &pa, "post-secret-source").await, (403, false, 403));
    }
    // Nothing was edited by the probes.
    let (_, body) = app.send(Method::GET, &ta, Some(&mona_t), None).await;
    assert_eq!(body["topic"]["body"], "topic-secret-source", "{body}");
    // A post that is not in the topic, or a deleted one, is not found.
    assert_eq!(alice.get(&format!("/t/{topic}/p/999999/edit")).await.status, 404);
}

/// A cookie planted for this site by a same-site page (another port, a
/// sibling subdomain): the attacker chooses its name and value.
const TOSSED: &str = "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA";

#[tokio::test]
async fn a_tossed_csrf_cookie_neither_posts_as_the_victim_nor_logs_them_in() {
    let app = spawn_app().await;
    app.community("rust").await;
    user_with_password(&app, "victim", "password123").await;
    user_with_password(&app, "mallory", "password123").await;
    let mut victim = Browser::new(&app);
    assert_eq!(victim.login("victim", "password123").await.status, 303);
    // The victim, signed in, carries the attacker's cookie; the attacker's
    // page posts the same value in the form.
    victim.cookies.insert("pith_csrf".into(), TOSSED.into());
    let form = [("csrf", TOSSED), ("community", "rust"), ("title", "Tossed"), ("body", "x")];
    assert_eq!(victim.post("/submit", &form).await.status, 403, "the session's token only");
    // Login CSRF: a fresh browser with the tossed cookie and field.
    let mut fresh = Browser::new(&app);
    fresh.cookies.insert("pith_csrf".into(), TOSSED.into());
    let login = [("csrf", TOSSED), ("username", "mallory"), ("password", "password123"), ("next", "/")];
    let r = fresh.post("/login", &login).await;
    assert_eq!(r.status, 403);
    assert!(!fresh.cookies.contains_key("pith_session"), "no session was started");
    // The login form's token is not its cookie's value: the server signs it.
    let mut b = Browser::new(&app);
    let field = csrf_of(&text(&b.get("/login").await));
    assert_ne!(Some(&field), b.cookies.get("pith_csrf"));
    assert_eq!(b.login("mallory", "password123").await.status, 303, "the signed token logs in");
    assert!(app.list("/api/v1/communities/rust/topics?sort=new").await.0.is_empty(), "nothing was posted");
}

#[tokio::test]
async fn over_tls_cookies_are_host_prefixed_and_plain_names_are_ignored() {
    let app = spawn_app().await;
    app.state.web.set_secure_cookies(true);
    user_with_password(&app, "tina", "password123").await;
    let mut b = Browser::new(&app);
    let r = b.get("/login").await;
    let cookie = r.header("set-cookie").expect("csrf cookie").to_owned();
    assert!(cookie.starts_with("__Host-pith_csrf=") && cookie.contains("; Secure") && cookie.contains("Path=/"));
    let r = b.login("tina", "password123").await;
    assert_eq!(r.status, 303);
    let session = b.cookies.get("__Host-pith_session").expect("a __Host- session cookie").clone();
    assert!(text(&b.get("/").await).contains("href=\"/u/tina\""), "signed in");
    // A plain-named cookie (which any same-site page may set) is not read.
    let mut plain = Browser::new(&app);
    plain.cookies.insert("pith_session".into(), session);
    assert!(!text(&plain.get("/").await).contains("href=\"/u/tina\""));
    let r = b.submit("/", "/logout", &[]).await;
    assert_eq!(r.status, 303);
    assert!(r.header("set-cookie").expect("cleared").starts_with("__Host-pith_session=;"));
}

#[tokio::test]
async fn redirects_after_login_and_votes_stay_on_this_site_whatever_the_path_holds() {
    let app = spawn_app().await;
    let topic = super::forum(&app).await;
    user_with_password(&app, "gina", "password123").await;
    let hostile =
        ["/\t/evil.example/x", "/\u{b}/evil.example/x", "/\u{c}/evil.example/x", "/ /evil.example", "/\\evil"];
    for next in hostile {
        let mut b = Browser::new(&app);
        let r =
            b.submit("/login", "/login", &[("username", "gina"), ("password", "password123"), ("next", next)]).await;
        assert_eq!((r.status, r.header("location")), (303, Some("/")), "{next:?}");
    }
    // The login page does not carry it into its form either.
    let mut b = Browser::new(&app);
    let html = text(&b.get("/login?next=/%09/evil.example/x").await);
    assert!(html.contains("name=\"next\" value=\"/\""), "{html}");
    // A vote's `back` is held to the same rule.
    let (mut voter, _) = signed_in(&app, "vic").await;
    let page = format!("/t/{topic}");
    let r = voter.submit(&page, &format!("/t/{topic}/vote"), &[("value", "1"), ("back", "/\u{c}/evil.example")]).await;
    assert_eq!((r.status, r.header("location")), (303, Some("/")));
    let r = voter.submit(&page, &format!("/t/{topic}/vote"), &[("value", "1"), ("back", &page)]).await;
    assert_eq!(r.header("location"), Some(page.as_str()), "a path on this site is kept");
}

/// The request with `Host: evil.example`, answered by `server`.
async fn with_forged_host(server: &Server, path: &str) -> String {
    let addr = server.base.trim_start_matches("http://").parse().expect("addr");
    let req = format!("GET {path} HTTP/1.1\r\nhost: evil.example\r\nconnection: close\r\n\r\n");
    crate::support::raw::exchange(addr, req.as_bytes()).await
}

/// issue 26, items 7 and 9: absolute links come from `--public-url` (or
/// the listen address), never from the request's Host; an https site
/// sends HSTS on pages, API answers and redirects alike.
#[tokio::test]
async fn absolute_links_ignore_the_host_header_and_an_https_site_sends_hsts() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    let args = ["--public-url", "https://Forum.Example/"];
    let server = Server::start_with(&data, dir.path().join("a.log"), Duration::from_secs(20), |c| {
        c.args(args);
    })
    .await;
    let feed = with_forged_host(&server, "/feed.atom").await;
    assert!(feed.starts_with("HTTP/1.1 200"), "{feed}");
    assert!(feed.contains("<id>https://forum.example/feed.atom</id>"), "{feed}");
    assert!(feed.contains("type=\"text/html\" href=\"https://forum.example/\""), "{feed}");
    assert!(!feed.contains("evil.example"), "{feed}");
    for path in ["/", "/api/v1/communities", "/login?next=/x", "/nowhere"] {
        let answer = with_forged_host(&server, path).await.to_ascii_lowercase();
        assert!(answer.contains("\r\nstrict-transport-security: max-age=31536000\r\n"), "{path}: {answer}");
    }
    drop(server);

    // Without --public-url: the listen address, and no HSTS over http.
    let server = Server::start(&data, dir.path().join("b.log"), Duration::from_secs(20)).await;
    let feed = with_forged_host(&server, "/feed.atom").await;
    assert!(feed.contains(&format!("<id>{}/feed.atom</id>", server.base)), "{feed}");
    assert!(!feed.contains("evil.example"), "{feed}");
    assert!(!with_forged_host(&server, "/").await.to_ascii_lowercase().contains("strict-transport-security"));
    drop(server);

    // A value that is not a site's address stops start-up, saying why.
    for bad in ["forum.example", "https://forum.example/pith"] {
        let out = crate::support::child::run_pith(&["config".as_ref(), "--public-url".as_ref(), bad.as_ref()]).await;
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success() && err.contains("https://forum.example"), "{bad}: {err}");
    }
}

/// issue 26, item 9 (BREACH): each page carries its CSRF token masked
/// afresh, so a compressed page reflecting a guess (the search box) never
/// repeats the secret; every masking is accepted, a bare or altered
/// token is not.
#[tokio::test]
async fn csrf_tokens_differ_on_every_page_and_each_is_accepted() {
    let app = spawn_app().await;
    let topic = super::forum(&app).await;
    let (mut b, _) = signed_in(&app, "mia").await;
    let page = format!("/t/{topic}/reply");
    let tokens: Vec<String> = {
        let mut t = Vec::new();
        for _ in 0..3 {
            t.push(csrf_of(&text(&b.get(&page).await)));
        }
        t
    };
    assert!(tokens[0] != tokens[1] && tokens[1] != tokens[2] && tokens[0] != tokens[2], "{tokens:?}");
    for (i, csrf) in tokens.iter().enumerate() {
        let r = b.post(&page, &[("csrf", csrf), ("body", &format!("masked {i}"))]).await;
        assert_eq!(r.status, 303, "masking {i} is accepted");
    }
    let mut altered = tokens[0].clone().into_bytes();
    altered[50] = if altered[50] == b'A' { b'B' } else { b'A' };
    let altered = String::from_utf8(altered).expect("ascii");
    assert_eq!(b.post(&page, &[("csrf", &altered), ("body", "x")]).await.status, 403);
}
