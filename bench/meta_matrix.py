#!/usr/bin/python3
"""meta_matrix.py - the spool's placement policies on several traces and splits (issue 25).

Runs `gridnode meta --simulate` for every trace x split x walltime kind and prints one
JSON line per case: mean bounded slowdown per policy, the ratio estimate / slurm_m
(<= 1.0 is the target), the local and grid jobs' mean and maximum waits, the ratio of
the maximum local wait to slurm_m's, and each run's wall time. --markdown prints the
docs/meta.md table instead.

Usage: bench/meta_matrix.py GRIDNODE [--quick] [--traces DIR] [--jobs N] [--markdown]
       [--policies estimate,slurm_m,pooled] [--only TRACE_PREFIX] [--splits 4,2:1,...]
       [--extra "--local-wait-bound 86400"]
"""
import argparse
import concurrent.futures as cf
import json
import os
import subprocess
import sys

TRACES = [  # file, usable jobs to take (0: all)
    ("KTH-SP2-1996-2.1-cln.swf.gz", 30000),
    ("SDSC-SP2-1998-4.2-cln.swf.gz", 30000),
    ("HPC2N-2002-2.1-cln.swf.gz", 30000),
    ("SDSC-BLUE-2000-4.2-cln.swf.gz", 30000),
    ("CEA-Curie-2011-2.1-cln.swf.gz", 10000),
]
SPLITS = ["2", "2:1", "4", "4:3:2:1", "8", "8:7:6:5:4:3:2:1"]
QUICK = [("KTH-SP2-1996-2.1-cln.swf.gz", 10000), ("HPC2N-2002-2.1-cln.swf.gz", 10000)]
QUICK_SPLITS = ["4", "4:3:2:1"]


def run(gridnode, trace, count, split, est, policies, extra):
    cmd = [gridnode, "meta", "--simulate", trace, "--sites", split, "--json",
           "--estimate", est, "--count", str(count)] + extra
    out = {}
    for p in policies:
        r = subprocess.run(cmd + ["--policy", p], capture_output=True, text=True, timeout=1800)
        if r.returncode != 0:
            return {"error": r.stderr.strip()[:300], "cmd": " ".join(cmd + ["--policy", p])}
        d = json.loads(r.stdout)
        out[p] = d["runs"][0]
    return out


def case(args, name, count, split, est):
    path = os.path.join(args.traces, name)
    res = run(args.gridnode, path, count, split, est, args.policies, args.extra)
    line = {"bench": "meta_matrix", "trace": name.split("-")[0] + "-" + name.split("-")[1],
            "jobs": count, "sites": split, "walltimes": est}
    if "error" in res:
        line["error"] = res["error"]
        return line
    line["bsld"] = {p: round(r["mean_bsld"], 2) for p, r in res.items()}
    line["wall_s"] = {p: round(r["wall_s"], 2) for p, r in res.items()}
    for p, r in res.items():
        line[p] = {k: round(r[k], 1) for k in ("grid_mean_bsld", "local_mean_bsld",
                                               "grid_mean_wait_s", "local_mean_wait_s",
                                               "grid_max_wait_s", "local_max_wait_s")}
        line[p]["local_over_2d"] = r["local_over_2d"]
        line[p]["guard_released"] = r.get("guard_released", 0)
    if "estimate" in res and "slurm_m" in res:
        e, s = res["estimate"], res["slurm_m"]
        line["ratio"] = round(e["mean_bsld"] / s["mean_bsld"], 3) if s["mean_bsld"] else None
        line["local_max_wait_ratio"] = (round(e["local_max_wait_s"] / s["local_max_wait_s"], 3)
                                        if s["local_max_wait_s"] else None)
    if "estimate" in res and "pooled" in res and res["pooled"]["mean_bsld"]:
        line["to_pooled"] = round(res["estimate"]["mean_bsld"] / res["pooled"]["mean_bsld"], 2)
    return line


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("gridnode")
    ap.add_argument("--traces", default=os.environ.get("TRACES", "../shared/traces"))
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--jobs", type=int, default=0, help="usable jobs per trace (default: the table's)")
    ap.add_argument("--policies", default="estimate,slurm_m,pooled")
    ap.add_argument("--only", default="")
    ap.add_argument("--splits", default="")
    ap.add_argument("--estimates", default="requested,actual")
    ap.add_argument("--parallel", type=int, default=2)
    ap.add_argument("--markdown", action="store_true")
    ap.add_argument("--extra", default="", help="more options for meta --simulate, one string")
    args = ap.parse_args()
    args.extra = args.extra.split()
    args.policies = args.policies.split(",")
    traces = QUICK if args.quick else TRACES
    splits = args.splits.split(",") if args.splits else (QUICK_SPLITS if args.quick else SPLITS)
    ests = ["requested"] if args.quick else args.estimates.split(",")
    cases = [(n, args.jobs or c, sp, e) for n, c in traces for sp in splits for e in ests
             if n.startswith(args.only)]
    missing = [n for n, *_ in cases if not os.path.exists(os.path.join(args.traces, n))]
    if missing:
        print(json.dumps({"bench": "meta_matrix", "skipped": "traces not found: " +
                          ", ".join(sorted(set(missing)))}))
        return 0
    lines = []
    with cf.ThreadPoolExecutor(args.parallel) as ex:
        futs = [ex.submit(case, args, *c) for c in cases]
        for f in futs:
            line = f.result()
            lines.append(line)
            if not args.markdown:
                print(json.dumps(line), flush=True)
            else:
                print(".", end="", file=sys.stderr, flush=True)
    if args.markdown:
        print(file=sys.stderr)
        print("| trace | sites | walltimes | estimate | slurm_m | pooled | ratio | local mean wait h e / s | local max wait h e / s | grid mean wait h e / s | wall s e / s |")
        print("|---|---|---|---|---|---|---|---|---|---|---|")
        for l in lines:
            if "error" in l:
                print(f"| {l['trace']} | {l['sites']} | {l['walltimes']} | error: {l['error'][:60]} |")
                continue
            e, s = l.get("estimate", {}), l.get("slurm_m", {})
            h = lambda d, k: f"{d.get(k, 0) / 3600:.1f}"
            print(f"| {l['trace']} | {l['sites']} | {l['walltimes']} | {l['bsld'].get('estimate', '')} | "
                  f"{l['bsld'].get('slurm_m', '')} | {l['bsld'].get('pooled', '')} | {l.get('ratio', '')} | "
                  f"{h(e, 'local_mean_wait_s')} / {h(s, 'local_mean_wait_s')} | "
                  f"{h(e, 'local_max_wait_s')} / {h(s, 'local_max_wait_s')} | "
                  f"{h(e, 'grid_mean_wait_s')} / {h(s, 'grid_mean_wait_s')} | "
                  f"{l['wall_s'].get('estimate', '')} / {l['wall_s'].get('slurm_m', '')} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
