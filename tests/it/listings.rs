//! Topic listings: the front page and a community's page, each sorted hot,
//! new or top over a time window, walked page by page with cursors.

use std::collections::HashSet;

use pith::model::{CommunityName, Timestamp, Title, Username, hot_rank};
use pith::store::sqlite::conn::{Role, migrate, open};
use pith::store::sqlite::writes;
use pith::store::{NewCommunity, NewTopic};

use crate::support::helpers::{TestApp, assert_error, spawn_app, spawn_app_in};

const DAY: i64 = 86_400;

/// Serves a database that already holds topics in `raspi` of the given
/// (age in seconds, score), written with the store's own write functions
/// so that their creation times lie in the past. Returns their ids.
async fn app_with_aged_topics(aged: &[(i64, i64)]) -> (TestApp, Vec<i64>) {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut conn = open(&dir.path().join("pith.db"), Role::Writer).expect("open");
    migrate(&mut conn).expect("migrate");
    let now = Timestamp::now();
    let elder =
        writes::create_user(&conn, &Username::parse("elder").expect("name"), None, true, Timestamp(0)).expect("user");
    let community = NewCommunity {
        name: CommunityName::parse("raspi").expect("name"),
        title: Title::parse("Raspberry Pi").expect("title"),
        description: String::new(),
    };
    writes::create_community(&conn, &elder, &community, Timestamp(0)).expect("community");
    let mut ids = Vec::new();
    for (i, &(age, score)) in aged.iter().enumerate() {
        let new = NewTopic {
            community: community.name.clone(),
            title: Title::parse(&format!("aged {i}")).expect("title"),
            body: None,
            url: None,
            remote_id: None,
        };
        let created = now.0 - age;
        let topic = writes::create_topic(&conn, &elder, &new, None, Timestamp(created)).expect("topic");
        conn.execute_batch(&format!(
            "UPDATE topics SET score = {score}, hot = {} WHERE id = {}",
            hot_rank(score, created),
            topic.id
        ))
        .expect("score");
        ids.push(topic.id);
    }
    drop(conn);
    (spawn_app_in(dir).await, ids)
}

#[tokio::test]
async fn top_counts_only_topics_inside_its_time_window() {
    // Older topics score higher, so every window's order differs from "new".
    let (app, t) =
        app_with_aged_topics(&[(2 * 3600, 1), (3 * DAY, 2), (20 * DAY, 3), (200 * DAY, 4), (800 * DAY, 5)]).await;
    let (hour, days3, days20, days200, days800) = (t[0], t[1], t[2], t[3], t[4]);
    let cases = [
        ("t=day", vec![hour]),
        ("t=week", vec![days3, hour]),
        ("t=month", vec![days20, days3, hour]),
        ("t=year", vec![days200, days20, days3, hour]),
        ("t=all", vec![days800, days200, days20, days3, hour]),
    ];
    for (window, want) in cases {
        for base in ["/api/v1/topics", "/api/v1/communities/raspi/topics"] {
            let (got, next) = app.list(&format!("{base}?sort=top&{window}")).await;
            assert_eq!(got, want, "{base} {window}");
            assert_eq!(next, None);
        }
    }
    assert_eq!(app.list("/api/v1/topics?sort=top").await.0, vec![hour], "top defaults to a day");

    // The window narrows only "top": hot and new show everything.
    let newest_first = vec![hour, days3, days20, days200, days800];
    for window in ["", "&t=day", "&t=week", "&t=month", "&t=year", "&t=all"] {
        assert_eq!(app.list(&format!("/api/v1/topics?sort=new{window}")).await.0, newest_first, "new {window}");
        assert_eq!(app.list(&format!("/api/v1/topics?sort=hot{window}")).await.0, newest_first, "hot {window}");
    }
    assert_eq!(app.list("/api/v1/topics").await.0, newest_first, "hot is the default");
    app.stop().await;
}

#[tokio::test]
async fn a_community_page_lists_only_that_communitys_topics() {
    let app = spawn_app().await;
    app.community("raspi").await;
    app.community("arduino").await;
    let alice = app.user("alice").await;
    let pi1 = app.topic("raspi", &alice, "Pi one").await;
    let ard = app.topic("arduino", &alice, "Arduino").await;
    let pi2 = app.topic("raspi", &alice, "Pi two").await;
    for sort in ["hot", "new", "top&t=all"] {
        assert_eq!(app.list(&format!("/api/v1/communities/raspi/topics?sort={sort}")).await.0, vec![pi2, pi1]);
        assert_eq!(app.list(&format!("/api/v1/communities/arduino/topics?sort={sort}")).await.0, vec![ard]);
        assert_eq!(app.list(&format!("/api/v1/topics?sort={sort}")).await.0, vec![pi2, ard, pi1]);
    }
    let (status, body) = app.get("/api/v1/communities/nowhere/topics").await;
    assert_error("unknown community", status, &body, 404, "not_found");
    app.stop().await;
}

/// Follows `next` from the first page to the last, checking each page's size.
async fn walk(app: &TestApp, base: &str, limit: usize) -> Vec<i64> {
    let mut all = Vec::new();
    let mut after: Option<String> = None;
    loop {
        let sep = if base.contains('?') { '&' } else { '?' };
        let cursor = after.as_deref().map(|c| format!("&after={c}")).unwrap_or_default();
        let (page, next) = app.list(&format!("{base}{sep}limit={limit}{cursor}")).await;
        assert!(page.len() <= limit, "{base}: a page of {} with limit {limit}", page.len());
        all.extend(&page);
        match next {
            Some(c) => {
                assert_eq!(page.len(), limit, "{base}: only a full page has a next cursor");
                after = Some(c);
            }
            None => return all,
        }
        assert!(all.len() < 10_000, "{base}: the walk does not end");
    }
}

#[tokio::test]
async fn walking_every_page_of_every_listing_sees_each_topic_exactly_once_in_order() {
    let app = spawn_app().await;
    app.community("raspi").await;
    app.community("arduino").await;
    let alice = app.user("alice").await;
    let voters = [app.user("voter1").await, app.user("voter2").await, app.user("voter3").await];
    let mut raspi = Vec::new();
    let mut everything = Vec::new();
    for i in 0..23 {
        let community = if i % 3 == 0 { "arduino" } else { "raspi" };
        let id = app.topic(community, &alice, &format!("topic {i}")).await;
        if community == "raspi" {
            raspi.push(id);
        }
        everything.push(id);
        // Many equal scores and creation times: ties must break by id.
        for v in voters.iter().take(i % 4) {
            app.vote("topics", id, v, if i % 5 == 0 { -1 } else { 1 }).await;
        }
    }
    let sorts = ["sort=hot", "sort=new", "sort=top&t=all", "sort=top&t=day"];
    for (base, expected) in [("/api/v1/topics", &everything), ("/api/v1/communities/raspi/topics", &raspi)] {
        let expected: HashSet<i64> = expected.iter().copied().collect();
        for sort in sorts {
            let url = format!("{base}?{sort}");
            let (one_page, next) = app.list(&format!("{url}&limit=100")).await;
            assert_eq!(next, None);
            for limit in [1, 4, 5, 7, 100] {
                let walked = walk(&app, &url, limit).await;
                assert_eq!(walked, one_page, "{url} limit {limit}: same order as one big page");
            }
            let unique: HashSet<i64> = one_page.iter().copied().collect();
            assert_eq!(unique.len(), one_page.len(), "{url}: no duplicates");
            assert_eq!(unique, expected, "{url}: nothing missing");
        }
    }
    app.stop().await;
}

#[tokio::test]
async fn a_topic_created_during_a_walk_of_new_neither_repeats_nor_hides_older_ones() {
    let app = spawn_app().await;
    app.community("raspi").await;
    let alice = app.user("alice").await;
    let mut older = Vec::new();
    for i in 0..6 {
        older.push(app.topic("raspi", &alice, &format!("t{i}")).await);
    }
    let (first, next) = app.list("/api/v1/topics?sort=new&limit=3").await;
    app.topic("raspi", &alice, "late arrival").await;
    let (second, last) =
        app.list(&format!("/api/v1/topics?sort=new&limit=3&after={}", next.expect("a second page"))).await;
    assert_eq!(last, None);
    let walked: Vec<i64> = first.into_iter().chain(second).collect();
    older.reverse();
    assert_eq!(walked, older);
    app.stop().await;
}

#[tokio::test]
async fn a_page_holds_25_topics_unless_a_limit_of_1_to_100_is_asked_for() {
    let app = spawn_app().await;
    app.community("raspi").await;
    let alice = app.user("alice").await;
    for i in 0..26 {
        app.topic("raspi", &alice, &format!("t{i}")).await;
    }
    let (page, next) = app.list("/api/v1/topics").await;
    assert_eq!(page.len(), 25);
    assert!(next.is_some());
    assert_eq!(app.list("/api/v1/topics?limit=1").await.0.len(), 1);
    let (all, next) = app.list("/api/v1/topics?limit=100").await;
    assert_eq!((all.len(), next), (26, None));
    let (exact, next) = app.list("/api/v1/topics?limit=26").await;
    assert_eq!((exact.len(), next), (26, None), "no next cursor when the page ends exactly at the last topic");
    let (_, body) = app.get("/api/v1/topics?limit=2").await;
    assert_eq!(body.as_object().map(|o| o.len()), Some(2), "only topics and next: {body}");
    assert!(body["topics"][0]["title"].is_string() && body["next"].is_string(), "{body}");
    assert_eq!(app.get("/api/v1/topics?after=").await.0, 200, "an empty cursor is the first page");
    app.stop().await;
}

#[tokio::test]
async fn a_cursor_from_one_sort_order_is_refused_by_another_as_a_bad_query() {
    let app = spawn_app().await;
    app.community("raspi").await;
    let alice = app.user("alice").await;
    for i in 0..3 {
        app.topic("raspi", &alice, &format!("t{i}")).await;
    }
    let (_, next) = app.list("/api/v1/topics?sort=new&limit=1").await;
    let cursor = next.expect("cursor");
    for sort in ["hot", "top&t=all"] {
        let (status, body) = app.get(&format!("/api/v1/topics?sort={sort}&after={cursor}")).await;
        assert_error(sort, status, &body, 400, "invalid_query");
    }
    app.stop().await;
}
