#!/usr/bin/env bash
# Property-based fuzzing of Pith's JSON API from its OpenAPI document
# (docs/openapi.json, served at /api/v1/openapi.json) with Schemathesis.
#
# Starts `pith serve` on a free loopback port over a fresh data directory,
# seeds an admin, a community, a topic and a reply (so the document's
# example ids exist), and runs every phase of `schemathesis run` (examples,
# coverage, fuzzing, stateful via the document's links) with a fixed seed.
# Fails on any 5xx and on any response the document does not describe
# (status, content type, required headers, body schema).
#
# Bounded: FUZZ_MAX_EXAMPLES test cases per operation and phase (default
# 50) and a hard limit of FUZZ_TIME_LIMIT seconds for the run (default 300).
# FUZZ_SEED picks the Hypothesis seed (default fixed, for reproducibility).
# Reports (JUnit, and a cassette of every request) go to target/fuzz-report.
# Arguments are passed on to `schemathesis run` (later options win), e.g.
# `tests/fuzz/schemathesis.sh --checks all` or `--phases fuzzing`.
#
# Needs python3 with venv; installs a pinned Schemathesis into
# target/fuzz-venv the first time.
set -euo pipefail
cd "$(dirname "$0")/../.."

SCHEMATHESIS_VERSION=4.32.5
VENV=target/fuzz-venv
REPORT_DIR=target/fuzz-report
MAX_EXAMPLES=${FUZZ_MAX_EXAMPLES:-50}
SEED=${FUZZ_SEED:-20261122}
TIME_LIMIT=${FUZZ_TIME_LIMIT:-300}

echo "== schemathesis $SCHEMATHESIS_VERSION in $VENV"
if ! "$VENV/bin/schemathesis" --version 2>/dev/null | grep -qx "schemathesis, version $SCHEMATHESIS_VERSION"; then
    if ! python3 -c 'import ensurepip, venv' 2>/dev/null; then
        # A fresh Debian has python3 without venv support.
        if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
            apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3 python3-venv >/dev/null
        else
            echo "schemathesis.sh: python3 with the venv module is required (apt-get install python3-venv)" >&2
            exit 1
        fi
    fi
    rm -rf "$VENV"
    python3 -m venv "$VENV"
    "$VENV/bin/pip" install --quiet --disable-pip-version-check "schemathesis==$SCHEMATHESIS_VERSION"
fi

# PITH_INSTALL_ONLY=1: stop here, installed (tests/lib/prefetch.sh).
[ -z "${PITH_INSTALL_ONLY:-}" ] || exit 0

if [ -z "${PITH:-}" ]; then
    echo "== building pith"
    cargo build --locked --quiet --bin pith
    PITH="${CARGO_TARGET_DIR:-target}/debug/pith"
fi

DATA=$(mktemp -d "${TMPDIR:-/tmp}/pith-fuzz.XXXXXX")
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
# Logging out revokes its token: that operation gets a user of its own
# (tests/fuzz/schemathesis.toml).
PITH_FUZZ_LOGOUT_TOKEN=$("$PITH" user add leaver --data-dir "$DATA" 2>/dev/null | tail -n 1)
export PITH_FUZZ_LOGOUT_TOKEN

echo "== starting pith serve"
NO_COLOR=1 PITH_LOG=info "$PITH" serve --listen 127.0.0.1:0 --data-dir "$DATA" --readers 2 --cache-mb 16 --rate-limits false \
    2>"$DATA/server.log" &
SERVER_PID=$!
ADDR=
for _ in $(seq 1 100); do
    ADDR=$(sed 's/\x1b\[[0-9;]*m//g' "$DATA/server.log" | sed -n 's/.*serving addr=\(127\.0\.0\.1:[0-9]*\).*/\1/p' | head -n 1)
    [ -n "$ADDR" ] && break
    if ! kill -0 "$SERVER_PID" 2>/dev/null; then
        cat "$DATA/server.log" >&2
        echo "schemathesis.sh: pith serve exited" >&2
        exit 1
    fi
    sleep 0.1
done
if [ -z "$ADDR" ]; then
    cat "$DATA/server.log" >&2
    echo "schemathesis.sh: pith serve did not start" >&2
    exit 1
fi
BASE="http://$ADDR/api/v1"
echo "serving at $BASE (data in $DATA)"

echo "== seeding: community raspi, topic 1, post 1"
"$VENV/bin/python" - "$BASE" "$ADMIN_TOKEN" <<'PY'
import json
import sys
import urllib.request

base, token = sys.argv[1], sys.argv[2]


def post(path, body):
    req = urllib.request.Request(
        base + path,
        data=json.dumps(body).encode(),
        method="POST",
        headers={"Authorization": "Bearer " + token, "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(req, timeout=10) as res:
        return json.load(res)


post("/communities", {"name": "raspi", "title": "The Pi", "description": "Small computers"})
topic = post("/communities/raspi/topics", {"title": "Hello", "body": "First!", "url": "https://example.org/"})
reply = post(f"/topics/{topic['id']}/posts", {"body": "A reply"})
post(f"/topics/{topic['id']}/posts", {"body": "A reply to the reply", "parent_id": reply["id"]})
assert (topic["id"], reply["id"]) == (1, 1), (topic, reply)
PY

echo "== schemathesis run (seed $SEED, at most $MAX_EXAMPLES examples per operation, ${TIME_LIMIT}s)"
rm -rf "$REPORT_DIR"
status=0
timeout --kill-after=10 "$TIME_LIMIT" \
    "$VENV/bin/schemathesis" --config-file tests/fuzz/schemathesis.toml --no-color run "$BASE/openapi.json" \
    --checks not_a_server_error,status_code_conformance,content_type_conformance,response_headers_conformance,response_schema_conformance \
    --header "Authorization: Bearer $ADMIN_TOKEN" \
    --max-examples "$MAX_EXAMPLES" \
    --seed "$SEED" \
    --generation-database none \
    --workers 1 \
    --request-timeout 20 \
    --warnings off \
    --report junit,vcr --report-dir "$REPORT_DIR" \
    "$@" ||
    status=$?

if [ "$status" = 124 ] || [ "$status" = 137 ]; then
    echo "schemathesis.sh: the run took longer than ${TIME_LIMIT}s" >&2
fi
if [ "$status" != 0 ]; then
    echo "schemathesis.sh: failed (exit $status); server log follows" >&2
    tail -n 50 "$DATA/server.log" >&2
    exit "$status"
fi
if grep -q ' ERROR ' <(sed 's/\x1b\[[0-9;]*m//g' "$DATA/server.log"); then
    echo "schemathesis.sh: the server logged errors:" >&2
    grep ' ERROR ' <(sed 's/\x1b\[[0-9;]*m//g' "$DATA/server.log") | tail -n 20 >&2
    exit 1
fi
echo "== fuzzing passed"
