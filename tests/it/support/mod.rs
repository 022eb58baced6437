//! What the tests share, apart from the tests themselves:
//!
//! - `helpers`: `spawn_app` (a real server on 127.0.0.1:0 over a fresh
//!   SQLite file), request helpers, the error-shape checks.
//! - `child`: the real `pith` binary as a child process.
//! - `pg`: a fresh PostgreSQL database per test (`TestDb`).
//! - `prom`: a strict parser of the Prometheus text format.
//! - `prometheus`: a real Prometheus server scraping a test's `/metrics`.
//! - `raw`: a server with explicit connection limits over raw sockets.
//! - `smtp`: a real SMTP server (aiosmtpd) and the mails it received.

#[allow(dead_code)] // each test module uses a different subset
pub mod child;
#[allow(dead_code)]
pub mod helpers;
pub mod pg;
pub mod prom;
pub mod prometheus;
pub mod raw;
#[allow(dead_code)]
pub mod smtp;
