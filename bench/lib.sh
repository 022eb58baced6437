# Pieces the bench scripts share; each sources this first, then calls
# bench_workdir.

# "bench/SCRIPT: message" on stderr.
log() { echo "bench/${0##*/}: $*" >&2; }

# The script's scratch space: WORK, a fresh temporary directory
# (pith-`name`.XXXXXX), OUT (the caller's, or WORK/out) and an empty PIDS.
# On exit the servers in PIDS are stopped and the data dirs matching
# `data_pattern`s under WORK removed, and WORK itself unless the results
# went to an OUT of the caller's (see remove_work). A script with more to
# undo sets its own EXIT trap that ends with the same two calls.
bench_workdir() { # name data_pattern...
    WORK=$(mktemp -d "${TMPDIR:-/tmp}/pith-$1.XXXXXX")
    OUT=${OUT:-$WORK/out}
    mkdir -p "$OUT"
    PIDS=()
    shift
    WORK_DATA=("$@")
    trap 'stop_pids; remove_work' EXIT
    trap 'exit 130' INT TERM
}

# Removes the data dirs bench_workdir was given, and WORK when it holds OUT.
remove_work() {
    local pattern
    # Unquoted: a pattern may be a glob (data-*).
    # shellcheck disable=SC2086
    for pattern in "${WORK_DATA[@]}"; do rm -rf "$WORK"/$pattern; done
    [[ $OUT == "$WORK/out" ]] && rm -rf "$WORK"
    # With the caller's OUT, WORK goes too once nothing else is left in it.
    rmdir "$WORK" 2>/dev/null || true
    # cpu_quota_cgroup's group, empty once the servers in it are stopped.
    [[ -n ${CGROUP:-} ]] && { rmdir "$CGROUP" 2>/dev/null || true; }
    return 0
}

# Makes a cgroup whose processes share PERCENT % of one core (cgroup v2's
# cpu.max, else v1's cpu controller; root only), in 10 ms periods so a
# server is held back in short steps, not for 50 ms at a time. Sets
# CGROUP to its directory; remove_work removes it.
cpu_quota_cgroup() { # percent
    local period=10000 quota=$(($1 * 100))
    if [[ -f /sys/fs/cgroup/cgroup.controllers ]] && grep -qw cpu /sys/fs/cgroup/cgroup.controllers; then
        grep -qw cpu /sys/fs/cgroup/cgroup.subtree_control || echo +cpu >/sys/fs/cgroup/cgroup.subtree_control
        CGROUP=/sys/fs/cgroup/pith-bench-$$
        mkdir "$CGROUP" && echo "$quota $period" >"$CGROUP/cpu.max"
    elif [[ -f /sys/fs/cgroup/cpu/cpu.cfs_quota_us ]]; then
        CGROUP=/sys/fs/cgroup/cpu/pith-bench-$$
        mkdir "$CGROUP" && echo $period >"$CGROUP/cpu.cfs_period_us" && echo $quota >"$CGROUP/cpu.cfs_quota_us"
    else
        log "no cgroup cpu controller to hold the servers to $1 % of a core"
        return 1
    fi
}

# Stops the given pids (default: every pid in PIDS): SIGTERM to all, then
# up to STOP_WAIT seconds each (default 10; pith commits queued writes and
# checkpoints on SIGTERM), then SIGKILL.
stop_pids() { # [pid...]
    local pid pids=("$@")
    ((${#pids[@]} > 0)) || pids=("${PIDS[@]}")
    for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
    for pid in "${pids[@]}"; do
        for _ in $(seq $((${STOP_WAIT:-10} * 10))); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        kill -KILL "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    done
}

# Whether process `pid` holds the socket listening on TCP port `port`: a
# port some other process already listens on (a server left over from an
# earlier run, whose start then failed with "address in use") must not pass
# for this one's.
listens_on() { # pid port
    local port_hex inode
    port_hex=$(printf '%04X' "$2")
    for inode in $(awk -v p=":$port_hex" '$4 == "0A" && substr($2, length($2) - 4) == p { print $10 }' \
        /proc/net/tcp /proc/net/tcp6 2>/dev/null); do
        find "/proc/$1/fd" -lname "socket:\[$inode\]" 2>/dev/null | grep -q . && return 0
    done
    return 1
}

# Waits until `pid` listens on 127.0.0.1:`port`, at most TRIES tenths of a
# second (default 300); exits the script when it dies or never listens.
# `show_log=no` leaves the server's log out of the failure message.
wait_for_port() { # pid port name [tries] [show_log]
    local tries=${4:-300}
    for _ in $(seq "$tries"); do
        if ! kill -0 "$1" 2>/dev/null; then
            log "$3 exited; see $OUT/$3.log"
            [[ ${5:-yes} == yes ]] && cat "$OUT/$3.log" >&2
            exit 1
        fi
        if listens_on "$1" "$2"; then
            return 0
        fi
        sleep 0.1
    done
    log "$3 did not listen on port $2 within $((tries / 10)) s"
    exit 1
}

# The topic count `pith seed` logged in `log_file` (its summary line).
topics_seeded() { # log_file
    sed -n 's/.* \([0-9][0-9]*\) topics,.*/\1/p' "$1" | tail -n1
}

# Sets BIN to $PITH_BIN when given, else to a release binary built here.
release_binary() {
    if [[ -n ${PITH_BIN:-} ]]; then
        BIN=$PITH_BIN
    else
        log "building the release binary"
        cargo build --release --locked --quiet
        BIN=target/release/pith
    fi
}

# Seeds $DATASET (seed 1, scale ${SCALE:-1}) into the SQLite data dir `dir`
# with `binary`, and sets TOPICS to its topic count.
seed_sqlite() { # binary dir
    log "seeding $DATASET (seed 1, scale ${SCALE:-1}) into $2"
    "$1" seed --data-dir "$2" --dataset "$DATASET" --seed 1 --scale "${SCALE:-1}" 2>"$OUT/seed.log"
    TOPICS=$(topics_seeded "$OUT/seed.log")
    [[ -n $TOPICS ]] || { log "cannot read the topic count from $OUT/seed.log"; exit 1; }
}
