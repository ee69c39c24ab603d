"""System tests of `gridnode job --wait JOB...` (issue 16, the user tool over a long
link): several jobs waited for over ONE connection, the end seen through the cluster's
change feed (EVENTS, events of kind "bag") instead of polling, the worst exit status of
them, a clear error for an unknown id, a role restart ridden out, and a held JOB_WAIT
where the feed is not offered (batch, meta, a user key at a cluster: issue 28).

A small TCP proxy between the tool and the cluster counts the connections and the
requests (plain ZMTP on loopback, so the requests can be read). No test asserts on
speed; counts are bounded by the time the wait took."""

import json
import os
import select
import socket
import subprocess
import threading
import time

import msgpack

from conftest import TYPES, scaled, wait_until

CLIENT_SANDBOX = True   # conftest client_factory: the shipped execution boundary

PLAIN = {"GRIDNODE_PLAIN": "1"}
SETS = {"store.sync": "none", "tasks.min_wait_s": 600}
SD = {"store.sync": "none", "queues.sync_ms": 100, "tasks.heartbeat_s": 1,
      "tasks.idle_wait_s": 1}
CLIENT = {"rpc.timeout_ms": 2000, "rpc.backoff_min_s": 0.2, "rpc.backoff_max_s": 1}
NAMES = {v: k for k, v in dict(TYPES, EVENTS=60).items()}


class Proxy:
    """Forwards tcp://127.0.0.1:PORT to a role's endpoint, counting the connections and
    the requests (message types) the tool sends."""

    def __init__(self, target):
        host, port = target[len("tcp://"):].rsplit(":", 1)
        self.target = (host, int(port))
        self.lsock = socket.socket()
        self.lsock.bind(("127.0.0.1", 0))
        self.lsock.listen(8)
        self.endpoint = "tcp://127.0.0.1:%d" % self.lsock.getsockname()[1]
        self.connections = 0
        self.sent = []  # request type names, in order
        self.lock = threading.Lock()
        self.stop = False
        self.threads = [threading.Thread(target=self._accept, daemon=True)]
        self.threads[0].start()

    def count(self, name):
        with self.lock:
            return self.sent.count(name)

    def _accept(self):
        while not self.stop:
            if not select.select([self.lsock], [], [], 0.1)[0]:
                continue
            down, _ = self.lsock.accept()
            with self.lock:
                self.connections += 1
            t = threading.Thread(target=self._pipe, args=(down,), daemon=True)
            self.threads.append(t)
            t.start()

    def _parse(self, buf):
        """Reads the tool's frames from buf (greeting skipped); returns what is left."""
        while True:
            if len(buf) < 2:
                return buf
            flags, size, head = buf[0], buf[1], 2
            if flags & 2:
                if len(buf) < 9:
                    return buf
                size, head = int.from_bytes(buf[1:9], "big"), 9
            if len(buf) < head + size:
                return buf
            body, buf = buf[head:head + size], buf[head + size:]
            if not flags & 4:  # a message, not a command
                t = msgpack.unpackb(body, raw=False, strict_map_key=False).get("t")
                with self.lock:
                    self.sent.append(NAMES.get(t, t))

    def _pipe(self, down):
        try:
            up = socket.create_connection(self.target)
        except OSError:  # the role is down: as a refusal would, close at once
            down.close()
            return
        buf, greeted = b"", False
        try:
            while not self.stop:
                r = select.select([down, up], [], [], 0.1)[0]
                for s in r:
                    data = s.recv(65536)
                    if not data:
                        return
                    (up if s is down else down).sendall(data)
                    if s is down:
                        buf += data
                        if not greeted and len(buf) >= 64:
                            buf, greeted = buf[64:], True
                        if greeted:
                            buf = self._parse(buf)
        except OSError:
            return
        finally:
            down.close()
            up.close()

    def close(self):
        self.stop = True
        for t in self.threads:
            t.join(5)
        self.lsock.close()


def run_cli(gridnode_bin, *args, env=None, timeout=60):
    e = dict(os.environ, **(env or {}))
    return subprocess.run([gridnode_bin] + [str(a) for a in args], capture_output=True,
                          text=True, timeout=scaled(timeout), stdin=subprocess.DEVNULL, env=e)


def start_cli(gridnode_bin, *args):
    return subprocess.Popen([gridnode_bin] + [str(a) for a in args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL,
                            env=dict(os.environ, **PLAIN))


def hello(rpc, name):
    return rpc.ok("HELLO", expect="WELCOME", client="test 1", node=name, cores=4)["sid"]


def finish(rpc, sid, jobs_exit):
    """Runs every task handed out, as a node would: exit status jobs_exit[job]."""
    ts = rpc.ok("TASK_GET", "TASKS", sid=sid, want=16)["tasks"]
    rpc.ok("RESULT", "TASKS", sid=sid, want=0, results=[
        {"job": t["job"], "idx": t["idx"], "issue": t["issue"], "exit": jobs_exit[t["job"]]}
        for t in ts])
    return len(ts)


def test_wait_for_several_jobs_over_one_connection_following_the_feed(
        cluster_factory, gridnode_bin, monkeypatch):
    monkeypatch.setenv("GRIDNODE_PLAIN", "1")
    cl = cluster_factory(SETS, env=PLAIN)
    u = cl.connect()
    ok = u.ok("SUBMIT", "SUBMITTED", argv=["/bin/true"], ntasks=2)["job"]
    bad = u.ok("SUBMIT", "SUBMITTED", argv=["/bin/false"], ntasks=1)["job"]
    gone = u.ok("SUBMIT", "SUBMITTED", argv=["/bin/true"], ntasks=1)["job"]
    u.ok("CANCEL", "OK", job=gone)
    px = Proxy(cl.endpoint)
    try:
        t0 = time.monotonic()
        p = start_cli(gridnode_bin, "job", "-e", px.endpoint, "--wait", "--summary", "--json",
                      ok, bad, 999999)
        # the tool read the jobs and now waits in a held EVENTS (the feed's end first)
        wait_until(lambda: px.count("EVENTS") >= 2 or p.poll() is not None, scaled(20),
                   msg="the tool waits on the feed")
        assert p.poll() is None, p.communicate()
        assert finish(u, hello(u, "n1"), {ok: 0, bad: 1}) == 3
        out, err = p.communicate(timeout=scaled(30))
        took = time.monotonic() - t0
        # the worst status: an unknown job (1) over a failed one (3)
        assert p.returncode == 1, (out, err)
        assert '"prog":"gridnode job: job 999999","code":5,"error":"NOT_FOUND"' in err, err
        lines = [json.loads(l) for l in out.splitlines()]
        assert [(j["job"]["job"], j["job"]["state"]) for j in lines] == \
            [(ok, "done"), (bad, "failed")], out
        assert "job %d done" % ok in err and "job %d failed" % bad in err, err
        # the final rows came with the ends (kind "bag" events): as JOB_GET gives them
        for j in lines:
            assert j["job"] == u.ok("JOB_GET", "JOB", job=j["job"]["job"])["job"]
        # one connection for the wait and the printing; each job read once at the
        # start and every 5 s for progress; no polling for the end, no read after it
        assert px.connections == 1
        assert px.count("JOB_GET") <= 3 + 2 * (int(took / 5) + 1), (px.sent, took)
        # several jobs: the worst status, as each alone
        for jobs, code in (((ok,), 0), ((ok, bad), 3), ((ok, gone), 5), ((bad, gone), 5)):
            r = run_cli(gridnode_bin, "job", "-e", px.endpoint, "--wait", "--summary", *jobs,
                        env=PLAIN)
            assert r.returncode == code, (jobs, r.returncode, r.stderr)
            assert r.stdout.count("\nsubmitted ") == len(jobs), r.stdout
        assert px.connections == 5
        r = run_cli(gridnode_bin, "job", "-e", px.endpoint, "--wait", 999998, env=PLAIN)
        assert r.returncode == 1 and "job 999998: no job 999998" in r.stderr, r.stderr
        r = run_cli(gridnode_bin, "job", "--help")
        assert "JOB [JOB...]" in r.stdout and "worst" in r.stdout
    finally:
        px.close()


def test_bag_jobs_in_the_feed(cluster_factory):
    """A bag job's shown-state changes are events of kind "bag"; its end carries the
    final JOBS row. Task progress alone makes none."""
    cl = cluster_factory(SETS)
    u = cl.connect()
    first = u.ok("EVENTS", "EVENT_LIST", epoch="")  # a new follower: the feed's end
    assert first["reset"] and first["events"] == []
    jid = u.ok("SUBMIT", "SUBMITTED", argv=["/bin/true"], ntasks=3)["job"]
    sid = hello(u, "n1")
    ts = u.ok("TASK_GET", "TASKS", sid=sid, want=3)["tasks"]
    for t in ts:  # one result per request: progress, then the end
        u.ok("RESULT", "TASKS", sid=sid, want=0, results=[
            {"job": jid, "idx": t["idx"], "issue": t["issue"], "exit": 0}])
    ev = u.ok("EVENTS", "EVENT_LIST", epoch=first["epoch"], **{"from": first["next"]})
    bags = [e for e in ev["events"] if e["kind"] == "bag" and e["job"] == jid]
    assert [e["state"] for e in bags] == ["queued", "running", "done"], bags
    assert "row" not in bags[0] and bags[-1]["done"] == 3 and bags[-1]["finished"] > 0
    assert bags[-1]["row"] == u.ok("JOB_GET", "JOB", job=jid)["job"]


def test_wait_rides_out_a_cluster_restart(cluster_factory, gridnode_bin, monkeypatch):
    monkeypatch.setenv("GRIDNODE_PLAIN", "1")
    cl = cluster_factory(dict(SETS, **{"store.sync": "full"}), env=PLAIN)
    u = cl.connect()
    jid = u.ok("SUBMIT", "SUBMITTED", argv=["/bin/true"], ntasks=1)["job"]
    px = Proxy(cl.endpoint)
    try:
        p = start_cli(gridnode_bin, "job", "-e", px.endpoint, "--wait", "--summary", jid)
        wait_until(lambda: px.count("EVENTS") >= 2 or p.poll() is not None, scaled(20),
                   msg="the tool waits on the feed")
        assert p.poll() is None, p.communicate()
        cl.restart(sig=9, same_port=True, env=PLAIN)  # the held EVENTS is lost with it
        # the tool comes back on a new connection, on the new epoch, and still waits
        wait_until(lambda: px.connections >= 2 and px.count("EVENTS") >= 4
                   or p.poll() is not None, scaled(30), msg="the tool reconnects")
        assert p.poll() is None, p.communicate()
        u = cl.connect()
        finish(u, hello(u, "n1"), {jid: 0})
        out, err = p.communicate(timeout=scaled(30))
        assert p.returncode == 0, (out, err)
        assert "job %d done" % jid in err and "job %d: done" % jid in out, (out, err)
    finally:
        px.close()


def test_wait_polls_roles_without_the_feed(cluster_factory, client_factory, batch_factory,
                                           meta_factory, gridnode_bin):
    cl = cluster_factory(SD)
    client_factory(cl, 1, sets=dict(CLIENT, **{"client.slots": 2}))
    b = batch_factory([cl])
    wait_until(lambda: sum(1 for n in b.rpc(TYPES["NODE_LIST"])["nodes"] if n["active"]) == 1,
               scaled(20), msg="the batch role sees the host")
    m = meta_factory({"a": b})
    for role, ends in ((b, ("done", "failed")), (m, ("done", "failed"))):
        ids = []
        for argv in (["true"], ["sh", "-c", "exit 7"]):
            r = run_cli(gridnode_bin, "submit", "-e", role.endpoint, "--", *argv)
            assert r.returncode == 0, r.stderr
            ids.append(int(r.stdout.split()[2]))
        r = run_cli(gridnode_bin, "job", "-e", role.endpoint, "--wait", "--summary", "--json",
                    *ids, timeout=120)
        # no feed there (EVENTS is TYPE): a held JOB_WAIT, silently; the failed one decides
        assert r.returncode == 3, (role.endpoint, r.returncode, r.stderr)
        assert "TYPE" not in r.stderr, r.stderr
        states = [json.loads(l)["job"]["state"] for l in r.stdout.splitlines()]
        assert states == ["done", "failed"], r.stdout


def test_job_wait_is_held_until_a_job_ends_at_every_level(cluster_factory, client_factory,
                                                          batch_factory, meta_factory):
    # JOB_WAIT (issue 28): the role holds it until one of the jobs it names has ended,
    # then answers with their rows: at a cluster manager (for users, whom its change feed
    # is refused to), a batch role and the grid spool alike. Held 60 s here: a reply
    # naming the job is the end's, not the deadline's (which names none).
    cl = cluster_factory(SD)
    client_factory(cl, 1, sets=dict(CLIENT, **{"client.slots": 2}))
    b = batch_factory([cl])
    wait_until(lambda: sum(1 for n in b.rpc(TYPES["NODE_LIST"])["nodes"] if n["active"]) == 1,
               scaled(20), msg="the batch role sees the host")
    m = meta_factory({"a": b})
    for role in (cl, b, m):
        c = role.client()
        jid = c.ok("SUBMIT", "SUBMITTED", argv=["sleep", "1"], ntasks=1)["job"]
        r = c.call("JOB_WAIT", timeout=scaled(60), jobs=[jid, jid], wait_ms=60000)
        assert r["t"] == TYPES["JOB_ENDED"], (role.endpoint, r)
        assert [(j["job"], j["state"]) for j in r["jobs"]] == [(jid, "done")] * 2, r
        # ended already: answered at once
        r = c.call("JOB_WAIT", jobs=[jid])
        assert [j["job"] for j in r["jobs"]] == [jid], r
        # nothing ends within wait_ms: the answer names none
        long = c.ok("SUBMIT", "SUBMITTED", argv=["sleep", "60"], ntasks=1)["job"]
        r = c.call("JOB_WAIT", timeout=scaled(30), jobs=[long], wait_ms=300)
        assert r["t"] == TYPES["JOB_ENDED"] and r["jobs"] == [], (role.endpoint, r)
        c.ok("CANCEL", job=long)
        c.err("JOB_WAIT", "NOT_FOUND", jobs=[jid, 987654])
        c.err("JOB_WAIT", "FIELD", jobs=list(range(1, 66)))  # 64 at most


def test_the_tool_waits_in_a_held_job_wait_at_a_batch_role(cluster_factory, client_factory,
                                                           batch_factory, gridnode_bin):
    # `gridnode job --wait` at a role without the change feed holds a JOB_WAIT there
    # (seen in the role's held_requests gauge) rather than polling, and returns when the
    # job ends (here: cancelled, exit status 5)
    from test_stats_roles import STATS, metrics
    cl = cluster_factory(SD)
    client_factory(cl, 1, sets=dict(CLIENT, **{"client.slots": 2}))
    b = batch_factory([cl], sets=STATS)
    wait_until(lambda: sum(1 for n in b.rpc(TYPES["NODE_LIST"])["nodes"] if n["active"]) == 1,
               scaled(20), msg="the batch role sees the host")
    jid = b.client().ok("SUBMIT", "SUBMITTED", argv=["sleep", "60"], ntasks=1)["job"]
    held = lambda: metrics(b, "gridnode_batch_")[0][("gridnode_batch_held_requests", "")]
    assert held() == 0
    p = subprocess.Popen([gridnode_bin, "job", "-e", b.endpoint, "--wait", str(jid)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         stdin=subprocess.DEVNULL)
    try:
        wait_until(lambda: held() == 1 or p.poll() is not None, scaled(20),
                   msg="the tool's JOB_WAIT held at the batch role")
        assert p.poll() is None, p.communicate()
        b.client().ok("CANCEL", job=jid)
        out, err = p.communicate(timeout=scaled(30))
        assert p.returncode == 5, (out, err)
        # answered, not left to its deadline (the page is made every stats.interval_s)
        wait_until(lambda: held() == 0, scaled(10), msg="nothing held after the end")
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()


def test_held_waits_sharing_jobs_are_each_answered_by_their_first_end(
        cluster_factory, batch_factory, meta_factory):
    # The role indexes its held JOB_WAITs by job and, after a commit, looks only at the
    # jobs changed in it (daemon/endwait.c). Waits sharing jobs, and a job named twice:
    # each wait is answered once, by the end of the first of its jobs, naming only that
    # one (as often as it names it), at every level. No node: the jobs stay queued
    # until cancelled.
    from conftest import Rpc
    cl = cluster_factory(SD)
    b = batch_factory([cl])
    m = meta_factory({"a": b})
    for role in (cl, b, m):
        c = role.client()
        jobs = [c.ok("SUBMIT", "SUBMITTED", argv=["true"], ntasks=1)["job"] for _ in range(6)]
        sets = [[jobs[i], jobs[(i + k) % 6]] for k in (0, 1, 3) for i in range(6)]
        tools = []
        for s in sets:
            r = Rpc(role.endpoint, timeout=scaled(30))
            r.sock.send(r.message("JOB_WAIT", dict(jobs=s, wait_ms=60000))[1])
            r.ok("JOB_GET", job=s[0])  # same peer, in order: the JOB_WAIT is held now
            tools.append(r)
        done = set()
        for e in jobs:
            c.ok("CANCEL", job=e)
            for r, s in zip(tools, sets):
                if e in s and not done & set(s):
                    got = Rpc.decode(r.recv_raw(scaled(30))[-1])
                    assert got["t"] == TYPES["JOB_ENDED"], (role.endpoint, s, got)
                    assert [(j["job"], j["state"]) for j in got["jobs"]] == \
                        [(e, "cancelled")] * s.count(e), (role.endpoint, s, got)
            done.add(e)
        assert not any(r.sock.poll(0) for r in tools), role.endpoint  # answered once each
