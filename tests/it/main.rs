//! Integration tests: real servers on real ports over real SQLite files and
//! a real PostgreSQL; the real `pith` binary where a process matters.
//! Helpers live in `support`, apart from the tests.
//!
//! The forum, through its API:
//! - `api`: topics and posts end to end, the health check.
//! - `accounts`: register, login, logout, me, profiles, every 401;
//!   look-alike names, sessions (list, revoke, idle expiry), password
//!   changes, `pith user add` and `pith user token`.
//! - `communities`: list, show, create (admins only).
//! - `votes`: scores on topics and posts, hot ordering.
//! - `account_lifecycle`: the export (streamed), deleting an account
//!   (content kept nameless or removed; admin purge by API and CLI),
//!   two-factor login with real TOTP codes, on both stores.
//! - `saves`: saving topics and posts, the saved list, blocking
//!   communities from the front page, on both stores.
//! - `listings`: hot/new/top, time windows, cursor walks, limits.
//! - `moderation`: moderators, removals, locks, bans, reports, the mod log,
//!   registration modes.
//! - `inbox`: replies, mentions and moderators' actions as stored
//!   notifications on both stores; paging, marking read, errors.
//! - `messages`: private messages (sending, conversations, paging, read
//!   marks, reports read by admins, errors, the rate limit) and blocking
//!   users, on both stores.
//! - `email`: a real SMTP server (aiosmtpd): registration held until the
//!   mailed link is followed, password reset by mail, a dead SMTP server,
//!   notification digests, `pith user reset-link`, on both stores.
//! - `media`: pictures: uploads (EXIF gone, upright, shrunk), a real
//!   decompression bomb, lying and broken files, each quota, serving with
//!   ranges and HEAD, Markdown, removal with posts and accounts, on both
//!   stores.
//! - `search`: full-text search, and the HTML stored with every body.
//! - `setup`: the first run's one-time admin link.
//! - `pages`: the HTML forum: pages, forms, sessions, CSRF, assets, feeds.
//! - `live`: live updates over WebSocket and SSE, limits, fan-out, memory.
//! - `federation`: ActivityPub: off by default (every route 404),
//!   WebFinger, NodeInfo, actor and object documents, the inbox's
//!   signature checks, a remote Follow accepted by a signed Accept, on
//!   both stores (tests/federation/run.sh does it against Fedify).
//! - `federation_flood`: 10,000 signed votes from one server absorbed by
//!   its rate limit, the delivery queue bounded, local reads answering.
//! - `paging`: huge topics read in bounded pages, deep threads cut with
//!   "continue this thread", on both stores.
//!
//! What holds under stress, and against bad input:
//! - `bad_input`: every malformed request is a 4xx with the error shape.
//! - `openapi`: docs/openapi.json against the router, both ways.
//! - `fuzz_regressions`: saved fuzz inputs through the fuzz targets' checks.
//! - `limits`: rate limits per account and per address.
//! - `concurrency`: many writers and readers; read-your-write.
//! - `cache`: ETags, 304s, gzip, freshness after each kind of write.
//! - `encodings`: zstd and Brotli made off the request path; q-values,
//!   an ETag per variant, 304, HEAD and ranges per variant.
//! - `hot`: the hot path's answers are the router's, byte for byte.
//! - `hygiene`: header timeouts, header size, the connection cap, slowloris.
//! - `idle`: keep-alive connections parked between requests (no hyper
//!   buffers while idle): pipelining, split requests, h2c, shutdown, memory.
//! - `tls`: TLS 1.3, HTTP/2 by ALPN, wss, certificate reload on SIGHUP.
//! - `tls_fast`: cached topics answered by parked TLS connections as hyper would.
//! - `crash`: the real binary under SIGKILL and SIGTERM.
//! - `faults`: SIGKILL under load, a full disk, a read-only database.
//!
//! Storage, the cluster and operations:
//! - `store`: the `Store` trait as one story, for every backend.
//! - `writes`: the SQLite writer's batches: search index changes applied
//!   per batch, replies without a savepoint of their own.
//! - `postgres`: the API, `pith seed` and `pith user add` on PostgreSQL.
//! - `cluster`: two nodes on one PostgreSQL (LISTEN/NOTIFY and NATS buses).
//! - `migrate`: `pith migrate` SQLite -> PostgreSQL -> SQLite.
//! - `backup`: `pith backup` under writes, and `pith restore`.
//! - `seeding`: `pith seed` data sets, the WAL bound.
//! - `config_file`: the config file, `pith config`, precedence.
//! - `logging`: JSON logs with request ids from the real binary.
//! - `metrics`: `/metrics` in the Prometheus text format, its settings.
//! - `bench`: the bench commands and scripts on tiny loads.
//!
//! The code's shape:
//! - `layers`: the layers of `src/`, bottom to top; no module reaches above
//!   its own.
//!
//! - `support`: `spawn_app` and request helpers, the binary as a child
//!   process, a PostgreSQL database per test, the Prometheus parser, a
//!   server over raw sockets.

mod account_lifecycle;
mod accounts;
mod api;
mod backup;
mod bad_input;
mod bench;
mod cache;
mod cluster;
mod communities;
mod concurrency;
mod config_file;
mod crash;
mod email;
mod encodings;
mod faults;
mod federation;
mod federation_flood;
mod fuzz_regressions;
mod hot;
mod hygiene;
mod idle;
mod inbox;
mod layers;
mod limits;
mod listings;
mod live;
mod logging;
mod media;
mod messages;
mod metrics;
mod migrate;
mod moderation;
mod openapi;
mod pages;
mod paging;
mod postgres;
mod saves;
mod search;
mod seeding;
mod setup;
mod store;
mod support;
mod tls;
mod tls_fast;
mod votes;
mod writes;
