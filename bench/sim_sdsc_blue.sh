#!/usr/bin/env bash
# Batch simulator benchmark: the whole SDSC Blue Horizon trace (243,306 records,
# 232,562 usable jobs, 1,152 processors) replayed with EASY backfill. Target: under
# 0.3 s on a 2-core machine for the whole command (total_s). total_s is the command's
# wall-clock time, best of 3 runs; wall_s is the simulation (engine + event loop, which
# takes the records as a reader thread parses them), best of 3; read_s is that reader
# thread's time (inflating and parsing the gzip trace, overlapped with the simulation,
# so total_s is about wall_s plus process start-up). zcat_s is the physical floor,
# `zcat` of the same trace to /dev/null in the same run (best of 3), and ratio is
# wall_s / zcat_s (issue #9 target: at most 2). One JSON line:
#   {"bench":"sim_sdsc_blue","wall_s":...,"total_s":...,"read_s":...,"zcat_s":...,
#    "ratio":...,"total_ratio":...,"jobs":...,"runs":[...]}
set -eu
export GRIDNODE_PLAIN="${GRIDNODE_PLAIN-1}" # plain on loopback, as bench/run.sh (docs/security.md)
cd "$(dirname "$0")/.."
BUILD="${BUILD:-build}"
gridnode="$BUILD/gridnode"
[ -x "$gridnode" ] || { echo "sim_sdsc_blue: $gridnode not built (make BUILD=$BUILD)" >&2; exit 1; }
exec /usr/bin/python3 bench/sim_trace.py "$gridnode" "${TRACES:-../shared/traces}/SDSC-BLUE-2000-4.2-cln.swf.gz" easy sim_sdsc_blue
