#!/usr/bin/env bash
# Live batch role benchmark `batch_e2e` (issue 9, item 10; docs/batch.md "Live role
# benchmarks"): see bench/batch_live.py for what is measured. Starts and stops its own
# cluster manager, client and batch role on loopback; bounded in time. One JSON line.
set -eu
export GRIDNODE_PLAIN="${GRIDNODE_PLAIN-1}" # plain on loopback, as bench/run.sh (docs/security.md)
cd "$(dirname "$0")/.."
BUILD="${BUILD:-build}"
gridnode="$BUILD/gridnode"
[ -x "$gridnode" ] || { echo "batch_e2e: $gridnode not built (make BUILD=$BUILD)" >&2; exit 1; }
# Slurm side by side (../shared/tools/slurm-local, profile ht, same N) when this runs as
# root and the tools are there; BATCH_E2E_SLURM=0 skips it. The JSON line says why not.
if [ "${BATCH_E2E_SLURM:-1}" = 1 ] && [ "$(id -u)" = 0 ] && [ -d ../shared/tools/slurm-local ]; then
    export SLURM=1
fi
exec timeout 1500 /usr/bin/python3 bench/batch_live.py "$gridnode" e2e "${BATCH_E2E_JOBS:-10000}"
