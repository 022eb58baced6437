//! First run: `pith serve` on a database without an administrator prints
//! a one-time link; its form creates the administrator and signs them in;
//! the link is dead afterwards, and never printed once an admin exists.

use std::time::Duration;

use crate::support::child::{Server, user_add};

fn link_in(log: &str) -> Option<String> {
    let at = log.find("/setup/")?;
    let start = log[..at].rfind("http")?;
    let end = log[at..].find(|c: char| c.is_whitespace() || c == '"').map_or(log.len(), |e| at + e);
    Some(log[start..end].to_owned())
}

fn cookie(res: &reqwest::Response, name: &str) -> String {
    res.headers()
        .get_all("set-cookie")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .find_map(|v| v.strip_prefix(&format!("{name}=")).map(|r| r.split(';').next().unwrap_or("").to_owned()))
        .unwrap_or_else(|| panic!("no {name} cookie"))
}

#[tokio::test]
async fn the_setup_link_creates_the_admin_once() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Server::start(&dir.path().join("data"), dir.path().join("serve.log"), Duration::from_secs(20)).await;
    let link = link_in(&server.log_text()).unwrap_or_else(|| panic!("no setup link:\n{}", server.log_text()));
    let http = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().expect("client");

    let wrong = http.get(server.url("/setup/not-the-token")).send().await.expect("get");
    assert_eq!(wrong.status(), 404);

    let page = http.get(&link).send().await.expect("get");
    assert_eq!(page.status(), 200);
    let csrf_cookie = cookie(&page, "pith_csrf");
    let html = page.text().await.expect("html");
    let field = html.split("name=\"csrf\" value=\"").nth(1).and_then(|r| r.split('"').next()).expect("csrf field");

    let post = |csrf: String, cookie: String| {
        http.post(&link)
            .header("cookie", format!("pith_csrf={cookie}"))
            .header("content-type", "application/x-www-form-urlencoded")
            .body(format!("csrf={csrf}&username=boss&password=correct-horse-battery"))
            .send()
    };
    let refused = post("forged".into(), csrf_cookie.clone()).await.expect("post");
    assert_eq!(refused.status(), 403, "a bad CSRF token is refused");

    let made = post(field.to_owned(), csrf_cookie.clone()).await.expect("post");
    assert_eq!(made.status(), 303);
    assert_eq!(made.headers()["location"], "/admin");
    let session = cookie(&made, "pith_session");
    let admin = http.get(server.url("/admin")).header("cookie", format!("pith_session={session}")).send().await;
    assert_eq!(admin.expect("admin page").status(), 200, "signed in as the administrator");

    assert_eq!(http.get(&link).send().await.expect("get").status(), 404, "the link is dead");
    let again = post(field.to_owned(), csrf_cookie).await.expect("post");
    assert_eq!(again.status(), 404);
}

#[tokio::test]
async fn no_setup_link_once_an_admin_exists() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    user_add(&data, "root", true).await;
    let server = Server::start(&data, dir.path().join("serve.log"), Duration::from_secs(20)).await;
    let log = server.log_text();
    assert!(log.contains("serving"), "{log}");
    assert_eq!(link_in(&log), None, "{log}");
}

#[tokio::test]
async fn the_store_creates_only_one_first_admin() {
    use pith::model::Username;
    use pith::store::sqlite::{SqliteOptions, SqliteStore};
    use pith::store::{Store, StoreError};
    let dir = tempfile::tempdir().expect("tempdir");
    let store = SqliteStore::open(&dir.path().join("pith.db"), &SqliteOptions::default()).expect("open");
    assert!(!store.has_admin().await.expect("has_admin"));
    let first = store.create_first_admin(Username::parse("first").expect("name"), "x".into()).await.expect("first");
    assert!(first.is_admin);
    assert!(store.has_admin().await.expect("has_admin"));
    let second = store.create_first_admin(Username::parse("second").expect("name"), "x".into()).await;
    assert!(matches!(second, Err(StoreError::Conflict(_))), "{second:?}");
    store.shutdown().await;
}
