"""Node-side failures, the client's error paths and prompt cancel (issue #8 items 6, 7, 12).

Real cluster and client processes on loopback; a fake server (a pyzmq ROUTER) where the
test must send what a real cluster never would. Every process is started through
conftest's registry and killed by PID at teardown; deadlines are generous and scaled.
"""

import os
import signal
import time

import msgpack
import pytest

from conftest import TYPES, WIRE_VERSION, curve_server, scaled, wait_until

FAST = {
    "store.sync": "none",
    "tasks.heartbeat_s": 1,
    "tasks.idle_wait_s": 1,
    "tasks.k_wait": 2,
    "tasks.k_wait_dead": 30,
    "tasks.default_estimate_s": 1,
    "tasks.min_wait_s": 1,
}
CLIENT = {"rpc.timeout_ms": 1000, "rpc.backoff_min_s": 0.2, "rpc.backoff_max_s": 1}


def hello(rpc, name):
    return rpc.ok("HELLO", expect="WELCOME", client="test 1", node=name, cores=1)["sid"]


def submit(rpc, ntasks, argv=("/bin/echo", "{i}"), **kw):
    return rpc.ok("SUBMIT", expect="SUBMITTED", argv=list(argv), ntasks=ntasks, **kw)["job"]


def job_get(rpc, jid, **kw):
    return rpc.ok("JOB_GET", expect="JOB", job=jid, **kw)


def node_map(rpc, sid):
    return next(n for n in rpc.ok("NODE_LIST", expect="NODES")["nodes"] if n["sid"] == sid)


def key(t):
    return {"job": t["job"], "idx": t["idx"], "issue": t["issue"]}


def _pids_of(*words):
    """PIDs whose command line holds every word (only our own uniquely marked sleeps)."""
    out = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open("/proc/%s/cmdline" % d, "rb") as f:
                cmd = f.read().split(b"\0")
            with open("/proc/%s/stat" % d) as f:
                if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                    continue
        except OSError:
            continue
        if all(w.encode() in cmd for w in words):
            out.append(int(d))
    return out


# ---------------------------------------------------------------------------
# item 6: the cluster's daily quota, and re-issue to another node


def test_quota_halves_on_node_errors_and_failed_task_goes_elsewhere(cluster_factory):
    cl = cluster_factory(dict(FAST, **{"tasks.node_daily_quota": 16,
                                       "tasks.max_attempts": 1000}))
    u = cl.connect()
    jid = submit(u, 100)
    bad, good = hello(u, "bad"), hello(u, "good")
    assert node_map(u, bad)["quota"] == 0  # not limited before any error
    got = 0
    reply = None
    for _ in range(40):  # bounded: the quota must stop it long before
        reply = u.ok("TASK_GET", expect="TASKS", sid=bad, want=1)
        if not reply["tasks"]:
            break
        t = reply["tasks"][0]
        got += 1
        r = u.ok("RESULT", expect="TASKS", sid=bad, want=0,
                 results=[dict(key(t), exit=-1, error="cannot prepare working directory")])
        # a task this node failed goes to the healthy node, not back to it
        assert all(x["idx"] != t["idx"] for x in r["tasks"])
    # 16 -> 8 -> 4 -> 2 -> 1 ...: a handful of tasks, then nothing for the day
    assert 2 <= got <= 5, got
    assert reply["tasks"] == [] and reply["wait_s"] > 3600, reply
    assert "quota" in reply["reason"]
    n = node_map(u, bad)
    assert 0 < n["quota"] <= 2 and n["quota_used"] >= n["quota"]
    # the healthy node gets the failed tasks first, and the job completes there
    first = u.ok("TASK_GET", sid=good, want=1)["tasks"][0]
    assert first["idx"] == 0 and first["issue"] == 2
    pending = [first]
    deadline = time.monotonic() + scaled(60)
    while pending and time.monotonic() < deadline:
        r = u.ok("RESULT", sid=good, want=10, results=[dict(key(t), exit=0) for t in pending])
        pending = r["tasks"]
    j = job_get(u, jid, tasks=True, count=1000)
    assert j["job"]["state"] == "done" and j["job"]["failed"] == 0
    assert all(t["node"] == good for t in j["tasks"])
    assert node_map(u, good)["quota"] == 0
    # still held back: asking again gives nothing, with the reason
    r = u.ok("TASK_GET", sid=bad, want=1)
    assert r["tasks"] == [] and "quota" in r["reason"]


def test_quota_restored_by_valid_results(cluster_factory):
    cl = cluster_factory(dict(FAST, **{"tasks.node_daily_quota": 8,
                                       "tasks.max_attempts": 1000}))
    u = cl.connect()
    submit(u, 50)
    sid = hello(u, "n")
    t = u.ok("TASK_GET", sid=sid, want=1)["tasks"][0]
    u.ok("RESULT", sid=sid, want=0, results=[dict(key(t), exit=-1, error="no disk")])
    assert node_map(u, sid)["quota"] == 4
    # the only active node: it gets its failed task back rather than nobody running it
    t = u.ok("TASK_GET", sid=sid, want=1)["tasks"][0]
    assert t["idx"] == 0
    u.ok("RESULT", sid=sid, want=0, results=[dict(key(t), exit=0)])
    t = u.ok("TASK_GET", sid=sid, want=1)["tasks"][0]
    u.ok("RESULT", sid=sid, want=0, results=[dict(key(t), exit=3)])  # the task's own failure
    assert node_map(u, sid)["quota"] == 0  # 4 -> 8 = full: not limited any more


def test_broken_node_stops_taking_work(cluster_factory, client_factory, gridnode_bin,
                                       workdir):
    cl = cluster_factory(dict(FAST, **{"tasks.node_daily_quota": 16}))
    (broken,) = client_factory(cl, 1, sets=dict(CLIENT, **{"client.slots": 4}),
                               prefix="broken")
    u = cl.connect()
    wait_until(lambda: u.ok("NODE_LIST")["nodes"], scaled(20), msg="the node to join")
    # its working directory becomes unusable (a file: even root cannot mkdir under it)
    work = broken.state_dir / "work"
    os.rename(work, broken.state_dir / "work.gone")
    work.write_text("not a directory\n")
    jid = submit(u, 60, argv=["/bin/echo", "task {i}"])
    wait_until(lambda: "this node stops taking tasks" in broken.log(), scaled(20),
               msg="the broken node to stop")
    (healthy,) = client_factory(cl, 1, sets=dict(CLIENT, **{"client.slots": 2}),
                                prefix="healthy")
    wait_until(lambda: job_get(u, jid)["job"]["state"] == "done", scaled(90), interval=0.2,
               msg="the job to finish on the healthy node")
    j = job_get(u, jid, tasks=True, count=1000)
    assert j["job"]["failed"] == 0, j["job"]
    nodes = {n["node"]: n for n in u.ok("NODE_LIST")["nodes"]}
    assert all(t["state"] == "ok" and t["node"] == nodes[healthy.name]["sid"]
               for t in j["tasks"])
    # the broken node failed at most what it held when it noticed (4 slots), and the
    # cluster's quota was cut for each (a slow node may notice before it failed any: then
    # there is nothing to cut, and its quota stays "not limited", 0)
    assert j["job"]["dups"] <= 4, j["job"]
    assert nodes[broken.name]["quota"] > 0 or j["job"]["dups"] == 0, (nodes[broken.name], j["job"])
    log = broken.log()
    assert "cannot prepare working directory" in log
    assert log.count("this node stops taking tasks") == 1
    # it keeps checking; once repaired it takes work again
    work.unlink()
    os.rename(broken.state_dir / "work.gone", work)
    wait_until(lambda: "node healthy again" in broken.log(), scaled(30),
               msg="the repaired node to notice")
    assert broken.alive() and healthy.alive()


# ---------------------------------------------------------------------------
# item 7: hostile-but-valid tasks from a fake server, around a reconnect


class FakeServer:
    """A ROUTER speaking just enough of the node protocol; tasks to hand out are queued
    in self.queue; every RESULT's results are collected in self.results."""

    def __init__(self, port=None):
        import zmq
        self.zmq = zmq
        self.ctx = zmq.Context.instance()
        self.queue, self.results, self.types = [], [], []
        self.bind(port)

    def bind(self, port=None):
        self.sock = self.ctx.socket(self.zmq.ROUTER)
        self.sock.setsockopt(self.zmq.LINGER, 0)
        curve_server(self.sock)
        if port is None:
            self.sock.bind("tcp://127.0.0.1:*")
            self.endpoint = self.sock.getsockopt_string(self.zmq.LAST_ENDPOINT)
        else:
            deadline = time.monotonic() + scaled(20)
            while True:
                try:
                    self.sock.bind(self.endpoint)
                    break
                except self.zmq.ZMQError:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.1)

    def close(self):
        self.sock.close(0)

    def reply(self, ident, req, t, **fields):
        m = {"v": WIRE_VERSION, "t": TYPES[t], "id": req["id"]}
        m.update(fields)
        self.sock.send_multipart([ident, msgpack.packb(m, use_bin_type=True)])

    def serve(self, seconds):
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            if not self.sock.poll(50):
                continue
            ident, data = self.sock.recv_multipart()[:2]
            req = msgpack.unpackb(data, raw=False)
            t = req["t"]
            self.types.append(t)
            if t == TYPES["HELLO"]:
                self.reply(ident, req, "WELCOME", sid="f" * 32, hb_s=1, resumed=False,
                           poll_s=1)
            elif t in (TYPES["TASK_GET"], TYPES["RESULT"]):
                self.results += req.get("results", [])
                give = self.queue[:req["want"]]
                del self.queue[:len(give)]
                r = dict(tasks=give, more=True, wait_s=0 if give else 1)
                if t == TYPES["RESULT"]:
                    r["acked"] = len(req.get("results", []))
                self.reply(ident, req, "TASKS", **r)
            elif t == TYPES["STATUS"]:
                self.reply(ident, req, "STATUS_ACK", cancel=[])
            elif t == TYPES["PSYNC"]:
                self.reply(ident, req, "PSYNC_ACK", procs=[], sync_ms=1000, watchfs=[])
            elif t == TYPES["LEAVE"]:
                self.results += req.get("results", [])
                self.reply(ident, req, "OK")


def _task(idx, **kw):
    t = {"job": 7, "idx": idx, "issue": 1, "limit_s": 60, "complexity": 1.0,
         "argv": ["/bin/echo", "x"], "shell": False, "stdin": b""}
    t.update(kw)
    return t


def test_client_survives_hostile_tasks_around_reconnect(client_factory, workdir):
    srv = FakeServer()
    try:
        (node,) = client_factory(srv.endpoint, 1, sets=dict(CLIENT, **{"client.slots": 4}))
        hostile = [
            _task(0, argv=[]),
            _task(1, argv=["/bin/cat"], limit_s=2 ** 64 - 1, stdin=b"\x00" * 3 + b"z"),
            _task(2 ** 32 - 1, job=2 ** 64 - 1, argv=["/bin/echo", "far"]),
            _task(3, argv=[""]),
        ]
        srv.queue = list(hostile)

        def results_for(idx):
            return [r for r in srv.results if r["idx"] == idx]

        srv_deadline = time.monotonic() + scaled(30)
        while len({r["idx"] for r in srv.results}) < 4 and time.monotonic() < srv_deadline:
            srv.serve(0.5)
        assert len({r["idx"] for r in srv.results}) == 4, srv.results
        # reconnect: the server goes away and comes back on the same port; the same
        # empty-argv task is sent again
        srv.close()
        time.sleep(0.5)
        srv.bind(port=True)
        srv.queue = [_task(0, argv=[], issue=2)]
        srv_deadline = time.monotonic() + scaled(30)
        while len(results_for(0)) < 2 and time.monotonic() < srv_deadline:
            srv.serve(0.5)
        for r in results_for(0) + results_for(3):
            assert r["exit"] == -1 and "error" not in r  # the task's fault, not the node's
            assert b"invalid task" in r["stderr"]
        assert len(results_for(0)) == 2
        (r1,) = results_for(1)
        assert r1["exit"] == 0 and r1["stdout"] == b"\x00\x00\x00z" and not r1["timeout"]
        (r2,) = results_for(2 ** 32 - 1)
        assert r2["job"] == 2 ** 64 - 1 and r2["stdout"] == b"far\n"
        assert node.alive()
        # it keeps working: a normal task after all that
        srv.queue = [_task(9, argv=["/bin/echo", "still here"])]
        srv_deadline = time.monotonic() + scaled(20)
        while not results_for(9) and time.monotonic() < srv_deadline:
            srv.serve(0.5)
        assert results_for(9)[0]["stdout"] == b"still here\n"
        log = node.log()
        assert "out of memory" not in log and "stops taking tasks" not in log
        assert "invalid task: argv is empty" in log
        assert node.alive()
    finally:
        srv.close()


# ---------------------------------------------------------------------------
# item 12: prompt cancel


def test_cancel_kills_running_tasks_promptly(cluster_factory, client_factory):
    # a long heartbeat: the cancel must arrive through the short check-in (node_poll_s)
    cl = cluster_factory(dict(FAST, **{"tasks.heartbeat_s": 120, "tasks.k_wait_dead": 100}))
    client_factory(cl, 1, sets=dict(CLIENT, **{"client.slots": 3}))
    u = cl.connect()
    marker = "313.%d" % (os.getpid() % 1000)
    jid = submit(u, 5, argv=["sleep", marker])
    wait_until(lambda: len(_pids_of("sleep", marker)) == 3, scaled(20), msg="3 sleeps")
    u.ok("CANCEL", expect="OK", job=jid)
    t0 = time.monotonic()
    wait_until(lambda: not _pids_of("sleep", marker), scaled(15), msg="sleeps killed")
    assert time.monotonic() - t0 < scaled(15)
    time.sleep(2)  # give any (wrong) result time to arrive
    j = job_get(u, jid, tasks=True, output=True)
    assert j["job"]["state"] == "cancelled" and j["job"]["done"] == 0
    assert all(t["state"] == "cancelled" for t in j["tasks"]), j["tasks"]


def test_cancel_rides_on_tasks_reply_and_late_result_is_dropped(cluster):
    u = cluster.connect()
    jid = submit(u, 2)
    sid = hello(u, "n")
    t = u.ok("TASK_GET", sid=sid, want=1)["tasks"][0]
    u.ok("CANCEL", expect="OK", job=jid)
    r = u.ok("TASK_GET", expect="TASKS", sid=sid, want=1)
    assert r["cancel"] == [key(t)] and r["tasks"] == []
    assert "cancel" not in u.ok("TASK_GET", sid=sid, want=1)  # sent once
    r = u.ok("RESULT", sid=sid, want=0, results=[dict(key(t), exit=0, stdout=b"late\n")])
    assert r["acked"] == 1
    j = job_get(u, jid, tasks=True, output=True)
    assert j["job"]["done"] == 0
    assert [x["state"] for x in j["tasks"]] == ["cancelled", "cancelled"]
    assert "stdout" not in j["tasks"][0]
