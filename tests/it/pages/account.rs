//! Issue 21's account lifecycle in the forum, without JavaScript: two-factor
//! login set up on the settings page (the QR code a `data:` URL) and
//! asked for by the login form, the export downloaded, the account
//! deleted by its form; the moderators page; no reply links on a locked
//! topic.

use serde_json::json;

use super::{Browser, text, user_with_password};
use crate::support::helpers::spawn_app;

fn now() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).expect("clock").as_secs()
}

fn code(secret: &str, at: u64) -> String {
    let secret = totp_rs::Secret::try_from_base32(secret).expect("base32 secret");
    totp_rs::Builder::new().with_secret(secret).build().expect("totp").generate(at).to_string()
}

/// The login form's fields with a two-factor code.
fn login_form(totp: &str) -> [(&'static str, &str); 4] {
    [("username", "alice"), ("password", "password123"), ("totp", totp), ("next", "/")]
}

/// The text between `start` and the next `end` in `html`.
fn between<'a>(html: &'a str, start: &str, end: &str) -> &'a str {
    let at = html.find(start).unwrap_or_else(|| panic!("{start} in {html}")) + start.len();
    html[at..].split(end).next().expect("end")
}

#[tokio::test]
async fn two_factor_login_is_set_up_on_the_settings_page_and_asked_for_at_login() {
    let app = spawn_app().await;
    user_with_password(&app, "alice", "password123").await;
    let mut browser = Browser::new(&app);
    assert_eq!(browser.login("alice", "password123").await.status, 303);
    let page = text(&browser.get("/settings").await);
    assert!(page.contains("Two-factor login is off"), "{page}");

    let r = browser.submit("/settings", "/settings/two-factor/start", &[]).await;
    assert_eq!((r.status, r.header("location")), (303, Some("/settings#two-factor")));
    let r = browser.get("/settings").await;
    assert!(r.header("content-security-policy").is_some_and(|p| p.contains("img-src 'self' data:")));
    let page = text(&r);
    assert!(page.contains("<img class=\"qr\" src=\"data:image/svg+xml;base64,"), "{page}");
    let secret = between(&page, "<code id=\"tf-secret\">", "<").to_owned();
    let r = browser.submit("/settings", "/settings/two-factor/confirm", &[("code", "000000x")]).await;
    assert_eq!(r.status, 403);
    assert!(text(&r).contains("That code is wrong"), "{}", text(&r));
    let r = browser.submit("/settings", "/settings/two-factor/confirm", &[("code", &code(&secret, now()))]).await;
    assert_eq!(r.status, 200);
    let page = text(&r);
    assert!(page.contains("Two-factor login is on."), "{page}");
    assert_eq!(between(&page, "<ul class=\"recovery-codes\">", "</ul>").matches("<code>").count(), 10);
    let recovery = between(&page, "<ul class=\"recovery-codes\"><li><code>", "<").to_owned();
    let page = text(&browser.get("/settings").await);
    assert!(!page.contains(&recovery), "the codes are shown once");
    // Deleting the account now takes a code as well as the password.
    assert!(between(&page, "action=\"/settings/delete\"", "</form>").contains("name=\"code\""), "{page}");
    let delete = [("password", "password123"), ("content", "keep_anonymous")];
    let r = browser.submit("/settings", "/settings/delete", &delete).await;
    assert_eq!(r.status, 403);
    assert!(text(&r).contains("Enter the code from your authenticator app"), "{}", text(&r));
    assert_eq!(browser.get("/settings").await.status, 200, "still signed in, still there");

    // The login form asks for a code, and takes a recovery code once.
    let mut other = Browser::new(&app);
    let r = other.login("alice", "password123").await;
    assert_eq!(r.status, 401);
    assert!(text(&r).contains("Enter the code from your authenticator app"), "{}", text(&r));
    assert!(text(&r).contains("name=\"totp\""));
    let r = other.submit("/login", "/login", &login_form(&code(&secret, now() + 30))).await;
    assert_eq!(r.status, 303, "the next step's code");
    let mut third = Browser::new(&app);
    assert_eq!(third.submit("/login", "/login", &login_form(&recovery)).await.status, 303);
    assert_eq!(Browser::new(&app).submit("/login", "/login", &login_form(&recovery)).await.status, 401, "once");
    app.stop().await;
}

#[tokio::test]
async fn the_settings_page_downloads_the_export_and_deletes_the_account() {
    let app = spawn_app().await;
    app.community("raspi").await;
    user_with_password(&app, "alice", "password123").await;
    let bob = app.user("bob").await;
    let topic = app.topic("raspi", &bob, "Bob's").await;
    let mut browser = Browser::new(&app);
    assert_eq!(browser.login("alice", "password123").await.status, 303);
    let page = browser.get(&format!("/t/{topic}")).await;
    let r = browser.submit(&format!("/t/{topic}"), &format!("/t/{topic}/reply"), &[("body", "Alice's reply")]).await;
    assert_eq!(r.status, 303, "{}", text(&page));

    let r = browser.get("/settings/export").await;
    assert_eq!(r.status, 200);
    assert_eq!(r.header("content-disposition"), Some("attachment; filename=\"pith-export-alice.json\""));
    let doc = r.json();
    assert_eq!((&doc["profile"]["name"], &doc["posts"][0]["body"]), (&json!("alice"), &json!("Alice's reply")));
    assert_eq!(Browser::new(&app).get("/settings/export").await.status, 303, "signed out: log in first");

    let r = browser
        .submit("/settings", "/settings/delete", &[("password", "not-it-at-all"), ("content", "keep_anonymous")])
        .await;
    assert_eq!(r.status, 403);
    assert!(between(&text(&r), "id=\"delete\"", "</section>").contains("current password is wrong"));
    let r = browser
        .submit("/settings", "/settings/delete", &[("password", "password123"), ("content", "keep_anonymous")])
        .await;
    assert_eq!((r.status, r.header("location")), (303, Some("/")));
    assert_eq!(browser.get("/settings").await.status, 303, "signed out");
    let page = text(&browser.get(&format!("/t/{topic}")).await);
    assert!(page.contains("Alice's reply") && !page.contains("/u/alice"), "kept under no name: {page}");
    assert_eq!(Browser::new(&app).login("alice", "password123").await.status, 401);
    assert_eq!(browser.get("/u/alice").await.status, 404);
    app.stop().await;
}

#[tokio::test]
async fn administrators_appoint_and_dismiss_moderators_on_the_moderators_page() {
    let app = spawn_app().await;
    app.community("raspi").await;
    let hash = pith::app::auth::hash_password("password123").expect("hash");
    let name = pith::model::Username::parse("root").expect("name");
    pith::store::Store::create_user(&app.state.store, name, Some(hash), true).await.expect("admin");
    user_with_password(&app, "mona", "password123").await;
    let mut admin = Browser::new(&app);
    assert_eq!(admin.login("root", "password123").await.status, 303);
    let page = "/c/raspi/moderators";
    let r = admin.submit(page, page, &[("action", "appoint"), ("username", "nobody")]).await;
    assert_eq!(r.status, 404);
    assert!(text(&r).contains("not found"), "{}", text(&r));
    let r = admin.submit(page, page, &[("action", "appoint"), ("username", "mona")]).await;
    assert_eq!((r.status, r.header("location")), (303, Some(page)));
    let (_, list) = app.get("/api/v1/communities/raspi/moderators").await;
    assert!(list["moderators"].as_array().expect("list").iter().any(|m| m["name"] == "mona"), "{list}");

    let mut mona = Browser::new(&app);
    assert_eq!(mona.login("mona", "password123").await.status, 303);
    let shown = text(&mona.get(page).await);
    assert!(shown.contains("href=\"/u/mona\"") && !shown.contains("Appoint a moderator"), "{shown}");
    let r = mona.submit(page, page, &[("action", "dismiss"), ("username", "mona")]).await;
    assert_eq!(r.status, 403, "administrators only");

    let r = admin.submit(page, page, &[("action", "dismiss"), ("username", "mona")]).await;
    assert_eq!(r.status, 303);
    let (_, list) = app.get("/api/v1/communities/raspi/moderators").await;
    assert!(!list["moderators"].as_array().expect("list").iter().any(|m| m["name"] == "mona"), "{list}");
    app.stop().await;
}

#[tokio::test]
async fn a_locked_topic_shows_no_reply_links() {
    let app = spawn_app().await;
    app.community("raspi").await;
    let bob = app.user("bob").await;
    let topic = app.topic("raspi", &bob, "Soon locked").await;
    app.reply(topic, &bob, None, "a comment").await;
    let mut reader = Browser::new(&app);
    assert!(text(&reader.get(&format!("/t/{topic}")).await).contains("class=\"reply-link\""));
    let (s, _) = app.post(&format!("/api/v1/topics/{topic}/lock"), Some(&app.admin_token), json!({})).await;
    assert_eq!(s, 204);
    let page = text(&reader.get(&format!("/t/{topic}")).await);
    assert!(!page.contains("class=\"reply-link\""), "{page}");
    assert!(page.contains("This topic is locked"));
    app.stop().await;
}
