"""System tests of the live batch role (issue 9): `gridnode batch` scheduling real
jobs onto real cluster managers with real clients on loopback. Every wait is bounded
and generous; no test asserts on speed."""

import signal
import subprocess

import pytest

from conftest import TYPES, scaled, wait_until

T = dict(TYPES, PSUBMIT=39, NODE_LIST=37, NODES=38, SD_INFO=42)
SD = {"store.sync": "none", "queues.sync_ms": 100, "tasks.heartbeat_s": 1,
      "tasks.idle_wait_s": 1}
CLIENT = {"rpc.timeout_ms": 2000, "rpc.backoff_min_s": 0.2, "rpc.backoff_max_s": 1}


def grid(cluster_factory, client_factory, batch_factory, nodes=1, slots=2, bsets=None):
    cl = cluster_factory(SD)
    client_factory(cl, nodes, sets=dict(CLIENT, **{"client.slots": slots}))
    b = batch_factory([cl], sets=dict({"batch.log_level": "debug"}, **(bsets or {})))
    wait_until(lambda: sum(1 for n in b.rpc(T["NODE_LIST"])["nodes"] if n["active"]) == nodes,
               scaled(20), msg="the batch role sees the hosts")
    return cl, b


def job(b, jid, tasks=False):
    return b.rpc(T["JOB_GET"], job=jid, tasks=tasks)


def wait_state(b, jid, states, timeout=30):
    wait_until(lambda: job(b, jid)["job"]["state"] in states, scaled(timeout),
               msg="job %d in %s" % (jid, states))
    return job(b, jid, tasks=True)


def runs(path):
    return path.read_text().split() if path.exists() else []


def test_task_array_runs_on_the_cluster_once_each(cluster_factory, client_factory,
                                                  batch_factory, workdir, gridnode_bin):
    cl, b = grid(cluster_factory, client_factory, batch_factory)
    out = workdir / "runs"
    # the unchanged user tool, pointed at the batch role
    r = subprocess.run([gridnode_bin, "submit", "-e", b.endpoint, "-n", "5", "--", "sh", "-c",
                        "echo {i} >> %s" % out], capture_output=True, text=True,
                       timeout=scaled(20))
    assert r.returncode == 0, r.stderr
    jid = int(r.stdout.split()[2])
    j = wait_state(b, jid, ("done", "failed"))
    assert j["job"]["state"] == "done" and j["job"]["done"] == 5
    assert sorted(runs(out)) == ["0", "1", "2", "3", "4"]
    for t in j["tasks"]:
        assert t["state"] == "ok" and t["node"] == "node1" and t["cjob"] > 0
    # the cluster ran them as parallel jobs placed on the named host, keyed by the batch
    cj = cl.rpc(T["JOB_GET"], job=j["tasks"][0]["cjob"])["job"]
    assert cj["hosts"] == ["node1"] and cj["state"] == "done"
    r = subprocess.run([gridnode_bin, "jobs", "-e", b.endpoint], capture_output=True,
                       text=True, timeout=scaled(20))
    assert r.returncode == 0 and "done" in r.stdout


def test_parallel_job_and_cancel(cluster_factory, client_factory, batch_factory, workdir):
    cl, b = grid(cluster_factory, client_factory, batch_factory, nodes=2, slots=2)
    big = b.rpc(T["PSUBMIT"], argv=["sleep 30"], shell=True, procs=4, limit_s=60)["job"]
    j = wait_state(b, big, ("running",))["job"]
    assert j["kind"] == "parallel" and sorted(j["hosts"]) == ["node1", "node1", "node2", "node2"]
    # a second one cannot fit: pending, then cancelled while pending
    small = b.rpc(T["PSUBMIT"], argv=["true"], shell=True, procs=1, limit_s=10)["job"]
    assert job(b, small)["job"]["state"] == "queued"
    b.client().ok(T["CANCEL"], job=small)
    assert job(b, small)["job"]["state"] == "cancelled"
    # cancel the running one: its processes end on the cluster too
    cj = wait_state(b, big, ("running",))
    b.client().ok(T["CANCEL"], job=big)
    wait_until(lambda: cl.rpc(T["JOB_LIST"])["jobs"][-1]["state"] == "cancelled", scaled(20),
               msg="cluster job cancelled")
    assert cj["job"]["state"] == "running"
    b.client().err(T["CANCEL"], "STATE", job=big)   # STATE: already cancelled
    b.client().err(T["CANCEL"], "NOT_FOUND", job=999)   # NOT_FOUND


def test_bad_requests_get_clear_errors(cluster_factory, client_factory, batch_factory):
    cl, b = grid(cluster_factory, client_factory, batch_factory)
    e = b.client().err(T["SUBMIT"], "INVALID", argv=[""], ntasks=1)
    assert "argv[0]" in e["msg"]
    e = b.client().err(T["SUBMIT"], "INVALID", argv=["true"], ntasks=0)
    assert "ntasks" in e["msg"]
    e = b.client().err(T["PSUBMIT"], "INVALID", argv=["true"], procs=1, **{"class": "nosuch"})
    assert "class" in e["msg"]
    e = b.client().err(T["SUBMIT"], "INVALID", argv=["true"], ntasks=2, stdin=[b"a", b"b"])
    assert "stdin" in e["msg"]
    e = b.client().err(T["SD_INFO"], "TYPE")
    assert "batch role" in e["msg"]
    assert b.alive()


def test_kill9_of_the_batch_role_loses_nothing_and_runs_nothing_twice(
        cluster_factory, client_factory, batch_factory, workdir):
    cl, b = grid(cluster_factory, client_factory, batch_factory, nodes=2, slots=2)
    out = workdir / "runs"
    jid = b.rpc(T["SUBMIT"], argv=["sh", "-c", "echo {i} >> %s; sleep 0.5" % out],
                ntasks=12, limit_s=60, key="k1")["job"]
    wait_until(lambda: len(runs(out)) >= 3, scaled(30), msg="some tasks ran")
    b.kill(signal.SIGKILL)
    b.restart()
    # the retry of the acknowledged submission names the same job
    again = b.rpc(T["SUBMIT"], argv=["true"], ntasks=1, key="k1")
    assert again["job"] == jid and again.get("repeat") is True
    j = wait_state(b, jid, ("done", "failed"), timeout=60)
    assert j["job"]["state"] == "done", j
    assert sorted(runs(out), key=int) == [str(i) for i in range(12)]


def test_walltime_kill_is_reported(cluster_factory, client_factory, batch_factory):
    cl, b = grid(cluster_factory, client_factory, batch_factory)
    jid = b.rpc(T["PSUBMIT"], argv=["sleep 60"], shell=True, procs=1, limit_s=1)["job"]
    j = wait_state(b, jid, ("killed", "failed", "done"), timeout=40)["job"]
    assert j["state"] == "killed" and "wall-clock" in j["reason"], j
