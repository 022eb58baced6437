#!/usr/bin/env bash
# Makes sure a NATS server answers on 127.0.0.1:4222 for the cluster tests
# (tests/it/cluster.rs), installing and starting one when none does.
set -euo pipefail
up() { (exec 3<>/dev/tcp/127.0.0.1/4222) 2>/dev/null; }
up && exit 0
if ! command -v nats-server >/dev/null; then
    apt-get update -qq && apt-get install -y -qq nats-server
fi
nats-server -a 127.0.0.1 -p 4222 >"${TMPDIR:-/tmp}/pith-test-nats.log" 2>&1 &
for _ in $(seq 100); do
    up && exit 0
    sleep 0.1
done
echo "nats-server did not start on 127.0.0.1:4222" >&2
exit 1
