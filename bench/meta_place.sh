#!/usr/bin/env bash
# Live metascheduler benchmark `meta_place` (issue 10, item 10; docs/meta.md "Placement
# rate"): placements per second with 4 live batch sites (bench/meta_place.py says what
# is measured). Starts and stops its own processes on loopback; bounded in time.
# One JSON line: {"bench":"meta_place","per_s":...,...}
set -eu
export GRIDNODE_PLAIN="${GRIDNODE_PLAIN-1}" # plain on loopback, as bench/run.sh (docs/security.md)
cd "$(dirname "$0")/.."
BUILD="${BUILD:-build}"
gridnode="$BUILD/gridnode"
[ -x "$gridnode" ] || { echo "meta_place: $gridnode not built (make BUILD=$BUILD)" >&2; exit 1; }
exec timeout 600 /usr/bin/python3 bench/meta_place.py "$gridnode" "${META_PLACE_JOBS:-2000}"
