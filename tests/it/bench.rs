//! The bench commands with the real binary on tiny loads: `pith bench
//! write` finds every acknowledged insert afterwards; `pith bench http`
//! reports sane numbers against `pith bench hello` and `pith bench plot`
//! draws them as SVG; the C design of bench/c builds, serves pith's JSON
//! from a seeded pith.db and stores posts the way pith does; bench/run.sh
//! loads the three servers and tabulates them; bench/ab.sh runs builds on
//! fresh copies of one data set and tabulates them; bench/startup.py times
//! start-up; `pith bench deliver` and `pith bench inbound` drive a
//! federated server with simulated remote ones.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};

use crate::support::child::{Server, free_port, pith, run_pith, user_add};
use crate::support::helpers::{client, fetch};

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

/// A child process killed and reaped when dropped.
struct Guard(std::process::Child);

impl Drop for Guard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Waits until something listens on `port`, failing if `child` exits first.
async fn wait_listening(child: &mut Guard, port: u16) {
    for _ in 0..500 {
        if tokio::net::TcpStream::connect(("127.0.0.1", port)).await.is_ok() {
            return;
        }
        assert!(child.0.try_wait().expect("try_wait").is_none(), "the server exited before listening");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    panic!("nothing listens on port {port} after 10 s");
}

/// An open loop sends on its timetable (`bench::pacer`), whatever the
/// answers: 4 connections at 400 req/s owe exactly 400 requests in a
/// second, each one answered, failed or counted as unfinished.
#[tokio::test]
async fn bench_http_open_loop_accounts_for_every_request_due_in_the_window() {
    let port = free_port();
    let hello = pith().args(["bench", "hello", "--listen", &format!("127.0.0.1:{port}")]).spawn().expect("spawn");
    let mut hello = Guard(hello);
    wait_listening(&mut hello, port).await;
    let url = format!("http://127.0.0.1:{port}");
    let args = ["bench", "http", "--url", &url, "--connections", "4", "--duration", "1s", "--warmup", "200ms"];
    let more = ["--topics", "10", "--rate", "400", "--json"];
    let args: Vec<&OsStr> = args.iter().chain(more.iter()).map(OsStr::new).collect();
    let out = run_pith(&args).await;
    assert!(out.status.success(), "bench http failed: {}", String::from_utf8_lossy(&out.stderr));
    let s: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON summary");
    assert_eq!(s["coordinated_omission_corrected"], true, "{s}");
    let count = |v: &serde_json::Value| v.as_u64().expect("a count");
    let answered = count(&s["reads"]["responses"]);
    let accounted = answered + count(&s["total"]["errors"]) + count(&s["unfinished"]);
    assert_eq!(accounted, 400, "{s}");
    // A timer that lost a wake-up stalls its connection for good (its
    // requests then count as unfinished): hello answers 400 req/s with
    // ease, so at least half must come back.
    assert!(answered >= 200, "{s}");
}

#[tokio::test]
async fn bench_http_reports_a_tiny_mixed_load_and_plot_draws_it_as_svg() {
    let dir = tempfile::tempdir().expect("tempdir");
    let port = free_port();
    let hello = pith().args(["bench", "hello", "--listen", &format!("127.0.0.1:{port}")]).spawn().expect("spawn");
    let mut hello = Guard(hello);
    wait_listening(&mut hello, port).await;
    let url = format!("http://127.0.0.1:{port}");
    let pid = hello.0.id().to_string();
    let args = ["bench", "http", "--url", &url, "--connections", "4", "--duration", "1s", "--warmup", "200ms"];
    let more = ["--topics", "10", "--mix", "50:50", "--token", "t", "--label", "hello", "--server-pid", &pid, "--json"];
    let args: Vec<&OsStr> = args.iter().chain(more.iter()).map(OsStr::new).collect();
    let out = run_pith(&args).await;
    assert!(out.status.success(), "bench http failed: {}", String::from_utf8_lossy(&out.stderr));
    let s: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON summary");
    assert_eq!(s["write_ratio"], 0.5, "{s}");
    assert!(s["reads"]["responses"].as_u64().expect("reads") > 0, "{s}");
    assert!(s["writes"]["responses"].as_u64().expect("writes") > 0, "{s}");
    assert_eq!(s["total"]["errors"], 0, "{s}");
    assert!(s["total"]["mb_per_s"].as_f64().expect("MB/s") > 0.0, "{s}");
    let l = &s["reads"]["latency_ms"];
    let at = |k: &str| l[k].as_f64().expect("a latency");
    assert!(0.0 < at("p50") && at("p50") <= at("p90") && at("p90") <= at("p99") && at("p99") <= at("max"), "{l}");
    let (rss, peak) = (s["server_rss_mb"].as_f64().expect("rss"), s["server_peak_rss_mb"].as_f64().expect("peak"));
    assert!(rss > 0.0 && peak >= rss, "{s}");

    let json = dir.path().join("run.json");
    std::fs::write(&json, &out.stdout).expect("write JSON");
    let svg = dir.path().join("plot.svg");
    let args: Vec<&OsStr> =
        vec!["bench".as_ref(), "plot".as_ref(), json.as_os_str(), "--out".as_ref(), svg.as_os_str()];
    let out = run_pith(&args).await;
    assert!(out.status.success(), "bench plot failed: {}", String::from_utf8_lossy(&out.stderr));
    let text = std::fs::read_to_string(&svg).expect("the SVG file");
    let doc = roxmltree::Document::parse(&text).expect("well-formed XML");
    assert_eq!(doc.root_element().tag_name().name(), "svg");
    assert_eq!(doc.root_element().tag_name().namespace(), Some("http://www.w3.org/2000/svg"));
    let rects = doc.descendants().filter(|n| n.has_tag_name("rect")).count();
    assert!(rects >= 4, "a background, a req/s bar and two latency bars: {text}");
    assert!(doc.descendants().any(|n| n.text().is_some_and(|t| t.starts_with("hello · 4 conns"))), "{text}");
}

#[tokio::test]
async fn bench_ab_runs_each_build_on_a_fresh_copy_and_tabulates_rate_cpu_and_memory() {
    let port = free_port();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("bench/ab.sh");
    let mut command = tokio::process::Command::new("bash");
    command
        .arg(&script)
        .arg(format!("one={}", env!("CARGO_BIN_EXE_pith")))
        .arg(format!("two={}", env!("CARGO_BIN_EXE_pith")))
        .envs([("DURATION", "1"), ("WARMUP", "1"), ("REPEAT", "1"), ("CONNECTIONS", "8"), ("SCALE", "0.02")])
        // An open loop, its load driven by the second build's generator.
        .envs([("RATE", "400"), ("WRITE_RATIO", "0.2")])
        .env("BENCH_BIN", env!("CARGO_BIN_EXE_pith"))
        .env("PORT", port.to_string());
    let stdout = run_bench_script(command).await;
    let rows: Vec<Vec<&str>> = stdout
        .lines()
        .filter(|l| l.starts_with("| one |") || l.starts_with("| two |"))
        .map(|l| l.split('|').map(str::trim).collect())
        .collect();
    assert_eq!(rows.len(), 2, "a row per build: {stdout}");
    assert!(stdout.contains("open loop at 400 req/s"), "{stdout}");
    for row in rows {
        let number = |i: usize| row[i].trim_end_matches(" MB").replace(',', "").parse::<f64>().expect(row[i]);
        let ms = |i: usize| row[i].trim_end_matches("ms").parse::<f64>().expect(row[i]);
        assert!(number(3) > 0.0 && number(4) > 0.0, "a rate and CPU per request: {row:?}");
        // An open loop never sends faster than its timetable.
        assert!(number(3) <= 400.0, "at most RATE req/s: {row:?}");
        assert!(0.0 < ms(5) && ms(5) <= ms(6), "read p50 and p99: {row:?}");
        assert!(number(7) > 0.0, "posts were made: {row:?}");
        assert!(number(8) > 0.0 && number(9) > 0.0, "peak RSS and anonymous memory: {row:?}");
        assert_eq!(row[11], "0", "no errors: {row:?}");
        assert!(row[12].contains("pith-writer=") && row[12].contains("tokio-rt-worker="), "threads by name: {row:?}");
        // Written to storage per committed write: WAL frames of 4 KB and more
        // (the test's data lives on this machine's ext4, not a tmpfs).
        assert!(number(13) >= 4.0, "disk KB per write: {row:?}");
    }
    let usage = tokio::process::Command::new("bash").arg(&script).arg("not-a-pair").output().await.expect("run");
    assert_eq!(usage.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&usage.stderr).contains("expected LABEL=BINARY"));
}

#[tokio::test]
async fn bench_run_tabulates_pith_hello_and_the_c_design_and_says_which_server_did_not_last() {
    let out_dir = tempfile::tempdir().expect("tempdir");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("bench/run.sh");
    // A second pith build (EXTRA_PITH, run after pith in each round) that is stopped once the
    // hello run after its own has begun: its run counts, but it is gone when run.sh reads the
    // peak RSS. `exec` keeps the wrapper's pid, which run.sh watches, for pith.
    let dies = out_dir.path().join("dies.sh");
    std::fs::write(
        &dies,
        format!(
            "#!/bin/sh\nif [ \"$1\" = serve ]; then\n  (for _ in $(seq 600); do [ -e \"$OUT\"/03-hello-4-gzip_no.json ] && \
             break; sleep 0.1; done; kill $$) </dev/null >/dev/null 2>&1 &\nfi\nexec {} \"$@\"\n",
            env!("CARGO_BIN_EXE_pith")
        ),
    )
    .expect("write the wrapper");
    std::fs::set_permissions(&dies, std::os::unix::fs::PermissionsExt::from_mode(0o755)).expect("chmod");
    let ports =
        [("PORT", free_port()), ("HELLO_PORT", free_port()), ("C_PORT", free_port()), ("EXTRA_PORT", free_port())];
    let mut command = tokio::process::Command::new("bash");
    command
        .arg(&script)
        .envs([("DURATION", "1"), ("WARMUP", "1"), ("REPEAT", "1"), ("CONNECTIONS", "4"), ("SCALE", "0.02")])
        .envs([("WRITE_RATIO", "0.2"), ("C_THREADS", "2"), ("STOP_WAIT", "5")])
        .envs(ports.iter().map(|(k, v)| (*k, v.to_string())))
        .env("PITH_BIN", env!("CARGO_BIN_EXE_pith"))
        .env("EXTRA_PITH", format!("dies={}", dies.display()))
        .env("OUT", out_dir.path());
    let stdout = run_bench_script(command).await;
    let header = stdout.lines().find(|l| l.starts_with("| server |")).expect("a table");
    assert!(header.contains("vs hello") && header.contains("vs c"), "{header}");
    for server in ["pith", "dies", "hello", "c"] {
        let row = table_row(&stdout, &format!("| {server} |"), false);
        assert!(row[5].parse::<f64>().expect("req/s") > 0.0, "{row:?}");
        assert_eq!(row[row.len() - 3], "0", "no non-2xx: {row:?}");
        assert!(row[row.len() - 2].starts_with('0'), "no errors: {row:?}");
        let peak = stdout.lines().find(|l| l.starts_with(&format!("- {server}: "))).expect("a peak RSS line");
        if server == "dies" {
            assert!(peak.contains("exited before the end of the runs"), "{peak}");
        } else {
            assert!(peak.ends_with(" MB"), "{peak}");
        }
    }
    let svg = std::fs::read_to_string(out_dir.path().join("plot.svg")).expect("the plot");
    assert!(roxmltree::Document::parse(&svg).is_ok(), "well-formed SVG");
    // Every server it started is stopped: nothing listens on the ports any more.
    for (name, port) in ports {
        assert!(std::net::TcpStream::connect(("127.0.0.1", port)).is_err(), "{name} {port} still listening");
    }
}

/// `SERVERS="pith nginx"`: nginx serves, with sendfile, the bytes pith
/// answers for each topic (the script checks one), reads only, and every
/// run gets its ratio against it.
#[tokio::test]
async fn bench_run_sets_pith_against_nginx_serving_the_same_topic_bytes() {
    let out_dir = tempfile::tempdir().expect("tempdir");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("bench/run.sh");
    let ports = [("PORT", free_port()), ("HELLO_PORT", free_port()), ("NGINX_PORT", free_port())];
    let mut command = tokio::process::Command::new("bash");
    command
        .arg(&script)
        .envs([("DURATION", "1"), ("WARMUP", "1"), ("REPEAT", "1"), ("CONNECTIONS", "4"), ("SCALE", "0.02")])
        .envs([("DATASET", "heavy"), ("SERVERS", "pith nginx"), ("STOP_WAIT", "5"), ("PLOT", "no")])
        .envs(ports.iter().map(|(k, v)| (*k, v.to_string())))
        .env("PITH_BIN", env!("CARGO_BIN_EXE_pith"))
        .env("OUT", out_dir.path());
    let stdout = run_bench_script(command).await;
    let header = stdout.lines().find(|l| l.starts_with("| server |")).expect("a table");
    assert!(header.contains("vs nginx"), "{header}");
    let nginx = table_row(&stdout, "| nginx |", false);
    assert!(nginx[5].parse::<f64>().expect("req/s") > 0.0, "{nginx:?}");
    assert_eq!(nginx[14], "0.0", "no posts sent to nginx: {nginx:?}");
    assert_eq!(nginx[nginx.len() - 3], "0", "no non-2xx: {nginx:?}");
    let pith = table_row(&stdout, "| pith |", false);
    assert!(pith[7].parse::<f64>().expect("ratio to nginx") > 0.0, "{pith:?}");
    assert_eq!(pith[pith.len() - 3], "0", "no non-2xx: {pith:?}");
    for (name, port) in ports {
        assert!(std::net::TcpStream::connect(("127.0.0.1", port)).is_err(), "{name} {port} still listening");
    }
}

/// `QUOTA=N`: each server pinned to core 0 and held there to N % of it by
/// a cgroup CPU quota, which is removed after the run; a `QUOTA` that is no
/// percentage from 5 to 100 is refused before anything starts.
#[tokio::test]
async fn bench_run_holds_each_server_to_its_cpu_quota_and_refuses_a_bad_one() {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("bench/run.sh");
    for bad in ["abc", "0", "101", "50%"] {
        let out = tokio::process::Command::new("bash")
            .arg(&script)
            .env("QUOTA", bad)
            .env("PITH_BIN", env!("CARGO_BIN_EXE_pith"))
            .output()
            .await
            .expect("run");
        assert_eq!(out.status.code(), Some(2), "QUOTA={bad}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains("QUOTA must be a percentage, 5-100"), "QUOTA={bad}: {stderr}");
    }
    let groups = || {
        ["/sys/fs/cgroup", "/sys/fs/cgroup/cpu"]
            .iter()
            .filter_map(|d| std::fs::read_dir(d).ok())
            .flatten()
            .filter_map(|e| e.ok().map(|e| e.file_name().to_string_lossy().into_owned()))
            .filter(|n| n.starts_with("pith-bench-"))
            .count()
    };
    let before = groups();
    let out_dir = tempfile::tempdir().expect("tempdir");
    let mut command = tokio::process::Command::new("bash");
    command
        .arg(&script)
        .envs([("DURATION", "2"), ("WARMUP", "1"), ("REPEAT", "1"), ("CONNECTIONS", "50"), ("SCALE", "0.02")])
        .envs([("SERVERS", "pith"), ("QUOTA", "20"), ("STOP_WAIT", "5"), ("PLOT", "no")])
        .env("PORT", free_port().to_string())
        .env("PITH_BIN", env!("CARGO_BIN_EXE_pith"))
        .env("OUT", out_dir.path());
    let stdout = run_bench_script(command).await;
    assert!(stdout.contains("pinned to core 0 (load generator on core 1), each held to 20 % of that core"), "{stdout}");
    let header = table_row(&stdout, "| server |", false);
    let row = table_row(&stdout, "| pith |", false);
    let cpu = header.iter().position(|h| *h == "server CPU").expect("a server CPU column");
    let percent = row[cpu].trim_end_matches(" %").parse::<f64>().expect("server CPU");
    assert!(percent > 0.0 && percent <= 25.0, "held to its 20 %: {row:?}");
    assert_eq!(groups(), before, "the run's cgroup is removed");
}

/// The write-only mix: pith and the C design each take only posts, and
/// after each run, killed with SIGKILL, each has stored every post it
/// acknowledged; a post acknowledged but not stored fails the script.
#[tokio::test]
async fn bench_run_write_mix_finds_every_acknowledged_post_after_kill_9_and_fails_when_one_is_missing() {
    let out_dir = tempfile::tempdir().expect("tempdir");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("bench/run.sh");
    let ports = [("PORT", free_port()), ("C_PORT", free_port()), ("EXTRA_PORT", free_port())];
    // A second "build" that acknowledges posts it never stores: a wrapper
    // whose database the script counts is a copy that the server never
    // writes (it serves a data dir of its own).
    let liar = out_dir.path().join("liar.sh");
    std::fs::write(
        &liar,
        format!(
            "#!/bin/sh\nif [ \"$1\" = serve ]; then\n  d=$(mktemp -d \"$OUT/liar.XXXXXX\") && cp -r \"$5\"/. \"$d\" && \
             exec {pith} serve \"$2\" \"$3\" --data-dir \"$d\"\nfi\nexec {pith} \"$@\"\n",
            pith = env!("CARGO_BIN_EXE_pith")
        ),
    )
    .expect("write the wrapper");
    std::fs::set_permissions(&liar, std::os::unix::fs::PermissionsExt::from_mode(0o755)).expect("chmod");
    let mut command = tokio::process::Command::new("bash");
    command
        .arg(&script)
        .envs([("MIX", "write"), ("DURATION", "1"), ("WARMUP", "1"), ("READ_FIRST", "1"), ("REPEAT", "1")])
        .envs([("CONNECTIONS", "4"), ("SCALE", "0.02"), ("C_THREADS", "2"), ("STOP_WAIT", "5"), ("PLOT", "no")])
        .envs(ports.iter().map(|(k, v)| (*k, v.to_string())))
        .env("PITH_BIN", env!("CARGO_BIN_EXE_pith"))
        .env("EXTRA_PITH", format!("liar={}", liar.display()))
        .env("OUT", out_dir.path());
    let out = command.env_remove("PITH_DATABASE").kill_on_drop(true).output();
    let out =
        tokio::time::timeout(std::time::Duration::from_secs(120), out).await.expect("done in 2 min").expect("run");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    // The script logs each step to stderr: what it was doing when it failed.
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "a lost post fails the run: {stdout}\nstderr:\n{stderr}");
    assert!(stdout.contains("write-only mix (100 % posts)"), "{stdout}");
    let header = stdout.lines().find(|l| l.starts_with("| server |")).expect("a table");
    assert!(header.contains("vs c") && !header.contains("vs hello"), "{header}");
    for server in ["pith", "c", "liar"] {
        let row = table_row(&stdout, &format!("| {server} |"), false);
        assert!(row[5].parse::<f64>().expect("req/s") > 0.0, "{row:?}");
        assert_eq!(row[row.len() - 3], "0", "no non-2xx: {row:?}");
        // The durability table comes after the main one, with rows of the same start.
        let kept = table_row(&stdout, &format!("| {server} | 4 |"), true);
        let acknowledged: u64 = kept[3].parse().expect("acknowledged");
        assert!(acknowledged > 0, "{kept:?}");
        if server == "liar" {
            assert!(kept[6].contains(&format!("{acknowledged} acknowledged posts missing")), "{kept:?}");
        } else {
            assert_eq!(kept[6], "all kept", "{kept:?}");
            let stored: u64 = kept[5].parse().expect("stored");
            let unanswered: u64 = kept[4].parse().expect("unanswered");
            assert!(acknowledged <= stored && stored <= acknowledged + unanswered, "{kept:?}");
        }
    }
    for (name, port) in ports {
        assert!(std::net::TcpStream::connect(("127.0.0.1", port)).is_err(), "{name} {port} still listening");
    }
}

#[tokio::test]
async fn bench_startup_times_serve_from_exec_to_serving_and_fails_on_a_server_that_never_serves() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    seed_tiny(&data).await;
    let seeded = std::fs::read(data.join("pith.db")).expect("the seeded file");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("bench/startup.py");
    let pith = env!("CARGO_BIN_EXE_pith");
    for data in [None, Some(&data)] {
        let mut command = tokio::process::Command::new("python3");
        command.arg(&script).args(["--runs", "2"]);
        if let Some(data) = data {
            command.arg("--data").arg(data);
        }
        command.arg(pith);
        let stdout = run_bench_script(command).await;
        let line = stdout.lines().find(|l| l.starts_with(pith)).unwrap_or_else(|| panic!("a line: {stdout}"));
        let median: f64 =
            line.split("median ").nth(1).and_then(|r| r.split(' ').next()).expect(line).parse().expect(line);
        assert!(median > 0.0 && line.ends_with("2 runs)"), "{line}");
    }
    // Each run served a copy: the seeded file is as it was.
    assert!(std::fs::read(data.join("pith.db")).expect("the seeded file") == seeded, "the original was changed");
    let out = tokio::process::Command::new("python3").arg(&script).arg("/bin/true").output().await.expect("run");
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("exited before serving"));
    // Bad arguments: a usage error (2) naming the problem, before anything runs.
    for (bad, says) in
        [(["--runs", "0"], "--runs must be at least 1"), (["--data", "/nonexistent"], "holds no pith.db")]
    {
        let out = tokio::process::Command::new("python3").arg(&script).args(bad).arg(pith).output().await.expect("run");
        assert_eq!(out.status.code(), Some(2), "{bad:?}");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains(says),
            "{bad:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

#[tokio::test]
async fn bench_http_rejects_a_bad_mix_with_a_readable_message() {
    let args: Vec<&OsStr> = ["bench", "http", "--mix", "99", "--topics", "3"].iter().map(OsStr::new).collect();
    let out = run_pith(&args).await;
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("is not a mix like 99:1"));
}

#[tokio::test]
async fn bench_hello_answers_the_body_size_asked_for_and_refuses_a_size_it_cannot_make() {
    let port = free_port();
    let args = ["bench", "hello", "--listen", &format!("127.0.0.1:{port}"), "--body-bytes", "9300"];
    let mut hello = Guard(pith().args(args).spawn().expect("spawn"));
    wait_listening(&mut hello, port).await;
    let reply = fetch(client().get(format!("http://127.0.0.1:{port}/api/v1/topics/3"))).await;
    assert_eq!(reply.status, 200);
    assert_eq!(reply.bytes.len(), 9300);
    assert_eq!(reply.json()["hello"], "world");

    let args: Vec<&OsStr> = ["bench", "hello", "--body-bytes", "5"].iter().map(OsStr::new).collect();
    let out = run_pith(&args).await;
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("--body-bytes") && stderr.contains("17"), "{stderr}");
}

/// Runs `pith ARGS` (at most a minute: these benches start servers) and
/// returns each line of its stdout as JSON.
async fn bench_json(args: &[&str]) -> Vec<serde_json::Value> {
    let mut cmd = tokio::process::Command::from(pith());
    cmd.args(args).stdin(std::process::Stdio::null()).kill_on_drop(true);
    let out = tokio::time::timeout(std::time::Duration::from_secs(60), cmd.output())
        .await
        .unwrap_or_else(|_| panic!("pith {args:?} did not finish within a minute"))
        .expect("run pith");
    assert!(out.status.success(), "pith {args:?} failed: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).lines().map(|l| serde_json::from_str(l).expect("a JSON line")).collect()
}

/// One topic to every follower of simulated servers: each inbox gets it
/// once, signed by the Group, first with an inbox per follower, then one
/// shared inbox per server.
#[tokio::test]
async fn bench_deliver_delivers_one_topic_to_every_follower_inbox_once() {
    let own = bench_json(&["bench", "deliver", "--hosts", "2", "--followers", "3", "--timeout", "30s", "--json"]).await;
    assert_eq!(own.len(), 1);
    let r = &own[0];
    assert_eq!((r["inboxes"].as_u64(), r["delivered"].as_u64()), (Some(6), Some(6)), "{r}");
    assert_eq!((r["most_to_one_inbox"].as_u64(), r["bad_signatures"].as_u64()), (Some(1), Some(0)), "{r}");
    assert!(r["seconds"].as_f64().expect("seconds") > 0.0 && r["rss_peak_mb"].as_f64().expect("rss") > 1.0, "{r}");
    let args = ["bench", "deliver", "--hosts", "2", "--followers", "3", "--shared-inbox", "--timeout", "30s", "--json"];
    let shared = bench_json(&args).await;
    assert_eq!((shared[0]["inboxes"].as_u64(), shared[0]["delivered"].as_u64()), (Some(2), Some(2)), "{shared:?}");
}

/// Signed votes and replies from simulated servers are all taken, and the
/// reads measured alone (before and after the set beside them) and beside
/// them all answer; `--rate` paces the set beside the reads (40 at 200/s:
/// the last is due after 195 ms).
#[tokio::test]
async fn bench_inbound_takes_every_signed_activity_and_measures_reads_beside_them() {
    let args = ["bench", "inbound", "--hosts", "2", "--users", "2", "--activities", "40", "--topics", "2"];
    let more = ["--readers", "2", "--read-alone", "300ms", "--rate", "200", "--json"];
    let r = &bench_json(&[&args[..], &more[..]].concat()).await[0];
    assert_eq!((r["taken"].as_u64(), r["refused"].as_u64()), (Some(80), Some(0)), "{r}");
    assert!(r["alone_per_second"].as_f64().expect("rate") > 0.0, "{r}");
    assert_eq!(r["rate"], 200.0, "{r}");
    let paced = r["beside_reads_per_second"].as_f64().expect("rate");
    assert!(paced > 0.0 && paced <= 40.0 / 0.195, "paced at 200/s: {r}");
    for reads in ["reads_alone_before_per_second", "reads_alone_after_per_second"] {
        assert!(r[reads].as_f64().expect("reads") > 0.0, "{r}");
    }
    let (before, after) = (r["reads_alone_before_per_second"].as_f64(), r["reads_alone_after_per_second"].as_f64());
    let mean = (before.unwrap_or(0.0) + after.unwrap_or(0.0)) / 2.0;
    assert!((r["reads_alone_per_second"].as_f64().expect("reads") - mean).abs() < 1e-6, "their mean: {r}");
    assert_eq!(r["read_failures"], 0, "{r}");
}

/// A rate that is no positive number is refused before anything starts,
/// with a readable message and a non-zero exit.
#[tokio::test]
async fn bench_inbound_refuses_a_rate_that_is_no_positive_number() {
    for rate in ["0", "-5", "inf", "NaN", "fast"] {
        let flag = format!("--rate={rate}");
        let out = run_pith(&["bench", "inbound", flag.as_str()].map(OsStr::new)).await;
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "--rate {rate} accepted");
        assert!(stderr.contains("--rate"), "--rate {rate}: {stderr}");
    }
}

/// Runs a bench script (at most 2 minutes, without the caller's
/// PITH_DATABASE), checks that it succeeded and returns its stdout.
/// The cells of the first (or with `last`, the last) markdown table row
/// of `stdout` that starts with `start`.
fn table_row<'a>(stdout: &'a str, start: &str, last: bool) -> Vec<&'a str> {
    let mut rows = stdout.lines().filter(|l| l.starts_with(start));
    let row = if last { rows.next_back() } else { rows.next() };
    row.unwrap_or_else(|| panic!("a row starting {start}: {stdout}")).split('|').map(str::trim).collect()
}

async fn run_bench_script(mut command: tokio::process::Command) -> String {
    let out = command.env_remove("PITH_DATABASE").kill_on_drop(true).output();
    let out =
        tokio::time::timeout(std::time::Duration::from_secs(120), out).await.expect("done in 2 min").expect("run");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    stdout
}

/// Seeds the realistic data set at 1 % into the data dir `data` with `pith seed`.
async fn seed_tiny(data: &Path) {
    let mut args: Vec<&OsStr> =
        ["seed", "--dataset", "realistic", "--scale", "0.01", "--data-dir"].map(OsStr::new).to_vec();
    args.push(data.as_os_str());
    let seeded = run_pith(&args).await;
    assert!(seeded.status.success(), "seed: {}", String::from_utf8_lossy(&seeded.stderr));
}

/// Builds bench/c/cserver.c with gcc (test.sh installs gcc, libsqlite3-dev and libssl-dev).
fn build_c_server(dir: &Path) -> PathBuf {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("bench/c/cserver.c");
    let bin = dir.join("cserver");
    let out = std::process::Command::new("gcc")
        .args(["-O2", "-Wall", "-Werror", "-pthread", "-o"])
        .arg(&bin)
        .arg(&src)
        .args(["-lsqlite3", "-lcrypto"])
        .output()
        .expect("run gcc");
    assert!(out.status.success(), "gcc failed: {}", String::from_utf8_lossy(&out.stderr));
    bin
}

#[tokio::test]
async fn the_c_design_serves_pith_json_from_a_seeded_pith_db_and_stores_posts_like_pith() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    seed_tiny(&data).await;
    let token = user_add(&data, "cbench", false).await;
    // pith serve stores the rendered HTML of the seeded posts when it opens the file.
    let pith_server = Server::start(&data, dir.path().join("pith.log"), std::time::Duration::from_secs(30)).await;
    let bin = build_c_server(dir.path());
    let port = free_port();
    let c = std::process::Command::new(&bin)
        .arg(port.to_string())
        .arg(data.join("pith.db"))
        .arg("2")
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("spawn cserver");
    let mut c = Guard(c);
    wait_listening(&mut c, port).await;
    let base = format!("http://127.0.0.1:{port}");
    let http = client();

    // GET: the same JSON as pith's for the same topic.
    let from_c = fetch(http.get(format!("{base}/api/v1/topics/3"))).await;
    assert_eq!(from_c.status, 200);
    assert_eq!(from_c.header("connection"), Some("close"));
    let from_pith = fetch(http.get(pith_server.url("/api/v1/topics/3"))).await;
    assert_eq!(from_pith.status, 200);
    assert_eq!(from_c.json(), from_pith.json());
    assert!(!from_c.json()["posts"].as_array().expect("posts").is_empty());
    assert_eq!(fetch(http.get(format!("{base}/api/v1/topics/999999"))).await.status, 404);

    // POST: stored with escaped HTML; the post count and the search index follow.
    let before = from_c.json()["topic"]["post_count"].as_i64().expect("post_count");
    let body = serde_json::json!({"body": "zyzzyva from the C design <b>bold</b> & more"});
    let post = |tok: Option<&str>, topic: i64| {
        let mut req = http.post(format!("{base}/api/v1/topics/{topic}/posts")).json(&body);
        if let Some(t) = tok {
            req = req.bearer_auth(t);
        }
        fetch(req)
    };
    let created = post(Some(&token), 3).await;
    assert_eq!(created.status, 201, "{:?}", created.json());
    let p = created.json();
    assert_eq!(p["author"], "cbench");
    assert_eq!(p["body_html"], "<p>zyzzyva from the C design &lt;b&gt;bold&lt;/b&gt; &amp; more</p>\n");
    assert_eq!(post(None, 3).await.status, 401);
    assert_eq!(post(Some("not-a-token"), 3).await.status, 401);
    assert_eq!(post(Some(&token), 999_999).await.status, 404);
    let bad = fetch(http.post(format!("{base}/api/v1/topics/3/posts")).bearer_auth(&token).body("{\"body\": 7}")).await;
    assert_eq!(bad.status, 422);

    let after = fetch(http.get(format!("{base}/api/v1/topics/3"))).await.json();
    assert_eq!(after["topic"]["post_count"].as_i64(), Some(before + 1));
    assert!(after["posts"].as_array().expect("posts").iter().any(|q| q["id"] == p["id"]));
    let db = rusqlite::Connection::open(data.join("pith.db")).expect("open pith.db");
    let found: i64 = db
        .query_row("SELECT rowid FROM posts_fts WHERE posts_fts MATCH 'zyzzyva'", [], |r| r.get(0))
        .expect("the C design indexed the post as Pith does");
    assert_eq!(Some(found), p["id"].as_i64());
}

/// `pith bench ws` against an `https://` URL without the certificate to
/// trust says which flag it needs and exits non-zero, before connecting.
#[tokio::test]
async fn bench_ws_over_https_without_a_ca_says_which_flag_it_needs() {
    let args: Vec<&OsStr> =
        ["bench", "ws", "--url", "https://127.0.0.1:1", "--token", "x"].iter().map(OsStr::new).collect();
    let out = run_pith(&args).await;
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("--tls-ca"), "{stderr}");
    let args: Vec<&OsStr> = ["bench", "ws", "--url", "ftp://127.0.0.1:1"].iter().map(OsStr::new).collect();
    let out = run_pith(&args).await;
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("http:// or https://"));
}
