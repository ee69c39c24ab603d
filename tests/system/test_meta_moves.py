"""Moves are safe (issue 24 item 3): the spool moves a placed job to a site offering an
earlier start only after the old site withdrew its copy (CANCEL `unstarted`, which the
site decides: refused once the copy started), and submits at the new site only then. A
withdrawal whose answer is lost is settled by the next poll: a copy seen cancelled is
placed again, once.

The two sites are fake batch sites in this test (a ROUTER answering the site interface
of docs/wire.md 6.12), so the race "the copy started while the spool decided to move
it" and a lost answer happen exactly when the test says. The real batch role's and
cluster's side of the withdrawal is tested at the end against real roles."""

import threading
import time

import msgpack
import pytest

from conftest import TYPES, _zmq, curve_server, scaled, wait_until

T = dict(TYPES, PSUBMIT=39, ESTIMATE=84, STARTS=85, RESV=89, RESV_LIST=90, RESVS=91,
         RESV_RELEASE=92, RESERVE=93, SITE_INFO=94, SITE=95)


def now_ms():
    return int(time.time() * 1000)


class FakeSite:
    """A batch site: every request is logged (type, fields) in order; the answers to
    ESTIMATE and to a withdrawal are the test's to set."""

    def __init__(self, name, start_in_s):
        zmq, ctx = _zmq()
        self.zmq = zmq
        self.name = name
        self.sock = curve_server(ctx.socket(zmq.ROUTER))
        self.sock.setsockopt(zmq.LINGER, 0)
        self.endpoint = "tcp://127.0.0.1:%d" % self.sock.bind_to_random_port("tcp://127.0.0.1")
        self.start_in_s = start_in_s
        self.withdraw = "ok"  # "ok", "started" (STATE), or "lost" (cancelled, no answer)
        self.hide = False  # JOB_GET shows a withdrawn copy as still queued
        self.down = False  # every request is dropped unanswered (a site down or cut off)
        self.fail_cancels = 0  # the next N CANCELs get STORAGE (a site's passing failure)
        self.lose_cancels = 0  # the next N CANCELs are done but not answered
        self.swallow_submits = 0  # the next N SUBMITs are taken but not answered
        self.log = []
        self.jobs = {}  # id -> state
        self.keys = {}  # submission key -> id
        self.next_job = 100
        self.lock = threading.Lock()
        self.stop = False
        self.th = threading.Thread(target=self.run, daemon=True)
        self.th.start()

    def close(self):
        self.stop = True
        self.th.join(5)
        self.sock.close()

    def reply(self, rid, t, id_, **f):
        self.sock.send_multipart([rid, msgpack.packb(dict(v=1, t=t, id=id_, **f))])

    def count(self, t, **match):
        with self.lock:
            return sum(1 for (mt, m) in self.log if mt == t and
                       all(m.get(k) == v for k, v in match.items()))

    def handle(self, rid, m):
        t, i = m["t"], m["id"]
        if self.down:
            return
        with self.lock:
            self.log.append((t, dict(m, _at=time.monotonic())))
        if t == T["SITE_INFO"]:
            self.reply(rid, T["SITE"], i, site=dict(cores=4, largest_procs=4, cores_free=0,
                                                    queued=0, running=0))
        elif t == T["ESTIMATE"]:
            self.reply(rid, T["STARTS"], i, earliest=now_ms() + self.start_in_s * 1000,
                       starts=[], now=now_ms())
        elif t == T["RESERVE"]:
            start = max(m.get("start", 0), now_ms())
            self.reply(rid, T["RESV"], i, resv=dict(name=m.get("name", ""), start=start))
        elif t in (T["SUBMIT"], T["PSUBMIT"]) and m.get("key") in self.keys:
            # a resent keyed submission: the same job, as the batch role (6.1 `key`)
            jid = self.keys[m["key"]]
            self.reply(rid, T["SUBMITTED"], i, job=jid, state=self.jobs[jid], cluster="",
                       repeat=True)
        elif t in (T["SUBMIT"], T["PSUBMIT"]):
            with self.lock:
                self.next_job += 1
                jid = self.next_job
                self.jobs[jid] = "queued"
                self.keys[m.get("key")] = jid
            if self.swallow_submits > 0:
                self.swallow_submits -= 1
                return
            self.reply(rid, T["SUBMITTED"], i, job=jid, state="queued", cluster="")
        elif t == T["JOB_GET"]:
            st = self.jobs.get(m["job"])
            if st == "cancelled" and self.hide:
                st = "queued"
            if st is None:
                self.reply(rid, TYPES["ERROR"], i, code=5, msg="no such job")
            else:
                self.reply(rid, T["JOB"], i, job=dict(job=m["job"], state=st,
                                                       started=now_ms() if st == "running"
                                                       else 0, exit=0, finished=0), tasks=[])
        elif t == T["CANCEL"] and not m.get("unstarted") and self.fail_cancels > 0:
            self.fail_cancels -= 1
            self.reply(rid, TYPES["ERROR"], i, code=8, msg="cannot store the change")
        elif t == T["CANCEL"] and not m.get("unstarted") and self.jobs.get(m["job"]) in (
                "cancelled", "done", "failed"):
            self.reply(rid, TYPES["ERROR"], i, code=9, msg="the job has already ended")
        elif t == T["CANCEL"]:
            st = self.jobs.get(m["job"])
            if not m.get("unstarted") and self.lose_cancels > 0 and st is not None:
                self.lose_cancels -= 1
                self.jobs[m["job"]] = "cancelled"
                return
            if st is None:
                self.reply(rid, TYPES["ERROR"], i, code=5, msg="no such job")
            elif m.get("unstarted") and (self.withdraw == "started" or st == "running"):
                self.jobs[m["job"]] = "running"
                self.reply(rid, TYPES["ERROR"], i, code=9, msg="job has started: it stays here")
            else:
                self.jobs[m["job"]] = "cancelled"
                if not (m.get("unstarted") and self.withdraw == "lost"):
                    self.reply(rid, TYPES["OK"], i)
        elif t == T["RESV_RELEASE"]:
            self.reply(rid, TYPES["OK"], i)
        elif t == T["RESV_LIST"]:
            self.reply(rid, T["RESVS"], i, now=now_ms(), resvs=[])
        else:
            self.reply(rid, TYPES["ERROR"], i, code=3, msg="not here")

    def run(self):
        poller = self.zmq.Poller()
        poller.register(self.sock, self.zmq.POLLIN)
        while not self.stop:
            if not poller.poll(20):
                continue
            frames = self.sock.recv_multipart()
            self.handle(frames[0], msgpack.unpackb(frames[-1], raw=False))


@pytest.fixture
def sites():
    made = []

    def make(name, start_in_s):
        s = FakeSite(name, start_in_s)
        made.append(s)
        return s

    yield make
    for s in made:
        s.close()


def placed_at_a(meta_factory, sites, withdraw):
    a, b = sites("a", 300), sites("b", 900)
    a.withdraw = withdraw
    m = meta_factory({"a": a.endpoint, "b": b.endpoint},
                     sets={"meta.reeval_s": 1, "meta.move_margin_s": 30})
    wait_until(lambda: all(s["known"] for s in m.rpc(T["SITE_INFO"])["sites"]), scaled(20),
               msg="sites known")
    jid = m.rpc(T["PSUBMIT"], argv=["true"], procs=1, limit_s=60)["job"]
    wait_until(lambda: m.rpc(T["JOB_GET"], job=jid)["job"]["gstate"] == "placed", scaled(20),
               msg="placed")
    j = m.rpc(T["JOB_GET"], job=jid)["job"]
    assert j["site"] == "a", j
    return m, a, b, jid, j["site_job"]


def test_a_copy_that_started_is_not_moved(meta_factory, sites):
    m, a, b, jid, sjob = placed_at_a(meta_factory, sites, "started")
    b.start_in_s = 0  # b now offers a start 300 s earlier: the spool tries to move it
    wait_until(lambda: a.count(T["CANCEL"], job=sjob, unstarted=True) >= 1, scaled(20),
               msg="the spool asks site a to withdraw its copy")
    # a answered that its copy started: nothing was submitted at b, b's reservation goes
    wait_until(lambda: b.count(T["RESV_RELEASE"]) >= 1, scaled(20), msg="b released")
    time.sleep(2)
    assert b.count(T["PSUBMIT"]) == 0 and b.count(T["SUBMIT"]) == 0
    assert a.count(T["CANCEL"], job=sjob, unstarted=None) == 0  # never an unconditional one
    wait_until(lambda: m.rpc(T["JOB_GET"], job=jid)["job"]["gstate"] == "running", scaled(20),
               msg="the job runs at a")
    assert m.rpc(T["JOB_GET"], job=jid)["job"]["site"] == "a"


def test_a_withdrawn_copy_moves_once(meta_factory, sites):
    m, a, b, jid, sjob = placed_at_a(meta_factory, sites, "ok")
    b.start_in_s = 0
    wait_until(lambda: m.rpc(T["JOB_GET"], job=jid)["job"]["site"] == "b", scaled(30),
               msg="moved to b")
    j = m.rpc(T["JOB_GET"], job=jid)["job"]
    wait_until(lambda: m.rpc(T["JOB_GET"], job=jid)["job"]["gstate"] == "placed", scaled(20),
               msg="placed at b")
    assert b.count(T["PSUBMIT"]) == 1 and a.jobs[sjob] == "cancelled", j
    # the withdrawal came first: b's submission only after a's OK
    w = [m["_at"] for t, m in a.log if t == T["CANCEL"] and m.get("unstarted")]
    p = [m["_at"] for t, m in b.log if t == T["PSUBMIT"]]
    assert w and p and w[0] < p[0], (w, p)
    assert "moved" in m.rpc(T["JOB_GET"], job=jid)["job"]["reason"]


@pytest.mark.parametrize("late", [False, True])
def test_a_lost_withdrawal_answer_places_the_job_again_once(meta_factory, sites, late):
    m, a, b, jid, sjob = placed_at_a(meta_factory, sites, "lost")
    a.hide = late  # late: the polls show the copy cancelled only after the move gave up
    b.start_in_s = 0
    wait_until(lambda: a.count(T["CANCEL"], job=sjob, unstarted=True) >= 1, scaled(20),
               msg="withdrawal sent")
    if late:
        # no answer: the move is given up, b's reservation released, nothing submitted
        wait_until(lambda: b.count(T["RESV_RELEASE"]) >= 1, scaled(20), msg="move given up")
        assert b.count(T["PSUBMIT"]) == 0
        a.hide = False
    # the poll finds the copy cancelled: the job goes to b, exactly once
    wait_until(lambda: m.rpc(T["JOB_GET"], job=jid)["job"]["site"] == "b" and
               m.rpc(T["JOB_GET"], job=jid)["job"]["gstate"] == "placed", scaled(60),
               msg="placed at b")
    time.sleep(2)
    assert b.count(T["PSUBMIT"]) == 1
    assert a.count(T["PSUBMIT"]) == 1  # a never got it again


def test_real_sites_decide_the_withdrawal(cluster_factory, client_factory, batch_factory):
    """CANCEL `unstarted` at a real batch role and cluster: OK (and OK again) for a copy
    that never started, STATE for one that did; the started one keeps running."""
    cl = cluster_factory({"store.sync": "none", "tasks.heartbeat_s": 1})
    client_factory(cl, 1, sets={"client.slots": 1})
    b = batch_factory([cl])
    wait_until(lambda: any(n["active"] for n in b.rpc(37)["nodes"]),
               scaled(20), msg="batch sees the host")
    run = b.rpc(T["PSUBMIT"], argv=["sleep 30"], shell=True, procs=1, limit_s=60)["job"]
    wait = b.rpc(T["PSUBMIT"], argv=["true"], procs=1, limit_s=60)["job"]
    wait_until(lambda: b.rpc(T["JOB_GET"], job=run)["job"]["state"] == "running", scaled(20),
               msg="first job runs")
    e = b.client().err(T["CANCEL"], "STATE", job=run, unstarted=True)
    assert "started" in e["msg"]
    assert b.rpc(T["JOB_GET"], job=run)["job"]["state"] == "running"
    b.client().ok(T["CANCEL"], job=wait, unstarted=True)
    b.client().ok(T["CANCEL"], job=wait, unstarted=True)  # the same answer again
    assert b.rpc(T["JOB_GET"], job=wait)["job"]["state"] == "cancelled"
    b.client().ok(T["CANCEL"], job=run)
    wait_until(lambda: not any(r["state"] == "running" for r in cl.rpc(T["JOB_LIST"])["jobs"]),
               scaled(30), msg="the node is free")
    # the cluster: a bag job on the one slot, the second one never issued
    busy = cl.rpc(T["SUBMIT"], argv=["sleep", "30"], ntasks=1)["job"]
    idle = cl.rpc(T["SUBMIT"], argv=["true"], ntasks=1)["job"]
    wait_until(lambda: cl.rpc(T["JOB_GET"], job=busy)["job"]["running"] >= 1 or
               cl.rpc(T["JOB_GET"], job=busy)["job"]["issued"] >= 1, scaled(20),
               msg="bag task issued")
    cl.client().err(T["CANCEL"], "STATE", job=busy, unstarted=True)
    cl.client().ok(T["CANCEL"], job=idle, unstarted=True)
    cl.client().ok(T["CANCEL"], job=idle, unstarted=True)
    assert cl.rpc(T["JOB_GET"], job=idle)["job"]["state"] == "cancelled"
    cl.client().ok(T["CANCEL"], job=busy)
