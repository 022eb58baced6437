#!/usr/bin/env bash
# The Lemmy round trip (docs/FEDERATION.md, "Lemmy round trip"): two real
# Lemmy servers (A and B) and a Pith server on loopback. Lemmy is driven
# through its HTTP API (v3), Pith through its own. A's user follows a Pith
# community, posts, comments, votes, edits and deletes in it; B's user
# only follows, and must get A's writes through Pith's Group (FEP-1b12);
# both get the Pith member's. Then the other way round (phase 2): the Pith
# member joins a community hosted by Lemmy A, reads, replies, votes, leaves. Not part of ./test.sh: it needs a Lemmy
# binary (LEMMY_BIN, required; this script never builds Lemmy), a
# PostgreSQL for Lemmy and three host names for loopback addresses.
#
#   LEMMY_BIN=/path/to/lemmy_server tests/federation/lemmy.sh
#
# LEMMY_BIN    lemmy_server, a debug build: only a debug build of Lemmy
#              federates over plain http, with ports and loopback addresses
# PITH         the pith binary (default: cargo build, target/debug/pith)
# LEMMY_HOST   (lemmy.test), LEMMY2_HOST (lemmy2.test), PITH_HOST (pith.test):
#              names of three different loopback addresses, e.g. in /etc/hosts
#                127.0.0.2 lemmy.test
#                127.0.0.3 pith.test
#                127.0.0.4 lemmy2.test
#              Lemmy needs names, not IP addresses (it refuses ids without a
#              domain), and different ones: it never sends to its own
#              domain, whatever the port (crates/federate/src/lib.rs).
# PGURL        a PostgreSQL where the script may create and drop the
#              databases lemmy_roundtrip_a and _b (postgres://postgres@127.0.0.1:5432)
# KEEP=1       keep the servers' data and logs in the temporary directory
#
# Prints PASS or FAIL for each step; exits 1 if any step failed.
set -uo pipefail
cd "$(dirname "$0")/../.."

: "${LEMMY_BIN:?set LEMMY_BIN to a lemmy_server binary (a debug build)}"
LEMMY_HOST=${LEMMY_HOST:-lemmy.test}
LEMMY2_HOST=${LEMMY2_HOST:-lemmy2.test}
PITH_HOST=${PITH_HOST:-pith.test}
PGURL=${PGURL:-postgres://postgres@127.0.0.1:5432}
for tool in curl jq psql python3 getent; do
    command -v "$tool" >/dev/null || { echo "lemmy.sh: $tool is missing" >&2; exit 2; }
done
[ -x "$LEMMY_BIN" ] || { echo "lemmy.sh: LEMMY_BIN=$LEMMY_BIN is not an executable" >&2; exit 2; }
address() { getent ahostsv4 "$1" | awk 'NR == 1 { print $1 }'; }
A_IP=$(address "$LEMMY_HOST")
B_IP=$(address "$LEMMY2_HOST")
PITH_IP=$(address "$PITH_HOST")
if [ -z "$A_IP" ] || [ -z "$B_IP" ] || [ -z "$PITH_IP" ] ||
    [ "$(printf '%s\n' "$LEMMY_HOST" "$LEMMY2_HOST" "$PITH_HOST" | sort -u | wc -l)" != 3 ]; then
    echo "lemmy.sh: $LEMMY_HOST, $LEMMY2_HOST and $PITH_HOST must be three names of loopback addresses," >&2
    echo "e.g. in /etc/hosts: 127.0.0.2 $LEMMY_HOST / 127.0.0.3 $PITH_HOST / 127.0.0.4 $LEMMY2_HOST" >&2
    exit 2
fi

if [ -z "${PITH:-}" ]; then
    echo "== building pith"
    cargo build --locked --quiet --bin pith || exit 2
    PITH="${CARGO_TARGET_DIR:-target}/debug/pith"
fi

free_port() {
    python3 -c 'import socket, sys; s = socket.socket(); s.bind((sys.argv[1], 0)); print(s.getsockname()[1])' "$1"
}
A_PORT=$(free_port "$A_IP")
B_PORT=$(free_port "$B_IP")
PITH_PORT=$(free_port "$PITH_IP")
A_URL="http://$LEMMY_HOST:$A_PORT"
B_URL="http://$LEMMY2_HOST:$B_PORT"
PITH_URL="http://$PITH_HOST:$PITH_PORT"
COMMUNITY=interop

WORK=$(mktemp -d "${TMPDIR:-/tmp}/pith-lemmy.XXXXXX")
PIDS=()
stop_servers() {
    for pid in "${PIDS[@]}"; do
        kill -TERM "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    done
    PIDS=()
}
cleanup() {
    stop_servers
    for db in lemmy_roundtrip_a lemmy_roundtrip_b; do
        psql "$PGURL/postgres" -qc "DROP DATABASE IF EXISTS $db" >/dev/null 2>&1 || true
    done
    if [ "${KEEP:-}" = 1 ]; then echo "== kept $WORK"; else rm -rf "$WORK"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

PASSED=0
FAILED=0
pass() { PASSED=$((PASSED + 1)); echo "PASS  $*"; }
fail() { FAILED=$((FAILED + 1)); echo "FAIL  $*"; }
# until_ok SECONDS COMMAND...: runs COMMAND every half second until it
# succeeds, for at most SECONDS.
until_ok() {
    local deadline=$((SECONDS + $1))
    shift
    until "$@" >/dev/null 2>&1; do
        [ "$SECONDS" -ge "$deadline" ] && return 1
        sleep 0.5
    done
}
uri() { jq -rn --arg q "$1" '$q|@uri'; }

# A Lemmy's API (v3) as its admin: `lemmy a GET /path` or `lemmy b POST /path JSON`.
A_JWT=
B_JWT=
lemmy() {
    local which=$1 method=$2 path=$3 url jwt
    shift 3
    if [ "$which" = a ]; then url=$A_URL jwt=$A_JWT; else url=$B_URL jwt=$B_JWT; fi
    curl -sS -X "$method" "$url/api/v3$path" -H "authorization: Bearer $jwt" \
        -H 'content-type: application/json' ${1:+-d "$1"}
}
# Pith's API as its admin: `pith_api GET /path` or `pith_api POST /path JSON`.
PITH_TOKEN=
pith_api() {
    local method=$1 path=$2
    shift 2
    curl -sS -X "$method" "$PITH_URL/api/v1$path" -H "authorization: Bearer $PITH_TOKEN" \
        -H 'content-type: application/json' ${1:+-d "$1"}
}
ap_get() { curl -sS -H 'accept: application/activity+json' "$1"; }

# start_lemmy NAME HOST IP PORT: a Lemmy with its own database and admin.
start_lemmy() {
    local name=$1 host=$2 ip=$3 port=$4 db=lemmy_roundtrip_$1
    psql "$PGURL/postgres" -qc "DROP DATABASE IF EXISTS $db" >/dev/null 2>&1
    psql "$PGURL/postgres" -qc "CREATE DATABASE $db" >/dev/null || { echo "lemmy.sh: cannot create $db at $PGURL" >&2; exit 2; }
    cat >"$WORK/lemmy_$name.hjson" <<EOF
{
  database: { uri: "$PGURL/$db" }
  hostname: "$host:$port"
  bind: "$ip"
  port: $port
  tls_enabled: false
  setup: { admin_username: "lemmy_$name", admin_password: "lemmylemmy-roundtrip", site_name: "lemmy-$name" }
}
EOF
    # LEMMY_TEST_FAST_FEDERATION: Lemmy's sender checks its queue every
    # 100 ms instead of 30 s (crates/federate/src/util.rs), as Lemmy's own
    # federation tests run it.
    LEMMY_CONFIG_LOCATION="$WORK/lemmy_$name.hjson" LEMMY_TEST_FAST_FEDERATION=1 \
        RUST_LOG="warn,lemmy_server=info,lemmy_apub=debug,lemmy_federate=debug,activitypub_federation=debug" \
        "$LEMMY_BIN" >"$WORK/lemmy_$name.log" 2>&1 &
    PIDS+=($!)
}

echo "== Lemmy A at $A_URL, Lemmy B at $B_URL ($LEMMY_BIN); Pith at $PITH_URL ($PITH)"
start_lemmy a "$LEMMY_HOST" "$A_IP" "$A_PORT"
start_lemmy b "$LEMMY2_HOST" "$B_IP" "$B_PORT"
mkdir -p "$WORK/pith"
PITH_TOKEN=$("$PITH" user add ana --admin --data-dir "$WORK/pith" 2>/dev/null | tail -n 1)
NO_COLOR=1 PITH_LOG=info "$PITH" serve --listen "$PITH_IP:$PITH_PORT" \
    --public-url "$PITH_URL" --data-dir "$WORK/pith" --readers 2 --cache-mb 16 --rate-limits false \
    --federation on --federation-allow-private >"$WORK/pith.log" 2>&1 &
PIDS+=($!)

up() { curl -fsS -o /dev/null "$1"; }
for u in "$A_URL/api/v3/site" "$B_URL/api/v3/site" "$PITH_URL/healthz"; do
    if until_ok 180 up "$u"; then pass "started: $u answers"; else
        fail "did not start: $u"; tail -n 20 "$WORK"/*.log; exit 1
    fi
done
login() { lemmy "$1" POST /user/login "{\"username_or_email\": \"lemmy_$1\", \"password\": \"lemmylemmy-roundtrip\"}" | jq -r '.jwt // empty'; }
A_JWT=$(login a)
B_JWT=$(login b)
[ -n "$A_JWT" ] && [ -n "$B_JWT" ] && pass "logged in on both Lemmys" || { fail "Lemmy login"; exit 1; }
# A's user as Pith names a remote user: name@host:port.
A_USER="lemmy_a@$LEMMY_HOST:$A_PORT"

pith_api POST /communities "{\"name\": \"$COMMUNITY\", \"title\": \"Interop\", \"description\": \"A Pith community followed from **Lemmy**\"}" >/dev/null
EARLY=$(pith_api POST "/communities/$COMMUNITY/topics" '{"title": "Posted before the follow", "body": "in the outbox"}' | jq -r '.id')

# post_in W AP_ID: Lemmy W's post whose ActivityPub id is AP_ID.
post_in() {
    local which=$1 ap=$2 cid
    if [ "$which" = a ]; then cid=$A_COMMUNITY; else cid=$B_COMMUNITY; fi
    lemmy "$which" GET "/post/list?community_id=$cid&sort=New&type_=All&limit=50" |
        jq -e --arg ap "$ap" '.posts[] | select(.post.ap_id == $ap)'
}
post_of() { lemmy "$1" GET "/post?id=$2" | jq -e "$3"; }

# --- Discovery, the Group and its outbox, the follow.
A_COMMUNITY=
B_COMMUNITY=
for w in a b; do
    resolved=$(lemmy $w GET "/resolve_object?q=$(uri "!$COMMUNITY@$PITH_HOST:$PITH_PORT")")
    cid=$(jq -r '.community.community.id // empty' <<<"$resolved")
    if [ -n "$cid" ] && [ "$(jq -r '.community.community.actor_id' <<<"$resolved")" = "$PITH_URL/ap/c/$COMMUNITY" ]; then
        pass "Lemmy $w resolves !$COMMUNITY@$PITH_HOST:$PITH_PORT (WebFinger, then the Group): community $cid, title $(jq -c '.community.community.title' <<<"$resolved")"
    else
        fail "Lemmy $w resolve_object !$COMMUNITY@$PITH_HOST:$PITH_PORT: $(head -c 300 <<<"$resolved")"
        exit 1
    fi
    if [ $w = a ]; then A_COMMUNITY=$cid; else B_COMMUNITY=$cid; fi
done
for w in a b; do
    if until_ok 20 post_in $w "$PITH_URL/ap/t/$EARLY"; then
        pass "Lemmy $w read the Group's outbox: the topic posted before it came is a Lemmy post"
    else
        fail "Lemmy $w did not take the earlier topic from the Group's outbox"
    fi
done
# Lemmy's sender starts a queue for a server it has just met a few seconds
# later, from its newest activity on (crates/federate/src/worker.rs,
# get_latest_ids: "skip all past activities"): a Follow sent before then
# is never delivered. So wait for its queue for Pith's host.
queue_for_pith() {
    lemmy "$1" GET /federated_instances |
        jq -e --arg h "$PITH_HOST" '.federated_instances.linked[] | select(.domain == $h and .federation_state != null)'
}
pith_followers() { ap_get "$PITH_URL/ap/c/$COMMUNITY/followers" | jq -e ".totalItems == $1"; }
subscribed() {
    local cid=$A_COMMUNITY
    [ "$1" = b ] && cid=$B_COMMUNITY
    lemmy "$1" GET "/community?id=$cid" | jq -e '.community_view.subscribed == "Subscribed"'
}
n=0
for w in a b; do
    until_ok 30 queue_for_pith $w || echo "       (Lemmy $w has no sender queue for $PITH_HOST yet)"
    cid=$A_COMMUNITY
    [ $w = b ] && cid=$B_COMMUNITY
    lemmy $w POST /community/follow "{\"community_id\": $cid, \"follow\": true}" >/dev/null
    n=$((n + 1))
    if until_ok 20 pith_followers $n; then pass "Follow from Lemmy $w: Pith counts $n followers"; else
        fail "Follow from Lemmy $w: Pith counts $(ap_get "$PITH_URL/ap/c/$COMMUNITY/followers" | jq '.totalItems')"
    fi
    if until_ok 20 subscribed $w; then
        pass "Accept to Lemmy $w: Subscribed (Pith's signed Accept verified)"
    else
        fail "Accept to Lemmy $w: $(lemmy $w GET "/community?id=$cid" | jq -c '.community_view.subscribed')"
    fi
done

# --- A's user posts into the community; Pith makes it a topic, and B gets it.
A_POST=$(lemmy a POST /post "{\"name\": \"From Lemmy\", \"body\": \"Written on *Lemmy*\", \"community_id\": $A_COMMUNITY}")
A_POST_ID=$(jq -r '.post_view.post.id // empty' <<<"$A_POST")
A_POST_AP=$(jq -r '.post_view.post.ap_id // empty' <<<"$A_POST")
pith_topic_by_a() {
    pith_api GET "/communities/$COMMUNITY/topics?sort=new" |
        jq -e --arg a "$A_USER" '(.topics // .items)[] | select(.title == "From Lemmy" and .author == $a)'
}
P_TOPIC=
if [ -n "$A_POST_ID" ] && until_ok 20 pith_topic_by_a; then
    P_TOPIC=$(pith_topic_by_a | jq -r '.id' | head -n 1)
    pass "Create(Page) from Lemmy a: Pith topic $P_TOPIC by $A_USER, body $(pith_api GET "/topics/$P_TOPIC" | jq -c '.topic.body')"
else
    fail "Create(Page) from Lemmy a: no Pith topic (Lemmy answered $(head -c 300 <<<"$A_POST"))"
fi
B_POST_ID=
if [ -n "$A_POST_AP" ] && until_ok 30 post_in b "$A_POST_AP"; then
    B_POST_ID=$(post_in b "$A_POST_AP" | jq -r '.post.id' | head -n 1)
    pass "Announce(Create(Page by Lemmy a's user)) to Lemmy b: post $B_POST_ID by $(post_in b "$A_POST_AP" | jq -r '.creator.actor_id')"
else
    fail "Announce(Create(Page by Lemmy a's user)) to Lemmy b: not there"
fi

# --- A's user comments on its own post and on the Pith member's topic.
# The Pith member's earlier topic on each Lemmy: from the outbox, else
# fetched by its id, so the steps below do not hang on the outbox's.
early_on() {
    post_in "$1" "$PITH_URL/ap/t/$EARLY" | jq -r '.post.id' | head -n 1 | grep . ||
        lemmy "$1" GET "/resolve_object?q=$(uri "$PITH_URL/ap/t/$EARLY")" | jq -r '.post.post.id // empty'
}
A_EARLY=$(early_on a)
B_EARLY=$(early_on b)
A_COMMENT=$(lemmy a POST /comment "{\"post_id\": ${A_POST_ID:-0}, \"content\": \"A comment from Lemmy\"}" | jq -r '.comment_view.comment.id // empty')
lemmy a POST /comment "{\"post_id\": ${A_EARLY:-0}, \"content\": \"Lemmy replies to Pith\"}" >/dev/null
reply_on() {
    pith_api GET "/topics/$1" | jq -e --arg a "$A_USER" --arg b "$2" '.posts[] | select(.author == $a and .body == $b)'
}
P_REPLY=
if [ -n "$P_TOPIC" ] && until_ok 20 reply_on "$P_TOPIC" "A comment from Lemmy"; then
    P_REPLY=$(reply_on "$P_TOPIC" "A comment from Lemmy" | jq -r '.id' | head -n 1)
    pass "Create(Note) from Lemmy a on its own post: Pith post $P_REPLY on topic $P_TOPIC"
else
    fail "Create(Note) from Lemmy a on its own post: no reply on Pith"
fi
if until_ok 20 reply_on "$EARLY" "Lemmy replies to Pith"; then
    pass "Create(Note) from Lemmy a on the Pith member's topic: a reply on Pith topic $EARLY"
else
    fail "Create(Note) from Lemmy a on the Pith member's topic: no reply on Pith"
fi
comment_in() { lemmy "$1" GET "/comment/list?post_id=${2:-0}&type_=All" | jq -e --arg c "$3" '.comments[] | select(.comment.content == $c)'; }
if until_ok 30 comment_in b "$B_POST_ID" "A comment from Lemmy"; then
    pass "Announce(Create(Note by Lemmy a's user)) to Lemmy b: the comment is there"
else
    fail "Announce(Create(Note by Lemmy a's user)) to Lemmy b: no comment"
fi

# --- A's user edits its post and its comment.
lemmy a PUT /post "{\"post_id\": ${A_POST_ID:-0}, \"body\": \"Written on *Lemmy*, edited\"}" >/dev/null
lemmy a PUT /comment "{\"comment_id\": ${A_COMMENT:-0}, \"content\": \"A comment from Lemmy, edited\"}" >/dev/null
pith_body_is() { pith_api GET "/topics/$1" | jq -e --arg b "$2" '.topic.body == $b'; }
if [ -n "$P_TOPIC" ] && until_ok 20 pith_body_is "$P_TOPIC" "Written on *Lemmy*, edited"; then
    pass "Update(Page) from Lemmy a: the Pith topic's body is edited"
else
    fail "Update(Page) from Lemmy a: the Pith topic's body is $(pith_api GET "/topics/$P_TOPIC" | jq -c '.topic.body')"
fi
if [ -n "$P_TOPIC" ] && until_ok 20 reply_on "$P_TOPIC" "A comment from Lemmy, edited"; then
    pass "Update(Note) from Lemmy a: the Pith post is edited"
else
    fail "Update(Note) from Lemmy a: the Pith post is not edited"
fi
if until_ok 30 post_of b "${B_POST_ID:-0}" '.post_view.post.body == "Written on *Lemmy*, edited"'; then
    pass "Announce(Update(Page by Lemmy a's user)) to Lemmy b: the body is edited"
else
    fail "Announce(Update(Page by Lemmy a's user)) to Lemmy b: the body is $(lemmy b GET "/post?id=${B_POST_ID:-0}" | jq -c '.post_view.post.body')"
fi

# --- A's user votes on the Pith member's topic: up, then down.
# B counts the votes it is told of: it took the topic with its author's
# own upvote (Lemmy adds one to every post it receives), so A's votes move
# B's counts from there.
score_is() { pith_api GET "/topics/$1" | jq -e ".topic.score == $2"; }
b_counts() { lemmy b GET "/post?id=${B_EARLY:-0}" | jq -c '.post_view.counts | {upvotes, downvotes}'; }
B_UP=$(lemmy b GET "/post?id=${B_EARLY:-0}" | jq '.post_view.counts.upvotes // 0')
for vote in "1 Like $((B_UP + 1)) 0" "-1 Dislike $B_UP 1" "0 Undo $B_UP 0"; do
    read -r value kind up down <<<"$vote"
    lemmy a POST /post/like "{\"post_id\": ${A_EARLY:-0}, \"score\": $value}" >/dev/null
    if until_ok 20 score_is "$EARLY" "$value"; then pass "$kind from Lemmy a: the Pith topic's score is $value"; else
        fail "$kind from Lemmy a: the Pith topic's score is $(pith_api GET "/topics/$EARLY" | jq '.topic.score')"
    fi
    if until_ok 30 post_of b "${B_EARLY:-0}" ".post_view.counts.upvotes == $up and .post_view.counts.downvotes == $down"; then
        pass "Announce($kind by Lemmy a's user) to Lemmy b: $(b_counts)"
    else
        fail "Announce($kind by Lemmy a's user) to Lemmy b: $(b_counts), not upvotes $up, downvotes $down"
    fi
done

# --- The Pith member posts, replies, votes and edits: both Lemmys get it.
NEW=$(pith_api POST "/communities/$COMMUNITY/topics" '{"title": "Posted on Pith after the follow", "body": "Hello *Lemmy*"}' | jq -r '.id')
A_NEW=
B_NEW=
for w in a b; do
    if until_ok 30 post_in $w "$PITH_URL/ap/t/$NEW"; then
        id=$(post_in $w "$PITH_URL/ap/t/$NEW" | jq -r '.post.id' | head -n 1)
        pass "Announce(Create(Page)) of a Pith topic to Lemmy $w: post $id, body $(post_in $w "$PITH_URL/ap/t/$NEW" | jq -c '.post.body' | head -n 1)"
        if [ $w = a ]; then A_NEW=$id; else B_NEW=$id; fi
    else
        fail "Announce(Create(Page)) of a Pith topic to Lemmy $w: not there"
    fi
done
NOTE=$(pith_api POST "/topics/$NEW/posts" '{"body": "A reply on Pith"}' | jq -r '.id')
for w in a b; do
    id=$A_NEW
    [ $w = b ] && id=$B_NEW
    if until_ok 30 comment_in $w "$id" "A reply on Pith"; then
        pass "Announce(Create(Note)) of a Pith reply to Lemmy $w: a comment (Pith post $NOTE)"
    else
        fail "Announce(Create(Note)) of a Pith reply to Lemmy $w: no comment"
    fi
done
# Threads: A's user answers the Pith reply, the Pith member answers A's comment.
A_NOTE=$(comment_in a "$A_NEW" "A reply on Pith" | jq -r '.comment.id' | head -n 1)
lemmy a POST /comment "{\"post_id\": ${A_NEW:-0}, \"parent_id\": ${A_NOTE:-0}, \"content\": \"Lemmy answers the Pith reply\"}" >/dev/null
nested_on_pith() {
    pith_api GET "/topics/$NEW" | jq -e --arg a "$A_USER" --argjson p "${NOTE:-0}" \
        '.posts[] | select(.author == $a and .body == "Lemmy answers the Pith reply" and .parent_id == $p)'
}
if until_ok 20 nested_on_pith; then pass "Create(Note) from Lemmy a replying to a Pith post: a reply to post $NOTE on Pith"; else
    fail "Create(Note) from Lemmy a replying to a Pith post: no reply to post $NOTE on Pith"
fi
if [ -n "$P_REPLY" ]; then
    pith_api POST "/topics/$P_TOPIC/posts" "{\"body\": \"Pith answers the Lemmy comment\", \"parent_id\": $P_REPLY}" >/dev/null
fi
nested_on_a() {
    comment_in a "$A_POST_ID" "Pith answers the Lemmy comment" | jq -e --arg c "${A_COMMENT:-0}" '.comment.path | split(".") | index($c) != null'
}
if [ -n "$P_REPLY" ] && until_ok 30 nested_on_a; then
    pass "Announce(Create(Note)) of a Pith reply to a Lemmy comment: under that comment on Lemmy a"
else
    fail "Announce(Create(Note)) of a Pith reply to a Lemmy comment: not under it on Lemmy a ($(comment_in a "$A_POST_ID" "Pith answers the Lemmy comment" | jq -c '.comment.path'))"
fi

if [ -n "$P_TOPIC" ]; then pith_api POST "/topics/$P_TOPIC/vote" '{"value": 1}' >/dev/null; fi
# Lemmy counts its author's own upvote: 1 before, 2 after.
if [ -n "$P_TOPIC" ] && until_ok 30 post_of a "${A_POST_ID:-0}" '.post_view.counts.score == 2'; then
    pass "Announce(Like) of a Pith vote to Lemmy a: its post's score is 2 (its author's and the Pith member's)"
else
    fail "Announce(Like) of a Pith vote to Lemmy a: score $(lemmy a GET "/post?id=${A_POST_ID:-0}" | jq '.post_view.counts.score')"
fi
pith_api PATCH "/topics/$NEW" '{"body": "Hello *Lemmy*, edited"}' >/dev/null
if [ -n "$A_NEW" ] && until_ok 30 post_of a "$A_NEW" '.post_view.post.body == "Hello *Lemmy*, edited"'; then
    pass "Announce(Update(Page)) of a Pith edit to Lemmy a: the body is edited"
else
    fail "Announce(Update(Page)) of a Pith edit to Lemmy a: the body is $(lemmy a GET "/post?id=${A_NEW:-0}" | jq -c '.post_view.post.body')"
fi

# --- Moderation and deletion on Pith; Lemmy should see them.
curl -sS -o /dev/null -X POST "$PITH_URL/api/v1/topics/$NEW/lock" -H "authorization: Bearer $PITH_TOKEN" \
    -H 'content-type: application/json' -d '{}'
if [ -n "$A_NEW" ] && until_ok 15 post_of a "$A_NEW" '.post_view.post.locked == true'; then
    pass "lock on Pith: the Lemmy post is locked"
else
    fail "lock on Pith: the Lemmy post is not locked (Lemmy 0.19 takes the moderator's Lock)"
fi
if [ -n "$P_REPLY" ]; then
    curl -sS -o /dev/null -X POST "$PITH_URL/api/v1/posts/$P_REPLY/remove" -H "authorization: Bearer $PITH_TOKEN" \
        -H 'content-type: application/json' -d '{"reason": "round trip"}'
fi
removed_in_a() { lemmy a GET "/comment/list?post_id=${A_POST_ID:-0}&type_=All" | jq -e '.comments[] | select(.comment.id == '"${A_COMMENT:-0}"' and .comment.removed == true)'; }
if [ -n "$P_REPLY" ] && until_ok 15 removed_in_a; then
    pass "removal on Pith of Lemmy a's comment: removed on Lemmy a"
else
    fail "removal on Pith of Lemmy a's comment: not removed on Lemmy a (Lemmy takes the moderator's Delete, with summary)"
fi
curl -sS -o /dev/null -X DELETE "$PITH_URL/api/v1/topics/$NEW" -H "authorization: Bearer $PITH_TOKEN"
if [ -n "$A_NEW" ] && until_ok 15 post_of a "$A_NEW" '.post_view.post.deleted == true'; then
    pass "deletion on Pith: the Lemmy post is deleted"
else
    fail "deletion on Pith: the Lemmy post is not deleted (Lemmy takes the author's Delete)"
fi

# --- A's user deletes its post; Pith deletes the topic and B hears of it.
lemmy a POST /post/delete "{\"post_id\": ${A_POST_ID:-0}, \"deleted\": true}" >/dev/null
pith_deleted() {
    [ "$(curl -s -o /dev/null -w '%{http_code}' "$PITH_URL/api/v1/topics/$P_TOPIC")" = 404 ] ||
        pith_api GET "/topics/$P_TOPIC" | jq -e '.topic.deleted == true'
}
if [ -n "$P_TOPIC" ] && until_ok 20 pith_deleted; then pass "Delete from Lemmy a: Pith topic $P_TOPIC is deleted"; else
    fail "Delete from Lemmy a: Pith topic $P_TOPIC is still there"
fi
if until_ok 30 post_of b "${B_POST_ID:-0}" '.post_view.post.deleted == true'; then
    pass "Announce(Delete by Lemmy a's user) to Lemmy b: the post is deleted"
else
    fail "Announce(Delete by Lemmy a's user) to Lemmy b: the post is not deleted"
fi

# --- Phase 2: the Pith member joins a community hosted by Lemmy a, gets
# its posts through its Group's Announces, replies and votes there, and
# leaves.
LC=$(lemmy a POST /community '{"name": "lemmings", "title": "Lemmings"}' | jq -r '.community_view.community.id // empty')
HANDLE="lemmings@$LEMMY_HOST:$A_PORT"
REMOTE=$(pith_api POST /resolve "{\"q\": \"!$HANDLE\"}" | jq -r '.name // empty')
if [ -n "$LC" ] && [ "$REMOTE" = "$HANDLE" ]; then
    pass "Pith resolves !$HANDLE (WebFinger, then Lemmy's Group): community $REMOTE"
else
    fail "Pith resolves !$HANDLE: got '$REMOTE' (Lemmy community '$LC')"
fi
pith_api POST "/communities/$REMOTE/follow" >/dev/null
followed() { pith_api GET "/communities/$REMOTE/follow" | jq -e '.following == "accepted"'; }
if [ -n "$REMOTE" ] && until_ok 30 followed; then
    pass "Follow from the Pith member to Lemmy a's Group: accepted"
else
    fail "Follow from the Pith member to Lemmy a's Group: $(pith_api GET "/communities/$REMOTE/follow")"
fi
subscribers() { lemmy a GET "/community?id=${LC:-0}" | jq '.community_view.counts.subscribers'; }
SUBSCRIBED=$(subscribers)
LP=$(lemmy a POST /post "{\"name\": \"Posted in a Lemmy community\", \"body\": \"Hello *Pith*\", \"community_id\": ${LC:-0}}" |
    jq -r '.post_view.post.id // empty')
remote_topic() {
    pith_api GET "/communities/$REMOTE/topics?sort=new" |
        jq -e '[.topics[] | select(.title == "Posted in a Lemmy community")] | if length == 1 then .[0].id else empty end'
}
PT=
if [ -n "$LP" ] && until_ok 30 remote_topic >/dev/null; then
    PT=$(remote_topic)
    pass "Announce(Create(Page)) from Lemmy a's Group: Pith topic $PT in $REMOTE (once, though Lemmy announces it twice)"
else
    fail "Lemmy a's post in its own community did not reach Pith: $(pith_api GET "/communities/$REMOTE/topics?sort=new" | head -c 300)"
fi
if [ -n "$PT" ]; then
    pith_api POST "/topics/$PT/posts" '{"body": "A reply from *Pith*"}' >/dev/null
    pith_api POST "/topics/$PT/vote" '{"value": 1}' >/dev/null
fi
lemmy_comment() { lemmy a GET "/comment/list?post_id=${LP:-0}&type_=All" | jq -e '.comments[] | select(.comment.content == "A reply from *Pith*")'; }
if [ -n "$PT" ] && until_ok 30 lemmy_comment >/dev/null; then
    pass "the Pith member's reply reaches Lemmy a's Group: a comment on its post"
else
    fail "the Pith member's reply is not on Lemmy a: $(lemmy a GET "/comment/list?post_id=${LP:-0}&type_=All" | head -c 300)"
fi
if [ -n "$PT" ] && until_ok 30 post_of a "${LP:-0}" '.post_view.counts.score == 2' >/dev/null; then
    pass "the Pith member's vote reaches Lemmy a's Group: its post's score is 2 (its author's and the Pith member's)"
else
    fail "the Pith member's vote: Lemmy a's post has score $(lemmy a GET "/post?id=${LP:-0}" | jq '.post_view.counts.score')"
fi
pith_api DELETE "/communities/$REMOTE/follow" >/dev/null
unsubscribed() { [ "$(subscribers)" = "$((SUBSCRIBED - 1))" ]; }
if [ -n "$SUBSCRIBED" ] && until_ok 30 unsubscribed; then
    pass "Undo(Follow) from the Pith member: Lemmy a counts $((SUBSCRIBED - 1)) subscribers"
else
    fail "Undo(Follow) from the Pith member: Lemmy a counts $(subscribers) subscribers (was $SUBSCRIBED)"
fi

# --- Unfollow.
n=2
for w in a b; do
    cid=$A_COMMUNITY
    [ $w = b ] && cid=$B_COMMUNITY
    lemmy $w POST /community/follow "{\"community_id\": $cid, \"follow\": false}" >/dev/null
    n=$((n - 1))
    if until_ok 20 pith_followers $n; then pass "Undo(Follow) from Lemmy $w: Pith counts $n followers"; else
        fail "Undo(Follow) from Lemmy $w: Pith counts $(ap_get "$PITH_URL/ap/c/$COMMUNITY/followers" | jq '.totalItems')"
    fi
done

echo "== $PASSED passed, $FAILED failed"
if [ "$FAILED" != 0 ]; then
    # Stopped first: a log read while its server still writes it was seen
    # short here (under gVisor), missing its last lines.
    stop_servers
    echo "== Pith log: deliveries refused or failed"
    grep -E 'WARN|ERROR|refused|dropped' "$WORK/pith.log" | tail -n 20
    for w in a b; do
        echo "== Lemmy $w log: warnings and errors (last 10; fetched documents elided)"
        grep -E 'WARN|ERROR' "$WORK/lemmy_$w.log" | grep -v -e 'Received terminate' -e 'Waiting for' | tail -n 10 | sed -E 's/with content \{.*\}: /with content {...}: /' | cut -c 1-400
    done
    exit 1
fi
