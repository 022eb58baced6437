//! Email end to end against a real SMTP server (aiosmtpd, `support::smtp`)
//! on both stores: registration held until the mailed link is followed,
//! password reset by mail (no enumeration, one use, expiry, every session
//! revoked), a dead SMTP server that delays mail but no request, the
//! notification digest's batching, and `pith user reset-link` from the
//! real binary.

use std::time::Duration;

use reqwest::Method;
use serde_json::{Value, json};

use crate::support::child::{free_port, run_pith, user_add};
use crate::support::helpers::{TestApp, assert_error, spawn_app, spawn_app_in, spawn_pg_app};
use crate::support::pg::TestDb;
use crate::support::smtp::{MAIL_PATIENCE, Sink};
use pith::app::mail::MailConfig;
use pith::store::Store;

const PASSWORD: &str = "password123";

/// Where a test ages rows behind the server's back.
enum Db<'a> {
    Sqlite(std::path::PathBuf),
    Pg(&'a TestDb),
}

impl Db<'_> {
    async fn exec(&self, sql: &str) {
        match self {
            Db::Sqlite(path) => {
                let conn = rusqlite::Connection::open(path).expect("open");
                conn.busy_timeout(Duration::from_secs(10)).expect("busy timeout");
                conn.execute_batch(sql).expect(sql);
            }
            Db::Pg(db) => db.client().await.batch_execute(sql).await.expect(sql),
        }
    }
}

/// Starts `app`'s mail sender towards 127.0.0.1:`port`, as
/// `pith serve --smtp-url` does; retries after a second, and looks at the
/// outbox every second.
fn send_mail<S: Store>(app: &TestApp<S>, port: u16, require_email: bool) {
    app.state.web.set_public_url(&app.addr, 0);
    let cfg = MailConfig {
        smtp_url: Some(format!("smtp://127.0.0.1:{port}")),
        mail_from: Some("Forum <forum@example.org>".into()),
        require_email,
        mail_retry_secs: 1,
        mail_poll_secs: 1,
        ..MailConfig::default()
    };
    pith::app::mail::start(&app.state, &cfg).expect("start the mail sender");
}

async fn login<S: Store>(app: &TestApp<S>, name: &str, password: &str) -> (u16, Value) {
    app.post("/api/v1/auth/login", None, json!({"username": name, "password": password})).await
}

async fn logged_in<S: Store>(app: &TestApp<S>, name: &str, password: &str) -> String {
    let (status, body) = login(app, name, password).await;
    assert_eq!(status, 200, "login {name}: {body}");
    body["token"].as_str().expect("token").to_owned()
}

/// Registers `name` with `email` (no address required) and follows the
/// confirmation link of mail number `n`.
async fn verified<S: Store>(app: &TestApp<S>, sink: &Sink, name: &str, email: &str, n: usize) -> String {
    let body = json!({"username": name, "password": PASSWORD, "email": email});
    let (status, reply) = app.post("/api/v1/auth/register", None, body).await;
    assert_eq!(status, 201, "{reply}");
    let mail = sink.nth(n).await;
    assert_eq!(mail.to, [email]);
    let (status, reply) = app.post("/api/v1/auth/verify-email", None, json!({"token": mail.token("/verify/")})).await;
    assert_eq!(status, 200, "{reply}");
    reply["user"]["name"].as_str().expect("name").to_owned()
}

async fn a_held_account_logs_in_once_its_link_is_followed<S: Store>(app: &TestApp<S>) {
    let sink = Sink::start().await;
    send_mail(app, sink.port, true);
    let (status, body) =
        app.post("/api/v1/auth/register", None, json!({"username": "ann", "password": PASSWORD})).await;
    assert_error("no address", status, &body, 422, "email_required");
    let (status, body) = app
        .post("/api/v1/auth/register", None, json!({"username": "ann", "password": PASSWORD, "email": "not-mail"}))
        .await;
    assert_error("bad address", status, &body, 422, "invalid_field");

    let body = json!({"username": "ann", "password": PASSWORD, "email": "Ann@Example.org"});
    let (status, reply) = app.post("/api/v1/auth/register", None, body).await;
    assert_eq!(status, 202, "{reply}");
    assert_eq!(reply["email_verification"], "sent");
    assert!(reply.get("token").is_none(), "{reply}");
    let (status, body) = login(app, "ann", PASSWORD).await;
    assert_error("held", status, &body, 403, "email_unverified");
    // The wrong password is still just wrong: the hold says nothing to a guesser.
    let (status, body) = login(app, "ann", "wrong-password").await;
    assert_error("wrong password", status, &body, 401, "bad_credentials");

    let mail = sink.nth(1).await;
    assert_eq!(mail.to, ["Ann@Example.org"]);
    assert_eq!(mail.subject, "Confirm your email address");
    let link = mail.link("/verify/");
    assert!(link.starts_with(&format!("{}/verify/", app.addr)), "{link}");
    let page = app.client.get(&link).send().await.expect("follow the link");
    assert_eq!(page.status(), 200);
    assert!(page.text().await.expect("page").contains("Address confirmed"));
    let again = app.client.get(&link).send().await.expect("follow it again");
    assert_eq!(again.status(), 400, "a link works once");
    let (status, body) = app.post("/api/v1/auth/verify-email", None, json!({"token": mail.token("/verify/")})).await;
    assert_error("used link", status, &body, 400, "verify_token_invalid");

    let token = logged_in(app, "ann", PASSWORD).await;
    let (status, settings) = app.send(Method::GET, "/api/v1/me/email", Some(&token), None).await;
    assert_eq!(status, 200);
    assert_eq!(settings, json!({"email": "Ann@Example.org", "pending": null, "digest": false}));

    // The address is taken, in any case.
    let body = json!({"username": "bea", "password": PASSWORD, "email": "ann@EXAMPLE.org"});
    let (status, body) = app.post("/api/v1/auth/register", None, body).await;
    assert_error("taken", status, &body, 409, "email_taken");
    let (status, _) = login(app, "bea", PASSWORD).await;
    assert_eq!(status, 401, "nothing half-written: no account without its address");

    // A change of address needs the password, and waits for its own link.
    let change = json!({"email": "ann@new.example", "password": "wrong-password"});
    let (status, body) = app.send(Method::PUT, "/api/v1/me/email", Some(&token), Some(change)).await;
    assert_error("change, wrong password", status, &body, 403, "wrong_password");
    let change = json!({"email": "ann@new.example", "password": PASSWORD});
    let (status, settings) = app.send(Method::PUT, "/api/v1/me/email", Some(&token), Some(change)).await;
    assert_eq!(status, 202, "{settings}");
    assert_eq!(settings, json!({"email": "Ann@Example.org", "pending": "ann@new.example", "digest": false}));
    logged_in(app, "ann", PASSWORD).await;
    let mail = sink.nth(2).await;
    assert_eq!(mail.to, ["ann@new.example"]);
    let (status, _) = app.post("/api/v1/auth/verify-email", None, json!({"token": mail.token("/verify/")})).await;
    assert_eq!(status, 200);
    let (_, settings) = app.send(Method::GET, "/api/v1/me/email", Some(&token), None).await;
    assert_eq!(settings, json!({"email": "ann@new.example", "pending": null, "digest": false}));
}

#[tokio::test]
async fn a_held_account_logs_in_once_its_link_is_followed_on_sqlite() {
    a_held_account_logs_in_once_its_link_is_followed(&spawn_app().await).await;
}

#[tokio::test]
async fn a_held_account_logs_in_once_its_link_is_followed_on_postgres() {
    let db = TestDb::create().await;
    a_held_account_logs_in_once_its_link_is_followed(&spawn_pg_app(&db).await).await;
}

async fn a_password_is_reset_by_mail<S: Store>(app: &TestApp<S>, db: Db<'_>) {
    let sink = Sink::start().await;
    send_mail(app, sink.port, false);
    verified(app, &sink, "bob", "bob@example.org", 1).await;
    let (first, second) = (logged_in(app, "bob", PASSWORD).await, logged_in(app, "bob", PASSWORD).await);

    // The same answer for an address of no one and for Bob's (in another case).
    for email in ["nobody@example.org", "BOB@example.org"] {
        let (status, body) = app.post("/api/v1/auth/password-reset", None, json!({"email": email})).await;
        assert_eq!(status, 202, "{email}: {body}");
        assert_eq!(body["message"], "if an account has this address, a reset link is on its way");
    }
    let (status, body) = app.post("/api/v1/auth/password-reset", None, json!({"email": "no at sign"})).await;
    assert_error("bad address", status, &body, 422, "invalid_field");
    let mail = sink.nth(2).await;
    assert_eq!(
        (mail.to.as_slice(), mail.subject.as_str()),
        (&["bob@example.org".to_owned()][..], "Reset your password")
    );
    let token = mail.token("/reset/");
    assert!(mail.link("/reset/").starts_with(&format!("{}/reset/", app.addr)));

    let confirm = |token: &str, password: &str| json!({"token": token, "password": password});
    let (status, body) =
        app.post("/api/v1/auth/password-reset/confirm", None, confirm("made-up", "new-password-1")).await;
    assert_error("unknown token", status, &body, 400, "reset_token_invalid");
    let (status, body) = app.post("/api/v1/auth/password-reset/confirm", None, confirm(&token, "short")).await;
    assert_error("short password", status, &body, 422, "invalid_field");
    let (status, body) = app.post("/api/v1/auth/password-reset/confirm", None, confirm(&token, "new-password-1")).await;
    assert_eq!(status, 204, "{body}");

    // Every session and token of Bob's is revoked; only the new password works.
    for token in [&first, &second] {
        let (status, _) = app.send(Method::GET, "/api/v1/auth/me", Some(token), None).await;
        assert_eq!(status, 401);
    }
    assert_eq!(login(app, "bob", PASSWORD).await.0, 401);
    logged_in(app, "bob", "new-password-1").await;
    let (status, body) = app.post("/api/v1/auth/password-reset/confirm", None, confirm(&token, "new-password-2")).await;
    assert_error("used token", status, &body, 400, "reset_token_invalid");

    // A link past its hour is refused (the row aged, not an hour slept).
    let (status, _) = app.post("/api/v1/auth/password-reset", None, json!({"email": "bob@example.org"})).await;
    assert_eq!(status, 202);
    let token = sink.nth(3).await.token("/reset/");
    db.exec("UPDATE mail_tokens SET expires_at = expires_at - 3600").await;
    let (status, body) = app.post("/api/v1/auth/password-reset/confirm", None, confirm(&token, "new-password-3")).await;
    assert_error("expired token", status, &body, 400, "reset_token_invalid");
    logged_in(app, "bob", "new-password-1").await;
    assert!(sink.mails().iter().all(|m| m.to == ["bob@example.org"]), "no mail to an address of no one");
}

#[tokio::test]
async fn a_password_is_reset_by_mail_on_sqlite() {
    let app = spawn_app().await;
    a_password_is_reset_by_mail(&app, Db::Sqlite(app.db_path())).await;
}

#[tokio::test]
async fn a_password_is_reset_by_mail_on_postgres() {
    let db = TestDb::create().await;
    a_password_is_reset_by_mail(&spawn_pg_app(&db).await, Db::Pg(&db)).await;
}

async fn a_dead_smtp_server_delays_mail_but_no_request<S: Store>(app: &TestApp<S>) {
    // Nothing listens on the port yet.
    let port = free_port();
    send_mail(app, port, false);
    let body = json!({"username": "cal", "password": PASSWORD, "email": "cal@example.org"});
    let (status, reply) = app.post("/api/v1/auth/register", None, body).await;
    assert_eq!(status, 201, "{reply}");
    for _ in 0..3 {
        let (status, _) = app.post("/api/v1/auth/password-reset", None, json!({"email": "cal@example.org"})).await;
        assert_eq!(status, 202);
    }
    logged_in(app, "cal", PASSWORD).await;
    // The mails wait in the outbox.
    let deadline = std::time::Instant::now() + MAIL_PATIENCE;
    loop {
        let counts = app.state.store.outbox_counts().await.expect("outbox");
        if counts == (4, 0) {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "the outbox never held the 4 mails: {counts:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // The server comes up: every mail goes out, nothing lost or doubled.
    let sink = Sink::start_on(port).await;
    let mails = sink.wait_for(4).await;
    assert_eq!(mails.iter().filter(|m| m.subject == "Confirm your email address").count(), 1);
    assert_eq!(mails.iter().filter(|m| m.subject == "Reset your password").count(), 3);
    let deadline = std::time::Instant::now() + MAIL_PATIENCE;
    while app.state.store.outbox_counts().await.expect("outbox") != (0, 0) {
        assert!(std::time::Instant::now() < deadline, "sent mail stayed in the outbox");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(sink.mails().len(), 4);
}

#[tokio::test]
async fn a_dead_smtp_server_delays_mail_but_no_request_on_sqlite() {
    a_dead_smtp_server_delays_mail_but_no_request(&spawn_app().await).await;
}

#[tokio::test]
async fn a_dead_smtp_server_delays_mail_but_no_request_on_postgres() {
    let db = TestDb::create().await;
    a_dead_smtp_server_delays_mail_but_no_request(&spawn_pg_app(&db).await).await;
}

async fn notifications_are_mailed_as_a_digest_at_most_every_15_minutes<S: Store>(app: &TestApp<S>, db: Db<'_>) {
    let sink = Sink::start().await;
    send_mail(app, sink.port, false);
    let bob = app.user("bob").await;
    let (status, body) =
        app.send(Method::PUT, "/api/v1/me/email/digest", Some(&bob), Some(json!({"digest": true}))).await;
    assert_error("no address", status, &body, 422, "invalid_field");

    verified(app, &sink, "dee", "dee@example.org", 1).await;
    let dee = logged_in(app, "dee", PASSWORD).await;
    let (status, settings) =
        app.send(Method::PUT, "/api/v1/me/email/digest", Some(&dee), Some(json!({"digest": true}))).await;
    assert_eq!(status, 200, "{settings}");
    assert_eq!(settings["digest"], true);
    app.community("raspi").await;
    let topic = app.topic("raspi", &dee, "Pi cases").await;

    app.reply(topic, &bob, None, "First answer").await;
    let mail = sink.nth(2).await;
    assert_eq!(
        (mail.to.as_slice(), mail.subject.as_str()),
        (&["dee@example.org".to_owned()][..], "1 new notification")
    );
    assert!(mail.body.contains("bob replied: First answer"), "{}", mail.body);
    assert!(mail.body.contains(&format!("{}/t/{topic}#p", app.addr)), "{}", mail.body);

    // Within 15 minutes nothing more is mailed, however much arrives.
    app.reply(topic, &bob, None, "Second answer").await;
    app.reply(topic, &bob, None, "Third answer").await;
    let now = pith::model::Timestamp::now();
    assert_eq!(app.state.store.queue_digests(now, app.addr.clone()).await.expect("digests"), 0);

    // 15 minutes on (the row aged), the two come in one mail.
    db.exec("UPDATE emails SET digest_sent_at = digest_sent_at - 900").await;
    let mail = sink.nth(3).await;
    assert_eq!(mail.subject, "2 new notifications");
    assert!(mail.body.contains("Second answer") && mail.body.contains("Third answer"), "{}", mail.body);
    assert!(!mail.body.contains("First answer"), "nothing mailed twice: {}", mail.body);

    // Read notifications and a digest turned off are not mailed.
    let (status, _) =
        app.send(Method::PUT, "/api/v1/me/email/digest", Some(&dee), Some(json!({"digest": false}))).await;
    assert_eq!(status, 200);
    app.reply(topic, &bob, None, "Fourth answer").await;
    db.exec("UPDATE emails SET digest_sent_at = digest_sent_at - 900").await;
    assert_eq!(app.state.store.queue_digests(now, app.addr.clone()).await.expect("digests"), 0);
    assert_eq!(sink.mails().len(), 3);
}

#[tokio::test]
async fn notifications_are_mailed_as_a_digest_at_most_every_15_minutes_on_sqlite() {
    let app = spawn_app().await;
    notifications_are_mailed_as_a_digest_at_most_every_15_minutes(&app, Db::Sqlite(app.db_path())).await;
}

#[tokio::test]
async fn notifications_are_mailed_as_a_digest_at_most_every_15_minutes_on_postgres() {
    let db = TestDb::create().await;
    notifications_are_mailed_as_a_digest_at_most_every_15_minutes(&spawn_pg_app(&db).await, Db::Pg(&db)).await;
}

#[tokio::test]
async fn without_smtp_mail_is_refused_and_nothing_else_changes() {
    let app = spawn_app().await;
    let (status, body) = app.post("/api/v1/auth/password-reset", None, json!({"email": "a@example.org"})).await;
    assert_error("reset", status, &body, 403, "mail_unavailable");
    let body = json!({"username": "eve", "password": PASSWORD, "email": "eve@example.org"});
    let (status, body) = app.post("/api/v1/auth/register", None, body).await;
    assert_error("register with an address", status, &body, 403, "mail_unavailable");
    app.register("eve").await;
    logged_in(&app, "eve", "password123").await;
}

/// `pith user reset-link NAME` prints a one-use link that works like a
/// mailed one.
async fn reset_link_from_the_binary(args: &[&str]) -> String {
    let mut full: Vec<&std::ffi::OsStr> = vec!["user".as_ref(), "reset-link".as_ref()];
    full.extend(args.iter().map(std::ffi::OsStr::new));
    let out = run_pith(&full).await;
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let stdout = String::from_utf8(out.stdout).expect("utf-8");
    stdout.lines().last().expect("a link").to_owned()
}

#[tokio::test]
async fn pith_user_reset_link_prints_a_one_use_link() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().to_str().expect("path").to_owned();
    user_add(dir.path(), "fay", false).await;
    let link = reset_link_from_the_binary(&["fay", "--data-dir", &data, "--public-url", "https://forum.example"]).await;
    assert!(link.starts_with("https://forum.example/reset/"), "{link}");
    let plain = reset_link_from_the_binary(&["fay", "--data-dir", &data, "--listen", "127.0.0.1:9999"]).await;
    assert!(plain.starts_with("http://127.0.0.1:9999/reset/"), "{plain}");
    let out =
        run_pith(&["user".as_ref(), "reset-link".as_ref(), "nobody".as_ref(), "--data-dir".as_ref(), data.as_ref()])
            .await;
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("there is no user nobody"));

    let app = spawn_app_in(dir).await;
    let token = link.rsplit('/').next().expect("token");
    let body = json!({"token": token, "password": "chosen-password"});
    let (status, reply) = app.post("/api/v1/auth/password-reset/confirm", None, body.clone()).await;
    assert_eq!(status, 204, "{reply}");
    logged_in(&app, "fay", "chosen-password").await;
    let (status, reply) = app.post("/api/v1/auth/password-reset/confirm", None, body).await;
    assert_error("used", status, &reply, 400, "reset_token_invalid");
}

#[tokio::test]
async fn pith_user_reset_link_works_on_postgres() {
    let db = TestDb::create().await;
    let app = spawn_pg_app(&db).await;
    app.user("gus").await;
    let link = reset_link_from_the_binary(&["gus", "--database", &db.url, "--public-url", "http://f.example"]).await;
    let token = link.strip_prefix("http://f.example/reset/").expect("link");
    let (status, reply) = app
        .post("/api/v1/auth/password-reset/confirm", None, json!({"token": token, "password": "gus-password"}))
        .await;
    assert_eq!(status, 204, "{reply}");
    logged_in(&app, "gus", "gus-password").await;
}

#[tokio::test]
async fn mail_settings_show_in_pith_config_with_the_password_hidden_and_a_bad_combination_stops_start_up() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().to_str().expect("path");
    let args = ["config", "--json", "--data-dir", data, "--smtp-url", "smtps://forum:s3cret@mail.example.org"];
    let out = run_pith(&args.map(std::ffi::OsStr::new)).await;
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let json: Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(json["smtp-url"]["value"], "smtps://forum:(hidden)@mail.example.org");
    assert_eq!(json["mail-from"]["value"], Value::Null);
    assert_eq!(json["require-email"]["value"], "false");
    assert!(!String::from_utf8_lossy(&out.stdout).contains("s3cret"));

    let out = run_pith(&["config", "--smtp-url", "http://mail.example.org"].map(std::ffi::OsStr::new)).await;
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("smtp, smtp+starttls or smtps"));

    let port = free_port().to_string();
    let listen = format!("127.0.0.1:{port}");
    let serve = ["serve", "--data-dir", data, "--listen", &listen, "--require-email"];
    let out = run_pith(&serve.map(std::ffi::OsStr::new)).await;
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--require-email needs --smtp-url"));
    let serve = ["serve", "--data-dir", data, "--listen", &listen, "--smtp-url", "smtp://127.0.0.1:1"];
    let out = run_pith(&serve.map(std::ffi::OsStr::new)).await;
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--smtp-url needs --mail-from"));
}
