#!/usr/bin/env bash
# bench/run.sh: measure Pith against a hello-world server in the same run.
#
# Builds the release binary, seeds a fresh data set, creates a user for the
# posts, starts `pith serve` and `pith bench hello` on loopback, loads each
# with the WORKLOAD.md mix at every connection count, and prints a markdown
# table with pith's throughput as a ratio of hello's. Everything it started
# is stopped on exit, and every run stops by itself.
#
# Settings (environment, all optional):
#   DATASET=realistic     realistic | heavy | reddit
#   DURATION=15           measured seconds per run
#   WARMUP=5              warm-up seconds per run
#   CONNECTIONS="50 400"  connection counts
#   GZIP=no               no | yes | both: Accept-Encoding: gzip on pith's reads
#   RATE=                 total req/s for open-loop runs (default: closed loop)
#   WRITE_RATIO=0.01      share of posts
#   REPEAT=1              alternate pith and hello runs this many times
#                         (each pith run is compared with the hello run next to it)
#   WRK=no                yes: cross-check with wrk (Debian package `wrk`)
#   INSTALL_WRK=no        yes: apt-get install wrk when it is missing
#   PORT=18080            pith's port; HELLO_PORT=18081 hello's
#   OUT=                  keep JSON results and logs here (default: removed)
#   PITH_BIN=             benchmark this binary instead of building one
set -euo pipefail
cd "$(dirname "$0")/.."

DATASET=${DATASET:-realistic}
DURATION=${DURATION:-15}
WARMUP=${WARMUP:-5}
CONNECTIONS=${CONNECTIONS:-50 400}
GZIP=${GZIP:-no}
RATE=${RATE:-}
WRITE_RATIO=${WRITE_RATIO:-0.01}
REPEAT=${REPEAT:-1}
WRK=${WRK:-no}
INSTALL_WRK=${INSTALL_WRK:-no}
PORT=${PORT:-18080}
HELLO_PORT=${HELLO_PORT:-18081}

case $GZIP in
no) GZIP_MODES="no" ;;
yes) GZIP_MODES="yes" ;;
both) GZIP_MODES="no yes" ;;
*) echo "GZIP must be no, yes or both" >&2; exit 2 ;;
esac

WORK=$(mktemp -d "${TMPDIR:-/tmp}/pith-bench.XXXXXX")
OUT=${OUT:-$WORK/out}
mkdir -p "$OUT"
PIDS=()

cleanup() {
    local pid
    for pid in "${PIDS[@]}"; do
        kill -TERM "$pid" 2>/dev/null || true
    done
    for pid in "${PIDS[@]}"; do
        # pith commits queued writes and checkpoints on SIGTERM; give it 10 s.
        for _ in $(seq 100); do
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.1
        done
        kill -KILL "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    done
    rm -rf "$WORK/data"
    [[ $OUT == "$WORK/out" ]] && rm -rf "$WORK"
    return 0
}
trap cleanup EXIT
trap 'exit 130' INT TERM

log() { echo "bench/run.sh: $*" >&2; }

wait_for_port() { # pid port name
    for _ in $(seq 300); do
        kill -0 "$1" 2>/dev/null || { log "$3 exited; see $OUT/$3.log"; cat "$OUT/$3.log" >&2; exit 1; }
        (exec 3<>"/dev/tcp/127.0.0.1/$2") 2>/dev/null && return 0
        sleep 0.1
    done
    log "$3 did not listen on port $2 within 30 s"
    exit 1
}

if [[ -n ${PITH_BIN:-} ]]; then
    BIN=$PITH_BIN
else
    log "building the release binary"
    cargo build --release --quiet
    BIN=target/release/pith
fi

log "seeding $DATASET (seed 1) into $WORK/data"
"$BIN" seed --data-dir "$WORK/data" --dataset "$DATASET" --seed 1 2>"$OUT/seed.log"
TOPICS=$(sed -n 's/.* \([0-9][0-9]*\) topics,.*/\1/p' "$OUT/seed.log" | tail -n1)
[[ -n $TOPICS ]] || { log "cannot read the topic count from $OUT/seed.log"; exit 1; }
TOKEN=$("$BIN" user add bench --data-dir "$WORK/data" 2>"$OUT/user.log" | tail -n1)

"$BIN" serve --listen "127.0.0.1:$PORT" --data-dir "$WORK/data" 2>"$OUT/pith.log" &
PITH_PID=$!
PIDS+=("$PITH_PID")
"$BIN" bench hello --listen "127.0.0.1:$HELLO_PORT" 2>"$OUT/hello.log" &
HELLO_PID=$!
PIDS+=("$HELLO_PID")
wait_for_port "$PITH_PID" "$PORT" pith
wait_for_port "$HELLO_PID" "$HELLO_PORT" hello

RUN=0
FILES=()
bench() { # label port pid gzip connections
    local label=$1 port=$2 pid=$3 gz=$4 conns=$5
    RUN=$((RUN + 1))
    local file
    file=$(printf '%s/%02d-%s-%s-gzip_%s.json' "$OUT" "$RUN" "$label" "$conns" "$gz")
    local args=(--url "http://127.0.0.1:$port" --connections "$conns" --duration "${DURATION}s"
        --warmup "${WARMUP}s" --topics "$TOPICS" --write-ratio "$WRITE_RATIO" --token "$TOKEN"
        --label "$label" --server-pid "$pid" --json)
    [[ $gz == yes ]] && args+=(--accept-gzip)
    [[ -n $RATE ]] && args+=(--rate "$RATE")
    log "$label, $conns connections, gzip $gz (load average $(cut -d' ' -f1-3 /proc/loadavg))"
    timeout $((DURATION + WARMUP + 60)) "$BIN" bench http "${args[@]}" >"$file" 2>>"$OUT/bench.log"
    FILES+=("$file")
}

for conns in $CONNECTIONS; do
    for _ in $(seq "$REPEAT"); do
        for gz in $GZIP_MODES; do
            bench pith "$PORT" "$PITH_PID" "$gz" "$conns"
        done
        bench hello "$HELLO_PORT" "$HELLO_PID" no "$conns"
    done
done

echo "### $DATASET: $TOPICS topics, ${DURATION} s after ${WARMUP} s warm-up, $(if [[ -n $RATE ]]; then echo "open loop at $RATE req/s"; else echo "closed loop"; fi)"
echo
echo "Machine: $(nproc) cores ($(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -n1)), $(free -g | awk '/^Mem:/{print $2}') GiB,"\
    "Linux $(uname -r); commit $(git describe --always --dirty 2>/dev/null || echo unknown);" \
    "load generator and servers share the cores."
echo
"$BIN" bench table "${FILES[@]}"

if [[ $WRK == yes ]]; then
    if ! command -v wrk >/dev/null; then
        if [[ $INSTALL_WRK == yes ]]; then
            log "installing wrk"
            apt-get update -qq && apt-get install -y -qq wrk >/dev/null
        else
            log "wrk is not installed; set INSTALL_WRK=yes to install it"
            exit 0
        fi
    fi
    wrk_run() { # label port gzip connections
        local label=$1 port=$2 gz=$3 conns=$4 file
        file="$OUT/wrk-$label-$conns-gzip_$gz.txt"
        export PITH_TOPICS=$TOPICS PITH_BENCH_TOKEN=$TOKEN PITH_WRITE_RATIO=$WRITE_RATIO
        export PITH_ACCEPT_GZIP=$([[ $gz == yes ]] && echo 1 || echo 0)
        local args=(-t 2 -c "$conns" --timeout 10s -s bench/mix.lua "http://127.0.0.1:$port")
        log "wrk: $label, $conns connections, gzip $gz"
        timeout $((WARMUP + 30)) wrk -d "${WARMUP}s" "${args[@]}" >/dev/null
        timeout $((DURATION + 30)) wrk -d "${DURATION}s" --latency "${args[@]}" >"$file"
        awk -v label="$label" -v conns="$conns" -v gz="$gz" '
            /^ +Latency +[0-9]/ { max = $4 }
            /^ +50% / { p50 = $2 }
            /^ +99% / { p99 = $2 }
            /^Requests\/sec:/ { rps = $2 }
            /Non-2xx or 3xx/ { bad = $NF }
            /Socket errors:/ { gsub(",", ""); err = $4 + $6 + $8 + $10 }
            END { printf "%s %s %s %s %s %s %s %d %d\n", label, conns, gz, rps, p50, p99, max, bad, err }
        ' "$file" >>"$OUT/wrk.rows"
    }
    : >"$OUT/wrk.rows"
    for conns in $CONNECTIONS; do
        for gz in $GZIP_MODES; do
            wrk_run pith "$PORT" "$gz" "$conns"
        done
        wrk_run hello "$HELLO_PORT" no "$conns"
    done
    echo
    echo "Cross-check with wrk 4 (closed loop, 2 threads, same mix via bench/mix.lua):"
    echo
    echo "| server | conns | gzip | req/s | vs hello | p50 | p99 | max | non-2xx | socket errors |"
    echo "|---|--:|---|--:|--:|--:|--:|--:|--:|--:|"
    awk '
        { rows[NR] = $0; if ($1 == "hello") base[$2] = $4 }
        END {
            for (i = 1; i <= NR; i++) {
                split(rows[i], f, " ")
                ratio = (f[2] in base && base[f[2]] > 0) ? sprintf("%.2f", f[4] / base[f[2]]) : "-"
                printf "| %s | %s | %s | %.0f | %s | %s | %s | %s | %s | %s |\n", f[1], f[2], f[3], f[4], ratio, f[5], f[6], f[7], f[8], f[9]
            }
        }
    ' "$OUT/wrk.rows"
fi
