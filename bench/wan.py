"""The wan benchmark (see bench/wan.sh): argv = gridnode binary, delays in ms.

Two forms (WAN_FORMS, default both): "clean", 0.1 s short tasks over links of a fixed
delay, and "jitter" (issue 28, 3b), 0.05 s short tasks over links whose one-way delay
varies by +-WAN_JITTER_PCT (25) percent (uniform, packets of a connection kept in
order). Each line's ratio is its wall_s over the same form's wall_s at 0 ms (the first
delay given should be 0 for it).
"""

import importlib.util
import json
import os
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BIN = str(Path(sys.argv[1]).resolve())
os.environ["GRIDNODE_BIN"] = BIN
spec = importlib.util.spec_from_file_location("gridnode_netconf", REPO / "tests/net/conftest.py")
net = importlib.util.module_from_spec(spec)
spec.loader.exec_module(net)
sysconf = net.sysconf
LIMIT_S = float(os.environ.get("WAN_LIMIT_S", "300"))
JITTER_PCT = float(os.environ.get("WAN_JITTER_PCT", "25"))
FORMS = {"clean": {"short_s": 0.1, "jitter_pct": 0},
         "jitter": {"short_s": 0.05, "jitter_pct": JITTER_PCT}}


def run(delay_ms, form, workdir):
    reg = sysconf.ProcRegistry()
    lab = net.NetLab(reg, BIN, workdir, 6, seed=1)
    try:
        cl = lab.cluster(1, {"store.sync": "none"})
        ep = cl.endpoint
        # every link: 2 x delay between namespaces, except at the cluster: delay each
        # way, the jitter on the clients' and the tool's side alone (+-pct of the delay)
        jitter = delay_ms * form["jitter_pct"] / 100.0
        lab.link("set 0 both delay=%d jitter=%g" % (delay_ms, jitter))
        lab.link("set 1 both delay=0 jitter=0")
        for i in range(4):
            lab.client(i + 2, cl, "wan%d" % (i + 1), {"client.slots": 2})
        # housekeeping calls go from the cluster's own namespace (no emulated link): only
        # what a user does is timed, and the other calls cost no round trips
        net.wait_until(lambda: len(json.loads(lab.tool(1, "nodes", "-e", ep, "--json").stdout))
                       == 4, 60, interval=0.5, msg="4 clients")
        # what a user does: submit both jobs, then wait for both with one tool call
        # (one connection, the end seen through the cluster's change feed)
        t0 = time.monotonic()
        jobs = [lab.tool(6, "submit", "-e", ep, "-n", 24, "--shell", "--", "sleep 5"),
                lab.tool(6, "submit", "-e", ep, "-n", 500, "--shell", "--",
                         "sleep %g" % form["short_s"])]
        t1 = time.monotonic()
        ids = [int(r.stdout.split()[2]) for r in jobs]
        w = lab.tool(6, "job", "-e", ep, "--wait", "--summary", "--json", *ids,
                     timeout=LIMIT_S)
        wall = time.monotonic() - t0
        js = [json.loads(l) for l in w.stdout.splitlines()]
        assert all(j["job"]["state"] == "done" for j in js), w.stdout
        issued = 0
        for j in ids:
            full = json.loads(lab.tool(1, "job", "-e", ep, str(j), "--json").stdout)
            issued += sum(t["issues"] for t in full["tasks"]) - len(full["tasks"])
        # the grid's own time: first submission to last end, as the cluster recorded
        # them (wall_s also holds the user tool's round trips: submit, the wait)
        grid = (max(j["job"]["finished"] for j in js) - min(j["job"]["submitted"] for j in js))
        return {"bench": "wan", "form": form["name"], "short_s": form["short_s"],
                "jitter_pct": form["jitter_pct"], "delay_ms": delay_ms, "wall_s": round(wall, 1),
                "grid_s": round(grid / 1000, 1), "submit_s": round(t1 - t0, 1),
                "wait_s": round(wall - (t1 - t0), 1),
                "tasks": sum(j["job"]["ntasks"] for j in js), "reissued": issued}
    finally:
        try:  # the clients' LEAVE at once
            lab.link("set 0 both delay=0 jitter=0")
        except (RuntimeError, OSError):
            pass
        for p in reversed(reg.procs):
            p.stop(timeout=5)
        lab.close()


def main():
    why = net._unavailable()
    if why:
        print(json.dumps({"bench": "wan", "skipped": why}, separators=(",", ":")))
        return 0
    for name in os.environ.get("WAN_FORMS", "clean jitter").split():
        if name not in FORMS:
            print("wan: unknown form %r (clean, jitter)" % name, file=sys.stderr)
            return 2
        form = dict(FORMS[name], name=name)
        base = None
        delays = sys.argv[2:]
        if name == "clean" and os.environ.get("WAN_CLEAN_DELAYS"):
            delays = os.environ["WAN_CLEAN_DELAYS"].split()
        for d in [int(x) for x in delays]:
            if os.environ.get("WAN_KEEP"):  # the roles' logs kept there, one folder a run
                tmp = os.path.join(os.environ["WAN_KEEP"], "%s-%d" % (name, d))
                os.makedirs(tmp)
                r = run(d, form, tmp)
            else:
                with tempfile.TemporaryDirectory(prefix="gridnode-bench-wan.") as tmp:
                    r = run(d, form, tmp)
            if d == 0:
                base = r["wall_s"]
            if base:
                r["ratio"] = round(r["wall_s"] / base, 2)
            print(json.dumps(r, separators=(",", ":")), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
