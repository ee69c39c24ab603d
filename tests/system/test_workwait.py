"""An idle node told of new work at once (issue 26 evidence 8, docs/wire.md 5.7): a
WORK_WAIT is held at the cluster until a job is submitted (WORK_WAKE work=true) or its
wait_ms passes (work=false); only nodes (and administrators) may send it; a real idle
client keeps one held and asks for tasks as soon as a job comes, not at its next poll."""

from conftest import FAST_CLIENT, FAST_CLUSTER, Rpc, scaled, wait_until
from test_authz import Keys

WORK_WAIT, WORK_WAKE = 152, 153


def send(rpc, t, **fields):
    m, data = rpc.message(t, fields)
    rpc.sock.send(data)
    return m["id"]


def reply_to(rpc, rid, timeout):
    while True:
        r = Rpc.decode(rpc.recv_raw(timeout)[-1])
        if r.get("id") == rid:
            return r


def test_a_held_wait_is_answered_by_a_submission_or_its_deadline(cluster):
    w = cluster.connect()
    rid = send(w, WORK_WAIT, wait_ms=60000)
    # held: nothing comes back before a job does (a slow machine only delays replies)
    assert not w.sock.poll(300)
    cluster.client().ok("SUBMIT", "SUBMITTED", argv=["true"], ntasks=1)
    r = reply_to(w, rid, scaled(10))
    assert r["t"] == WORK_WAKE and r["work"] is True, r
    rid = send(w, WORK_WAIT, wait_ms=50)  # nothing submitted: its deadline answers it
    r = reply_to(w, rid, scaled(10))
    assert r["t"] == WORK_WAKE and r["work"] is False, r
    # a second wait from the same peer answers the first (one held per peer)
    first = send(w, WORK_WAIT, wait_ms=60000)
    second = send(w, WORK_WAIT, wait_ms=60000)
    r = reply_to(w, first, scaled(10))
    assert r["t"] == WORK_WAKE and r["work"] is False, r
    cluster.client().ok("SUBMIT", "SUBMITTED", argv=["true"], ntasks=1)
    r = reply_to(w, second, scaled(10))
    assert r["work"] is True, r


def test_only_nodes_wait_and_the_wait_is_bounded(cluster_factory, tmp_path):
    keys = Keys(tmp_path / "keys").add("alice", "user").add("n1", "node")
    cl = cluster_factory(keys.sets())
    r = keys.rpc(cl.endpoint, "alice").err(WORK_WAIT, "DENIED", wait_ms=1000)
    assert "nodes" in r["msg"], r
    n = keys.rpc(cl.endpoint, "n1")
    assert n.err(WORK_WAIT, "FIELD", wait_ms=60001)
    assert n.ok(WORK_WAIT, wait_ms=10)["work"] is False


def test_an_idle_client_asks_for_work_when_a_job_comes(cluster_factory, client_factory):
    # a poll interval far beyond the test's waits: only the wake can bring a task
    cl = cluster_factory(dict(FAST_CLUSTER, **{"tasks.idle_wait_s": 3600}))
    (node,) = client_factory(cl, sets=dict(FAST_CLIENT, **{"client.log_level": "debug"}))
    wait_until(lambda: "0 task(s) received" in node.log_path.read_text(), scaled(20),
               msg="the node's first poll (then it waits an hour)")
    jobs = []

    def submit_and_woken():  # a job submitted before its wait is held waits for the next
        jobs.append(cl.client().ok("SUBMIT", "SUBMITTED", argv=["true"], ntasks=1)["job"])
        return "a job was submitted; asking for work now" in node.log_path.read_text()

    wait_until(submit_and_woken, scaled(30), interval=0.5, msg="the node woken by a job")
    wait_until(lambda: any(cl.client().ok("JOB_GET", "JOB", job=j)["job"]["state"] == "done"
                           for j in jobs), scaled(30), msg="a job done")
