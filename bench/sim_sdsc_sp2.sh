#!/usr/bin/env bash
# Batch simulator benchmark: the whole SDSC SP2 trace (59,715 records, 54,044 usable
# jobs, 128 processors) replayed with EASY backfill (docs/batch.md has the figures of
# all three policies). No target is set; it keeps the whole-trace replay measured.
# Same fields as bench/sim_sdsc_blue.sh. One JSON line:
#   {"bench":"sim_sdsc_sp2","wall_s":...,"total_s":...,"read_s":...,"jobs":...,"runs":[...]}
set -eu
export GRIDNODE_PLAIN="${GRIDNODE_PLAIN-1}" # plain on loopback, as bench/run.sh (docs/security.md)
cd "$(dirname "$0")/.."
BUILD="${BUILD:-build}"
gridnode="$BUILD/gridnode"
[ -x "$gridnode" ] || { echo "sim_sdsc_sp2: $gridnode not built (make BUILD=$BUILD)" >&2; exit 1; }
exec /usr/bin/python3 bench/sim_trace.py "$gridnode" "${TRACES:-../shared/traces}/SDSC-SP2-1998-4.2-cln.swf.gz" easy sim_sdsc_sp2
