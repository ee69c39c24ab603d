#!/usr/bin/env bash
# Client emulator benchmark: 365 simulated days of BOINC's sample scenario
# (configs/scenarios/boinc-sample.ini) with the default policy. Targets: under 2 s and
# under 100 MB (BOINC's own emulator: 19 s optimised, 1 GB). Prints one JSON line:
#   {"bench":"client_emulate_year","wall_s":...,"max_rss_mb":...,"sim_wall_s":...,
#    "wasted_fraction":...,"idle_fraction":...,"share_violation":...}
# wall_s is the whole process (start-up and scenario parsing included); max_rss_mb comes
# from /usr/bin/time when present, else from getrusage(RUSAGE_CHILDREN) in python3.
set -eu
export GRIDNODE_PLAIN="${GRIDNODE_PLAIN-1}" # plain on loopback, as bench/run.sh (docs/security.md)
cd "$(dirname "$0")/.."
BUILD="${BUILD:-build}"
gridnode="$BUILD/gridnode"
[ -x "$gridnode" ] || { echo "client_emulate_year: $gridnode not built (make BUILD=$BUILD)" >&2; exit 1; }
exec /usr/bin/python3 - "$gridnode" configs/scenarios/boinc-sample.ini 365d client_emulate_year <<'PY'
import json, resource, subprocess, sys, time
gridnode, scenario, duration, name = sys.argv[1:5]
print(f"{name}: {scenario}, {duration}", file=sys.stderr)
t0 = time.monotonic()
p = subprocess.run([gridnode, "client", "--emulate", scenario, "--duration", duration, "--json"],
                   capture_output=True, text=True)
wall = time.monotonic() - t0
sys.stderr.write(p.stderr)
if p.returncode != 0:
    sys.exit(f"{name}: gridnode exited {p.returncode}")
d = json.loads(p.stdout.splitlines()[0])
rss_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024.0  # KB on Linux
print(json.dumps({"bench": name, "wall_s": round(wall, 3), "max_rss_mb": round(rss_mb, 1),
                  "sim_wall_s": round(d["sim_wall_s"], 3),
                  "wasted_fraction": round(d["wasted_fraction"], 4),
                  "idle_fraction": round(d["idle_fraction"], 4),
                  "share_violation": round(d["share_violation"], 4)}, separators=(",", ":")))
PY
