#!/usr/bin/env bash
# bench/idle_rss.sh: the resident memory one idle keep-alive connection
# costs, cleartext or TLS, for one or more builds in one run.
#
# Each build serves an empty data dir (`--header-timeout-secs 3600`, so the
# connections stay, and `--max-connections 19000`); bench/idle.py opens N
# connections that each send one request, read the answer and hold. VmRSS
# is read before they open and 2 s after the last has opened:
# (after - before) / N. Builds alternate, ROUNDS times.
#
# Usage: bench/idle_rss.sh [LABEL=]BINARY...
#   TLS=yes     the connections are TLS 1.3 (a self-signed P-256
#               certificate made here, ALPN http/1.1)
#   N=3000      connections per measurement
#   ROUNDS=2
#   PORT=18190
# Example: TLS=yes bench/idle_rss.sh before=/tmp/exp/pith-before after=/tmp/exp/pith-after
set -euo pipefail

TLS=${TLS:-no}
N=${N:-3000}
ROUNDS=${ROUNDS:-2}
PORT=${PORT:-18190}
HERE=$(cd "$(dirname "$0")" && pwd)
WORK=$(mktemp -d /tmp/idle-rss.XXXXXX)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$WORK"' EXIT

[[ $# -gt 0 ]] || { echo "usage: bench/idle_rss.sh [LABEL=]BINARY..." >&2; exit 2; }
tls_args=()
if [[ $TLS == yes ]]; then
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 -subj /CN=localhost \
        -addext subjectAltName=DNS:localhost -keyout "$WORK/key.pem" -out "$WORK/cert.pem" 2>/dev/null
    tls_args=(--tls-cert "$WORK/cert.pem" --tls-key "$WORK/key.pem")
fi

rss() { awk '/^VmRSS/ {print $2 * 1024}' "/proc/$1/status"; }

measure() { # label binary round
    local label=$1 binary=$2 round=$3 data="$WORK/data-$1-$3"
    "$binary" serve --listen "127.0.0.1:$PORT" --data-dir "$data" --header-timeout-secs 3600 \
        --max-connections 19000 "${tls_args[@]}" >"$WORK/serve.log" 2>&1 &
    local pid=$!
    for _ in $(seq 100); do
        curl -ks -o /dev/null "$([[ $TLS == yes ]] && echo https || echo http)://127.0.0.1:$PORT/healthz" && break
        sleep 0.1
    done
    sleep 1
    local before after
    before=$(rss $pid)
    IDLE_TLS=$([[ $TLS == yes ]] && echo 1 || echo 0) python3 "$HERE/idle.py" 127.0.0.1 "$PORT" "$N" 4 \
        >"$WORK/idle.log" &
    local idle=$!
    until grep -q "open in" "$WORK/idle.log" 2>/dev/null; do
        kill -0 $idle 2>/dev/null || { cat "$WORK/idle.log" >&2; exit 1; }
        sleep 0.1
    done
    sleep 2
    after=$(rss $pid)
    wait $idle
    kill $pid
    wait $pid 2>/dev/null || true
    echo "$label round $round: $N idle $([[ $TLS == yes ]] && echo TLS || echo cleartext) connections:" \
        "RSS $before -> $after bytes, $(((after - before) / N)) bytes each"
}

for round in $(seq "$ROUNDS"); do
    for arg in "$@"; do
        label=${arg%%=*}
        binary=${arg#*=}
        [[ $arg == *=* ]] || label=$(basename "$binary")
        measure "$label" "$binary" "$round"
    done
done
