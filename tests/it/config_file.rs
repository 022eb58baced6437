//! The config file and `pith config`: flag > environment > file > default,
//! seen through `pith config --json` and through a running server; a bad
//! file is a clear error naming the file and the key.

use std::process::Stdio;
use std::time::{Duration, Instant};

use crate::support::child::{pith, run_pith};
use crate::support::helpers::client;

fn config_json(out: &std::process::Output) -> serde_json::Value {
    assert!(out.status.success(), "pith config: {}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).expect("JSON")
}

#[tokio::test]
async fn flag_beats_env_beats_file_beats_default_in_pith_config() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("pith.toml");
    std::fs::write(&file, "cache-mb = 100\nreaders = 5\nmax-batch = 11\nlive-ping-interval = \"3s\"\n").expect("write");
    let mut cmd = tokio::process::Command::from(pith());
    cmd.args(["config", "--json", "--max-batch", "7", "--data-dir"])
        .arg(dir.path())
        .env("PITH_READERS", "3")
        .env("PITH_MAX_BATCH", "9");
    let json = config_json(&cmd.output().await.expect("run"));
    let path = file.display().to_string();
    assert_eq!(json["cache-mb"], serde_json::json!({"value": "100", "source": "file", "from": path}));
    assert_eq!(json["live-ping-interval"]["value"], "3s");
    assert_eq!(json["readers"], serde_json::json!({"value": "3", "source": "env", "from": "PITH_READERS"}));
    assert_eq!(json["max-batch"], serde_json::json!({"value": "7", "source": "flag", "from": "--max-batch"}));
    assert_eq!(json["wal-limit-mb"], serde_json::json!({"value": "64", "source": "default", "from": null}));
    assert_eq!(json["tls-cert"]["value"], serde_json::Value::Null);
    assert_eq!(json["config"]["value"], path, "the default file found in the data dir");
}

#[tokio::test]
async fn an_empty_setting_in_the_environment_is_ignored_with_a_warning() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut cmd = tokio::process::Command::from(pith());
    cmd.args(["config", "--json", "--data-dir"])
        .arg(dir.path())
        .env("PITH_LISTEN", "")
        .env("PITH_READERS", "")
        .env("PITH_MAX_BATCH", "9");
    let out = cmd.output().await.expect("run");
    let json = config_json(&out);
    assert_eq!(json["listen"]["source"], "default", "{json}");
    assert_eq!(json["readers"]["source"], "auto", "sized from the machine when unset");
    assert_eq!(json["max-batch"], serde_json::json!({"value": "9", "source": "env", "from": "PITH_MAX_BATCH"}));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("PITH_LISTEN") && stderr.contains("PITH_READERS"), "named in a warning: {stderr}");
    assert!(!stderr.contains("PITH_MAX_BATCH"), "{stderr}");
}

#[tokio::test]
async fn a_running_server_takes_the_file_and_lets_the_environment_override_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let port = crate::support::child::free_port();
    let file = dir.path().join("site.toml");
    std::fs::write(&file, format!("listen = \"127.0.0.1:{port}\"\nsecure-cookies = true\n")).expect("write");
    let log = dir.path().join("serve.log");
    let mut child = pith()
        .args(["serve", "--rate-limits", "false", "--data-dir"])
        .arg(dir.path().join("data"))
        .env("PITH_CONFIG", &file)
        .env("PITH_SECURE_COOKIES", "false")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).expect("log"))
        .spawn()
        .expect("spawn");
    let http = client();
    let deadline = Instant::now() + Duration::from_secs(20);
    let res = loop {
        if let Ok(res) = http.get(format!("http://127.0.0.1:{port}/login")).send().await {
            break res;
        }
        assert!(child.try_wait().expect("try_wait").is_none(), "{}", std::fs::read_to_string(&log).unwrap_or_default());
        assert!(Instant::now() < deadline, "the server never listened on the file's address");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(res.status(), 200);
    let cookie = res.headers().get("set-cookie").expect("cookie").to_str().expect("ascii").to_owned();
    assert!(!cookie.contains("Secure"), "PITH_SECURE_COOKIES=false overrides the file: {cookie}");
    let text = std::fs::read_to_string(&log).expect("log");
    assert!(text.contains(&file.display().to_string()), "the start-up log names the file:\n{text}");
}

async fn config_error(toml: Option<&str>, name: &str) -> String {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join(name);
    if let Some(text) = toml {
        std::fs::write(&file, text).expect("write");
    }
    let out = run_pith(&["config".as_ref(), "--config".as_ref(), file.as_os_str()]).await;
    assert!(!out.status.success(), "a bad config file must fail");
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(err.contains(&file.display().to_string()), "the error names the file: {err}");
    err
}

#[tokio::test]
async fn a_bad_or_missing_config_file_is_an_error_naming_file_and_key() {
    config_error(None, "missing.toml").await;
    let err = config_error(Some("colour = \"blue\"\n"), "unknown.toml").await;
    assert!(err.contains("colour"), "{err}");
    let err = config_error(Some("listen = \n"), "broken.toml").await;
    assert!(err.contains("TOML"), "{err}");
    let err = config_error(Some("cache-mb = \"lots\"\n"), "value.toml").await;
    assert!(err.contains("cache-mb"), "{err}");
}

#[tokio::test]
async fn a_missing_default_file_in_the_data_dir_is_fine() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = run_pith(&["config".as_ref(), "--json".as_ref(), "--data-dir".as_ref(), dir.path().as_os_str()]).await;
    let json = config_json(&out);
    assert_eq!(json["cache-mb"]["source"], "auto");
}

/// The settings sized from the machine show the source `auto` and the
/// machine they were sized from; `--memory-mb` sizes them instead, and a
/// setting given explicitly is never overridden.
#[tokio::test]
async fn unset_sizes_come_from_the_machine_or_memory_mb_and_explicit_ones_win() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut cmd = tokio::process::Command::from(pith());
    cmd.args(["config", "--json", "--data-dir"]).arg(dir.path());
    let json = config_json(&cmd.output().await.expect("run"));
    for name in ["memory-mb", "cache-mb", "readers", "max-connections", "live-max-sockets", "live-max-pending-total-mb"]
    {
        assert_eq!(json[name]["source"], "auto", "{name}: {json}");
        assert!(json[name]["from"].as_str().is_some_and(|f| f.contains("open files")), "{name}: {json}");
    }
    let mut cmd = tokio::process::Command::from(pith());
    cmd.args(["config", "--json", "--memory-mb", "200", "--readers", "3", "--data-dir"]).arg(dir.path());
    let json = config_json(&cmd.output().await.expect("run"));
    assert_eq!(json["memory-mb"], serde_json::json!({"value": "200", "source": "flag", "from": "--memory-mb"}));
    assert_eq!(json["cache-mb"]["value"], "100", "half the budget: {json}");
    assert_eq!(json["cache-mb"]["source"], "auto");
    assert!(json["cache-mb"]["from"].as_str().is_some_and(|f| f.starts_with("--memory-mb 200")), "{json}");
    assert_eq!(json["live-max-pending-total-mb"]["value"], "25");
    assert_eq!(json["readers"], serde_json::json!({"value": "3", "source": "flag", "from": "--readers"}));
    let mut cmd = tokio::process::Command::from(pith());
    cmd.args(["config", "--memory-mb", "8", "--data-dir"]).arg(dir.path());
    let out = cmd.output().await.expect("run");
    assert!(!out.status.success(), "a budget under 16 MiB is refused");
    assert!(String::from_utf8_lossy(&out.stderr).contains("memory-mb"));
}

/// `pith config | head` stops reading early: the closed pipe is no error
/// for `pith config`, where `println!` used to panic with a backtrace.
#[test]
fn pith_config_into_a_pipe_closed_early_exits_cleanly() {
    let dir = tempfile::tempdir().expect("tempdir");
    for json in [false, true] {
        let mut cmd = pith();
        cmd.arg("config").arg("--data-dir").arg(dir.path());
        if json {
            cmd.arg("--json");
        }
        let mut child = cmd.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("spawn");
        // The reader goes away before pith writes anything.
        drop(child.stdout.take());
        let out = child.wait_with_output().expect("wait");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "json={json}: {:?}: {stderr}", out.status);
        assert!(!stderr.contains("panicked"), "json={json}: {stderr}");
    }
}

/// An allow-list entry that is not an origin would never match: it stops
/// start-up with a message naming it, from a flag and from the file alike.
#[tokio::test]
async fn a_live_allowed_origin_that_is_not_an_origin_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let args: [&std::ffi::OsStr; 5] = [
        "config".as_ref(),
        "--data-dir".as_ref(),
        dir.path().as_os_str(),
        "--live-allowed-origins".as_ref(),
        "https://ok.example,forum.example".as_ref(),
    ];
    let out = run_pith(&args).await;
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(err.contains("\"forum.example\" is not an origin"), "{err}");
    let err = config_error(Some("live-allowed-origins = \"ws://a.example/x\"\n"), "pith.toml").await;
    assert!(err.contains("\"ws://a.example/x\" is not an origin"), "{err}");
}

/// Issue 26's idle limits are settings like any other: a default, a flag,
/// a `PITH_*` variable and a file key, shown with their source.
#[tokio::test]
async fn the_session_idle_limits_are_settings_with_their_sources() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut cmd = tokio::process::Command::from(pith());
    cmd.args(["config", "--json", "--data-dir"]).arg(dir.path());
    let json = config_json(&cmd.output().await.expect("run"));
    assert_eq!(json["session-idle-days"], serde_json::json!({"value": "30", "source": "default", "from": null}));
    assert_eq!(json["api-idle-days"], serde_json::json!({"value": "365", "source": "default", "from": null}));

    std::fs::write(dir.path().join("pith.toml"), "session-idle-days = 7\n").expect("write");
    let mut cmd = tokio::process::Command::from(pith());
    cmd.args(["config", "--json", "--data-dir"]).arg(dir.path()).env("PITH_API_IDLE_DAYS", "0");
    let json = config_json(&cmd.output().await.expect("run"));
    assert_eq!(json["session-idle-days"]["value"], "7");
    assert_eq!(json["session-idle-days"]["source"], "file");
    assert_eq!(json["api-idle-days"], serde_json::json!({"value": "0", "source": "env", "from": "PITH_API_IDLE_DAYS"}));

    let err = config_error(Some("session-idle-days = -1\n"), "pith.toml").await;
    assert!(err.contains("session-idle-days"), "{err}");
}

/// The Debian package's /etc/pith/pith.toml is `pith config --template`,
/// kept in step: every setting, commented out at its default. Uncommenting
/// every line that has a value gives a file `pith config` accepts, each of
/// those settings then coming from the file.
#[tokio::test]
async fn the_packaged_config_file_is_the_template_and_every_default_in_it_is_valid() {
    let out = run_pith(&["config".as_ref(), "--template".as_ref()]).await;
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let template = String::from_utf8(out.stdout).expect("UTF-8");
    let packaged = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/packaging/deb/pith.toml"))
        .expect("packaging/deb/pith.toml");
    assert!(
        template == packaged,
        "packaging/deb/pith.toml is stale: run `cargo run -- config --template > packaging/deb/pith.toml`"
    );
    // A setting's line is `#key = value`; its help lines start with `# `.
    let settings = || {
        template
            .lines()
            .filter(|l| !l.starts_with("# "))
            .filter_map(|l| l.strip_prefix('#')?.split_once(" ="))
            .map(|(k, v)| (k, v.trim()))
    };
    let keys: Vec<&str> = settings().map(|(k, _)| k).collect();
    for key in ["listen", "data-dir", "cache-mb", "memory-mb", "tls-cert", "public-url", "rate-limits"] {
        assert!(keys.contains(&key), "{key} missing from the template");
    }
    let valued: Vec<(&str, &str)> = settings().filter(|(_, v)| !v.is_empty() && !v.starts_with('#')).collect();
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("all.toml");
    let text: String = valued.iter().map(|(k, v)| format!("{k} = {v}\n")).collect();
    std::fs::write(&file, &text).expect("write");
    let out = run_pith(&["config".as_ref(), "--json".as_ref(), "--config".as_ref(), file.as_os_str()]).await;
    let json = config_json(&out);
    for (key, _) in &valued {
        assert_eq!(json[*key]["source"], "file", "{key}: {}", json[*key]);
    }
    assert!(valued.len() > 30, "{} settings with defaults", valued.len());
}
