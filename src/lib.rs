//! Pith: a Reddit-style forum that fits on a Raspberry Pi.
//!
//! # Layout
//! The modules in layers, bottom to top. A module uses the ones below it,
//! never the ones above, and not its siblings in the same layer;
//! `tests/it/layers.rs` holds the code to this order.
//!
//! 0. `priority`: the lower CPU priority of threads whose work can wait.
//! 1. `media`: pictures checked, decoded and re-encoded, their
//!    content-addressed names and files, the pool they are decoded on.
//! 2. Foundations: `settings` (value parsers every module's settings
//!    share), `markdown` (user Markdown to sanitized HTML), `logging` (log
//!    settings, request ids), `memory` (glibc malloc tuning), `machine`
//!    (the memory, cores and open files the process is given), `tls13`
//!    (TLS 1.3 connections: rustls's handshake, then records sealed and
//!    opened by hand with the keys rustls hands over).
//! 3. `model`: domain types, validated input, sorts, `Change` (what a
//!    committed write did) and `policy` (who may do what, as pure rules).
//! 4. `store`: the `Store` trait and its SQLite and PostgreSQL backends;
//!    they fetch facts and run SQL in one transaction, never decide.
//! 5. `cache` (rendered topic responses with compressed variants and
//!    ETags) and `live` (the hub, frames and connections of live updates).
//! 6. `cluster` (carries `Change`s between nodes, hands received ones to a
//!    callback) and `metrics` (records and samples Prometheus metrics).
//! 7. `app`: `App`/`AppState`, the forum's operations, and `apply`, the
//!    one place a `Change` takes effect (cache, live, bus).
//! 8. `net`: the accept loop, parked connections and the fast path, TLS,
//!    connection caps.
//! 9. `api` (the JSON API), `web` (the HTML forum) and `activitypub`
//!    (federation's routes): siblings, each calls `app`, none calls another.
//! 10. `server`: the whole router, and `run(listener, shutdown)`.
//! 11. The commands, in order: `config` (each command's arguments, which
//!     gather each module's settings), `backup` (and restore), then
//!     `serve`, `seed`, `users`, `instances` (`pith federation`) and
//!     `migrate`, then `bench`, and last
//!     `config_file` (the command line `Cli`, the TOML file, each
//!     setting's source).

pub mod activitypub;
pub mod api;
pub mod app;
pub mod backup;
pub mod bench;
pub mod cache;
pub mod cluster;
pub mod config;
pub mod config_file;
pub mod instances;
pub mod live;
pub mod logging;
pub mod machine;
pub mod markdown;
pub mod media;
pub mod memory;
pub mod metrics;
pub mod migrate;
pub mod model;
pub mod net;
pub mod priority;
pub mod seed;
pub mod serve;
pub mod server;
pub mod settings;
pub mod store;
pub mod tls13;
pub mod users;
pub mod web;
