#!/usr/bin/env bash
# bench/wire.sh: heavy answers on the wire, per content coding.
#
# Seeds DATASET, starts `pith serve`, saves SAMPLE topics (ids spread over
# the data set) as sent without a coding, then:
#  1. `pith bench encode` on those answers: bytes, the ratio to identity and
#     the CPU time per answer of gzip, zstd and Brotli at each level, with
#     the functions the cache uses (single-threaded, no server running);
#  2. asks the server for each topic with `Accept-Encoding` identity, gzip,
#     zstd, br and a browser's `gzip, deflate, br, zstd`: what the first
#     request gets (what is ready), then the same request again until the
#     coding made off the request path arrives (the time that took), its
#     bytes (body and head) checked to decode to the identity bytes, and how
#     many such answers fit in 1 Gbit/s.
#
# Settings (environment, all optional):
#   DATASET=heavy   realistic | heavy | reddit
#   SAMPLE=5        topics measured
#   REPEAT=3        compressions per answer and level in step 1 (the median counts)
#   LEVELS=         step 1's levels, e.g. "gzip:5 zstd:3,19 br:11" (default: pith bench encode's)
#   PORT=18970      pith's port on 127.0.0.1
#   PITH_BIN=       measure this binary instead of building one
#   OUT=            keep the server's log and the saved answers here
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh

DATASET=${DATASET:-heavy}
SAMPLE=${SAMPLE:-5}
REPEAT=${REPEAT:-3}
PORT=${PORT:-18970}

bench_workdir wire data

release_binary

seed_sqlite "$BIN" "$WORK/data"
"$BIN" serve --listen "127.0.0.1:$PORT" --data-dir "$WORK/data" >"$OUT/pith.log" 2>&1 &
PIDS+=($!)
wait_for_port "${PIDS[0]}" "$PORT" pith

URL=http://127.0.0.1:$PORT/api/v1/topics
IDS=()
for i in $(seq "$SAMPLE"); do IDS+=($(((TOPICS * i + SAMPLE) / (SAMPLE + 1)))); done
FILES=()
for id in "${IDS[@]}"; do
    curl -sf -o "$OUT/topic-$id.json" "$URL/$id"
    FILES+=("$OUT/topic-$id.json")
done
log "topics ${IDS[*]} of $TOPICS"

echo "## Each coding and level on the saved answers (pith bench encode)"
echo
"$BIN" bench encode -n "$REPEAT" ${LEVELS:+--levels "$LEVELS"} "${FILES[@]}"
echo

# Body bytes, head bytes and `Content-Encoding` (empty: none) of one GET of topic `id`.
get() { # id accept-encoding
    curl -sf -o /dev/null -H "Accept-Encoding: $2" \
        -w '%{size_download} %{size_header} %header{content-encoding}\n' "$URL/$1"
}

echo "## On the wire, from the server (mean per answer; 1 Gbit = 125,000,000 bytes/s)"
echo
echo "| Accept-Encoding | first answer | later answer | made after | body KB | head B | identity / body | answers/s in 1 Gbit |"
echo "|---|---|---|--:|--:|--:|--:|--:|"
for accept in identity gzip zstd br "gzip, deflate, br, zstd"; do
    body=0 head=0 first="" last="" waited=0
    for id in "${IDS[@]}"; do
        read -r _ _ ce0 < <(get "$id" "$accept")
        first=${ce0:-identity}
        started=$(date +%s%N)
        for _ in $(seq 1200); do
            read -r size hsize ce < <(get "$id" "$accept")
            ce=${ce:-identity}
            # A browser (br and zstd alike) is given the smaller of the two
            # made (zstd is made for it); otherwise the coding asked for.
            [[ $ce == "$accept" || ($accept == *zstd* && $ce =~ ^(zstd|br)$) ]] && break
            sleep 0.1
        done
        waited=$((waited + $(date +%s%N) - started))
        last=$ce
        body=$((body + size)) head=$((head + hsize))
        # The coded body decodes to the identity bytes (curl decodes gzip, zstd and br).
        curl -sf --compressed -H "Accept-Encoding: $accept" -o "$OUT/decoded.json" "$URL/$id"
        cmp -s "$OUT/decoded.json" "$OUT/topic-$id.json" || { log "topic $id in $ce does not decode to its identity bytes"; exit 1; }
    done
    identity=$(cat "${FILES[@]}" | wc -c)
    awk -v a="$accept" -v f="$first" -v l="$last" -v w="$waited" -v b="$body" -v h="$head" -v n="${#IDS[@]}" -v i="$identity" \
        'BEGIN { printf "| `%s` | %s | %s | %.1f s | %.1f | %.0f | %.2f | %.0f |\n", a, f, l, w / n / 1e9, b / n / 1000, h / n, i / b, 125000000 / ((b + h) / n) }'
done
rm -f "$OUT/decoded.json"
