# Shared by tests/pi/*.sh: messages, the target dir, cargo-deb, and small
# HTTP helpers over curl.

step() { echo "-- pi: $*"; }
fail() { echo "pi: FAILED: $*" >&2; exit 1; }

target_dir() { echo "${CARGO_TARGET_DIR:-$PWD/target}"; }

# cargo-deb, the standard packager for Cargo projects, at a pinned version.
CARGO_DEB_VERSION=3.6.2
ensure_cargo_deb() {
    if [[ $(cargo deb --version 2>/dev/null) != *"$CARGO_DEB_VERSION"* ]]; then
        step "installing cargo-deb $CARGO_DEB_VERSION (cargo install, a few minutes)"
        cargo install --quiet --locked cargo-deb --version "$CARGO_DEB_VERSION"
    fi
    command -v curl >/dev/null || { apt-get update -qq && apt-get install -y -qq curl >/dev/null; }
}

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# wait_http URL LOG: until URL answers 200 (at most 60 s).
wait_http() {
    for _ in $(seq 1 300); do
        if curl -fsS -o /dev/null "$1" 2>/dev/null; then return 0; fi
        sleep 0.2
    done
    cat "$2" >&2 || true
    fail "$1 never answered"
}

# api METHOD PATH [TOKEN [JSON]]: the body; fails on a status >= 400.
api() {
    local args=(-fsS -X "$1" "http://127.0.0.1:$port$2")
    [ -n "${3:-}" ] && args+=(-H "Authorization: Bearer $3")
    [ -n "${4:-}" ] && args+=(-H 'Content-Type: application/json' --data "$4")
    curl "${args[@]}" || fail "$1 $2"
}

# json KEY: that top-level key of the JSON on stdin.
json() { python3 -c "import json,sys; print(json.load(sys.stdin)['$1'])"; }
