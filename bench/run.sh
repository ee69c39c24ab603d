#!/usr/bin/env bash
# Runs every bench/*.sh in name order; each prints at least one JSON line on stdout, named
# by its "bench" field (several: validation.sh one per case, meta_sim.sh one per trace and
# split and the meta_sim_resv ratios, stage.sh stage and stage_fanout, wan.sh one per
# delay and form, scale.sh one per curve); progress goes to stderr. A last line gives each benchmark's wall time and the total (the
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
    # The make bench form: the same figures in less time (docs/perf.md "make bench");
    # each script's own defaults (the longer runs) stay for running it by hand, and a
    # knob set in the environment wins.
    args=()
    knobs=()
    case $name in
    scale) args=(--quick) ;; # the full curves take minutes: by hand
    stage) args=(--quick) ;; # 256 MiB; the 1 GiB figure by hand
    batch_e2e) knobs=(SLURM_JOBS="${SLURM_JOBS:-1000}") ;; # Slurm's rate hardly moves with N
    client_e2e) knobs=(E2E_SECONDS="${E2E_SECONDS:-15}") ;; # a rate: cut at 15 s per run
    client_sched) knobs=(SCHED_WINDOW="${SCHED_WINDOW:-10}") ;; # CPU per second over 10 s
    dispatch) knobs=(DISPATCH_SECONDS="${DISPATCH_SECONDS:-8}") ;; # a rate: 8 s per run
    wan) knobs=(WAN_CLEAN_DELAYS="${WAN_CLEAN_DELAYS:-0 500}") ;; # the jitter form: 0, 200, 500
    esac
    t0=$(date +%s.%N)
    env ${knobs[@]+"${knobs[@]}"} bash "$b" ${args[@]+"${args[@]}"} || { echo "bench: $b failed" >&2; status=1; failed="$failed,\"$name\""; }
    s=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
    echo "bench: $name took $s s" >&2
    each="$each,\"$name\":$s"
done
total=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
echo "{\"bench\":\"total\",\"seconds\":$total,\"each\":{${each#,}},\"failed\":[${failed#,}]}"
exit $status
