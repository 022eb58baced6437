//! `pith bench write` with the real binary: it reports durable inserts and
//! finds every acknowledged one in the file afterwards.

use std::ffi::OsStr;

use crate::child::run_pith;

#[tokio::test]
async fn bench_write_reports_durable_inserts_that_are_all_in_the_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    let args = ["bench", "write", "--writers", "16", "--duration", "1s", "--json", "--data-dir"];
    let mut args: Vec<&OsStr> = args.iter().map(OsStr::new).collect();
    args.push(data.as_os_str());
    let out = run_pith(&args).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "bench write failed: {stderr}");
    let summary: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON summary");
    let acknowledged = summary["acknowledged"].as_u64().expect("acknowledged");
    assert!(acknowledged > 16, "{summary}");
    assert_eq!(summary["failed"], 0, "{summary}");
    assert!(summary["found_after"].as_u64().expect("found_after") >= acknowledged, "{summary}");
    assert!(summary["commit_latency"]["latency_ms"]["p99"].as_f64().expect("p99") > 0.0, "{summary}");
    // The same directory again: bench write wants a fresh database.
    let again = run_pith(&args).await;
    assert!(!again.status.success());
    assert!(String::from_utf8_lossy(&again.stderr).contains("fresh database"));
}
