//! The real `pith` binary as a child process, shared by the tests that
//! need one (`crash`, `faults`): one-shot commands, `pith user add`, and a
//! `pith serve` that is killed and reaped when dropped.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Child, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use crate::support::helpers::client;

const PITH: &str = env!("CARGO_BIN_EXE_pith");

/// How long a one-shot command gets to exit.
const ONE_SHOT: Duration = Duration::from_secs(10);

pub fn pith() -> std::process::Command {
    let mut cmd = std::process::Command::new(PITH);
    cmd.env_remove("PITH_DATABASE").env_remove("RUST_BACKTRACE").env("PITH_LOG", "info");
    cmd
}

/// Runs a one-shot `pith` command to completion, killing it after `ONE_SHOT`.
pub async fn run_pith(args: &[&OsStr]) -> std::process::Output {
    let mut cmd = tokio::process::Command::from(pith());
    cmd.args(args).stdin(Stdio::null()).kill_on_drop(true);
    let shown = args.iter().map(|a| a.to_string_lossy()).collect::<Vec<_>>().join(" ");
    match tokio::time::timeout(ONE_SHOT, cmd.output()).await {
        Ok(out) => out.unwrap_or_else(|e| panic!("run pith {shown}: {e}")),
        Err(_) => panic!("pith {shown} did not exit within {ONE_SHOT:?}"),
    }
}

/// `pith user add NAME --data-dir DIR [--admin]`; returns the printed token.
pub async fn user_add(data: &Path, name: &str, admin: bool) -> String {
    let mut args: Vec<&OsStr> =
        vec!["user".as_ref(), "add".as_ref(), name.as_ref(), "--data-dir".as_ref(), data.as_ref()];
    if admin {
        args.push("--admin".as_ref());
    }
    let out = run_pith(&args).await;
    assert!(out.status.success(), "pith user add {name}: {}", String::from_utf8_lossy(&out.stderr));
    let stdout = String::from_utf8(out.stdout).expect("utf-8");
    stdout.lines().last().expect("a token line").trim().to_owned()
}

/// A free port: bind port 0, note the port, let it go.
/// A port nothing listens on now and that no earlier call returned: the
/// kernel may hand the same free port to two binds in a row, and two
/// servers (or a server and its metrics listener) told the same port make
/// one of them fail to start.
pub fn free_port() -> u16 {
    static GIVEN: std::sync::Mutex<Vec<u16>> = std::sync::Mutex::new(Vec::new());
    let mut given = GIVEN.lock().unwrap_or_else(|e| e.into_inner());
    loop {
        let port = std::net::TcpListener::bind("127.0.0.1:0").expect("bind").local_addr().expect("addr").port();
        if !given.contains(&port) {
            given.push(port);
            return port;
        }
    }
}

/// A running `pith serve`. Dropping it kills the process and waits for it,
/// so a mount under it can be undone right after.
pub struct Server {
    child: Child,
    pub base: String,
    log: PathBuf,
    /// How long it gets to start or to stop after SIGTERM.
    patience: Duration,
}

impl Server {
    /// Serves `data`, logging to `log` (keep the log off a tmpfs that is
    /// about to be filled); waits until `/healthz` answers.
    pub async fn start(data: &Path, log: PathBuf, patience: Duration) -> Server {
        Server::start_with(data, log, patience, |_| {}).await
    }

    /// `start` with more arguments or environment, set by `configure`.
    pub async fn start_with(
        data: &Path,
        log: PathBuf,
        patience: Duration,
        configure: impl FnOnce(&mut std::process::Command),
    ) -> Server {
        let port = free_port();
        let mut cmd = pith();
        // Crash and fault tests write hard from one address.
        cmd.args(["serve", "--rate-limits", "false", "--listen", &format!("127.0.0.1:{port}"), "--data-dir"])
            .arg(data)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).expect("log file"));
        configure(&mut cmd);
        let child = cmd.spawn().expect("spawn pith serve");
        let mut server = Server { child, base: format!("http://127.0.0.1:{port}"), log, patience };
        let deadline = Instant::now() + patience;
        let probe = client();
        loop {
            if let Ok(res) = probe.get(server.url("/healthz")).send().await
                && res.status() == 200
            {
                return server;
            }
            if let Some(status) = server.child.try_wait().expect("try_wait") {
                panic!("pith serve exited with {status} before serving:\n{}", server.log_text());
            }
            assert!(Instant::now() < deadline, "pith serve never became healthy:\n{}", server.log_text());
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Resident memory in bytes (`VmRSS`).
    pub fn rss(&self) -> u64 {
        rss_of(self.child.id())
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{}", self.base, path)
    }

    /// SIGKILL: no chance to commit, checkpoint or close anything.
    pub fn kill9(&mut self) {
        self.child.kill().expect("SIGKILL");
        self.child.wait().expect("reap");
    }

    /// SIGTERM, then waits for the exit.
    pub async fn terminate(mut self) -> (ExitStatus, String) {
        let pid = self.child.id() as libc::pid_t;
        // SAFETY: `pid` is our own child, which has not been reaped yet.
        let sent = unsafe { libc::kill(pid, libc::SIGTERM) };
        assert_eq!(sent, 0, "kill(SIGTERM)");
        let deadline = Instant::now() + self.patience;
        loop {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                return (status, self.log_text());
            }
            assert!(Instant::now() < deadline, "pith serve ignored SIGTERM:\n{}", self.log_text());
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// A process's resident memory in bytes (`VmRSS`, as `pith bench` reads it).
pub fn rss_of(pid: u32) -> u64 {
    pith::bench::procstat::sample(Some(pid)).expect("/proc/PID/status").rss
}
