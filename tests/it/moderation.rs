//! Moderation end to end: moderators, removing and restoring (and what each
//! kind of reader then sees, cache included), locks, bans, reports, the
//! public log, and the registration modes.

use futures_util::StreamExt;
use reqwest::Method;
use serde_json::{Value, json};

use crate::support::helpers::{TestApp, assert_error, fetch, ids, spawn_app};

/// A forum with community `raspi` whose moderator is `moddy` (appointed over
/// the API), and plain users `bob` and `carol`.
struct Forum {
    app: TestApp,
    mo: String,
    bob: String,
    carol: String,
}

async fn forum() -> Forum {
    let app = spawn_app().await;
    app.community("raspi").await;
    let (mo, bob, carol) = (app.user("moddy").await, app.user("bob").await, app.user("carol").await);
    appoint(&app, "raspi", "moddy").await;
    Forum { app, mo, bob, carol }
}

async fn appoint(app: &TestApp, community: &str, user: &str) {
    let path = format!("/api/v1/communities/{community}/moderators/{user}");
    let (status, body) = app.send(Method::PUT, &path, Some(&app.admin_token), None).await;
    assert_eq!(status, 204, "appoint {user}: {body}");
}

/// `POST {path}` with a reason, as `token`.
async fn act(app: &TestApp, path: &str, token: &str) -> (u16, Value) {
    app.post(path, Some(token), json!({"reason": "rule 1"})).await
}

async fn read_as(app: &TestApp, topic: i64, token: Option<&str>) -> (u16, Value) {
    app.send(Method::GET, &format!("/api/v1/topics/{topic}?sort=old"), token, None).await
}

fn post_by_id(thread: &Value, id: i64) -> Value {
    thread["posts"].as_array().expect("posts").iter().find(|p| p["id"] == id).cloned().expect("the post is listed")
}

#[tokio::test]
async fn an_admin_appoints_and_removes_moderators_and_the_list_is_public() {
    let Forum { app, bob, .. } = forum().await;
    let (status, list) = app.get("/api/v1/communities/raspi/moderators").await;
    assert_eq!(status, 200);
    let names: Vec<&str> =
        list["moderators"].as_array().expect("list").iter().filter_map(|u| u["name"].as_str()).collect();
    assert_eq!(names, ["admin", "moddy"], "the creator first, then the appointed");

    let (status, body) = app.send(Method::PUT, "/api/v1/communities/raspi/moderators/carol", Some(&bob), None).await;
    assert_error("a plain user appoints", status, &body, 403, "forbidden");
    let (status, body) =
        app.send(Method::PUT, "/api/v1/communities/raspi/moderators/nobody", Some(&app.admin_token), None).await;
    assert_error("an unknown user", status, &body, 404, "not_found");
    let (status, body) =
        app.send(Method::PUT, "/api/v1/communities/nope/moderators/bob", Some(&app.admin_token), None).await;
    assert_error("an unknown community", status, &body, 404, "not_found");

    let path = "/api/v1/communities/raspi/moderators/moddy";
    assert_eq!(app.delete(path, Some(&app.admin_token)).await.0, 204);
    let (status, body) = app.delete(path, Some(&app.admin_token)).await;
    assert_error("not a moderator any more", status, &body, 404, "not_found");
    let (_, list) = app.get("/api/v1/communities/raspi/moderators").await;
    assert_eq!(list["moderators"].as_array().map(Vec::len), Some(1));
    app.stop().await;
}

#[tokio::test]
async fn a_removed_post_keeps_its_place_but_only_its_author_and_moderators_see_its_body() {
    let Forum { app, mo, bob, carol } = forum().await;
    let topic = app.topic("raspi", &carol, "A thread").await;
    let rude = app.reply(topic, &bob, None, "something rude").await;
    let answer = app.reply(topic, &carol, Some(rude), "a fair answer").await;
    let path = format!("/api/v1/topics/{topic}?sort=old");
    let before = fetch(app.req(Method::GET, &path)).await;
    let etag = before.header("etag").expect("etag").to_owned();

    assert_eq!(act(&app, &format!("/api/v1/posts/{rude}/remove"), &mo).await.0, 204);

    // The author reads first: their private view must not be what the cache keeps.
    let (status, own) = read_as(&app, topic, Some(&bob)).await;
    assert_eq!(status, 200);
    assert_eq!(post_by_id(&own, rude)["body"], "something rude", "the author sees their own removed post");
    assert_eq!(post_by_id(&own, rude)["removed"], true);

    let public = fetch(app.req(Method::GET, &path).header("if-none-match", &etag)).await;
    assert_eq!(public.status, 200, "the cached rendering was evicted");
    assert_ne!(public.header("etag"), Some(etag.as_str()));
    let thread = public.json();
    let removed = post_by_id(&thread, rude);
    assert_eq!((removed["removed"].clone(), removed["body"].clone()), (json!(true), json!("")), "{removed}");
    assert_eq!(post_by_id(&thread, answer)["body"], "a fair answer", "its replies stay");
    assert_eq!(post_by_id(&thread, answer)["parent_id"], rude);
    assert!(!String::from_utf8_lossy(&public.bytes).contains("something rude"));

    for (who, token, sees) in [
        ("another user", Some(carol.as_str()), false),
        ("a bad token", Some("not-a-token"), false),
        ("the moderator", Some(mo.as_str()), true),
        ("an admin", Some(app.admin_token.as_str()), true),
        ("the author", Some(bob.as_str()), true),
        ("anonymous", None, false),
    ] {
        let mut req = app.req(Method::GET, &path);
        if let Some(t) = token {
            req = req.bearer_auth(t);
        }
        let reply = fetch(req).await;
        assert_eq!(reply.status, 200, "{who}");
        let body = post_by_id(&reply.json(), rude)["body"].clone();
        assert_eq!(body == "something rude", sees, "{who}: {body}");
        let private = reply.header("cache-control") == Some("private, no-cache");
        assert_eq!(private, sees, "{who}: only a view with removed content is private");
    }
    // The public view is served from the cache: the same validator again.
    let again = fetch(app.req(Method::GET, &path).header("if-none-match", public.header("etag").expect("etag"))).await;
    assert_eq!(again.status, 304);

    assert_eq!(act(&app, &format!("/api/v1/posts/{rude}/restore"), &mo).await.0, 204);
    let restored =
        fetch(app.req(Method::GET, &path).header("if-none-match", public.header("etag").expect("etag"))).await;
    assert_eq!(restored.status, 200, "the restore evicted the cached rendering too");
    let back = post_by_id(&restored.json(), rude);
    assert_eq!((back.get("removed"), back["body"].clone()), (None, json!("something rude")), "{back}");
    assert_eq!(restored.header("cache-control"), Some("no-cache"));

    let (status, body) = app.patch(&format!("/api/v1/posts/{rude}"), Some(&bob), json!({"body": "edited"})).await;
    assert_eq!(status, 200, "a restored post is the author's to edit again: {body}");
    app.stop().await;
}

#[tokio::test]
async fn a_removed_post_cannot_be_edited_voted_on_or_reported_and_its_profile_entry_goes() {
    let Forum { app, mo, bob, carol } = forum().await;
    let topic = app.topic("raspi", &carol, "A thread").await;
    let post = app.reply(topic, &bob, None, "spam spam").await;
    assert_eq!(act(&app, &format!("/api/v1/posts/{post}/remove"), &mo).await.0, 204);
    let (status, body) = app.patch(&format!("/api/v1/posts/{post}"), Some(&bob), json!({"body": "sneaky"})).await;
    assert_error("edit a removed post", status, &body, 403, "forbidden");
    let (status, body) = app.post(&format!("/api/v1/posts/{post}/vote"), Some(&carol), json!({"value": 1})).await;
    assert_error("vote on a removed post", status, &body, 422, "invalid_field");
    let (status, body) = app.post(&format!("/api/v1/posts/{post}/report"), Some(&carol), json!({"reason": "x"})).await;
    assert_error("report a removed post", status, &body, 422, "invalid_field");
    let (_, profile) = app.get("/api/v1/users/bob").await;
    assert_eq!(profile["posts"], json!([]), "removed posts leave the author's public profile");
    app.stop().await;
}

#[tokio::test]
async fn a_removed_topic_disappears_for_the_public_and_comes_back_on_restore() {
    let Forum { app, mo, bob, carol } = forum().await;
    let keep = app.topic("raspi", &carol, "Keep me").await;
    let topic = app.topic("raspi", &bob, "Remove me").await;
    app.reply(topic, &carol, None, "a reply").await;
    let listings = ["/api/v1/topics?sort=new", "/api/v1/communities/raspi/topics?sort=new"];
    for l in listings {
        assert_eq!(app.list(l).await.0, [topic, keep], "{l}");
    }
    assert_eq!(read_as(&app, topic, None).await.0, 200, "cached before the removal");

    assert_eq!(act(&app, &format!("/api/v1/topics/{topic}/remove"), &mo).await.0, 204);
    for l in listings {
        assert_eq!(app.list(l).await.0, [keep], "{l}");
    }
    assert_eq!(app.get("/api/v1/communities/raspi").await.1["topic_count"], 1);
    assert_eq!(app.get("/api/v1/users/bob").await.1["topics"], json!([]));
    assert_eq!(app.get("/api/v1/users/carol").await.1["posts"], json!([]), "replies in it are hidden too");
    for (who, token, status) in [("anonymous", None, 404), ("another user", Some(carol.as_str()), 404)] {
        let (got, body) = read_as(&app, topic, token).await;
        assert_eq!(got, status, "{who}: {body}");
    }
    for (who, token) in [("the author", &bob), ("the moderator", &mo), ("an admin", &app.admin_token)] {
        let (status, body) = read_as(&app, topic, Some(token)).await;
        assert_eq!(status, 200, "{who}");
        assert_eq!(
            (body["topic"]["removed"].clone(), body["topic"]["title"].clone()),
            (json!(true), json!("Remove me"))
        );
    }
    let (status, body) =
        app.post(&format!("/api/v1/topics/{topic}/posts"), Some(&bob), json!({"body": "hello?"})).await;
    assert_error("reply to a removed topic", status, &body, 422, "invalid_field");

    assert_eq!(act(&app, &format!("/api/v1/topics/{topic}/restore"), &mo).await.0, 204);
    for l in listings {
        assert_eq!(app.list(l).await.0, [topic, keep], "{l}");
    }
    let (status, body) = read_as(&app, topic, None).await;
    assert_eq!((status, body["topic"]["removed"].clone()), (200, json!(false)));
    app.stop().await;
}

#[tokio::test]
async fn a_moderator_acts_only_in_their_own_community_and_plain_users_not_at_all() {
    let Forum { app, mo, bob, carol } = forum().await;
    app.community("arduino").await;
    let theirs = app.topic("arduino", &bob, "Elsewhere").await;
    let post = app.reply(theirs, &bob, None, "a post").await;
    let ours = app.topic("raspi", &bob, "Here").await;
    for path in [
        format!("/api/v1/topics/{theirs}/remove"),
        format!("/api/v1/topics/{theirs}/lock"),
        format!("/api/v1/posts/{post}/remove"),
    ] {
        let (status, body) = act(&app, &path, &mo).await;
        assert_error(&format!("moderator of raspi: {path}"), status, &body, 403, "forbidden");
    }
    let (status, body) = app.post("/api/v1/communities/arduino/bans", Some(&mo), json!({"username": "bob"})).await;
    assert_error("ban in another community", status, &body, 403, "forbidden");
    let (status, body) = app.send(Method::GET, "/api/v1/communities/arduino/reports", Some(&mo), None).await;
    assert_error("reports of another community", status, &body, 403, "forbidden");
    for path in [format!("/api/v1/topics/{ours}/remove"), format!("/api/v1/topics/{ours}/lock")] {
        let (status, body) = act(&app, &path, &carol).await;
        assert_error(&format!("plain user: {path}"), status, &body, 403, "forbidden");
        let (status, body) = app.post(&path, None, json!({})).await;
        assert_error(&format!("anonymous: {path}"), status, &body, 401, "unauthorized");
    }
    assert_eq!(read_as(&app, theirs, None).await.0, 200, "nothing was removed");
    assert_eq!(read_as(&app, ours, None).await.1["topic"]["locked"], false, "nothing was locked");
    let (status, body) =
        app.post(&format!("/api/v1/topics/{ours}/remove"), Some(&mo), json!({"reason": "x".repeat(501)})).await;
    assert_error("an overlong reason", status, &body, 422, "invalid_field");
    let (status, body) = act(&app, "/api/v1/posts/424242/remove", &mo).await;
    assert_error("an unknown post", status, &body, 404, "not_found");
    app.stop().await;
}

#[tokio::test]
async fn a_locked_topic_takes_replies_only_from_moderators_and_votes_from_all() {
    let Forum { app, mo, bob, carol } = forum().await;
    let topic = app.topic("raspi", &carol, "Heated").await;
    let first = app.reply(topic, &bob, None, "first").await;
    assert_eq!(read_as(&app, topic, None).await.1["topic"]["locked"], false);
    assert_eq!(act(&app, &format!("/api/v1/topics/{topic}/lock"), &mo).await.0, 204);
    assert_eq!(read_as(&app, topic, None).await.1["topic"]["locked"], true, "the cached page shows the lock");

    for parent in [None, Some(first)] {
        let body = json!({"body": "one more thing", "parent_id": parent});
        let (status, body) = app.post(&format!("/api/v1/topics/{topic}/posts"), Some(&bob), body).await;
        assert_error("reply to a locked topic", status, &body, 403, "topic_locked");
    }
    app.reply(topic, &mo, None, "Locked: please be civil").await;
    app.reply(topic, &app.admin_token, None, "Agreed").await;
    assert_eq!(app.vote("posts", first, &carol, 1).await, 1, "votes stay open");

    assert_eq!(act(&app, &format!("/api/v1/topics/{topic}/unlock"), &mo).await.0, 204);
    app.reply(topic, &bob, None, "thanks").await;
    assert_eq!(read_as(&app, topic, None).await.1["topic"]["locked"], false);
    app.stop().await;
}

async fn ban(app: &TestApp, path: &str, token: &str, body: Value) -> Value {
    let (status, ban) = app.post(path, Some(token), body).await;
    assert_eq!(status, 201, "{ban}");
    ban
}

#[tokio::test]
async fn a_temporary_ban_stops_writes_in_its_community_until_it_expires() {
    let Forum { app, mo, bob, carol } = forum().await;
    app.community("arduino").await;
    let topic = app.topic("raspi", &carol, "Open").await;
    let banned = ban(
        &app,
        "/api/v1/communities/raspi/bans",
        &mo,
        // Long enough for the refused writes below even on a loaded machine.
        json!({"username": "bob", "reason": "flaming", "duration_secs": 8}),
    )
    .await;
    assert_eq!((banned["user"].clone(), banned["community"].clone()), (json!("bob"), json!("raspi")));
    assert!(banned["expires_at"].is_string(), "{banned}");

    let writes = [
        (format!("/api/v1/topics/{topic}/posts"), json!({"body": "let me in"})),
        ("/api/v1/communities/raspi/topics".to_owned(), json!({"title": "New"})),
        (format!("/api/v1/topics/{topic}/vote"), json!({"value": 1})),
        (format!("/api/v1/topics/{topic}/report"), json!({"reason": "mods are unfair"})),
    ];
    for (path, body) in &writes {
        let (status, err) = app.post(path, Some(&bob), body.clone()).await;
        assert_error(path, status, &err, 403, "banned");
        let message = err["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains("raspi") && message.contains("until") && message.contains("flaming"), "{message}");
    }
    app.topic("arduino", &bob, "Elsewhere is fine").await;

    tokio::time::sleep(std::time::Duration::from_millis(9100)).await;
    app.reply(topic, &bob, None, "back again").await;
    let (_, list) = app.send(Method::GET, "/api/v1/communities/raspi/bans", Some(&mo), None).await;
    assert_eq!(list["bans"], json!([]), "an expired ban is not listed");
    app.stop().await;
}

#[tokio::test]
async fn a_permanent_ban_holds_until_lifted_and_only_moderators_see_the_list() {
    let Forum { app, mo, bob, carol } = forum().await;
    let topic = app.topic("raspi", &carol, "Open").await;
    let banned = ban(&app, "/api/v1/communities/raspi/bans", &mo, json!({"username": "bob"})).await;
    assert_eq!(banned["expires_at"], Value::Null);
    let (status, err) = app.post(&format!("/api/v1/topics/{topic}/posts"), Some(&bob), json!({"body": "x"})).await;
    assert_error("permanently banned", status, &err, 403, "banned");
    assert!(err["error"]["message"].as_str().unwrap_or_default().contains("permanently"), "{err}");

    let (status, list) = app.send(Method::GET, "/api/v1/communities/raspi/bans", Some(&mo), None).await;
    assert_eq!(status, 200);
    assert_eq!(
        list["bans"].as_array().map(|b| b.iter().map(|b| b["user"].clone()).collect::<Vec<_>>()),
        Some(vec![json!("bob")])
    );
    let (status, body) = app.send(Method::GET, "/api/v1/communities/raspi/bans", Some(&carol), None).await;
    assert_error("a plain user lists bans", status, &body, 403, "forbidden");

    for (who, name, want) in [("the moderator", "moddy", 403), ("an admin", "admin", 403), ("nobody", "nobody", 404)] {
        let (status, body) = app.post("/api/v1/communities/raspi/bans", Some(&mo), json!({"username": name})).await;
        assert_eq!(status, want, "ban {who}: {body}");
    }
    for bad in [
        json!({"username": "carol", "duration_secs": 0}),
        json!({"username": "carol", "duration_secs": -5}),
        json!({"username": "a b"}),
    ] {
        let (status, body) = app.post("/api/v1/communities/raspi/bans", Some(&mo), bad.clone()).await;
        assert_eq!(status, 422, "{bad}: {body}");
    }

    assert_eq!(app.delete("/api/v1/communities/raspi/bans/bob", Some(&mo)).await.0, 204);
    app.reply(topic, &bob, None, "thank you").await;
    let (status, body) = app.delete("/api/v1/communities/raspi/bans/bob", Some(&mo)).await;
    assert_error("no ban left to lift", status, &body, 404, "not_found");
    app.stop().await;
}

#[tokio::test]
async fn a_site_ban_refuses_writes_everywhere_but_reading_and_logging_in_still_work() {
    let Forum { app, mo, bob, carol } = forum().await;
    app.community("arduino").await;
    let topic = app.topic("arduino", &carol, "Open").await;
    let (status, body) = app.post("/api/v1/admin/bans", Some(&mo), json!({"username": "bob"})).await;
    assert_error("a moderator bans site-wide", status, &body, 403, "forbidden");
    let banned =
        ban(&app, "/api/v1/admin/bans", &app.admin_token, json!({"username": "bob", "reason": "spammer"})).await;
    assert_eq!(banned["community"], Value::Null);

    for community in ["raspi", "arduino"] {
        let path = format!("/api/v1/communities/{community}/topics");
        let (status, err) = app.post(&path, Some(&bob), json!({"title": "buy now"})).await;
        assert_error(community, status, &err, 403, "banned");
        assert!(err["error"]["message"].as_str().unwrap_or_default().contains("this site"), "{err}");
    }
    let (status, err) = app.post(&format!("/api/v1/topics/{topic}/vote"), Some(&bob), json!({"value": 1})).await;
    assert_error("vote", status, &err, 403, "banned");
    assert_eq!(app.send(Method::GET, "/api/v1/auth/me", Some(&bob), None).await.0, 200, "the session still works");
    assert_eq!(read_as(&app, topic, Some(&bob)).await.0, 200);

    let (status, list) = app.send(Method::GET, "/api/v1/admin/bans", Some(&app.admin_token), None).await;
    assert_eq!((status, list["bans"].as_array().map(Vec::len)), (200, Some(1)));
    let (status, body) = app.post("/api/v1/admin/bans", Some(&app.admin_token), json!({"username": "admin"})).await;
    assert_error("an admin bans an admin", status, &body, 403, "forbidden");
    assert_eq!(app.delete("/api/v1/admin/bans/bob", Some(&app.admin_token)).await.0, 204);
    app.topic("arduino", &bob, "Sorry").await;
    app.stop().await;
}

#[tokio::test]
async fn users_report_moderators_triage_and_reporters_see_no_one_elses_reports() {
    let Forum { app, mo, bob, carol } = forum().await;
    let dave = app.user("dave").await;
    let topic = app.topic("raspi", &bob, "Questionable").await;
    let post = app.reply(topic, &bob, None, "very questionable").await;

    let (status, first) =
        app.post(&format!("/api/v1/posts/{post}/report"), Some(&carol), json!({"reason": " insults "})).await;
    assert_eq!(status, 201, "{first}");
    assert_eq!(
        (first["status"].clone(), first["reason"].clone(), first["post_id"].clone(), first["reporter"].clone()),
        (json!("open"), json!("insults"), json!(post), json!("carol"))
    );
    let (status, body) =
        app.post(&format!("/api/v1/posts/{post}/report"), Some(&carol), json!({"reason": "again"})).await;
    assert_error("the same report twice", status, &body, 409, "conflict");
    for bad in [json!({"reason": "  "}), json!({"reason": "x".repeat(501)}), json!({})] {
        let (status, body) = app.post(&format!("/api/v1/topics/{topic}/report"), Some(&dave), bad.clone()).await;
        assert_eq!(status, 422, "{bad}: {body}");
    }
    let (status, second) =
        app.post(&format!("/api/v1/topics/{topic}/report"), Some(&dave), json!({"reason": "spam"})).await;
    assert_eq!((status, second["post_id"].clone()), (201, Value::Null));
    let (status, body) = app.post("/api/v1/topics/424242/report", Some(&dave), json!({"reason": "spam"})).await;
    assert_error("an unknown topic", status, &body, 404, "not_found");
    let (status, body) = app.post(&format!("/api/v1/topics/{topic}/report"), None, json!({"reason": "spam"})).await;
    assert_error("anonymous", status, &body, 401, "unauthorized");

    let queue = "/api/v1/communities/raspi/reports";
    for (who, token) in [("the reporter", &carol), ("the reported", &bob)] {
        let (status, body) = app.send(Method::GET, queue, Some(token), None).await;
        assert_error(who, status, &body, 403, "forbidden");
    }
    let (status, open) = app.send(Method::GET, queue, Some(&mo), None).await;
    assert_eq!(status, 200);
    assert_eq!(
        ids(&open["reports"]),
        [second["id"].as_i64().expect("id"), first["id"].as_i64().expect("id")],
        "newest first"
    );

    let resolve = format!("/api/v1/reports/{}", first["id"]);
    let (status, body) = app.patch(&resolve, Some(&carol), json!({"status": "resolved"})).await;
    assert_error("the reporter resolves", status, &body, 403, "forbidden");
    let (status, body) = app.patch(&resolve, Some(&mo), json!({"status": "open"})).await;
    assert_error("reopen", status, &body, 422, "invalid_field");
    let (status, done) = app.patch(&resolve, Some(&mo), json!({"status": "resolved"})).await;
    assert_eq!(status, 200, "{done}");
    assert_eq!((done["status"].clone(), done["resolved_by"].clone()), (json!("resolved"), json!("moddy")));
    assert!(done["resolved_at"].is_string());
    let (status, body) = app.patch("/api/v1/reports/424242", Some(&mo), json!({"status": "dismissed"})).await;
    assert_error("an unknown report", status, &body, 404, "not_found");

    for (query, want) in
        [("", vec![&second]), ("?status=resolved", vec![&first]), ("?status=all", vec![&second, &first])]
    {
        let (_, page) = app.send(Method::GET, &format!("{queue}{query}"), Some(&mo), None).await;
        let want: Vec<i64> = want.iter().map(|r| r["id"].as_i64().expect("id")).collect();
        assert_eq!(ids(&page["reports"]), want, "{query}");
    }
    let (_, page) = app.send(Method::GET, &format!("{queue}?status=all&limit=1"), Some(&mo), None).await;
    let next = page["next"].as_i64().expect("a next page");
    let (_, rest) = app.send(Method::GET, &format!("{queue}?status=all&limit=1&after={next}"), Some(&mo), None).await;
    assert_eq!(ids(&rest["reports"]), [first["id"].as_i64().expect("id")]);
    assert_eq!(rest["next"], Value::Null);
    let (status, body) = app.send(Method::GET, &format!("{queue}?status=maybe"), Some(&mo), None).await;
    assert_error("a bad status", status, &body, 400, "invalid_query");
    app.stop().await;
}

#[tokio::test]
async fn the_moderation_log_shows_every_action_publicly_newest_first() {
    let Forum { app, mo, bob, carol } = forum().await;
    let topic = app.topic("raspi", &carol, "Logged").await;
    let post = app.reply(topic, &bob, None, "hmm").await;
    act(&app, &format!("/api/v1/posts/{post}/remove"), &mo).await;
    // Removing again changes nothing and is not logged twice.
    act(&app, &format!("/api/v1/posts/{post}/remove"), &mo).await;
    act(&app, &format!("/api/v1/posts/{post}/restore"), &mo).await;
    act(&app, &format!("/api/v1/topics/{topic}/lock"), &mo).await;
    ban(
        &app,
        "/api/v1/communities/raspi/bans",
        &mo,
        json!({"username": "bob", "reason": "rule 2", "duration_secs": 3600}),
    )
    .await;
    app.delete("/api/v1/communities/raspi/bans/bob", Some(&mo)).await;
    ban(&app, "/api/v1/admin/bans", &app.admin_token, json!({"username": "carol"})).await;

    let (status, log) = app.get("/api/v1/communities/raspi/modlog").await;
    assert_eq!(status, 200, "public: no token needed");
    let entries = log["entries"].as_array().expect("entries");
    let actions: Vec<&str> = entries.iter().filter_map(|e| e["action"].as_str()).collect();
    assert_eq!(actions, ["unban", "ban", "lock_topic", "restore_post", "remove_post", "appoint_moderator"]);
    let removal = &entries[4];
    assert_eq!(
        (&removal["actor"], &removal["target_user"], &removal["post_id"], &removal["topic_id"], &removal["reason"]),
        (&json!("moddy"), &json!("bob"), &json!(post), &json!(topic), &json!("rule 1"))
    );
    assert!(entries[1]["expires_at"].is_string(), "a temporary ban shows its end");
    assert_eq!((&entries[5]["actor"], &entries[5]["target_user"]), (&json!("admin"), &json!("moddy")));

    let (_, first) = app.get("/api/v1/communities/raspi/modlog?limit=2").await;
    let next = first["next"].as_i64().expect("more pages");
    let (_, second) = app.get(&format!("/api/v1/communities/raspi/modlog?limit=4&after={next}")).await;
    let paged: Vec<Value> =
        [&first, &second].iter().flat_map(|p| p["entries"].as_array().expect("entries").clone()).collect();
    assert_eq!(&paged, entries);
    assert_eq!(second["next"], Value::Null);

    let (_, site) = app.get("/api/v1/modlog").await;
    let newest = &site["entries"][0];
    assert_eq!(
        (&newest["action"], &newest["community"], &newest["target_user"]),
        (&json!("ban"), &Value::Null, &json!("carol"))
    );
    let (status, body) = app.get("/api/v1/communities/nope/modlog").await;
    assert_error("an unknown community", status, &body, 404, "not_found");
    let (status, body) = app.get("/api/v1/modlog?limit=0").await;
    assert_error("limit 0", status, &body, 400, "invalid_query");
    app.stop().await;
}

#[tokio::test]
async fn removing_and_restoring_a_post_reaches_live_subscribers() {
    let Forum { app, mo, bob, carol } = forum().await;
    let topic = app.topic("raspi", &carol, "Live").await;
    let post = app.reply(topic, &bob, None, "live words").await;
    let ws_url = format!("{}/api/v1/live?topics={topic}", app.addr.replacen("http", "ws", 1));
    let (mut ws, _) = tokio_tungstenite::connect_async(ws_url).await.expect("connect");
    let mut next = async || loop {
        let msg = tokio::time::timeout(std::time::Duration::from_secs(5), ws.next()).await.expect("an event in time");
        if let tokio_tungstenite::tungstenite::Message::Text(t) = msg.expect("open").expect("message") {
            return serde_json::from_str::<Value>(&t).expect("json");
        }
    };
    assert_eq!(next().await["type"], "subscribed");
    act(&app, &format!("/api/v1/posts/{post}/remove"), &mo).await;
    assert_eq!(next().await, json!({"type": "post_removed", "topic_id": topic, "post_id": post}));
    act(&app, &format!("/api/v1/posts/{post}/restore"), &mo).await;
    let event = next().await;
    assert_eq!((&event["type"], &event["post"]["body"]), (&json!("post_edited"), &json!("live words")));
    app.stop().await;
}

async fn register(app: &TestApp, name: &str, invite: Option<&str>) -> (u16, Value) {
    let body = json!({"username": name, "password": "password123", "invite": invite});
    app.post("/api/v1/auth/register", None, body).await
}

async fn set_registration(app: &TestApp, mode: &str) {
    let (status, body) = app
        .send(Method::PUT, "/api/v1/admin/settings", Some(&app.admin_token), Some(json!({"registration": mode})))
        .await;
    assert_eq!((status, body), (200, json!({"registration": mode})));
}

#[tokio::test]
async fn registration_is_open_closed_or_by_invitation_as_the_admin_sets_it() {
    let app = spawn_app().await;
    let bob = app.user("bob").await;
    let (status, settings) = app.send(Method::GET, "/api/v1/admin/settings", Some(&app.admin_token), None).await;
    assert_eq!((status, settings), (200, json!({"registration": "open"})), "open by default");
    assert_eq!(register(&app, "early", None).await.0, 201);
    let (status, body) =
        app.send(Method::PUT, "/api/v1/admin/settings", Some(&bob), Some(json!({"registration": "closed"}))).await;
    assert_error("a plain user closes registration", status, &body, 403, "forbidden");
    let (status, body) = app.send(Method::GET, "/api/v1/admin/settings", Some(&bob), None).await;
    assert_error("a plain user reads the settings", status, &body, 403, "forbidden");
    let (status, body) = app
        .send(Method::PUT, "/api/v1/admin/settings", Some(&app.admin_token), Some(json!({"registration": "maybe"})))
        .await;
    assert_error("an unknown mode", status, &body, 422, "invalid_body");

    set_registration(&app, "closed").await;
    let (status, body) = register(&app, "closed1", None).await;
    assert_error("closed", status, &body, 403, "registration_closed");

    set_registration(&app, "invite").await;
    let (status, body) = register(&app, "invited", None).await;
    assert_error("no code", status, &body, 403, "invite_required");
    let (status, body) = register(&app, "invited", Some("made-up")).await;
    assert_error("a made-up code", status, &body, 403, "invalid_invite");
    let (status, body) = app.post("/api/v1/admin/invites", Some(&bob), json!({})).await;
    assert_error("a plain user invites", status, &body, 403, "forbidden");
    let (status, invite) =
        app.post("/api/v1/admin/invites", Some(&app.admin_token), json!({"expires_in_secs": 3600})).await;
    assert_eq!(status, 201, "{invite}");
    let code = invite["code"].as_str().expect("code").to_owned();
    assert!(invite["expires_at"].is_string());

    let (status, body) = register(&app, "bob", Some(&code)).await;
    assert_error("a taken name", status, &body, 409, "conflict");
    let (status, body) = register(&app, "invited", Some(&code)).await;
    assert_eq!(status, 201, "a failed registration does not use the code up: {body}");
    let (status, body) = register(&app, "second", Some(&code)).await;
    assert_error("the code again", status, &body, 403, "invalid_invite");

    // An expired code, made straight in the store (a past expiry).
    let expired = pith::app::auth::new_token();
    let past = pith::model::Timestamp(pith::model::Timestamp::now().0 - 60);
    use pith::store::Store;
    app.state.store.create_invite(None, pith::app::auth::token_digest(&expired), Some(past)).await.expect("invite");
    let (status, body) = register(&app, "late", Some(&expired)).await;
    assert_error("an expired code", status, &body, 403, "invalid_invite");

    set_registration(&app, "open").await;
    assert_eq!(register(&app, "later", None).await.0, 201);
    app.stop().await;
}

#[tokio::test]
async fn the_operator_makes_an_invite_code_on_the_command_line() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = crate::support::child::run_pith(&[
        "user".as_ref(),
        "invite".as_ref(),
        "--data-dir".as_ref(),
        dir.path().as_os_str(),
    ])
    .await;
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let stdout = String::from_utf8(out.stdout).expect("utf-8");
    let code = stdout.lines().last().expect("a code").trim().to_owned();
    let app = crate::support::helpers::spawn_app_in(dir).await;
    set_registration(&app, "invite").await;
    let (status, body) = register(&app, "invited", Some(&code)).await;
    assert_eq!(status, 201, "{body}");
    let (status, body) = register(&app, "again", Some(&code)).await;
    assert_error("used", status, &body, 403, "invalid_invite");
    app.stop().await;
}
