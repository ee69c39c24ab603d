"""Benchmark `meta_place` of the live metascheduler (issue 10, item 10; docs/meta.md
"Placement rate").

usage: /usr/bin/python3 bench/meta_place.py GRIDNODE [N]

Starts 4 live batch sites on loopback (each: a cluster manager, one client of 64 slots,
a batch role; store.sync = full everywhere) and a `gridnode meta` spool placing onto
them (policy estimate, store.sync = full). N (default 2,000 from bench/meta_place.sh) 1-process jobs (`true`,
limit 60 s) are submitted to the spool pipelined (WINDOW in flight); a placement is the
whole of M3 for one job: ESTIMATE to every eligible site, RESERVE at the best, SUBMIT
into that reservation, the site's acknowledgement stored at the spool (the job leaves
the spool's `queued`/`placing` states). per_s = N / (first submission to the moment
every job is placed), seen by polling JOB_LIST at the spool every 50 ms.

Every process is started in a temporary directory and stopped by PID whatever happens
(bench/batch_live.py's Procs); every phase is bounded in time. Progress goes to stderr,
one JSON line to stdout.
"""
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from batch_live import Dealer, Procs, wait_hosts  # noqa: E402

SUBMIT, SUBMITTED, JOB_LIST, SITE_INFO = 30, 31, 32, 94
WINDOW = 512
SITES = 4


def log(*a):
    print("meta_place:", *a, file=sys.stderr, flush=True)


def site(P, k):
    d = P.tmp
    _, cl = P.start("cluster%d" % k, ["cluster", "--set", "cluster.state_dir=%s/cl%d" % (d, k),
                                      "--set", "cluster.listen=tcp://127.0.0.1:*",
                                      "--set", "store.sync=none",
                                      "--set", "queues.sync_ms=100"])
    P.start("client%d" % k, ["client", "--set", "client.server=" + cl,
                             "--set", "client.state_dir=%s/n%d" % (d, k),
                             "--set", "client.name=node%d" % k,
                             "--set", "client.slots=64"], wait_listen=False)
    _, ep = P.start("batch%d" % k, ["batch", "--set", "batch.state_dir=%s/b%d" % (d, k),
                                    "--set", "batch.listen=tcp://127.0.0.1:*",
                                    "--set", "batch.clusters=" + cl, "--set", "store.sync=full",
                                    "--set", "store.map_mb=256",
                                    "--set", "batch.log_level=" + os.environ.get(
                                        "META_PLACE_LOG", "warn"),
                                    "--set", "limits.peer_queue=100000"])
    return ep


def keep_logs(P):
    if os.environ.get("META_PLACE_KEEP"):
        os.system("cp %s/*.log %s/" % (P.tmp, os.environ["META_PLACE_KEEP"]))


def placed_count(d, frm):
    """(jobs from `frm` on that left queued/placing, the first id still waiting or None)."""
    n, first = 0, None
    while True:
        r = d.call(JOB_LIST, **{"from": frm, "count": 5000})
        for j in r.get("jobs", []):
            if j.get("gstate") in ("failed", "cancelled") and not j.get("site_job"):
                sys.exit("meta_place: job %d was not placed: %s" % (j["job"], j.get("reason")))
            if j.get("gstate") in ("queued", "placing"):
                if first is None:
                    first = j["job"]
            elif first is None:
                n += 1
        if "next" not in r or first is not None:
            return n, first
        frm = r["next"]


def run(P, n):
    eps = [site(P, k) for k in range(SITES)]
    for ep in eps:
        b = Dealer(ep)
        wait_hosts(b, 1)
        b.close()
    _, mep = P.start("meta", ["meta", "--set", "meta.state_dir=%s/meta" % P.tmp,
                              "--set", "meta.listen=tcp://127.0.0.1:*",
                              "--set", "meta.sites=" + ",".join(
                                  "s%d=%s" % (k, ep) for k, ep in enumerate(eps)),
                              "--set", "store.sync=full",
                              "--set", "meta.log_level=" + os.environ.get("META_PLACE_LOG", "warn"),
                              "--set", "limits.peer_queue=100000"])
    d = Dealer(mep)
    deadline = time.monotonic() + 30
    while not all(s["known"] and s["up"] for s in d.call(SITE_INFO)["sites"]):
        if time.monotonic() > deadline:
            sys.exit("meta_place: the spool does not see its %d sites" % SITES)
        time.sleep(0.1)
    log("%d jobs through the spool %s onto %d sites" % (n, mep, SITES))
    body = {"argv": ["true"], "ntasks": 1, "name": "bench", "limit_s": 60}
    sent = acked = 0
    t0 = time.monotonic()
    budget = t0 + 300
    first = 1
    done = 0
    t_sub = None
    while done < n:
        while sent < n and sent - acked < WINDOW:
            d.send(SUBMIT, **body)
            sent += 1
        if acked < n:
            r = d.recv(max(0.01, budget - time.monotonic()))
            if r is None:
                sys.exit("meta_place: submissions stalled at %d of %d" % (acked, n))
            if r.get("t") != SUBMITTED:
                sys.exit("meta_place: submission refused: %r" % r)
            acked += 1
            if acked == n:
                t_sub = time.monotonic()
            continue
        k, f = placed_count(d, first)
        done += k
        if f is not None:
            first = f
        if done < n:
            time.sleep(0.05)
        if time.monotonic() > budget:
            sys.exit("meta_place: only %d of %d jobs placed within 300 s" % (done, n))
    t1 = time.monotonic()
    info = d.call(SITE_INFO)
    d.close()
    return {"bench": "meta_place", "jobs": n, "sites": SITES, "per_s": round(n / (t1 - t0), 1),
            "seconds": round(t1 - t0, 3), "submit_per_s": round(n / (t_sub - t0), 1),
            "policy": info.get("policy"), "sync": "full", "cpu_s": P.cpu()}


def main():
    gridnode = os.path.abspath(sys.argv[1])
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 2000
    P = Procs(gridnode)
    try:
        out = run(P, n)
    finally:
        keep_logs(P)
        P.stop()
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
