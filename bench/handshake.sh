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
. bench/lib.sh
bench_init handshake

bench_keys user

run() {
    local mode=$1 state="$tmp/state-$1"
    bench_security "$mode"
    bench_cluster "$state" "$tmp/cluster-$mode.err" --set store.sync=none "${sec[@]}"
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
