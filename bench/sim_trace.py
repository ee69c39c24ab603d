"""Shared runner of the batch simulator benchmarks (bench/sim_*.sh).

usage: /usr/bin/python3 bench/sim_trace.py GRIDNODE TRACE POLICY NAME

Replays TRACE three times with `gridnode batch --simulate --policy POLICY --json` and
prints one JSON line: {"bench": NAME, "wall_s": best simulation time, "total_s": best
wall-clock time of the whole command, "read_s": the reader thread's time, "jobs", ...}.
Progress goes to stderr.
"""
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
