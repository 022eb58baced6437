#!/usr/bin/env bash
# bench/ab.sh: compare pith builds run by run, each run on a fresh copy of
# one seeded data set, so a build's memory is not the previous run's.
#
# bench/run.sh keeps one server for all its runs (the data set grows by
# ~12,000 posts per run, and the peak RSS with it) and compares with
# hello-world. This script answers a narrower question: did a change make
# a request cheaper, or the server smaller? For each run it reports the
# rate, the server's CPU per request, the CPU seconds of each of the
# server's threads by name (a steadier A/B figure than the rate on a
# shared box), the peak RSS split into anonymous and file-backed, and the
# bytes the server had written to storage (/proc/PID/io `write_bytes`: WAL
# frames and checkpoints; 0 on a tmpfs) per write it committed
# (`pith_writer_batch_size_sum` from /metrics).
#
# Usage: bench/ab.sh LABEL=BINARY [LABEL=BINARY ...]
#   e.g. bench/ab.sh before=/tmp/pith-old after=target/release/pith
# Settings (environment, all optional):
#   DATASET=realistic   realistic | heavy | reddit
#   SCALE=1             pith seed --scale
#   CONNECTIONS=400     keep-alive connections
#   DURATION=12         measured seconds per run
#   WARMUP=3            warm-up seconds per run
#   WRITE_RATIO=0.01    share of posts (0: reads only)
#   REPEAT=2            rounds: A B A B ...
#   RATE=               total req/s for an open loop (default: closed loop)
#   BENCH_BIN=          the binary whose `pith bench http` drives the load
#                       (default: the first build's)
#   PORT=18090          the servers' port (one at a time)
#   SERVE_ENV=          extra VAR=value words for every `pith serve`
#                       (e.g. MALLOC_ARENA_MAX=1)
#   OUT=                keep JSON results and logs here (default: removed)
# The first build seeds the data set and makes the bench user.
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh

(($# > 0)) || { sed -n '2,30p' "$0" >&2; exit 2; }
DATASET=${DATASET:-realistic}
SCALE=${SCALE:-1}
CONNECTIONS=${CONNECTIONS:-400}
DURATION=${DURATION:-12}
WARMUP=${WARMUP:-3}
WRITE_RATIO=${WRITE_RATIO:-0.01}
REPEAT=${REPEAT:-2}
RATE=${RATE:-}
PORT=${PORT:-18090}
read -r -a SERVE_ENV <<<"${SERVE_ENV:-}"
# Posts at ~1 % of tens of thousands of requests a second are far beyond
# the per-user post limit.
export PITH_RATE_LIMITS=${PITH_RATE_LIMITS:-false}

bench_workdir ab pristine data

LABELS=() BINS=()
for arg in "$@"; do
    [[ $arg == *=* ]] || { log "expected LABEL=BINARY, got '$arg'"; exit 2; }
    [[ -x ${arg#*=} ]] || { log "${arg#*=} is not an executable"; exit 2; }
    LABELS+=("${arg%%=*}") BINS+=("${arg#*=}")
done

BENCH_BIN=${BENCH_BIN:-${BINS[0]}}
[[ -x $BENCH_BIN ]] || { log "$BENCH_BIN is not an executable"; exit 2; }
RATE_ARGS=()
[[ -n $RATE ]] && RATE_ARGS=(--rate "$RATE")

seed_sqlite "${BINS[0]}" "$WORK/pristine"
TOKEN=$("${BINS[0]}" user add bench --data-dir "$WORK/pristine" 2>"$OUT/user.log" | tail -n1)

# CPU seconds per thread name of process $1, as "name=seconds ...".
thread_cpu() {
    local tick stat name rest
    tick=$(getconf CLK_TCK)
    for stat in /proc/"$1"/task/*/stat; do
        # The name is between the first "(" and the last ")"; utime and
        # stime are fields 14 and 15, the 12th and 13th after the ")".
        stat=$(cat "$stat" 2>/dev/null) || continue
        name=${stat#*(} name=${name%)*} rest=${stat##*) }
        read -r -a f <<<"$rest"
        echo "${name// /_} $((f[11] + f[12]))"
    done | awk -v tick="$tick" '{s[$1] += $2} END {for (n in s) printf "%.1f %s\n", s[n] / tick, n}' |
        sort -rn | awk '{printf "%s=%ss ", $2, $1}'
}

ROWS=()
for round in $(seq "$REPEAT"); do
    for i in "${!LABELS[@]}"; do
        label=${LABELS[$i]} bin=${BINS[$i]} run="$(printf %02d "$round")-${LABELS[$i]}"
        log "round $round: $label"
        rm -rf "$WORK/data" && cp -r "$WORK/pristine" "$WORK/data"
        env "${SERVE_ENV[@]}" "$bin" serve --listen "127.0.0.1:$PORT" --data-dir "$WORK/data" 2>"$OUT/$run.log" &
        pid=$!
        PIDS=("$pid")
        wait_for_port "$pid" "$PORT" "$run"
        "$BENCH_BIN" bench http --url "http://127.0.0.1:$PORT" --connections "$CONNECTIONS" \
            --duration "${DURATION}s" --warmup "${WARMUP}s" --topics "$TOPICS" "${RATE_ARGS[@]}" \
            --write-ratio "$WRITE_RATIO" --token="$TOKEN" --server-pid "$pid" --json \
            >"$OUT/$run.json" 2>"$OUT/$run.bench.log"
        threads=$(thread_cpu "$pid")
        status=$(cat /proc/"$pid"/status)
        disk=$(awk '$1 == "write_bytes:" {print $2}' /proc/"$pid"/io 2>/dev/null || true)
        committed=$(curl -fsS "http://127.0.0.1:$PORT/metrics" 2>/dev/null |
            awk '$1 == "pith_writer_batch_size_sum" {print $2}' || true)
        kb() { awk -v k="$1:" '$1 == k {print $2}' <<<"$status"; }
        stop_pids
        ROWS+=("$(python3 - "$OUT/$run.json" "$label" "$round" "$(kb VmHWM)" "$(kb RssAnon)" "$(kb RssFile)" "$threads" \
            "${disk:-0}" "${committed:-0}" <<'PY'
import json, sys
path, label, round_, hwm, anon, file_, threads, disk, committed = sys.argv[1:]
d = json.load(open(path))
t = d["total"]["requests_per_s"]
w = d["writes"]["status"]
bad = sum(n for k, n in d["reads"]["status"].items() if k != "2xx") + sum(n for k, n in w.items() if k != "2xx")
r = d["reads"]["latency_ms"]
print(f"| {label} | {round_} | {t:,.0f} | {d['server_cpu_percent'] / 100 * 1e6 / t:.2f} | {r['p50']}ms | {r['p99']}ms "
      f"| {w.get('2xx', 0):,} | {int(hwm) / 1024:.0f} MB | {int(anon) / 1024:.0f} MB | {int(file_) / 1024:.0f} MB "
      f"| {bad + d['total']['errors']} | {threads.strip()} "
      f"| {int(disk) / 1024 / float(committed) if float(committed) else 0:.1f} |")
PY
)")
    done
done

echo "### bench/ab.sh: $DATASET (scale $SCALE, $TOPICS topics), $CONNECTIONS connections, write ratio $WRITE_RATIO, $(if [[ -n $RATE ]]; then echo "open loop at $RATE req/s"; else echo "closed loop"; fi), ${DURATION} s after ${WARMUP} s, a fresh copy of the data per run"
echo
echo "Machine: $(nproc) cores, $(uname -r); commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown); load generator and server share the cores."
echo
echo "| build | round | req/s | server µs/req | read p50 | read p99 | posts | peak RSS | anon at end | file at end | non-2xx + errors | server CPU by thread | disk KB per write |"
echo "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|---|--:|"
printf '%s\n' "${ROWS[@]}"
