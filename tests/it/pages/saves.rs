//! Issue #21 in the forum: a signed-in reader's own votes and saves show
//! on the topic page after a reload (the cached signed-out page shows
//! none), saving and unsaving with forms, the saved page, and blocking a
//! community from the front page.

use super::{Browser, forum, signed_in, text};
use crate::support::helpers::spawn_app;

#[tokio::test]
async fn a_signed_in_reader_sees_their_own_votes_after_a_reload_and_the_cached_page_shows_none() {
    let app = spawn_app().await;
    let topic = forum(&app).await;
    let path = format!("/t/{topic}");
    let (mut alice, token) = signed_in(&app, "voter").await;
    let post = app.read_topic(topic, "old").await["posts"][0]["id"].as_i64().expect("post");
    app.vote("topics", topic, &token, 1).await;
    app.vote("posts", post, &token, -1).await;

    let html = text(&alice.get(&path).await);
    assert!(html.contains(&format!("class=\"vote up on\" form=\"vf\" formaction=\"/t/{topic}/vote\"")), "{html}");
    assert!(html.contains(&format!("class=\"vote down\" form=\"vf\" formaction=\"/t/{topic}/vote\"")));
    assert!(html.contains(&format!("class=\"vote down on\" form=\"vf\" formaction=\"/p/{post}/vote\"")));
    assert!(html.contains(&format!("class=\"vote up\" form=\"vf\" formaction=\"/p/{post}/vote\"")));

    let public = text(&Browser::new(&app).get(&path).await);
    assert!(!public.contains(" on\" form=\"vf\""), "the shared signed-out page marks no votes");
    assert!(!public.contains("/save\""), "nor offers saving");
    let (mut other, _) = signed_in(&app, "other").await;
    assert!(!text(&other.get(&path).await).contains(" on\" form=\"vf\""), "votes are each reader's own");

    // The listings mark it too: the front page and the community's.
    for listing in ["/", "/c/rust"] {
        let html = text(&alice.get(listing).await);
        assert!(
            html.contains(&format!("class=\"vote up on\" form=\"vf\" formaction=\"/t/{topic}/vote\"")),
            "{listing}"
        );
    }
    assert!(!text(&Browser::new(&app).get("/").await).contains(" on\" form=\"vf\""));

    // Withdrawn: no longer marked.
    app.vote("topics", topic, &token, 0).await;
    let html = text(&alice.get(&path).await);
    assert!(!html.contains(&format!("class=\"vote up on\" form=\"vf\" formaction=\"/t/{topic}/vote\"")));
    app.stop().await;
}

#[tokio::test]
async fn saving_and_unsaving_with_forms_redirect_back_and_the_saved_page_lists_them() {
    let app = spawn_app().await;
    let topic = forum(&app).await;
    let path = format!("/t/{topic}");
    let post = app.read_topic(topic, "old").await["posts"][0]["id"].as_i64().expect("post");
    let (mut b, _) = signed_in(&app, "saver").await;

    let r = b.get("/saved").await;
    assert_eq!(r.status, 200);
    assert!(text(&r).contains("Nothing saved yet"));
    let r = b.submit(&path, &format!("/t/{topic}/save"), &[("on", "1"), ("back", &path)]).await;
    assert_eq!((r.status, r.header("location")), (303, Some(path.as_str())));
    let r = b.submit(&path, &format!("/p/{post}/save"), &[("on", "1"), ("back", &path)]).await;
    assert_eq!(r.status, 303);
    let html = text(&b.get(&path).await);
    assert!(html.contains(&format!("formaction=\"/t/{topic}/save\" name=\"on\" value=\"0\">unsave")), "{html}");
    assert!(html.contains(&format!("formaction=\"/p/{post}/save\" name=\"on\" value=\"0\">unsave")));

    let html = text(&b.get("/saved").await);
    assert!(html.contains("Borrowing, explained") && html.contains("The first *reply*"), "{html}");
    assert!(html.contains(&format!("href=\"/t/{topic}?thread={post}#p{post}\"")));
    assert!(html.contains("href=\"/saved\""), "the header links to the saved page");

    let r = b.submit("/saved", &format!("/t/{topic}/save"), &[("on", "0"), ("back", "/saved")]).await;
    assert_eq!((r.status, r.header("location")), (303, Some("/saved")));
    let html = text(&b.get("/saved").await);
    assert!(!html.contains(&format!("id=\"s-topic-{topic}\"")) && html.contains(&format!("id=\"s-post-{post}\"")));

    // Without the CSRF token, or signed out: refused.
    let r = b.post(&format!("/t/{topic}/save"), &[("on", "1"), ("back", &path)]).await;
    assert_eq!(r.status, 403);
    let mut anon = Browser::new(&app);
    let r = anon.get("/saved").await;
    assert_eq!((r.status, r.header("location")), (303, Some("/login?next=/saved")));
    let r = b.submit(&path, "/t/999999/save", &[("on", "1"), ("back", &path)]).await;
    assert_eq!(r.status, 404);
    app.stop().await;
}

#[tokio::test]
async fn blocking_a_community_from_its_page_hides_it_from_that_readers_front_page_only() {
    let app = spawn_app().await;
    forum(&app).await;
    app.community("golang").await;
    let gopher = app.user("gopher").await;
    app.topic("golang", &gopher, "Goroutines, explained").await;
    let (mut b, _) = signed_in(&app, "blocker").await;
    let html = text(&b.get("/").await);
    assert!(html.contains("Borrowing, explained") && html.contains("Goroutines, explained"));

    let r = b.submit("/c/rust", "/c/rust/block", &[("on", "1"), ("back", "/c/rust")]).await;
    assert_eq!((r.status, r.header("location")), (303, Some("/c/rust")));
    let html = text(&b.get("/c/rust").await);
    assert!(html.contains("Unblock") && html.contains("Borrowing, explained"), "the community's page still lists it");
    let html = text(&b.get("/").await);
    assert!(!html.contains("Borrowing, explained") && html.contains("Goroutines, explained"), "{html}");
    let public = text(&Browser::new(&app).get("/").await);
    assert!(public.contains("Borrowing, explained"), "the signed-out front page is everyone's");

    let r = b.submit("/c/rust", "/c/rust/block", &[("on", "0"), ("back", "/c/rust")]).await;
    assert_eq!(r.status, 303);
    assert!(text(&b.get("/").await).contains("Borrowing, explained"));
    let r = b.submit("/c/rust", "/c/nowhere/block", &[("on", "1"), ("back", "/c/rust")]).await;
    assert_eq!(r.status, 404);
    app.stop().await;
}
