//! Integration tests: a real server on a real port with a real SQLite file.
//!
//! - `api`: topics and posts end to end, the health check.
//! - `accounts`: register, login, logout, me, profiles, every 401.
//! - `communities`: list, show, create (admins only).
//! - `votes`: scores on topics and posts, hot ordering.
//! - `listings`: hot/new/top, time windows, cursor walks, limits.
//! - `cache`: ETags, 304s, gzip, freshness after each kind of write.
//! - `bad_input`: every malformed request is a 4xx with the error shape.
//! - `concurrency`: many writers and readers; read-your-write.
//! - `crash`: the real binary under SIGKILL and SIGTERM.
//! - `moderation`: moderators, removals, locks, bans, reports, the mod log,
//!   registration modes.
//! - `store`: the `Store` trait as one story, for every backend.
//! - `pg`: a fresh PostgreSQL database per test (`TestDb`).
//! - `postgres`: the API, `pith seed` and `pith user add` on PostgreSQL.
//! - `search`: full-text search, and the HTML stored with every body.
//! - `fuzz_regressions`: saved fuzz inputs through the fuzz targets' checks.
//! - `cluster`: two nodes on one PostgreSQL (LISTEN/NOTIFY and NATS buses),
//!   and `pith migrate` SQLite -> PostgreSQL -> SQLite.
//! - `pages`: the HTML forum: pages, forms, sessions, CSRF, assets, feeds.
//! - `metrics`: `/metrics` in the Prometheus text format, its settings;
//!   `logging`: JSON logs with request ids from the real binary; `prom`: the
//!   strict text-format parser the metrics tests use.
//! - `idle`: keep-alive connections parked between requests (no hyper
//!   buffers while idle): pipelining, split requests, h2c, shutdown, memory.
//! - `tls`: TLS 1.3, HTTP/2 by ALPN, wss, certificate reload on SIGHUP.
//! - `config_file`: the config file, `pith config`, precedence.
//! - `setup`: the first run's one-time admin link.
//! - `layers`: the layers of `src/`, bottom to top; no module reaches above
//!   its own.
//! - `writes`: the SQLite writer's batches: search index changes applied
//!   per batch, replies without a savepoint of their own.

mod accounts;
mod api;
mod backup;
mod bad_input;
mod bench;
mod cache;
mod child;
mod cluster;
mod communities;
mod concurrency;
mod config_file;
mod crash;
mod faults;
mod fuzz_regressions;
#[allow(dead_code)] // each test module uses a different subset
mod helpers;
mod hot;
mod hygiene;
mod idle;
mod layers;
mod limits;
mod listings;
mod live;
mod logging;
mod metrics;
mod migrate;
mod moderation;
mod openapi;
mod pages;
mod pg;
mod postgres;
mod prom;
mod search;
mod seeding;
mod setup;
mod store;
mod tls;
mod votes;
mod writes;
