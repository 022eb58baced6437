//! `pith bench inbound`: signed activities per second a server verifies
//! and applies, and what they cost its local reads (docs/FEDERATION.md,
//! "Speed"). A child `pith serve --federation on` gets a community with
//! `--topics` local topics; `--hosts` simulated servers (`fedsim`) with
//! `--users` each send `Like`s and `Dislike`s of those topics and
//! `Create`s of `Note`s replying to them (one in ten), each signed by its
//! server's key beforehand (the client's signing is not timed; the
//! server verifies every one), on the first `--voted` topics (default
//! all). Each remote user acts once before the clock starts, so its actor
//! is fetched and its user made. Then, in one run: the activities alone;
//! local reads of the topics (`GET /api/v1/topics/ID`) alone; a second set
//! of activities with the reads beside them (flat out, or at `--rate`);
//! and the reads alone again. Rate limits stay on, with the per-server
//! limit (`--limit-federation-instance`) and the per-account vote and post
//! limits raised past what the run sends, so each activity still passes
//! through them.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use clap::Args;
use http_body_util::{BodyExt, Full};
use serde_json::{Value, json};

use super::fedsim::{self, Child, Sim};

#[derive(Debug, Clone, Args)]
pub struct InboundArgs {
    /// Simulated remote servers.
    #[arg(long, default_value_t = 4)]
    pub hosts: usize,

    /// Remote users on each server.
    #[arg(long, default_value_t = 50)]
    pub users: usize,

    /// Activities in each timed set (two sets: alone, beside reads).
    #[arg(long, short = 'n', default_value_t = 10_000)]
    pub activities: usize,

    /// Activities sent at once.
    #[arg(long, short = 'c', default_value_t = 32)]
    pub concurrency: usize,

    /// Local topics, all read.
    #[arg(long, default_value_t = 20)]
    pub topics: usize,

    /// Of those, how many the activities vote on and reply to (default
    /// all): each vote makes its topic's cached answer stale, so reads of
    /// the topics voted on render again where others are served cached.
    #[arg(long)]
    pub voted: Option<usize>,

    /// Local reads at once.
    #[arg(long, default_value_t = 8)]
    pub readers: usize,

    /// Sends the set beside the reads at this many activities a second
    /// (each on its schedule, `--concurrency` at most in flight) instead
    /// of as fast as the server takes them: what the reads keep while the
    /// server takes a given rate, where the default measures the two
    /// fighting over the box. The set alone is always sent flat out.
    #[arg(long)]
    pub rate: Option<f64>,

    /// How long the reads run alone.
    #[arg(long, default_value = "3s", value_parser = crate::settings::parse_duration)]
    pub read_alone: Duration,

    /// The `pith` binary to serve; default this one.
    #[arg(long = "pith")]
    pub pith: Option<PathBuf>,

    /// Prints a JSON summary instead of text.
    #[arg(long)]
    pub json: bool,
}

pub fn main(args: InboundArgs) -> anyhow::Result<()> {
    tokio::runtime::Builder::new_multi_thread().enable_all().build()?.block_on(run(args))
}

const PUBLIC: &str = "https://www.w3.org/ns/activitystreams#Public";
const INBOX: &str = "/ap/c/bench/inbox";

/// A signed activity, ready to send.
type Signed = (Bytes, Vec<(&'static str, String)>);

async fn run(args: InboundArgs) -> anyhow::Result<()> {
    anyhow::ensure!(args.hosts > 0 && args.users > 0 && args.topics > 0, "hosts, users and topics must be at least 1");
    anyhow::ensure!(
        args.rate.is_none_or(|r| r.is_finite() && r > 0.0),
        "--rate must be a positive number of activities a second"
    );
    let sim = Sim::start(args.hosts, args.users).await?;
    let exe = match &args.pith {
        Some(p) => p.clone(),
        None => std::env::current_exe()?,
    };
    // The most a rate allows: a burst far past what a run sends.
    let lots = "1000000/1m".to_owned();
    // The per-address post limit too: the local topics are made through
    // the API from one address.
    let limits = [
        "--limit-federation-instance",
        &lots,
        "--limit-vote-user",
        &lots,
        "--limit-post-user",
        &lots,
        "--limit-post-ip",
        &lots,
    ]
    .map(str::to_owned);
    let child = Arc::new(Child::start(&exe, &limits).await?);
    let client = fedsim::client();
    let (status, body) =
        child.api(&client, "POST", "/api/v1/communities", Some(json!({"name": "bench", "title": "Bench"}))).await?;
    anyhow::ensure!(status == 201, "creating the community: {status} {body}");
    let mut topics = Vec::new();
    for t in 0..args.topics {
        let (status, body) = child
            .api(
                &client,
                "POST",
                "/api/v1/communities/bench/topics",
                Some(json!({"title": format!("Topic {t}"), "body": "Read me."})),
            )
            .await?;
        anyhow::ensure!(status == 201, "posting a topic: {status} {body}");
        topics.push(body["id"].as_i64().unwrap_or(0));
    }
    let voted = Arc::new(topics[..args.voted.unwrap_or(args.topics).clamp(1, args.topics)].to_vec());
    let topics = Arc::new(topics);
    sim.tally.reset(None, false)?;

    let total_users = args.hosts * args.users;
    let signing = Instant::now();
    let warm = sign_all(&sim, &child, &voted, 0, total_users, true).await?;
    let first = sign_all(&sim, &child, &voted, total_users, args.activities, false).await?;
    let second = sign_all(&sim, &child, &voted, total_users + args.activities, args.activities, false).await?;
    eprintln!(
        "{} activities signed in {:.1} s (not timed)",
        total_users + 2 * args.activities,
        signing.elapsed().as_secs_f64()
    );
    let warmed = send_all(&child, warm, args.concurrency, None).await?;
    anyhow::ensure!(
        warmed.accepted == total_users,
        "warm-up: {} of {total_users} taken; first refusal: {}",
        warmed.accepted,
        warmed.first_refusal
    );

    // The replies make the topics longer as the run goes, and a longer
    // topic is a slower read: the reads alone are taken just before the
    // set beside them and just after, and their mean is what the reads
    // beside are held against (taken before the first set, they read
    // topics without a reply).
    let alone = send_all(&child, first, args.concurrency, None).await?;
    let reads_before = reads(&child, &topics, args.readers, Some(args.read_alone), None).await?;
    let stop = Arc::new(AtomicBool::new(false));
    let beside_reads = {
        let (child, topics, stop) = (child.clone(), topics.clone(), stop.clone());
        let readers = args.readers;
        tokio::spawn(async move { reads(&child, &topics, readers, None, Some(stop)).await })
    };
    let beside = send_all(&child, second, args.concurrency, args.rate).await?;
    stop.store(true, Ordering::Relaxed);
    let reads_beside = beside_reads.await??;
    let reads_after = reads(&child, &topics, args.readers, Some(args.read_alone), None).await?;
    let reads_alone = (reads_before.per_second() + reads_after.per_second()) / 2.0;
    let read_failures = reads_before.failed + reads_beside.failed + reads_after.failed;

    let ratio = reads_beside.per_second() / reads_alone.max(1e-9);
    if args.json {
        println!(
            "{}",
            json!({
                "activities": args.activities, "hosts": args.hosts, "users": total_users,
                "topics": args.topics, "voted": voted.len(), "rate": args.rate,
                "alone_per_second": alone.per_second(), "beside_reads_per_second": beside.per_second(),
                "taken": alone.accepted + beside.accepted, "refused": alone.refused + beside.refused,
                "reads_alone_per_second": reads_alone, "reads_beside_per_second": reads_beside.per_second(),
                "reads_alone_before_per_second": reads_before.per_second(),
                "reads_alone_after_per_second": reads_after.per_second(),
                "reads_ratio": ratio, "read_failures": read_failures,
            })
        );
    } else {
        println!(
            "{} remote users on {} servers; {} activities a set, {} at once (9 votes to 1 reply) on {} of {} topics{}",
            total_users,
            args.hosts,
            args.activities,
            args.concurrency,
            voted.len(),
            args.topics,
            args.rate.map(|r| format!("; beside the reads at {r:.0}/s")).unwrap_or_default()
        );
        for (name, s) in [("alone", &alone), ("beside reads", &beside)] {
            println!(
                "  activities {name}: {:.0}/s ({} taken, {} refused{}) in {:.2} s",
                s.per_second(),
                s.accepted,
                s.refused,
                if s.refused > 0 { format!(", first: {}", s.first_refusal) } else { String::new() },
                s.seconds
            );
        }
        println!(
            "  local reads ({} at once): {:.0}/s alone ({:.0} before the set beside them, {:.0} after), \
             {:.0}/s beside the activities: {:.2} x ({} failed)",
            args.readers,
            reads_alone,
            reads_before.per_second(),
            reads_after.per_second(),
            reads_beside.per_second(),
            ratio,
            read_failures
        );
    }
    Ok(())
}

/// Signs `count` activities, numbered from `from`, on every core: a vote
/// (or, one in ten, a reply) by user `n % users` of a topic. `warm`:
/// one `Like` per user.
async fn sign_all(
    sim: &Sim,
    child: &Arc<Child>,
    topics: &Arc<Vec<i64>>,
    from: usize,
    count: usize,
    warm: bool,
) -> anyhow::Result<Vec<Signed>> {
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get());
    let per = count.div_ceil(threads).max(1);
    let mut jobs = Vec::new();
    let mut start = from;
    while start < from + count {
        let end = (start + per).min(from + count);
        let (hosts, child, topics, users) = (sim.hosts.clone(), child.clone(), topics.clone(), sim.users);
        jobs.push(tokio::task::spawn_blocking(move || {
            (start..end)
                .map(|i| {
                    let user = i % (hosts.len() * users);
                    let host = &hosts[user / users];
                    let body = activity(&host.actor(user % users), &host.base, &child.base, &topics, i, warm);
                    let body = Bytes::from(body.to_string());
                    let signed = host.sign(user % users, &child.authority, INBOX, &body)?;
                    anyhow::Ok((body, signed))
                })
                .collect::<anyhow::Result<Vec<_>>>()
        }));
        start = end;
    }
    let mut out = Vec::with_capacity(count);
    for j in jobs {
        out.extend(j.await??);
    }
    Ok(out)
}

fn activity(actor: &str, host: &str, child: &str, topics: &[i64], i: usize, warm: bool) -> Value {
    let group = format!("{child}/ap/c/bench");
    let topic = format!("{child}/ap/t/{}", topics[(i * 7) % topics.len()]);
    if !warm && i % 10 == 9 {
        let note = json!({"id": format!("{host}/notes/{i}"), "type": "Note", "attributedTo": actor,
            "inReplyTo": topic, "content": format!("<p>Reply {i}, from afar.</p>"), "mediaType": "text/html",
            "to": [PUBLIC], "cc": [group], "audience": group});
        return json!({"@context": "https://www.w3.org/ns/activitystreams", "id": format!("{host}/creates/{i}"),
            "type": "Create", "actor": actor, "to": [PUBLIC], "cc": [group], "audience": group, "object": note});
    }
    let kind = if warm || (i / 10).is_multiple_of(2) { "Like" } else { "Dislike" };
    json!({"@context": "https://www.w3.org/ns/activitystreams", "id": format!("{host}/votes/{i}"), "type": kind,
        "actor": actor, "object": topic, "audience": group})
}

/// How a set of activities went.
struct Sent {
    accepted: usize,
    refused: usize,
    first_refusal: String,
    seconds: f64,
}

impl Sent {
    fn per_second(&self) -> f64 {
        self.accepted as f64 / self.seconds.max(1e-9)
    }
}

/// Sends `set`, `concurrency` at once, flat out or each at its time at
/// `rate` a second (one late goes at once: the rate reached says so).
async fn send_all(child: &Arc<Child>, set: Vec<Signed>, concurrency: usize, rate: Option<f64>) -> anyhow::Result<Sent> {
    let set = Arc::new(set);
    let next = Arc::new(AtomicUsize::new(0));
    let started = tokio::time::Instant::now();
    let mut workers = Vec::new();
    for _ in 0..concurrency.max(1) {
        let (child, set, next, client) = (child.clone(), set.clone(), next.clone(), fedsim::client());
        workers.push(tokio::spawn(async move {
            let (mut accepted, mut refused, mut first) = (0, 0, String::new());
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some((body, signed)) = set.get(i) else { break };
                if let Some(rate) = rate {
                    tokio::time::sleep_until(started + Duration::from_secs_f64(i as f64 / rate)).await;
                }
                let status = child.post_signed(&client, INBOX, body.clone(), signed).await?;
                if status == 202 {
                    accepted += 1;
                } else {
                    refused += 1;
                    if first.is_empty() {
                        first = format!("answered {status}");
                    }
                }
            }
            anyhow::Ok((accepted, refused, first))
        }));
    }
    let mut sent = Sent { accepted: 0, refused: 0, first_refusal: String::new(), seconds: 0.0 };
    for w in workers {
        let (a, r, f) = w.await??;
        sent.accepted += a;
        sent.refused += r;
        if sent.first_refusal.is_empty() {
            sent.first_refusal = f;
        }
    }
    sent.seconds = started.elapsed().as_secs_f64();
    Ok(sent)
}

/// Local reads counted over a window.
struct Reads {
    ok: usize,
    failed: usize,
    seconds: f64,
}

impl Reads {
    fn per_second(&self) -> f64 {
        self.ok as f64 / self.seconds.max(1e-9)
    }
}

/// `readers` loops of `GET /api/v1/topics/ID` over the topics, for `for_`
/// or until `stop`.
async fn reads(
    child: &Arc<Child>,
    topics: &Arc<Vec<i64>>,
    readers: usize,
    for_: Option<Duration>,
    stop: Option<Arc<AtomicBool>>,
) -> anyhow::Result<Reads> {
    let started = Instant::now();
    let stop = stop.unwrap_or_default();
    let mut workers = Vec::new();
    for r in 0..readers.max(1) {
        let (child, topics, stop, client) = (child.clone(), topics.clone(), stop.clone(), fedsim::client());
        workers.push(tokio::spawn(async move {
            let (mut ok, mut failed, mut n) = (0, 0, r);
            while !stop.load(Ordering::Relaxed) && for_.is_none_or(|d| started.elapsed() < d) {
                let id = topics[n % topics.len()];
                n += 1;
                let req =
                    hyper::Request::get(format!("{}/api/v1/topics/{id}", child.base)).body(Full::new(Bytes::new()))?;
                match client.request(req).await {
                    Ok(res) if res.status() == 200 => {
                        let _ = res.into_body().collect().await?;
                        ok += 1;
                    }
                    _ => failed += 1,
                }
            }
            anyhow::Ok((ok, failed))
        }));
    }
    let mut out = Reads { ok: 0, failed: 0, seconds: 0.0 };
    for w in workers {
        let (ok, failed) = w.await??;
        out.ok += ok;
        out.failed += failed;
    }
    out.seconds = started.elapsed().as_secs_f64();
    Ok(out)
}
