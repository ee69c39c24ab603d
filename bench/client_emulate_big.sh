#!/usr/bin/env bash
# Client emulator benchmark: one simulated year of a 64-CPU, 4-GPU host attached to 20
# projects (configs/scenarios/big-host.ini) with the default policy. Target: under 10 s.
# Prints one JSON line:
#   {"bench":"client_emulate_big","wall_s":...,"max_rss_mb":...,"sim_wall_s":...,"jobs":...}
set -eu
export GRIDNODE_PLAIN="${GRIDNODE_PLAIN-1}" # plain on loopback, as bench/run.sh (docs/security.md)
cd "$(dirname "$0")/.."
BUILD="${BUILD:-build}"
gridnode="$BUILD/gridnode"
[ -x "$gridnode" ] || { echo "client_emulate_big: $gridnode not built (make BUILD=$BUILD)" >&2; exit 1; }
exec /usr/bin/python3 - "$gridnode" configs/scenarios/big-host.ini 365d client_emulate_big <<'PY'
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
rss_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024.0
print(json.dumps({"bench": name, "wall_s": round(wall, 3), "max_rss_mb": round(rss_mb, 1),
                  "sim_wall_s": round(d["sim_wall_s"], 3), "jobs": d["jobs"]},
                 separators=(",", ":")))
PY
