#!/usr/bin/env bash
# bench/scaling.sh: Pith's scaling curves, each point beside hello-world in
# the same session.
#
# 1. Data size: the realistic mix on `pith seed --scale S` for each S in
#    SCALES (1 = ~100k posts, 10 = ~1M, 100 = ~10M): req/s, server RSS at
#    the end and at its peak, database size. A size whose seeding or the
#    first open (an integrity check that reads the whole file) takes more
#    than SEED_TIMEOUT seconds is reported as not measured.
# 2. Connections, on the scale-1 data: CONNECTIONS keep-alive connections
#    (default 50 400 5000), then 400 loaded connections while IDLE (10,000)
#    idle keep-alive connections are held open by bench/idle.py from
#    127.0.0.2... source addresses.
#
# Settings (environment, all optional): SCALES="1 10 100", CONNECTIONS="50
# 400 5000", IDLE=10000, DURATION=15, WARMUP=5, SEED_TIMEOUT=900, PORT=18090,
# HELLO_PORT=18091, OUT= (keep results here), PITH_BIN= (default: build).
# Prints markdown tables; everything started is stopped on exit.
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh

SCALES=${SCALES:-1 10 100}
CONNECTIONS=${CONNECTIONS:-50 400 5000}
IDLE=${IDLE:-10000}
DURATION=${DURATION:-15}
WARMUP=${WARMUP:-5}
SEED_TIMEOUT=${SEED_TIMEOUT:-900}
PORT=${PORT:-18090}
HELLO_PORT=${HELLO_PORT:-18091}
# Idle keep-alive connections must outlive the run, and all of them fit.
export PITH_HEADER_TIMEOUT=${PITH_HEADER_TIMEOUT:-3600}
export PITH_MAX_CONNECTIONS=${PITH_MAX_CONNECTIONS:-19000}
export PITH_RATE_LIMITS=${PITH_RATE_LIMITS:-false}

bench_workdir scaling 'data-*'

release_binary

"$BIN" bench hello --listen "127.0.0.1:$HELLO_PORT" 2>"$OUT/hello.log" &
HELLO_PID=$!
PIDS+=("$HELLO_PID")
wait_for_port "$HELLO_PID" "$HELLO_PORT" hello 600 no

load() { # file label port pid connections token topics
    local args=(--url "http://127.0.0.1:$3" --connections "$5" --duration "${DURATION}s" --warmup "${WARMUP}s"
        --topics "$7" --mix 99:1 --token="$6" --label "$2" --server-pid "$4" --json)
    log "$2, $5 connections (load average $(cut -d' ' -f1-3 /proc/loadavg))"
    timeout $((DURATION + WARMUP + 120)) "$BIN" bench http "${args[@]}" >"$1" 2>>"$OUT/bench.log"
}

# --- 1. data size ---
SIZE_ROWS=()
FILES=()
for scale in $SCALES; do
    data="$WORK/data-$scale"
    log "seeding realistic at scale $scale (at most $SEED_TIMEOUT s)"
    started=$(date +%s)
    # `pith user add` opens the store once (integrity check, migrations).
    if ! timeout "$SEED_TIMEOUT" "$BIN" seed --data-dir "$data" --dataset realistic --seed 1 --scale "$scale" \
        2>"$OUT/seed-$scale.log" ||
        ! token=$(timeout "$SEED_TIMEOUT" "$BIN" user add bench --data-dir "$data" \
            2>/dev/null | tail -n1) || [[ -z $token ]]; then
        SIZE_ROWS+=("| scale $scale | not measured: seeding and the first open took over $SEED_TIMEOUT s | | | | | | |")
        rm -rf "$data"
        continue
    fi
    seed_s=$(($(date +%s) - started))
    summary=$(grep seeded "$OUT/seed-$scale.log" | tail -n1)
    topics=$(sed -n 's/.* \([0-9][0-9]*\) topics,.*/\1/p' <<<"$summary")
    posts=$(sed -n 's/.* \([0-9][0-9]*\) posts,.*/\1/p' <<<"$summary")
    "$BIN" serve --listen "127.0.0.1:$PORT" --data-dir "$data" 2>"$OUT/pith-$scale.log" &
    pid=$!
    PIDS+=("$pid")
    wait_for_port "$pid" "$PORT" "pith-$scale" 600 no
    db_mb=$(du -sm "$data" | cut -f1)
    load "$OUT/size-$scale-pith.json" "pith" "$PORT" "$pid" 400 "$token" "$topics"
    load "$OUT/size-$scale-hello.json" "hello" "$HELLO_PORT" "$HELLO_PID" 400 "$token" "$topics"
    FILES+=("$OUT/size-$scale-pith.json" "$OUT/size-$scale-hello.json")
    # Up to 30 s: a large data set checkpoints on the way out.
    STOP_WAIT=30 stop_pids "$pid"
    row=$(jq -r --argjson posts "$posts" --argjson db "$db_mb" --argjson seed "$seed_s" --slurpfile h "$OUT/size-$scale-hello.json" \
        '"| \($posts) | \(.topics) | \($db) MB (seeded and opened in \($seed) s) | \(.total.requests_per_s | floor) | \((.total.requests_per_s / $h[0].total.requests_per_s * 100 | floor) / 100) | \(.reads.latency_ms.p99) ms | \(.server_rss_mb | floor) MB | \(.server_peak_rss_mb | floor) MB |"' \
        "$OUT/size-$scale-pith.json")
    SIZE_ROWS+=("$row")
    [[ $scale == "$(echo "$SCALES" | cut -d' ' -f1)" ]] || rm -rf "$data"
done

echo "### Data size (realistic, 400 connections, 99:1 mix, ${DURATION} s after ${WARMUP} s)"
echo
echo "| posts | topics | data dir | req/s | vs hello | read p99 | RSS at end | peak RSS |"
echo "|--:|--:|--:|--:|--:|--:|--:|--:|"
printf '%s\n' "${SIZE_ROWS[@]}"
echo

# --- 2. connections, on the first scale's data ---
first=$(echo "$SCALES" | cut -d' ' -f1)
data="$WORK/data-$first"
[[ -d $data ]] || { log "no data set left for the connection curve"; exit 1; }
topics=$(sed -n 's/.* \([0-9][0-9]*\) topics,.*/\1/p' "$OUT/seed-$first.log" | tail -n1)
token=$("$BIN" user add bench2 --data-dir "$data" 2>/dev/null | tail -n1)
"$BIN" serve --listen "127.0.0.1:$PORT" --data-dir "$data" 2>"$OUT/pith-conns.log" &
pid=$!
PIDS+=("$pid")
wait_for_port "$pid" "$PORT" pith-conns 600 no
CFILES=()
for conns in $CONNECTIONS; do
    load "$OUT/conns-$conns-pith.json" pith "$PORT" "$pid" "$conns" "$token" "$topics"
    load "$OUT/conns-$conns-hello.json" hello "$HELLO_PORT" "$HELLO_PID" "$conns" "$token" "$topics"
    CFILES+=("$OUT/conns-$conns-pith.json" "$OUT/conns-$conns-hello.json")
done

IDLE_NOTES=()
if ((IDLE > 0)); then
    for target in pith hello; do
        port=$PORT tpid=$pid
        [[ $target == hello ]] && port=$HELLO_PORT tpid=$HELLO_PID
        hold=$((DURATION + WARMUP + 60))
        log "$target: opening $IDLE idle keep-alive connections"
        python3 bench/idle.py 127.0.0.1 "$port" "$IDLE" "$hold" >"$OUT/idle-$target.log" 2>&1 &
        idle_pid=$!
        PIDS+=("$idle_pid")
        for _ in $(seq 1200); do
            grep -q "open in" "$OUT/idle-$target.log" && break
            kill -0 "$idle_pid" 2>/dev/null || { log "idle.py failed: $(cat "$OUT/idle-$target.log")"; exit 1; }
            sleep 0.1
        done
        rss_idle=$(awk '/^VmRSS:/ { printf "%.0f", $2 * 1024 / 1e6 }' "/proc/$tpid/status")
        load "$OUT/idle-$target.json" "$target" "$port" "$tpid" 400 "$token" "$topics"
        CFILES+=("$OUT/idle-$target.json")
        stop_pids "$idle_pid"
        IDLE_NOTES+=("- $target: $(head -n1 "$OUT/idle-$target.log" | sed 's/^idle.py: //'); $(tail -n1 "$OUT/idle-$target.log" | sed 's/^idle.py: //'); server RSS with them all open before the load: $rss_idle MB")
    done
fi

echo "### Connections (realistic scale $first, 99:1 mix; the last rows: 400 loaded + $IDLE idle keep-alive)"
echo
"$BIN" bench table "${CFILES[@]}"
echo
printf '%s\n' "${IDLE_NOTES[@]}"
echo
echo "Machine: $(nproc) cores ($(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -n1)), Linux $(uname -r);" \
    "commit $(git describe --always --dirty 2>/dev/null || echo unknown); load generator and servers share the cores."
"$BIN" bench plot --title "scaling: data size and connections" --out "$OUT/scaling.svg" "${FILES[@]}" "${CFILES[@]}"
command -v rsvg-convert >/dev/null && rsvg-convert -o "$OUT/scaling.png" "$OUT/scaling.svg"
echo "Plot: $OUT/scaling.svg"
