#!/usr/bin/env bash
# showstart latency (issue 9 item 10, `batch_showstart`): a live batch role driving a
# fake cluster manager of 1,000 one-core hosts (bench/batch_showstart.py answers
# EVENTS, NODE_LIST, PSUBMIT) that a 1,000-proc job fills for an hour, 10,000 pending
# jobs behind it, then ESTIMATE (showstart ID) requests for random pending jobs, one at
# a time, timed end to end over loopback by a C requester (bench/estimate_rtt.c), which
# first times as many requests the role answers without estimating (an unknown job:
# floor_*, the round trip alone). Prints one JSON line:
#   {"bench":"batch_showstart","pending":10000,"nodes":1000,"p50_us":...,"p99_us":...,
#    "floor_p50_us":...,"floor_p99_us":...}
# Targets: p50 < 1 ms, p99 < 5 ms. Bounded: gives up after 300 s.
set -eu
export GRIDNODE_PLAIN="${GRIDNODE_PLAIN-1}" # plain on loopback, as bench/run.sh (docs/security.md)
cd "$(dirname "$0")/.."
BUILD="${BUILD:-build}"
gridnode="$BUILD/gridnode"
[ -x "$gridnode" ] || { echo "batch_showstart: $gridnode not built (make BUILD=$BUILD)" >&2; exit 1; }
[ -x "$BUILD/bench/estimate_rtt" ] || make -s "BUILD=$BUILD" "$BUILD/bench/estimate_rtt" >&2
exec timeout 300 /usr/bin/python3 bench/batch_showstart.py "$gridnode" \
    "${BATCH_SHOWSTART_PENDING:-10000}" "${BATCH_SHOWSTART_NODES:-1000}" \
    "${BATCH_SHOWSTART_N:-2000}" "$BUILD/bench/estimate_rtt"
