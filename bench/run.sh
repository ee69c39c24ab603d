#!/usr/bin/env bash
# Runs every bench/*.sh in name order; each prints one JSON line on stdout (validation.sh:
# one per case)
# (progress goes to stderr). BUILD names the build directory (default build).
set -eu
cd "$(dirname "$0")/.."
export BUILD="${BUILD:-build}"
# Security (docs/security.md): the benchmarks measure the roles as they were measured
# before CURVE, plain on loopback (explicitly, as a role requires); dispatch.sh and
# handshake.sh measure CURVE themselves (and plain, for the comparison).
export GRIDNODE_PLAIN="${GRIDNODE_PLAIN-1}"
status=0
for b in bench/*.sh; do
    [ "$b" = bench/run.sh ] || [ "$b" = bench/lib.sh ] && continue
    args=()
    [ "$b" = bench/scale.sh ] && args=(--quick) # the full curves take minutes: by hand
    [ "$b" = bench/stage.sh ] && args=(--quick) # 256 MiB; the 1 GiB figure by hand
    bash "$b" "${args[@]}" || { echo "bench: $b failed" >&2; status=1; }
done
exit $status
