#!/usr/bin/env bash
# Batch simulator benchmark: the whole SDSC Blue Horizon trace with conservative
# backfill (a job reservation for every queued job, rebuilt whenever a job ends
# before its walltime). Target: under 2 s on a 2-core machine. Same fields as
# bench/sim_sdsc_blue.sh:
#   {"bench":"sim_sdsc_blue_conservative","wall_s":...,"total_s":...,...}
set -eu
export GRIDNODE_PLAIN="${GRIDNODE_PLAIN-1}" # plain on loopback, as bench/run.sh (docs/security.md)
cd "$(dirname "$0")/.."
BUILD="${BUILD:-build}"
gridnode="$BUILD/gridnode"
[ -x "$gridnode" ] || { echo "sim_sdsc_blue_conservative: $gridnode not built (make BUILD=$BUILD)" >&2; exit 1; }
exec /usr/bin/python3 bench/sim_trace.py "$gridnode" "${TRACES:-../shared/traces}/SDSC-BLUE-2000-4.2-cln.swf.gz" conservative sim_sdsc_blue_conservative
