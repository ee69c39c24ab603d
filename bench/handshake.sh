#!/usr/bin/env bash
# Handshake benchmark (issue 12): new connections per second one cluster manager
# accepts with CURVE (handshake + ZAP check + one NODE_LIST round trip per connection,
# 50 at a time; bench/handshake.c), and the same without CURVE for comparison.
# Prints one JSON line on stdout:
#   {"bench":"handshake","connections_per_s":...,"plain_connections_per_s":...,...}
# Knobs: HANDSHAKE_CONNECTIONS (2000), HANDSHAKE_PARALLEL (50), HANDSHAKE_SECONDS (15).
set -eu
cd "$(dirname "$0")/.."
BUILD="${BUILD:-build}"
N="${HANDSHAKE_CONNECTIONS:-2000}"
PAR="${HANDSHAKE_PARALLEL:-50}"
LIMIT_S="${HANDSHAKE_SECONDS:-15}"
gridnode="$BUILD/gridnode"
gen="$BUILD/bench/handshake"
for f in "$gridnode" "$gen"; do
    [ -x "$f" ] || { echo "handshake: $f not built (make BUILD=$BUILD bench)" >&2; exit 1; }
done
tmp="$(mktemp -d "${TMPDIR:-/tmp}/gridnode-bench-handshake.XXXXXX")"
pid=""
stop_cluster() {
    if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
        kill -TERM "$pid" 2>/dev/null || true
        for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        kill -KILL "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    fi
    pid=""
}
trap 'stop_cluster; rm -rf "$tmp"' EXIT
trap 'exit 130' INT TERM

mkdir -p "$tmp/keys"
"$gridnode" keygen -d "$tmp/keys" server >/dev/null
"$gridnode" keygen -d "$tmp/keys" bench >/dev/null
echo "$(tail -1 "$tmp/keys/bench.pub") bench user" >"$tmp/keys/authorized_keys"

run() {
    local mode=$1 state="$tmp/state-$1" sec
    if [ "$mode" = plain ]; then
        sec=(--set security.plain=true)
        export GRIDNODE_PLAIN=1
    else
        sec=(--set "security.secret_key=$tmp/keys/server.key"
             --set "security.authorized_keys=$tmp/keys/authorized_keys")
        unset GRIDNODE_PLAIN
        export GRIDNODE_KEY="$tmp/keys/bench.key" GRIDNODE_SERVER_KEY="$tmp/keys/server.pub"
    fi
    "$gridnode" cluster --set "cluster.listen=tcp://127.0.0.1:*" --set "cluster.state_dir=$state" \
        --set store.sync=none --set cluster.log_level=warn "${sec[@]}" \
        >"$tmp/cluster-$mode.out" 2>"$tmp/cluster-$mode.err" &
    pid=$!
    for _ in $(seq 100); do
        [ -s "$state/endpoint" ] && break
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    [ -s "$state/endpoint" ] || { echo "handshake: the cluster ($mode) did not start:" >&2; cat "$tmp/cluster-$mode.err" >&2; exit 1; }
    "$gen" --endpoint "$(cat "$state/endpoint")" --connections "$N" --parallel "$PAR" \
        --seconds "$LIMIT_S" || { echo "handshake: generator failed ($mode)" >&2; tail -5 "$tmp/cluster-$mode.err" >&2; exit 1; }
    stop_cluster
}

curve="$(run curve)"
plain="$(run plain)"
/usr/bin/python3 - "$curve" "$plain" <<'PY'
import json, sys
c, p = json.loads(sys.argv[1]), json.loads(sys.argv[2])
print(json.dumps({"bench": "handshake", "connections_per_s": c["connections_per_s"],
                  "connections": c["connections"], "parallel": c["parallel"],
                  "unanswered": c["unanswered"], "security": "curve",
                  "plain_connections_per_s": p["connections_per_s"]}, separators=(",", ":")))
PY
