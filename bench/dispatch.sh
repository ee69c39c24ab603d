#!/usr/bin/env bash
# Dispatch benchmark: one cluster manager (store.sync=full) and 1,000 simulated nodes in
# one load-generator process (bench/dispatch.c), each reporting an empty task's result
# and taking the next one (RESULT with want=1). Run twice on fresh state: with CURVE
# (keys from gridnode keygen, the default configuration) and plain (security.plain,
# loopback), so the cost of security shows (issue 12: CURVE keeps >= 70 % of plain).
# Prints one JSON line on stdout:
#   {"bench":"dispatch","tasks_per_s":...,"p50_us":...,"p99_us":...,        (CURVE)
#    "plain_tasks_per_s":...,"plain_p50_us":...,"plain_p99_us":...,"curve_vs_plain":...}
# Knobs: DISPATCH_CLIENTS (1000), DISPATCH_REQUESTS (100000), DISPATCH_SECONDS (20).
set -eu
cd "$(dirname "$0")/.."
BUILD="${BUILD:-build}"
CLIENTS="${DISPATCH_CLIENTS:-1000}"
REQUESTS="${DISPATCH_REQUESTS:-100000}"
LIMIT_S="${DISPATCH_SECONDS:-20}"
gridnode="$BUILD/gridnode"
gen="$BUILD/bench/dispatch"
for f in "$gridnode" "$gen"; do
    [ -x "$f" ] || { echo "dispatch: $f not built (make BUILD=$BUILD bench)" >&2; exit 1; }
done

. bench/lib.sh
bench_init dispatch

# every simulated node is one connection: lift the soft descriptor limit
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true

# keys: the cluster's, and one for the load generator (an admin: it submits and acts
# as every node)
bench_keys admin

# run MODE [req]: one measurement (curve or plain) on a fresh state dir; with "req", the
# issue 11 work request in seconds (RESULT req {"cpu": 0.001 s}, want 0: the first task
# reaches the request) instead of want=1; prints the JSON line
run() {
    local mode=$1 state="$tmp/state-$1${2:-}" line extra=""
    [ "${2:-}" = req ] && extra="--req 0.001"
    bench_security "$mode"
    bench_cluster "$state" "$tmp/cluster-$mode.err" --set store.sync=full "${sec[@]}"
    echo "dispatch: $mode cluster $pid on $endpoint, state in $state (sync=full)" >&2
    # enough tasks that the job never runs dry within the run
    line="$("$gen" --endpoint "$endpoint" --clients "$CLIENTS" --requests "$REQUESTS" \
        --seconds "$LIMIT_S" --submit $((REQUESTS + 2 * CLIENTS)) $extra)" || {
        echo "dispatch: the load generator failed ($mode); cluster log:" >&2
        tail -n 20 "$tmp/cluster-$mode.err" >&2
        exit 1
    }
    if ! kill -0 "$pid" 2>/dev/null; then
        echo "dispatch: the cluster died during the run ($mode):" >&2
        tail -n 20 "$tmp/cluster-$mode.err" >&2
        exit 1
    fi
    stop_cluster
    echo "$line"
}

curve="$(run curve)"
plain="$(run plain)"
req="$(run curve req)"
/usr/bin/python3 - "$curve" "$plain" "$req" <<'PY'
import json, sys
c, p, r = json.loads(sys.argv[1]), json.loads(sys.argv[2]), json.loads(sys.argv[3])
out = {"bench": "dispatch", "tasks_per_s": c["tasks_per_s"], "p50_us": c["p50_us"],
       "p99_us": c["p99_us"], "security": "curve",
       "plain_tasks_per_s": p["tasks_per_s"], "plain_p50_us": p["p50_us"],
       "plain_p99_us": p["p99_us"],
       "curve_vs_plain": round(c["tasks_per_s"] / p["tasks_per_s"], 3) if p["tasks_per_s"] else None,
       "req_tasks_per_s": r["tasks_per_s"], "req_p50_us": r["p50_us"], "req_p99_us": r["p99_us"]}
print(json.dumps(out, separators=(",", ":")))
PY
