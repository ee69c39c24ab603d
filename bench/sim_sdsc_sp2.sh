#!/usr/bin/env bash
# Batch simulator benchmark: the whole SDSC SP2 trace (59,715 records, 54,044 usable
# jobs, 128 processors) replayed with EASY backfill (docs/batch.md has the figures of
# all three policies). No target is set; it keeps the whole-trace replay measured.
# wall_s is the simulation (engine + event loop), best of 3 runs; total_s adds
# reading the gzip trace and process start-up. One JSON line:
#   {"bench":"sim_sdsc_sp2","wall_s":...,"total_s":...,"read_s":...,"jobs":...,"runs":[...]}
set -eu
cd "$(dirname "$0")/.."
BUILD="${BUILD:-build}"
gridnode="$BUILD/gridnode"
[ -x "$gridnode" ] || { echo "sim_sdsc_sp2: $gridnode not built (make BUILD=$BUILD)" >&2; exit 1; }
exec /usr/bin/python3 - "$gridnode" "${TRACES:-../shared/traces}/SDSC-SP2-1998-4.2-cln.swf.gz" easy sim_sdsc_sp2 <<'PY'
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
