"""Result validation end to end (issue #13, docs/validation.md): replication with a
quorum against real `gridnode client` processes and fault-injecting nodes
(faultnode.py, written from docs/wire.md), application validators (and ones that
crash or hang), known-answer spot checks with backtracking, adaptive replication,
distinct addresses, and kill -9 of the cluster between the results of one quorum.
"""

import subprocess
import threading
import time

import pytest

from conftest import FAST_CLIENT as CLIENT, FAST_CLUSTER as FAST, scaled, wait_until
from faultnode import FaultNode
from pynode import PyNode

ECHO = ["sh", "-c", "echo ok {i}"]


def submit(cl, argv, ntasks, **extra):
    return cl.client().ok("SUBMIT", "SUBMITTED", argv=argv, ntasks=ntasks, **extra)["job"]


def job(cl, jid):
    return cl.client().ok("JOB_GET", "JOB", job=jid, tasks=True, output=True, count=100000)


def state(cl, jid):
    return cl.client().ok("JOB_GET", "JOB", job=jid)["job"]["state"]


def wait_state(cl, jid, want=("done",), timeout=60):
    wait_until(lambda: state(cl, jid) in want, scaled(timeout), interval=0.2,
               msg="job %d to be %s" % (jid, want))


def nodes(cl):
    return {n["node"]: n for n in cl.client().ok("NODE_LIST", "NODES")["nodes"]}


def check_correct(cl, jid, n):
    """Every task of jid is ok with the right answer; returns the task maps."""
    tasks = job(cl, jid)["tasks"]
    assert len(tasks) == n
    for t in tasks:
        assert t["state"] == "ok", t
        assert t["stdout"] == b"ok %d\n" % t["idx"], t
    return tasks


def test_quorum_rejects_a_faulty_node(cluster_factory, client_factory):
    cl = cluster_factory(FAST)
    jid = submit(cl, ECHO, 6, quorum=2)
    bad = FaultNode(cl.endpoint, name="bad", rate=1.0, mode="independent")
    bad.hello()
    assert len(bad.run(max_tasks=3, deadline_s=scaled(10))) == 3  # first copies: wrong
    client_factory(cl, 2, sets=CLIENT)
    wait_state(cl, jid)
    tasks = check_correct(cl, jid, 6)
    bad_sid = nodes(cl)["bad"]["sid"]
    rejected = [r for t in tasks for r in t["results"] if r["node"] == bad_sid]
    assert len(rejected) == 3
    assert all(r["status"] == "rejected" and "disagrees" in r["why"] for r in rejected)
    for t in tasks:  # every result kept, the canonical one first among the agreeing
        st = sorted(r["status"] for r in t["results"])
        assert st.count("canonical") == 1 and st.count("agrees") >= 1, t
    ns = nodes(cl)
    assert ns["bad"]["invalid"] == 3 and ns["bad"]["consec_valid"] == 0
    assert sum(n["valid"] for k, n in ns.items() if k != "bad") == 12


@pytest.mark.slow  # ~60 s under ASan; the plain run covers it
def test_single_result_validator_and_distinct_addresses(cluster_factory, workdir):
    cl = cluster_factory(FAST)
    check = ('for n in $(cat candidates); do '
             'if grep -q "^ok" $n.stdout; then echo "$n good"; else echo "$n invalid"; fi; done')
    jid = submit(cl, ECHO, 2, validator=check)
    bad = FaultNode(cl.endpoint, name="bad", rate=1.0)
    good = PyNode(cl.endpoint, name="good")
    bad.hello()
    good.hello()
    bad.run(max_tasks=2, deadline_s=scaled(10))
    time.sleep(0.5)
    good.run(max_tasks=4, deadline_s=scaled(20), until_empty=False)
    wait_state(cl, jid, timeout=30)
    for t in check_correct(cl, jid, 2):
        why = {r["node"]: r for r in t["results"]}
        assert why[bad.sid]["why"] == "the validator found it invalid"
    # distinct=address: both nodes share 127.0.0.1, so the second copy waits
    jid2 = submit(cl, ECHO, 1, quorum=2, distinct="address")
    assert len(good.task_get(1)["tasks"]) == 1
    assert bad.task_get(1)["tasks"] == []
    assert state(cl, jid2) == "running"


def test_validator_crash_and_hang_fail_the_task_and_the_cluster_serves(cluster_factory):
    cl = cluster_factory(dict(FAST, **{"validation.validator_timeout_s": 1,
                                       "validation.validator_attempts": 2}))
    crash = submit(cl, ECHO, 1, validator="kill -SEGV $$")
    hang = submit(cl, ECHO, 1, validator="sleep 1000")
    node = PyNode(cl.endpoint, name="n1")
    node.hello()
    node.run(max_tasks=2, deadline_s=scaled(10))
    plain = submit(cl, ECHO, 3)  # dispatch goes on while validators fail
    node.run(max_tasks=3, deadline_s=scaled(10))
    wait_state(cl, plain)
    for jid, text in ((crash, "killed by signal 11"), (hang, "no verdict within 1 s")):
        wait_state(cl, jid, ("failed",), timeout=30)
        t = job(cl, jid)["tasks"][0]
        assert t["state"] == "failed"
        assert "validator failed too often" in t["error"] and text in t["error"], t
    assert "validator failed" in cl.log()


def _run_until(node, pred, deadline_s):
    end = time.monotonic() + deadline_s
    while time.monotonic() < end and not pred():
        node.run(max_tasks=1, deadline_s=2, until_empty=True)


def test_spot_check_failure_backtracks_colluders(cluster_factory, client_factory, workdir):
    cl = cluster_factory(dict(FAST, **{"validation.spot_fraction": 0.5,
                                       "validation.redeem_spots": 2}))
    jid = submit(cl, ECHO, 4, quorum=2)
    c1 = FaultNode(cl.endpoint, name="c1", rate=1.0, mode="colluding")
    c2 = FaultNode(cl.endpoint, name="c2", rate=1.0, mode="colluding")
    c1.hello()
    c2.hello()
    for _ in range(4):  # the colluders form a false quorum on every task
        c1.run(max_tasks=1, deadline_s=scaled(5))
        c2.run(max_tasks=1, deadline_s=scaled(5))
    wait_state(cl, jid, timeout=20)
    assert all(t["stdout"].startswith(b"colluded") for t in job(cl, jid)["tasks"])
    for i in range(4):
        (workdir / ("known%d" % i)).write_bytes(b"k %d\n" % i)
    r = subprocess.run([cl.binary, "submit", "-e", cl.endpoint, "--known",
                        str(workdir / "known{i}"), "-n", "4", "--shell", "--", "echo k {i}"],
                       capture_output=True, text=True, timeout=scaled(30))
    assert r.returncode == 0, r.stderr
    for c in (c1, c2):  # spot checks are half of their work now: both fail one
        _run_until(c, lambda c=c: nodes(cl)[c.name]["spot_fail"] > 0, scaled(30))
    ns = nodes(cl)
    assert ns["c1"]["spot_fail"] >= 1 and ns["c2"]["spot_fail"] >= 1
    assert ns["c1"]["probation"] == 2
    assert "re-verified" in cl.log()
    assert state(cl, jid) == "running"  # the false answers were taken back
    client_factory(cl, 2, sets=CLIENT)
    wait_state(cl, jid, timeout=60)
    tasks = check_correct(cl, jid, 4)
    whys = [r["why"] for t in tasks for r in t["results"]]
    assert whys.count("its node failed a spot check afterwards (re-verified)") == 8
    ns = nodes(cl)
    honest = [n for k, n in ns.items() if k not in ("c1", "c2")]
    assert sum(n["spot_pass"] for n in honest) >= 0  # honest nodes may get spot checks too
    assert all(n["spot_fail"] == 0 for n in honest)


def test_adaptive_replication_accepts_trusted_nodes_alone(cluster_factory):
    cl = cluster_factory(dict(FAST, **{"validation.trust_after": 2,
                                       "validation.check_min": 0}))
    jid = submit(cl, ECHO, 30, adaptive=True)
    a = PyNode(cl.endpoint, name="a")
    b = PyNode(cl.endpoint, name="b")
    a.hello()
    b.hello()
    end = time.monotonic() + scaled(60)
    while state(cl, jid) != "done" and time.monotonic() < end:
        a.run(max_tasks=1, deadline_s=2)
        b.run(max_tasks=1, deadline_s=2)
    tasks = check_correct(cl, jid, 30)
    counts = [len(t["results"]) for t in tasks]
    assert counts[0] == 2  # new nodes: always replicated
    assert counts.count(1) >= 5, counts  # trusted: accepted alone, more often over time
    assert sum(counts) < 2 * 30


def test_cluster_killed_between_results_of_one_quorum(cluster_factory):
    cl = cluster_factory(dict(FAST, **{"store.sync": "full"}))
    jid = submit(cl, ECHO, 1, quorum=2)
    a = PyNode(cl.endpoint, name="a")
    b = PyNode(cl.endpoint, name="b")
    a.hello()
    b.hello()
    ta = a.task_get(1)["tasks"]
    tb = b.task_get(1)["tasks"]
    assert len(ta) == 1 and len(tb) == 1 and ta[0]["issue"] != tb[0]["issue"]
    a.result([a.run_task(ta[0])], want=0)  # acknowledged: must survive kill -9
    cl.restart()
    assert state(cl, jid) == "running"
    pend = job(cl, jid)["tasks"][0]["results"]
    assert [r["status"] for r in pend] == ["pending"]
    b.result([b.run_task(tb[0])], want=0)  # b's copy, issued before the restart
    wait_state(cl, jid, timeout=20)
    t = check_correct(cl, jid, 1)[0]
    assert sorted(r["status"] for r in t["results"]) == ["agrees", "canonical"]


def test_bad_validation_fields_are_refused_and_nothing_else_changes(cluster):
    c = cluster.client()
    for fields, text in (({"quorum": 0}, "at least 1"),
                         ({"quorum": 3, "max_results": 2}, "max_results"),
                         ({"distinct": "planet"}, "distinct"),
                         ({"known": [{"exit": 0}]}, "one answer per task"),
                         ({"validator": ""}, "validator"),
                         ({"adaptive": True, "quorum": 1}, "quorum of 2")):
        r = c.err("SUBMIT", "INVALID", argv=["true"], ntasks=2, **fields)
        assert text in r["msg"], (fields, r)
    c.err("SUBMIT", "FIELD", argv=["true"], ntasks=1, quorum=33)  # over the descriptor's cap
    jid = submit(cluster, ["true"], 1, quorum=2)
    assert state(cluster, jid) == "queued"
    assert cluster.client().ok("JOB_LIST", "JOBS")["jobs"][-1]["job"] == jid == 1


def test_results_for_copies_never_handed_out_do_not_vote(cluster):
    jid = submit(cluster, ECHO, 1, quorum=2)
    a = PyNode(cluster.endpoint, name="a")
    forger = PyNode(cluster.endpoint, name="forger")
    a.hello()
    forger.hello()
    task = a.task_get(1)["tasks"][0]
    forged = {"job": jid, "idx": 0, "exit": 0, "stdout": b"ok 0\n"}
    for issue in (1, 2, 3):  # the copy a holds, the queued one, one never made
        r = forger.result([dict(forged, issue=issue)], want=0)
        assert r["acked"] == 1
    a.result([a.run_task(task)], want=0)
    assert state(cluster, jid) == "running"  # a alone is not a quorum
    res = job(cluster, jid)["tasks"][0]["results"]
    assert [r["node"] for r in res] == [a.sid]
    assert "was not handed to this session" in cluster.log()
