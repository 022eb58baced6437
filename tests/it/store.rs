//! The `Store` trait told as one story, written against the trait alone so
//! every backend runs the same one (see atuin's `db_story.rs`): SQLite and
//! PostgreSQL each have one `#[tokio::test]` calling `story`.

use pith::app::auth::token_digest;
use pith::model::SearchHit;
use pith::model::mail::{Delivery, Email, EmailSettings, MailLink, ResetFor};
use pith::model::{
    Body, CommunityName, ContentFate, IdleLimits, Link, Message, NewToken, NoticeKind, Notified, Reason, ReportStatus,
    Text, Timestamp, Title, TokenKind, User, Username, VoteTarget,
};
use pith::store::sqlite::{SqliteOptions, SqliteStore};
use pith::store::{
    IdPage, ListTopics, NewCommunity, NewPost, NewTopic, PostSort, Search, SearchKind, SearchPage, Store, StoreError,
    StoreResult, TimeWindow, TopicSort,
};

fn body(s: &str) -> Body {
    Body::parse(s).expect("body")
}

fn new_topic(community: &str, title: &str, text: Option<&str>) -> NewTopic {
    NewTopic {
        community: CommunityName::parse(community).expect("name"),
        title: Title::parse(title).expect("title"),
        body: text.map(|t| Text::render(body(t))),
        url: None,
        remote_id: None,
    }
}

fn reply(topic_id: i64, parent_id: Option<i64>, text: &str) -> NewPost {
    NewPost { topic_id, parent_id, body: Text::render(body(text)), remote_id: None }
}

fn listing(community: Option<&str>, sort: TopicSort, limit: usize) -> ListTopics {
    ListTopics { community: community.map(str::to_owned), sort, after: None, limit, hide_blocked_by: None }
}

fn search(text: &str, kind: SearchKind, community: Option<&str>) -> Search {
    Search { text: text.into(), kind, community: community.map(str::to_owned), offset: 0, limit: 10 }
}

/// The ids of what a search found, topics or posts.
fn hit_ids(page: SearchPage) -> Vec<i64> {
    page.hits
        .into_iter()
        .map(|h| match h {
            SearchHit::Topic { topic, .. } => topic.id,
            SearchHit::Post { post, .. } => post.id,
        })
        .collect()
}

/// A small forum's life, checking what every call returns.
pub async fn story<S: Store>(store: &S) {
    // Accounts: alice runs the site, bob and carol post.
    let alice =
        store.create_user(Username::parse("alice").expect("name"), Some("hash-a".into()), true).await.expect("alice");
    let bob = store.create_user(Username::parse("bob").expect("name"), None, false).await.expect("bob");
    let carol = store.create_user(Username::parse("carol").expect("name"), None, false).await.expect("carol");
    assert_eq!((alice.name.as_str(), alice.is_admin, bob.is_admin), ("alice", true, false));
    assert_ne!(alice.id, bob.id);
    let taken = store.create_user(Username::parse("ALICE").expect("name"), None, false).await;
    assert!(matches!(taken, Err(StoreError::Conflict(_))), "names are unique ignoring case: {taken:?}");

    let (found, hash) = store.user_credentials("alice".into()).await.expect("read").expect("alice exists");
    assert_eq!((found, hash.as_deref()), (alice.clone(), Some("hash-a")));
    assert_eq!(store.user_credentials("bob".into()).await.expect("read").map(|(_, h)| h), Some(None));
    assert!(store.user_credentials("nobody".into()).await.expect("read").is_none());

    // Names that read as one on record are refused, whatever the case.
    for look_alike in ["aIice", "AIice", "b0b", "CAROL"] {
        let refused = store.create_user(Username::parse(look_alike).expect("name"), None, false).await;
        let similar = matches!(&refused, Err(StoreError::Taken("username_too_similar", _)));
        let taken = matches!(&refused, Err(StoreError::Conflict(_)));
        assert!(similar || (taken && look_alike == "CAROL"), "{look_alike}: {refused:?}");
    }

    // Tokens: stored by digest, revocable.
    let (t1, t2) = (token_digest("bob-token-1"), token_digest("bob-token-2"));
    let user_of = |t| async move { store.token_user(t).await.expect("read").map(|(u, _)| u) };
    store.add_token(bob.id, t1).await.expect("token");
    store.add_token(bob.id, t2).await.expect("token");
    assert_eq!(user_of(t1).await, Some(bob.clone()));
    store.revoke_token(t1).await.expect("revoke");
    assert_eq!(user_of(t1).await, None);
    assert_eq!(user_of(t2).await, Some(bob.clone()), "only that token");
    store.revoke_token(t1).await.expect("revoking twice is harmless");
    assert_eq!(user_of(token_digest("never issued")).await, None);

    // Sessions and API tokens: their kind, label and use, the owner's list,
    // bulk revocation, and a password change that keeps one token.
    let web = token_digest("alice-browser");
    let (_, api) = store.token_user(t2).await.expect("read").expect("bob's token");
    assert_eq!((api.kind, api.label.as_str(), api.hash), (TokenKind::Api, "", t2));
    assert_eq!(api.last_used_at, api.created_at, "issued counts as used");
    let session = NewToken { user_id: alice.id, hash: web, kind: TokenKind::Session, label: "Firefox".into() };
    store.issue_token(session).await.expect("session");
    let later = Timestamp(Timestamp::now().0 + 3600);
    store.touch_token(web, later).await.expect("touch");
    store.touch_token(web, Timestamp(0)).await.expect("an older use moves nothing");
    let (who, record) = store.token_user(web).await.expect("read").expect("alice's session");
    assert_eq!((who.id, record.kind, record.label.as_str()), (alice.id, TokenKind::Session, "Firefox"));
    assert_eq!(record.last_used_at, later);
    let alice_api = token_digest("alice-api");
    store.add_token(alice.id, alice_api).await.expect("token");
    let listed: Vec<[u8; 32]> = store.user_tokens(alice.id).await.expect("list").iter().map(|t| t.hash).collect();
    assert_eq!(listed, [web, alice_api], "most recently used first, alice's only");
    let revoked = store.set_password(alice.id, "wrong-old-hash".into(), "hash-x".into(), Some(web)).await;
    assert!(matches!(revoked, Err(StoreError::Conflict(_))), "changed meanwhile: {revoked:?}");
    let revoked = store.set_password(alice.id, "hash-a".into(), "hash-b".into(), Some(web)).await.expect("set");
    assert_eq!(revoked, [alice_api]);
    let (_, hash) = store.user_credentials("alice".into()).await.expect("read").expect("alice");
    assert_eq!(hash.as_deref(), Some("hash-b"));
    assert_eq!(user_of(web).await.map(|u| u.id), Some(alice.id), "the kept token works");
    assert_eq!(user_of(alice_api).await, None);
    assert_eq!(user_of(t2).await, Some(bob.clone()), "nobody else's");
    store.add_token(alice.id, alice_api).await.expect("token");
    let mut revoked = store.revoke_tokens(alice.id, None).await.expect("revoke all");
    revoked.sort();
    let mut both = [web, alice_api];
    both.sort();
    assert_eq!(revoked, both);
    assert!(store.user_tokens(alice.id).await.expect("list").is_empty());

    // Communities: only an admin makes them, names are unique.
    let raspi = NewCommunity {
        name: CommunityName::parse("raspi").expect("name"),
        title: Title::parse("Raspberry Pi").expect("title"),
        description: "Small computers.".into(),
    };
    let refused = store.create_community(&bob, raspi.clone()).await;
    assert!(matches!(refused, Err(StoreError::Forbidden(_))), "{refused:?}");
    let community = store.create_community(&alice, raspi.clone()).await.expect("community");
    assert_eq!(
        (community.name.as_str(), community.title.as_str(), community.topic_count),
        ("raspi", "Raspberry Pi", 0)
    );
    let again = store.create_community(&alice, raspi).await;
    assert!(matches!(again, Err(StoreError::Conflict(_))), "{again:?}");
    let arduino = NewCommunity {
        name: CommunityName::parse("arduino").expect("name"),
        title: Title::parse("Arduino").expect("title"),
        description: String::new(),
    };
    store.create_community(&alice, arduino).await.expect("arduino");
    let names: Vec<String> = store.list_communities().await.expect("list").into_iter().map(|c| c.name).collect();
    assert_eq!(names, ["arduino", "raspi"]);
    assert_eq!(store.community("raspi".into()).await.expect("raspi").id, community.id);
    assert!(matches!(store.community("nowhere".into()).await, Err(StoreError::NotFound(_))));

    // Topics.
    let mut with_link = new_topic("raspi", "Cards", Some("Which SD card?"));
    with_link.url = Some(Link::parse("https://example.org/cards").expect("link"));
    let cards = store.create_topic(&bob, with_link).await.expect("topic");
    assert_eq!(cards.author.as_deref(), Some("bob"));
    assert_eq!((cards.community.as_str(), cards.title.as_str()), ("raspi", "Cards"));
    assert_eq!(
        (cards.body.as_deref(), cards.url.as_deref()),
        (Some("Which SD card?"), Some("https://example.org/cards"))
    );
    assert_eq!((cards.score, cards.post_count, cards.deleted, cards.edited_at), (0, 0, false, None));
    assert_eq!(cards.body_html.as_deref(), Some("<p>Which SD card?</p>\n"), "rendered when written");
    let cases = store.create_topic(&carol, new_topic("raspi", "Cases", None)).await.expect("topic");
    assert_eq!(cases.body_html, None, "no body, no HTML");
    let blink = store.create_topic(&carol, new_topic("arduino", "Blink", None)).await.expect("topic");
    let lost = store.create_topic(&carol, new_topic("nowhere", "Lost", None)).await;
    assert!(matches!(lost, Err(StoreError::NotFound(_))), "{lost:?}");
    assert_eq!(store.community("raspi".into()).await.expect("raspi").topic_count, 2);

    // Posts, nested, and a parent from another topic refused.
    let p1 = store.create_post(&carol, reply(cards.id, None, "SanDisk.")).await.expect("post");
    assert_eq!(
        (p1.topic_id, p1.parent_id, p1.author.as_deref(), p1.body.as_str()),
        (cards.id, None, Some("carol"), "SanDisk.")
    );
    assert_eq!(p1.body_html, "<p>SanDisk.</p>\n");
    let p2 = store.create_post(&bob, reply(cards.id, Some(p1.id), "Which one?")).await.expect("post");
    assert_eq!(p2.parent_id, Some(p1.id));
    let p3 = store.create_post(&alice, reply(cards.id, Some(p2.id), "Extreme.")).await.expect("post");
    let elsewhere = store.create_post(&bob, reply(blink.id, None, "Blinks.")).await.expect("post");
    let crossed = store.create_post(&bob, reply(cards.id, Some(elsewhere.id), "crossed")).await;
    assert!(matches!(crossed, Err(StoreError::Invalid(_))), "{crossed:?}");
    let orphan = store.create_post(&bob, reply(cards.id, Some(i64::MAX), "orphan")).await;
    assert!(matches!(orphan, Err(StoreError::Invalid(_))), "{orphan:?}");
    let nowhere = store.create_post(&bob, reply(i64::MAX, None, "into the void")).await;
    assert!(matches!(nowhere, Err(StoreError::NotFound(_))), "{nowhere:?}");

    let (topic, posts) = store.topic_with_posts(cards.id, PostSort::Old).await.expect("read");
    assert_eq!(topic.post_count, 3, "refused replies are not counted");
    assert_eq!(posts.iter().map(|p| p.id).collect::<Vec<_>>(), [p1.id, p2.id, p3.id]);
    assert!(matches!(store.topic_with_posts(i64::MAX, PostSort::Best).await, Err(StoreError::NotFound(_))));

    // Votes: one per user per item; re-voting replaces, 0 withdraws.
    let v = store.vote(&alice, VoteTarget::Post(p3.id), 1).await.expect("vote");
    assert_eq!((v.score, v.vote, v.topic_id), (1, 1, cards.id));
    assert_eq!(store.vote(&alice, VoteTarget::Post(p3.id), 1).await.expect("vote").score, 1);
    assert_eq!(store.vote(&bob, VoteTarget::Post(p3.id), 1).await.expect("vote").score, 2);
    assert_eq!(store.vote(&carol, VoteTarget::Post(p2.id), 1).await.expect("vote").score, 1);
    assert_eq!(store.vote(&bob, VoteTarget::Post(p1.id), -1).await.expect("vote").score, -1);
    assert_eq!(store.vote(&bob, VoteTarget::Post(p1.id), 1).await.expect("vote").score, 1);
    assert_eq!(store.vote(&bob, VoteTarget::Post(p1.id), 0).await.expect("vote").score, 0);
    let v = store.vote(&carol, VoteTarget::Topic(cases.id), -1).await.expect("vote");
    assert_eq!((v.score, v.vote, v.topic_id), (-1, -1, cases.id));
    assert_eq!(store.vote(&alice, VoteTarget::Topic(cards.id), 1).await.expect("vote").score, 1);
    assert_eq!(store.vote(&carol, VoteTarget::Topic(cards.id), 1).await.expect("vote").score, 2);
    assert!(matches!(store.vote(&bob, VoteTarget::Post(i64::MAX), 1).await, Err(StoreError::NotFound(_))));
    assert!(matches!(store.vote(&bob, VoteTarget::Topic(i64::MAX), 1).await, Err(StoreError::NotFound(_))));

    let order = |posts: Vec<pith::model::Post>| posts.into_iter().map(|p| (p.id, p.score)).collect::<Vec<_>>();
    let (topic, best) = store.topic_with_posts(cards.id, PostSort::Best).await.expect("read");
    assert_eq!(topic.score, 2);
    assert_eq!(order(best), [(p3.id, 2), (p2.id, 1), (p1.id, 0)]);
    let (_, new) = store.topic_with_posts(cards.id, PostSort::New).await.expect("read");
    assert_eq!(order(new), [(p3.id, 2), (p2.id, 1), (p1.id, 0)]);
    let (_, old) = store.topic_with_posts(cards.id, PostSort::Old).await.expect("read");
    assert_eq!(order(old), [(p1.id, 0), (p2.id, 1), (p3.id, 2)]);

    // Listings, and walking one with its cursor.
    let ids = |page: pith::store::TopicPage| page.topics.into_iter().map(|t| t.id).collect::<Vec<_>>();
    let top = store.list_topics(listing(None, TopicSort::Top(TimeWindow::All), 10)).await.expect("list");
    assert!(top.next.is_none());
    assert_eq!(ids(top), [cards.id, blink.id, cases.id]);
    let hot = store.list_topics(listing(Some("raspi"), TopicSort::Hot, 10)).await.expect("list");
    assert_eq!(ids(hot), [cards.id, cases.id]);
    let first = store.list_topics(listing(None, TopicSort::New, 2)).await.expect("list");
    let cursor = first.next.expect("a second page");
    assert_eq!(ids(first), [blink.id, cases.id]);
    let mut rest = listing(None, TopicSort::New, 2);
    rest.after = Some(cursor);
    let second = store.list_topics(rest.clone()).await.expect("list");
    assert!(second.next.is_none());
    assert_eq!(ids(second), [cards.id]);
    rest.sort = TopicSort::Hot;
    assert!(store.list_topics(rest).await.is_err(), "a new-cursor means nothing to hot");
    assert!(matches!(
        store.list_topics(listing(Some("nowhere"), TopicSort::Hot, 10)).await,
        Err(StoreError::NotFound(_))
    ));

    // Edits: only by the author (or an admin).
    let refused = store.edit_post(&carol, p2.id, Text::render(body("hijacked"))).await;
    assert!(matches!(refused, Err(StoreError::Forbidden(_))), "{refused:?}");
    let edited = store.edit_post(&bob, p2.id, Text::render(body("Which one, exactly?"))).await.expect("edit");
    assert_eq!((edited.id, edited.body.as_str(), edited.score), (p2.id, "Which one, exactly?", 1));
    assert!(edited.edited_at.is_some());
    let moderated =
        store.edit_post(&alice, p1.id, Text::render(body("[link removed]"))).await.expect("an admin may edit");
    assert_eq!(moderated.author.as_deref(), Some("carol"));
    assert!(matches!(store.edit_post(&bob, i64::MAX, Text::render(body("x"))).await, Err(StoreError::NotFound(_))));
    let refused = store.edit_topic(&carol, cards.id, Some(Text::render(body("mine now"))), None).await;
    assert!(matches!(refused, Err(StoreError::Forbidden(_))), "{refused:?}");
    let topic =
        store.edit_topic(&bob, cards.id, Some(Text::render(body("Which microSD card?"))), None).await.expect("edit");
    assert_eq!((topic.body.as_deref(), topic.score, topic.post_count), (Some("Which microSD card?"), 2, 3));
    assert!(topic.edited_at.is_some());

    // Deleting a post blanks it but keeps its replies.
    let refused = store.delete_post(&carol, p2.id).await;
    assert!(matches!(refused, Err(StoreError::Forbidden(_))), "{refused:?}");
    assert_eq!(store.delete_post(&bob, p2.id).await.expect("delete"), cards.id);
    assert!(matches!(store.delete_post(&bob, p2.id).await, Err(StoreError::NotFound(_))), "only once");
    assert!(matches!(store.edit_post(&bob, p2.id, Text::render(body("back"))).await, Err(StoreError::NotFound(_))));
    assert!(matches!(store.vote(&carol, VoteTarget::Post(p2.id), 1).await, Err(StoreError::Invalid(_))));
    let (_, posts) = store.topic_with_posts(cards.id, PostSort::Old).await.expect("read");
    let gone = &posts[1];
    assert_eq!((gone.id, gone.deleted, gone.body.as_str(), gone.author.as_deref()), (p2.id, true, "", None));
    assert_eq!((posts[2].id, posts[2].parent_id, posts[2].deleted), (p3.id, Some(p2.id), false));

    // Profiles: the account and its live recent activity, newest first.
    let profile = store.profile("bob".into()).await.expect("profile");
    assert_eq!(profile.user, bob);
    assert_eq!(profile.topics.iter().map(|t| t.id).collect::<Vec<_>>(), [cards.id]);
    assert_eq!(profile.posts.iter().map(|p| p.id).collect::<Vec<_>>(), [elsewhere.id], "the deleted post is hidden");
    assert!(matches!(store.profile("nobody".into()).await, Err(StoreError::NotFound(_))));

    // Deleting a topic hides it from listings and profiles, refuses replies.
    let refused = store.delete_topic(&bob, cases.id).await;
    assert!(matches!(refused, Err(StoreError::Forbidden(_))), "{refused:?}");
    store.delete_topic(&carol, cases.id).await.expect("delete");
    assert!(matches!(store.delete_topic(&carol, cases.id).await, Err(StoreError::NotFound(_))));
    let (topic, _) = store.topic_with_posts(cases.id, PostSort::Best).await.expect("still readable");
    assert_eq!((topic.deleted, topic.author, topic.body), (true, None, None));
    let new = store.list_topics(listing(None, TopicSort::New, 10)).await.expect("list");
    assert_eq!(ids(new), [blink.id, cards.id]);
    assert_eq!(store.community("raspi".into()).await.expect("raspi").topic_count, 1);
    assert_eq!(
        store.profile("carol".into()).await.expect("profile").topics.iter().map(|t| t.id).collect::<Vec<_>>(),
        [blink.id]
    );
    let late = store.create_post(&bob, reply(cases.id, None, "late")).await;
    assert!(matches!(late, Err(StoreError::Invalid(_))), "{late:?}");
    assert!(matches!(store.vote(&bob, VoteTarget::Topic(cases.id), 1).await, Err(StoreError::Invalid(_))));
    assert!(matches!(store.edit_topic(&carol, cases.id, None, None).await, Err(StoreError::NotFound(_))));

    // Edits store the new HTML; deletes drop it with the source.
    let (topic, posts) = store.topic_with_posts(cards.id, PostSort::Old).await.expect("read");
    assert_eq!(topic.body_html.as_deref(), Some("<p>Which microSD card?</p>\n"));
    assert_eq!(posts[0].body_html, "<p>[link removed]</p>\n");
    assert_eq!((posts[1].body_html.as_str(), posts[2].body_html.as_str()), ("", "<p>Extreme.</p>\n"));

    // Search: what the public may read, by its current words.
    let found = |text: &'static str, kind| async move {
        hit_ids(store.search(search(text, kind, None)).await.expect("search"))
    };
    assert_eq!(found("microsd", SearchKind::Topics).await, [cards.id]);
    assert_eq!(found("microsd card", SearchKind::Topics).await, [cards.id]);
    assert_eq!(found("extreme", SearchKind::Posts).await, [p3.id]);
    assert_eq!(found("blinks", SearchKind::Posts).await, [elsewhere.id]);
    assert!(found("sandisk", SearchKind::Posts).await.is_empty(), "edited away");
    assert!(found("exactly", SearchKind::Posts).await.is_empty(), "deleted");
    assert!(found("cases", SearchKind::Topics).await.is_empty(), "deleted");
    assert!(found("extreme", SearchKind::Topics).await.is_empty(), "topics do not include replies");
    assert!(found("\"* NEAR( -", SearchKind::Topics).await.is_empty(), "no words, no hits, no error");
    let elsewhere_only = store.search(search("blinks", SearchKind::Posts, Some("raspi"))).await.expect("search");
    assert!(elsewhere_only.hits.is_empty());
    let nowhere = store.search(search("x", SearchKind::Topics, Some("nowhere"))).await;
    assert!(matches!(nowhere, Err(StoreError::NotFound(_))), "{nowhere:?}");

    messages_and_blocks(store, (&alice, &bob, &carol), cards.id).await;
    mail_story(store).await;
    sweep_story(store).await;
    lifecycle(store, &alice, cards.id).await;
}

async fn send<S: Store>(store: &S, from: &User, to: &str, text: &str) -> StoreResult<(Message, Vec<Notified>)> {
    store.send_message(from, to.into(), Text::render(body(text))).await
}

/// Private messages: carol writes to bob, who reads them, reports one and
/// blocks her; then nothing of hers reaches him.
async fn messages_and_blocks<S: Store>(store: &S, (alice, bob, carol): (&User, &User, &User), topic: i64) {
    let page = |after, limit| IdPage { after, limit };
    let unread_before = store.unread_count(bob.id).await.expect("count");
    let (m1, notified) = send(store, carol, "BOB", "hello *bob*").await.expect("send");
    assert_eq!((m1.from.as_str(), m1.to.as_str(), m1.read), ("carol", "bob", false));
    assert_eq!(m1.body_html, "<p>hello <em>bob</em></p>\n");
    let heard: Vec<_> = notified.iter().map(|n| (n.user_id, n.kind, n.unread)).collect();
    assert_eq!(heard, [(bob.id, Some(NoticeKind::Message), unread_before + 1)]);
    let (m2, _) = send(store, carol, "bob", "are you there?").await.expect("send");
    let (m3, _) = send(store, bob, "carol", "yes").await.expect("answer");
    assert!(matches!(send(store, carol, "nobody", "x").await, Err(StoreError::NotFound("user"))));
    assert!(matches!(send(store, carol, "carol", "x").await, Err(StoreError::Invalid(_))));

    let list = store.conversations(bob.id, page(None, 10)).await.expect("list");
    let c = &list.conversations[0];
    assert_eq!((list.conversations.len(), list.next), (1, None));
    assert_eq!(
        (c.with.as_str(), c.last_id, c.last_from.as_str(), c.excerpt.as_str(), c.unread),
        ("carol", m3.id, "bob", "yes", 2)
    );
    let first = store.conversation(bob.id, "Carol".into(), page(None, 2)).await.expect("read");
    assert_eq!(first.with, "carol");
    assert_eq!(first.messages.iter().map(|m| m.id).collect::<Vec<_>>(), [m3.id, m2.id]);
    assert_eq!(first.next, Some(m2.id));
    let rest = store.conversation(bob.id, "carol".into(), page(first.next, 2)).await.expect("read");
    assert_eq!((rest.messages.iter().map(|m| m.id).collect::<Vec<_>>(), rest.next), (vec![m1.id], None));
    assert!(matches!(store.conversation(bob.id, "nobody".into(), page(None, 2)).await, Err(StoreError::NotFound(_))));
    let marked = store.mark_conversation_read(bob.id, carol.id).await.expect("mark");
    assert_eq!(marked, Some(unread_before), "both message notifications read");
    assert_eq!(store.mark_conversation_read(bob.id, carol.id).await.expect("mark"), None, "nothing left");
    let list = store.conversations(bob.id, page(None, 10)).await.expect("list");
    assert_eq!(list.conversations[0].unread, 0);
    let read = store.conversation(carol.id, "bob".into(), page(None, 10)).await.expect("read");
    assert!(read.messages.iter().filter(|m| m.to == "bob").all(|m| m.read), "carol sees they were read");
    assert!(!read.messages[0].read, "bob's answer is not read yet");

    // Only its recipient reports a message; only an admin resolves it.
    let reason = || Reason::parse("abusive", true).expect("reason");
    assert!(matches!(store.report_message(carol, m1.id, reason()).await, Err(StoreError::NotFound(_))));
    let report = store.report_message(bob, m1.id, reason()).await.expect("report");
    assert_eq!((report.message.id, report.reporter.as_str(), report.status), (m1.id, "bob", ReportStatus::Open));
    assert!(matches!(store.report_message(bob, m1.id, reason()).await, Err(StoreError::Conflict(_))));
    let open = store.message_reports(Some(ReportStatus::Open), page(None, 10)).await.expect("reports");
    assert_eq!(
        open.reports.iter().map(|r| (r.id, r.message.body.as_str())).collect::<Vec<_>>(),
        [(report.id, "hello *bob*")]
    );
    assert!(matches!(
        store.resolve_message_report(bob, report.id, ReportStatus::Resolved).await,
        Err(StoreError::Forbidden(_))
    ));
    let done = store.resolve_message_report(alice, report.id, ReportStatus::Resolved).await.expect("resolve");
    assert_eq!((done.status, done.resolved_by.as_deref()), (ReportStatus::Resolved, Some("alice")));
    assert!(store.message_reports(Some(ReportStatus::Open), page(None, 10)).await.expect("reports").reports.is_empty());

    // Blocking: idempotent; carol's messages refused, her reply and mention
    // notify bob of nothing, her posts marked for collapsing.
    assert!(store.set_user_blocked(bob, "Carol".into(), true).await.expect("block"));
    assert!(!store.set_user_blocked(bob, "carol".into(), true).await.expect("again"));
    assert!(matches!(store.set_user_blocked(bob, "bob".into(), true).await, Err(StoreError::Invalid(_))));
    assert!(matches!(store.set_user_blocked(bob, "nobody".into(), true).await, Err(StoreError::NotFound(_))));
    let blocks = store.blocks(bob.id).await.expect("blocks");
    assert_eq!((blocks.users, blocks.communities), (vec!["carol".to_owned()], vec![]));
    assert!(matches!(send(store, carol, "bob", "hey").await, Err(StoreError::Denied("blocked", _))));
    let quiet = store.create_post(carol, reply(topic, None, "@bob look")).await.expect("reply");
    assert_eq!((quiet.notify, quiet.inbox.len()), (None, 0), "no reply or mention reaches bob");
    let marks = store.marks(bob.id, topic, vec![quiet.id]).await.expect("marks");
    assert_eq!(marks.blocked_authors, [carol.id]);
    assert!(store.marks(alice.id, topic, vec![quiet.id]).await.expect("marks").blocked_authors.is_empty());
    assert!(store.set_user_blocked(bob, "carol".into(), false).await.expect("unblock"));
    assert!(!store.set_user_blocked(bob, "carol".into(), false).await.expect("again"));
    assert!(store.blocks(bob.id).await.expect("blocks").users.is_empty());
}

/// Email: an address confirmed by a link that works once, a reset that
/// revokes every token, the outbox claimed and finished, the digest switch.
async fn mail_story<S: Store>(store: &S) {
    let now = Timestamp::now();
    let link = |n: u8, url: bool| MailLink {
        hash: [n; 32],
        expires_at: Timestamp(now.0 + 3600),
        url: url.then(|| format!("http://f.example/x/{n}")),
    };
    let email = |s: &str| Email::parse(s).expect("email");
    let name = |s: &str| Username::parse(s).expect("name");
    let dave = store
        .register_with_email(name("dave"), "hash-d".into(), None, email("Dave@Example.org"), link(1, true))
        .await
        .expect("dave");
    let taken =
        store.register_with_email(name("erin"), "hash-e".into(), None, email("dave@example.ORG"), link(2, true)).await;
    assert!(matches!(taken, Err(StoreError::Taken("email_taken", _))), "{taken:?}");
    assert!(store.user_credentials("erin".into()).await.expect("read").is_none(), "nothing half-written");
    let pending = EmailSettings { email: None, pending: Some("Dave@Example.org".into()), digest: false };
    assert_eq!(store.email_settings(dave.id).await.expect("settings"), pending);

    assert_eq!(store.verify_email([9; 32], now).await.expect("verify"), None, "unknown");
    assert_eq!(store.verify_email([1; 32], now).await.expect("verify").map(|u| u.id), Some(dave.id));
    assert_eq!(store.verify_email([1; 32], now).await.expect("verify"), None, "used");
    let verified = EmailSettings { email: Some("Dave@Example.org".into()), pending: None, digest: false };
    assert_eq!(store.email_settings(dave.id).await.expect("settings"), verified);

    let found = store.issue_reset(ResetFor::Address(email("DAVE@example.org")), link(3, true)).await.expect("reset");
    assert_eq!(found.map(|u| u.id), Some(dave.id));
    let nobody = store.issue_reset(ResetFor::Address(email("nobody@example.org")), link(4, true)).await;
    assert!(nobody.expect("reset").is_none());
    store.add_token(dave.id, [5; 32]).await.expect("token");
    assert_eq!(store.verify_email([3; 32], now).await.expect("verify"), None, "a reset link confirms nothing");
    let (user, revoked) = store.reset_password([3; 32], "hash-d2".into(), now).await.expect("reset").expect("valid");
    assert_eq!((user.id, revoked), (dave.id, vec![[5; 32]]));
    assert_eq!(store.user_credentials("dave".into()).await.expect("read").expect("dave").1.as_deref(), Some("hash-d2"));
    assert!(store.reset_password([3; 32], "x".into(), now).await.expect("reset").is_none(), "used");
    let printed = MailLink { hash: [6; 32], expires_at: now, url: None };
    assert!(store.issue_reset(ResetFor::Name("DAVE".into()), printed).await.expect("link").is_some());
    assert!(store.reset_password([6; 32], "x".into(), now).await.expect("reset").is_none(), "expired");

    // The outbox: the confirmation and the one reset mail, claimed once.
    // The store stamps each mail with its own clock, which may have passed
    // `now` by a second under load; the claims look from after both.
    let now = Timestamp::now();
    let mails = store.claim_mail(now, 300, 10).await.expect("claim");
    let subjects: Vec<&str> = mails.iter().map(|m| m.subject.as_str()).collect();
    assert_eq!(subjects, ["Confirm your email address", "Reset your password"]);
    assert!(mails.iter().all(|m| m.to == "Dave@Example.org" && m.attempts == 0));
    assert!(mails[1].body.contains("http://f.example/x/3"), "{}", mails[1].body);
    assert!(store.claim_mail(now, 300, 10).await.expect("claim").is_empty(), "held by the first claim");
    store.finish_mail(mails[0].id, Delivery::Sent).await.expect("sent");
    store.finish_mail(mails[1].id, Delivery::Retry { at: now, error: "421 busy".into() }).await.expect("retry");
    let again = store.claim_mail(now, 300, 10).await.expect("claim");
    assert_eq!((again.len(), again[0].attempts), (1, 1));
    store.finish_mail(again[0].id, Delivery::Failed { error: "550 no".into() }).await.expect("failed");
    assert_eq!(store.outbox_counts().await.expect("counts"), (0, 1));
    assert!(store.claim_mail(Timestamp(now.0 + 1000), 300, 10).await.expect("claim").is_empty(), "given up");

    // The digest needs an address; with nothing unread, nothing is queued.
    let bob = store.user_credentials("bob".into()).await.expect("read").expect("bob").0;
    assert!(matches!(store.set_digest(bob.id, true).await, Err(StoreError::Invalid(_))));
    store.set_digest(dave.id, true).await.expect("digest");
    assert!(store.email_settings(dave.id).await.expect("settings").digest);
    assert_eq!(store.queue_digests(now, "http://f.example".into()).await.expect("digests"), 0);
}

/// An account's export read in pages, two-factor state, and deletion.
/// Housekeeping's sweep: sessions and tokens unused past their kind's idle
/// limit and email links past their expiry are deleted, a batch at a time;
/// the rest stay and still work.
async fn sweep_story<S: Store>(store: &S) {
    let now = Timestamp::now();
    let hal = store.create_user(Username::parse("hal").expect("name"), None, false).await.expect("hal");
    let token = |kind, n: u8| NewToken { user_id: hal.id, hash: [n; 32], kind, label: String::new() };
    for n in 40..43 {
        store.issue_token(token(TokenKind::Session, n)).await.expect("session");
    }
    store.issue_token(token(TokenKind::Api, 43)).await.expect("api token");
    let link = MailLink { hash: [44; 32], expires_at: Timestamp(now.0 + 3600), url: None };
    assert!(store.issue_reset(ResetFor::Name("hal".into()), link).await.expect("reset").is_some());
    let limits = IdleLimits { session_days: 30, api_days: 365 };
    let hals = || async {
        let mut held: Vec<u8> = store.user_tokens(hal.id).await.expect("tokens").iter().map(|t| t.hash[0]).collect();
        held.sort_unstable();
        held
    };
    // Swept until a batch comes back short, as housekeeping does; the
    // story's other users' tokens go the same way.
    let sweep = |at: Timestamp, limits: IdleLimits| async move {
        let mut total = 0;
        loop {
            let n = store.sweep_expired(at, limits, 2).await.expect("sweep");
            assert!(n <= 2, "a batch holds at most its limit: {n}");
            total += n;
            if n < 2 {
                return total;
            }
        }
    };

    sweep(now, limits).await;
    assert_eq!(hals().await, [40, 41, 42, 43], "nothing of hal's has expired yet");
    // 31 days on: the sessions have ended, the API token has not, the
    // link ran out long ago.
    assert!(sweep(Timestamp(now.0 + 31 * 86_400), limits).await >= 4);
    assert_eq!(hals().await, [43]);
    assert_eq!(store.token_user([43; 32]).await.expect("read").map(|(u, _)| u.id), Some(hal.id));
    assert!(store.reset_password([44; 32], "x".into(), now).await.expect("reset").is_none(), "the link is gone");
    // A limit of 0 keeps that kind for ever; past its limit it goes too.
    sweep(Timestamp(now.0 + 4000 * 86_400), IdleLimits { session_days: 30, api_days: 0 }).await;
    assert_eq!(hals().await, [43]);
    sweep(Timestamp(now.0 + 366 * 86_400), limits).await;
    assert!(hals().await.is_empty());
}

async fn lifecycle<S: Store>(store: &S, admin: &pith::model::User, topic: i64) {
    let dave = store.create_user(Username::parse("fay").expect("name"), Some("h".into()), false).await.expect("fay");
    let erin = store.create_user(Username::parse("gus").expect("name"), Some("h".into()), false).await.expect("gus");
    let own = store.create_topic(&dave, new_topic("raspi", "Fay's", Some("mine"))).await.expect("topic");
    let mut posts = Vec::new();
    for i in 0..5 {
        posts.push(store.create_post(&dave, reply(topic, None, &format!("fay {i}"))).await.expect("post").id);
    }
    let erins = store.create_post(&erin, reply(topic, None, "gus's words")).await.expect("post");
    store.vote(&dave, VoteTarget::Post(erins.id), 1).await.expect("vote");
    store.vote(&dave, VoteTarget::Topic(topic), -1).await.expect("vote");
    store.set_saved(&dave, VoteTarget::Topic(topic), true).await.expect("save");

    // Pages of two, oldest first, from just after the last one's key.
    let first = store.authored_posts(dave.id, None, 2).await.expect("page");
    let next = store.authored_posts(dave.id, Some(first[1].id), 10).await.expect("page");
    let walked: Vec<i64> = first.iter().chain(&next).map(|p| p.id).collect();
    assert_eq!(walked, posts);
    let topics = store.authored_topics(dave.id, None, 10).await.expect("topics");
    assert_eq!(topics.iter().map(|t| t.id).collect::<Vec<_>>(), [own.id]);
    let votes = store.cast_votes(dave.id, None, 1).await.expect("votes");
    assert_eq!((votes[0].kind, votes[0].id, votes[0].value), ("topic", topic, -1));
    let rest = store.cast_votes(dave.id, Some(votes[0].key()), 10).await.expect("votes");
    assert_eq!((rest.len(), rest[0].kind, rest[0].id, rest[0].value), (1, "post", erins.id, 1));

    // Two-factor: a pending secret, enabled only while still pending; a
    // step works once; a recovery code once.
    assert_eq!(store.two_factor(dave.id).await.expect("2fa"), pith::model::TwoFactor::default());
    store.begin_totp(dave.id, vec![1; 20]).await.expect("begin");
    assert!(!store.enable_totp(dave.id, vec![2; 20], 10, vec![[9; 32]]).await.expect("other secret"));
    assert!(store.enable_totp(dave.id, vec![1; 20], 10, vec![[8; 32], [9; 32]]).await.expect("enable"));
    let tf = store.two_factor(dave.id).await.expect("2fa");
    assert_eq!((tf.secret, tf.pending, tf.recovery_left), (Some(vec![1; 20]), None, 2));
    assert!(!store.use_totp_step(dave.id, 10).await.expect("replay"), "the step of the confirming code");
    assert!(store.use_totp_step(dave.id, 11).await.expect("step"));
    assert!(store.use_recovery_code(dave.id, [9; 32]).await.expect("code"));
    assert!(!store.use_recovery_code(dave.id, [9; 32]).await.expect("code"), "once");

    // Deleting keeps the content under no name, or erases it; the name
    // stays taken; the last administrator stays.
    let mut touched = store.delete_user(dave.id, ContentFate::KeepAnonymous).await.expect("delete");
    touched.sort();
    assert_eq!(touched, [topic, own.id]);
    let (_, read) = store.topic_with_posts(topic, PostSort::Old).await.expect("read");
    let kept = read.iter().find(|p| p.id == posts[0]).expect("kept");
    assert_eq!((kept.author.as_deref(), kept.body.as_str(), kept.deleted), (None, "fay 0", false));
    assert!(matches!(store.profile("fay".into()).await, Err(StoreError::NotFound(_))));
    assert!(store.user_credentials("fay".into()).await.expect("read").is_none());
    assert_eq!(store.two_factor(dave.id).await.expect("2fa").secret, None);
    assert!(store.cast_votes(dave.id, None, 10).await.expect("votes").is_empty());
    assert!(store.saved(dave.id, None, 10).await.expect("saved").items.is_empty());
    let again = store.create_user(Username::parse("Fay").expect("name"), None, false).await;
    assert!(matches!(again, Err(StoreError::Conflict(_) | StoreError::Taken(..))), "reserved: {again:?}");
    assert!(matches!(store.delete_user(dave.id, ContentFate::Remove).await, Err(StoreError::NotFound(_))));
    store.delete_user(erin.id, ContentFate::Remove).await.expect("delete");
    let (_, read) = store.topic_with_posts(topic, PostSort::Old).await.expect("read");
    let gone = read.iter().find(|p| p.id == erins.id).expect("kept in place");
    assert_eq!((gone.author.as_deref(), gone.body.as_str(), gone.deleted), (None, "", true));
    let refused = store.delete_user(admin.id, ContentFate::KeepAnonymous).await;
    assert!(matches!(refused, Err(StoreError::Denied("last_admin", _))), "{refused:?}");
}

#[tokio::test]
async fn the_sqlite_store_tells_the_whole_story_and_keeps_it_across_a_reopen() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("pith.db");
    let opts = SqliteOptions { readers: 2, ..SqliteOptions::default() };
    let store = SqliteStore::open(&path, &opts).expect("open");
    story(&store).await;
    store.shutdown().await;
    drop(store);

    let store = SqliteStore::open(&path, &opts).expect("reopen");
    let names: Vec<String> = store.list_communities().await.expect("list").into_iter().map(|c| c.name).collect();
    assert_eq!(names, ["arduino", "raspi"]);
    let profile = store.profile("bob".into()).await.expect("profile");
    assert_eq!(profile.topics[0].body.as_deref(), Some("Which microSD card?"));
    store.shutdown().await;
}

#[tokio::test]
async fn the_postgres_store_tells_the_whole_story_and_keeps_it_across_a_reconnect() {
    let db = crate::support::pg::TestDb::create().await;
    let store = db.store().await;
    story(&store).await;
    store.shutdown().await;
    drop(store);

    // A second connect finds the schema migrated and applies nothing twice.
    let store = db.store().await;
    let names: Vec<String> = store.list_communities().await.expect("list").into_iter().map(|c| c.name).collect();
    assert_eq!(names, ["arduino", "raspi"]);
    let profile = store.profile("bob".into()).await.expect("profile");
    assert_eq!(profile.topics[0].body.as_deref(), Some("Which microSD card?"));
    let applied = db.client().await.query_one("SELECT count(*) FROM pith_migrations", &[]).await.expect("count");
    assert_eq!(applied.get::<_, i64>(0), 16);
    store.shutdown().await;
}

/// A community's topic count follows every change to its topics: made,
/// deleted by the author, removed and restored by a moderator (a deleted
/// topic restored stays out of the count).
async fn topic_counts<S: Store>(store: &S) {
    let admin = store.create_user(Username::parse("admin").expect("name"), None, true).await.expect("admin");
    let author = store.create_user(Username::parse("author").expect("name"), None, false).await.expect("author");
    let new = |name: &str| NewCommunity {
        name: CommunityName::parse(name).expect("name"),
        title: Title::parse("Counted").expect("title"),
        description: String::new(),
    };
    store.create_community(&admin, new("counted")).await.expect("community");
    store.create_community(&admin, new("other")).await.expect("community");
    let count = |name: &'static str| async move { store.community(name.into()).await.expect("read").topic_count };
    let mut made = Vec::new();
    for i in 0..4 {
        made.push(store.create_topic(&author, new_topic("counted", &format!("T{i}"), None)).await.expect("topic"));
    }
    store.create_topic(&author, new_topic("other", "Elsewhere", None)).await.expect("topic");
    assert_eq!((count("counted").await, count("other").await), (4, 1));
    store.delete_topic(&author, made[0].id).await.expect("delete");
    assert_eq!(count("counted").await, 3, "deleted by its author");
    let reason = || Reason::parse("", false).expect("reason");
    store.moderate(&admin, pith::model::ModAction::RemoveTopic(made[1].id), reason()).await.expect("remove");
    assert_eq!(count("counted").await, 2, "removed by a moderator");
    store.moderate(&admin, pith::model::ModAction::RestoreTopic(made[1].id), reason()).await.expect("restore");
    assert_eq!(count("counted").await, 3, "restored");
    store.moderate(&admin, pith::model::ModAction::RemoveTopic(made[0].id), reason()).await.expect("remove");
    store.moderate(&admin, pith::model::ModAction::RestoreTopic(made[0].id), reason()).await.expect("restore");
    assert_eq!(count("counted").await, 3, "a deleted topic removed and restored is still deleted");
    // A topic's community in one read, deleted topics included.
    let of = store.topic_community(made[0].id).await.expect("community of a topic");
    assert_eq!((of.name.as_str(), of.topic_count), ("counted", 3));
    let missing = store.topic_community(i64::MAX).await;
    assert!(matches!(missing, Err(StoreError::NotFound("topic"))), "{missing:?}");
    let listed = store.list_communities().await.expect("list");
    let counts: Vec<(String, i64)> = listed.into_iter().map(|c| (c.name, c.topic_count)).collect();
    assert_eq!(counts, [("counted".to_owned(), 3), ("other".to_owned(), 1)]);
}

#[tokio::test]
async fn the_sqlite_store_counts_a_communitys_topics_as_they_change() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = SqliteStore::open(&dir.path().join("pith.db"), &SqliteOptions::default()).expect("open");
    topic_counts(&store).await;
    store.shutdown().await;
}

#[tokio::test]
async fn the_postgres_store_counts_a_communitys_topics_as_they_change() {
    let db = crate::support::pg::TestDb::create().await;
    let store = db.store().await;
    topic_counts(&store).await;
    store.shutdown().await;
}
