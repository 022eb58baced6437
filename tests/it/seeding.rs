//! `pith seed` data sets and the checkpointer's bound on the WAL.

use std::time::Duration;

use pith::config::Dataset;
use pith::seed::{Shape, seed};
use pith::store::sqlite::{SqliteOptions, SqliteStore};

/// Every row of the tables that make up a forum, in a fixed order.
fn dump(path: &std::path::Path) -> String {
    let conn = rusqlite::Connection::open(path).expect("open");
    let mut out = String::new();
    for sql in [
        "SELECT id, name FROM users ORDER BY id",
        "SELECT id, name, title, description FROM communities ORDER BY id",
        "SELECT id, community_id, author_id, title, body, created_at, score, hot FROM topics ORDER BY id",
        "SELECT topic_id, post_count FROM topic_counts ORDER BY topic_id",
        "SELECT id, topic_id, parent_id, author_id, body, created_at, score FROM posts ORDER BY id",
        "SELECT user_id, kind, target_id, value FROM votes ORDER BY user_id, kind, target_id",
    ] {
        let mut stmt = conn.prepare(sql).expect("prepare");
        let n = stmt.column_count();
        let mut rows = stmt.query([]).expect("query");
        while let Some(row) = rows.next().expect("row") {
            for i in 0..n {
                let v: rusqlite::types::Value = row.get(i).expect("value");
                out.push_str(&format!("{v:?}|"));
            }
            out.push('\n');
        }
    }
    out
}

#[test]
fn the_same_seed_gives_the_same_data_and_another_seed_does_not() {
    let dirs: Vec<_> = (0..3).map(|_| tempfile::tempdir().expect("tempdir")).collect();
    let shape = Shape::of(Dataset::Reddit, 0.01);
    for (dir, s) in dirs.iter().zip([7, 7, 8]) {
        seed(&dir.path().join("pith.db"), &shape, s).expect("seed");
    }
    let dumps: Vec<_> = dirs.iter().map(|d| dump(&d.path().join("pith.db"))).collect();
    assert!(dumps[0].len() > 10_000, "the data set is not empty");
    assert_eq!(dumps[0], dumps[1]);
    assert_ne!(dumps[0], dumps[2]);
}

#[test]
fn the_realistic_data_set_has_the_shape_of_the_workload() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("pith.db");
    let stats = seed(&path, &Shape::of(Dataset::Realistic, 0.1), 1).expect("seed");
    assert_eq!(stats.posts, 10_000);
    let conn = rusqlite::Connection::open(&path).expect("open");
    let (min, max): (i64, i64) = conn
        .query_row("SELECT min(n), max(n) FROM (SELECT count(*) n FROM posts GROUP BY topic_id)", [], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })
        .expect("sizes");
    assert!(min >= 1 && max <= 50, "posts per topic {min}..{max}");
    let (lo, hi): (i64, i64) = conn
        .query_row("SELECT min(length(body)), max(length(body)) FROM posts", [], |r| Ok((r.get(0)?, r.get(1)?)))
        .expect("bodies");
    assert!(lo >= 90 && hi <= 200, "body lengths {lo}..{hi}");
    let counted: i64 = conn
        .query_row(
            "SELECT count(*) FROM topics t LEFT JOIN topic_counts n ON n.topic_id = t.id \
             WHERE coalesce(n.post_count, 0) != (SELECT count(*) FROM posts p WHERE p.topic_id = t.id)",
            [],
            |r| r.get(0),
        )
        .expect("counts");
    assert_eq!(counted, 0, "post_count matches the posts");
}

/// `pith seed` stores every body's HTML as the server renders it, so the
/// first open has nothing to backfill; the text is indexed for search too.
#[tokio::test]
async fn a_seeded_database_holds_the_html_the_server_would_store_and_opens_without_a_backfill() {
    use pith::store::Store;
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("pith.db");
    // Reddit: topics with bodies, replies to replies, votes between them;
    // several chunks for the renderer threads.
    let stats = seed(&path, &Shape::of(Dataset::Reddit, 0.05), 5).expect("seed");
    assert!(stats.posts > 5_000 && stats.topics >= 5 && stats.votes > 0, "{stats:?}");
    let conn = rusqlite::Connection::open(&path).expect("open");
    // What backfill.rs selects: nothing is left for it.
    let (posts, topics, queued): (i64, i64, i64) = conn
        .query_row(
            "SELECT (SELECT count(*) FROM posts WHERE body_html IS NULL), \
             (SELECT count(*) FROM topics WHERE body_html IS NULL AND body IS NOT NULL), \
             (SELECT count(*) FROM fts_queue)",
            [],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )
        .expect("counts");
    assert_eq!((posts, topics, queued), (0, 0, 0));
    for sql in ["SELECT body, body_html FROM posts", "SELECT body, body_html FROM topics"] {
        let mut stmt = conn.prepare(sql).expect("prepare");
        let rows = stmt.query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?))).expect("rows");
        let mut n = 0;
        for row in rows {
            let (body, html) = row.expect("row");
            assert_eq!(html, pith::markdown::render(&body), "{sql}: {body}");
            n += 1;
        }
        assert!(n >= 5, "{sql}: {n} rows");
    }
    let indexed: i64 =
        conn.query_row("SELECT count(*) FROM posts_fts WHERE posts_fts MATCH 'kernel'", [], |r| r.get(0)).expect("fts");
    let holding: i64 =
        conn.query_row("SELECT count(*) FROM posts WHERE body LIKE '%kernel%'", [], |r| r.get(0)).expect("like");
    assert_eq!(indexed, holding, "every post that says kernel is found");
    conn.execute_batch("INSERT INTO posts_fts (posts_fts) VALUES ('integrity-check')").expect("sound index");
    drop(conn);

    // The server opens it as it is and serves the first topic's stored HTML.
    let before = std::fs::metadata(&path).expect("size").len();
    let store = SqliteStore::open(&path, &SqliteOptions { readers: 1, ..SqliteOptions::default() }).expect("open");
    let (topic, replies) = store.topic_with_posts(1, pith::store::PostSort::Old).await.expect("read");
    assert_eq!(topic.body_html.as_deref(), topic.body.as_deref().map(pith::markdown::render).as_deref());
    assert!(!replies.is_empty() && replies.iter().all(|p| p.body_html == pith::markdown::render(&p.body)));
    store.shutdown().await;
    assert_eq!(std::fs::metadata(&path).expect("size").len(), before, "opening rewrote nothing");
}

#[test]
fn seeding_a_database_that_holds_data_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("pith.db");
    let shape = Shape::of(Dataset::Realistic, 0.001);
    seed(&path, &shape, 1).expect("first seed");
    let err = seed(&path, &shape, 1).expect_err("second seed");
    assert!(err.to_string().contains("already holds data"), "{err}");
}

/// Sustained writes with a long-lived reader must not let the WAL grow
/// past its limit by more than a batch or two: the writer restarts it, and
/// once the writes stop the checkpointer truncates the file.
#[tokio::test]
async fn the_wal_stays_bounded_under_sustained_writes() {
    use pith::model::{Body, Text, Username};
    use pith::store::{NewPost, Store};
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("pith.db");
    seed(&path, &Shape::of(Dataset::Realistic, 0.001), 1).expect("seed");
    let limit = 256 * 1024;
    let opts = SqliteOptions {
        readers: 2,
        wal_limit_bytes: limit,
        checkpoint_every: Duration::from_millis(20),
        ..SqliteOptions::default()
    };
    let store = SqliteStore::open(&path, &opts).expect("open");
    let user = store.create_user(Username::parse("writer").expect("name"), None, false).await.expect("user");
    let wal = dir.path().join("pith.db-wal");
    let mut largest = 0;
    let body = Body::parse(&"w".repeat(2_000)).expect("body");
    for i in 0..3_000 {
        store
            .create_post(
                &user,
                NewPost { topic_id: 1, parent_id: None, body: Text::render(body.clone()), remote_id: None },
            )
            .await
            .expect("write");
        if i % 10 == 0 {
            // Reads in between, as a live server would have.
            store.topic_with_posts(1, pith::store::PostSort::Old).await.expect("read");
            largest = largest.max(std::fs::metadata(&wal).map(|m| m.len()).unwrap_or(0));
        }
    }
    // The writer resets the log inside the file without truncating it;
    // once writes pause, the checkpointer gives the file's space back.
    let mut polls = 0;
    while std::fs::metadata(&wal).map(|m| m.len()).unwrap_or(0) > limit {
        assert!(polls < 1_000, "the WAL file stayed over its limit after the writes stopped");
        tokio::time::sleep(Duration::from_millis(20)).await;
        polls += 1;
    }
    store.shutdown().await;
    eprintln!("largest WAL seen: {largest} bytes (limit {limit})");
    // 3,000 posts of 2 KB wrote ~12 MB of pages; the WAL never held more than a few batches.
    assert!(largest < 8 * limit, "the WAL grew to {largest} bytes (limit {limit})");
    let after = std::fs::metadata(&wal).map(|m| m.len()).unwrap_or(0);
    assert_eq!(after, 0, "a clean shutdown leaves an empty WAL");
}
