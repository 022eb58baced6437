//! Federation's phase 2 in the forum: a signed-in reader finds a community
//! on another server with the communities page's form, lands on its page
//! here (marked as from another server, linked home), follows it with the
//! button (pending, then accepted by its Group) and unfollows it; all
//! without the script.

use super::{Browser, signed_in, text};
use crate::support::helpers::spawn_federated_app;

#[tokio::test]
async fn a_reader_finds_follows_and_unfollows_a_community_on_another_server_with_forms() {
    let (home, away) = (spawn_federated_app().await, spawn_federated_app().await);
    home.community("rust").await;
    let host = home.addr.trim_start_matches("http://").to_owned();
    let name = format!("rust@{host}");
    let page = format!("/c/{name}");

    // The form is there for a signed-in reader only.
    assert!(!text(&Browser::new(&away).get("/c").await).contains("action=\"/join\""));
    let (mut ann, _) = signed_in(&away, "ann").await;
    assert!(text(&ann.get("/c").await).contains("action=\"/join\""));
    let r = ann.submit("/c", "/join", &[("q", "no handle")]).await;
    assert_eq!(r.status, 400);
    assert!(text(&r).contains("!name@host"), "{}", text(&r));

    // Searching for the handle offers to find it there.
    let search = format!("/search?q=%21rust%40{host}");
    assert!(text(&ann.get(&search).await).contains("Find it there"));
    assert!(!text(&Browser::new(&away).get(&search).await).contains("Find it there"));
    let r = ann.submit(&search, "/join", &[("q", &format!("!rust@{host}"))]).await;
    assert_eq!((r.status, r.header("location")), (303, Some(page.as_str())));
    let r = ann.submit("/c", "/join", &[("q", &format!("!rust@{host}"))]).await;
    assert_eq!((r.status, r.header("location")), (303, Some(page.as_str())));
    let html = text(&ann.get(&page).await);
    assert!(html.contains("A community on another server") && html.contains(&format!("{}/c/rust", home.addr)));
    assert!(html.contains(&format!("action=\"{page}/follow\"")) && html.contains(">Follow</button>"), "{html}");
    assert!(text(&ann.get("/c").await).contains("on another server"));

    let r = ann.submit(&page, &format!("{page}/follow"), &[("on", "1")]).await;
    assert_eq!((r.status, r.header("location")), (303, Some(page.as_str())));
    let mut html = text(&ann.get(&page).await);
    for _ in 0..400 {
        if html.contains("Following.") {
            break;
        }
        assert!(html.contains("Follow requested."), "{html}");
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
        html = text(&ann.get(&page).await);
    }
    assert!(html.contains("Following.") && html.contains(">Unfollow</button>"), "{html}");

    let r = ann.submit(&page, &format!("{page}/follow"), &[("on", "0")]).await;
    assert_eq!(r.status, 303);
    assert!(text(&ann.get(&page).await).contains(">Follow</button>"));
    // A local community's page has no follow button.
    away.community("local").await;
    assert!(!text(&ann.get("/c/local").await).contains("/follow\""));
}
