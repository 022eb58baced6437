//! Faults, with the real `pith` binary as a child process:
//!
//! - SIGKILL under a mixed load (reads, replies, new topics, votes, edits)
//!   loses no acknowledged write;
//! - a full disk (the data dir on a small tmpfs) fails writes with a 503
//!   `unavailable` JSON error while reads keep working, corrupts nothing,
//!   and writes succeed again, without a restart, once space returns;
//! - a corrupted, truncated, read-only or uncreatable database is refused
//!   at start by `pith serve` and `pith user add` with a non-zero exit and
//!   one readable line naming the file and the problem.
//!
//! Mounting needs root (the dev container runs tests as root): a test that
//! cannot mount fails and says why, it never skips. Mounts are undone and
//! children killed on drop, so a failing test leaves nothing behind.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::ffi::OsStr;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rand::{Rng, SeedableRng};
use reqwest::Method;
use serde_json::{Value, json};

use crate::support::child::{Server, run_pith, user_add};
use crate::support::helpers::{assert_error, client};

/// How long a child gets to start, stop or fail before the test gives up.
const PATIENCE: Duration = Duration::from_secs(10);

/// Runs a system command that must succeed; the panic says why it did not.
fn system(program: &str, args: &[&OsStr], why: &str) {
    let out = std::process::Command::new(program)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("{why}: cannot run {program}: {e}"));
    assert!(
        out.status.success(),
        "{why}: `{program} {}` failed ({}): {}",
        args.iter().map(|a| a.to_string_lossy()).collect::<Vec<_>>().join(" "),
        out.status,
        String::from_utf8_lossy(&out.stderr).trim()
    );
}

/// A tmpfs mounted at a directory, unmounted on drop (even when the test
/// panics). Drop it after every process using it has exited.
struct Tmpfs {
    dir: PathBuf,
}

impl Tmpfs {
    /// Mounts a tmpfs of `size` (`mount -o size=`, e.g. `2m`) at `dir`.
    fn mount(dir: &Path, size: &str) -> Tmpfs {
        std::fs::create_dir_all(dir).expect("mount point");
        let opts = format!("size={size}");
        system(
            "mount",
            &["-t".as_ref(), "tmpfs".as_ref(), "-o".as_ref(), opts.as_ref(), "tmpfs".as_ref(), dir.as_ref()],
            "these tests need root and a kernel that lets them mount a tmpfs",
        );
        Tmpfs { dir: dir.to_owned() }
    }

    /// `mount -o remount,OPTS`: `ro`, or `size=8m` to give space back.
    fn remount(&self, opts: &str) {
        let opts = format!("remount,{opts}");
        system("mount", &["-o".as_ref(), opts.as_ref(), self.dir.as_ref()], "remount the tmpfs");
    }

    /// Bytes still free.
    fn available(&self) -> u64 {
        use std::os::unix::ffi::OsStrExt;
        let c = std::ffi::CString::new(self.dir.as_os_str().as_bytes()).expect("path");
        // SAFETY: `c` is NUL-terminated; `st` is plain data filled by statvfs.
        let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
        let rc = unsafe { libc::statvfs(c.as_ptr(), &mut st) };
        assert_eq!(rc, 0, "statvfs {}", self.dir.display());
        st.f_bavail as u64 * st.f_frsize as u64
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        for _ in 0..50 {
            let ok = std::process::Command::new("umount").arg(&self.dir).status().map(|s| s.success());
            if let Ok(true) = ok {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        // Still busy: detach it so it at least disappears from the tree.
        let lazy = std::process::Command::new("umount").arg("-l").arg(&self.dir).status();
        eprintln!("tmpfs at {} was busy; lazy unmount: {lazy:?}", self.dir.display());
    }
}

/// `chattr +i` on a file, undone on drop (an immutable file cannot even be
/// deleted with its temporary directory).
struct Immutable {
    file: PathBuf,
}

impl Immutable {
    fn set(file: &Path) -> Immutable {
        system("chattr", &["+i".as_ref(), file.as_ref()], "make the database immutable (needs root and chattr)");
        Immutable { file: file.to_owned() }
    }
}

impl Drop for Immutable {
    fn drop(&mut self) {
        let _ = std::process::Command::new("chattr").arg("-i").arg(&self.file).status();
    }
}

/// `PRAGMA integrity_check` on a database, through a read-only connection.
fn integrity_check(db: &Path) -> String {
    let conn = rusqlite::Connection::open_with_flags(db, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
        .unwrap_or_else(|e| panic!("open {}: {e}", db.display()));
    let rows: Vec<String> = conn
        .prepare("PRAGMA integrity_check")
        .and_then(|mut s| s.query_map([], |r| r.get(0))?.collect())
        .unwrap_or_else(|e| panic!("integrity_check {}: {e}", db.display()));
    rows.join("\n")
}

/// A status and JSON body; `None` from `try_call` when the server is gone.
#[derive(Debug)]
struct Answer {
    status: u16,
    retry_after: Option<String>,
    body: Value,
}

async fn try_call(
    http: &reqwest::Client,
    method: Method,
    url: String,
    token: Option<&str>,
    body: Option<Value>,
) -> Option<Answer> {
    let mut req = http.request(method, url);
    if let Some(t) = token {
        req = req.bearer_auth(t);
    }
    if let Some(b) = body {
        req = req.json(&b);
    }
    let res = req.send().await.ok()?;
    let status = res.status().as_u16();
    let retry_after = res.headers().get("retry-after").and_then(|v| v.to_str().ok()).map(str::to_owned);
    let bytes = res.bytes().await.ok()?;
    Some(Answer { status, retry_after, body: serde_json::from_slice(&bytes).unwrap_or(Value::Null) })
}

async fn call(server: &Server, method: Method, path: &str, token: Option<&str>, body: Option<Value>) -> Answer {
    let shown = format!("{method} {path}");
    try_call(&client(), method, server.url(path), token, body)
        .await
        .unwrap_or_else(|| panic!("{shown}: no answer:\n{}", server.log_text()))
}

async fn get(server: &Server, path: &str) -> Answer {
    call(server, Method::GET, path, None, None).await
}

async fn post(server: &Server, path: &str, token: &str, body: Value) -> Answer {
    call(server, Method::POST, path, Some(token), Some(body)).await
}

async fn patch(server: &Server, path: &str, token: &str, body: Value) -> Answer {
    call(server, Method::PATCH, path, Some(token), Some(body)).await
}

#[track_caller]
fn expect_status<'a>(what: &str, a: &'a Answer, want: u16) -> &'a Value {
    assert_eq!(a.status, want, "{what}: {}", a.body);
    &a.body
}

fn id_of(body: &Value) -> i64 {
    body["id"].as_i64().unwrap_or_else(|| panic!("no id in {body}"))
}

// ---------------------------------------------------------------------------
// SIGKILL under a mixed load
// ---------------------------------------------------------------------------

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum Kind {
    Topic,
    Post,
}

impl Kind {
    fn path(self) -> &'static str {
        match self {
            Kind::Topic => "topics",
            Kind::Post => "posts",
        }
    }
}

type Target = (Kind, i64);

/// A request a loader sent; the one it had in flight at the kill may or
/// may not have been stored.
#[derive(Debug, Clone)]
enum Op {
    Reply { topic: i64, body: String },
    NewTopic { title: String },
    Vote { target: Target, value: i64 },
    Edit { target: Target, body: String },
    Read,
}

const REPLY: usize = 0;
const NEW_TOPIC: usize = 1;
const VOTE: usize = 2;
const EDIT: usize = 3;
const READ: usize = 4;

/// Everything the server acknowledged, and what was in flight at the kill.
#[derive(Default)]
struct Ledger {
    /// id -> (title, body).
    topics: BTreeMap<i64, (String, Option<String>)>,
    /// id -> (topic, body).
    posts: BTreeMap<i64, (i64, String)>,
    topic_ids: Vec<i64>,
    post_ids: Vec<i64>,
    /// (target, loader) -> the last acknowledged vote.
    votes: HashMap<(Target, usize), i64>,
    /// Acknowledged requests of each kind (`REPLY`..`READ`).
    acked: [usize; 5],
    /// (loader, request) for each request without an answer.
    pending: Vec<(usize, Op)>,
}

impl Ledger {
    fn random_target(&self, rng: &mut impl Rng) -> Target {
        let n = self.topic_ids.len() + self.post_ids.len();
        let k = rng.random_range(0..n);
        match self.topic_ids.get(k) {
            Some(&id) => (Kind::Topic, id),
            None => (Kind::Post, self.post_ids[k - self.topic_ids.len()]),
        }
    }

    /// The scores `target` may have after the crash: the sum of the
    /// acknowledged votes, with or without each vote left in flight.
    fn allowed_scores(&self, target: Target) -> BTreeSet<i64> {
        let voted = |loader: usize| self.votes.get(&(target, loader)).copied().unwrap_or(0);
        let base: i64 = self.votes.iter().filter(|((t, _), _)| *t == target).map(|(_, v)| v).sum();
        let mut allowed = BTreeSet::from([base]);
        for (loader, op) in &self.pending {
            if let Op::Vote { target: t, value } = op
                && *t == target
            {
                let delta = value - voted(*loader);
                allowed = allowed.iter().flat_map(|s| [*s, s + delta]).collect();
            }
        }
        allowed
    }

    /// The bodies `target` may have: the last acknowledged one, or an edit
    /// left in flight.
    fn allowed_bodies(&self, target: Target, acked: Option<&str>) -> Vec<Option<String>> {
        let mut allowed = vec![acked.map(str::to_owned)];
        for (_, op) in &self.pending {
            if let Op::Edit { target: t, body } = op
                && *t == target
            {
                allowed.push(Some(body.clone()));
            }
        }
        allowed
    }
}

const LOADERS: usize = 6;
/// Acknowledged writes to wait for before pulling the plug, and the least
/// of each kind.
const WRITES_BEFORE_KILL: usize = 300;
const EACH_KIND_BEFORE_KILL: usize = 15;

/// One loader: a user doing a random mix of requests until the server
/// dies under it.
async fn load(server_url: String, loader: usize, token: String, ledger: Arc<Mutex<Ledger>>) {
    let http = client();
    let url = |path: &str| format!("{server_url}{path}");
    let mut rng = rand::rngs::StdRng::seed_from_u64(loader as u64);
    let mut own: Vec<Target> = Vec::new();
    for i in 0.. {
        let roll = rng.random_range(0..10);
        let (op, method, path, body, want) = {
            let l = ledger.lock().expect("ledger");
            match roll {
                0..=2 => {
                    let topic = l.topic_ids[rng.random_range(0..l.topic_ids.len())];
                    let body = format!("loader {loader} reply {i}");
                    let req = json!({"body": body});
                    (Op::Reply { topic, body }, Method::POST, format!("/api/v1/topics/{topic}/posts"), Some(req), 201)
                }
                3 => {
                    let title = format!("loader {loader} topic {i}");
                    let req = json!({"title": title, "body": format!("loader {loader} topic body {i}")});
                    (Op::NewTopic { title }, Method::POST, "/api/v1/communities/mixed/topics".into(), Some(req), 201)
                }
                4 | 5 => {
                    let target = l.random_target(&mut rng);
                    let current = l.votes.get(&(target, loader)).copied().unwrap_or(0);
                    let value = [-1, 0, 1].into_iter().filter(|v| *v != current).nth(rng.random_range(0..2));
                    let value = value.expect("two other values");
                    let path = format!("/api/v1/{}/{}/vote", target.0.path(), target.1);
                    (Op::Vote { target, value }, Method::POST, path, Some(json!({"value": value})), 200)
                }
                6 if !own.is_empty() => {
                    let target = own[rng.random_range(0..own.len())];
                    let body = format!("loader {loader} edit {i}");
                    let path = format!("/api/v1/{}/{}", target.0.path(), target.1);
                    (Op::Edit { target, body: body.clone() }, Method::PATCH, path, Some(json!({"body": body})), 200)
                }
                7 => (Op::Read, Method::GET, "/api/v1/communities/mixed/topics?sort=new".into(), None, 200),
                _ => {
                    let topic = l.topic_ids[rng.random_range(0..l.topic_ids.len())];
                    (Op::Read, Method::GET, format!("/api/v1/topics/{topic}?sort=new"), None, 200)
                }
            }
        };
        let Some(answer) = try_call(&http, method, url(&path), Some(&token), body).await else {
            // The server is gone: this request may or may not have been stored.
            ledger.lock().expect("ledger").pending.push((loader, op));
            return;
        };
        assert_eq!(answer.status, want, "loader {loader}: {path} before the kill: {}", answer.body);
        let mut l = ledger.lock().expect("ledger");
        match op {
            Op::Reply { topic, body } => {
                let id = id_of(&answer.body);
                l.posts.insert(id, (topic, body));
                l.post_ids.push(id);
                own.push((Kind::Post, id));
                l.acked[REPLY] += 1;
            }
            Op::NewTopic { title } => {
                let id = id_of(&answer.body);
                let body = answer.body["body"].as_str().map(str::to_owned);
                l.topics.insert(id, (title, body));
                l.topic_ids.push(id);
                own.push((Kind::Topic, id));
                l.acked[NEW_TOPIC] += 1;
            }
            Op::Vote { target, value } => {
                assert_eq!(answer.body["vote"], value, "{path}: {}", answer.body);
                l.votes.insert((target, loader), value);
                l.acked[VOTE] += 1;
            }
            Op::Edit { target: (Kind::Topic, id), body } => {
                l.topics.get_mut(&id).expect("own topic").1 = Some(body);
                l.acked[EDIT] += 1;
            }
            Op::Edit { target: (Kind::Post, id), body } => {
                l.posts.get_mut(&id).expect("own post").1 = body;
                l.acked[EDIT] += 1;
            }
            Op::Read => l.acked[READ] += 1,
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sigkill_under_mixed_load_loses_no_acknowledged_reply_topic_vote_or_edit() {
    let root = tempfile::tempdir().expect("tempdir");
    let data = root.path().join("data");
    let boss = user_add(&data, "boss", true).await;
    let mut tokens = Vec::new();
    for l in 0..LOADERS {
        tokens.push(user_add(&data, &format!("loader{l}"), false).await);
    }
    let mut server = Server::start(&data, root.path().join("serve-1.log"), PATIENCE).await;
    let made = post(&server, "/api/v1/communities", &boss, json!({"name": "mixed", "title": "Mixed"})).await;
    expect_status("community", &made, 201);

    // Something to reply to and vote on from the first request.
    let ledger = Arc::new(Mutex::new(Ledger::default()));
    for (l, token) in tokens.iter().enumerate() {
        let title = format!("loader {l} first topic");
        let made = post(&server, "/api/v1/communities/mixed/topics", token, json!({"title": title})).await;
        let id = id_of(expect_status("first topic", &made, 201));
        let mut ledger = ledger.lock().expect("ledger");
        ledger.topics.insert(id, (title, None));
        ledger.topic_ids.push(id);
    }

    let loaders: Vec<_> = tokens
        .iter()
        .enumerate()
        .map(|(l, token)| tokio::spawn(load(server.base.clone(), l, token.clone(), ledger.clone())))
        .collect();
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let acked = ledger.lock().expect("ledger").acked;
        let writes = acked[REPLY] + acked[NEW_TOPIC] + acked[VOTE] + acked[EDIT];
        if writes >= WRITES_BEFORE_KILL && acked[..READ].iter().all(|n| *n >= EACH_KIND_BEFORE_KILL) {
            break;
        }
        if Instant::now() > deadline || loaders.iter().any(|l| l.is_finished()) {
            server.kill9();
            panic!("the load never got going (acked {acked:?}):\n{}", server.log_text());
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    server.kill9();
    for l in loaders {
        l.await.expect("loader task");
    }
    let ledger = std::mem::take(&mut *ledger.lock().expect("ledger"));
    assert!(ledger.acked[READ] > 0, "reads ran beside the writes: {:?}", ledger.acked);
    eprintln!(
        "acknowledged before the kill: {} replies, {} topics, {} votes, {} edits, {} reads; in flight: {:?}",
        ledger.acked[REPLY],
        ledger.acked[NEW_TOPIC],
        ledger.acked[VOTE],
        ledger.acked[EDIT],
        ledger.acked[READ],
        ledger.pending
    );

    let server = Server::start(&data, root.path().join("serve-2.log"), PATIENCE).await;
    let mut stored_posts = 0;
    let mut seen_posts = BTreeSet::new();
    for (&id, (title, body)) in &ledger.topics {
        let page = get(&server, &format!("/api/v1/topics/{id}?sort=old")).await;
        let page = expect_status(&format!("acknowledged topic {id} after the restart"), &page, 200);
        let topic = &page["topic"];
        assert_eq!(topic["title"], title.as_str(), "topic {id}");
        let stored_body = topic["body"].as_str().map(str::to_owned);
        let allowed = ledger.allowed_bodies((Kind::Topic, id), body.as_deref());
        assert!(allowed.contains(&stored_body), "topic {id} body {stored_body:?}, acknowledged {allowed:?}");
        let score = topic["score"].as_i64().expect("score");
        let allowed = ledger.allowed_scores((Kind::Topic, id));
        assert!(allowed.contains(&score), "topic {id} score {score}, acknowledged votes allow {allowed:?}");
        for p in page["posts"].as_array().expect("posts") {
            stored_posts += 1;
            let pid = id_of(p);
            seen_posts.insert(pid);
            let stored_body = p["body"].as_str().expect("body");
            let Some((topic, body)) = ledger.posts.get(&pid) else {
                // Not acknowledged: it must be a reply that was in flight.
                let in_flight = ledger
                    .pending
                    .iter()
                    .any(|(_, op)| matches!(op, Op::Reply { topic, body } if *topic == id && body == stored_body));
                assert!(in_flight, "post {pid} ({stored_body}) in topic {id} was never sent or was refused");
                continue;
            };
            assert_eq!(*topic, id, "post {pid}");
            let allowed = ledger.allowed_bodies((Kind::Post, pid), Some(body));
            assert!(
                allowed.contains(&Some(stored_body.to_owned())),
                "post {pid} body {stored_body:?}, acknowledged {allowed:?}"
            );
            let score = p["score"].as_i64().expect("score");
            let allowed = ledger.allowed_scores((Kind::Post, pid));
            assert!(allowed.contains(&score), "post {pid} score {score}, acknowledged votes allow {allowed:?}");
        }
    }
    for (id, (topic, body)) in &ledger.posts {
        assert!(seen_posts.contains(id), "acknowledged post {id} ({body}) in topic {topic} was lost in the crash");
    }
    let replies_in_flight = ledger.pending.iter().filter(|(_, op)| matches!(op, Op::Reply { .. })).count();
    assert!(
        stored_posts >= ledger.posts.len() && stored_posts <= ledger.posts.len() + replies_in_flight,
        "{stored_posts} posts stored, {} acknowledged, {replies_in_flight} in flight",
        ledger.posts.len()
    );

    // Every topic in the community, walked page by page: the acknowledged
    // ones, plus at most the new topics that were in flight.
    let mut listed = BTreeMap::new();
    let mut after = String::new();
    loop {
        let page = get(&server, &format!("/api/v1/communities/mixed/topics?sort=new&limit=100&after={after}")).await;
        let page = expect_status("listing", &page, 200);
        for t in page["topics"].as_array().expect("topics") {
            listed.insert(id_of(t), t["title"].as_str().expect("title").to_owned());
        }
        match page["next"].as_str() {
            Some(next) => after = next.to_owned(),
            None => break,
        }
    }
    for (id, (title, _)) in &ledger.topics {
        assert_eq!(listed.get(id), Some(title), "acknowledged topic {id} is listed");
    }
    for (id, title) in &listed {
        let known = ledger.topics.contains_key(id)
            || ledger.pending.iter().any(|(_, op)| matches!(op, Op::NewTopic { title: t } if t == title));
        assert!(known, "topic {id} ({title}) was never sent or was refused");
    }

    let (status, log) = server.terminate().await;
    assert!(status.success(), "{status}:\n{log}");
    assert_eq!(integrity_check(&data.join("pith.db")), "ok");
}

// ---------------------------------------------------------------------------
// A full disk
// ---------------------------------------------------------------------------

/// Fills the file system holding `path` with a file of zeros until only
/// `leave` bytes are free.
fn fill(disk: &Tmpfs, path: &Path, leave: u64) {
    let mut file = std::fs::File::create(path).expect("filler");
    let chunk = vec![0u8; 16 << 10];
    let mut left = disk.available().saturating_sub(leave);
    while left > 0 {
        let n = left.min(chunk.len() as u64) as usize;
        file.write_all(&chunk[..n]).unwrap_or_else(|e| panic!("filling {}: {e}", path.display()));
        left -= n as u64;
    }
}

/// Asserts a write was refused the way a full disk must be: 503, the JSON
/// error shape with code `unavailable`, and `Retry-After`.
#[track_caller]
fn assert_disk_full(what: &str, a: &Answer) {
    assert_error(what, a.status, &a.body, 503, "unavailable");
    assert!(a.retry_after.is_some(), "{what}: a 503 says when to retry");
}

/// A forum on `data`: `boss` (admin) and `alice`, community `disk`, two
/// topics with a few replies. Returns the server, alice's token, the topic
/// ids and the acknowledged replies, (id, body).
async fn small_forum(root: &Path, data: &Path) -> (Server, String, [i64; 2], Vec<(i64, String)>) {
    let boss = user_add(data, "boss", true).await;
    let alice = user_add(data, "alice", false).await;
    let server = Server::start(data, root.join("serve-1.log"), PATIENCE).await;
    let made = post(&server, "/api/v1/communities", &boss, json!({"name": "disk", "title": "Disk"})).await;
    expect_status("community", &made, 201);
    let mut topics = [0; 2];
    for (n, t) in topics.iter_mut().enumerate() {
        let made = post(
            &server,
            "/api/v1/communities/disk/topics",
            &alice,
            json!({"title": format!("topic {n}"), "body": "b"}),
        )
        .await;
        *t = id_of(expect_status("topic", &made, 201));
    }
    let mut replies = Vec::new();
    for n in 0..5 {
        let body = format!("early reply {n}");
        let made = post(&server, &format!("/api/v1/topics/{}/posts", topics[0]), &alice, json!({"body": body})).await;
        replies.push((id_of(expect_status("reply", &made, 201)), body));
    }
    (server, alice, topics, replies)
}

/// Replies with `size`-byte bodies until the server refuses one (at most
/// `limit` tries); every refusal must be a clean 503. Returns how many
/// refusals in a row ended it.
async fn reply_until_refused(
    server: &Server,
    token: &str,
    topic: i64,
    size: usize,
    limit: usize,
    refusals: usize,
    acked: &mut Vec<(i64, String)>,
) {
    let mut in_a_row = 0;
    for n in 0..limit {
        let body = format!("{size}-byte reply {n} {}", "x".repeat(size));
        let answer = post(server, &format!("/api/v1/topics/{topic}/posts"), token, json!({"body": body})).await;
        if answer.status == 201 {
            acked.push((id_of(&answer.body), body));
            in_a_row = 0;
            continue;
        }
        assert_disk_full(&format!("reply {n} of {size} bytes on a full disk"), &answer);
        in_a_row += 1;
        if in_a_row == refusals {
            return;
        }
    }
    panic!("{limit} replies of {size} bytes never filled the disk:\n{}", server.log_text());
}

/// The topic's posts as (id, body), oldest first.
async fn posts_of(server: &Server, topic: i64, what: &str) -> Vec<(i64, String)> {
    let page = get(server, &format!("/api/v1/topics/{topic}?sort=old")).await;
    let page = expect_status(what, &page, 200);
    page["posts"]
        .as_array()
        .expect("posts")
        .iter()
        .map(|p| (id_of(p), p["body"].as_str().expect("body").to_owned()))
        .collect()
}

/// Every kind of write, once; each answer is handed to `check`.
async fn every_write(
    server: &Server,
    token: &str,
    topics: [i64; 2],
    post_id: i64,
    round: &str,
) -> Vec<(String, Answer)> {
    let mut answers = Vec::new();
    let reply = json!({"body": format!("{round} reply")});
    answers.push(("reply".into(), post(server, &format!("/api/v1/topics/{}/posts", topics[1]), token, reply).await));
    let topic = json!({"title": format!("{round} topic")});
    answers.push(("new topic".into(), post(server, "/api/v1/communities/disk/topics", token, topic).await));
    let value = if round == "full" { 1 } else { -1 };
    let vote = json!({"value": value});
    answers.push(("topic vote".into(), post(server, &format!("/api/v1/topics/{}/vote", topics[1]), token, vote).await));
    let vote = json!({"value": value});
    answers.push(("post vote".into(), post(server, &format!("/api/v1/posts/{post_id}/vote"), token, vote).await));
    let edit = json!({"body": format!("{round} post edit")});
    answers.push(("post edit".into(), patch(server, &format!("/api/v1/posts/{post_id}"), token, edit).await));
    let edit = json!({"body": format!("{round} topic edit")});
    answers.push(("topic edit".into(), patch(server, &format!("/api/v1/topics/{}", topics[1]), token, edit).await));
    answers
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_disk_refuses_writes_with_503_serves_reads_and_recovers_when_space_returns() {
    let root = tempfile::tempdir().expect("tempdir");
    let data = root.path().join("data");
    // Dropped after the servers (declared later), so nothing holds it busy.
    let disk = Tmpfs::mount(&data, "4m");
    let (server, alice, topics, mut acked) = small_forum(root.path(), &data).await;
    let first_post = acked[0].0;

    // Leave a little room, then fill it through the API: first big replies,
    // then small ones until even those are refused, so no slack is left in
    // the WAL file for the writes below.
    let filler = data.join("filler");
    fill(&disk, &filler, 128 << 10);
    reply_until_refused(&server, &alice, topics[0], 4000, 200, 1, &mut acked).await;
    reply_until_refused(&server, &alice, topics[0], 10, 200, 3, &mut acked).await;
    // A write that changes a page or two may still fit in what is left of
    // the WAL file; any write is refused cleanly or stored.
    let mut stored = BTreeSet::new();
    for (what, answer) in every_write(&server, &alice, topics, first_post, "full").await {
        if (200..300).contains(&answer.status) {
            expect_status(&what, &answer, if what == "reply" || what == "new topic" { 201 } else { 200 });
            stored.insert(what);
        } else {
            assert_disk_full(&format!("{what} on a full disk"), &answer);
        }
    }
    if stored.contains("post edit") {
        acked[0].1 = "full post edit".into();
    }

    // Reads work, and show exactly the acknowledged writes: nothing refused
    // was half-stored.
    assert_eq!(posts_of(&server, topics[0], "topic on a full disk").await, acked);
    let other = get(&server, &format!("/api/v1/topics/{}?sort=new", topics[1])).await;
    let other = expect_status("the other topic on a full disk", &other, 200);
    let (body, score) = (other["topic"]["body"].clone(), other["topic"]["score"].clone());
    assert_eq!(body, if stored.contains("topic edit") { "full topic edit" } else { "b" }, "{stored:?}");
    assert_eq!(score, if stored.contains("topic vote") { 1 } else { 0 }, "{stored:?}");
    let replies = if stored.contains("reply") { json!(["full reply"]) } else { json!([]) };
    let bodies: Vec<Value> = other["posts"].as_array().expect("posts").iter().map(|p| p["body"].clone()).collect();
    assert_eq!(json!(bodies), replies, "{stored:?}");
    let listing = get(&server, "/api/v1/communities/disk/topics?sort=new").await;
    let listing = expect_status("listing on a full disk", &listing, 200);
    let topic_count = 2 + usize::from(stored.contains("new topic"));
    assert_eq!(listing["topics"].as_array().map(Vec::len), Some(topic_count), "{stored:?}: {listing}");
    expect_status("communities on a full disk", &get(&server, "/api/v1/communities").await, 200);

    // Space returns; the same server takes writes again.
    std::fs::remove_file(&filler).expect("remove filler");
    let deadline = Instant::now() + PATIENCE;
    loop {
        let body = "after the disk was freed".to_owned();
        let answer = post(&server, &format!("/api/v1/topics/{}/posts", topics[0]), &alice, json!({"body": body})).await;
        if answer.status == 201 {
            acked.push((id_of(&answer.body), body));
            break;
        }
        assert_disk_full("a reply just after space returned", &answer);
        assert!(Instant::now() < deadline, "writes still fail after space returned:\n{}", server.log_text());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    for (what, answer) in every_write(&server, &alice, topics, first_post, "freed").await {
        let want = if what == "reply" || what == "new topic" { 201 } else { 200 };
        expect_status(&format!("{what} after space returned"), &answer, want);
    }
    acked[0].1 = "freed post edit".into();
    assert_eq!(posts_of(&server, topics[0], "topic after space returned").await, acked);
    let other = get(&server, &format!("/api/v1/topics/{}?sort=new", topics[1])).await;
    let other = expect_status("the other topic after space returned", &other, 200);
    assert_eq!(other["topic"]["body"], "freed topic edit");
    assert_eq!(other["topic"]["score"], -1);
    let bodies: Vec<&str> =
        other["posts"].as_array().expect("posts").iter().filter_map(|p| p["body"].as_str()).collect();
    let replies: &[&str] = if stored.contains("reply") { &["freed reply", "full reply"] } else { &["freed reply"] };
    assert_eq!(bodies, replies, "newest first");

    let db = data.join("pith.db");
    assert_eq!(integrity_check(&db), "ok", "while serving");
    let (status, log) = server.terminate().await;
    assert_eq!(status.code(), Some(0), "a clean stop after the disk was full:\n{log}");
    assert_eq!(integrity_check(&db), "ok", "after a clean stop");

    // And all of it is still there after a restart.
    let server = Server::start(&data, root.path().join("serve-2.log"), PATIENCE).await;
    assert_eq!(posts_of(&server, topics[0], "topic after a restart").await, acked);
    let (status, log) = server.terminate().await;
    assert!(status.success(), "{status}:\n{log}");
}

/// No filler: the WAL and the database themselves fill the disk, so the
/// checkpointer cannot copy the WAL back either. Growing the mount gives
/// space back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_disk_filled_by_the_wal_itself_recovers_when_the_disk_grows() {
    let root = tempfile::tempdir().expect("tempdir");
    let data = root.path().join("data");
    // 2 MB: a new database and the WAL its schema is first written to
    // take most of 1 MB since migration 0015.
    let disk = Tmpfs::mount(&data, "2m");
    let (server, alice, topics, mut acked) = small_forum(root.path(), &data).await;

    reply_until_refused(&server, &alice, topics[0], 8000, 300, 1, &mut acked).await;
    reply_until_refused(&server, &alice, topics[0], 10, 300, 3, &mut acked).await;
    // A second of the checkpointer failing too changes nothing.
    tokio::time::sleep(Duration::from_millis(1200)).await;
    let answer = post(&server, &format!("/api/v1/topics/{}/posts", topics[0]), &alice, json!({"body": "no"})).await;
    assert_disk_full("a reply on a disk full of WAL", &answer);
    assert_eq!(posts_of(&server, topics[0], "topic on a disk full of WAL").await, acked);

    disk.remount("size=8m");
    let deadline = Instant::now() + PATIENCE;
    loop {
        let body = "after the disk grew".to_owned();
        let answer = post(&server, &format!("/api/v1/topics/{}/posts", topics[0]), &alice, json!({"body": body})).await;
        if answer.status == 201 {
            acked.push((id_of(&answer.body), body));
            break;
        }
        assert_disk_full("a reply just after the disk grew", &answer);
        assert!(Instant::now() < deadline, "writes still fail after the disk grew:\n{}", server.log_text());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(posts_of(&server, topics[0], "topic after the disk grew").await, acked);
    let db = data.join("pith.db");
    assert_eq!(integrity_check(&db), "ok", "while serving");
    let (status, log) = server.terminate().await;
    assert_eq!(status.code(), Some(0), "{log}");
    assert_eq!(integrity_check(&db), "ok", "after a clean stop");
}

// ---------------------------------------------------------------------------
// A database that cannot be used, reported at start
// ---------------------------------------------------------------------------

/// Runs `pith serve` and `pith user add` on a database that cannot be used
/// and asserts each exits non-zero, promptly, with one readable line that
/// names `names` (the file or directory) and says `problem`.
async fn assert_refused_at_start(case: &str, data_args: &[&OsStr], names: &Path, problem: &str) {
    let serve: Vec<&OsStr> =
        [["serve".as_ref(), "--listen".as_ref(), "127.0.0.1:0".as_ref()].as_slice(), data_args].concat();
    let user_add: Vec<&OsStr> = [["user".as_ref(), "add".as_ref(), "carol".as_ref()].as_slice(), data_args].concat();
    for (command, args) in [("pith serve", serve), ("pith user add", user_add)] {
        let started = Instant::now();
        let out = run_pith(&args).await;
        let took = started.elapsed();
        let stderr = String::from_utf8_lossy(&out.stderr);
        let context = format!("{case}: {command} ({}) in {took:?}; stderr:\n{stderr}", out.status);
        assert!(!out.status.success(), "{context}");
        assert_eq!(out.status.code(), Some(1), "an error exit, not a panic or a signal: {context}");
        assert!(took < Duration::from_secs(5), "{context}");
        assert!(!stderr.contains("panicked") && !stderr.contains("backtrace"), "{context}");
        assert!(out.stdout.is_empty(), "nothing on stdout (no token): {context}");
        let errors: Vec<&str> = stderr.lines().filter(|l| l.starts_with("pith: ")).collect();
        assert_eq!(errors.len(), 1, "one error line: {context}");
        assert_eq!(stderr.lines().last(), Some(errors[0]), "the error is the last word: {context}");
        let line = errors[0];
        assert!(line.contains(&*names.to_string_lossy()), "the line names {}: {context}", names.display());
        assert!(line.to_lowercase().contains(problem), "the line says `{problem}`: {context}");
    }
}

/// A real database with a few accounts, made by `pith user add`.
async fn real_database(data: &Path) -> PathBuf {
    for name in ["alice", "bob", "dave"] {
        user_add(data, name, false).await;
    }
    let db = data.join("pith.db");
    assert!(db.metadata().expect("database").len() > 8192, "a database of several pages");
    db
}

#[tokio::test]
async fn a_database_of_garbage_bytes_is_refused_at_start() {
    let root = tempfile::tempdir().expect("tempdir");
    let data = root.path().join("data");
    std::fs::create_dir(&data).expect("data dir");
    let db = data.join("pith.db");
    let mut rng = rand::rngs::StdRng::seed_from_u64(7);
    let garbage: Vec<u8> = (0..64 << 10).map(|_| rng.random()).collect();
    std::fs::write(&db, garbage).expect("garbage");
    assert_refused_at_start("garbage", &["--data-dir".as_ref(), data.as_ref()], &db, "not a sqlite database").await;
    assert_eq!(std::fs::metadata(&db).expect("still there").len(), 64 << 10, "the file is left alone");
}

#[tokio::test]
async fn a_truncated_database_is_refused_at_start() {
    let root = tempfile::tempdir().expect("tempdir");
    let data = root.path().join("data");
    let db = real_database(&data).await;
    let full = db.metadata().expect("database").len();
    for keep in [full / 2, 4096, 100] {
        let copy = root.path().join(format!("cut-{keep}"));
        std::fs::create_dir(&copy).expect("dir");
        let cut = copy.join("pith.db");
        std::fs::copy(&db, &cut).expect("copy");
        std::fs::OpenOptions::new().write(true).open(&cut).and_then(|f| f.set_len(keep)).expect("truncate");
        let case = format!("truncated to {keep} of {full} bytes");
        assert_refused_at_start(&case, &["--data-dir".as_ref(), copy.as_ref()], &cut, "corrupted").await;
    }
}

#[tokio::test]
async fn a_data_dir_that_cannot_be_created_is_refused_at_start() {
    let root = tempfile::tempdir().expect("tempdir");
    let file = root.path().join("a-file");
    std::fs::write(&file, "not a directory").expect("file");
    let data = file.join("data");
    assert_refused_at_start("data dir under a file", &["--data-dir".as_ref(), data.as_ref()], &data, "not a directory")
        .await;
}

#[tokio::test]
async fn a_database_that_is_a_directory_is_refused_at_start() {
    let root = tempfile::tempdir().expect("tempdir");
    let data = root.path().join("data");
    let db = data.join("pith.db");
    std::fs::create_dir_all(&db).expect("dir");
    assert_refused_at_start("database is a directory", &["--data-dir".as_ref(), data.as_ref()], &db, "directory").await;
}

#[tokio::test]
async fn a_database_on_a_read_only_mount_is_refused_at_start() {
    let root = tempfile::tempdir().expect("tempdir");
    let made = root.path().join("made");
    let db = real_database(&made).await;
    let data = root.path().join("ro");
    let disk = Tmpfs::mount(&data, "1m");
    std::fs::copy(&db, data.join("pith.db")).expect("copy");
    disk.remount("ro");
    let ro_db = data.join("pith.db");
    assert_refused_at_start("read-only mount", &["--data-dir".as_ref(), data.as_ref()], &ro_db, "read-only").await;
    // A database still to be created there fails the same way.
    let missing = data.join("new.db");
    assert_refused_at_start(
        "new database on a read-only mount",
        &["--database".as_ref(), missing.as_ref()],
        &missing,
        "read-only",
    )
    .await;
    drop(disk);
}

#[tokio::test]
async fn an_immutable_database_file_is_refused_at_start() {
    let root = tempfile::tempdir().expect("tempdir");
    let data = root.path().join("data");
    let db = real_database(&data).await;
    let _immutable = Immutable::set(&db);
    assert_refused_at_start("chattr +i", &["--data-dir".as_ref(), data.as_ref()], &db, "read-only").await;
}
