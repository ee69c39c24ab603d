#!/usr/bin/env bash
# End-to-end throughput of one volunteer client (issue 11 item 11): one cluster manager
# and one real `gridnode client` with 64 slots (both store.sync=full, the defaults), N
# trivial tasks (`true`) in one job; time from submission until the job is done. Every
# task is a real fork/exec, its result a real RPC and commit on both sides.
# The same job runs twice against fresh clients and cluster managers, in the execution
# boundary (the default, docs/security.md) and with client.sandbox = off, in alternating
# order (the first run of a busy machine is not always the slower). Prints one JSON
# line on stdout:
#   {"bench":"client_e2e","tasks":N,"slots":64,"seconds":...,"per_s":...,
#    "seconds_nosandbox":...,"per_s_nosandbox":...,"sandbox_ratio":...}
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

# run_client SANDBOX NAME: a fresh cluster manager and one client (client.sandbox=SANDBOX),
# one job of $TASKS tasks; sets done_n and el (seconds from submission until done, or the
# cut). Each run has its own cluster: a job cut short would otherwise hold the next
# run's client first (FIFO) and the next job would count nothing.
run_client() {
    bench_cluster "$tmp/cluster-$2" "$tmp/cluster-$2.err" --set "store.sync=${E2E_SYNC:-full}"
    cpid=$pid
    bench_spawn "$tmp/$2.err" "$gridnode" client --set "client.server=$endpoint" \
        --set "client.state_dir=$tmp/$2" --set "client.name=$2" --set "client.slots=$SLOTS" \
        --set client.log_level=warn --set client.parallel=false \
        --set "store.sync=${E2E_SYNC:-full}" --set "client.sandbox=$1"
    local npid=$pid t0 now job js
    t0=$(date +%s.%N)
    job="$("$gridnode" submit -e "$endpoint" --json -n "$TASKS" -- true |
        sed -n 's/.*"job": *\([0-9]*\).*/\1/p')"
    [ -n "$job" ] || { echo "client_e2e: submit failed" >&2; exit 1; }
    echo "client_e2e: cluster $cpid, client $npid ($SLOTS slots, sandbox $1), job $job of $TASKS tasks" >&2
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
        kill -0 "$npid" 2>/dev/null || { echo "client_e2e: the client died:" >&2; tail -n 20 "$tmp/$2.err" >&2; exit 1; }
        kill -0 "$cpid" 2>/dev/null || { echo "client_e2e: the cluster died:" >&2; tail -n 20 "$tmp/cluster-$2.err" >&2; exit 1; }
        sleep 0.1
    done
    el=$(awk -v a="$now" -v b="$t0" 'BEGIN{printf "%.3f", a - b}')
    bench_stop "$npid"
    bench_stop "$cpid"
}

if [ "$(( $(date +%s) % 2 ))" = 0 ]; then order="true false"; else order="false true"; fi
for sb in $order; do
    run_client "$sb" "client-$sb"
    if [ "$sb" = true ]; then n_on=$done_n el_on=$el; else n_off=$done_n el_off=$el; fi
done
awk -v n="$n_on" -v a="$el_on" -v m="$n_off" -v b="$el_off" -v s="$SLOTS" -v t="$TASKS" 'BEGIN{
    on = (a > 0 ? n / a : 0); off = (b > 0 ? m / b : 0)
    printf "{\"bench\":\"client_e2e\",\"tasks\":%d,\"done\":%d,\"slots\":%d,\"seconds\":%.3f,\"per_s\":%.1f,\"seconds_nosandbox\":%.3f,\"per_s_nosandbox\":%.1f,\"sandbox_ratio\":%.3f}\n", t, n, s, a, on, b, off, (off > 0 ? on / off : 0) }'
