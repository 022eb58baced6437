//! `pith seed`: deterministic benchmark data sets (WORKLOAD.md). The same
//! `--dataset` and `--seed` always produce the same rows. Rows are written
//! straight into one transaction for speed, so run it before `serve`, with
//! their bodies rendered to HTML (on other threads) and indexed for search,
//! so the server opens the result at once.

use std::collections::VecDeque;
use std::path::Path;

use anyhow::Context;
use crossbeam_channel::{Receiver, Sender};
use indicatif::{ProgressBar, ProgressStyle};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rusqlite::{Connection, params};

mod postgres;

use crate::config::{Backend, Dataset, SeedConfig};
use crate::model::hot_rank;
use crate::store::sqlite::conn::{Role, migrate, open};
use crate::store::sqlite::search_queue;

/// The shape of a data set.
#[derive(Debug, Clone)]
pub struct Shape {
    pub users: usize,
    pub communities: usize,
    pub target_posts: usize,
    pub body_chars: (usize, usize),
    /// Posts per topic, drawn per topic.
    pub posts_per_topic: PostsPerTopic,
    /// Chance that a post replies to an earlier post rather than the topic.
    pub reply_chance: f64,
    /// Votes: up to this many per topic (Zipf-scaled) and per post.
    pub votes: Option<(usize, usize)>,
}

#[derive(Debug, Clone, Copy)]
pub enum PostsPerTopic {
    Uniform(usize, usize),
    /// Topic k of n gets about `max / k^s` posts, at least `min`: a few
    /// very hot topics and a long tail.
    Zipf {
        topics: usize,
        max: usize,
        min: usize,
        s: f64,
    },
}

impl Shape {
    pub fn of(dataset: Dataset, scale: f64) -> Shape {
        let n = |x: usize| ((x as f64 * scale).round() as usize).max(1);
        match dataset {
            Dataset::Realistic => Shape {
                users: 1_000,
                communities: 10,
                target_posts: n(100_000),
                body_chars: (100, 200),
                posts_per_topic: PostsPerTopic::Uniform(2, 50),
                reply_chance: 0.0,
                votes: None,
            },
            Dataset::Heavy => Shape {
                users: 1_000,
                communities: 5,
                target_posts: n(100_000),
                body_chars: (57, 2772),
                posts_per_topic: PostsPerTopic::Uniform(5, 1000),
                reply_chance: 0.0,
                votes: None,
            },
            Dataset::Reddit => Shape {
                users: 10_000,
                communities: 50,
                target_posts: n(200_000),
                body_chars: (20, 1500),
                posts_per_topic: PostsPerTopic::Zipf { topics: n(5_000), max: 5_000, min: 1, s: 1.1 },
                reply_chance: 0.6,
                votes: Some((2_000, 5)),
            },
        }
    }
}

const WORDS: &[&str] = &[
    "pi",
    "forum",
    "sqlite",
    "rust",
    "thread",
    "reply",
    "vote",
    "cache",
    "board",
    "the",
    "a",
    "of",
    "and",
    "to",
    "in",
    "is",
    "it",
    "that",
    "for",
    "on",
    "with",
    "as",
    "was",
    "this",
    "but",
    "they",
    "have",
    "write",
    "read",
    "fast",
    "small",
    "server",
    "kernel",
    "socket",
    "memory",
    "disk",
    "query",
    "index",
    "page",
    "topic",
    "post",
    "community",
    "people",
    "question",
    "answer",
    "because",
    "really",
    "think",
];

fn text(rng: &mut ChaCha8Rng, (min, max): (usize, usize)) -> String {
    let len = rng.random_range(min..=max);
    let mut s = String::with_capacity(len + 12);
    while s.len() < len {
        if !s.is_empty() {
            s.push(' ');
        }
        s.push_str(WORDS[rng.random_range(0..WORDS.len())]);
    }
    s.truncate(len);
    s.trim_end().to_owned()
}

pub fn main(cfg: SeedConfig) -> anyhow::Result<()> {
    let started = std::time::Instant::now();
    let shape = Shape::of(cfg.dataset, cfg.scale);
    let (place, stats) = match cfg.data.backend() {
        Backend::Sqlite(path) => (path.display().to_string(), seed(&path, &shape, cfg.seed)?),
        Backend::Postgres(url) => (crate::settings::redact_url(&url), postgres::seed(&url, &shape, cfg.seed)?),
    };
    eprintln!(
        "seeded {} ({:?}, seed {}): {} users, {} communities, {} topics, {} posts, {} votes in {:.1}s \
         ({:.0} posts/s)",
        place,
        cfg.dataset,
        cfg.seed,
        stats.users,
        stats.communities,
        stats.topics,
        stats.posts,
        stats.votes,
        started.elapsed().as_secs_f64(),
        stats.posts as f64 / started.elapsed().as_secs_f64().max(1e-9)
    );
    Ok(())
}

#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct SeedStats {
    pub users: usize,
    pub communities: usize,
    pub topics: usize,
    pub posts: usize,
    pub votes: usize,
}

/// Each topic's count of posts, once they are all in (both backends).
pub const COUNT_POSTS: &str =
    "INSERT INTO topic_counts (topic_id, post_count) SELECT topic_id, count(*) FROM posts GROUP BY topic_id";

/// Fills the (empty) database at `path` with `shape`, deterministically.
/// Bodies are stored with their HTML, rendered as the server renders them,
/// so the server has nothing to backfill when it opens the result.
pub fn seed(path: &Path, shape: &Shape, seed: u64) -> anyhow::Result<SeedStats> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    let mut conn = open(path, Role::Writer).context("cannot open database")?;
    migrate(&mut conn).context("cannot migrate database")?;
    let existing: i64 =
        conn.query_row("SELECT (SELECT count(*) FROM topics) + (SELECT count(*) FROM users)", [], |r| r.get(0))?;
    if existing > 0 {
        anyhow::bail!("{} already holds data; seed into a fresh --data-dir", path.display());
    }
    // One transaction of the whole data set: with the server writer's small
    // page cache it spills to the WAL and writes pages again; a bulk load
    // that exits when done can hold more.
    conn.execute_batch("PRAGMA synchronous = OFF; PRAGMA cache_size = -16000")?;
    let tx = conn.transaction()?;
    // Rendering Markdown costs more than inserting: this thread generates
    // and inserts while `renderers` threads render the chunk before.
    let renderers = std::thread::available_parallelism().map_or(1, |n| n.get());
    let stats = std::thread::scope(|s| {
        let (to_render, chunks) = crossbeam_channel::bounded::<(Chunk, Sender<Chunk>)>(2 * renderers);
        for _ in 0..renderers {
            let chunks = chunks.clone();
            s.spawn(move || {
                for (mut chunk, reply) in chunks {
                    chunk.render();
                    // Gone only when the seeding thread failed and stopped.
                    let _ = reply.send(chunk);
                }
            });
        }
        drop(chunks);
        // FTS5 would write a segment per row; it gets one per chunk.
        search_queue::defer(&tx)?;
        let mut rows = SqliteRows::new(&tx, to_render)?;
        let stats = fill(&mut rows, shape, seed)?;
        rows.finish()?;
        tx.execute(COUNT_POSTS, [])?;
        anyhow::Ok(stats)
    })?;
    tx.commit()?;
    conn.execute_batch("PRAGMA synchronous = FULL; PRAGMA wal_checkpoint(TRUNCATE); ANALYZE;")?;
    Ok(stats)
}

/// Generates `shape` from `seed` into `rows`: the same calls in the same
/// order for every backend, so every backend holds the same data.
pub fn fill(rows: &mut impl Rows, shape: &Shape, seed: u64) -> anyhow::Result<SeedStats> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut stats = SeedStats::default();
    // A fixed "now" keeps runs identical; data spans the 30 days before it.
    let now: i64 = 1_790_000_000;
    let span = 30 * 86_400;

    for id in 1..=shape.users {
        rows.user(id as i64, format!("user{id}"), now - span - 86_400)?;
    }
    stats.users = shape.users;
    for id in 1..=shape.communities {
        rows.community(CommunityRow {
            id: id as i64,
            name: format!("community{id}"),
            title: format!("Community number {id}"),
            description: text(&mut rng, (40, 120)),
            created_at: now - span - 86_400,
        })?;
    }
    stats.communities = shape.communities;

    let bar = ProgressBar::new(shape.target_posts as u64).with_style(
        ProgressStyle::with_template("{msg} [{bar:40}] {pos}/{len} posts ({eta})")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    bar.set_message("seeding");

    let mut post_id: i64 = 0;
    let mut topic_id: i64 = 0;
    while stats.posts < shape.target_posts {
        let n_posts = match shape.posts_per_topic {
            PostsPerTopic::Uniform(lo, hi) => rng.random_range(lo..=hi),
            PostsPerTopic::Zipf { topics, max, min, s } => {
                if topic_id as usize >= topics {
                    break;
                }
                ((max as f64 / ((topic_id + 1) as f64).powf(s)) as usize).max(min)
            }
        }
        .min(shape.target_posts - stats.posts)
        .max(1);
        topic_id += 1;
        let community = zipf_pick(&mut rng, shape.communities);
        let created = now - span + rng.random_range(0..span);
        let topic_votes = match shape.votes {
            Some((max, _)) => cast_votes(&mut rng, rows, 0, topic_id, (max / topic_id as usize).max(1), shape.users)?,
            None => (0, 0),
        };
        stats.votes += topic_votes.1;
        // Fields are drawn in this order (author, title, body) on purpose:
        // the same seed must keep giving the same data.
        let author_id = rng.random_range(1..=shape.users) as i64;
        let title = text(&mut rng, (20, 120));
        let body = text(&mut rng, shape.body_chars);
        rows.topic(TopicRow {
            id: topic_id,
            community_id: community as i64,
            author_id,
            title,
            body,
            created_at: created,
            score: topic_votes.0,
            hot: hot_rank(topic_votes.0, created),
        })?;
        let first_post = post_id + 1;
        for i in 0..n_posts {
            post_id += 1;
            let parent = (i > 0 && rng.random_bool(shape.reply_chance)).then(|| rng.random_range(first_post..post_id));
            let votes = match shape.votes {
                Some((_, per_post)) => cast_votes(&mut rng, rows, 1, post_id, per_post, shape.users)?,
                None => (0, 0),
            };
            stats.votes += votes.1;
            let at = (created + (i as i64 + 1) * 60).min(now);
            let author_id = rng.random_range(1..=shape.users) as i64;
            let body = text(&mut rng, shape.body_chars);
            rows.post(PostRow {
                id: post_id,
                topic_id,
                parent_id: parent,
                author_id,
                body,
                created_at: at,
                score: votes.0,
            })?;
        }
        stats.posts += n_posts;
        stats.topics += 1;
        bar.set_position(stats.posts as u64);
    }
    bar.finish_and_clear();
    Ok(stats)
}

/// Picks 1..=n, favouring low numbers (a few big communities).
fn zipf_pick(rng: &mut ChaCha8Rng, n: usize) -> usize {
    let x: f64 = rng.random();
    ((n as f64).powf(x) as usize).clamp(1, n)
}

/// Up to `max` votes by distinct users on one item; returns (score, count).
fn cast_votes(
    rng: &mut ChaCha8Rng,
    rows: &mut impl Rows,
    kind: i64,
    target: i64,
    max: usize,
    users: usize,
) -> anyhow::Result<(i64, usize)> {
    let count = rng.random_range(0..=max.min(users));
    let start = rng.random_range(0..users);
    let mut score = 0;
    for k in 0..count {
        let user = (start + k) % users + 1;
        let value: i64 = if rng.random_bool(0.8) { 1 } else { -1 };
        rows.vote(user as i64, kind, target, value)?;
        score += value;
    }
    Ok((score, count))
}

pub struct CommunityRow {
    pub id: i64,
    pub name: String,
    pub title: String,
    pub description: String,
    pub created_at: i64,
}

pub struct TopicRow {
    pub id: i64,
    pub community_id: i64,
    pub author_id: i64,
    pub title: String,
    pub body: String,
    pub created_at: i64,
    pub score: i64,
    pub hot: f64,
}

pub struct PostRow {
    pub id: i64,
    pub topic_id: i64,
    pub parent_id: Option<i64>,
    pub author_id: i64,
    pub body: String,
    pub created_at: i64,
    pub score: i64,
}

/// Where `fill` puts the rows it generates: a SQLite transaction here, the
/// PostgreSQL COPY buffers of `store::postgres::seed`. Every community is
/// created by user 1; a topic comes before its posts and their votes.
pub trait Rows {
    fn user(&mut self, id: i64, name: String, created_at: i64) -> anyhow::Result<()>;
    fn community(&mut self, row: CommunityRow) -> anyhow::Result<()>;
    fn topic(&mut self, row: TopicRow) -> anyhow::Result<()>;
    fn post(&mut self, row: PostRow) -> anyhow::Result<()>;
    /// `kind` 0 = topic, 1 = post.
    fn vote(&mut self, user_id: i64, kind: i64, target_id: i64, value: i64) -> anyhow::Result<()>;
}

/// Topics and posts per chunk handed to a renderer thread.
const CHUNK_BODIES: usize = 2048;

/// A row `fill` generated, kept in order until its chunk is rendered.
enum Row {
    User(i64, String, i64),
    Community(CommunityRow),
    Topic(TopicRow),
    Post(PostRow),
    Vote([i64; 4]),
}

/// Consecutive rows and, once rendered, the HTML of each topic and post
/// among them, in order.
struct Chunk {
    rows: Vec<Row>,
    html: Vec<String>,
    /// The renderer panicked: the chunk cannot be stored.
    failed: bool,
}

impl Chunk {
    fn render(&mut self) {
        let rows = &self.rows;
        let html = std::panic::catch_unwind(|| {
            rows.iter()
                .filter_map(|row| match row {
                    Row::Topic(t) => Some(crate::markdown::render(&t.body)),
                    Row::Post(p) => Some(crate::markdown::render(&p.body)),
                    _ => None,
                })
                .collect()
        });
        match html {
            Ok(html) => self.html = html,
            Err(_) => self.failed = true,
        }
    }
}

/// Prepared INSERTs inside the seeding transaction, fed in order with the
/// chunks the renderer threads hand back.
struct SqliteRows<'c> {
    conn: &'c Connection,
    user: rusqlite::Statement<'c>,
    community: rusqlite::Statement<'c>,
    topic: rusqlite::Statement<'c>,
    post: rusqlite::Statement<'c>,
    vote: rusqlite::Statement<'c>,
    /// Rows not yet handed to a renderer, and how many bodies among them.
    buffer: Vec<Row>,
    bodies: usize,
    /// Each chunk goes out with a channel of its own for its way back.
    to_render: Option<Sender<(Chunk, Sender<Chunk>)>>,
    /// Where the chunks handed out come back, oldest first: stored in
    /// this order, whichever renderer finishes first.
    in_flight: VecDeque<Receiver<Chunk>>,
}

/// Chunks handed out and not yet stored before this thread waits.
const IN_FLIGHT: usize = 8;

impl<'c> SqliteRows<'c> {
    fn new(conn: &'c Connection, to_render: Sender<(Chunk, Sender<Chunk>)>) -> anyhow::Result<SqliteRows<'c>> {
        Ok(SqliteRows {
            conn,
            user: conn.prepare("INSERT INTO users (id, name, created_at) VALUES (?1, ?2, ?3)")?,
            community: conn.prepare(
                "INSERT INTO communities (id, name, title, description, created_by, created_at) \
                 VALUES (?1, ?2, ?3, ?4, 1, ?5)",
            )?,
            topic: conn.prepare(
                "INSERT INTO topics (id, community_id, author_id, title, body, body_html, created_at, score, hot) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
            )?,
            post: conn.prepare(
                "INSERT INTO posts (id, topic_id, parent_id, author_id, body, body_html, created_at, score) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
            )?,
            vote: conn.prepare("INSERT INTO votes (user_id, kind, target_id, value) VALUES (?1, ?2, ?3, ?4)")?,
            buffer: Vec::new(),
            bodies: 0,
            to_render: Some(to_render),
            in_flight: VecDeque::new(),
        })
    }

    fn push(&mut self, row: Row) -> anyhow::Result<()> {
        if matches!(row, Row::Topic(_) | Row::Post(_)) {
            self.bodies += 1;
        }
        self.buffer.push(row);
        if self.bodies >= CHUNK_BODIES { self.send() } else { Ok(()) }
    }

    /// Hands the buffered rows to a renderer, then stores the oldest
    /// chunks, waiting for them, while too many are out.
    fn send(&mut self) -> anyhow::Result<()> {
        let rows = std::mem::take(&mut self.buffer);
        self.bodies = 0;
        let chunk = Chunk { rows, html: Vec::new(), failed: false };
        let (reply, back) = crossbeam_channel::bounded(1);
        let to_render = self.to_render.as_ref().context("seeding already finished")?;
        to_render.send((chunk, reply)).map_err(|_| anyhow::anyhow!("the renderer threads stopped"))?;
        self.in_flight.push_back(back);
        while self.in_flight.len() > IN_FLIGHT {
            self.store_oldest()?;
        }
        Ok(())
    }

    /// Waits for the oldest chunk handed out and stores it.
    fn store_oldest(&mut self) -> anyhow::Result<()> {
        let Some(back) = self.in_flight.pop_front() else { return Ok(()) };
        let chunk = back.recv().map_err(|_| anyhow::anyhow!("the renderer threads stopped"))?;
        self.store(chunk)
    }

    /// Sends the last rows and stores everything.
    fn finish(&mut self) -> anyhow::Result<()> {
        if !self.buffer.is_empty() {
            self.send()?;
        }
        self.to_render = None;
        while !self.in_flight.is_empty() {
            self.store_oldest()?;
        }
        search_queue::apply(self.conn)?;
        Ok(())
    }

    fn store(&mut self, chunk: Chunk) -> anyhow::Result<()> {
        anyhow::ensure!(!chunk.failed, "rendering a body panicked");
        let mut html = chunk.html.into_iter();
        let mut next_html = || html.next().context("a chunk came back without its HTML");
        for row in chunk.rows {
            match row {
                Row::User(id, name, created_at) => {
                    self.user.execute(params![id, name, created_at])?;
                }
                Row::Community(r) => {
                    self.community.execute(params![r.id, r.name, r.title, r.description, r.created_at])?;
                }
                Row::Topic(r) => {
                    self.topic.execute(params![
                        r.id,
                        r.community_id,
                        r.author_id,
                        r.title,
                        r.body,
                        next_html()?,
                        r.created_at,
                        r.score,
                        r.hot
                    ])?;
                }
                Row::Post(r) => {
                    self.post.execute(params![
                        r.id,
                        r.topic_id,
                        r.parent_id,
                        r.author_id,
                        r.body,
                        next_html()?,
                        r.created_at,
                        r.score
                    ])?;
                    search_queue::post_added(self.conn, r.id, &r.body)?;
                }
                Row::Vote([user_id, kind, target_id, value]) => {
                    self.vote.execute(params![user_id, kind, target_id, value])?;
                }
            }
        }
        // The chunk's text goes into the search indexes in one piece.
        search_queue::apply(self.conn)?;
        search_queue::defer(self.conn)?;
        Ok(())
    }
}

impl Rows for SqliteRows<'_> {
    fn user(&mut self, id: i64, name: String, created_at: i64) -> anyhow::Result<()> {
        self.push(Row::User(id, name, created_at))
    }

    fn community(&mut self, r: CommunityRow) -> anyhow::Result<()> {
        self.push(Row::Community(r))
    }

    fn topic(&mut self, r: TopicRow) -> anyhow::Result<()> {
        self.push(Row::Topic(r))
    }

    fn post(&mut self, r: PostRow) -> anyhow::Result<()> {
        self.push(Row::Post(r))
    }

    fn vote(&mut self, user_id: i64, kind: i64, target_id: i64, value: i64) -> anyhow::Result<()> {
        self.push(Row::Vote([user_id, kind, target_id, value]))
    }
}
