#!/usr/bin/env bash
# Pith against a real ActivityPub implementation no one here wrote: a
# Fedify peer (tests/federation/peer.mjs, @fedify/fedify pinned in
# package.json and package-lock.json) on loopback. Installs the peer's
# npm dependencies (`npm ci`), builds `pith` (or takes $PITH), starts
# `pith serve --federation on --federation-allow-private` with
# --public-url at its own loopback port over a fresh data directory, makes
# an admin and a community, and runs the peer, which fails on the first
# step that does not hold. Prints the server's log on failure.
set -euo pipefail
cd "$(dirname "$0")/../.."

if ! command -v node >/dev/null; then
    echo "run.sh: node is missing (Node 20 or later)" >&2
    exit 1
fi
source tests/lib/npm.sh
npm_ci tests/federation
# PITH_INSTALL_ONLY=1: stop here, installed (tests/lib/prefetch.sh).
[ -z "${PITH_INSTALL_ONLY:-}" ] || exit 0

if [ -z "${PITH:-}" ]; then
    echo "== building pith"
    cargo build --locked --quiet --bin pith
    PITH="${CARGO_TARGET_DIR:-target}/debug/pith"
fi

DATA=$(mktemp -d "${TMPDIR:-/tmp}/pith-federation.XXXXXX")
SERVER_PID=
cleanup() {
    if [ -n "$SERVER_PID" ]; then
        kill -TERM "$SERVER_PID" 2>/dev/null || true
        wait "$SERVER_PID" 2>/dev/null || true
    fi
    rm -rf "$DATA"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

ADMIN_TOKEN=$("$PITH" user add admin --admin --data-dir "$DATA" 2>/dev/null | tail -n 1)
PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
URL="http://127.0.0.1:$PORT"

echo "== starting pith serve --federation on at $URL"
NO_COLOR=1 PITH_LOG=info "$PITH" serve --listen "127.0.0.1:$PORT" --public-url "$URL" --data-dir "$DATA" \
    --readers 2 --cache-mb 16 --rate-limits false --federation on --federation-allow-private 2>"$DATA/server.log" &
SERVER_PID=$!
for _ in $(seq 1 100); do
    curl -fsS "$URL/healthz" >/dev/null 2>&1 && break
    if ! kill -0 "$SERVER_PID" 2>/dev/null; then
        cat "$DATA/server.log" >&2
        echo "run.sh: pith serve exited" >&2
        exit 1
    fi
    sleep 0.1
done
curl -fsS "$URL/healthz" >/dev/null || { cat "$DATA/server.log" >&2; echo "run.sh: pith did not start" >&2; exit 1; }

curl -fsS -o /dev/null -X POST "$URL/api/v1/communities" -H "authorization: Bearer $ADMIN_TOKEN" \
    -H 'content-type: application/json' -d '{"name": "fediverse", "title": "Fediverse", "description": "Followed from Fedify"}'

echo "== the Fedify peer against $URL"
status=0
PITH_ADMIN_TOKEN="$ADMIN_TOKEN" node tests/federation/peer.mjs "$URL" fediverse || status=$?
if [ "$status" != 0 ]; then
    echo "== server log (last 50 lines)"
    tail -n 50 "$DATA/server.log"
fi
exit "$status"
