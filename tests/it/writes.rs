//! The SQLite writer's group commits: the search index changes of a whole
//! batch applied at once before its COMMIT (migration 0004), and replies
//! that run without a savepoint of their own.

use std::sync::Arc;

use pith::model::{Body, CommunityName, SearchHit, Text, Title, Username};
use pith::store::sqlite::{SqliteOptions, SqliteStore};
use pith::store::{NewCommunity, NewPost, NewTopic, Search, SearchKind, Store, StoreError};

async fn forum(dir: &std::path::Path) -> (Arc<SqliteStore>, pith::model::User, i64) {
    let store = SqliteStore::open(&dir.join("pith.db"), &SqliteOptions { readers: 2, ..SqliteOptions::default() })
        .expect("open");
    let user = store.create_user(Username::parse("writer").expect("name"), None, true).await.expect("user");
    let community = CommunityName::parse("batch").expect("community");
    store
        .create_community(
            &user,
            NewCommunity {
                name: community.clone(),
                title: Title::parse("Batch").expect("title"),
                description: "".into(),
            },
        )
        .await
        .expect("community");
    let topic = store
        .create_topic(
            &user,
            NewTopic {
                community,
                title: Title::parse("Words").expect("title"),
                body: None,
                url: None,
                remote_id: None,
            },
        )
        .await
        .expect("topic");
    (Arc::new(store), user, topic.id)
}

async fn found(store: &SqliteStore, word: &str) -> Vec<i64> {
    let page = store
        .search(Search { text: word.into(), kind: SearchKind::Posts, community: None, offset: 0, limit: 50 })
        .await
        .expect("search");
    let mut ids: Vec<i64> = page
        .hits
        .into_iter()
        .map(|h| match h {
            SearchHit::Post { post, .. } => post.id,
            SearchHit::Topic { topic, .. } => topic.id,
        })
        .collect();
    ids.sort();
    ids
}

/// A word only post `i` holds: consonants for its digits (the tokenizer
/// splits digits off) and a final x, which the porter stemmer leaves alone,
/// all words of one length, so a prefix search finds only this one.
fn word(prefix: &str, i: usize) -> String {
    let letters: String = format!("{i:04}").bytes().map(|b| b"bcdfghjklm"[usize::from(b - b'0')] as char).collect();
    format!("{prefix}{letters}x")
}

/// Concurrent replies, edits and deletions commit in shared batches; the
/// search index then holds exactly the visible text, the queue is empty
/// and FTS5 finds its own structure sound.
#[tokio::test]
async fn a_batch_of_concurrent_writes_is_searchable_exactly_as_stored() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (store, user, topic_id) = forum(dir.path()).await;
    let n = 200;
    let posts: Vec<i64> = futures_util::future::join_all((0..n).map(|i| {
        let (store, user) = (store.clone(), user.clone());
        async move {
            let body = Body::parse(&format!("first {} text", word("zq", i))).expect("body");
            store
                .create_post(&user, NewPost { topic_id, parent_id: None, body: Text::render(body), remote_id: None })
                .await
                .expect("post")
                .id
        }
    }))
    .await;
    // Every third post edited, every fifth deleted, all at once.
    futures_util::future::join_all(posts.iter().enumerate().map(|(i, &id)| {
        let (store, user) = (store.clone(), user.clone());
        async move {
            if i % 5 == 0 {
                store.delete_post(&user, id).await.expect("delete");
            } else if i % 3 == 0 {
                let body = Body::parse(&format!("second {} text", word("yq", i))).expect("body");
                store.edit_post(&user, id, Text::render(body)).await.expect("edit");
            }
        }
    }))
    .await;
    for (i, &id) in posts.iter().enumerate() {
        let (first, second) = (found(&store, &word("zq", i)).await, found(&store, &word("yq", i)).await);
        match (i % 5 == 0, i % 3 == 0) {
            (true, _) => assert_eq!((first, second), (vec![], vec![]), "post {i} was deleted"),
            (false, true) => assert_eq!((first, second), (vec![], vec![id]), "post {i} was edited"),
            (false, false) => assert_eq!((first, second), (vec![id], vec![]), "post {i}"),
        }
    }
    assert_eq!(found(&store, "text").await.len(), 50, "a page of every visible post");
    Arc::into_inner(store).expect("one owner").shutdown().await;

    let conn = rusqlite::Connection::open(dir.path().join("pith.db")).expect("open");
    let (queued, deferred): (i64, i64) = conn
        .query_row("SELECT (SELECT count(*) FROM fts_queue), (SELECT deferred FROM fts_defer)", [], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })
        .expect("queue");
    assert_eq!((queued, deferred), (0, 0), "nothing stays queued once the writer stops");
    conn.execute_batch(
        "INSERT INTO posts_fts (posts_fts) VALUES ('integrity-check');
         INSERT INTO topics_fts (topics_fts) VALUES ('integrity-check');",
    )
    .expect("the FTS5 indexes are sound");
    // A post another program inserts is indexed when Pith next opens the
    // file (no trigger does it since 0017); one it deleted at once is not.
    conn.execute_batch(&format!(
        "INSERT INTO posts (topic_id, author_id, body, body_html, created_at) VALUES ({topic_id}, {u}, 'outside words', '', 0);
         INSERT INTO posts (topic_id, author_id, body, body_html, created_at, deleted) VALUES ({topic_id}, {u}, 'outside gone', '', 0, 1);",
        u = user.id
    ))
    .expect("insert");
    let outside = |conn: &rusqlite::Connection| -> i64 {
        conn.query_row("SELECT count(*) FROM posts_fts WHERE posts_fts MATCH 'outside'", [], |r| r.get(0)).expect("q")
    };
    assert_eq!(outside(&conn), 0, "not indexed while Pith is not running");
    drop(conn);
    let store = SqliteStore::open(&dir.path().join("pith.db"), &SqliteOptions::default()).expect("open again");
    assert_eq!(found(&store, "outside").await.len(), 1, "the visible one is found");
    store.shutdown().await;
    let conn = rusqlite::Connection::open(dir.path().join("pith.db")).expect("open");
    assert_eq!(outside(&conn), 1);
    conn.execute_batch("INSERT INTO posts_fts (posts_fts) VALUES ('integrity-check');").expect("sound");
}

/// A reply runs without a savepoint: a refused one among accepted ones in
/// the same batch leaves nothing behind, and the accepted ones all commit.
#[tokio::test]
async fn refused_replies_in_a_batch_leave_nothing_and_the_rest_commit() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (store, user, topic_id) = forum(dir.path()).await;
    let results = futures_util::future::join_all((0..100).map(|i| {
        let (store, user) = (store.clone(), user.clone());
        async move {
            let body = Body::parse(&format!("reply {i}")).expect("body");
            let (topic_id, parent_id) = match i % 4 {
                0 => (999_999, None),           // no such topic
                1 => (topic_id, Some(888_888)), // no such parent
                _ => (topic_id, None),
            };
            store.create_post(&user, NewPost { topic_id, parent_id, body: Text::render(body), remote_id: None }).await
        }
    }))
    .await;
    let mut accepted = 0;
    for (i, r) in results.iter().enumerate() {
        match (i % 4, r) {
            (0, Err(StoreError::NotFound(_))) | (1, Err(StoreError::Invalid(_))) => {}
            (2 | 3, Ok(_)) => accepted += 1,
            other => panic!("reply {i}: {other:?}"),
        }
    }
    assert_eq!(accepted, 50);
    let (topic, posts) = store.topic_with_posts(topic_id, pith::store::PostSort::Old).await.expect("read");
    assert_eq!((topic.post_count, posts.len()), (50, 50));
    Arc::into_inner(store).expect("one owner").shutdown().await;
    let conn = rusqlite::Connection::open(dir.path().join("pith.db")).expect("open");
    let stored: i64 = conn.query_row("SELECT count(*) FROM posts", [], |r| r.get(0)).expect("count");
    assert_eq!(stored, 50);
}
