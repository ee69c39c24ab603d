"""Shared runner of the batch simulator benchmarks (bench/sim_*.sh).

usage: /usr/bin/python3 bench/sim_trace.py GRIDNODE TRACE POLICY NAME

Replays TRACE three times with `gridnode batch --simulate --policy POLICY --json` and
prints one JSON line: {"bench": NAME, "wall_s": best simulation time, "total_s": best
wall-clock time of the whole command, "read_s": the reader thread's time, "zcat_s":
best time of `zcat TRACE > /dev/null` (the physical floor: inflating the trace), "ratio":
wall_s / zcat_s, "total_ratio": total_s / zcat_s, "jobs", ...}. The zcat runs alternate
with the simulations so that both see the same machine load. Progress goes to stderr.
"""
import json, os, subprocess, sys, time
gridnode, trace, policy, name = sys.argv[1:5]
if not os.access(trace, os.R_OK):
    # A clone without the traces beside it skips (TRACES names their folder).
    print(json.dumps({"bench": name, "skipped": f"{trace} not found (set TRACES to the folder "
                      "of the SWF traces)"}, separators=(",", ":")))
    sys.exit(0)
runs, totals, zcats, d = [], [], [], None
for i in range(3):
    t0 = time.monotonic()
    z = subprocess.run(["zcat", "-f", trace], stdout=subprocess.DEVNULL)
    zcats.append(time.monotonic() - t0)
    if z.returncode != 0:
        sys.exit(f"{name}: zcat {trace} exited {z.returncode}")
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
                  "read_s": round(d["read_s"], 4), "zcat_s": round(min(zcats), 4),
                  "ratio": round(min(runs) / min(zcats), 2),
                  "total_ratio": round(min(totals) / min(zcats), 2), "jobs": d["jobs"], "policy": d["policy"],
                  "mean_wait_s": round(d["mean_wait_s"], 1),
                  "runs": [round(r, 4) for r in runs]}, separators=(",", ":")))
