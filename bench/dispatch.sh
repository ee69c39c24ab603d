#!/usr/bin/env bash
# Dispatch benchmark: one cluster manager (store.sync=full) and 1,000 simulated nodes in
# one load-generator process (bench/dispatch.c), each reporting an empty task's result
# and taking the next one (RESULT with want=1). Prints one JSON line on stdout:
#   {"bench":"dispatch","tasks_per_s":...,"p50_us":...,"p99_us":...}
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

tmp="$(mktemp -d "${TMPDIR:-/tmp}/gridnode-bench-dispatch.XXXXXX")"
pid=""
cleanup() {
    if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
        kill -TERM "$pid" 2>/dev/null || true
        for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        kill -KILL "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    fi
    rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# every simulated node is one connection: lift the soft descriptor limit
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true

"$gridnode" cluster --set "cluster.listen=tcp://127.0.0.1:*" \
    --set "cluster.state_dir=$tmp/state" --set store.sync=full \
    --set cluster.log_level=warn >"$tmp/cluster.out" 2>"$tmp/cluster.err" &
pid=$!
for _ in $(seq 100); do
    [ -s "$tmp/state/endpoint" ] && break
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
done
if [ ! -s "$tmp/state/endpoint" ]; then
    echo "dispatch: the cluster did not start:" >&2
    cat "$tmp/cluster.err" >&2
    exit 1
fi
endpoint="$(cat "$tmp/state/endpoint")"
echo "dispatch: cluster $pid on $endpoint, state in $tmp/state (sync=full)" >&2

# enough tasks that the job never runs dry within the run
line="$("$gen" --endpoint "$endpoint" --clients "$CLIENTS" --requests "$REQUESTS" \
    --seconds "$LIMIT_S" --submit $((REQUESTS + 2 * CLIENTS)))" || {
    echo "dispatch: the load generator failed; cluster log:" >&2
    tail -n 20 "$tmp/cluster.err" >&2
    exit 1
}
if ! kill -0 "$pid" 2>/dev/null; then
    echo "dispatch: the cluster died during the run:" >&2
    tail -n 20 "$tmp/cluster.err" >&2
    exit 1
fi
echo "$line"
