"""scale_sites.py - the spool's levels of bench/scale.sh (issue 28): placement against 2
to 64 sites, and pending jobs at the spool from 10^3 to 10^6.

Sites are stand-ins, not batch roles: 64 real `gridnode batch` roles (each with its
cluster manager to report hosts) would take the 2 cores this runs on, and the curve
would be theirs, not the spool's. A stand-in site is a ROUTER on its own loopback port
speaking the site interface of docs/wire.md 6.12 as the spool uses it: SITE_INFO (one
cluster of 64 cores, all free), ESTIMATE (earliest: now), RESERVE (granted at the asked
start), SUBMIT into it (a new site job), JOB_GET (the job ran and ended: done, exit 0),
RESV_LIST (empty), RESV_RELEASE and CANCEL (OK). Real sockets and the real spool; every
stand-in site lives in one thread of this process (FakeSites). A "slow" site answers
everything at once but ESTIMATE only after SLOW_S (beyond meta.estimate_timeout_ms), so
the spool must decide without it: the placement then waits for the timeout.

 sites    2, 4, 8, 16, 32, 64 sites (quick: 2, 8, 64); a fresh spool per point
          (store.sync = full), WARM jobs placed first (a spool that has been running:
          the first placements find slow sites out), then N one-process `true` jobs
          (limit 60-3,600 s) submitted pipelined (WINDOW in flight) and measured. Per point two runs: every site answering
          (`slow` 0), and one site in 8 slow (`slow` = sites / 8, at least 1). Figures:
            place_p50_ms, place_p99_ms  submission acknowledged at the spool -> its
                                        SUBMIT arrives at a site (the placement: estimates
                                        from every site, the reservation, the submission)
            per_s          N / (first submission -> the last job's SUBMIT at a site)
            estimates      ESTIMATEs the sites got, per job (shared estimates: one per
                           distinct request and site per placement pass)
            spool_cpu_s    the spool's CPU time over the run
 spool    pending jobs at one spool 10^3, 10^4, 10^5 (quick) and 10^6, store.sync =
          full, whose one site never answers (a closed port: jobs stay spooled, as at a
          grid whose sites are all busy or down). One spool grows through every point:
            rss_per_job, anon_per_job  (VmRSS / RssAnon at N - before the first) / N
            acks_per_s     the point's submissions (WINDOW in flight) / their time
            list_ms        JOB_LIST of the first 1,000 jobs (a user's `gridnode jobs`)
            idle_cpu_pct   the spool's CPU use over 2 s with nothing asked of it (its
                           timers over the spooled jobs)
"""
import collections
import os
import random
import socket
import sys
import threading
import time

import msgpack
import zmq

T = dict(ERROR=1, OK=2, SUBMIT=30, SUBMITTED=31, JOB_LIST=32, JOB_GET=34, JOB=35,
         CANCEL=36, ESTIMATE=84, STARTS=85, RESV=89, RESV_LIST=90, RESVS=91,
         RESV_RELEASE=92, RESERVE=93, SITE_INFO=94, SITE=95)
WINDOW = 512
SLOW_S = 3.0
WARM = 50


def log(*a):
    print("scale:", *a, file=sys.stderr, flush=True)


def now_ms():
    return int(time.time() * 1000)


class FakeSites(threading.Thread):
    """n stand-in sites (the first `slow` of them slow), each a ROUTER on loopback."""

    def __init__(self, ctx, n, slow):
        super().__init__(daemon=True)
        self.socks, self.eps = [], []
        for _ in range(n):
            s = ctx.socket(zmq.ROUTER)
            for o in (zmq.LINGER, zmq.SNDHWM, zmq.RCVHWM):
                s.setsockopt(o, 0)
            self.eps.append("tcp://127.0.0.1:%d" % s.bind_to_random_port("tcp://127.0.0.1"))
            self.socks.append(s)
        self.slow = set(range(slow))
        self.stop = False
        self.held = collections.deque()  # (due, site, frames, id, reply) of slow ESTIMATEs
        self.arrived = {}       # spool job id -> time.monotonic() its SUBMIT arrived
        self.estimates = 0
        self.jobs = 0

    def reply(self, i, frames, t, id_, **f):
        self.socks[i].send_multipart(frames[:-1] + [msgpack.packb(dict(v=1, t=t, id=id_, **f))])

    def handle(self, i, frames):
        m = msgpack.unpackb(frames[-1], raw=False)
        t, id_ = m["t"], m["id"]
        if t == T["SITE_INFO"]:
            self.reply(i, frames, T["SITE"], id_, site=dict(
                clusters=1, hosts=1, hosts_up=1, cores=64, cores_up=64, cores_free=64,
                largest_procs=64, queued=0, running=0, reservations=0, cycles=0,
                now=now_ms(), features=[]))
        elif t == T["ESTIMATE"]:
            self.estimates += 1
            n = now_ms()
            body = dict(earliest=n, now=n, starts=[{"from": n, "to": -1}])
            if i in self.slow:
                self.held.append((time.monotonic() + SLOW_S, i, frames, id_, body))
            else:
                self.reply(i, frames, T["STARTS"], id_, **body)
        elif t == T["RESERVE"]:
            st = m.get("start", now_ms())
            self.reply(i, frames, T["RESV"], id_, resv=dict(
                name=m.get("name", ""), owner=m.get("user", ""), start=st,
                end=st + 1000 * m.get("duration_s", 60), procs=m.get("procs", 1)))
        elif t in (T["SUBMIT"], 39):
            key = m.get("key", "")
            try:    # meta:<incarnation>:<job>.<attempt>
                job = int(key.rsplit(":", 1)[1].split(".")[0])
                self.arrived.setdefault(job, time.monotonic())
            except (IndexError, ValueError):
                pass
            self.jobs += 1
            self.reply(i, frames, T["SUBMITTED"], id_, job=self.jobs, state="queued",
                       cluster="c", reason="")
        elif t == T["JOB_GET"]:
            n = now_ms()
            self.reply(i, frames, T["JOB"], id_, job=dict(
                job=m.get("job", 0), state="done", started=n - 2, finished=n - 1, exit=0,
                ntasks=1, issued=1, running=0, done=1, failed=0),
                tasks=[dict(idx=0, state="ok", started=n - 2, finished=n - 1, exit=0)])
        elif t == T["RESV_LIST"]:
            self.reply(i, frames, T["RESVS"], id_, now=now_ms(), resvs=[])
        elif t in (T["RESV_RELEASE"], T["CANCEL"]):
            self.reply(i, frames, T["OK"], id_)
        else:
            self.reply(i, frames, T["ERROR"], id_, code=3, msg="not here")

    def run(self):
        poller = zmq.Poller()
        for s in self.socks:
            poller.register(s, zmq.POLLIN)
        index = {s: i for i, s in enumerate(self.socks)}
        while not self.stop:
            now = time.monotonic()
            while self.held and self.held[0][0] <= now:   # held in arrival order
                _, i, frames, id_, body = self.held.popleft()
                self.reply(i, frames, T["STARTS"], id_, **body)
            for s, _ in poller.poll(20):
                for _ in range(64):     # a burst per socket, then the others
                    try:
                        frames = s.recv_multipart(zmq.NOBLOCK)
                    except zmq.Again:
                        break
                    self.handle(index[s], frames)

    def close(self):
        self.stop = True
        self.join(5)
        for s in self.socks:
            s.close(0)


def spool(P, name, sites, extra=()):
    """A spool (store.sync = full) on the given site endpoints, listed in a
    meta.sites_file (meta.sites holds about five); returns (Popen, ep)."""
    path = os.path.join(P.tmp, name + ".sites")
    with open(path, "w") as f:
        f.write("".join("s%d=%s\n" % (k, ep) for k, ep in enumerate(sites)))
    return P.start(name, ["meta", "--set", "meta.state_dir=%s/%s" % (P.tmp, name),
                          "--set", "meta.listen=tcp://127.0.0.1:*",
                          "--set", "meta.sites=", "--set", "meta.sites_file=" + path,
                          "--set", "meta.log_level=warn",
                          "--set", "limits.peer_queue=100000"] + list(extra))


def submit(d, n, rnd, acks, budget):
    """n SUBMITs, WINDOW in flight; acks[job] = time.monotonic() of its SUBMITTED;
    returns the seconds taken."""
    sent = acked = 0
    t0 = time.monotonic()
    deadline = t0 + budget
    while acked < n:
        while sent < n and sent - acked < WINDOW:
            d.send(T["SUBMIT"], argv=["true"], ntasks=1, limit_s=rnd.choice((60, 600, 3600)))
            sent += 1
        r = d.recv(max(0.01, deadline - time.monotonic()))
        if r is None or time.monotonic() > deadline:
            sys.exit("scale: spool submissions stalled at %d of %d" % (acked, n))
        if r.get("t") != T["SUBMITTED"]:
            sys.exit("scale: spool submission refused: %r" % r)
        acks[r["job"]] = time.monotonic()
        acked += 1
    return time.monotonic() - t0


def pct(v, q):
    return v[min(len(v) - 1, int(q * len(v)))] if v else None


def sites_point(P, ctx, Dealer, cpu, emit, nsites, slow, n):
    fs = FakeSites(ctx, nsites, slow)
    fs.start()
    try:
        name = "spool-%d-%d" % (nsites, slow)
        sp, ep = spool(P, name, fs.eps)
        d = Dealer(ep)
        deadline = time.monotonic() + 30
        while not all(s["known"] and s["up"] for s in d.call(T["SITE_INFO"])["sites"]):
            if time.monotonic() > deadline:
                sys.exit("scale: the spool does not see its %d stand-in sites" % nsites)
            time.sleep(0.1)
        # warm-up: WARM jobs placed first, as on a spool that has been running (the first
        # placements find the slow sites out), then the measured ones
        warm = {}
        submit(d, WARM, random.Random(27), warm, 60)
        deadline = time.monotonic() + 60
        while not all(j in fs.arrived for j in warm):
            if time.monotonic() > deadline:
                sys.exit("scale: the warm-up jobs were not placed within 60 s")
            time.sleep(0.05)
        est0 = fs.estimates
        c0, t0 = cpu(sp.pid), time.monotonic()
        acks = {}
        submit(d, n, random.Random(28), acks, 120)
        deadline = time.monotonic() + 120 + n // 50
        while len([j for j in acks if j in fs.arrived]) < n:
            if time.monotonic() > deadline:
                sys.exit("scale: %d of %d jobs placed onto %d sites within the budget"
                         % (len(fs.arrived), n, nsites))
            time.sleep(0.05)
        lat = sorted(1000 * (fs.arrived[j] - acks[j]) for j in acks)
        last = max(fs.arrived[j] for j in acks)
        emit({"bench": "scale", "level": "spool_sites", "sites": nsites, "slow": slow,
              "jobs": n, "place_p50_ms": round(pct(lat, 0.5), 1),
              "place_p99_ms": round(pct(lat, 0.99), 1), "per_s": round(n / (last - t0)),
              "estimates": round((fs.estimates - est0) / n, 2),
              "spool_cpu_s": round(cpu(sp.pid) - c0, 2)})
        d.close()
        P.stop(sp)
    finally:
        fs.close()


def sites_curve(P, ctx, Dealer, cpu, emit, points, n):
    for k in points:
        for slow in (0, max(1, k // 8)):
            log("spool: %d jobs onto %d stand-in sites, %d slow" % (n, k, slow))
            sites_point(P, ctx, Dealer, cpu, emit, k, slow, n)


def closed_port():
    """A loopback endpoint nothing listens on."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return "tcp://127.0.0.1:%d" % port


def pending_curve(P, Dealer, rss, cpu, emit, points):
    sp, ep = spool(P, "spool-pending", [closed_port()], ["--set", "store.map_mb=4096"])
    d = Dealer(ep)
    d.call(T["JOB_LIST"], count=1)
    time.sleep(0.5)
    r0, a0 = rss(sp.pid), rss(sp.pid, "RssAnon")
    rnd, acks, have = random.Random(28), {}, 0
    for n in points:
        add = n - have
        log("spool: %d more pending jobs (to %d)" % (add, n))
        secs = submit(d, add, rnd, acks, 60 + add // 200)
        have = n
        acks.clear()
        time.sleep(1)
        r1, a1 = rss(sp.pid), rss(sp.pid, "RssAnon")
        t = time.monotonic()
        d.call(T["JOB_LIST"], count=1000)
        list_ms = 1000 * (time.monotonic() - t)
        c0 = cpu(sp.pid)
        time.sleep(2)
        emit({"bench": "scale", "level": "spool", "pending": n,
              "rss_per_job": round((r1 - r0) / n), "anon_per_job": round((a1 - a0) / n),
              "rss_mb": round(r1 / 2**20, 1), "acks_per_s": round(add / secs),
              "list_ms": round(list_ms, 1), "idle_cpu_pct": round((cpu(sp.pid) - c0) * 50, 1)})
    d.close()
    P.stop(sp)
