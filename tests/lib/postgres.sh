#!/usr/bin/env bash
# Makes sure a PostgreSQL server runs for the tests, and exports
# PITH_TEST_DATABASE_URL pointing at it. Sourced by test.sh.
#  1. Something answers on 127.0.0.1:5432: use it.
#  2. The Debian cluster is installed but stopped: start it.
#  3. PostgreSQL is not installed: apt-get install it and run a throwaway
#     cluster (initdb + pg_ctl) in a temporary directory on a free port.
# Tests connect as `postgres` with trust auth (or whatever
# PITH_TEST_DATABASE_URL already says) and create one database each.

pg_answers() { # host port
    (exec 3<>"/dev/tcp/$1/$2") 2>/dev/null
}

pg_wait() { # host port
    for _ in $(seq 1 60); do
        pg_answers "$1" "$2" && return 0
        sleep 0.5
    done
    return 1
}

pg_bin() { # the newest installed PostgreSQL's bin directory
    ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1
}

pg_throwaway() {
    local bin dir port
    bin="$(pg_bin)"
    dir="$(mktemp -d "${TMPDIR:-/tmp}/pith-pg.XXXXXX")"
    port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
    # initdb refuses to run as root: the cluster belongs to `postgres` then.
    local run=()
    if [ "$(id -u)" = 0 ]; then
        id postgres >/dev/null 2>&1 || useradd --system --home "$dir" postgres
        chown -R postgres "$dir"
        run=(runuser -u postgres --)
    fi
    "${run[@]}" "$bin/initdb" -D "$dir/data" -U postgres --auth=trust >/dev/null
    "${run[@]}" "$bin/pg_ctl" -D "$dir/data" -l "$dir/log" -w \
        -o "-c listen_addresses=127.0.0.1 -c port=$port -c unix_socket_directories=$dir -c fsync=off" start >/dev/null
    export PITH_TEST_DATABASE_URL="postgres://postgres@127.0.0.1:$port/postgres"
    echo "   started a throwaway PostgreSQL cluster in $dir on port $port"
    # Stopped when test.sh exits.
    trap '"${run[@]}" "$bin/pg_ctl" -D "$dir/data" -m fast stop >/dev/null 2>&1 || true' EXIT
}

ensure_postgres() {
    if [ -n "${PITH_TEST_DATABASE_URL:-}" ]; then
        echo "   using PITH_TEST_DATABASE_URL"
        return 0
    fi
    if pg_answers 127.0.0.1 5432; then
        echo "   PostgreSQL answers on 127.0.0.1:5432"
        export PITH_TEST_DATABASE_URL="postgres://postgres@127.0.0.1:5432/postgres"
        return 0
    fi
    if [ -d /etc/postgresql ] && [ -n "$(ls /etc/postgresql 2>/dev/null)" ] && command -v pg_ctlcluster >/dev/null; then
        local version
        version="$(ls /etc/postgresql | sort -V | tail -n 1)"
        echo "   starting the installed PostgreSQL $version cluster"
        pg_ctlcluster --skip-systemctl-redirect "$version" main start
        if pg_wait 127.0.0.1 5432; then
            export PITH_TEST_DATABASE_URL="postgres://postgres@127.0.0.1:5432/postgres"
            return 0
        fi
        echo "   the cluster does not answer on 127.0.0.1:5432; using a throwaway cluster"
    fi
    if [ -z "$(pg_bin)" ]; then
        echo "   installing PostgreSQL (apt-get)"
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null
    fi
    pg_throwaway
}

ensure_postgres
