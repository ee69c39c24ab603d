#!/usr/bin/env bash
# Runs every bench/*.sh in name order; each prints one JSON line on stdout (validation.sh:
# one per case)
# (progress goes to stderr). BUILD names the build directory (default build).
set -eu
cd "$(dirname "$0")/.."
export BUILD="${BUILD:-build}"
status=0
for b in bench/*.sh; do
    [ "$b" = bench/run.sh ] && continue
    bash "$b" || { echo "bench: $b failed" >&2; status=1; }
done
exit $status
