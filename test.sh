#!/usr/bin/env bash
# Runs Pith's whole test suite on a fresh Debian machine, installing what
# the tests need first. `.ci/run` calls exactly this.
set -euo pipefail
cd "$(dirname "$0")"

# Each step with the time since the start, so a CI log shows where its time went.
section() { echo "== $* [$((SECONDS / 60)) min $((SECONDS % 60)) s]"; }

# Downloads and tool builds for the later steps, in the background while the
# first steps compile (tests/lib/prefetch.sh; its log is the file below).
prefetch_dir="${CARGO_TARGET_DIR:-target}/prefetch"
rm -rf "$prefetch_dir" && mkdir -p "$prefetch_dir"
setsid tests/lib/prefetch.sh "$prefetch_dir" >"$prefetch_dir/log" 2>&1 &
prefetch=$!
# Its own process group, stopped whole if a step fails first.
trap 'kill -- -"$prefetch" 2>/dev/null || true' EXIT
# until_prefetched PART: waits for the prefetch to finish PART (or to end).
until_prefetched() {
    while [ ! -e "$prefetch_dir/$1.done" ] && kill -0 "$prefetch" 2>/dev/null; do sleep 1; done
    [ "$1" != all ] || { wait "$prefetch" || true; cat "$prefetch_dir/log"; }
}

section "formatting and lints"
cargo fmt --all -- --check
cargo clippy --all-targets --locked -- -D warnings

section "Debian packages: what the benchmark tests build bench/c/cserver.c with, Prometheus for the metrics test, curl (on OpenSSL) for the TLS tests, nginx for the static-server benchmark"
until_prefetched debian
dpkg -s gcc libsqlite3-dev libssl-dev prometheus curl nginx-light >/dev/null 2>&1 ||
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq gcc libsqlite3-dev libssl-dev prometheus curl nginx-light >/dev/null; }

section "PostgreSQL for the storage tests (tests/lib/postgres.sh)"
source tests/lib/postgres.sh

section "NATS on 127.0.0.1:4222 for the cluster tests (tests/cluster/nats.sh)"
tests/cluster/nats.sh

section "an SMTP sink for the email tests (aiosmtpd from PyPI, tests/lib/smtp.sh)"
tests/lib/smtp.sh

section "unit and integration tests (real SQLite files, a real PostgreSQL, real sockets)"
cargo test --locked --all-targets

# The steps below run the `pith` the test step built (the integration tests
# run it too) instead of each building their own: a plain `cargo build` after
# `cargo test` compiles Pith again, its dependencies' features differing
# without the dev-dependencies'.
export PITH="${CARGO_TARGET_DIR:-target}/debug/pith"

section "waiting for the background installs (tests/lib/prefetch.sh)"
until_prefetched all

section "API fuzzing from docs/openapi.json (schemathesis, at most 300 s)"
tests/fuzz/schemathesis.sh

# Without AddressSanitizer here: building Pith and every dependency under it
# was the longest step of a cold run (over 20 of its minutes on 2 cores). Panics,
# overflows, debug assertions, hangs and runaway memory are still caught;
# `tests/fuzz/cargo_fuzz.sh` alone fuzzes under ASan.
section "cargo-fuzz targets for Pith's own parsers (${PITH_FUZZ_SECONDS:-20} s each, no sanitizer)"
PITH_FUZZ_SANITIZER=none tests/fuzz/cargo_fuzz.sh

section "arm64: the binary cross-compiled and packaged, smoke-tested under qemu-user (tests/pi/arm64.sh)"
tests/pi/arm64.sh

section "the amd64 Debian package: install, serve as the pith user, upgrade, remove, purge (tests/pi/deb.sh)"
tests/pi/deb.sh

section "the web forum in headless Chromium (playwright-core)"
# Screenshots go to target/ here; `tests/browser/run.sh` alone refreshes docs/screenshots/.
PITH_SCREENSHOTS="${CARGO_TARGET_DIR:-target}/screenshots" tests/browser/run.sh

section "federation against a real ActivityPub peer: Fedify on loopback (tests/federation/run.sh)"
tests/federation/run.sh

section "all tests passed"
