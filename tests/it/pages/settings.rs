//! Issue 26's sessions in the forum (docs/SECURITY.md, "Sessions expire
//! and can be revoked"): the settings page lists where the user is signed
//! in, changes the password and signs out everywhere else, and a session
//! left unused past the idle limit ends.

use reqwest::Method;

use super::{Browser, text, user_with_password};
use crate::support::helpers::spawn_app;

#[tokio::test]
async fn the_settings_page_changes_the_password_and_signs_out_every_other_session() {
    let app = spawn_app().await;
    user_with_password(&app, "alice", "password123").await;
    let mut laptop = Browser::new(&app);
    let mut phone = Browser::new(&app);
    assert_eq!(laptop.login("alice", "password123").await.status, 303);
    assert_eq!(phone.login("alice", "password123").await.status, 303);
    let (_, api) =
        app.post("/api/v1/auth/login", None, serde_json::json!({"username": "alice", "password": "password123"})).await;
    let api = api["token"].as_str().expect("token").to_owned();

    // Signed out, the page asks to log in; signed in, the header links it.
    let anonymous = Browser::new(&app).get("/settings").await;
    assert_eq!((anonymous.status, anonymous.header("location")), (303, Some("/login?next=/settings")));
    let front = text(&laptop.get("/").await);
    assert!(front.contains("href=\"/settings\""), "the header links the settings page");
    let page = text(&laptop.get("/settings").await);
    assert_eq!(page.matches("/revoke\" method=\"post\"").count(), 3, "two browsers and a token: {page}");
    assert!(page.contains("this browser"), "{page}");
    assert!(page.contains("API token"), "{page}");

    // A wrong current password changes nothing and says so on the page.
    let r = laptop.submit("/settings", "/settings/password", &[("current", "nope-nope"), ("new", "newpass456")]).await;
    assert_eq!(r.status, 403);
    assert!(text(&r).contains("current password is wrong"), "{}", text(&r));
    let r = laptop.submit("/settings", "/settings/password", &[("current", "password123"), ("new", "short")]).await;
    assert_eq!(r.status, 422);
    assert_eq!(phone.get("/settings").await.status, 200, "the phone is still signed in");

    let r =
        laptop.submit("/settings", "/settings/password", &[("current", "password123"), ("new", "newpass456")]).await;
    assert_eq!((r.status, r.header("location")), (303, Some("/settings?done=password")));
    let page = text(&laptop.get("/settings?done=password").await);
    assert!(page.contains("Your password is changed"), "{page}");
    assert_eq!(page.matches("/revoke\" method=\"post\"").count(), 1, "only this browser is left: {page}");
    let r = phone.get("/settings").await;
    assert_eq!(r.status, 303, "the phone's session ended");
    let (status, _) = app.send(Method::GET, "/api/v1/auth/me", Some(&api), None).await;
    assert_eq!(status, 401, "and so did the API token");
    assert_eq!(Browser::new(&app).login("alice", "password123").await.status, 401, "the old password is gone");
    assert_eq!(phone.login("alice", "newpass456").await.status, 303);

    // "Sign out everywhere else" from the phone leaves the phone alone.
    let r = phone.submit("/settings", "/settings/sessions/revoke-others", &[]).await;
    assert_eq!((r.status, r.header("location")), (303, Some("/settings?done=others")));
    assert_eq!(laptop.get("/settings").await.status, 303, "the laptop is signed out");
    assert_eq!(phone.get("/settings").await.status, 200);
    app.stop().await;
}

#[tokio::test]
async fn one_session_is_revoked_from_the_list_and_revoking_this_one_signs_out() {
    let app = spawn_app().await;
    user_with_password(&app, "alice", "password123").await;
    let mut laptop = Browser::new(&app);
    let mut phone = Browser::new(&app);
    laptop.login("alice", "password123").await;
    phone.login("alice", "password123").await;

    // The laptop revokes the phone's session: the row that is not its own.
    let page = text(&laptop.get("/settings").await);
    let rows: Vec<&str> = page.split("<li>").skip(1).collect();
    let other = rows.iter().find(|r| !r.contains("this browser")).expect("the phone's row");
    let action = other.split("action=\"").nth(1).and_then(|a| a.split('"').next()).expect("its revoke form");
    let r = laptop.submit("/settings", action, &[]).await;
    assert_eq!((r.status, r.header("location")), (303, Some("/settings?done=revoked")));
    assert_eq!(phone.get("/settings").await.status, 303, "the phone is signed out");
    let r = laptop.submit("/settings", action, &[]).await;
    assert_eq!(r.status, 404, "revoked already");

    // Revoking its own row signs the laptop out, cookie and all.
    let page = text(&laptop.get("/settings").await);
    let own = page.split("<li>").skip(1).find(|r| r.contains("this browser")).expect("own row");
    let action = own.split("action=\"").nth(1).and_then(|a| a.split('"').next()).expect("own revoke form").to_owned();
    let r = laptop.submit("/settings", &action, &[]).await;
    assert_eq!((r.status, r.header("location")), (303, Some("/")));
    assert!(r.header("set-cookie").is_some_and(|c| c.contains("Max-Age=0")), "cookie cleared");
    assert_eq!(laptop.get("/settings").await.status, 303);
    app.stop().await;
}

#[tokio::test]
async fn a_session_unused_past_the_idle_limit_asks_to_log_in_again_and_is_deleted() {
    let app = spawn_app().await;
    user_with_password(&app, "alice", "password123").await;
    let cookies = {
        let mut b = Browser::new(&app);
        b.login("alice", "password123").await;
        assert_eq!(b.get("/settings").await.status, 200);
        b.cookies
    };

    // 31 days pass without a visit (the default limit is 30); the token
    // cache holds a token a minute at most, so a fresh server is asked.
    let dir = app.stop().await;
    let db = rusqlite::Connection::open(dir.path().join("pith.db")).expect("open");
    db.execute(
        "UPDATE tokens SET last_used_at = last_used_at - ?1, created_at = created_at - ?1 WHERE kind = 'session'",
        [31 * 86_400],
    )
    .expect("age the session");
    drop(db);
    let app = crate::support::helpers::spawn_app_in(dir).await;
    let mut b = Browser::new(&app);
    b.cookies = cookies;
    let r = b.get("/settings").await;
    assert_eq!((r.status, r.header("location")), (303, Some("/login?next=/settings")));
    let page = text(&b.get("/").await);
    assert!(page.contains(">Log in</a>"), "signed out everywhere on the site");
    let db = rusqlite::Connection::open(app.db_path()).expect("open");
    let left: i64 =
        db.query_row("SELECT count(*) FROM tokens WHERE kind = 'session'", [], |r| r.get(0)).expect("count");
    assert_eq!(left, 0, "the expired session is deleted");
    app.stop().await;
}
