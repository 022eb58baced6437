#!/usr/bin/env bash
# bench/postgres.sh: the WORKLOAD.md mix on PostgreSQL, one node and two,
# beside hello-world and a SQLite-backed pith in the same run.
#
# Creates a fresh database pith_bench_<pid>_<random> on the local PostgreSQL
# (PG_ADMIN_URL), seeds it and a SQLite data dir with the same data set
# (`pith seed --seed 1`), adds the user `bench` to each, starts `pith bench
# hello`, a SQLite `pith serve` and a PostgreSQL `pith serve`, and for each
# connection count loads hello, sqlite and the PG node in turn; then a second
# PG node on the same database (the bus: LISTEN/NOTIFY, `--bus auto`) and
# both nodes at once, with two `pith bench http` processes of half the
# connections each (req/s summed). Prints a markdown table with ratios
# against hello and against SQLite pith of the same connection count.
# Everything it started is stopped, and the database dropped, on exit.
#
# Settings (environment, all optional):
#   DATASET=realistic     realistic | heavy | reddit
#   DURATION=12           measured seconds per run
#   WARMUP=4              warm-up seconds per run
#   CONNECTIONS="400 50"  connection counts (the two-node runs split each in half)
#   PG_ADMIN_URL=postgres://postgres@127.0.0.1:5432/postgres
#                         where to CREATE and DROP the benchmark database
#   PORT=18100            first PG node; PORT+1 the second, PORT+2 SQLite pith,
#                         PORT+3 hello
#   OUT=                  keep JSON results and logs here (default: removed)
#   PITH_BIN=             benchmark this binary instead of building one
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh

DATASET=${DATASET:-realistic}
DURATION=${DURATION:-12}
WARMUP=${WARMUP:-4}
CONNECTIONS=${CONNECTIONS:-400 50}
PG_ADMIN_URL=${PG_ADMIN_URL:-postgres://postgres@127.0.0.1:5432/postgres}
PORT=${PORT:-18100}
# One bench user posts ~1 % of thousands of requests a second (see run.sh).
export PITH_RATE_LIMITS=${PITH_RATE_LIMITS:-false}

DB=pith_bench_$$_$RANDOM
PG_URL=${PG_ADMIN_URL%/*}/$DB
bench_workdir pgbench data 'pg-node*'
DB_CREATED=no

psql_admin() { timeout 60 psql -X -q -v ON_ERROR_STOP=1 "$PG_ADMIN_URL" -c "$1"; }

drop_db() {
    if [[ $DB_CREATED == yes ]]; then
        psql_admin "DROP DATABASE IF EXISTS $DB WITH (FORCE)" || log "could not drop $DB; drop it by hand"
    fi
}
trap 'stop_pids; drop_db; remove_work' EXIT

release_binary

log "creating database $DB"
psql_admin "CREATE DATABASE $DB"
DB_CREATED=yes

seed() { # name database-args...
    local name=$1
    shift
    log "seeding $DATASET (seed 1) into $name"
    local started=$SECONDS
    timeout 900 "$BIN" seed --dataset "$DATASET" --seed 1 "$@" 2>"$OUT/seed-$name.log"
    log "seeded $name in $((SECONDS - started)) s"
    # The token is the last line `pith user add` prints.
    timeout 900 "$BIN" user add bench "$@" 2>>"$OUT/user.log" | tail -n1
}
declare -A PORT_OF PID_OF TOKEN_OF
TOKEN_OF[pg]=$(seed postgres --database "$PG_URL")
TOKEN_OF[sqlite]=$(seed sqlite --data-dir "$WORK/data")
TOKEN_OF[hello]=${TOKEN_OF[pg]} TOKEN_OF[pg2]=${TOKEN_OF[pg]}
TOPICS=$(topics_seeded "$OUT/seed-sqlite.log")
PG_TOPICS=$(topics_seeded "$OUT/seed-postgres.log")
[[ -n $TOPICS && $TOPICS == "$PG_TOPICS" ]] || { log "topic counts differ or are missing: sqlite '$TOPICS', postgres '$PG_TOPICS'"; exit 1; }

start() { # label port command...
    local label=$1 port=$2
    shift 2
    "$@" 2>"$OUT/$label.log" &
    PIDS+=("$!")
    PID_OF[$label]=$!
    PORT_OF[$label]=$port
    wait_for_port "$!" "$port" "$label"
}
start hello $((PORT + 3)) "$BIN" bench hello --listen "127.0.0.1:$((PORT + 3))"
start sqlite $((PORT + 2)) "$BIN" serve --listen "127.0.0.1:$((PORT + 2))" --data-dir "$WORK/data"
start pg "$PORT" "$BIN" serve --listen "127.0.0.1:$PORT" --database "$PG_URL" --data-dir "$WORK/pg-node1"

load() { # file label connections
    local label=$2
    local args=(--url "http://127.0.0.1:${PORT_OF[$label]}" --connections "$3" --duration "${DURATION}s"
        --warmup "${WARMUP}s" --topics "$TOPICS" --mix 99:1 --token="${TOKEN_OF[$label]}"
        --label "$label" --server-pid "${PID_OF[$label]}" --json)
    timeout $((DURATION + WARMUP + 60)) "$BIN" bench http "${args[@]}" >"$1" 2>>"$OUT/bench.log"
}

RUN=0
FILES=()
for conns in $CONNECTIONS; do
    for label in hello sqlite pg; do
        RUN=$((RUN + 1))
        log "$label, $conns connections (load average $(cut -d' ' -f1-3 /proc/loadavg))"
        load "$(printf '%s/%02d-%s-%s.json' "$OUT" "$RUN" "$label" "$conns")" "$label" "$conns"
        FILES+=("$(printf '%s/%02d-%s-%s.json' "$OUT" "$RUN" "$label" "$conns")")
    done
    if [[ -z ${PID_OF[pg2]:-} ]]; then
        start pg2 $((PORT + 1)) "$BIN" serve --listen "127.0.0.1:$((PORT + 1))" --database "$PG_URL" --data-dir "$WORK/pg-node2"
    fi
    RUN=$((RUN + 1))
    half=$((conns / 2))
    log "pg + pg2, $half + $half connections (load average $(cut -d' ' -f1-3 /proc/loadavg))"
    a=$(printf '%s/%02d-pgx2a-%s.json' "$OUT" "$RUN" "$conns")
    b=$(printf '%s/%02d-pgx2b-%s.json' "$OUT" "$RUN" "$conns")
    load "$a" pg "$half" &
    first=$!
    load "$b" pg2 "$half"
    wait "$first"
    FILES+=("$a" "$b")
done

# One row per run; a two-node run is the two halves summed (req/s, CPU,
# errors) with the worse of the two latencies (histograms are not merged).
row() { # label files...
    local label=$1
    shift
    jq -s -r --arg name "$label" '
        def ms: if . == null or . == 0 then "-" else (. * 100 | round / 100 | tostring) + " ms" end;
        def nz: (.status // {}) | to_entries | map(select(.key != "2xx") | .value) | add // 0;
        [ $name, .[0].connections * length,
          (map(.total.requests_per_s) | add),
          (map(.reads.latency_ms.p50) | max | ms), (map(.reads.latency_ms.p99) | max | ms),
          (map(.writes.latency_ms.p99) | max | ms),
          (map(.total.errors) | add), (map(.total | nz) | add),
          (map(.server_cpu_percent // 0) | add),
          (map(.server_rss_mb // 0 | floor | tostring + " MB") | join(" + ")),
          (map(.server_peak_rss_mb // 0 | floor | tostring + " MB") | join(" + ")) ]
        | @tsv' "$@"
}
ROWS=$OUT/rows.tsv
: >"$ROWS"
for conns in $CONNECTIONS; do
    for label in hello sqlite pg; do
        row "$label" "$OUT"/[0-9][0-9]-"$label"-"$conns".json >>"$ROWS"
    done
    row "pg x2" "$OUT"/[0-9][0-9]-pgx2[ab]-"$conns".json >>"$ROWS"
done

echo "### $DATASET: $TOPICS topics, 99:1 mix, ${DURATION} s after ${WARMUP} s warm-up, closed loop"
echo
echo "Machine: $(nproc) cores ($(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -n1)), $(free -g | awk '/^Mem:/{print $2}') GiB," \
    "Linux $(uname -r), $(timeout 10 psql -X -At "$PG_ADMIN_URL" -c 'SHOW server_version' | cut -d' ' -f1 | sed 's/^/PostgreSQL /');" \
    "commit $(git describe --always --dirty 2>/dev/null || echo unknown); load generators and servers share the cores."
echo
echo "| server | conns | req/s | vs hello | vs sqlite | read p50 | read p99 | write p99 | errors | non-2xx | server CPU | server RSS | peak RSS |"
echo "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|"
awk -F'\t' '
    function ratio(x, base) { return base > 0 ? sprintf("%.2f", x / base) : "-" }
    { rows[NR] = $0; if ($1 == "hello") h[$2] = $3; if ($1 == "sqlite") s[$2] = $3 }
    END {
        for (i = 1; i <= NR; i++) {
            split(rows[i], f, "\t")
            printf "| %s | %s | %.0f | %s | %s | %s | %s | %s | %s | %s | %.0f %% | %s | %s |\n",
                f[1], f[2], f[3], ratio(f[3], h[f[2]]), ratio(f[3], s[f[2]]), f[4], f[5], f[6], f[7], f[8], f[9], f[10], f[11]
        }
    }' "$ROWS"
echo
echo "Every run, as \`pith bench table\` renders it (the two-node runs as their two halves):"
echo
"$BIN" bench table "${FILES[@]}"
