//! `pith bench deliver`: one local topic delivered to every remote
//! follower of its community (docs/FEDERATION.md, "Speed"). Starts
//! simulated servers on loopback (`fedsim`: `--hosts`, each with
//! `--followers` users and its own key), a child `pith serve --federation
//! on` per binary asked for (`--pith`, several to compare builds in one
//! run), has every simulated user follow the community with a signed
//! `Follow` (each answered by an `Accept` through the child's delivery
//! queue), then a local user posts a topic through the API and the clock
//! runs until every inbox has the Group's `Announce`, each signature
//! checked. Prints the time, the child's resident memory before the post
//! and at its peak while delivering. Without `--shared-inbox` each
//! follower has only its own inbox (one delivery per follower); with it,
//! one delivery per host.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use bytes::Bytes;
use clap::Args;
use serde_json::json;

use super::fedsim::{self, Child, PeakRss, Sim, mb};

#[derive(Debug, Clone, Args)]
pub struct DeliverArgs {
    /// Simulated remote servers.
    #[arg(long, default_value_t = 100)]
    pub hosts: usize,

    /// Followers on each server.
    #[arg(long, default_value_t = 10)]
    pub followers: usize,

    /// Followers advertise their server's shared inbox: one delivery per server.
    #[arg(long, default_value_t = false)]
    pub shared_inbox: bool,

    /// How long each simulated inbox takes to answer (as a server across
    /// the Internet would); 0 on loopback.
    #[arg(long, default_value = "0s", value_parser = crate::settings::parse_duration)]
    pub latency: Duration,

    /// The `pith` binaries to serve (each in turn, on a fresh data
    /// directory); default this one. Repeat to compare builds in one run.
    #[arg(long = "pith")]
    pub pith: Vec<PathBuf>,

    /// Runs of each binary, alternating.
    #[arg(long, default_value_t = 1)]
    pub rounds: usize,

    /// Gives up waiting for the deliveries after this long.
    #[arg(long, default_value = "120s", value_parser = crate::settings::parse_duration)]
    pub timeout: Duration,

    /// Prints one JSON summary per run instead of text.
    #[arg(long)]
    pub json: bool,
}

pub fn main(args: DeliverArgs) -> anyhow::Result<()> {
    tokio::runtime::Builder::new_multi_thread().enable_all().build()?.block_on(run(args))
}

async fn run(args: DeliverArgs) -> anyhow::Result<()> {
    anyhow::ensure!(args.hosts > 0 && args.followers > 0, "--hosts and --followers must be at least 1");
    let sim = Sim::start(args.hosts, args.followers).await?;
    let binaries = if args.pith.is_empty() { vec![std::env::current_exe()?] } else { args.pith.clone() };
    for _ in 0..args.rounds.max(1) {
        for exe in &binaries {
            let r = once(&args, &sim, exe).await?;
            if args.json {
                println!("{}", r.json(exe));
            } else {
                r.print(exe, &args);
            }
        }
    }
    Ok(())
}

/// What one run measured.
struct Outcome {
    inboxes: usize,
    follow_seconds: f64,
    seconds: f64,
    delivered: usize,
    most_to_one: u32,
    bad_signatures: usize,
    rss_start: u64,
    rss_before: u64,
    rss_peak: u64,
}

impl Outcome {
    fn print(&self, exe: &std::path::Path, args: &DeliverArgs) {
        println!(
            "{}: {} followers on {} hosts ({}, inboxes answer in {:?}): {} follows accepted in {:.2} s",
            exe.display(),
            args.hosts * args.followers,
            args.hosts,
            if args.shared_inbox { "shared inboxes" } else { "own inboxes only" },
            args.latency,
            args.hosts * args.followers,
            self.follow_seconds
        );
        println!(
            "  one topic to {} inboxes: {} delivered in {:.2} s ({:.0}/s), at most {} to one inbox, {} bad signatures",
            self.inboxes,
            self.delivered,
            self.seconds,
            self.delivered as f64 / self.seconds.max(1e-9),
            self.most_to_one,
            self.bad_signatures
        );
        println!(
            "  server RSS: {:.1} MB at start, {:.1} MB before the post, {:.1} MB peak: +{:.1} MB while delivering",
            mb(self.rss_start),
            mb(self.rss_before),
            mb(self.rss_peak),
            mb(self.rss_peak.saturating_sub(self.rss_before))
        );
    }

    fn json(&self, exe: &std::path::Path) -> serde_json::Value {
        json!({
            "pith": exe.display().to_string(), "inboxes": self.inboxes, "delivered": self.delivered,
            "seconds": self.seconds, "follow_seconds": self.follow_seconds, "most_to_one_inbox": self.most_to_one,
            "bad_signatures": self.bad_signatures, "rss_start_mb": mb(self.rss_start),
            "rss_before_mb": mb(self.rss_before), "rss_peak_mb": mb(self.rss_peak),
            "rss_growth_mb": mb(self.rss_peak.saturating_sub(self.rss_before)),
        })
    }
}

async fn once(args: &DeliverArgs, sim: &Sim, exe: &std::path::Path) -> anyhow::Result<Outcome> {
    let child = Child::start(exe, &["--rate-limits".into(), "false".into()]).await?;
    let rss_start = fedsim::rss(child.pid());
    let client = fedsim::client();
    let (status, body) =
        child.api(&client, "POST", "/api/v1/communities", Some(json!({"name": "bench", "title": "Bench"}))).await?;
    anyhow::ensure!(status == 201, "creating the community: {status} {body}");
    let group = format!("{}/ap/c/bench", child.base);
    let (status, doc) = get_json(&client, &group).await?;
    anyhow::ensure!(status == 200, "the Group document: {status}");
    let pem = doc["publicKey"]["publicKeyPem"].as_str().unwrap_or("").to_owned();
    sim.tally.reset(Some(&pem), args.shared_inbox)?;
    sim.tally.latency_ms.store(args.latency.as_millis() as u64, Ordering::Relaxed);

    // Every simulated user follows, 32 at once.
    let follows = args.hosts * args.followers;
    let started = Instant::now();
    let child = Arc::new(child);
    let next = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let mut workers = Vec::new();
    for _ in 0..32 {
        let (child, next, hosts, client, group) =
            (child.clone(), next.clone(), sim.hosts.clone(), client.clone(), group.clone());
        let users = args.followers;
        workers.push(tokio::spawn(async move {
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= follows {
                    return anyhow::Ok(());
                }
                let host = &hosts[i / users];
                let actor = host.actor(i % users);
                let body = json!({"@context": "https://www.w3.org/ns/activitystreams",
                    "id": format!("{actor}/follows/1"), "type": "Follow", "actor": actor, "object": group});
                let body = Bytes::from(body.to_string());
                let path = "/ap/c/bench/inbox";
                let signed = host.sign(i % users, &child.authority, path, &body)?;
                let status = child.post_signed(&client, path, body, &signed).await?;
                anyhow::ensure!(status == 202, "follow {i}: answered {status}");
            }
        }));
    }
    for w in workers {
        w.await??;
    }
    wait(args.timeout, || sim.tally.accepted.load(Ordering::Relaxed) >= follows).await.map_err(|_| {
        anyhow::anyhow!("only {} of {follows} follows were accepted", sim.tally.accepted.load(Ordering::Relaxed))
    })?;
    let follow_seconds = started.elapsed().as_secs_f64();
    // Let the queue's last rows be deleted and the server settle.
    tokio::time::sleep(Duration::from_millis(500)).await;

    let inboxes = if args.shared_inbox { args.hosts } else { follows };
    let rss_before = fedsim::rss(child.pid());
    let peak = PeakRss::watch(child.pid());
    let started = Instant::now();
    let (status, body) = child
        .api(
            &client,
            "POST",
            "/api/v1/communities/bench/topics",
            Some(json!({"title": "To everyone", "body": "Hello, followers."})),
        )
        .await?;
    anyhow::ensure!(status == 201, "posting: {status} {body}");
    let done = wait(args.timeout, || sim.tally.announced_inboxes.load(Ordering::Relaxed) >= inboxes).await;
    let seconds = sim.tally.last().map_or(args.timeout, |t| t.duration_since(started)).as_secs_f64();
    // A moment more: a second delivery to one inbox would show.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let rss_peak = peak.stop();
    let delivered = sim.tally.announced_inboxes.load(Ordering::Relaxed);
    if done.is_err() {
        eprintln!("only {delivered} of {inboxes} inboxes got the topic within {:?}", args.timeout);
    }
    Ok(Outcome {
        inboxes,
        follow_seconds,
        seconds,
        delivered,
        most_to_one: sim.tally.most_announces(),
        bad_signatures: sim.tally.bad_signatures.load(Ordering::Relaxed),
        rss_start,
        rss_before,
        rss_peak,
    })
}

async fn get_json(client: &fedsim::Client, url: &str) -> anyhow::Result<(u16, serde_json::Value)> {
    use http_body_util::BodyExt;
    let req = hyper::Request::get(url)
        .header("accept", "application/activity+json")
        .body(http_body_util::Full::new(Bytes::new()))?;
    let res = client.request(req).await?;
    let status = res.status().as_u16();
    let bytes = res.into_body().collect().await?.to_bytes();
    Ok((status, serde_json::from_slice(&bytes).unwrap_or_default()))
}

/// Polls `done` every 5 ms until it holds or `timeout` passes.
async fn wait(timeout: Duration, done: impl Fn() -> bool) -> Result<(), ()> {
    let deadline = Instant::now() + timeout;
    while !done() {
        if Instant::now() > deadline {
            return Err(());
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    Ok(())
}
