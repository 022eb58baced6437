//! Structured logs from the real binary: `--log-format json` writes one
//! JSON object per line, and every line of a request names its id (the
//! client's `x-request-id` when sane, else a fresh one echoed back).

use std::time::Duration;

use serde_json::Value;

use crate::support::child::Server;
use crate::support::helpers::{client, fetch};

#[tokio::test]
async fn json_logs_name_each_request_by_its_id() {
    let dir = tempfile::tempdir().expect("tempdir");
    let log = dir.path().join("serve.log");
    let server = Server::start_with(&dir.path().join("data"), log, Duration::from_secs(20), |cmd| {
        cmd.env_remove("PITH_LOG").args(["--log-format", "json", "--log-level", "debug"]);
    })
    .await;

    let given = fetch(client().get(server.url("/healthz")).header("x-request-id", "it-req.42")).await;
    assert_eq!(given.header("x-request-id"), Some("it-req.42"), "a sane id is kept and echoed");
    let insane = fetch(client().get(server.url("/healthz")).header("x-request-id", "not sane!")).await;
    let fresh = insane.header("x-request-id").expect("a fresh id").to_owned();
    assert!(fresh.len() == 16 && fresh.bytes().all(|b| b.is_ascii_hexdigit()), "{fresh}");

    let text = server.log_text();
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}\n---\n{text}")))
        .collect();
    assert!(lines.iter().any(|l| l["fields"]["message"].as_str().is_some_and(|m| m.starts_with("starting pith"))));
    for id in ["it-req.42", fresh.as_str()] {
        let line = lines
            .iter()
            .find(|l| l["span"]["request_id"] == id)
            .unwrap_or_else(|| panic!("no line names request {id}:\n{text}"));
        assert_eq!(line["level"], "DEBUG");
        assert_eq!(line["fields"]["path"], "/healthz");
        assert_eq!(line["fields"]["status"], 200);
    }
    assert!(!text.contains("not sane!"), "an insane id never reaches the log");
}

#[tokio::test]
async fn a_bad_log_format_is_a_readable_error() {
    let out = crate::support::child::run_pith(&["--log-format".as_ref(), "xml".as_ref(), "serve".as_ref()]).await;
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("xml") && err.contains("human") && err.contains("json"), "{err}");
}
