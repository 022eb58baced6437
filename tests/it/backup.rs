//! `pith backup` and `pith restore` with the real binary: a backup taken
//! while writes pour in is consistent and holds every write acknowledged
//! before it began; a restore brings exactly that back; the serve lock
//! keeps a restore or a second server off a running database.

use std::collections::BTreeSet;
use std::ffi::OsStr;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use serde_json::{Value, json};

use crate::support::child::{Server, run_pith, user_add};

const PATIENCE: Duration = Duration::from_secs(20);

async fn post(client: &reqwest::Client, url: String, token: &str, body: Value) -> (u16, Value) {
    let res = client.post(url).bearer_auth(token).json(&body).send().await.expect("request");
    let status = res.status().as_u16();
    (status, res.json().await.unwrap_or(Value::Null))
}

fn post_ids(db: &Path) -> BTreeSet<i64> {
    let conn = rusqlite::Connection::open_with_flags(db, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY).expect("open");
    let verdict: String = conn.query_row("PRAGMA integrity_check", [], |r| r.get(0)).expect("integrity_check");
    assert_eq!(verdict, "ok", "{}", db.display());
    let mut stmt = conn.prepare("SELECT id FROM posts").expect("prepare");
    stmt.query_map([], |r| r.get(0)).expect("query").collect::<Result<_, _>>().expect("ids")
}

async fn pith(args: &[&str]) -> (bool, String) {
    let args: Vec<&OsStr> = args.iter().map(OsStr::new).collect();
    let out = run_pith(&args).await;
    (out.status.success(), String::from_utf8_lossy(&out.stderr).into_owned())
}

#[tokio::test]
async fn a_backup_under_write_load_is_consistent_and_restores() {
    let root = tempfile::tempdir().expect("tempdir");
    let data = root.path().join("data");
    let admin = user_add(&data, "admin", true).await;
    let server = Server::start(&data, root.path().join("serve-1.log"), PATIENCE).await;
    let client = reqwest::Client::new();
    let (status, _) =
        post(&client, server.url("/api/v1/communities"), &admin, json!({"name": "backups", "title": "B"})).await;
    assert_eq!(status, 201);
    let (status, topic) =
        post(&client, server.url("/api/v1/communities/backups/topics"), &admin, json!({"title": "t"})).await;
    assert_eq!(status, 201);
    let topic = topic["id"].as_i64().expect("topic id");

    // Four writers reply as fast as the server acknowledges.
    let stop = Arc::new(AtomicBool::new(false));
    let acked = Arc::new(std::sync::Mutex::new(BTreeSet::new()));
    let mut writers = Vec::new();
    for w in 0..4 {
        let (client, stop, acked, admin) = (client.clone(), stop.clone(), acked.clone(), admin.clone());
        let url = server.url(&format!("/api/v1/topics/{topic}/posts"));
        writers.push(tokio::spawn(async move {
            let mut i = 0;
            while !stop.load(Ordering::Relaxed) {
                let (status, post) = post(&client, url.clone(), &admin, json!({"body": format!("w{w} #{i}")})).await;
                assert_eq!(status, 201, "{post}");
                acked.lock().expect("lock").insert(post["id"].as_i64().expect("id"));
                i += 1;
            }
        }));
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let before: BTreeSet<i64> = acked.lock().expect("lock").clone();
    let file = root.path().join("forum.backup");
    let (ok, log) = pith(&["backup", file.to_str().expect("utf-8"), "--data-dir", data.to_str().expect("utf-8")]).await;
    assert!(ok, "pith backup failed: {log}");
    assert!(log.contains("integrity ok"), "{log}");
    tokio::time::sleep(Duration::from_millis(200)).await;
    stop.store(true, Ordering::Relaxed);
    for w in writers {
        w.await.expect("writer");
    }
    let during = acked.lock().expect("lock").len();
    assert!(before.len() >= 4, "the writers were not writing before the backup: {}", before.len());

    let in_backup = post_ids(&file);
    assert!(before.is_subset(&in_backup), "a post acknowledged before the backup began is missing from it");
    assert!(in_backup.len() < during, "the load kept writing after the snapshot, as it should have");

    // A running server holds its database: no restore, no second server.
    let data_arg = data.to_str().expect("utf-8");
    let (ok, log) = pith(&["restore", file.to_str().expect("utf-8"), "--data-dir", data_arg]).await;
    assert!(!ok && log.contains("in use by a running `pith serve`"), "restore under a live server: {log}");
    let (ok, log) = pith(&["serve", "--listen", "127.0.0.1:0", "--data-dir", data_arg]).await;
    assert!(!ok && log.contains("in use by a running `pith serve`"), "a second server: {log}");

    let (status, _) = server.terminate().await;
    assert!(status.success());
    let (ok, log) = pith(&["restore", file.to_str().expect("utf-8"), "--data-dir", data_arg]).await;
    assert!(ok, "restore: {log}");
    assert!(log.contains("kept as"), "the replaced database is kept: {log}");
    let kept = std::fs::read_dir(&data)
        .expect("read data dir")
        .filter_map(Result::ok)
        .find(|e| e.file_name().to_string_lossy().starts_with("pith.db.before-restore-"))
        .expect("the replaced database");
    assert_eq!(post_ids(&kept.path()).len(), during, "the kept database holds every write");

    // The restored forum serves exactly the backup's posts.
    let server = Server::start(&data, root.path().join("serve-2.log"), PATIENCE).await;
    let body: Value = client
        .get(server.url(&format!("/api/v1/topics/{topic}?sort=old")))
        .send()
        .await
        .expect("get")
        .json()
        .await
        .expect("json");
    let served: BTreeSet<i64> =
        body["posts"].as_array().expect("posts").iter().filter_map(|p| p["id"].as_i64()).collect();
    assert_eq!(served, in_backup);
    server.terminate().await;
}

#[tokio::test]
async fn backup_and_restore_refuse_what_they_cannot_do_safely() {
    let root = tempfile::tempdir().expect("tempdir");
    let data = root.path().join("data");
    let data_arg = data.to_str().expect("utf-8");
    let file = root.path().join("b.db");
    let file_arg = file.to_str().expect("utf-8");

    let (ok, log) = pith(&["backup", file_arg, "--data-dir", data_arg]).await;
    assert!(!ok && log.contains("no database"), "backup of nothing: {log}");

    user_add(&data, "someone", false).await;
    let (ok, log) = pith(&["backup", file_arg, "--data-dir", data_arg]).await;
    assert!(ok, "{log}");
    let (ok, log) = pith(&["backup", file_arg, "--data-dir", data_arg]).await;
    assert!(!ok && log.contains("already exists"), "a backup never overwrites: {log}");

    let garbage = root.path().join("garbage");
    std::fs::write(&garbage, vec![0x5a; 8192]).expect("write");
    let (ok, log) = pith(&["restore", garbage.to_str().expect("utf-8"), "--data-dir", data_arg]).await;
    assert!(!ok && log.contains("not a usable backup"), "restore of garbage: {log}");
    let (ok, log) = pith(&["restore", "/nonexistent/backup", "--data-dir", data_arg]).await;
    assert!(!ok && log.contains("no backup file"), "{log}");
    // Nothing was touched by the refusals.
    assert_eq!(post_ids(&data.join("pith.db")).len(), 0);
}
