//! A real SMTP server for the email tests: aiosmtpd (installed by
//! tests/lib/smtp.sh into target/smtp-venv) running tests/lib/smtp_sink.py
//! on a 127.0.0.1 port, and the mails it received. A test that cannot
//! start it fails, saying how to install it.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

/// How long a test waits for a mail before failing.
pub const MAIL_PATIENCE: Duration = Duration::from_secs(60);

/// A running sink; dropping it kills the server.
pub struct Sink {
    child: Child,
    pub port: u16,
    dir: tempfile::TempDir,
}

/// One received mail.
#[derive(Debug, Clone)]
pub struct Mail {
    pub to: Vec<String>,
    pub subject: String,
    pub body: String,
}

impl Mail {
    /// The first link in the body whose path starts with `path`.
    pub fn link(&self, path: &str) -> String {
        self.body
            .split_whitespace()
            .find(|w| w.starts_with("http") && w.contains(path))
            .unwrap_or_else(|| panic!("no {path} link in the mail:\n{}", self.body))
            .to_owned()
    }

    /// The token at the end of the first link under `path`.
    pub fn token(&self, path: &str) -> String {
        let link = self.link(path);
        link.rsplit('/').next().unwrap_or_default().to_owned()
    }
}

fn python() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target"));
    target.join("smtp-venv/bin/python")
}

impl Sink {
    /// A sink on a free port.
    pub async fn start() -> Sink {
        Sink::start_on(crate::support::child::free_port()).await
    }

    /// A sink on `port` (a test's server may have been told it already).
    pub async fn start_on(port: u16) -> Sink {
        let python = python();
        assert!(
            python.exists(),
            "the email tests need aiosmtpd: run tests/lib/smtp.sh (test.sh does) to install it into {}",
            python.display()
        );
        let dir = tempfile::tempdir().expect("tempdir");
        let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/lib/smtp_sink.py");
        let mut child = Command::new(&python)
            .arg(script)
            .arg(dir.path())
            .arg(port.to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start the SMTP sink with {}: {e}", python.display()));
        let deadline = Instant::now() + Duration::from_secs(30);
        while !dir.path().join("ready").exists() {
            if let Some(status) = child.try_wait().expect("try_wait") {
                let mut err = String::new();
                if let Some(mut stderr) = child.stderr.take() {
                    use std::io::Read;
                    let _ = stderr.read_to_string(&mut err);
                }
                panic!("the SMTP sink exited with {status} before listening on port {port}:\n{err}");
            }
            assert!(Instant::now() < deadline, "the SMTP sink did not start listening on port {port}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        Sink { child, port, dir }
    }

    /// `--smtp-url` for this sink.
    pub fn url(&self) -> String {
        format!("smtp://127.0.0.1:{}", self.port)
    }

    /// Every mail received so far, in order.
    pub fn mails(&self) -> Vec<Mail> {
        let mut names: Vec<PathBuf> = std::fs::read_dir(self.dir.path())
            .expect("read the sink's dir")
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "json"))
            .collect();
        names.sort();
        names
            .iter()
            .map(|p| {
                let v: Value = serde_json::from_slice(&std::fs::read(p).expect("read mail")).expect("mail json");
                Mail {
                    to: v["to"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .filter_map(|t| t.as_str().map(str::to_owned))
                        .collect(),
                    subject: v["subject"].as_str().unwrap_or_default().to_owned(),
                    body: v["body"].as_str().unwrap_or_default().to_owned(),
                }
            })
            .collect()
    }

    /// Waits until `n` mails arrived in all; fails the test after
    /// `MAIL_PATIENCE`.
    pub async fn wait_for(&self, n: usize) -> Vec<Mail> {
        let deadline = Instant::now() + MAIL_PATIENCE;
        loop {
            let mails = self.mails();
            if mails.len() >= n {
                return mails;
            }
            assert!(Instant::now() < deadline, "waited for {n} mails, got {}: {mails:#?}", mails.len());
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// The last mail of `n` in all, once it arrived.
    pub async fn nth(&self, n: usize) -> Mail {
        self.wait_for(n).await.swap_remove(n - 1)
    }
}

impl Drop for Sink {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
