#!/usr/bin/env bash
# End-to-end throughput of one volunteer client (issue 11 item 11): one cluster manager
# and one real `gridnode client` with 64 slots (both store.sync=full, the defaults), N
# trivial tasks (`true`) in one job; time from submission until the job is done. Every
# task is a real fork/exec, its result a real RPC and commit on both sides.
# Prints one JSON line on stdout:
#   {"bench":"client_e2e","tasks":N,"slots":64,"seconds":...,"per_s":...}
# Knobs: E2E_TASKS (20000), E2E_SLOTS (64), E2E_SECONDS (60: the run is cut there and
# the tasks done so far counted).
set -eu
export GRIDNODE_PLAIN="${GRIDNODE_PLAIN-1}" # plain on loopback, as bench/run.sh (docs/security.md)
cd "$(dirname "$0")/.."
BUILD="${BUILD:-build}"
TASKS="${E2E_TASKS:-20000}"
SLOTS="${E2E_SLOTS:-64}"
LIMIT_S="${E2E_SECONDS:-60}"
gridnode="$BUILD/gridnode"
[ -x "$gridnode" ] || { echo "client_e2e: $gridnode not built (make BUILD=$BUILD)" >&2; exit 1; }

. bench/lib.sh
bench_init e2e
bench_cluster "$tmp/cluster" "$tmp/cluster.err" --set "store.sync=${E2E_SYNC:-full}"
cpid=$pid

bench_spawn "$tmp/client.err" "$gridnode" client --set "client.server=$endpoint" \
    --set "client.state_dir=$tmp/client" --set client.name=e2e --set "client.slots=$SLOTS" \
    --set client.log_level=warn --set client.parallel=false --set "store.sync=${E2E_SYNC:-full}"
npid=$pid

t0=$(date +%s.%N)
job="$("$gridnode" submit -e "$endpoint" --json -n "$TASKS" -- true |
    sed -n 's/.*"job": *\([0-9]*\).*/\1/p')"
[ -n "$job" ] || { echo "client_e2e: submit failed" >&2; exit 1; }
echo "client_e2e: cluster $cpid, client $npid ($SLOTS slots), job $job of $TASKS tasks" >&2
done_n=0
while :; do
    js="$("$gridnode" job -e "$endpoint" --json --summary "$job" 2>/dev/null || true)"
    done_n="$(printf '%s' "$js" | sed -n 's/.*"done": *\([0-9]*\).*/\1/p' | head -n 1)"
    done_n="${done_n:-0}"
    now=$(date +%s.%N)
    [ "$done_n" -ge "$TASKS" ] && break
    if awk -v a="$now" -v b="$t0" -v l="$LIMIT_S" 'BEGIN{exit !(a - b > l)}'; then
        echo "client_e2e: cut at ${LIMIT_S} s with $done_n of $TASKS done" >&2
        break
    fi
    kill -0 "$npid" 2>/dev/null || { echo "client_e2e: the client died:" >&2; tail -n 20 "$tmp/client.err" >&2; exit 1; }
    kill -0 "$cpid" 2>/dev/null || { echo "client_e2e: the cluster died:" >&2; tail -n 20 "$tmp/cluster.err" >&2; exit 1; }
    sleep 0.1
done
awk -v n="$done_n" -v a="$now" -v b="$t0" -v s="$SLOTS" -v t="$TASKS" 'BEGIN{
    el = a - b; printf "{\"bench\":\"client_e2e\",\"tasks\":%d,\"done\":%d,\"slots\":%d,\"seconds\":%.3f,\"per_s\":%.1f}\n", t, n, s, el, (el > 0 ? n / el : 0) }'
