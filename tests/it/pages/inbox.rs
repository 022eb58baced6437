//! Issue 21's inbox in the forum: the header's "Inbox (N)" for the
//! signed-in (and nothing of it on signed-out pages, which stay the same
//! for everyone), the `/inbox` page with links to each post, "mark all
//! read" with its CSRF token, and the page's live stream.

use super::{Browser, signed_in, text};
use crate::support::helpers::{fetch, spawn_app};

#[tokio::test]
async fn the_inbox_page_lists_replies_and_mentions_and_marks_them_read() {
    let app = spawn_app().await;
    app.community("rust").await;
    let (mut alice, alice_token) = signed_in(&app, "alice").await;
    let bob = app.user("bob").await;
    let topic = app.topic("rust", &alice_token, "Borrowing").await;

    let front = text(&alice.get("/").await);
    assert!(front.contains(">Inbox</a>"), "no count when nothing is unread: {front}");
    let reply = app.reply(topic, &bob, None, "A reply <b>with</b> markup").await;
    // A reply to his own comment: a mention for Alice, no reply.
    let mention = app.reply(topic, &bob, Some(reply), "Ask @alice about it").await;

    let front = text(&alice.get("/").await);
    assert!(front.contains(">Inbox (2)</a>"), "{front}");
    let anonymous = text(&Browser::new(&app).get("/").await);
    assert!(!anonymous.contains("Inbox"), "signed-out pages have no inbox: {anonymous}");

    let page = alice.get("/inbox").await;
    assert_eq!(page.status, 200);
    assert_eq!(page.header("cache-control"), Some("private, no-cache"));
    let page = text(&page);
    assert!(page.contains("2 unread notifications"), "{page}");
    assert!(page.contains(&format!("href=\"/t/{topic}?thread={reply}#p{reply}\"")), "{page}");
    assert!(page.contains(&format!("href=\"/t/{topic}?thread={mention}#p{mention}\"")), "{page}");
    assert!(page.contains("replied to you") && page.contains("mentioned you"), "{page}");
    assert!(page.contains("A reply &#60;b&#62;with&#60;/b&#62; markup"), "the excerpt is escaped text: {page}");
    assert!(page.find("mentioned you") < page.find("replied to you"), "newest first");

    // The mention itself links to the profile on the topic page.
    let topic_page = text(&alice.get(&format!("/t/{topic}")).await);
    assert!(topic_page.contains("<a href=\"/u/alice\" rel=\"nofollow ugc noopener\">@alice</a>"), "{topic_page}");

    // Marking all read needs the page's CSRF token.
    let refused = alice.post("/inbox/read", &[("csrf", "forged")]).await;
    assert_eq!(refused.status, 403);
    let done = alice.submit("/inbox", "/inbox/read", &[]).await;
    assert_eq!((done.status, done.header("location")), (303, Some("/inbox")));
    let page = text(&alice.get("/inbox").await);
    assert!(page.contains("0 unread notifications") && page.contains(">Inbox</a>"), "{page}");
    assert!(page.contains("replied to you"), "read notifications stay listed: {page}");

    // Signed out: the page asks to log in, the stream is refused.
    let r = Browser::new(&app).get("/inbox").await;
    assert_eq!((r.status, r.header("location")), (303, Some("/login?next=/inbox")));
    let r = fetch(app.req(reqwest::Method::GET, "/inbox/live")).await;
    assert_eq!(r.status, 401);
    app.stop().await;
}

#[tokio::test]
async fn the_pages_live_stream_carries_the_sessions_inbox_and_refuses_foreign_pages() {
    let app = spawn_app().await;
    app.community("rust").await;
    let (alice, alice_token) = signed_in(&app, "alice").await;
    let bob = app.user("bob").await;
    let topic = app.topic("rust", &alice_token, "Borrowing").await;
    let cookie = format!("pith_session={}", alice.cookies["pith_session"]);

    let foreign = app
        .req(reqwest::Method::GET, "/inbox/live")
        .header("cookie", &cookie)
        .header("origin", "https://evil.example")
        .send()
        .await
        .expect("answer");
    assert_eq!(foreign.status(), 403);

    let mut stream = app
        .req(reqwest::Method::GET, &format!("/inbox/live?topics={topic}"))
        .header("cookie", &cookie)
        .send()
        .await
        .expect("stream");
    assert_eq!(stream.status(), 200);
    assert_eq!(stream.headers()["content-type"], "text/event-stream");
    let post = app.reply(topic, &bob, None, "hello").await;
    let mut seen = String::new();
    while !seen.contains("\"type\":\"inbox\"") {
        let chunk = tokio::time::timeout(std::time::Duration::from_secs(10), stream.chunk())
            .await
            .expect("an event in time")
            .expect("read")
            .expect("open");
        seen.push_str(&String::from_utf8_lossy(&chunk));
    }
    assert!(seen.contains("\"type\":\"post\""), "the topic's events too: {seen}");
    let inbox = format!("\"type\":\"inbox\",\"kind\":\"reply\",\"topic_id\":{topic},\"post_id\":{post},\"unread\":1");
    assert!(seen.contains(&inbox), "{seen}");
    drop(stream);
    app.stop().await;
}
