#!/usr/bin/env bash
# Reads while pictures are processed (issue #22): the realistic 99/1 mix
# against one `pith serve`, first alone, then with `pith bench upload`
# sending 12 MP JPEGs 4 at a time beside it, in the same run. Decoding runs
# on its own bounded pool, never on the runtime's threads, so the reads'
# rate should drop by little more than the CPU the decoders take.
# With RATE=N the reads are sent at N requests a second on a fixed
# timetable (open loop, latency from the intended send time) instead of
# as fast as they go: below saturation the question is whether they keep
# that rate and their latency.
# Usage: PITH_BIN=target/release/pith bench/reads_beside_uploads.sh
# Knobs: DURATION=15 WARMUP=5 CONNECTIONS=400 UPLOADS=120 PORT=18095 RATE=.
set -euo pipefail
cd "$(dirname "$0")/.."
PITH=${PITH_BIN:-target/release/pith}
DURATION=${DURATION:-15}
WARMUP=${WARMUP:-5}
CONNECTIONS=${CONNECTIONS:-400}
UPLOADS=${UPLOADS:-120}
PORT=${PORT:-18095}
RATE=${RATE:-}
WORK=$(mktemp -d /tmp/pith-beside.XXXXXX)
SERVER=
trap '[ -n "$SERVER" ] && kill "$SERVER" 2>/dev/null; rm -rf "$WORK"' EXIT

"$PITH" seed --dataset realistic --data-dir "$WORK/data" >/dev/null 2>&1
TOKEN=$("$PITH" user add bench --data-dir "$WORK/data" 2>/dev/null | tail -n 1)
"$PITH" serve --listen "127.0.0.1:$PORT" --data-dir "$WORK/data" --rate-limits false 2>"$WORK/serve.log" &
SERVER=$!
for _ in $(seq 1 100); do curl -fsS -o /dev/null "http://127.0.0.1:$PORT/healthz" 2>/dev/null && break; sleep 0.1; done

reads() {
    "$PITH" bench http --url "http://127.0.0.1:$PORT" -c "$CONNECTIONS" -d "${DURATION}s" --warmup "${WARMUP}s" \
        --token "$TOKEN" ${RATE:+--rate "$RATE"} 2>/dev/null
}
echo "## reads alone"
reads | tee "$WORK/alone.txt"
echo "## reads beside $UPLOADS uploads, 4 at once"
"$PITH" bench upload --url "http://127.0.0.1:$PORT" --token "$TOKEN" -n "$UPLOADS" -c 4 --server-pid "$SERVER" \
    >"$WORK/upload.txt" 2>&1 &
UPLOADER=$!
reads | tee "$WORK/beside.txt"
wait "$UPLOADER" || { cat "$WORK/upload.txt"; exit 1; }
echo "## the uploads"
cat "$WORK/upload.txt"
