#!/usr/bin/env bash
# bench/idle_rss.sh: the resident memory one idle keep-alive connection
# costs, cleartext or TLS, for one or more builds in one run.
#
# Each build serves an empty data dir (`--header-timeout-secs 3600`, so the
# connections stay, and `--max-connections 19000`); bench/idle.py opens N
# connections that each send one request, read the answer and hold, in
# two halves. The process's anonymous resident memory (RssAnon) is read 2 s
# after each half has opened: (at N - at N/2) / (N/2), so that heap
# start-up freed and the first connections reuse does not count. Anonymous, not
# VmRSS: the binary's file-backed pages are mapped as code is first run
# (64 KB around each page touched), by an amount that differs from run to
# run by megabytes, which is most of N connections' cost. Builds alternate,
# ROUNDS times.
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

rss() { awk '/^RssAnon/ {print $2 * 1024}' "/proc/$1/status"; }

# Starts bench/idle.py holding $1 connections from source addresses from
# 127.0.0.$2 on; returns once all are open (its pid in IDLE).
hold() { # count first-address log
    IDLE_TLS=$([[ $TLS == yes ]] && echo 1 || echo 0) python3 "$HERE/idle.py" 127.0.0.1 "$PORT" "$1" 600 \
        1000 "$2" >"$3" &
    IDLE=$!
    until grep -q "open in" "$3" 2>/dev/null; do
        kill -0 $IDLE 2>/dev/null || { cat "$3" >&2; exit 1; }
        sleep 0.1
    done
}

measure() { # label binary round
    local label=$1 binary=$2 round=$3 data="$WORK/data-$1-$3" half=$((N / 2))
    "$binary" serve --listen "127.0.0.1:$PORT" --data-dir "$data" --header-timeout-secs 3600 \
        --max-connections 19000 "${tls_args[@]}" >"$WORK/serve.log" 2>&1 &
    local pid=$!
    for _ in $(seq 100); do
        curl -ks -o /dev/null "$([[ $TLS == yes ]] && echo https || echo http)://127.0.0.1:$PORT/healthz" && break
        sleep 0.1
    done
    # The first half takes up what the heap freed since start-up (the
    # migrations', the first connections'); the second half's growth is
    # what connections cost.
    hold "$half" 2 "$WORK/idle-1.log"
    local first=$IDLE
    sleep 2
    local middle after
    middle=$(rss $pid)
    hold "$half" $((2 + (half + 999) / 1000)) "$WORK/idle-2.log"
    local second=$IDLE
    sleep 2
    after=$(rss $pid)
    kill $first $second $pid
    wait $first $second $pid 2>/dev/null || true
    echo "$label round $round: $N idle $([[ $TLS == yes ]] && echo TLS || echo cleartext) connections:" \
        "RssAnon at $half $middle, at $N $after bytes: $(((after - middle) / half)) bytes each"
}

for round in $(seq "$ROUNDS"); do
    for arg in "$@"; do
        label=${arg%%=*}
        binary=${arg#*=}
        [[ $arg == *=* ]] || label=$(basename "$binary")
        measure "$label" "$binary" "$round"
    done
done
