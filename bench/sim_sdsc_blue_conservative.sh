#!/usr/bin/env bash
# Batch simulator benchmark: the whole SDSC Blue Horizon trace with conservative
# backfill (a job reservation for every queued job, rebuilt whenever a job ends
# before its walltime). Target: under 2 s on a 2-core machine. Same fields as
# bench/sim_sdsc_blue.sh:
#   {"bench":"sim_sdsc_blue_conservative","wall_s":...,"total_s":...,...}
set -eu
cd "$(dirname "$0")/.."
BUILD="${BUILD:-build}"
gridnode="$BUILD/gridnode"
[ -x "$gridnode" ] || { echo "sim_sdsc_blue_conservative: $gridnode not built (make BUILD=$BUILD)" >&2; exit 1; }
exec /usr/bin/python3 - "$gridnode" "${TRACES:-../shared/traces}/SDSC-BLUE-2000-4.2-cln.swf.gz" conservative sim_sdsc_blue_conservative <<'PY'
import json, subprocess, sys, time
gridnode, trace, policy, name = sys.argv[1:5]
runs, totals, d = [], [], None
for i in range(3):
    print(f"{name}: {trace}, --policy {policy}, run {i + 1}/3", file=sys.stderr)
    t0 = time.monotonic()
    p = subprocess.run([gridnode, "batch", "--simulate", trace, "--policy", policy, "--json",
                        "--quiet"], capture_output=True, text=True)
    totals.append(time.monotonic() - t0)
    sys.stderr.write(p.stderr)
    if p.returncode != 0:
        sys.exit(f"{name}: gridnode exited {p.returncode}")
    d = json.loads(p.stdout)
    runs.append(d["sim_wall_s"])
print(json.dumps({"bench": name, "wall_s": round(min(runs), 4), "total_s": round(min(totals), 4),
                  "read_s": round(d["read_s"], 4), "jobs": d["jobs"], "policy": d["policy"],
                  "mean_wait_s": round(d["mean_wait_s"], 1),
                  "runs": [round(r, 4) for r in runs]}, separators=(",", ":")))
PY
