//! `/metrics`: the Prometheus text format, counters that move with
//! requests, labels by route template, the cache and writer instruments,
//! the `--metrics` and `--metrics-listen` settings of the real binary, and
//! a real Prometheus server scraping it.

use std::time::Duration;

use crate::support::child::{Server, free_port};
use crate::support::helpers::{TestApp, assert_error_shape, client, fetch, spawn_app};
use crate::support::prom::{Sample, parse, value};
use crate::support::prometheus::Prometheus;
use serde_json::json;

async fn scrape(app: &TestApp) -> Vec<Sample> {
    scrape_url(&app.url("/metrics")).await.0
}

async fn scrape_url(url: &str) -> (Vec<Sample>, std::collections::HashMap<String, String>) {
    let reply = fetch(client().get(url)).await;
    assert_eq!(reply.status, 200, "{url}");
    let content_type = reply.header("content-type").expect("content type");
    assert!(content_type.starts_with("application/openmetrics-text"), "{content_type}");
    parse(std::str::from_utf8(&reply.bytes).expect("utf-8"))
}

fn requests(samples: &[Sample], route: &str, method: &str, status: &str) -> f64 {
    value(samples, "pith_http_requests_total", &[("route", route), ("method", method), ("status", status)])
}

#[tokio::test]
async fn metrics_parse_as_prometheus_text_and_cover_every_group() {
    let app = spawn_app().await;
    // A family with no samples yet is left out: give each group one.
    app.community("rust").await;
    let topic = app.topic("rust", &app.admin_token, "Every group").await;
    app.read_topic(topic, "best").await;
    let (samples, types) = scrape_url(&app.url("/metrics")).await;
    let want = [
        ("pith_http_requests", "counter"),
        ("pith_http_request_duration_seconds", "histogram"),
        ("pith_live_sockets", "gauge"),
        ("pith_live_channels", "gauge"),
        ("pith_live_subscriptions", "gauge"),
        ("pith_cache_hits", "counter"),
        ("pith_cache_misses", "counter"),
        ("pith_cache_bytes", "gauge"),
        ("pith_writer_batch_size", "histogram"),
        ("pith_writer_commit_duration_seconds", "histogram"),
        ("pith_wal_bytes", "gauge"),
        ("pith_db_bytes", "gauge"),
        ("process_resident_memory_bytes", "gauge"),
    ];
    for (name, kind) in want {
        assert_eq!(types.get(name).map(String::as_str), Some(kind), "{name}");
    }
    assert!(value(&samples, "pith_db_bytes", &[]) > 0.0, "the database file has a size");
    assert!(value(&samples, "process_resident_memory_bytes", &[]) > 0.0);
    assert_eq!(value(&samples, "pith_cache_budget_bytes", &[]), f64::from(16 << 20));
    app.stop().await;
}

/// Scrapes until the checkpointer has recorded a checkpoint; returns the
/// families then declared.
async fn scrape_after_a_checkpoint(app: &TestApp) -> std::collections::HashMap<String, String> {
    let labels = [("mode", "PASSIVE"), ("by", "checkpointer")];
    // It runs once a second; a few seconds is plenty even on a busy machine.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let (samples, types) = scrape_url(&app.url("/metrics")).await;
        if value(&samples, "pith_checkpoint_duration_seconds_count", &labels) >= 1.0 {
            return types;
        }
        assert!(std::time::Instant::now() < deadline, "no checkpoint was recorded in 10 s");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test]
async fn the_checkpointer_records_its_checkpoints() {
    let app = spawn_app().await;
    let types = scrape_after_a_checkpoint(&app).await;
    assert_eq!(types["pith_checkpoint_duration_seconds"], "histogram");
    app.stop().await;
}

/// The dashboard and the reference name only metrics the server exposes,
/// and the reference names all of them.
#[tokio::test]
async fn the_dashboard_and_the_docs_use_the_exposed_metric_names() {
    let app = spawn_app().await;
    app.community("rust").await;
    let topic = app.topic("rust", &app.admin_token, "Dashboard").await;
    app.read_topic(topic, "best").await;
    let types = scrape_after_a_checkpoint(&app).await;
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let dashboard = std::fs::read_to_string(root.join("docs/grafana/pith.json")).expect("dashboard");
    let dashboard: serde_json::Value = serde_json::from_str(&dashboard).expect("the dashboard is JSON");
    let exprs: Vec<String> = dashboard["panels"]
        .as_array()
        .expect("panels")
        .iter()
        .flat_map(|p| p["targets"].as_array().cloned().unwrap_or_default())
        .map(|t| t["expr"].as_str().expect("expr").to_owned())
        .collect();
    assert!(exprs.len() >= 10, "a panel for each group");
    let family = |name: &str| {
        ["_total", "_bucket", "_count", "_sum", "_info"]
            .iter()
            .find_map(|s| name.strip_suffix(s).filter(|f| types.contains_key(*f)))
            .unwrap_or(name)
            .to_owned()
    };
    for expr in &exprs {
        for word in expr.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')) {
            if word.starts_with("pith_") || word.starts_with("process_") {
                assert!(types.contains_key(&family(word)), "{word} in the dashboard is not exposed");
            }
        }
    }
    let docs = std::fs::read_to_string(root.join("docs/METRICS.md")).expect("METRICS.md");
    for name in types.keys() {
        assert!(docs.contains(name.as_str()), "{name} is not in docs/METRICS.md");
    }
    app.stop().await;
}

#[tokio::test]
async fn request_counters_move_under_the_route_template_never_the_raw_path() {
    let app = spawn_app().await;
    app.community("rust").await;
    let topic = app.topic("rust", &app.admin_token, "Counted").await;
    let route = "/api/v1/topics/{id}";
    let before = scrape(&app).await;
    for _ in 0..3 {
        app.read_topic(topic, "best").await;
    }
    let (status, _) = app.get("/no/such/route").await;
    assert_eq!(status, 404);
    let (status, _) = app.delete("/healthz", None).await;
    assert_eq!(status, 405);
    let after = scrape(&app).await;

    assert_eq!(requests(&after, route, "GET", "2xx") - requests(&before, route, "GET", "2xx"), 3.0);
    let count = |s: &[Sample]| {
        value(s, "pith_http_request_duration_seconds_count", &[("route", route), ("method", "GET"), ("status", "2xx")])
    };
    assert_eq!(count(&after) - count(&before), 3.0, "the latency histogram counts them too");
    let unmatched = |s: &[Sample]| requests(s, "unmatched", "GET", "4xx");
    assert_eq!(unmatched(&after) - unmatched(&before), 1.0);
    let refused = |s: &[Sample]| requests(s, "unmatched", "DELETE", "4xx");
    assert_eq!(refused(&after) - refused(&before), 1.0, "a 405 is answered by no route either");
    // The scrape before is counted under its own route.
    assert!(requests(&after, "/metrics", "GET", "2xx") >= 1.0);
    let raw = format!("/api/v1/topics/{topic}");
    for s in &after {
        if let Some(r) = s.labels.get("route") {
            assert!(r == "unmatched" || r.starts_with('/'), "{s:?}");
            assert!(r != &raw && !r.contains("/no/such"), "a raw path as a label: {s:?}");
        }
    }
    app.stop().await;
}

#[tokio::test]
async fn cache_hits_and_misses_move_with_topic_reads() {
    let app = spawn_app().await;
    app.community("rust").await;
    let topic = app.topic("rust", &app.admin_token, "Cached").await;
    let before = scrape(&app).await;
    app.read_topic(topic, "best").await; // rendered: a miss
    app.read_topic(topic, "best").await; // served from the cache: a hit
    let after = scrape(&app).await;
    let delta = |name: &str| value(&after, name, &[]) - value(&before, name, &[]);
    assert_eq!(delta("pith_cache_misses_total"), 1.0);
    assert_eq!(delta("pith_cache_hits_total"), 1.0);
    assert!(value(&after, "pith_cache_bytes", &[]) > 0.0);
    assert_eq!(value(&after, "pith_cache_topics", &[]), 1.0);
    app.stop().await;
}

#[tokio::test]
async fn the_writer_histograms_move_after_a_post() {
    let app = spawn_app().await;
    app.community("rust").await;
    let topic = app.topic("rust", &app.admin_token, "Written").await;
    let before = scrape(&app).await;
    app.reply(topic, &app.admin_token, None, "one more post").await;
    let after = scrape(&app).await;
    for name in ["pith_writer_batch_size_count", "pith_writer_commit_duration_seconds_count"] {
        assert!(value(&after, name, &[]) > value(&before, name, &[]), "{name}");
    }
    assert!(value(&after, "pith_writer_batch_size_sum", &[]) > value(&before, "pith_writer_batch_size_sum", &[]));
    assert!(value(&after, "pith_wal_bytes", &[]) >= 0.0);
    app.stop().await;
}

/// The real binary with extra arguments; its log goes to the temp dir.
async fn serve(dir: &tempfile::TempDir, args: &[String]) -> Server {
    let log = dir.path().join("serve.log");
    Server::start_with(&dir.path().join("data"), log, Duration::from_secs(20), |cmd| {
        cmd.args(args);
    })
    .await
}

#[tokio::test]
async fn metrics_off_answers_404_on_the_main_listener() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = serve(&dir, &["--metrics".into(), "off".into()]).await;
    let reply = fetch(client().get(server.url("/metrics"))).await;
    assert_eq!(reply.status, 404);
    assert_error_shape("GET /metrics with --metrics off", &reply.json());
    let log = server.log_text();
    assert!(log.contains("metrics=off (flag --metrics)"), "the setting is logged at start: {log}");
    assert_eq!(log.matches("not at their defaults").count(), 1, "in one line: {log}");
    assert!(!log.contains("wal-limit-mb"), "settings at their defaults are not logged: {log}");
}

#[tokio::test]
async fn metrics_listen_serves_them_on_their_own_port_only() {
    let dir = tempfile::tempdir().expect("tempdir");
    let port = free_port();
    let server = serve(&dir, &["--metrics-listen".into(), format!("127.0.0.1:{port}")]).await;
    let main = fetch(client().get(server.url("/metrics"))).await;
    assert_eq!(main.status, 404, "not on the main listener");
    let (status, _) = (fetch(client().get(server.url("/healthz"))).await.status, ());
    assert_eq!(status, 200);
    let (samples, _) = scrape_url(&format!("http://127.0.0.1:{port}/metrics")).await;
    // Requests to the main listener are still counted.
    assert!(requests(&samples, "unmatched", "GET", "4xx") >= 1.0);
    assert!(requests(&samples, "/healthz", "GET", "2xx") >= 1.0);
    let other = fetch(client().get(format!("http://127.0.0.1:{port}/api/v1/communities"))).await;
    assert_eq!(other.status, 404, "the metrics port serves nothing else");
    assert!(server.log_text().contains(&format!("127.0.0.1:{port}")), "the address is logged");
}

/// An IPv4 address of this machine that is not loopback, so a client
/// connecting to it is seen as coming from elsewhere (issue 26, item 13).
fn non_loopback_ipv4() -> std::net::Ipv4Addr {
    let mut found = None;
    let mut list: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs fills `list`, which is walked read-only and freed
    // once; each `ifa_addr` is read as a sockaddr_in only when AF_INET.
    unsafe {
        assert_eq!(libc::getifaddrs(&mut list), 0, "getifaddrs");
        let mut at = list;
        while !at.is_null() {
            let addr = (*at).ifa_addr;
            if !addr.is_null() && i32::from((*addr).sa_family) == libc::AF_INET {
                let v4 = &*(addr as *const libc::sockaddr_in);
                let ip = std::net::Ipv4Addr::from(u32::from_be(v4.sin_addr.s_addr));
                if !ip.is_loopback() && found.is_none() {
                    found = Some(ip);
                }
            }
            at = (*at).ifa_next;
        }
        libc::freeifaddrs(list);
    }
    found.expect("this test needs a non-loopback IPv4 address on the machine (any interface)")
}

/// issue 26, item 13: `/metrics` on the main listener tells local clients
/// only, unless `--metrics-access any`: not a client on another address,
/// nor one a reverse proxy on this machine forwarded.
#[tokio::test]
async fn metrics_on_the_main_listener_answer_local_clients_only_by_default() {
    let app = spawn_app().await;
    assert_eq!(fetch(client().get(app.url("/metrics"))).await.status, 200, "a local client");
    for header in ["x-forwarded-for", "forwarded", "x-real-ip"] {
        let r = fetch(client().get(app.url("/metrics")).header(header, "203.0.113.9")).await;
        assert_eq!(r.status, 403, "forwarded by a proxy ({header})");
        assert_error_shape("a forwarded /metrics", &r.json());
        assert_eq!(r.json()["error"]["code"], "metrics_local_only");
    }
    // The same server on an address other machines reach.
    let ip = non_loopback_ipv4();
    let listener = tokio::net::TcpListener::bind((ip, 0)).await.expect("bind");
    let outside = format!("http://{}/metrics", listener.local_addr().expect("addr"));
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(pith::server::run(listener, app.state.clone(), Duration::from_secs(30), async {
        let _ = stopped.await;
    }));
    let r = fetch(client().get(&outside)).await;
    assert_eq!(r.status, 403, "a client at {ip}");
    assert!(!String::from_utf8_lossy(&r.bytes).contains("pith_"), "no metric leaks");
    assert_eq!(fetch(client().get(outside.replace("/metrics", "/healthz"))).await.status, 200);
    // --metrics-access any
    app.state.metrics.set_public(true);
    assert_eq!(fetch(client().get(&outside)).await.status, 200);
    let r = fetch(client().get(app.url("/metrics")).header("x-forwarded-for", "203.0.113.9")).await;
    assert_eq!(r.status, 200);
    let _ = stop.send(());
    let _ = server.await;
    app.stop().await;
}

/// Prometheus itself scrapes `/metrics` without an error, and its queries
/// see Pith's counters move and its histograms make quantiles.
#[tokio::test]
async fn a_real_prometheus_scrapes_the_metrics_and_queries_them() {
    let app = spawn_app().await;
    app.community("rust").await;
    let topic = app.topic("rust", &app.admin_token, "Scraped").await;
    for _ in 0..5 {
        app.read_topic(topic, "best").await;
    }
    let prometheus = Prometheus::scraping(&app.addr, "/metrics").await;
    let target = prometheus.scraped_target().await;
    assert_eq!((&target["health"], &target["lastError"]), (&json!("up"), &json!("")), "{target}\n{}", prometheus.log());

    let reads = "pith_http_requests_total{route=\"/api/v1/topics/{id}\",method=\"GET\",status=\"2xx\"}";
    let result = prometheus.query(reads).await;
    let stored: f64 = result
        .first()
        .and_then(|r| r["value"][1].as_str())
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("{reads}: {result:?}"));
    assert!(stored >= 5.0, "five reads counted, Prometheus holds {stored}");
    let p50 = "histogram_quantile(0.5, sum by (le) (pith_http_request_duration_seconds_bucket))";
    let result = prometheus.query(p50).await;
    let quantile: f64 = result
        .first()
        .and_then(|r| r["value"][1].as_str())
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("{p50}: {result:?}"));
    assert!(quantile.is_finite() && quantile > 0.0, "a median latency from the buckets: {quantile}");
    // Every family Pith exposes reached Prometheus's own metadata.
    let metadata = prometheus.api("metadata").await;
    for (family, kind) in [("pith_http_requests", "counter"), ("pith_http_request_duration_seconds", "histogram")] {
        assert_eq!(metadata[family][0]["type"], kind, "{family}: {metadata}");
    }
    drop(prometheus);
    app.stop().await;
}
