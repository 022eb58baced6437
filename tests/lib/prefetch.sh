#!/usr/bin/env bash
# Installs, while ./test.sh's first steps compile, what its later steps
# would otherwise stop to download: Debian packages, the Schemathesis venv,
# the browser and federation tests' npm packages, the arm64 Rust target,
# cargo-deb and cargo-fuzz. Downloads wait on the network and compiles on
# the CPU, so overlapping them shortens a cold run by minutes (pip alone
# took five of a cold run here). Each step's own script still installs
# what it needs when run alone; this calls them with PITH_INSTALL_ONLY=1.
#
# Usage: tests/lib/prefetch.sh DIR (from test.sh, in the background).
# Touches DIR/debian.done once the Debian packages are in, so test.sh's
# own apt-get steps never run beside this one's (apt takes one lock), and
# DIR/all.done at the end. A failed install is reported, not fatal: the
# step that needs it installs it again, and fails there if it cannot.
set -uo pipefail
cd "$(dirname "$0")/../.."
done_dir=$1
mkdir -p "$done_dir"

# What the steps of test.sh install with apt-get: test.sh itself,
# tests/lib/postgres.sh, tests/cluster/nats.sh, tests/lib/smtp.sh,
# tests/fuzz/*.sh, tests/pi/*.sh, tests/browser/run.sh.
packages=(gcc libsqlite3-dev libssl-dev prometheus postgresql nats-server python3-venv g++ curl nginx-light
    gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user-static chromium)
missing=()
for p in "${packages[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "== apt-get install ${missing[*]}"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null ||
        echo "== FAILED: apt-get install ${missing[*]}"
fi
touch "$done_dir/debian.done"

# The rest at once; the two compiles at the lowest priority, so they take
# only what Clippy's check build leaves idle (its serial stretches).
jobs=(
    "PITH_INSTALL_ONLY=1 tests/fuzz/schemathesis.sh"
    "PITH_INSTALL_ONLY=1 tests/browser/run.sh"
    "PITH_INSTALL_ONLY=1 tests/federation/run.sh"
    "PITH_INSTALL_ONLY=1 nice -n 19 tests/pi/arm64.sh"
    "PITH_INSTALL_ONLY=1 nice -n 19 tests/fuzz/cargo_fuzz.sh"
)
pids=()
for job in "${jobs[@]}"; do
    (eval "$job") >"$done_dir/job-${#pids[@]}.log" 2>&1 &
    pids+=($!)
done
for i in "${!pids[@]}"; do
    if wait "${pids[$i]}"; then
        echo "== done: ${jobs[$i]}"
    else
        echo "== FAILED: ${jobs[$i]}"
        cat "$done_dir/job-$i.log"
    fi
done
touch "$done_dir/all.done"
