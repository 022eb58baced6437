#!/usr/bin/env bash
# Pith for a 64-bit Raspberry Pi, built and run here: `cargo deb --target
# aarch64-unknown-linux-gnu` cross-builds the release binary (Debian's
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

step "cargo deb --target $TARGET (release profile, cross-built)"
start=$(date +%s)
cargo deb --locked --target "$TARGET"
bin=$(target_dir)/$TARGET/release/pith
deb=$(ls -t "$(target_dir)/$TARGET/debian/"pith_*_arm64.deb | head -n 1)
file "$bin" | grep -q 'ARM aarch64' || fail "$bin is not an arm64 executable: $(file "$bin")"
dpkg-deb --info "$deb" | grep -q 'Architecture: arm64' || fail "$deb is not an arm64 package"
stripped=$(mktemp)
aarch64-linux-gnu-strip -o "$stripped" "$bin"
step "built in $(( $(date +%s) - start )) s: $(basename "$deb"), binary $(( $(stat -c %s "$stripped") / 1024 )) KiB stripped"
rm -f "$stripped"

qemu=$(command -v qemu-aarch64-static || command -v qemu-aarch64)
step "smoke test of the arm64 binary under $(basename "$qemu")"
python3 tests/pi/smoke.py -- "$qemu" -L /usr/aarch64-linux-gnu "$bin"
