"""scale_e2e.py - the end-to-end level of bench/scale.sh (issue 28): the same trivial jobs
submitted straight at the cluster, at a batch role on it, and at a grid spool on that
batch role, one after the other in one run on the same cluster and client.

The grid of the run: one cluster manager, one `gridnode client` of SLOTS slots
(client.sandbox = false: the execution boundary's cost is the client's, measured by
bench/client_e2e.sh, and the same at every level; left out, the hierarchy's own cost
shows the more), one batch role scheduling onto that cluster, one spool (`gridnode
meta`) whose one site is that batch role; store.sync = full everywhere (the defaults).

At each level (in the order cluster, batch, spool), N separate 1-process `true` jobs,
each a SUBMIT (ntasks 1, as `gridnode submit -- true` sends), WINDOW in flight; the
level's rate is N / (first submission to the moment that level reports every job
ended: JOB_LIST with the `state` filter of the unfinished states, polled every 50 ms
from the oldest job still unfinished). One JSON line per level:

  {"bench":"scale","level":"e2e","at":"cluster|batch|spool","jobs":N,"jobs_per_s":...,
   "seconds":...,"submit_per_s":...,"ratio":level/cluster,"cpu_s":{role: seconds}}

cpu_s is each role's CPU time over that level's phase (user + system), so a level's
own cost is seen apart from the client's.
"""
import os
import sys
import time

SUBMIT, SUBMITTED, JOB_LIST, NODE_LIST, SITE_INFO = 30, 31, 32, 37, 94
UNFINISHED = "queued,running,held,starting,requeueing,placing,placed"
SLOTS = 64
WINDOW = 512


def log(*a):
    print("scale:", *a, file=sys.stderr, flush=True)


def cpu(pid):
    """CPU seconds (user + system) of a process."""
    with open("/proc/%d/stat" % pid) as f:
        v = f.read().rsplit(")", 1)[1].split()
    return (int(v[11]) + int(v[12])) / os.sysconf("SC_CLK_TCK")


def first_unfinished(d, frm):
    """The id of the oldest job from `frm` on the level has not ended, or None."""
    r = d.call(JOB_LIST, **{"from": frm, "count": 1, "state": UNFINISHED})
    jobs = r.get("jobs", [])
    return jobs[0]["job"] if jobs else None


def run_level(Dealer, ep, n, budget, array):
    """n SUBMITs of `true` at ep (or one of n tasks with array), then waits until every
    one ended; returns (seconds, submission seconds)."""
    d = Dealer(ep)
    body = {"argv": ["true"], "ntasks": n if array else 1, "name": "e2e", "limit_s": 60}
    n = 1 if array else n
    sent = acked = 0
    first = None
    t0 = time.monotonic()
    deadline = t0 + budget
    while acked < n:
        while sent < n and sent - acked < WINDOW:
            d.send(SUBMIT, **body)
            sent += 1
        r = d.recv(max(0.01, deadline - time.monotonic()))
        if r is None or time.monotonic() > deadline:
            sys.exit("scale: e2e submissions stalled at %d of %d at %s" % (acked, n, ep))
        if r.get("t") != SUBMITTED:
            sys.exit("scale: e2e submission refused at %s: %r" % (ep, r))
        first = r["job"] if first is None else min(first, r["job"])
        acked += 1
    t_sub = time.monotonic() - t0
    frm = first
    while True:
        frm = first_unfinished(d, frm)
        if frm is None:
            break
        if time.monotonic() > deadline:
            sys.exit("scale: e2e jobs at %s not all ended within %d s (job %d still on)"
                     % (ep, budget, frm))
        time.sleep(0.05)
    secs = time.monotonic() - t0
    d.close()
    return secs, t_sub


def grid(P, Dealer):
    """Starts the cluster, the client, the batch role and the spool; returns
    {level: (endpoint, pid)} and the client's pid."""
    t = P.tmp
    cp, cl = P.start("e2e-cluster", ["cluster", "--set", "cluster.state_dir=%s/e2e-cl" % t,
                                     "--set", "cluster.listen=tcp://127.0.0.1:*",
                                     "--set", "cluster.log_level=warn"])
    np_, _ = P.start("e2e-client", ["client", "--set", "client.server=" + cl,
                                    "--set", "client.state_dir=%s/e2e-n" % t,
                                    "--set", "client.name=e2e-node",
                                    "--set", "client.slots=%d" % SLOTS,
                                    "--set", "client.sandbox=false",
                                    "--set", "client.log_level=warn"], wait_listen=False)
    bp, bep = P.start("e2e-batch", ["batch", "--set", "batch.state_dir=%s/e2e-b" % t,
                                    "--set", "batch.listen=tcp://127.0.0.1:*",
                                    "--set", "batch.clusters=" + cl,
                                    "--set", "batch.log_level=warn",
                                    "--set", "store.map_mb=256",
                                    "--set", "limits.peer_queue=100000"])
    d = Dealer(bep)
    deadline = time.monotonic() + 60
    while sum(h.get("active", False) for h in d.call(NODE_LIST).get("nodes", [])) < 1:
        if time.monotonic() > deadline:
            sys.exit("scale: e2e: the batch role never saw the client")
        time.sleep(0.1)
    d.close()
    mp, mep = P.start("e2e-spool", ["meta", "--set", "meta.state_dir=%s/e2e-m" % t,
                                    "--set", "meta.listen=tcp://127.0.0.1:*",
                                    "--set", "meta.sites=site=" + bep,
                                    "--set", "meta.log_level=warn",
                                    "--set", "limits.peer_queue=100000"])
    d = Dealer(mep)
    deadline = time.monotonic() + 60
    while not all(s["known"] and s["up"] for s in d.call(SITE_INFO)["sites"]):
        if time.monotonic() > deadline:
            sys.exit("scale: e2e: the spool does not see its site")
        time.sleep(0.1)
    d.close()
    return {"cluster": (cl, cp.pid), "batch": (bep, bp.pid), "spool": (mep, mp.pid)}, np_.pid


def e2e_curve(P, Dealer, emit, n):
    """The three levels with n jobs each, then with one array of n elements each; one
    JSON line per level and form."""
    levels, client_pid = grid(P, Dealer)
    pids = {k: v[1] for k, v in levels.items()}
    pids["client"] = client_pid
    forms = os.environ.get("SCALE_E2E_FORMS", "jobs,array").split(",")
    ats = os.environ.get("SCALE_E2E_LEVELS", "cluster,batch,spool").split(",")
    for form in forms:
        base = None
        for at in ats:
            log("e2e: %d trivial %s submitted at the %s" % (n, form, at))
            c0 = dict((k, cpu(p)) for k, p in pids.items())
            secs, t_sub = run_level(Dealer, levels[at][0], n, 120 + n // 20, form == "array")
            rate = n / secs
            base = rate if base is None else base
            emit({"bench": "scale", "level": "e2e", "form": form, "at": at, "jobs": n,
                  "jobs_per_s": round(rate, 1), "seconds": round(secs, 3),
                  "submit_per_s": round((1 if form == "array" else n) / t_sub),
                  "ratio": round(rate / base, 3),
                  "cpu_s": dict((k, round(cpu(p) - c0[k], 2)) for k, p in pids.items())})
