#!/usr/bin/env bash
# Meta simulator benchmark (issue #10): the whole SDSC-SP2 trace split into 4 sites of
# 32 processors, half of the jobs arriving at the grid spool, every placement policy and
# the two references (slurm_m, pooled) in one run. wall_s is the whole command (reading
# the trace and the 7 runs), estimate_wall_s the estimate policy's run alone (target
# < 10 s); bsld holds the mean bounded slowdown (10 s) per policy. One JSON line:
#   {"bench":"meta_sim","wall_s":...,"estimate_wall_s":...,"bsld":{"estimate":...,...}}
set -eu
export GRIDNODE_PLAIN="${GRIDNODE_PLAIN-1}" # plain on loopback, as bench/run.sh (docs/security.md)
cd "$(dirname "$0")/.."
BUILD="${BUILD:-build}"
gridnode="$BUILD/gridnode"
[ -x "$gridnode" ] || { echo "meta_sim: $gridnode not built (make BUILD=$BUILD)" >&2; exit 1; }
trace="${TRACES:-../shared/traces}/SDSC-SP2-1998-4.2-cln.swf.gz"
# A clone without the traces beside it skips (TRACES names their folder).
if [ ! -r "$trace" ]; then
    echo "{\"bench\":\"meta_sim\",\"skipped\":\"$trace not found (set TRACES to the folder of the SWF traces)\"}"
    exit 0
fi
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
