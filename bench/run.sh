#!/usr/bin/env bash
# bench/run.sh: measure Pith against a hello-world server and the C + SQLite
# prefork design (bench/c/cserver.c) in the same run.
#
# Builds the release binary and the C server, seeds a fresh data set, creates
# a user for the posts, starts `pith serve`, `pith bench hello` and the C
# server on loopback (the C server on pith's own pith.db), loads each with
# the WORKLOAD.md mix at every connection count, interleaved (pith hello c
# pith hello c ...), and prints a markdown table with every run's throughput
# as a ratio of hello's and of the C server's, the servers' peak RSS, and an
# SVG plot (plus PNG when rsvg-convert is installed) in OUT. Everything it
# started is stopped on exit, and every run stops by itself.
#
# MIX=write is the write-only mix instead (WORKLOAD.md, "Other mixes"): 100 %
# posts of 150 characters to random topics, pith against the C design's POST
# path (SERVERS="pith c" by default, ratios against c). Before each run a
# pith build reads topics for READ_FIRST seconds, so its cache holds them as
# a serving forum's does. After every run the server is killed with SIGKILL
# and the posts in pith.db counted: every post it acknowledged (2xx, warm-up
# included) must be there. The table after the main one says so per run;
# the script exits 1 when a post is missing. The server then starts again.
#
# SERVERS="pith nginx" adds the ceiling of WORKLOAD.md's heavy topics: nginx
# (Debian's nginx-light) sending, with sendfile, the very bytes pith answers
# for each topic, saved to files before the runs. It serves reads only: its
# runs send no posts (WRITE_RATIO 0) and no Accept-Encoding, and the table
# gives every run's ratio against it. Its CPU column counts only nginx's
# master process, not its two workers: read its req/s, not its µs/req.
#
# TLS=yes adds `pith-tls`: the same build serving HTTPS (`--tls-cert`,
# `--tls-key`, a self-signed P-256 certificate made here with openssl) on its
# own data dir seeded the same way, interleaved after pith (and with
# EXTRA_PITH, `LABEL-tls` after LABEL). `pith bench http` speaks cleartext
# only, so the HTTPS servers are loaded by wrk alone (TLS=yes turns WRK=yes
# on), and wrk's table gives each HTTPS run's ratio to the cleartext run of
# the same build, round, connection count and gzip. WRK=only skips
# `pith bench http` altogether:
#   TLS=yes WRK=only SERVERS="pith" CONNECTIONS=400 REPEAT=3 bench/run.sh
#
# Settings (environment, all optional):
#   MIX=read              read: the 99/1 mix (WRITE_RATIO of posts) | write: 100 % posts
#   READ_FIRST=3          MIX=write: seconds of reads before each pith run (0: cold cache)
#   DATASET=realistic     realistic | heavy | reddit
#   DURATION=15           measured seconds per run
#   WARMUP=5              warm-up seconds per run
#   CONNECTIONS="50 400"  connection counts
#   GZIP=no               no | yes | both: Accept-Encoding: gzip on pith's reads
#   RATE=                 total req/s for open-loop runs (default: closed loop)
#   WRITE_RATIO=0.01      share of posts
#   REPEAT=1              alternate pith, hello and c runs this many times
#                         (each run is compared with the hello and c runs next to it)
#   SERVERS="pith hello c"  which servers to load, in this order each round
#   EXTRA_PITH=           LABEL=BINARY: a second pith build (e.g. pith-perf=/tmp/p/pith),
#                         with its own data dir seeded the same way, interleaved after pith
#   PIN=no                yes: servers on core 0, load generator on core 1 (taskset)
#   QUOTA=                N: PIN=yes, and each server held to N % of core 0 by a cgroup
#                         CPU quota (root): the generator then has more CPU than a server
#                         can use, and a ratio is the servers', not the generator's (as
#                         over HTTPS, where wrk's TLS costs about what the server's does)
#   C_THREADS=8           the C server's prefork threads
#   PLOT=yes              write OUT/plot.svg (and plot.png with rsvg-convert)
#   WRK=no                yes: cross-check with wrk (Debian package `wrk`), REPEAT rounds
#                         too | only: wrk runs alone, no `pith bench http` table
#   TLS=no                yes: add pith-tls, pith over HTTPS (see above); TLS_PORT=18085,
#                         EXTRA_TLS_PORT=18086
#   INSTALL_WRK=no        yes: apt-get install wrk when it is missing
#   HELLO_BODY_BYTES=     N: also load a hello-world server answering N bytes (label
#                         hello-body), e.g. 9300, a realistic topic's size: what the
#                         bytes alone cost, apart from anything else Pith does
#   PORT=18080            pith's port; HELLO_PORT=18081 hello's; C_PORT=18082 the
#                         C server's; EXTRA_PORT=18083 the second pith build's;
#                         BODY_PORT=18084 hello-body's; NGINX_PORT=18087 nginx's
#   OUT=                  keep JSON results and logs here (default: removed)
#   PITH_BIN=             benchmark this binary instead of building one
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh

MIX=${MIX:-read}
READ_FIRST=${READ_FIRST:-3}
DATASET=${DATASET:-realistic}
DURATION=${DURATION:-15}
WARMUP=${WARMUP:-5}
CONNECTIONS=${CONNECTIONS:-50 400}
GZIP=${GZIP:-no}
RATE=${RATE:-}
WRITE_RATIO=${WRITE_RATIO:-0.01}
REPEAT=${REPEAT:-1}
WRK=${WRK:-no}
TLS=${TLS:-no}
TLS_PORT=${TLS_PORT:-18085}
EXTRA_TLS_PORT=${EXTRA_TLS_PORT:-18086}
[[ $TLS == yes && $WRK == no ]] && WRK=yes
INSTALL_WRK=${INSTALL_WRK:-no}
PORT=${PORT:-18080}
HELLO_PORT=${HELLO_PORT:-18081}
C_PORT=${C_PORT:-18082}
EXTRA_PORT=${EXTRA_PORT:-18083}
BODY_PORT=${BODY_PORT:-18084}
NGINX_PORT=${NGINX_PORT:-18087}
HELLO_BODY_BYTES=${HELLO_BODY_BYTES:-}
case $MIX in
read) SERVERS=${SERVERS:-pith hello c} ;;
write)
    SERVERS=${SERVERS:-pith c}
    WRITE_RATIO=1
    GZIP=no
    ;;
*) echo "MIX must be read or write" >&2; exit 2 ;;
esac
EXTRA_PITH=${EXTRA_PITH:-}
PIN=${PIN:-no}
QUOTA=${QUOTA:-}
[[ -n $QUOTA ]] && PIN=yes
C_THREADS=${C_THREADS:-8}
PLOT=${PLOT:-yes}
# The bench user posts ~1 % of tens of thousands of requests a second: far
# beyond pith's per-user post limit, which the C design does not have.
export PITH_RATE_LIMITS=${PITH_RATE_LIMITS:-false}
SERVER_CPU=()
BENCH_CPU=()
if [[ $PIN == yes ]]; then
    SERVER_CPU=(taskset -c 0)
    BENCH_CPU=(taskset -c 1)
fi
if [[ -n $QUOTA ]]; then
    [[ $QUOTA =~ ^[0-9]+$ ]] && ((QUOTA >= 5 && QUOTA <= 100)) || { echo "QUOTA must be a percentage, 5-100" >&2; exit 2; }
    cpu_quota_cgroup "$QUOTA" || exit 1
    # The server joins the group, then becomes the command (same pid).
    # shellcheck disable=SC2016
    SERVER_CPU=(taskset -c 0 sh -c 'echo $$ >"$0/cgroup.procs" && exec "$@"' "$CGROUP")
fi

case $GZIP in
no) GZIP_MODES="no" ;;
yes) GZIP_MODES="yes" ;;
both) GZIP_MODES="no yes" ;;
*) echo "GZIP must be no, yes or both" >&2; exit 2 ;;
esac

bench_workdir bench data data-extra 'data-*-tls'

release_binary

SCALE=${SCALE:-1}

declare -A PORT_OF PID_OF TOKEN_OF DB_OF
seed_sqlite "$BIN" "$WORK/data"
TOKEN=$("$BIN" user add bench --data-dir "$WORK/data" 2>"$OUT/user.log" | tail -n1)
TOKEN_OF[pith]=$TOKEN TOKEN_OF[c]=$TOKEN TOKEN_OF[hello]=$TOKEN TOKEN_OF[hello-body]=$TOKEN TOKEN_OF[nginx]=$TOKEN
DB_OF[pith]=$WORK/data/pith.db DB_OF[c]=$WORK/data/pith.db

declare -A CMD_OF
start() { # label port command...
    local label=$1 port=$2
    shift 2
    CMD_OF[$label]=$(printf '%q ' "$@")
    "${SERVER_CPU[@]}" "$@" 2>"$OUT/$label.log" &
    PIDS+=("$!")
    PID_OF[$label]=$!
    PORT_OF[$label]=$port
    wait_for_port "$!" "$port" "$label"
}

start pith "$PORT" "$BIN" serve --listen "127.0.0.1:$PORT" --data-dir "$WORK/data"
start hello "$HELLO_PORT" "$BIN" bench hello --listen "127.0.0.1:$HELLO_PORT"
if [[ -n $HELLO_BODY_BYTES ]]; then
    start hello-body "$BODY_PORT" "$BIN" bench hello --listen "127.0.0.1:$BODY_PORT" --body-bytes "$HELLO_BODY_BYTES"
    SERVERS=${SERVERS/hello/hello hello-body}
fi
if [[ " $SERVERS " == *" c "* ]]; then
    log "building bench/c/cserver.c"
    gcc -O2 -pthread -o "$WORK/cserver" bench/c/cserver.c -lsqlite3 -lcrypto
    # Started after pith, which stores rendered HTML for the seeded posts when it opens pith.db.
    start c "$C_PORT" "$WORK/cserver" "$C_PORT" "$WORK/data/pith.db" "$C_THREADS"
fi
if [[ -n $EXTRA_PITH ]]; then
    EXTRA_LABEL=${EXTRA_PITH%%=*}
    EXTRA_BIN=${EXTRA_PITH#*=}
    seed_sqlite "$EXTRA_BIN" "$WORK/data-extra"
    TOKEN_OF[$EXTRA_LABEL]=$("$EXTRA_BIN" user add bench --data-dir "$WORK/data-extra" 2>>"$OUT/user.log" | tail -n1)
    DB_OF[$EXTRA_LABEL]=$WORK/data-extra/pith.db
    start "$EXTRA_LABEL" "$EXTRA_PORT" "$EXTRA_BIN" serve --listen "127.0.0.1:$EXTRA_PORT" --data-dir "$WORK/data-extra"
    SERVERS=${SERVERS/pith/pith $EXTRA_LABEL}
fi
if [[ " $SERVERS " == *" nginx "* ]]; then
    command -v nginx >/dev/null || { log "nginx is not installed (apt-get install nginx-light)"; exit 2; }
    log "saving each topic's answer as pith serves it, for nginx"
    mkdir -p "$WORK/static/api/v1/topics" "$WORK/nginx-temp"
    for id in $(seq "$TOPICS"); do
        curl -fsS -o "$WORK/static/api/v1/topics/$id" "http://127.0.0.1:$PORT/api/v1/topics/$id"
    done
    # Root's own files in a private directory: the workers run as root.
    cat >"$WORK/nginx.conf" <<EOF
user root root;
worker_processes 2;
daemon off;
pid $WORK/nginx.pid;
error_log $OUT/nginx-error.log;
events { worker_connections 4096; }
http {
    access_log off;
    sendfile on;
    tcp_nopush on;
    keepalive_requests 1000000;
    default_type application/json;
    client_body_temp_path $WORK/nginx-temp;
    server {
        listen 127.0.0.1:$NGINX_PORT;
        root $WORK/static;
    }
}
EOF
    start nginx "$NGINX_PORT" nginx -c "$WORK/nginx.conf"
    curl -fsS "http://127.0.0.1:$NGINX_PORT/api/v1/topics/1" | cmp -s - "$WORK/static/api/v1/topics/1" ||
        { log "nginx does not answer the saved bytes"; exit 1; }
fi
declare -A SCHEME_OF
# The HTTPS twin of pith build `label` (BINARY) as `label`-tls on `port`.
start_tls() { # label binary port
    local label=$1-tls binary=$2 port=$3
    seed_sqlite "$binary" "$WORK/data-$label"
    TOKEN_OF[$label]=$("$binary" user add bench --data-dir "$WORK/data-$label" 2>>"$OUT/user.log" | tail -n1)
    DB_OF[$label]=$WORK/data-$label/pith.db
    SCHEME_OF[$label]=https
    start "$label" "$port" "$binary" serve --listen "127.0.0.1:$port" --data-dir "$WORK/data-$label" \
        --tls-cert "$WORK/cert.pem" --tls-key "$WORK/key.pem"
    SERVERS=${SERVERS/$1/$1 $label}
}
if [[ $TLS == yes ]]; then
    log "making a self-signed certificate for the HTTPS servers"
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 -subj /CN=localhost \
        -addext subjectAltName=DNS:localhost -keyout "$WORK/key.pem" -out "$WORK/cert.pem" 2>"$OUT/openssl.log"
    start_tls pith "$BIN" "$TLS_PORT"
    [[ -z $EXTRA_PITH ]] || start_tls "$EXTRA_LABEL" "$EXTRA_BIN" "$EXTRA_TLS_PORT"
fi

# Posts stored in the SQLite file `db`.
count_posts() { # db
    if command -v sqlite3 >/dev/null; then
        sqlite3 "$1" "SELECT count(*) FROM posts"
    else
        python3 -c 'import sqlite3, sys; print(sqlite3.connect(sys.argv[1]).execute("SELECT count(*) FROM posts").fetchone()[0])' "$1"
    fi
}

# A number from `pith bench http --json`'s top level.
summary_field() { # file name
    sed -n "s/^  \"$2\": \([0-9]*\),\{0,1\}\$/\1/p" "$1"
}

# MIX=write, after a run: kills `label` with SIGKILL, checks that the posts
# added to its database since `before` include every one the run
# acknowledged, appends the verdict to OUT/durability.rows, and starts the
# server again on the same data.
check_posts() { # label connections before file
    local label=$1 conns=$2 before=$3 file=$4 pid=${PID_OF[$1]} after acked unanswered verdict
    kill -KILL "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
    after=$(count_posts "${DB_OF[$label]}")
    acked=$(summary_field "$file" posts_acknowledged)
    unanswered=$(summary_field "$file" posts_unanswered)
    if ((after - before < acked)); then
        verdict="**$((acked - (after - before))) acknowledged posts missing**"
        LOST=yes
    elif ((after - before > acked + unanswered)); then
        verdict="all kept; $((after - before - acked - unanswered)) more stored than sent"
    else
        verdict="all kept"
    fi
    echo "| $label | $conns | $acked | $unanswered | $((after - before)) | $verdict |" >>"$OUT/durability.rows"
    # Unquoted: the command as `start` recorded it, quoted word by word.
    # shellcheck disable=SC2086
    eval start "$label" "${PORT_OF[$label]}" ${CMD_OF[$label]}
}

# MIX=write: before each run (each on a freshly started server), a pith
# build reads topics first, so that its cache holds them as a serving
# forum's does (a post evicts its topic's renderings).
read_first() { # label
    local label=$1
    [[ $MIX == write && $label != c && $label != hello* && $READ_FIRST != 0 ]] || return 0
    log "$label: reading topics for ${READ_FIRST} s first"
    "${BENCH_CPU[@]}" "$BIN" bench http --url "http://127.0.0.1:${PORT_OF[$label]}" --connections 50 \
        --duration "${READ_FIRST}s" --warmup 0s --topics "$TOPICS" --write-ratio 0 >/dev/null 2>>"$OUT/bench.log"
}

# The share of posts in `label`'s load: none for nginx, which serves files.
write_ratio_of() { # label
    if [[ $1 == nginx ]]; then echo 0; else echo "$WRITE_RATIO"; fi
}

RUN=0
FILES=()
LOST=no
: >"$OUT/durability.rows"
bench() { # label gzip connections
    local label=$1 gz=$2 conns=$3
    local port=${PORT_OF[$label]} pid=${PID_OF[$label]} token=${TOKEN_OF[$label]}
    RUN=$((RUN + 1))
    local file
    file=$(printf '%s/%02d-%s-%s-gzip_%s.json' "$OUT" "$RUN" "$label" "$conns" "$gz")
    local args=(--url "http://127.0.0.1:$port" --connections "$conns" --duration "${DURATION}s"
        --warmup "${WARMUP}s" --topics "$TOPICS" --write-ratio "$(write_ratio_of "$label")" --token="$token"
        --label "$label" --server-pid "$pid" --json)
    [[ $gz == yes ]] && args+=(--accept-gzip)
    [[ -n $RATE ]] && args+=(--rate "$RATE")
    local before=
    if [[ $MIX == write && -n ${DB_OF[$label]:-} ]]; then
        read_first "$label"
        before=$(count_posts "${DB_OF[$label]}")
    fi
    log "$label, $conns connections, gzip $gz (load average $(cut -d' ' -f1-3 /proc/loadavg))"
    timeout $((DURATION + WARMUP + 60)) "${BENCH_CPU[@]}" "$BIN" bench http "${args[@]}" >"$file" 2>>"$OUT/bench.log"
    FILES+=("$file")
    if [[ -n $before ]]; then
        check_posts "$label" "$conns" "$before" "$file"
    fi
}

# Interleaved: every server once per round, so slow drifts in what else
# runs on the box hit all of them alike. Only pith builds compress.
for conns in $CONNECTIONS; do
    [[ $WRK == only ]] && break
    for _ in $(seq "$REPEAT"); do
        for server in $SERVERS; do
            case $server in
            *-tls) ;; # wrk's (below)
            pith*) for gz in $GZIP_MODES; do bench "$server" "$gz" "$conns"; done ;;
            *) bench "$server" no "$conns" ;;
            esac
        done
    done
done

MIX_NAME=$([[ $MIX == write ]] && echo "write-only mix (100 % posts)" || echo "$WRITE_RATIO posts")
echo "### $DATASET: $TOPICS topics, $MIX_NAME, ${DURATION} s after ${WARMUP} s warm-up, $(if [[ -n $RATE ]]; then echo "open loop at $RATE req/s"; else echo "closed loop"; fi)"
echo
echo "Servers: $SERVERS$([[ $PIN == yes ]] && echo ", pinned to core 0 (load generator on core 1)")$([[ -n $QUOTA ]] && echo ", each held to $QUOTA % of that core (cgroup CPU quota)")."
echo
echo "Machine: $(nproc) cores ($(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -n1)), $(free -g | awk '/^Mem:/{print $2}') GiB,"\
    "Linux $(uname -r); commit $(git describe --always --dirty 2>/dev/null || echo unknown);" \
    "load generator and servers share the cores."
echo
BASELINES=hello
[[ " $SERVERS " == *" c "* ]] && BASELINES=hello,c
[[ " $SERVERS " == *" nginx "* ]] && BASELINES=$BASELINES,nginx
[[ $MIX == write ]] && BASELINES=c
((${#FILES[@]} == 0)) || "$BIN" bench table --baseline "$BASELINES" "${FILES[@]}"
if [[ $MIX == write ]]; then
    echo
    echo "Posts in pith.db after each run, counted once the server was killed with SIGKILL"
    echo "(acknowledged: answered 2xx over the whole run, warm-up included):"
    echo
    echo "| server | conns | acknowledged | sent, no answer | stored | verdict |"
    echo "|---|--:|--:|--:|--:|---|"
    cat "$OUT/durability.rows"
fi
echo
if [[ $MIX == write ]]; then
    # Each server was killed and started again after each run: its VmHWM
    # now is that of a fresh process.
    echo "Peak RSS: the table's column (sampled during each run); every run had a freshly started server."
fi
[[ $MIX == write ]] || echo "Peak RSS of each server since it started (VmHWM), after all runs:"
[[ $MIX == write ]] || for label in "${!PID_OF[@]}"; do
    # A server that died during the runs has no status (or, as a zombie, no VmHWM line): say so.
    peak=$(awk '/^VmHWM:/ { printf "%.0f MB", $2 * 1024 / 1e6 }' "/proc/${PID_OF[$label]}/status" 2>/dev/null || true)
    if [[ -n $peak ]]; then
        printf -- "- %s: %s\n" "$label" "$peak"
    else
        printf -- "- %s: exited before the end of the runs (see %s)\n" "$label" "$OUT/$label.log"
    fi
done
if [[ $PLOT == yes && ${#FILES[@]} -gt 0 ]]; then
    "$BIN" bench plot --title "$DATASET, $(if [[ -n $RATE ]]; then echo "$RATE req/s"; else echo "closed loop"; fi)" \
        --out "$OUT/plot.svg" "${FILES[@]}"
    command -v rsvg-convert >/dev/null && rsvg-convert -o "$OUT/plot.png" "$OUT/plot.svg"
    echo
    echo "Plot: $OUT/plot.svg"
fi

if [[ $LOST == yes ]]; then
    log "acknowledged posts are missing from the database (see the table above)"
    exit 1
fi

if [[ $WRK != no ]]; then
    if ! command -v wrk >/dev/null; then
        if [[ $INSTALL_WRK == yes ]]; then
            log "installing wrk"
            apt-get update -qq && apt-get install -y -qq wrk >/dev/null
        else
            log "wrk is not installed; set INSTALL_WRK=yes to install it"
            exit 0
        fi
    fi
    wrk_run() { # label gzip connections round
        local label=$1 gz=$2 conns=$3 round=$4 file
        local port=${PORT_OF[$label]} scheme=${SCHEME_OF[$label]:-http}
        file="$OUT/wrk-$label-$conns-gzip_$gz-$round.txt"
        export PITH_TOPICS=$TOPICS PITH_BENCH_TOKEN=${TOKEN_OF[$label]} PITH_WRITE_RATIO=$(write_ratio_of "$label")
        export PITH_ACCEPT_GZIP=$([[ $gz == yes ]] && echo 1 || echo 0)
        local args=(-t 2 -c "$conns" --timeout 10s -s bench/mix.lua "$scheme://127.0.0.1:$port")
        log "wrk: $label, $conns connections, gzip $gz, round $round"
        timeout $((WARMUP + 30)) "${BENCH_CPU[@]}" wrk -d "${WARMUP}s" "${args[@]}" >/dev/null
        local cpu_before cpu_after
        cpu_before=$(server_ticks "${PID_OF[$label]}")
        timeout $((DURATION + 30)) "${BENCH_CPU[@]}" wrk -d "${DURATION}s" --latency "${args[@]}" >"$file"
        cpu_after=$(server_ticks "${PID_OF[$label]}")
        awk -v label="$label" -v conns="$conns" -v gz="$gz" -v round="$round" \
            -v ticks=$((cpu_after - cpu_before)) -v hz="$(getconf CLK_TCK)" '
            /^ +Latency +[0-9]/ { max = $4 }
            /^ +50% / { p50 = $2 }
            /^ +99% / { p99 = $2 }
            /^Requests\/sec:/ { rps = $2 }
            /Non-2xx or 3xx/ { bad = $NF }
            /Socket errors:/ { gsub(",", ""); err = $4 + $6 + $8 + $10 }
            / requests in / { n = $1 }
            END {
                us = n > 0 ? sprintf("%.1f", ticks * 1e6 / hz / n) : "-"
                printf "%s %s %s %s %s %s %s %d %d %s %s\n", label, conns, gz, rps, p50, p99, max, bad, err, round, us
            }
        ' "$file" >>"$OUT/wrk.rows"
    }
    # User and system CPU ticks `pid` has used so far.
    server_ticks() { # pid
        awk '{ print $14 + $15 }' "/proc/$1/stat"
    }
    : >"$OUT/wrk.rows"
    for conns in $CONNECTIONS; do
        for round in $(seq "$REPEAT"); do
            for server in $SERVERS; do
                case $server in
                pith*) for gz in $GZIP_MODES; do wrk_run "$server" "$gz" "$conns" "$round"; done ;;
                *) wrk_run "$server" no "$conns" "$round" ;;
                esac
            done
        done
    done
    echo
    echo "wrk 4 (closed loop, 2 threads, same mix via bench/mix.lua; each run against hello, and each"
    echo "HTTPS run against the cleartext run of its build, round, connection count and gzip):"
    echo
    echo "Server µs/req: the server's CPU time (user + system) over the measured seconds, per request"
    echo "wrk counted; less sensitive than req/s to what else the box runs."
    echo
    echo "| server | round | conns | gzip | req/s | vs hello | vs cleartext | server µs/req | p50 | p99 | max | non-2xx | socket errors |"
    echo "|---|--:|--:|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|"
    awk '
        {
            rows[NR] = $0
            if ($1 == "hello") hello[$10 " " $2] = $4
            clear[$1 " " $10 " " $2 " " $3] = $4
        }
        END {
            for (i = 1; i <= NR; i++) {
                split(rows[i], f, " ")
                h = f[10] " " f[2]; c = f[1]; sub(/-tls$/, "", c); c = c " " f[10] " " f[2] " " f[3]
                vh = (h in hello && hello[h] > 0) ? sprintf("%.2f", f[4] / hello[h]) : "-"
                vp = (f[1] ~ /-tls$/ && c in clear && clear[c] > 0) ? sprintf("**%.2f**", f[4] / clear[c]) : "-"
                printf "| %s | %s | %s | %s | %.0f | %s | %s | %s | %s | %s | %s | %s | %s |\n", f[1], f[10], f[2], f[3], f[4], vh, vp, f[11], f[5], f[6], f[7], f[8], f[9]
            }
        }
    ' "$OUT/wrk.rows"
fi
