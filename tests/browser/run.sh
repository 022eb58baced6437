#!/usr/bin/env bash
# Drives Pith's web forum in Debian's headless Chromium with playwright-core
# (tests/browser/*.test.mjs, run by `node --test`; name files as arguments
# to run only those).
#
# Installs what is missing: Debian's `chromium` (apt-get, as root) and the
# pinned playwright-core (`npm ci`). Builds `pith` (or takes $PITH), starts
# `pith serve` on a free loopback port over a fresh data directory, makes an
# admin with `pith user add --admin`, and stops the server at the end. Mail
# goes to an SMTP sink (aiosmtpd, tests/lib/smtp.sh) that writes each mail
# to $PITH_MAIL_DIR for the tests to read.
# Screenshots go to docs/screenshots/ ($PITH_SCREENSHOTS to change).
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD

if [ ! -x /usr/bin/chromium ]; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
        echo "== installing Debian's chromium"
        apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
    else
        echo "run.sh: /usr/bin/chromium is missing (apt-get install chromium)" >&2
        exit 1
    fi
fi
source tests/lib/npm.sh
npm_ci tests/browser
# PITH_INSTALL_ONLY=1: stop here, installed (tests/lib/prefetch.sh).
[ -z "${PITH_INSTALL_ONLY:-}" ] || exit 0

if [ -z "${PITH:-}" ]; then
    echo "== building pith"
    cargo build --locked --quiet --bin pith
    PITH="${CARGO_TARGET_DIR:-target}/debug/pith"
fi

tests/lib/smtp.sh

DATA=$(mktemp -d "${TMPDIR:-/tmp}/pith-browser.XXXXXX")
SERVER_PID=
SINK_PID=
cleanup() {
    if [ -n "$SERVER_PID" ]; then
        kill -TERM "$SERVER_PID" 2>/dev/null || true
        wait "$SERVER_PID" 2>/dev/null || true
    fi
    if [ -n "$SINK_PID" ]; then
        kill -TERM "$SINK_PID" 2>/dev/null || true
        wait "$SINK_PID" 2>/dev/null || true
    fi
    rm -rf "$DATA"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

ADMIN_TOKEN=$(PITH_USER_PASSWORD=admin-password "$PITH" user add admin --admin --data-dir "$DATA" 2>/dev/null | tail -n 1)

echo "== starting the SMTP sink"
MAIL_DIR="$DATA/mail"
mkdir -p "$MAIL_DIR"
SMTP_PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"${CARGO_TARGET_DIR:-target}/smtp-venv/bin/python" tests/lib/smtp_sink.py "$MAIL_DIR" "$SMTP_PORT" 2>"$DATA/smtp.log" &
SINK_PID=$!
for _ in $(seq 1 100); do
    [ -e "$MAIL_DIR/ready" ] && break
    kill -0 "$SINK_PID" 2>/dev/null || { cat "$DATA/smtp.log" >&2; echo "run.sh: the SMTP sink exited" >&2; exit 1; }
    sleep 0.1
done
[ -e "$MAIL_DIR/ready" ] || { echo "run.sh: the SMTP sink did not start" >&2; exit 1; }

echo "== starting pith serve"
NO_COLOR=1 PITH_LOG=info "$PITH" serve --listen 127.0.0.1:0 --data-dir "$DATA" --readers 2 --cache-mb 16 \
    --rate-limits false --smtp-url "smtp://127.0.0.1:$SMTP_PORT" --mail-from "Pith <forum@example.org>" \
    --mail-poll-secs 1 2>"$DATA/server.log" &
SERVER_PID=$!
ADDR=
for _ in $(seq 1 100); do
    ADDR=$(sed 's/\x1b\[[0-9;]*m//g' "$DATA/server.log" | sed -n 's/.*serving addr=\(127\.0\.0\.1:[0-9]*\).*/\1/p' | head -n 1)
    [ -n "$ADDR" ] && break
    if ! kill -0 "$SERVER_PID" 2>/dev/null; then
        cat "$DATA/server.log" >&2
        echo "run.sh: pith serve exited" >&2
        exit 1
    fi
    sleep 0.1
done
[ -n "$ADDR" ] || { cat "$DATA/server.log" >&2; echo "run.sh: no 'serving addr=' line" >&2; exit 1; }

export PITH_URL="http://$ADDR"
export PITH_ADMIN_TOKEN="$ADMIN_TOKEN"
export PITH_MAIL_DIR="$MAIL_DIR"
export PITH_SCREENSHOTS="${PITH_SCREENSHOTS:-$ROOT/docs/screenshots}"
mkdir -p "$PITH_SCREENSHOTS"
echo "== browser tests against $PITH_URL"
status=0
# Arguments name the test files to run (all of them without any).
FILES=("$@")
# Every test file by default, so a new one is never left out.
[ "${#FILES[@]}" -gt 0 ] || FILES=(tests/browser/*.test.mjs)
node --test --test-reporter=spec "${FILES[@]}" || status=$?
if [ "$status" != 0 ]; then
    echo "== server log (last 50 lines)"
    tail -n 50 "$DATA/server.log"
fi
exit "$status"
