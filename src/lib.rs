//! Pith: a Reddit-style forum that fits on a Raspberry Pi.
//!
//! # Layout
//! The modules in layers, bottom to top. A module uses the ones below it,
//! never the ones above, and not its siblings in the same layer;
//! `tests/it/layers.rs` holds the code to this order.
//!
//! 0. `media`: pictures checked, decoded and re-encoded, their
//!    content-addressed names and files, the pool they are decoded on.
//! 1. Foundations: `settings` (value parsers every module's settings
//!    share), `markdown` (user Markdown to sanitized HTML), `logging` (log
//!    settings, request ids), `memory` (glibc malloc tuning).
//! 2. `model`: domain types, validated input, sorts, `Change` (what a
//!    committed write did) and `policy` (who may do what, as pure rules).
//! 3. `store`: the `Store` trait and its SQLite and PostgreSQL backends;
//!    they fetch facts and run SQL in one transaction, never decide.
//! 4. `cache` (rendered topic responses with compressed variants and
//!    ETags) and `live` (the hub, frames and connections of live updates).
//! 5. `cluster` (carries `Change`s between nodes, hands received ones to a
//!    callback) and `metrics` (records and samples Prometheus metrics).
//! 6. `app`: `App`/`AppState`, the forum's operations, and `apply`, the
//!    one place a `Change` takes effect (cache, live, bus).
//! 7. `net`: the accept loop, parked connections and the fast path, TLS,
//!    connection caps.
//! 8. `api` (the JSON API), `web` (the HTML forum) and `activitypub`
//!    (federation's routes): siblings, each calls `app`, none calls another.
//! 9. `server`: the whole router, and `run(listener, shutdown)`.
//! 10. The commands, in order: `config` (each command's arguments, which
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
pub mod seed;
pub mod serve;
pub mod server;
pub mod settings;
pub mod store;
pub mod users;
pub mod web;
