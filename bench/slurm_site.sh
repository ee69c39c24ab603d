#!/usr/bin/env bash
# A real Slurm cluster as a metascheduler site (issue 14): placements per second onto a
# private single-node Slurm through `gridnode meta` (per_s), and the adapter's estimate
# latency beside `sbatch --test-only` alone. Needs root and the Slurm packages
# (scripts/deps.sh); otherwise the JSON line says why it was skipped. One JSON line:
#   {"bench":"slurm_site","n":200,"per_s":...,"est_adapter_ms":...,"est_sbatch_ms":...}
set -eu
export GRIDNODE_PLAIN="${GRIDNODE_PLAIN-1}" # plain on loopback, as bench/run.sh (docs/security.md)
cd "$(dirname "$0")/.."
BUILD="${BUILD:-build}"
export BUILD
[ -x "$BUILD/gridnode" ] || { echo "slurm_site: $BUILD/gridnode not built" >&2; exit 1; }
[ -x "$BUILD/bench/slurm_estimate" ] || make -s "BUILD=$BUILD" "$BUILD/bench/slurm_estimate" >&2
exec timeout 300 /usr/bin/python3 bench/slurm_site.py
