#!/usr/bin/env bash
# The amd64 Debian package, installed for real on this machine (root, no
# systemd running): `cargo deb --profile dev` builds it; `dpkg -i` installs it; the
# unit's own ExecStart and Environment run as the `pith` user and serve;
# an upgrade to a newer package keeps the data; `dpkg -r` keeps the data;
# `dpkg -P` removes it and the user. Leaves the machine as it found it.
# Usage: tests/pi/deb.sh (from test.sh; root only).
set -euo pipefail
cd "$(dirname "$0")/../.."
source tests/pi/lib.sh

[ "$(id -u)" = 0 ] || fail "installs a package: run as root"
ensure_cargo_deb

if dpkg -s pith >/dev/null 2>&1; then
    fail "a pith package is already installed here; remove it first (dpkg -P pith)"
fi

version=$(cargo metadata --no-deps --format-version 1 | python3 -c 'import json,sys; print(json.load(sys.stdin)["packages"][0]["version"])')
work=$(mktemp -d /tmp/pith-deb.XXXXXX)
out=$work/debs
mkdir -p "$out"
# What this test checks is the package (its scripts, unit, config, user and
# data directory), not the compiler's output: it packages a debug build
# (`--profile dev` reads target/debug/pith; the browser tests use the same
# build next) instead of spending a fat-LTO release build on it. arm64.sh cross-builds and packages
# an optimised binary.
step "target/debug/pith, packaged by cargo deb --profile dev --no-build"
# test.sh names the build its test step made in $PITH; build only when that
# is not the file packaged here.
[ -n "${PITH:-}" ] && [ "$(realpath -m "$PITH")" = "$(realpath -m "$(target_dir)/debug/pith")" ] ||
    cargo build --locked --bin pith
cargo deb --profile dev --no-build --no-dbgsym --output "$out/pith_${version}-1_amd64.deb"
# The "newer" package: the same binary under the next Debian revision, as
# a packaging fix would ship.
cargo deb --profile dev --no-build --no-dbgsym --deb-revision 2 --output "$out/pith_${version}-2_amd64.deb"
server=""
cleanup() {
    [ -n "$server" ] && kill "$server" 2>/dev/null || true
    dpkg -P pith >/dev/null 2>&1 || true
    rm -rf "$work"
}
trap cleanup EXIT

step "dpkg -i pith_${version}-1_amd64.deb"
dpkg -i "$out/pith_${version}-1_amd64.deb"
getent passwd pith >/dev/null || fail "no pith user"
[ "$(stat -c %U /var/lib/pith)" = pith ] || fail "/var/lib/pith is not the pith user's"
[ "$(stat -c '%U:%G %a' /etc/pith/pith.toml)" = "root:pith 640" ] || fail "/etc/pith/pith.toml: $(stat -c '%U:%G %a' /etc/pith/pith.toml)"
grep -q '^#listen = "0.0.0.0:8080"' /etc/pith/pith.toml || fail "/etc/pith/pith.toml lacks the commented defaults"
unit=$(dpkg -L pith | grep '/systemd/system/pith.service$') || fail "no unit in the package"
size=$(stat -c %s /usr/bin/pith)
step "installed: /usr/bin/pith ($((size / 1024)) KiB, stripped), $unit"

port=$(free_port)
# The unit's command as systemd would run it: its User, its Environment
# lines, its ExecStart (systemd does not run in this container).
start_unit() {
    local user env=() cmd
    user=$(sed -n 's/^User=//p' "$unit")
    while IFS= read -r line; do env+=("$line"); done < <(sed -n 's/^Environment=//p' "$unit")
    cmd=$(sed -n 's/^ExecStart=//p' "$unit")
    # shellcheck disable=SC2086 # ExecStart is a command line
    runuser -u "$user" -- env "${env[@]}" PITH_LISTEN="127.0.0.1:$port" $cmd >>"$work/serve.log" 2>&1 &
    server=$!
    wait_http "http://127.0.0.1:$port/healthz" "$work/serve.log"
}

step "the unit's ExecStart as the pith user"
start_unit
token=$(runuser -u pith -- env PITH_DATA_DIR=/var/lib/pith PITH_CONFIG=/etc/pith/pith.toml /usr/bin/pith user add admin --admin | tail -n 1)
api POST /api/v1/communities "$token" '{"name":"raspi","title":"The Pi","description":""}' >/dev/null
topic=$(api POST /api/v1/communities/raspi/topics "$token" '{"title":"Kept across upgrades","body":"from the package test"}' | json id)
[[ $(api GET "/api/v1/topics/$topic") == *'Kept across upgrades'* ]] || fail "the topic does not read back"
[ -f /var/lib/pith/pith.db ] || fail "no database in /var/lib/pith"
[ "$(stat -c %U /var/lib/pith/pith.db)" = pith ] || fail "the database is not the pith user's"
kill -TERM "$server"; wait "$server" || true; server=""

step "upgrade: dpkg -i pith_${version}-2_amd64.deb"
echo "# a local edit" >>/etc/pith/pith.toml
dpkg -i --force-confold "$out/pith_${version}-2_amd64.deb"
[ "$(dpkg-query -W -f '${Version}' pith)" = "${version}-2" ] || fail "not upgraded"
grep -q '^# a local edit' /etc/pith/pith.toml || fail "the upgrade replaced the edited config file"
start_unit
[[ $(api GET "/api/v1/topics/$topic") == *'Kept across upgrades'* ]] || fail "the upgrade lost the topic"
kill -TERM "$server"; wait "$server" || true; server=""

step "dpkg -r pith keeps the data"
dpkg -r pith
[ ! -e /usr/bin/pith ] || fail "/usr/bin/pith left after removal"
[ -f /var/lib/pith/pith.db ] || fail "removal deleted the database"
getent passwd pith >/dev/null || fail "removal deleted the pith user (only a purge should)"

step "dpkg -P pith removes the data and the user"
dpkg -P pith
[ ! -e /var/lib/pith ] || fail "purge left /var/lib/pith"
[ ! -e /etc/pith/pith.toml ] || fail "purge left /etc/pith/pith.toml"
! getent passwd pith >/dev/null || fail "purge left the pith user"
step "the Debian package installs, serves, upgrades, removes and purges as it should"
