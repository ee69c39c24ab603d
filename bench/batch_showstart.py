"""Helper of bench/batch_showstart.sh: a fake cluster manager (a ROUTER answering
EVENTS, NODE_LIST and PSUBMIT like a real one with NODES hosts of one core), a live
batch role on it, PENDING pending jobs, then N timed ESTIMATE requests sent by
REQUESTER (build/bench/estimate_rtt)."""
import json
import random
import shutil
import subprocess
import sys
import tempfile
import threading
import time

import msgpack
import zmq

gridnode, pending, nodes, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
requester = sys.argv[5]
T = dict(ERROR=1, SUBMITTED=31, JOB_GET=34, NODE_LIST=37, NODES=38, PSUBMIT=39, EVENTS=60,
         EVENT_LIST=61, ESTIMATE=84, STARTS=85)
ctx = zmq.Context()


class FakeCluster(threading.Thread):
    def __init__(self):
        super().__init__(daemon=True)
        self.sock = ctx.socket(zmq.ROUTER)
        self.sock.setsockopt(zmq.LINGER, 0)
        self.endpoint = "tcp://127.0.0.1:%d" % self.sock.bind_to_random_port("tcp://127.0.0.1")
        self.held, self.stop, self.jobs = [], False, 0
        self.hosts = [dict(node="h%d" % i, sid="s%d" % i, active=True, procs=True, cores=1,
                           slots=1, mem_mb=0, disk_mb=0) for i in range(nodes)]

    def reply(self, rid, t, id_, **f):
        self.sock.send_multipart([rid, msgpack.packb(dict(v=1, t=t, id=id_, **f))])

    def run(self):
        poller = zmq.Poller()
        poller.register(self.sock, zmq.POLLIN)
        while not self.stop:
            now = time.monotonic()
            for h in [h for h in self.held if h[0] <= now]:
                self.held.remove(h)
                self.reply(h[1], T["EVENT_LIST"], h[2], epoch="e1", inc="i1", first=1, next=1,
                           reset=False, events=[])
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
                    self.reply(frames[0], T["EVENT_LIST"], m["id"], epoch="e1", inc="i1",
                               first=1, next=1, reset=m.get("epoch") != "e1", events=[])
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


tmp = tempfile.mkdtemp(prefix="batch_showstart.")
fc = FakeCluster()
fc.start()
b = None
try:
    b = subprocess.Popen([gridnode, "batch", "--set", "batch.listen=tcp://127.0.0.1:*",
                          "--set", "batch.state_dir=%s/batch" % tmp,
                          "--set", "batch.clusters=" + fc.endpoint, "--set", "store.sync=none",
                          "--set", "batch.log_level=warn", "--set", "scheduler.estimates=yes",
                          "--set", "store.map_mb=1024"],
                         stdout=subprocess.PIPE, stderr=open(tmp + "/batch.log", "w"), text=True)
    ep = b.stdout.readline().split()[-1]
    d = ctx.socket(zmq.DEALER)
    d.setsockopt(zmq.LINGER, 0)
    d.connect(ep)
    seq = [0]

    def send(t, **f):
        seq[0] += 1
        d.send(msgpack.packb(dict(v=1, t=t, id=seq[0], **f)))

    def recv(timeout=60):
        if not d.poll(timeout * 1000):
            raise SystemExit("batch_showstart: no reply from the batch role (%s)" % tmp)
        return msgpack.unpackb(d.recv(), raw=False)

    def call(t, **f):
        send(t, **f)
        return recv()

    deadline = time.monotonic() + 60
    while call(T["ESTIMATE"], procs=1, walltime_s=60).get("earliest", -1) <= 0:
        if time.monotonic() > deadline:
            raise SystemExit("batch_showstart: the role never saw the hosts")
        time.sleep(0.2)
    call(T["PSUBMIT"], argv=["true"], procs=nodes, limit_s=3600)   # fills every host
    rnd = random.Random(9)
    ids, inflight = [], 0
    for i in range(pending):   # pipelined, at most 256 in flight
        send(T["PSUBMIT"], argv=["true"], procs=rnd.choice((1, 2, 4, 8, 16, 64)),
             limit_s=rnd.randint(60, 7200))
        inflight += 1
        while inflight >= 256 or (i == pending - 1 and inflight):
            r = recv()
            inflight -= 1
            if "job" in r:
                ids.append(r["job"])
    assert len(ids) == pending, "submits refused: %d of %d accepted" % (len(ids), pending)
    time.sleep(1)   # let the cycle after the last submit run
    # the timed requester is C (bench/estimate_rtt.c): a python DEALER's own round
    # trip (~150 us) would be most of the figure
    rtt = subprocess.run([requester, ep, str(n)], input="\n".join(map(str, ids)),
                         capture_output=True, text=True, timeout=240)
    if rtt.returncode != 0:
        raise SystemExit("batch_showstart: %s failed: %s" % (requester, rtt.stderr.strip()))
    r = json.loads(rtt.stdout)
    print(json.dumps({"bench": "batch_showstart", "pending": pending, "nodes": nodes,
                      "requests": n, "p50_us": r["p50_us"], "p99_us": r["p99_us"],
                      "floor_p50_us": r["floor_p50_us"], "floor_p99_us": r["floor_p99_us"]}))
finally:
    if b:
        b.terminate()
        try:
            b.wait(10)
        except subprocess.TimeoutExpired:
            b.kill()
            b.wait()
    fc.stop = True
    fc.join(5)
    shutil.rmtree(tmp, ignore_errors=True)
