#!/usr/bin/env bash
# Coverage-guided fuzzing of Pith's own parsers with cargo-fuzz (libFuzzer):
# Markdown rendering, the live protocol (JSON messages and WebSocket client
# frames), pagination cursors, listing/live query strings and the request
# heads a parked connection answers itself (src/net/fast.rs), and the picture
# decoder an upload goes through (src/media/process.rs), and what a
# federation inbox POST meets before any store (src/app/federation:
# the Signature header, an actor's document, remote HTML). fuzz/ holds
# the targets; fuzz/src/checks.rs says what each one asserts.
#
# Bounded: each target runs PITH_FUZZ_SECONDS seconds (default 20), from
# the committed seeds (fuzz/corpus/TARGET/seed-*) plus whatever earlier runs
# added there (ignored by git). PITH_FUZZ_TARGETS picks targets (default:
# all). Exits non-zero when any target crashes; libFuzzer leaves the input
# in fuzz/artifacts/TARGET/. Keep it as fuzz/regressions/TARGET/NAME once
# fixed: `cargo test --test it fuzz_regressions` replays those.
#
# Needs the nightly toolchain (libFuzzer's instrumentation flags are
# nightly-only) and a C++ compiler (libfuzzer-sys builds libFuzzer);
# installs cargo-fuzz the first time.
set -euo pipefail
cd "$(dirname "$0")/../.."

CARGO_FUZZ_VERSION=0.13.2
SECONDS_PER_TARGET=${PITH_FUZZ_SECONDS:-20}
TARGETS=${PITH_FUZZ_TARGETS:-markdown live_proto cursor query request_head media activity}
# AddressSanitizer (cargo-fuzz's default): Pith's parsers are safe Rust, but
# the renderer's dependencies (pulldown-cmark, url) use unsafe code. It is
# slow to build: Pith and every dependency instrumented took over 20 min of
# a cold run on 2 shared cores. PITH_FUZZ_SANITIZER=none trades that check
# for time (./test.sh does).
SANITIZER=${PITH_FUZZ_SANITIZER:-address}

if ! cargo +nightly --version >/dev/null 2>&1; then
    echo "cargo_fuzz.sh: the nightly toolchain is required (rustup toolchain install nightly)" >&2
    exit 1
fi
if ! command -v c++ >/dev/null; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
        apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq g++ >/dev/null
    else
        echo "cargo_fuzz.sh: a C++ compiler is required (apt-get install g++)" >&2
        exit 1
    fi
fi
if ! cargo fuzz --version 2>/dev/null | grep -q "$CARGO_FUZZ_VERSION"; then
    echo "== installing cargo-fuzz $CARGO_FUZZ_VERSION"
    cargo install --locked "cargo-fuzz@$CARGO_FUZZ_VERSION"
fi

# PITH_INSTALL_ONLY=1: stop here, installed (tests/lib/prefetch.sh).
[ -z "${PITH_INSTALL_ONLY:-}" ] || exit 0

# fuzz/ is a workspace of its own with its own lock file, which cargo
# would otherwise bring up to pith's dependencies in the checkout at every
# run: a commit that adds a dependency updates it too.
if ! cargo metadata --locked --format-version 1 --manifest-path fuzz/Cargo.toml >/dev/null 2>/tmp/pith-fuzz-lock.err; then
    cat /tmp/pith-fuzz-lock.err >&2
    echo "cargo_fuzz.sh: fuzz/Cargo.lock is behind pith's dependencies: run" \
        "'cargo metadata --format-version 1 --manifest-path fuzz/Cargo.toml >/dev/null' and commit fuzz/Cargo.lock" >&2
    exit 1
fi

echo "== building the fuzz targets (nightly, sanitizer: $SANITIZER)"
# 16 codegen units: cargo-fuzz's default of 1 in release builds compiles
# Pith's whole library in one LLVM module on one core (over 11 min of CPU here,
# at opt-level 3). The same flags for `run`, or it builds again.
BUILD=(--sanitizer "$SANITIZER" --codegen-units 16)
cargo +nightly fuzz build "${BUILD[@]}"

failed=()
for target in $TARGETS; do
    echo "== fuzzing $target for ${SECONDS_PER_TARGET}s"
    mkdir -p "fuzz/corpus/$target"
    # -timeout: an input taking over 10 s counts as a crash (a hang);
    # -rss_limit_mb: so does passing 2 GiB, well over any real request.
    if ! cargo +nightly fuzz run "${BUILD[@]}" "$target" -- \
        -max_total_time="$SECONDS_PER_TARGET" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1; then
        failed+=("$target")
    fi
done

if [ ${#failed[@]} -gt 0 ]; then
    echo "== failed: ${failed[*]} (a crash leaves its input in fuzz/artifacts/TARGET/)" >&2
    exit 1
fi
echo "== no crashes in: $TARGETS"
