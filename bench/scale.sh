#!/usr/bin/env bash
# Scale curves (issue 28): how each level's cost grows with its work, one JSON line per
# point (bench/scale.py says what each field measures; docs/perf.md "Scale" has the
# figures). --quick (what make bench runs, about 2 minutes on 2 cores): batch 10^3-10^5
# pending jobs, cluster bags of 10^4-10^6 tasks, 10^2 and 10^4 node sessions, a spool of
# 10^3-10^5 jobs, placement onto 2 and 64 sites, end to end with 1,000 jobs; without it
# also 10^6 pending jobs, a bag of 10^7 tasks, 2*10^4 sessions, a spool of 10^6 jobs,
# 4-32 sites, end to end with 5,000 jobs (10-15 minutes). Both measure the 10^6 and
# 10^7-element arrays.
#   {"bench":"scale","level":"batch","pending":...,"rss_per_job":...,"acks_per_s":...,
#    "showstart_p50_us":...,"showstart_p99_us":...,"cycle_ms":...,...}
#   {"bench":"scale","level":"array","elements":...,"rss_kb":...}
#   {"bench":"scale","level":"cluster","pending":...,"rss_per_task":...,"dispatch_per_s":...}
#   {"bench":"scale","level":"sessions","sessions":...,"rss_per_session":...,...}
#   {"bench":"scale","level":"spool","pending":...,"rss_per_job":...,"acks_per_s":...}
#   {"bench":"scale","level":"spool_sites","sites":...,"slow":...,"place_p50_ms":...}
#   {"bench":"scale","level":"e2e","form":"jobs|array","at":"cluster|batch|spool",
#    "jobs_per_s":...,"ratio":...}
# Usage: bash bench/scale.sh [--quick]
#          [--only batch|array|cluster|cluster_jobs|sessions|spool|spool_sites|e2e]
set -eu
export GRIDNODE_PLAIN="${GRIDNODE_PLAIN-1}" # plain on loopback, as bench/run.sh (docs/security.md)
cd "$(dirname "$0")/.."
BUILD="${BUILD:-build}"
[ -x "$BUILD/gridnode" ] || { echo "scale: $BUILD/gridnode not built (make BUILD=$BUILD)" >&2; exit 1; }
for b in estimate_rtt dispatch sched_cycle; do
    [ -x "$BUILD/bench/$b" ] || make -s "BUILD=$BUILD" "$BUILD/bench/$b" >&2
done
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true # 100 simulated nodes, one socket each
exec timeout 2400 /usr/bin/python3 bench/scale.py "$BUILD/gridnode" "$BUILD/bench" "$@"
