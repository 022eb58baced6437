//! A real Prometheus server (Debian's `prometheus` package; test.sh installs
//! it) scraping a test's `/metrics` on loopback, and its HTTP API to read
//! back what it stored: the check that Pith's exposition is what Prometheus
//! itself accepts, not only what our own parser (`prom.rs`) reads.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::child::free_port;
use super::helpers::client;

pub struct Prometheus {
    child: Child,
    base: String,
    dir: tempfile::TempDir,
}

impl Prometheus {
    /// Scrapes `target` (`http://host:port`) at `path` every second.
    pub async fn scraping(target: &str, path: &str) -> Prometheus {
        let target = target.strip_prefix("http://").unwrap_or(target);
        let binary = Path::new("/usr/bin/prometheus");
        assert!(binary.exists(), "the metrics test needs Prometheus: apt-get install prometheus (test.sh does)");
        let dir = tempfile::tempdir().expect("tempdir");
        let config = dir.path().join("prometheus.yml");
        std::fs::write(
            &config,
            format!(
                "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\nscrape_configs:\n  - job_name: pith\n    \
                 metrics_path: {path}\n    static_configs:\n      - targets: ['{target}']\n"
            ),
        )
        .expect("write prometheus.yml");
        let port = free_port();
        let log = std::fs::File::create(dir.path().join("log")).expect("log");
        let child = Command::new(binary)
            .arg(format!("--config.file={}", config.display()))
            .arg(format!("--storage.tsdb.path={}", dir.path().join("data").display()))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start prometheus");
        let mut prometheus = Prometheus { child, base: format!("http://127.0.0.1:{port}"), dir };
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Ok(res) = client().get(format!("{}/-/ready", prometheus.base)).send().await
                && res.status() == 200
            {
                return prometheus;
            }
            if let Some(status) = prometheus.child.try_wait().expect("try_wait") {
                panic!("prometheus exited with {status}:\n{}", prometheus.log());
            }
            assert!(Instant::now() < deadline, "prometheus never became ready:\n{}", prometheus.log());
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("log")).unwrap_or_default()
    }

    /// `GET /api/v1/{path}`'s `data`, asserting success.
    pub async fn api(&self, path: &str) -> Value {
        let res = client().get(format!("{}/api/v1/{path}", self.base)).send().await.expect("prometheus api");
        let body: Value = res.json().await.expect("prometheus json");
        assert_eq!(body["status"], "success", "{path}: {body}");
        body["data"].clone()
    }

    /// The one scrape target once it has been scraped: its `health`,
    /// `lastError` and labels. Waits up to 30 s for a first scrape.
    pub async fn scraped_target(&self) -> Value {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let targets = self.api("targets").await;
            if let Some(t) = targets["activeTargets"].get(0)
                && t["health"] != "unknown"
            {
                return t.clone();
            }
            assert!(Instant::now() < deadline, "never scraped: {targets}\n{}", self.log());
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// The result vector of the instant query `query`.
    pub async fn query(&self, query: &str) -> Vec<Value> {
        let url = reqwest::Url::parse_with_params(&format!("{}/api/v1/query", self.base), [("query", query)])
            .expect("query url");
        let res = client().get(url).send().await.expect("prometheus query");
        let body: Value = res.json().await.expect("prometheus json");
        assert_eq!(body["status"], "success", "{query}: {body}");
        body["data"]["result"].as_array().cloned().unwrap_or_default()
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
