#!/usr/bin/env bash
# Scheduling-cycle benchmark: one conservative-backfill cycle that plans 10,000
# pending jobs on 1,000 nodes (half of them busy). Target: under 50 ms on a 2-core
# machine. One JSON line:
#   {"bench":"sched_cycle","ms":...,"pending":10000,"nodes":1000,"reserved":...,...}
set -eu
export GRIDNODE_PLAIN="${GRIDNODE_PLAIN-1}" # plain on loopback, as bench/run.sh (docs/security.md)
cd "$(dirname "$0")/.."
BUILD="${BUILD:-build}"
bin="$BUILD/bench/sched_cycle"
[ -x "$bin" ] || { echo "sched_cycle: $bin not built (make BUILD=$BUILD bench)" >&2; exit 1; }
exec "$bin" --nodes 1000 --jobs 10000 --runs 5
