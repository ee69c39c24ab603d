"""bench/slurm_site.sh: a Slurm cluster as a metascheduler site (issue 14). Starts a
private single-node Slurm (tests/system/slurmlocal.py, 64 declared CPUs) and a
`gridnode meta` whose only site is that cluster; then
  per_s            N jobs submitted to the spool at once / seconds until every one is
                   placed at Slurm (reservation + sbatch into it) or further along
  est_adapter_ms   the adapter's ESTIMATE latency (build/bench/slurm_estimate: one
                   `sbatch --test-only` run from the loop, p50)
  est_sbatch_ms    `sbatch --test-only` alone, timed from here (p50)
One JSON line on stdout; progress and reasons on stderr. Bounded: gives up after
SLURM_SITE_TIMEOUT seconds (default 120)."""

import json
import os
import statistics
import subprocess
import sys
import time

import msgpack
import zmq

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "system"))
import slurmlocal  # noqa: E402

BUILD = os.environ.get("BUILD", "build")
N = int(os.environ.get("SLURM_SITE_N", "200"))
NEST = int(os.environ.get("SLURM_SITE_NEST", "50"))
TIMEOUT = float(os.environ.get("SLURM_SITE_TIMEOUT", "120"))


def out(d):
    print(json.dumps(dict({"bench": "slurm_site"}, **d)))


def rpc(sock, t, i, **f):
    sock.send(msgpack.packb(dict(v=1, t=t, id=i, **f)))
    if not sock.poll(20000):
        raise RuntimeError("meta did not answer")
    return msgpack.unpackb(sock.recv(), raw=False)


def main():
    why = slurmlocal.unavailable()
    if why:
        out({"skipped": why})
        return 0
    gridnode = os.path.join(ROOT, BUILD, "gridnode")
    est = os.path.join(ROOT, BUILD, "bench", "slurm_estimate")
    s = slurmlocal.SlurmLocal(cpus=64)
    meta = None
    try:
        s.up()
        url = "slurm://%s?dir=%s" % (s.conf, s.out)
        # sbatch --test-only alone
        lat = []
        for _ in range(NEST):
            t0 = time.monotonic()
            s.run("sbatch", "--test-only", "-n1", "-t1", "--wrap", "true", "-o", "/dev/null")
            lat.append((time.monotonic() - t0) * 1000)
        r = subprocess.run([est, url, str(NEST)], capture_output=True, text=True,
                           timeout=TIMEOUT, env=s.env)
        if r.returncode != 0:
            raise RuntimeError("slurm_estimate: " + r.stderr.strip())
        adapter = json.loads(r.stdout)
        # placements per second
        state = os.path.join(s.base, "meta")
        meta = subprocess.Popen(
            [gridnode, "meta", "--set", "meta.state_dir=" + state, "--set",
             "meta.listen=tcp://127.0.0.1:*", "--set", "meta.sites=hpc=" + url, "--set",
             "store.sync=none", "--set", "meta.reeval_s=0", "--set", "meta.log_level=warn"],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, cwd=s.base)
        line = meta.stdout.readline()
        ep = line.strip().split()[-1]
        ctx = zmq.Context.instance()
        sock = ctx.socket(zmq.DEALER)
        sock.setsockopt(zmq.LINGER, 0)
        sock.connect(ep)
        deadline = time.monotonic() + TIMEOUT
        while not rpc(sock, 94, 1)["sites"][0]["known"]:
            if time.monotonic() > deadline:
                raise RuntimeError("the Slurm site never answered")
            time.sleep(0.1)
        t0 = time.monotonic()
        for i in range(N):
            rpc(sock, 39, 10 + i, argv=["true"], shell=True, procs=1, limit_s=60)
        placed = 0
        while True:
            rows, frm = [], 0
            while True:
                rep = rpc(sock, 32, 5, **{"from": frm, "count": 10000})
                rows += rep.get("jobs", [])
                if "next" not in rep:
                    break
                frm = rep["next"]
            placed = sum(1 for x in rows if x.get("gstate") in ("placed", "running", "done"))
            failed = sum(1 for x in rows if x.get("gstate") == "failed")
            if placed + failed >= N:
                break
            if time.monotonic() > deadline:
                raise RuntimeError("%d of %d placed in %.0f s" % (placed, N, TIMEOUT))
            time.sleep(0.05)
        dt = time.monotonic() - t0
        out({"n": N, "per_s": round(placed / dt, 1), "placed": placed, "wall_s": round(dt, 2),
             "est_adapter_ms": adapter["p50_ms"], "est_adapter_p99_ms": adapter["p99_ms"],
             "est_sbatch_ms": round(statistics.median(lat), 1),
             "est_sbatch_p99_ms": round(sorted(lat)[int(len(lat) * 0.99) - 1], 1),
             "slurm_cpus": 64})
        return 0
    except Exception as e:  # noqa: BLE001 - reported in the JSON line
        out({"error": str(e)})
        return 1
    finally:
        if meta:
            meta.terminate()
            try:
                meta.wait(timeout=10)
            except subprocess.TimeoutExpired:
                meta.kill()
        s.down()


if __name__ == "__main__":
    sys.exit(main())
