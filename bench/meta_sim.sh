#!/usr/bin/env bash
# Meta simulator benchmark (issue #10): the whole SDSC-SP2 trace split into 4 sites of
# 32 processors, half of the jobs arriving at the grid spool, every placement policy and
# the two references (slurm_m, pooled) in one run. wall_s is the whole command (reading
# the trace and the 7 runs), estimate_wall_s the estimate policy's run alone (target
# < 10 s); bsld holds the mean bounded slowdown (10 s) per policy. One JSON line:
#   {"bench":"meta_sim","wall_s":...,"estimate_wall_s":...,"bsld":{"estimate":...,...}}
# Three more lines (issue 25 item 5) measure what reservations cost on big sites: the
# first 10,000 jobs of CEA-Curie (93,312 one-processor nodes) on 2, 4 and 8 sites, the
# estimate policy (an estimate at every site and a reservation per grid job) against
# slurm_m (no reservation), each run's own wall time and their ratio (target: ratio < 2):
#   {"bench":"meta_sim_resv","sites":N,"estimate_wall_s":...,"slurm_m_wall_s":...,"ratio":...}
set -eu
export GRIDNODE_PLAIN="${GRIDNODE_PLAIN-1}" # plain on loopback, as bench/run.sh (docs/security.md)
cd "$(dirname "$0")/.."
BUILD="${BUILD:-build}"
gridnode="$BUILD/gridnode"
[ -x "$gridnode" ] || { echo "meta_sim: $gridnode not built (make BUILD=$BUILD)" >&2; exit 1; }
traces="${TRACES:-../shared/traces}"
trace="$traces/SDSC-SP2-1998-4.2-cln.swf.gz"
# A clone without the traces beside it skips a line (TRACES names their folder).
skip() {
    echo "{\"bench\":\"$1\",\"skipped\":\"$2 not found (set TRACES to the folder of the SWF traces)\"}"
}
if [ ! -r "$trace" ]; then
    skip meta_sim "$trace"
else
"$gridnode" meta --simulate "$trace" --sites 4 --json | /usr/bin/python3 -c '
import json, sys
d = json.load(sys.stdin)
runs = {r["policy"]: r for r in d["runs"]}
keys = ["estimate", "random", "round_robin", "least_queued", "slurm_m", "pooled"]
print(json.dumps({"bench": "meta_sim", "wall_s": round(d["wall_s"], 3),
                  "estimate_wall_s": round(runs["estimate"]["wall_s"], 3),
                  "jobs": d["jobs"], "grid_jobs": d["grid_jobs"],
                  "moved": runs["estimate"]["moved"],
                  "bsld": {k: round(runs[k]["mean_bsld"], 3) for k in keys}}))'
fi

# issue 25 item 7: estimate / slurm_m per trace and split (<= 1.0 is the target) and the
# local jobs' longest wait against slurm_m's, KTH-SP2 and HPC2N at 4 and 4:3:2:1 sites
# (bench/meta_matrix.py without --quick runs every trace and split: docs/meta.md)
TRACES="$traces" /usr/bin/python3 bench/meta_matrix.py "$gridnode" --quick | /usr/bin/python3 -c '
import json, sys
for l in sys.stdin:
    d = json.loads(l)
    if "skipped" in d or "error" in d:
        print(json.dumps(d))
        continue
    print(json.dumps({"bench": "meta_ratio", "trace": d["trace"], "sites": d["sites"],
                      "jobs": d["jobs"], "ratio": d.get("ratio"),
                      "local_max_wait_ratio": d.get("local_max_wait_ratio"),
                      "bsld": d["bsld"], "wall_s": d["wall_s"]}))'

curie="$traces/CEA-Curie-2011-2.1-cln.swf.gz"
if [ ! -r "$curie" ]; then
    skip meta_sim_resv "$curie"
    exit 0
fi
wall() { # the run's own wall time (reading the trace not counted)
    "$gridnode" meta --simulate "$curie" --count 10000 --sites "$1" --policy "$2" --json |
        /usr/bin/python3 -c 'import json, sys; print(json.load(sys.stdin)["runs"][0]["wall_s"])'
}
for sites in 2 4 8; do
    est=$(wall "$sites" estimate)
    slm=$(wall "$sites" slurm_m)
    /usr/bin/python3 -c '
import json, sys
n, e, s = int(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3])
print(json.dumps({"bench": "meta_sim_resv", "trace": "CEA-Curie", "jobs": 10000, "sites": n,
                  "estimate_wall_s": round(e, 3), "slurm_m_wall_s": round(s, 3),
                  "ratio": round(e / s, 1) if s > 0 else None}))' "$sites" "$est" "$slm"
done
