#!/usr/bin/env bash
# Dispatch benchmark: one cluster manager (store.sync=full) and 1,000 simulated nodes in
# one load-generator process (bench/dispatch.c), each reporting an empty task's result
# and taking the next one: first with RESULT want=1, then (a fresh cluster) with the
# issue 11 work request in seconds, RESULT req {"cpu": 0.001}. Prints one JSON line:
#   {"bench":"dispatch","tasks_per_s":...,"p50_us":...,"p99_us":...,
#    "req_tasks_per_s":...,"req_p50_us":...,"req_p99_us":...}
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

# one run on a fresh cluster: mode "want" (RESULT want=1, the X-Com protocol) or "req"
# (issue 11: RESULT req {"cpu": 0.001 s}, want 0: the first task reaches the request)
run_mode() {
    local mode="$1" state="$tmp/state-$1" extra=""
    [ "$mode" = req ] && extra="--req 0.001"
    "$gridnode" cluster --set "cluster.listen=tcp://127.0.0.1:*" \
        --set "cluster.state_dir=$state" --set store.sync=full \
        --set cluster.log_level=warn >"$tmp/cluster-$mode.out" 2>"$tmp/cluster-$mode.err" &
    pid=$!
    for _ in $(seq 100); do
        [ -s "$state/endpoint" ] && break
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    if [ ! -s "$state/endpoint" ]; then
        echo "dispatch: the cluster did not start:" >&2
        cat "$tmp/cluster-$mode.err" >&2
        return 1
    fi
    endpoint="$(cat "$state/endpoint")"
    echo "dispatch ($mode): cluster $pid on $endpoint, state in $state (sync=full)" >&2
    # enough tasks that the job never runs dry within the run
    line="$("$gen" --endpoint "$endpoint" --clients "$CLIENTS" --requests "$REQUESTS" \
        --seconds "$LIMIT_S" --submit $((REQUESTS + 2 * CLIENTS)) $extra)" || {
        echo "dispatch: the load generator failed; cluster log:" >&2
        tail -n 20 "$tmp/cluster-$mode.err" >&2
        return 1
    }
    if ! kill -0 "$pid" 2>/dev/null; then
        echo "dispatch: the cluster died during the run:" >&2
        tail -n 20 "$tmp/cluster-$mode.err" >&2
        return 1
    fi
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
    pid=""
    echo "$line"
}

field() { # json-line key
    printf '%s' "$1" | sed -n "s/.*\"$2\":\([0-9.]*\).*/\1/p"
}
want="$(run_mode want)"
req="$(run_mode req)"
printf '{"bench":"dispatch","tasks_per_s":%s,"p50_us":%s,"p99_us":%s,"req_tasks_per_s":%s,"req_p50_us":%s,"req_p99_us":%s}\n' \
    "$(field "$want" tasks_per_s)" "$(field "$want" p50_us)" "$(field "$want" p99_us)" \
    "$(field "$req" tasks_per_s)" "$(field "$req" p50_us)" "$(field "$req" p99_us)"
