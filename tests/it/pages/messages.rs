//! Issue 21's private messages and user blocks in the forum: sending from
//! a conversation page (Post/Redirect/Get, CSRF, no script), the header's
//! count, reporting a received message and the administrators' page of
//! reported ones, the profile's message link and block button, a blocked
//! author's comments collapsed for the blocker only (the cached signed-out
//! page unchanged, byte for byte), and the blocks page.

use super::{Browser, admin_browser, forum, signed_in, text};
use crate::support::helpers::spawn_app;

#[tokio::test]
async fn a_message_sent_from_the_conversation_page_reaches_the_recipient_who_can_report_it() {
    let app = spawn_app().await;
    let (mut alice, _) = signed_in(&app, "alice").await;
    let (mut bob, _) = signed_in(&app, "bob").await;

    let html = text(&alice.get("/u/bob").await);
    assert!(html.contains("href=\"/messages/bob\">Send a message</a>"), "{html}");
    assert!(html.contains("formaction=\"/u/bob/block\" name=\"on\" value=\"1\">Block</button>"));
    let own = text(&alice.get("/u/alice").await);
    assert!(!own.contains("Send a message") && !own.contains("/block\""), "not on one's own profile");
    let public = text(&Browser::new(&app).get("/u/bob").await);
    assert!(!public.contains("Send a message"), "nor for the signed-out");
    assert!(text(&alice.get("/settings").await).contains("href=\"/blocks\""));

    let r = alice.submit("/messages/bob", "/messages/bob", &[("body", "Hello *Bob*")]).await;
    assert_eq!(r.status, 303);
    let to = r.header("location").expect("location").to_owned();
    assert!(to.starts_with("/messages/bob#m"), "{to}");
    let html = text(&alice.get("/messages/bob").await);
    assert!(html.contains("<p>Hello <em>Bob</em></p>") && !html.contains("Why report"), "no report of one's own");

    let html = text(&bob.get("/messages").await);
    assert!(html.contains("id=\"inbox-link\" data-unread=\"1\">Inbox (1)</a>"), "{html}");
    assert!(html.contains("href=\"/messages/alice\"><strong>alice</strong></a> · <span class=\"tag\">1 unread</span>"));
    let html = text(&bob.get("/messages/alice").await);
    assert!(html.contains("<p>Hello <em>Bob</em></p>"), "{html}");
    assert!(html.contains("data-unread=\"0\">Inbox</a>"), "reading it marked it read");
    let inbox = text(&bob.get("/inbox").await);
    assert!(inbox.contains("sent you a message") && inbox.contains("href=\"/messages/alice\""), "{inbox}");

    // A refusal shows next to the form, with the text kept.
    let r = bob.submit("/messages/alice", "/messages/alice", &[("body", "   ")]).await;
    assert_eq!(r.status, 422);
    assert!(text(&r).contains("class=\"form-error\""));
    let r = bob.post("/messages/alice", &[("body", "no token")]).await;
    assert_eq!(r.status, 403);
    let r = Browser::new(&app).get("/messages").await;
    assert_eq!((r.status, r.header("location")), (303, Some("/login?next=/messages")));
    assert_eq!(bob.get("/messages/nobody").await.status, 404);

    // Bob reports it; the administrators read it, and only the admins.
    let html = text(&bob.get("/messages/alice").await);
    let id = to.rsplit("#m").next().expect("id");
    assert!(html.contains(&format!("name=\"message\" value=\"{id}\"")), "{html}");
    let r = bob.submit("/messages/alice", "/messages/alice/report", &[("message", id), ("reason", "rude")]).await;
    assert_eq!((r.status, r.header("location")), (303, Some("/messages/alice?reported=1")));
    assert!(text(&bob.get("/messages/alice?reported=1").await).contains("Reported to the administrators"));
    let r = alice.submit("/messages/bob", "/messages/bob/report", &[("message", id), ("reason", "mine")]).await;
    assert_eq!(r.status, 404, "only its recipient reports a message");
    assert_eq!(bob.get("/admin/message-reports").await.status, 403);
    let mut admin = admin_browser(&app);
    assert!(text(&admin.get("/admin").await).contains("href=\"/admin/message-reports\""));
    let html = text(&admin.get("/admin/message-reports").await);
    assert!(html.contains("<p>Hello <em>Bob</em></p>") && html.contains("“rude”"), "{html}");
    let r = admin.submit("/admin/message-reports", "/admin/message-reports/1", &[("status", "resolved")]).await;
    assert_eq!((r.status, r.header("location")), (303, Some("/admin/message-reports")));
    assert!(text(&admin.get("/admin/message-reports").await).contains("No open reports."));
    app.stop().await;
}

#[tokio::test]
async fn a_blocked_authors_comments_collapse_for_the_blocker_and_the_shared_page_stays_the_same_bytes() {
    let app = spawn_app().await;
    let topic = forum(&app).await;
    let path = format!("/t/{topic}");
    let carol = app.user("carol").await;
    let rude = app.reply(topic, &carol, None, "a rude comment").await;
    let (mut bob, _) = signed_in(&app, "bob").await;
    let before = Browser::new(&app).get(&path).await.bytes;
    let collapsed =
        format!("id=\"p{rude}\" data-id=\"{rude}\">\n<details>\n<summary><span class=\"tag blocked\">blocked</span>");
    assert!(!text(&bob.get(&path).await).contains(&collapsed));

    let r = bob.submit("/u/carol", "/u/carol/block", &[("on", "1"), ("back", "/u/carol")]).await;
    assert_eq!((r.status, r.header("location")), (303, Some("/u/carol")));
    let html = text(&bob.get("/u/carol").await);
    assert!(html.contains("value=\"0\">Unblock</button>"), "{html}");
    let html = text(&bob.get(&path).await);
    assert!(html.contains(&collapsed), "{html}");
    assert!(html.contains("a rude comment"), "still there, one click away");
    assert_eq!(html.matches("<details open>").count(), 2, "the topic's other comment and the live template stay open");
    assert_eq!(Browser::new(&app).get(&path).await.bytes, before, "the signed-out page is the same bytes");
    let (mut other, _) = signed_in(&app, "other").await;
    assert!(!text(&other.get(&path).await).contains(&collapsed), "collapsed for the blocker only");

    // The blocks page lists blocked users and communities, with unblock.
    let r = bob.submit("/c/rust", "/c/rust/block", &[("on", "1"), ("back", "/blocks")]).await;
    assert_eq!(r.status, 303);
    let html = text(&bob.get("/blocks").await);
    assert!(html.contains("id=\"bu-carol\"") && html.contains("id=\"bc-rust\""), "{html}");
    let r = bob.submit("/blocks", "/u/carol/block", &[("on", "0"), ("back", "/blocks")]).await;
    assert_eq!((r.status, r.header("location")), (303, Some("/blocks")));
    assert!(!text(&bob.get("/blocks").await).contains("id=\"bu-carol\""));
    assert!(!text(&bob.get(&path).await).contains(&collapsed));
    let r = bob.submit("/blocks", "/u/bob/block", &[("on", "1"), ("back", "/blocks")]).await;
    assert_eq!(r.status, 422, "not oneself");
    assert_eq!(Browser::new(&app).get("/blocks").await.status, 303);
    app.stop().await;
}
