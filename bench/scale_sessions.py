"""scale_sessions.py - the cluster's sessions level of bench/scale.sh (issue 28): how a
cluster manager's costs grow with the node sessions it holds, 10^2 -> 2*10^4.

Simulated nodes are sessions, not processes: a session is what HELLO opened (its `sid`
rides in every request, docs/wire.md 5), so SOCKETS DEALERs carry all of them (session k
on socket k mod SOCKETS). One socket per node, as bench/dispatch.c does, stops near
6,000 nodes: a process may hold 20,000 descriptors here and each ZeroMQ socket takes
three. The cluster is told nodes.max_sessions_per_address = 0: every session comes from
127.0.0.1, past its default 10,000 per address.

Per point a fresh cluster manager (store.sync = full) with one bag of 10^7 `true` tasks:
  rss_per_session   (VmRSS after N HELLOs - before) / N, bytes
  hello_per_s       HELLOs acknowledged per second (WINDOW in flight)
  dispatch_per_s    for DISPATCH_S seconds every session in turn reports its task and
                    takes the next (RESULT want=1; WINDOW requests in flight, sessions
                    served round robin so every session works): results acknowledged /s
  heartbeat_cpu_us  the cluster's CPU time per STATUS (each session naming its task),
                    over at least 20,000 of them: what a heartbeat costs the cluster
  idle_cpu_pct      the cluster's CPU use over 3 s in which the N sessions say nothing
                    (its once-a-second sweeps over the sessions)
The generator is Python: past about 10,000 requests/s it is the limit, the same at every
point (the shape of a curve is the cluster's).
"""
import collections
import os
import shutil
import sys
import time

import msgpack
import zmq

T = dict(HELLO=10, WELCOME=11, RESULT=14, TASKS=13, STATUS=16, STATUS_ACK=17, SUBMIT=30,
         SUBMITTED=31, ERROR=1)
SOCKETS = 16
WINDOW = 512
DISPATCH_S = 3


def log(*a):
    print("scale:", *a, file=sys.stderr, flush=True)


class Mux:
    """SOCKETS DEALERs to one endpoint; requests pipelined, replies matched by id."""

    def __init__(self, ctx, ep):
        self.socks = []
        for _ in range(SOCKETS):
            s = ctx.socket(zmq.DEALER)
            for o in (zmq.LINGER, zmq.SNDHWM, zmq.RCVHWM):
                s.setsockopt(o, 0)
            s.connect(ep)
            self.socks.append(s)
        self.poller = zmq.Poller()
        for s in self.socks:
            self.poller.register(s, zmq.POLLIN)
        self.id = 0

    def send(self, k, t, **f):
        self.id += 1
        self.socks[k % SOCKETS].send(msgpack.packb(dict(v=1, t=t, id=self.id, **f),
                                                   use_bin_type=True))
        return self.id

    def replies(self, timeout):
        for s, _ in self.poller.poll(int(timeout * 1000)):
            while True:
                try:
                    yield msgpack.unpackb(s.recv(zmq.NOBLOCK), raw=False,
                                          strict_map_key=False)
                except zmq.Again:
                    break

    def close(self):
        for s in self.socks:
            s.close(0)


def pump(mux, todo, make, on_reply, budget, until=None):
    """Sends make(k) for each k of the deque `todo` (WINDOW in flight); on_reply(k, r)
    may append k to todo again. Stops when nothing is left in flight, or at `until`."""
    inflight = {}
    deadline = time.monotonic() + budget
    while todo or inflight:
        if until and time.monotonic() >= until:
            break
        while todo and len(inflight) < WINDOW:
            k = todo.popleft()
            t, f = make(k)
            inflight[mux.send(k, t, **f)] = k
        got = False
        for r in mux.replies(0.5):
            k = inflight.pop(r.get("id"), None)
            if k is not None:
                got = True
                on_reply(k, r)
        if not got and time.monotonic() > deadline:
            sys.exit("scale: sessions: no reply within the budget (%d in flight)" % len(inflight))
    return len(inflight)


def point(P, ctx, Dealer, rss, cpu, emit, n):
    sd = os.path.join(P.tmp, "sessions-%d" % n)
    cp, ep = P.start("sessions-%d" % n, ["cluster", "--set", "cluster.state_dir=" + sd,
                                         "--set", "cluster.listen=tcp://127.0.0.1:*",
                                         "--set", "store.sync=full",
                                         "--set", "cluster.log_level=warn",
                                         "--set", "nodes.max_sessions_per_address=0",
                                         "--set", "limits.peer_queue=100000"])
    d = Dealer(ep)
    r = d.call(T["SUBMIT"], argv=["true"], ntasks=10**7, limit_s=3600)
    if r.get("t") != T["SUBMITTED"]:
        sys.exit("scale: the cluster refused the bag: %r" % r)
    d.close()
    mux = Mux(ctx, ep)
    time.sleep(0.3)
    r0 = rss(cp.pid)
    sid, task = [None] * n, [None] * n

    def welcome(k, r):
        if r.get("t") != T["WELCOME"]:
            sys.exit("scale: HELLO refused: %r" % r)
        sid[k] = r["sid"]
    t0 = time.monotonic()
    pump(mux, collections.deque(range(n)),
         lambda k: (T["HELLO"], dict(client="scale 1", node="sim%d" % k, cores=1, slots=1)),
         welcome, 60 + n // 100)
    hello_s = time.monotonic() - t0
    time.sleep(0.5)
    r1 = rss(cp.pid)

    done, again = [0], [False]

    def result_req(k):
        res = [task[k]] if task[k] else []
        return T["RESULT"], dict(sid=sid[k], results=res, want=1)

    def on_tasks(k, r):
        if r.get("t") != T["TASKS"]:
            sys.exit("scale: RESULT refused: %r" % r)
        done[0] += r.get("acked", 0)
        ts = r.get("tasks", [])
        task[k] = (dict(job=ts[0]["job"], idx=ts[0]["idx"], issue=ts[0]["issue"], exit=0)
                   if ts else None)
        if again[0]:
            todo.append(k)
    # one warm-up pass: every session holds a task, then the measured window
    todo = collections.deque(range(n))
    pump(mux, todo, result_req, on_tasks, 60 + n // 100)
    todo.extend(range(n))
    done[0], again[0] = 0, True
    t0 = time.monotonic()
    left = pump(mux, todo, result_req, on_tasks, 60, until=t0 + DISPATCH_S)
    rate = done[0] / (time.monotonic() - t0)
    deadline = time.monotonic() + 30
    while left and time.monotonic() < deadline:   # the replies still in flight
        left -= sum(1 for _ in mux.replies(0.5))

    rounds = max(1, 20000 // n)
    c0 = cpu(cp.pid)
    for _ in range(rounds):
        pump(mux, collections.deque(range(n)),
             lambda k: (T["STATUS"], dict(sid=sid[k], running=[
                 {x: task[k][x] for x in ("job", "idx", "issue")}] if task[k] else [])),
             lambda k, r: None, 60 + n // 100)
    hb_us = (cpu(cp.pid) - c0) * 1e6 / (rounds * n)
    c0 = cpu(cp.pid)
    time.sleep(3)
    idle = (cpu(cp.pid) - c0) / 3 * 100
    emit({"bench": "scale", "level": "sessions", "sessions": n,
          "rss_per_session": round((r1 - r0) / n), "rss_mb": round(r1 / 2**20, 1),
          "hello_per_s": round(n / hello_s), "dispatch_per_s": round(rate),
          "heartbeat_cpu_us": round(hb_us, 1), "idle_cpu_pct": round(idle, 1)})
    mux.close()
    P.stop(cp)
    shutil.rmtree(sd, ignore_errors=True)


def sessions_curve(P, ctx, Dealer, rss, cpu, emit, points):
    for n in points:
        log("cluster: %d simulated node sessions" % n)
        point(P, ctx, Dealer, rss, cpu, emit, n)
