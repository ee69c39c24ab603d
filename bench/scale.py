"""Helper of bench/scale.sh (issue 28): how each level's cost grows with its work, one
JSON line per point on stdout (progress on stderr).

usage: /usr/bin/python3 bench/scale.py GRIDNODE BUILD_BENCH_DIR [--quick] [--only LEVEL]

BUILD_BENCH_DIR holds estimate_rtt, dispatch and sched_cycle (make bench builds them).
Curves (--quick: the smaller sizes, for make bench; docs/perf.md "Scale"):

 batch   pending jobs 10^3, 10^4, 10^5 (quick) and 10^6. A batch role (store.sync=full,
         the default stats.interval_s) on a fake cluster manager of 64 one-core hosts
         that one job fills, so every later job stays pending; the jobs are PSUBMITs of
         1-64 processes and 1 min-2 h limits (as bench/batch_showstart.sh). One role
         grows through every point; at each point:
           rss_per_job     (VmRSS at N - VmRSS before the first job) / N, bytes; anon_per_job
                           the same for RssAnon (the heap; VmRSS adds mapped LMDB pages)
           acks_per_s      the submissions of this point's increment (WINDOW in flight) over
                           the time from the first send to the last SUBMITTED
           showstart_p50_us, showstart_p99_us  ESTIMATE (showstart) of a random pending
                           job, 200 requests one at a time (estimate_rtt)
           cycle_ms, cycle_conservative_ms  one scheduling cycle of the engine the role
                           and the simulator share, N pending jobs on 1,000 nodes half busy
                           (sched_cycle, median of 3; 1 run at 10^6): the default
                           reservation depth 1 (EASY) and unlimited (conservative)
 array   one task array of 10^6 and 10^7 elements at a batch role like the above:
           rss_kb          VmRSS growth once the SUBMIT is acknowledged
 cluster tasks pending in one bag, 10^4, 10^5, 10^6 (quick) and 10^7. A fresh cluster
         manager (store.sync=full) per point; one SUBMIT of N tasks, then dispatch with
         100 simulated nodes taking tasks one at a time (RESULT want=1) for 3 s:
           rss_per_task    (VmRSS after the SUBMIT - VmRSS before) / N, bytes
           dispatch_per_s  tasks acknowledged per second by the simulated nodes
 sessions  the cluster's node sessions 10^2, 10^4 (quick; and 10^3, 2*10^4): memory per
         session, dispatch rate, a heartbeat's CPU, idle cost (bench/scale_sessions.py)
 spool   jobs spooled at a grid spool 10^3-10^5 (quick) and 10^6: memory per job,
         submission acks/s, idle CPU (bench/scale_sites.py)
 spool_sites  placement onto 2, 64 (quick; and 4, 8, 16, 32) stand-in sites, every site
         answering and one in 8 slow: placement p50/p99, placements/s (scale_sites.py)
 e2e     the same trivial jobs submitted at the cluster, at a batch role on it and at a
         spool on that, one run, one client: jobs/s and ratios (bench/scale_e2e.py;
         1,000 jobs quick, SCALE_E2E_JOBS, default 5,000)

Every process is started here on loopback and stopped by PID at the end (SIGTERM, then
SIGKILL); every wait is bounded.
"""
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

import msgpack
import zmq

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import scale_e2e  # noqa: E402
import scale_sessions  # noqa: E402
import scale_sites  # noqa: E402

T = dict(ERROR=1, SUBMIT=30, SUBMITTED=31, JOB_GET=34, NODE_LIST=37, NODES=38, PSUBMIT=39,
         EVENTS=60, EVENT_LIST=61, ESTIMATE=84, STARTS=85)
WINDOW = 512
NODES = 64
E2E_JOBS, E2E_QUICK = int(os.environ.get("SCALE_E2E_JOBS", 5000)), 1000
ctx = zmq.Context.instance()


def log(*a):
    print("scale:", *a, file=sys.stderr, flush=True)


def rss(pid, key="VmRSS"):
    """A /proc/PID/status memory line in bytes."""
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
    return 0


def emit(d):
    print(json.dumps(d, separators=(",", ":")), flush=True)


class Procs:
    """The processes of the run, stopped by PID at the end."""

    def __init__(self, gridnode, tmp):
        self.gridnode, self.tmp, self.procs = gridnode, tmp, []

    def start(self, name, args, budget=60, wait_listen=True):
        """Starts `gridnode ARGS`; returns (Popen, the endpoint it listens on, or None
        without wait_listen)."""
        logf = open(os.path.join(self.tmp, name + ".log"), "w")
        p = subprocess.Popen([self.gridnode] + args, stdout=subprocess.PIPE, stderr=logf,
                             text=True)
        self.procs.append(p)
        if not wait_listen:
            return p, None
        deadline = time.monotonic() + budget
        while time.monotonic() < deadline:
            line = p.stdout.readline()
            if not line:
                logf.close()
                with open(logf.name) as f:
                    sys.exit("scale: %s exited: %s" % (name, f.read()[-600:]))
            if "listening on" in line:
                return p, line.split("listening on", 1)[1].strip()
        sys.exit("scale: %s did not start in %d s" % (name, budget))

    def stop(self, p):
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
            try:
                p.wait(20)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()

    def stop_all(self):
        for p in self.procs:
            self.stop(p)


class Dealer:
    def __init__(self, ep):
        self.s = ctx.socket(zmq.DEALER)
        for o in (zmq.LINGER, zmq.SNDHWM, zmq.RCVHWM):
            self.s.setsockopt(o, 0)
        self.s.connect(ep)
        self.id = 0

    def send(self, t, **f):
        self.id += 1
        self.s.send(msgpack.packb(dict(v=1, t=t, id=self.id, **f), use_bin_type=True))
        return self.id

    def recv(self, timeout):
        if not self.s.poll(int(timeout * 1000)):
            return None
        return msgpack.unpackb(self.s.recv_multipart()[-1], raw=False, strict_map_key=False)

    def call(self, t, timeout=120, **f):
        i = self.send(t, **f)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            r = self.recv(deadline - time.monotonic())
            if r and r.get("id") == i:
                return r
        sys.exit("scale: no reply to request type %d within %d s" % (t, timeout))

    def close(self):
        self.s.close(0)


class FakeCluster(threading.Thread):
    """A ROUTER answering EVENTS, NODE_LIST and PSUBMIT as a cluster manager with NODES
    one-core hosts would (the batch role only starts jobs there; nothing runs)."""

    def __init__(self):
        super().__init__(daemon=True)
        self.sock = ctx.socket(zmq.ROUTER)
        self.sock.setsockopt(zmq.LINGER, 0)
        self.endpoint = "tcp://127.0.0.1:%d" % self.sock.bind_to_random_port("tcp://127.0.0.1")
        self.held, self.stop, self.jobs = [], False, 0
        self.hosts = [dict(node="h%d" % i, sid="s%d" % i, active=True, procs=True, cores=1,
                           slots=1, mem_mb=0, disk_mb=0) for i in range(NODES)]

    def reply(self, rid, t, id_, **f):
        self.sock.send_multipart([rid, msgpack.packb(dict(v=1, t=t, id=id_, **f))])

    def events(self, rid, id_, reset):
        self.reply(rid, T["EVENT_LIST"], id_, epoch="e1", inc="i1", first=1, next=1,
                   reset=reset, events=[])

    def run(self):
        poller = zmq.Poller()
        poller.register(self.sock, zmq.POLLIN)
        while not self.stop:
            now = time.monotonic()
            for h in [h for h in self.held if h[0] <= now]:
                self.held.remove(h)
                self.events(h[1], h[2], False)
            if not poller.poll(20):
                continue
            frames = self.sock.recv_multipart()
            m = msgpack.unpackb(frames[-1], raw=False)
            t = m["t"]
            if t == T["EVENTS"]:
                wait = m.get("wait_ms", 0) if m.get("epoch") == "e1" else 0
                if wait:
                    self.held.append((now + wait / 1000.0, frames[0], m["id"]))
                else:
                    self.events(frames[0], m["id"], m.get("epoch") != "e1")
            elif t == T["NODE_LIST"]:
                f, c = m.get("from", 0), m.get("count", 1000)
                page = dict(nodes=self.hosts[f:f + c])
                if f + c < len(self.hosts):
                    page["next"] = f + c
                self.reply(frames[0], T["NODES"], m["id"], **page)
            elif t == T["PSUBMIT"]:
                self.jobs += 1
                self.reply(frames[0], T["SUBMITTED"], m["id"], job=self.jobs, state="running",
                           cluster="c", reason="")
            else:
                self.reply(frames[0], T["ERROR"], m["id"], code=3, msg="not here")


def submit_many(d, n, rnd, ids, budget):
    """n PSUBMITs, WINDOW in flight; appends the job ids; returns the seconds taken."""
    sent = acked = 0
    t0 = time.monotonic()
    deadline = t0 + budget
    while acked < n:
        while sent < n and sent - acked < WINDOW:
            d.send(T["PSUBMIT"], argv=["true"], procs=rnd.choice((1, 2, 4, 8, 16, 64)),
                   limit_s=rnd.randint(60, 7200))
            sent += 1
        r = d.recv(max(0.01, deadline - time.monotonic()))
        if r is None or time.monotonic() > deadline:
            sys.exit("scale: submissions stalled at %d of %d (budget %d s)" % (acked, n, budget))
        if r.get("t") != T["SUBMITTED"]:
            sys.exit("scale: submission refused: %r" % r)
        ids.append(r["job"])
        acked += 1
    return time.monotonic() - t0


def sched_cycle(bin_, n, depth):
    """The median ms of one engine cycle over n pending jobs (bench/sched_cycle.c)."""
    runs = "1" if n >= 10**6 else "3"
    r = subprocess.run([bin_, "--nodes", "1000", "--jobs", str(n), "--runs", runs,
                        "--depth", str(depth)], capture_output=True, text=True, timeout=900)
    if r.returncode != 0:
        sys.exit("scale: %s failed: %s" % (bin_, r.stderr.strip()[-300:]))
    return json.loads(r.stdout)["median_ms"]


def batch_role(P, fc, name, map_mb):
    """A batch role on the fake cluster, its hosts filled; returns (Popen, Dealer)."""
    sd = os.path.join(P.tmp, name)
    bp, ep = P.start(name, ["batch", "--set", "batch.listen=tcp://127.0.0.1:*",
                            "--set", "batch.state_dir=" + sd,
                            "--set", "batch.clusters=" + fc.endpoint,
                            "--set", "store.sync=full", "--set", "batch.log_level=warn",
                            "--set", "store.map_mb=%d" % map_mb,
                            "--set", "limits.peer_queue=100000"])
    d = Dealer(ep)
    d.ep = ep
    deadline = time.monotonic() + 60
    while d.call(T["ESTIMATE"], procs=1, walltime_s=60).get("earliest", -1) <= 0:
        if time.monotonic() > deadline:
            sys.exit("scale: the batch role never saw the fake cluster's hosts")
        time.sleep(0.2)
    d.call(T["PSUBMIT"], argv=["true"], procs=NODES, limit_s=3600)   # fills every host
    time.sleep(0.5)
    return bp, d


def batch_curve(P, bdir, points):
    fc = FakeCluster()
    fc.start()
    try:
        bp, d = batch_role(P, fc, "batch", 8192 if points[-1] > 10**5 else 2048)
        r0, a0 = rss(bp.pid), rss(bp.pid, "RssAnon")
        rnd, ids = random.Random(28), []
        for n in points:
            add = n - len(ids)
            log("batch: %d more pending jobs (to %d)" % (add, n))
            secs = submit_many(d, add, rnd, ids, 60 + add // 200)
            time.sleep(1)   # the cycles after the last submission
            r1, a1 = rss(bp.pid), rss(bp.pid, "RssAnon")
            rtt = subprocess.run([os.path.join(bdir, "estimate_rtt"), d.ep, "200"],
                                 input="\n".join(map(str, ids)), capture_output=True,
                                 text=True, timeout=900)
            if rtt.returncode != 0:
                sys.exit("scale: estimate_rtt failed: %s" % rtt.stderr.strip())
            e = json.loads(rtt.stdout)
            log("batch: engine cycles over %d pending jobs (bench/sched_cycle)" % n)
            sc = os.path.join(bdir, "sched_cycle")
            emit({"bench": "scale", "level": "batch", "pending": n,
                  "rss_per_job": round((r1 - r0) / n), "anon_per_job": round((a1 - a0) / n),
                  "rss_mb": round(r1 / 2**20, 1), "acks_per_s": round(add / secs),
                  "showstart_p50_us": e["p50_us"], "showstart_p99_us": e["p99_us"],
                  "floor_p50_us": e["floor_p50_us"], "floor_p99_us": e["floor_p99_us"],
                  "cycle_ms": sched_cycle(sc, n, 1),
                  "cycle_conservative_ms": sched_cycle(sc, n, -1)})
        d.close()
        P.stop(bp)
    finally:
        fc.stop = True
        fc.join(5)


def array_curve(P, points):
    fc = FakeCluster()
    fc.start()
    try:
        for n in points:
            bp, d = batch_role(P, fc, "array-%d" % n, 1024)
            r0 = rss(bp.pid)
            r = d.call(T["SUBMIT"], argv=["true"], ntasks=n, limit_s=3600)
            if r.get("t") != T["SUBMITTED"]:
                sys.exit("scale: the batch role refused the array: %r" % r)
            time.sleep(1)
            d.call(T["JOB_GET"], job=r["job"])
            emit({"bench": "scale", "level": "array", "elements": n,
                  "rss_kb": round((rss(bp.pid) - r0) / 1024), "rss_mb": round(rss(bp.pid) / 2**20, 1)})
            d.close()
            P.stop(bp)
    finally:
        fc.stop = True
        fc.join(5)


def start_cluster(P, name, sd):
    """A cluster manager with durable commits on its own state dir: (process, endpoint)."""
    return P.start(name, ["cluster", "--set", "cluster.state_dir=" + sd,
                          "--set", "cluster.listen=tcp://127.0.0.1:*",
                          "--set", "store.sync=full", "--set", "cluster.log_level=warn"])


def cluster_curve(P, bdir, points):
    dispatch_bin = os.path.join(bdir, "dispatch")
    for n in points:
        sd = os.path.join(P.tmp, "cluster-%d" % n)
        cp, ep = start_cluster(P, "cluster-%d" % n, sd)
        d = Dealer(ep)
        time.sleep(0.5)
        r0 = rss(cp.pid)
        log("cluster: one bag of %d tasks" % n)
        r = d.call(T["SUBMIT"], argv=["true"], ntasks=n, limit_s=3600)
        if r.get("t") != T["SUBMITTED"]:
            sys.exit("scale: the cluster refused the bag: %r" % r)
        time.sleep(0.5)
        r1 = rss(cp.pid)
        d.close()
        g = subprocess.run([dispatch_bin, "--endpoint", ep, "--clients", "100",
                            "--requests", "1000000", "--seconds", "3"],
                           capture_output=True, text=True, timeout=120)
        if g.returncode != 0:
            sys.exit("scale: %s failed: %s" % (dispatch_bin, g.stderr.strip()[-300:]))
        out = json.loads(g.stdout.strip().splitlines()[-1])
        emit({"bench": "scale", "level": "cluster", "pending": n,
              "rss_per_task": round((r1 - r0) / n, 2), "rss_mb": round(r1 / 2**20, 1),
              "dispatch_per_s": out["tasks_per_s"], "dispatch_p50_us": out["p50_us"],
              "dispatch_p99_us": out["p99_us"]})
        P.stop(cp)
        shutil.rmtree(sd, ignore_errors=True)


def cluster_jobs_curve(P, points):
    """Separate pending jobs at a cluster manager with no node (issue 28: memory per
    pending job at every level): n one-task SUBMITs, WINDOW in flight, grown in steps
    on one cluster; VmRSS per job and acknowledgements /s per step."""
    sd = os.path.join(P.tmp, "cluster-jobs")
    cp, ep = start_cluster(P, "cluster-jobs", sd)
    d = Dealer(ep)
    time.sleep(0.5)
    r0 = rss(cp.pid)
    have = 0
    for n in points:
        log("cluster: %d separate pending jobs" % n)
        sent = acked = 0
        t0 = time.monotonic()
        deadline = t0 + max(120, n / 500)
        while acked < n - have:
            while sent < n - have and sent - acked < WINDOW // 2:  # 512: replies dropped
                d.send(T["SUBMIT"], argv=["true"], ntasks=1, limit_s=3600)
                sent += 1
            r = d.recv(max(0.01, deadline - time.monotonic()))
            if r is None or time.monotonic() > deadline:
                sys.exit("scale: cluster submissions stalled at %d of %d" % (have + acked, n))
            if r.get("t") != T["SUBMITTED"]:
                sys.exit("scale: submission refused: %r" % r)
            acked += 1
        took = time.monotonic() - t0
        have = n
        r1 = rss(cp.pid)
        emit({"bench": "scale", "level": "cluster_jobs", "pending": n,
              "rss_per_job": round((r1 - r0) / n), "rss_mb": round(r1 / 2**20, 1),
              "acks_per_s": round(acked / took) if took > 0 else None})
    d.close()
    P.stop(cp)
    shutil.rmtree(sd, ignore_errors=True)


def main():
    gridnode, bdir = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    quick = "--quick" in sys.argv[3:]
    only = sys.argv[sys.argv.index("--only") + 1] if "--only" in sys.argv else None
    tmp = tempfile.mkdtemp(prefix="gridnode-bench-scale.")
    P = Procs(gridnode, tmp)
    try:
        if only in (None, "batch"):
            batch_curve(P, bdir, [10**3, 10**4, 10**5] + ([] if quick else [10**6]))
        if only in (None, "array"):
            array_curve(P, [10**6, 10**7])
        if only in (None, "cluster"):
            cluster_curve(P, bdir, [10**4, 10**5, 10**6] + ([] if quick else [10**7]))
        if only in (None, "cluster_jobs"):
            cluster_jobs_curve(P, [10**3, 10**4, 10**5] + ([] if quick else [10**6]))
        if only in (None, "sessions"):
            scale_sessions.sessions_curve(P, ctx, Dealer, rss, scale_e2e.cpu, emit,
                                          [100, 10000] if quick else [100, 1000, 10000, 20000])
        if only in (None, "spool"):
            scale_sites.pending_curve(P, Dealer, rss, scale_e2e.cpu, emit,
                                      [10**3, 10**4, 10**5] + ([] if quick else [10**6]))
        if only in (None, "spool_sites"):
            scale_sites.sites_curve(P, ctx, Dealer, scale_e2e.cpu, emit,
                                    [2, 64] if quick else [2, 4, 8, 16, 32, 64],
                                    500 if quick else 2000)
        if only in (None, "e2e"):
            scale_e2e.e2e_curve(P, Dealer, emit, E2E_QUICK if quick else E2E_JOBS)
    finally:
        P.stop_all()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
