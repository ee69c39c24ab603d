#!/usr/bin/env bash
# Result-validation benchmark (issue #13, docs/validation.md): one cluster manager
# (store.sync=none) and 100 simulated nodes, 10 % of them faulty (bench/validation.c),
# 20,000 measured tasks, in four settings (none, quorum2, adaptive, adaptive_spot) for
# independent and colluding faults. Prints one JSON line per case:
#   {"setting":...,"faults":...,"wrong_accepted":...,"wrong_accepted_fraction":...,
#    "results_per_task":...,"wall_s":...}
# Knobs: VALIDATION_TASKS (20000), VALIDATION_NODES (100), VALIDATION_FAULTY (10),
# VALIDATION_RATE (0.3), VALIDATION_WARMUP (5000), VALIDATION_SECONDS (per case, 120).
set -eu
export GRIDNODE_PLAIN="${GRIDNODE_PLAIN-1}" # plain on loopback, as bench/run.sh (docs/security.md)
cd "$(dirname "$0")/.."
BUILD="${BUILD:-build}"
TASKS="${VALIDATION_TASKS:-20000}"
NODES="${VALIDATION_NODES:-100}"
FAULTY="${VALIDATION_FAULTY:-10}"
RATE="${VALIDATION_RATE:-0.3}"
WARMUP="${VALIDATION_WARMUP:-5000}"
LIMIT_S="${VALIDATION_SECONDS:-120}"
gridnode="$BUILD/gridnode"
gen="$BUILD/bench/validation"
for f in "$gridnode" "$gen"; do
    [ -x "$f" ] || { echo "validation: $f not built (make BUILD=$BUILD bench)" >&2; exit 1; }
done

. bench/lib.sh
bench_init validation
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true

status=0
for faults in independent colluding; do
    for setting in none quorum2 adaptive adaptive_spot; do
        state="$tmp/$setting-$faults"
        bench_cluster "$state" "$tmp/cluster.err" --set store.sync=none \
            --set tasks.idle_wait_s=1 --set validation.spot_fraction=0.1
        "$gen" --endpoint "$(cat "$state/endpoint")" --setting "$setting" --faults "$faults" \
            --nodes "$NODES" --faulty "$FAULTY" --rate "$RATE" --tasks "$TASKS" \
            --warmup "$WARMUP" --seconds "$LIMIT_S" || {
            echo "validation: case $setting/$faults failed; cluster log:" >&2
            tail -n 5 "$tmp/cluster.err" >&2
            status=1
        }
        stop_cluster
        rm -rf "$state"
    done
done
exit $status
