#!/usr/bin/env bash
# Live batch role benchmark `batch_submit` (issue 9, item 10; docs/batch.md "Live role
# benchmarks"): see bench/batch_live.py for what is measured. Starts and stops its own
# cluster manager, client and batch role on loopback; bounded in time. One JSON line.
set -eu
export GRIDNODE_PLAIN="${GRIDNODE_PLAIN-1}" # plain on loopback, as bench/run.sh (docs/security.md)
cd "$(dirname "$0")/.."
BUILD="${BUILD:-build}"
gridnode="$BUILD/gridnode"
[ -x "$gridnode" ] || { echo "batch_submit: $gridnode not built (make BUILD=$BUILD)" >&2; exit 1; }
exec timeout 300 /usr/bin/python3 bench/batch_live.py "$gridnode" submit "${BATCH_SUBMIT_JOBS:-50000}"
