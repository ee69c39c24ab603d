#!/usr/bin/env bash
# Runs every bench/*.sh in name order; each prints one JSON line on stdout (validation.sh:
# one per case, meta_sim.sh and stage.sh two, wan.sh one per delay and form); progress
# goes to stderr. A last line gives each benchmark's wall time and the total (the
# developers' rule: `make bench` finishes within 10 minutes on 2 cores, docs/perf.md):
#   {"bench":"total","seconds":...,"each":{"batch_e2e":...,...},"failed":[...]}
# BUILD names the build directory (default build). BENCH_ONLY="a b" runs only those.
set -eu
cd "$(dirname "$0")/.."
export BUILD="${BUILD:-build}"
# Security (docs/security.md): the benchmarks measure the roles as they were measured
# before CURVE, plain on loopback (explicitly, as a role requires); dispatch.sh and
# handshake.sh measure CURVE themselves (and plain, for the comparison).
export GRIDNODE_PLAIN="${GRIDNODE_PLAIN-1}"
status=0
each=""
failed=""
start=$(date +%s.%N)
for b in bench/*.sh; do
    [ "$b" = bench/run.sh ] || [ "$b" = bench/lib.sh ] && continue
    name=$(basename "$b" .sh)
    if [ -n "${BENCH_ONLY:-}" ] && [[ " $BENCH_ONLY " != *" $name "* ]]; then
        continue
    fi
    args=()
    [ "$b" = bench/scale.sh ] && args=(--quick) # the full curves take minutes: by hand
    [ "$b" = bench/stage.sh ] && args=(--quick) # 256 MiB; the 1 GiB figure by hand
    t0=$(date +%s.%N)
    bash "$b" "${args[@]}" || { echo "bench: $b failed" >&2; status=1; failed="$failed,\"$name\""; }
    s=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
    echo "bench: $name took $s s" >&2
    each="$each,\"$name\":$s"
done
total=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
echo "{\"bench\":\"total\",\"seconds\":$total,\"each\":{${each#,}},\"failed\":[${failed#,}]}"
exit $status
