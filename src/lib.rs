//! Pith: a Reddit-style forum that fits on a Raspberry Pi.
//!
//! # Layout
//! - `config`: the command line (clap), every setting with a default.
//! - `config_file`: the TOML config file, and each setting's source.
//! - `model`: domain types and validated input newtypes.
//! - `store`: the `Store` trait and its SQLite backend (writer thread with
//!   group commit, reader pool, checkpointer).
//! - `cache`: rendered topic responses with gzip variants and ETags.
//! - `cluster`: the bus between nodes sharing one PostgreSQL (cache
//!   invalidations and live events; LISTEN/NOTIFY or NATS).
//! - `markdown`: user Markdown to sanitized HTML (pulldown-cmark, ammonia).
//! - `auth`: argon2id passwords, bearer tokens, the token cache.
//! - `http`: the axum router, extractors and route modules.
//! - `error`: `AppError`, the JSON error shape.
//! - `live`: live updates over WebSocket and SSE (hub, hand-written
//!   framing, one small task per socket, the `bench ws` load generator).
//! - `web`: the HTML forum (pages, cookie sessions, CSRF, assets, feeds).
//! - `metrics`: Prometheus metrics and `/metrics`; `logging`: log settings
//!   and request ids.
//! - `memory`: glibc malloc tuning (arenas, trimming after start-up).
//! - `migrate`: `pith migrate`, SQLite <-> PostgreSQL with verification.
//! - `serve`, `seed`, `users`, `bench`, `backup` (and restore): the subcommands.

pub mod auth;
pub mod backup;
pub mod bench;
pub mod cache;
pub mod cluster;
pub mod config;
pub mod config_file;
pub mod error;
pub mod http;
pub mod live;
pub mod logging;
pub mod markdown;
pub mod memory;
pub mod metrics;
pub mod migrate;
pub mod model;
pub mod seed;
pub mod serve;
pub mod store;
pub mod users;
pub mod web;
