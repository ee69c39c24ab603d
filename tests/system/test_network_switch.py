"""The per-job network switch (issue 23: "network off unless the job asks for it";
docs/security.md "Execution boundary", docs/wire.md 6.1 "network"): `gridnode submit
--network` at the cluster, through a batch role and through the grid spool. The oracle
is a TCP listener of this test on 127.0.0.1: a task of a job without the network cannot
reach it (it runs in the client's empty network namespace), a task of a job with it
connects and sends its tag. Clients run the sandbox as shipped; real processes on
loopback, every wait bounded, the listener closed at the end.
"""

import json
import os
import signal
import socket
import subprocess
import threading

import pytest

from conftest import (FAST_CLIENT, FAST_CLUSTER, TYPES, Rpc, scaled, wait_until)

CLIENT_SANDBOX = True  # conftest client_factory: the shipped execution boundary

T = dict(TYPES, PSYNC=18, PSYNC_ACK=19, PSUBMIT=39)
SD = dict(FAST_CLUSTER, **{"queues.sync_ms": 100})
CLIENT = dict(FAST_CLIENT, **{"client.slots": 2})

# the task: connect to the listener and send a tag; says on stdout what happened
CONNECT = ("import socket, sys\n"
           "try:\n"
           "    s = socket.create_connection(('127.0.0.1', int(sys.argv[1])), timeout=5)\n"
           "    s.sendall(sys.argv[2].encode()); s.close(); print('CONNECTED')\n"
           "except OSError as e:\n"
           "    print('NOCONN', e)\n")


class Listener:
    """A TCP listener on 127.0.0.1 recording the tag each connection sends."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.tags = set()
        self.stop = False
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        while not self.stop:
            try:
                c, _ = self.sock.accept()
            except (socket.timeout, OSError):
                continue
            with c:
                c.settimeout(5)
                data = b""
                try:
                    while len(data) < 256:
                        b = c.recv(256)
                        if not b:
                            break
                        data += b
                except OSError:
                    pass
                self.tags.add(data.decode(errors="replace"))

    def close(self):
        self.stop = True
        self.thread.join(scaled(5))
        self.sock.close()


@pytest.fixture
def listener():
    lst = Listener()
    yield lst
    lst.close()


@pytest.fixture
def grid(cluster_factory, client_factory, batch_factory, meta_factory):
    """A cluster with one sandboxed client, a batch role over it and a spool over that."""
    cl = cluster_factory(SD)
    (node,) = client_factory(cl, 1, sets=CLIENT)
    wait_until(lambda: "sandbox:" in node.log(), scaled(20), msg="the sandbox's start")
    b = batch_factory([cl])
    wait_until(lambda: any(n["active"] for n in b.rpc("NODE_LIST")["nodes"]), scaled(30),
               msg="the batch role sees the host")
    m = meta_factory({"s": b})
    return {"cluster": cl, "batch": b, "meta": m, "node": node}


def run(gridnode_bin, *args, timeout=90):
    return subprocess.run([gridnode_bin] + [str(a) for a in args], capture_output=True,
                          text=True, timeout=scaled(timeout), stdin=subprocess.DEVNULL)


def submit(gridnode_bin, role, port, tag, network):
    """Submits the connecting task to role (--wait: returns once the job ended)."""
    r = run(gridnode_bin, "submit", "-e", role.endpoint, "--json", "--wait",
            *(["--network"] if network else []), "--",
            "/usr/bin/python3", "-c", CONNECT, port, tag, timeout=120)
    assert r.returncode == 0, (role.name, r.stdout, r.stderr)
    return json.loads(r.stdout.splitlines()[0])["job"]


def shown(gridnode_bin, role, jid):
    """The job as `gridnode job --json` shows it, and its text view."""
    j = run(gridnode_bin, "job", "-e", role.endpoint, jid, "--json")
    t = run(gridnode_bin, "job", "-e", role.endpoint, jid)
    assert j.returncode == 0 and t.returncode == 0, (j.stderr, t.stderr)
    return json.loads(j.stdout)["job"], t.stdout


def test_network_at_the_cluster(grid, listener, gridnode_bin):
    """A bag task without --network cannot reach the host's 127.0.0.1, one with it
    can; the task's own output says so, and the job shows its switch."""
    cl = grid["cluster"]
    off = submit(gridnode_bin, cl, listener.port, "cluster-off", False)
    on = submit(gridnode_bin, cl, listener.port, "cluster-on", True)
    wait_until(lambda: "cluster-on" in listener.tags, scaled(10), msg="the connection")
    assert "cluster-off" not in listener.tags, listener.tags

    def out(jid):
        r = cl.client().ok("JOB_GET", "JOB", job=jid, tasks=True, output=True)
        return r["tasks"][0]["stdout"].decode()
    assert out(off).startswith("NOCONN"), out(off)
    assert out(on).startswith("CONNECTED"), out(on)
    for jid, want in ((off, False), (on, True)):
        j, text = shown(gridnode_bin, cl, jid)
        assert j["network"] is want, j
        assert ("network: on" in text) is want, text
    # stored with the job: kept over a kill -9
    cl.restart(signal.SIGKILL)
    assert cl.client().ok("JOB_GET", "JOB", job=on)["job"]["network"] is True
    assert cl.client().ok("JOB_GET", "JOB", job=off)["job"]["network"] is False


@pytest.mark.parametrize("via", ["batch", "meta"])
def test_network_on_through_batch_and_meta(grid, listener, gridnode_bin, via):
    """--network given to the batch role or the grid spool reaches the node: the task
    connects; the role shows the switch with the job."""
    role = grid[via]
    jid = submit(gridnode_bin, role, listener.port, via + "-on", True)
    wait_until(lambda: via + "-on" in listener.tags, scaled(20), msg="the connection")
    j, text = shown(gridnode_bin, role, jid)
    assert j["network"] is True and "network: on" in text, (j, text)
    if via == "batch":  # Maui's checkjob too, and the element's job at the cluster
        assert role.client().ok("CHECKJOB", "JOBCHECK", job=jid)["job"]["network"] is True
        el = role.rpc("JOB_GET", job=jid, tasks=True)["tasks"][0]
        cj = grid["cluster"].client().ok("JOB_GET", "JOB", job=el["cjob"])["job"]
        assert cj["network"] is True and cj["procs"] == 1, cj
    role.restart(signal.SIGKILL)  # stored with the job: kept over a kill -9
    assert role.client().ok("JOB_GET", "JOB", job=jid)["job"]["network"] is True


@pytest.mark.parametrize("via", ["batch", "meta"])
def test_network_off_through_batch_and_meta(grid, listener, gridnode_bin, via):
    """Without --network a task started through the batch role or the spool (a
    one-process job at the cluster) cannot reach the host's 127.0.0.1 either."""
    role = grid[via]
    jid = submit(gridnode_bin, role, listener.port, via + "-off", False)
    j, _ = shown(gridnode_bin, role, jid)
    assert j["network"] is False, j
    assert via + "-off" not in listener.tags, listener.tags


def test_psync_ack_says_network(cluster_factory):
    """The cluster tells a node, in each PSYNC_ACK "run" command, whether the process
    keeps the network: a one-process job (each element of a batch role's bag job is
    one) only with --network, a job of several processes always."""
    cl = cluster_factory(SD)
    node = Rpc(cl.endpoint, timeout=scaled(10))
    w = node.ok("HELLO", "WELCOME", client="py", node="n1", cores=4, procs=True)
    sid = w["sid"]
    jobs = {}
    for name, kw in (("one", {}), ("one-net", {"network": True}), ("two", {"procs": 2})):
        r = cl.client().ok("PSUBMIT", "SUBMITTED", argv=["true"], procs=kw.get("procs", 1),
                           hosts=["n1"] * kw.get("procs", 1),
                           **{k: v for k, v in kw.items() if k != "procs"})
        jobs[r["job"]] = name
    want = {"one": False, "one-net": True, "two": True}
    seen = {}

    def ack():
        r = node.ok("PSYNC", "PSYNC_ACK", sid=sid, procs=[])
        for p in r["procs"]:
            if p["want"] == "run" and p["job"] in jobs:
                seen[jobs[p["job"]]] = p["network"]
        return set(seen) == set(want)
    wait_until(ack, scaled(20), msg="run commands of the three jobs")
    assert seen == want, seen
    j = cl.client().ok("JOB_GET", "JOB", job=[k for k, v in jobs.items() if v == "one-net"][0])
    assert j["job"]["network"] is True


def test_non_bool_network_is_refused(grid):
    """A `network` that is not a boolean is refused by every role, naming the field."""
    for role in (grid["cluster"], grid["batch"], grid["meta"]):
        for t, extra in (("SUBMIT", {"ntasks": 1}), ("PSUBMIT", {"procs": 1})):
            e = role.connect().err(t, "FIELD", argv=["true"], network="yes", **extra)
            assert "network" in e["msg"], (role.name, t, e)


def test_old_job_records_load_without_network(cluster_factory, gridnode_bin):
    """Job records written before the switch (no "network" key) load as network off:
    the cluster writes the key only when it is set, so a record of a job without it is
    one such record; after a kill -9 both kinds load and show what they were."""
    cl = cluster_factory(SD)
    off = cl.client().ok("SUBMIT", "SUBMITTED", argv=["true"], ntasks=1)["job"]
    on = cl.client().ok("SUBMIT", "SUBMITTED", argv=["true"], ntasks=1, network=True)["job"]
    poff = cl.client().ok("PSUBMIT", "SUBMITTED", argv=["true"], procs=1, wait=True)["job"]
    cl.kill(signal.SIGKILL)
    d = run(gridnode_bin, "dump", cl.state_dir, "--json")
    assert d.returncode == 0, d.stderr
    recs = [json.loads(x) for x in d.stdout.splitlines()]
    text = json.dumps(recs)
    assert text.count('"network"') == 1, text  # only the job that asked has the key
    cl.restart(same_port=True)
    for jid, want in ((off, False), (on, True), (poff, False)):
        assert cl.client().ok("JOB_GET", "JOB", job=jid)["job"]["network"] is want
    assert "malformed" not in cl.log()


def test_network_survives_a_move_to_another_site(cluster_factory, client_factory,
                                                 batch_factory, meta_factory):
    """The spool moves a waiting job to a site that frees up: the request it sends there
    still asks for the network, and that site's cluster runs the element with it."""
    def site(name):
        cl = cluster_factory(SD, name="cl_" + name)
        client_factory(cl, 1, sets=dict(CLIENT, **{"client.slots": 1}), prefix=name + "n")
        b = batch_factory([cl], name="b_" + name)
        wait_until(lambda: any(n["active"] for n in b.rpc("NODE_LIST")["nodes"]),
                   scaled(30), msg="site %s sees its host" % name)
        return b
    a, b = site("a"), site("b")
    a.client().ok("PSUBMIT", "SUBMITTED", argv=["sleep 120"], shell=True, procs=1,
                  limit_s=120)
    lb = b.client().ok("PSUBMIT", "SUBMITTED", argv=["sleep 300"], shell=True, procs=1,
                       limit_s=300)["job"]
    m = meta_factory({"a": a, "b": b}, sets={"meta.reeval_s": 1, "meta.move_margin_s": 30})
    wait_until(lambda: all(s["known"] for s in m.rpc("SITE_INFO")["sites"]), scaled(20),
               msg="sites known")
    jid = m.client().ok("SUBMIT", "SUBMITTED", argv=["sleep 1"], shell=True, ntasks=1,
                        limit_s=30, network=True)["job"]

    def gstate(states):
        return wait_until(lambda: (lambda j: j if j["gstate"] in states else None)(
            m.rpc("JOB_GET", job=jid)["job"]), scaled(90), msg="job in %s" % (states,))
    j = gstate(("placed",))
    assert j["site"] == "a" and j["network"] is True, j
    assert a.rpc("JOB_GET", job=j["site_job"])["job"]["network"] is True
    b.client().ok("CANCEL", "OK", job=lb)  # b frees up ~120 s earlier: the job moves
    j = gstate(("done",))
    assert j["site"] == "b" and "moved" in j["reason"] and j["network"] is True, j
    sj = b.rpc("JOB_GET", job=j["site_job"], tasks=True)
    assert sj["job"]["network"] is True, sj
    el = sj["tasks"][0]
    cj = b.clusters[0].rpc("JOB_GET", job=el["cjob"])["job"]
    assert cj["network"] is True and cj["procs"] == 1, cj
