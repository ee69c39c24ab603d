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
cd "$(dirname "$0")/.."
BUILD="${BUILD:-build}"
TASKS="${E2E_TASKS:-20000}"
SLOTS="${E2E_SLOTS:-64}"
LIMIT_S="${E2E_SECONDS:-60}"
gridnode="$BUILD/gridnode"
[ -x "$gridnode" ] || { echo "client_e2e: $gridnode not built (make BUILD=$BUILD)" >&2; exit 1; }

tmp="$(mktemp -d "${TMPDIR:-/tmp}/gridnode-bench-e2e.XXXXXX")"
cpid=""
npid=""
stop() { # pid: TERM, wait up to 5 s, KILL
    local p="$1"
    [ -n "$p" ] && kill -0 "$p" 2>/dev/null || return 0
    kill -TERM "$p" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$p" 2>/dev/null || true
    wait "$p" 2>/dev/null || true
}
cleanup() {
    stop "$npid"
    stop "$cpid"
    rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

"$gridnode" cluster --set "cluster.listen=tcp://127.0.0.1:*" \
    --set "cluster.state_dir=$tmp/cluster" --set cluster.log_level=warn --set "store.sync=${E2E_SYNC:-full}" \
    >"$tmp/cluster.out" 2>"$tmp/cluster.err" &
cpid=$!
for _ in $(seq 100); do
    [ -s "$tmp/cluster/endpoint" ] && break
    kill -0 "$cpid" 2>/dev/null || break
    sleep 0.1
done
if [ ! -s "$tmp/cluster/endpoint" ]; then
    echo "client_e2e: the cluster did not start:" >&2
    cat "$tmp/cluster.err" >&2
    exit 1
fi
endpoint="$(cat "$tmp/cluster/endpoint")"

"$gridnode" client --set "client.server=$endpoint" --set "client.state_dir=$tmp/client" \
    --set client.name=e2e --set "client.slots=$SLOTS" --set client.log_level=warn \
    --set client.parallel=false --set "store.sync=${E2E_SYNC:-full}" >"$tmp/client.out" 2>"$tmp/client.err" &
npid=$!

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
