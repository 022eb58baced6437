//! `pith bench write`: the storage engine's durable write rate. N writers
//! each add a reply and wait for its acknowledgement, which the store gives
//! only after the group commit holding it has been fsynced, then add the
//! next. Runs in-process against a real SQLite file, so the figure is the
//! engine's own (HTTP adds its cost on top: `pith bench http --write-ratio 1`
//! measures that). At the end the posts are counted in the file: every
//! acknowledged insert must be there.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::Args;
use serde::Serialize;

use super::report::{KindSummary, fmt_ms};
use super::results::Results;
use crate::model::{Body, CommunityName, Text, Title, Username};
use crate::settings::parse_duration;
use crate::store::sqlite::{SqliteOptions, SqliteStore};
use crate::store::{NewCommunity, NewPost, NewTopic, Store};

#[derive(Debug, Clone, Args)]
pub struct WriteArgs {
    /// Concurrent writers, each waiting for its acknowledgement before the next insert.
    #[arg(long, short = 'w', default_value_t = 400)]
    pub writers: usize,

    /// How long to measure.
    #[arg(long, short = 'd', default_value = "10s", value_parser = parse_duration)]
    pub duration: Duration,

    /// Directory for the database; default: a fresh temporary directory, removed afterwards.
    /// Put it on the disk you want to measure (a tmpfs measures no fsync at all).
    #[arg(long)]
    pub data_dir: Option<PathBuf>,

    /// Characters per reply body.
    #[arg(long, default_value_t = 150)]
    pub body_chars: usize,

    /// Most writes in one group commit (as `pith serve --max-batch`).
    #[arg(long, default_value_t = 512)]
    pub max_batch: usize,

    /// Print the summary as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Serialize)]
pub struct WriteSummary {
    pub writers: usize,
    pub seconds: f64,
    /// Inserts acknowledged (durable) inside the window.
    pub acknowledged: u64,
    pub inserts_per_s: f64,
    /// Time from asking to insert to the acknowledgement, commit included.
    pub commit_latency: KindSummary,
    pub failed: u64,
    /// Posts found in the database file afterwards, reopened from scratch.
    pub found_after: u64,
    pub database: String,
}

pub fn main(args: WriteArgs) -> anyhow::Result<()> {
    tokio::runtime::Builder::new_multi_thread().enable_all().build()?.block_on(run(args))
}

async fn run(args: WriteArgs) -> anyhow::Result<()> {
    anyhow::ensure!(args.writers > 0, "--writers must be at least 1");
    anyhow::ensure!((1..=40_000).contains(&args.body_chars), "--body-chars must be 1 to 40000");
    let (dir, temporary) = match &args.data_dir {
        Some(d) => (d.clone(), false),
        None => (std::env::temp_dir().join(format!("pith-bench-write-{}", std::process::id())), true),
    };
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let path = dir.join("pith.db");
    anyhow::ensure!(!path.exists(), "{} exists: bench write wants a fresh database", path.display());
    let result = measure(&args, &path).await;
    if temporary {
        let _ = std::fs::remove_dir_all(&dir);
    }
    let summary = result?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&summary)?);
    } else {
        let l = &summary.commit_latency.latency_ms;
        println!(
            "{} writers, {:.1} s: {} durable inserts, {:.0} inserts/s, {} failed\n\
             commit latency p50 {} p90 {} p99 {} p99.9 {} max {}\n\
             found in the file afterwards: {} (database {})",
            summary.writers,
            summary.seconds,
            summary.acknowledged,
            summary.inserts_per_s,
            summary.failed,
            fmt_ms(l.p50),
            fmt_ms(l.p90),
            fmt_ms(l.p99),
            fmt_ms(l.p999),
            fmt_ms(l.max),
            summary.found_after,
            summary.database,
        );
    }
    anyhow::ensure!(summary.found_after >= summary.acknowledged, "acknowledged inserts are missing from the file");
    Ok(())
}

async fn measure(args: &WriteArgs, path: &std::path::Path) -> anyhow::Result<WriteSummary> {
    let opts = SqliteOptions { max_batch: args.max_batch, ..SqliteOptions::default() };
    let store = Arc::new(SqliteStore::open(path, &opts)?);
    let name = |s: &str| Username::parse(s).map_err(|e| anyhow::anyhow!("{e}"));
    let user = store.create_user(name("bench")?, None, true).await?;
    let community = CommunityName::parse("bench").map_err(|e| anyhow::anyhow!("{e}"))?;
    let title = |s: &str| Title::parse(s).map_err(|e| anyhow::anyhow!("{e}"));
    store
        .create_community(
            &user,
            NewCommunity { name: community.clone(), title: title("Bench")?, description: "".into() },
        )
        .await?;
    // A topic per 50 writers, so inserts spread as replies do on a forum.
    let topics = args.writers.div_ceil(50);
    let mut topic_ids = Vec::with_capacity(topics);
    for i in 0..topics {
        let new = NewTopic {
            community: community.clone(),
            title: title(&format!("t{i}"))?,
            body: None,
            url: None,
            remote_id: None,
        };
        topic_ids.push(store.create_topic(&user, new).await?.id);
    }
    let body = Body::parse(&"x".repeat(args.body_chars)).map_err(|e| anyhow::anyhow!("{e}"))?;

    let stop = Arc::new(AtomicBool::new(false));
    let started = Instant::now();
    let mut tasks = Vec::with_capacity(args.writers);
    for w in 0..args.writers {
        let (store, user, body, stop) = (store.clone(), user.clone(), body.clone(), stop.clone());
        let topic_id = topic_ids[w % topics];
        tasks.push(tokio::spawn(async move {
            let mut results = Results::new();
            while !stop.load(Ordering::Relaxed) {
                let t = Instant::now();
                // Rendered per write, as the application core renders a reply.
                let new = NewPost { topic_id, parent_id: None, body: Text::render(body.clone()), remote_id: None };
                match store.create_post(&user, new).await {
                    Ok(_) => results.record(t.elapsed(), 201, 0),
                    Err(e) => results.record_error(&e.to_string()),
                }
            }
            results
        }));
    }
    tokio::time::sleep(args.duration).await;
    stop.store(true, Ordering::Relaxed);
    let mut all = Results::new();
    for t in tasks {
        all.merge(&t.await?);
    }
    // Writes in flight at the stop count too: they were acknowledged.
    let seconds = started.elapsed().as_secs_f64();
    let store = Arc::into_inner(store).context("the writers still hold the store")?;
    store.shutdown().await;
    drop(store);

    let conn = rusqlite::Connection::open(path)?;
    let found_after: i64 = conn.query_row("SELECT count(*) FROM posts", [], |r| r.get(0))?;
    let found_after = found_after.max(0) as u64;
    let latency = KindSummary::new(&all, seconds);
    Ok(WriteSummary {
        writers: args.writers,
        seconds,
        acknowledged: all.responses(),
        inserts_per_s: all.responses() as f64 / seconds,
        failed: all.error_count(),
        commit_latency: latency,
        found_after,
        database: path.display().to_string(),
    })
}
