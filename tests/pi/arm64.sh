#!/usr/bin/env bash
# Pith for a 64-bit Raspberry Pi, built and run here: `cargo deb --target
# aarch64-unknown-linux-gnu --profile pi-smoke` cross-builds the binary (Debian's
# gcc-aarch64-linux-gnu links it and compiles bundled SQLite and ring; the
# linker is named in .cargo/config.toml) and packages it; the binary then
# runs under qemu-user (Debian's qemu-user-static) through
# tests/pi/smoke.py: seed, serve, the API round trip, a WebSocket
# subscriber, backup, and a SIGKILL and restart that keep every
# acknowledged write. Usage: tests/pi/arm64.sh (from test.sh).
set -euo pipefail
cd "$(dirname "$0")/../.."
source tests/pi/lib.sh

TARGET=aarch64-unknown-linux-gnu
need=()
command -v aarch64-linux-gnu-gcc >/dev/null || need+=(gcc-aarch64-linux-gnu libc6-dev-arm64-cross)
command -v qemu-aarch64-static >/dev/null || command -v qemu-aarch64 >/dev/null || need+=(qemu-user-static)
if [ ${#need[@]} -gt 0 ]; then
    step "apt-get install ${need[*]}"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
fi
rustup target list --installed | grep -qx "$TARGET" || rustup target add "$TARGET"
ensure_cargo_deb
# PITH_INSTALL_ONLY=1: stop here, installed (tests/lib/prefetch.sh).
[ -z "${PITH_INSTALL_ONLY:-}" ] || exit 0

# The pi-smoke profile (Cargo.toml): every crate at opt-level 1, which
# builds cold in a fraction of the release levels' time and changes
# nothing this smoke test checks.
PROFILE=pi-smoke
out=$(target_dir)/$PROFILE/debian-$TARGET
rm -rf "$out" && mkdir -p "$out"
step "cargo deb --target $TARGET --profile $PROFILE (cross-built)"
start=$(date +%s)
cargo deb --locked --target "$TARGET" --profile "$PROFILE" --output "$out/"
bin=$(target_dir)/$TARGET/$PROFILE/pith
deb=$(echo "$out"/pith_*_arm64.deb)
[ -f "$deb" ] || fail "cargo deb made no arm64 package in $out: $(ls "$out")"
# Whole outputs, then grep: `cmd | grep -q` under pipefail fails when grep
# quits early and cmd dies of SIGPIPE.
kind=$(file "$bin")
[[ $kind == *'ARM aarch64'* ]] || fail "$bin is not an arm64 executable: $kind"
info=$(dpkg-deb --info "$deb")
[[ $info == *'Architecture: arm64'* ]] || fail "$deb is not an arm64 package: $info"
stripped=$(mktemp)
aarch64-linux-gnu-strip -o "$stripped" "$bin"
step "built in $(( $(date +%s) - start )) s: $(basename "$deb"), binary $(( $(stat -c %s "$stripped") / 1024 )) KiB stripped"
rm -f "$stripped"

qemu=$(command -v qemu-aarch64-static || command -v qemu-aarch64)
step "smoke test of the arm64 binary under $(basename "$qemu")"
python3 tests/pi/smoke.py -- "$qemu" -L /usr/aarch64-linux-gnu "$bin"
