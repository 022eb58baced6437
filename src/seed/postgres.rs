//! `pith seed` into PostgreSQL: the rows `seed::fill` generates, buffered
//! and loaded with binary COPY (tens of thousands of rows per round trip),
//! all in one transaction, so 100k posts load in seconds. Bodies are
//! rendered to HTML as they are loaded: PostgreSQL has no backfill pass.

use anyhow::Context;
use deadpool_postgres::Object;
use tokio_postgres::binary_copy::BinaryCopyInWriter;
use tokio_postgres::types::{ToSql, Type};

use super::{CommunityRow, PostRow, Rows, SeedStats, Shape, TopicRow, fill};
use crate::store::postgres::{PgOptions, PgStore};

/// Rows buffered before they are sent (per table, all tables at once).
const FLUSH_ROWS: usize = 20_000;

/// Fills the empty database at `url` with `shape`, deterministically: the
/// same rows `pith seed` writes into SQLite for the same seed.
pub fn seed(url: &str, shape: &Shape, seed: u64) -> anyhow::Result<SeedStats> {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let client = rt.block_on(async {
        let store = PgStore::connect(url, &PgOptions { pool_size: 1, ..PgOptions::default() })
            .await
            .context("cannot open the PostgreSQL database")?;
        let client = store.pool().get().await.context("cannot connect to PostgreSQL")?;
        let existing = client
            .query_one("SELECT (SELECT count(*) FROM topics) + (SELECT count(*) FROM users)", &[])
            .await?
            .try_get::<_, i64>(0)?;
        if existing > 0 {
            anyhow::bail!("the database already holds data; seed into a fresh database");
        }
        client.batch_execute("BEGIN").await?;
        anyhow::Ok(client)
    })?;
    let mut rows = CopyRows { rt: &rt, client, buffered: Buffers::default() };
    let stats = fill(&mut rows, shape, seed)?;
    rows.flush()?;
    let client = rows.client;
    rt.block_on(async {
        // Explicit ids leave the identity sequences behind: move them on.
        for table in ["users", "communities", "topics", "posts"] {
            client
                .execute(
                    &format!(
                        "SELECT setval(pg_get_serial_sequence('{table}', 'id'), \
                         (SELECT coalesce(max(id), 0) + 1 FROM {table}), false)"
                    ),
                    &[],
                )
                .await?;
        }
        client.execute(super::COUNT_POSTS, &[]).await?;
        client.batch_execute("COMMIT; ANALYZE").await?;
        anyhow::Ok(())
    })?;
    Ok(stats)
}

#[derive(Default)]
struct Buffers {
    users: Vec<(i64, String, i64)>,
    communities: Vec<CommunityRow>,
    topics: Vec<TopicRow>,
    posts: Vec<PostRow>,
    votes: Vec<[i64; 4]>,
}

impl Buffers {
    fn len(&self) -> usize {
        self.users.len() + self.communities.len() + self.topics.len() + self.posts.len() + self.votes.len()
    }
}

struct CopyRows<'r> {
    rt: &'r tokio::runtime::Runtime,
    client: Object,
    buffered: Buffers,
}

impl CopyRows<'_> {
    fn maybe_flush(&mut self) -> anyhow::Result<()> {
        if self.buffered.len() >= FLUSH_ROWS { self.flush() } else { Ok(()) }
    }

    /// Sends what is buffered, parents before children (a topic before its
    /// posts, a post before its replies), so every foreign key holds.
    fn flush(&mut self) -> anyhow::Result<()> {
        let b = std::mem::take(&mut self.buffered);
        let client = &self.client;
        self.rt.block_on(async move {
            copy(
                client,
                "COPY users (id, name, created_at) FROM STDIN BINARY",
                &[Type::INT8, Type::TEXT, Type::INT8],
                b.users.iter().map(|(id, name, at)| vec![id as &(dyn ToSql + Sync), name, at]),
            )
            .await?;
            copy(
                client,
                "COPY communities (id, name, title, description, created_by, created_at) FROM STDIN BINARY",
                &[Type::INT8, Type::TEXT, Type::TEXT, Type::TEXT, Type::INT8, Type::INT8],
                b.communities.iter().map(|c| {
                    vec![&c.id as &(dyn ToSql + Sync), &c.name, &c.title, &c.description, &1i64, &c.created_at]
                }),
            )
            .await?;
            let topic_html: Vec<String> = b.topics.iter().map(|t| crate::markdown::render(&t.body)).collect();
            copy(
                client,
                "COPY topics (id, community_id, author_id, title, body, body_html, created_at, score, hot) \
                 FROM STDIN BINARY",
                &[
                    Type::INT8,
                    Type::INT8,
                    Type::INT8,
                    Type::TEXT,
                    Type::TEXT,
                    Type::TEXT,
                    Type::INT8,
                    Type::INT8,
                    Type::FLOAT8,
                ],
                b.topics.iter().zip(&topic_html).map(|(t, html)| {
                    vec![
                        &t.id as &(dyn ToSql + Sync),
                        &t.community_id,
                        &t.author_id,
                        &t.title,
                        &t.body,
                        html,
                        &t.created_at,
                        &t.score,
                        &t.hot,
                    ]
                }),
            )
            .await?;
            let post_html: Vec<String> = b.posts.iter().map(|p| crate::markdown::render(&p.body)).collect();
            copy(
                client,
                "COPY posts (id, topic_id, parent_id, author_id, body, body_html, created_at, score) \
                 FROM STDIN BINARY",
                &[Type::INT8, Type::INT8, Type::INT8, Type::INT8, Type::TEXT, Type::TEXT, Type::INT8, Type::INT8],
                b.posts.iter().zip(&post_html).map(|(p, html)| {
                    vec![
                        &p.id as &(dyn ToSql + Sync),
                        &p.topic_id,
                        &p.parent_id,
                        &p.author_id,
                        &p.body,
                        html,
                        &p.created_at,
                        &p.score,
                    ]
                }),
            )
            .await?;
            copy(
                client,
                "COPY votes (user_id, kind, target_id, value) FROM STDIN BINARY",
                &[Type::INT8, Type::INT8, Type::INT8, Type::INT8],
                b.votes.iter().map(|v| v.iter().map(|x| x as &(dyn ToSql + Sync)).collect()),
            )
            .await?;
            anyhow::Ok(())
        })
    }
}

/// One binary COPY of `rows`; nothing is sent for no rows.
async fn copy<'a>(
    client: &Object,
    sql: &str,
    types: &[Type],
    rows: impl Iterator<Item = Vec<&'a (dyn ToSql + Sync)>>,
) -> anyhow::Result<()> {
    let mut rows = rows.peekable();
    if rows.peek().is_none() {
        return Ok(());
    }
    let sink = client.copy_in(sql).await?;
    let writer = std::pin::pin!(BinaryCopyInWriter::new(sink, types));
    let mut writer = writer;
    for row in rows {
        writer.as_mut().write(&row).await?;
    }
    writer.finish().await?;
    Ok(())
}

impl Rows for CopyRows<'_> {
    fn user(&mut self, id: i64, name: String, created_at: i64) -> anyhow::Result<()> {
        self.buffered.users.push((id, name, created_at));
        self.maybe_flush()
    }

    fn community(&mut self, row: CommunityRow) -> anyhow::Result<()> {
        self.buffered.communities.push(row);
        self.maybe_flush()
    }

    fn topic(&mut self, row: TopicRow) -> anyhow::Result<()> {
        self.buffered.topics.push(row);
        self.maybe_flush()
    }

    fn post(&mut self, row: PostRow) -> anyhow::Result<()> {
        self.buffered.posts.push(row);
        self.maybe_flush()
    }

    fn vote(&mut self, user_id: i64, kind: i64, target_id: i64, value: i64) -> anyhow::Result<()> {
        self.buffered.votes.push([user_id, kind, target_id, value]);
        self.maybe_flush()
    }
}
