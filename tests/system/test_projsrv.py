"""Issue 11, the cluster manager side: work requests in seconds per processor type
(`req`), GPU tasks only on nodes that declared enough instances of their type, report
deadlines and late results (accepted, counted, kept across kill -9), and the project's
master endpoint list (MASTER_GET) read from a file changed at run time.

Nodes are spoken to with conftest's Rpc (a DEALER speaking docs/wire.md), so every
exchange is exact; one test drives the `gridnode submit` / `gridnode job` tools.
"""

import os
import subprocess
import time

import pytest

from conftest import TYPES, scaled, wait_until


def run_cli(gridnode_bin, *args, timeout=30):
    return subprocess.run([gridnode_bin] + [str(a) for a in args], capture_output=True,
                          text=True, timeout=scaled(timeout), stdin=subprocess.DEVNULL)


def hello(cl, name, **extra):
    """A new node session (its own DEALER); returns (rpc, sid)."""
    rpc = cl.connect()
    r = rpc.ok("HELLO", "WELCOME", client="test", node=name, cores=4, **extra)
    return rpc, r["sid"]


def submit(cl, ntasks=1, **extra):
    return cl.client().ok("SUBMIT", "SUBMITTED", argv=["true"], ntasks=ntasks, **extra)["job"]


def job(cl, jid, tasks=False):
    return cl.client().ok("JOB_GET", "JOB", job=jid, tasks=tasks, count=100000)


def result(t, **extra):
    r = {"job": t["job"], "idx": t["idx"], "issue": t["issue"], "exit": 0, "wall_s": 0.01}
    r.update(extra)
    return r


# ---------------------------------------------------------------------------
# work requests in seconds (C8)

def test_req_seconds_add_up_to_the_request_and_not_much_more(cluster):
    # a work unit is unit_gflop = 600 GFLOP; a 10 GFLOPS core runs it in 60 s; with
    # complexity 0.5 every task is 30 s on this host
    jid = submit(cluster, 40, complexity=0.5)
    rpc, sid = hello(cluster, "n1", cpu_gflops=10.0)

    r = rpc.ok("TASK_GET", "TASKS", sid=sid, want=0, req={"cpu": 100.0})
    est = [t["est_s"] for t in r["tasks"]]
    assert est == [pytest.approx(30.0)] * 4, r  # 30+30+30 < 100, the 4th passes it
    assert r["none"] == []
    for t in r["tasks"]:
        assert t["ptype"] == "cpu" and "gpus" not in t
        assert t["deadline"] >= int(time.time()) + 86400 - 60  # tasks.deadline_s default

    r = rpc.ok("TASK_GET", "TASKS", sid=sid, want=0, req={"cpu": 60})
    assert len(r["tasks"]) == 2  # exactly reached: stop there

    r = rpc.ok("TASK_GET", "TASKS", sid=sid, want=0, req={"cpu": 0.5})
    assert len(r["tasks"]) == 1  # always one task when seconds are asked and work exists

    r = rpc.ok("TASK_GET", "TASKS", sid=sid, want=3, req={"cpu": 10000})
    assert len(r["tasks"]) == 3  # want caps the count

    r = rpc.ok("TASK_GET", "TASKS", sid=sid, want=0, req={"cpu": 0})
    assert r["tasks"] == [] and r["none"] == []  # nothing asked: no back-off either

    # results and a new request in one RESULT
    done = [result(t) for t in r["tasks"]]
    r = rpc.ok("RESULT", "TASKS", sid=sid, results=done, want=0, req={"cpu": 90})
    assert len(r["tasks"]) == 3
    # the job has 40 - 13 = 27 left; ask for all of it and more: "none" only once empty
    r = rpc.ok("TASK_GET", "TASKS", sid=sid, want=0, req={"cpu": 30 * 27.0})
    assert len(r["tasks"]) == 27 and r["none"] == []
    r = rpc.ok("TASK_GET", "TASKS", sid=sid, want=0, req={"cpu": 100})
    assert r["tasks"] == [] and r["none"] == ["cpu"] and r["wait_s"] > 0
    assert job(cluster, jid)["job"]["issued"] == 40


def test_req_bad_values_are_refused_and_change_nothing(cluster):
    submit(cluster, 5)
    rpc, sid = hello(cluster, "n1")
    for bad in ({"cpu": -1}, {"cpu": "x"}, {"": 5}, {"cpu": float("nan")},
                {"cpu": float("inf")}, {"x" * 40: 1}):
        rpc.err("TASK_GET", "FIELD", sid=sid, want=1, req=bad)
    rpc.err("TASK_GET", "FIELD", sid=sid, want=1, req={"t%d" % i: 1 for i in range(17)})
    assert job(cluster, 1)["job"]["issued"] == 0
    # an old node (want only) still gets today's semantics, tasks now carry est_s
    r = rpc.ok("TASK_GET", "TASKS", sid=sid, want=2)
    assert len(r["tasks"]) == 2 and "none" not in r
    assert all(t["ptype"] == "cpu" and t["est_s"] > 0 for t in r["tasks"])


# ---------------------------------------------------------------------------
# GPU tasks

def test_gpu_task_goes_only_to_a_node_with_enough_of_its_type(cluster):
    g1 = submit(cluster, 6, gpus=1, gpu_type="nvidia", complexity=1)
    g2 = submit(cluster, 2, gpus=2, gpu_type="nvidia")
    cpu = submit(cluster, 3)
    anygpu = submit(cluster, 2, gpus=1)

    plain, psid = hello(cluster, "cpuonly")  # declares no GPU (an old client)
    r = plain.ok("TASK_GET", "TASKS", sid=psid, want=100)
    assert {t["job"] for t in r["tasks"]} == {cpu}
    r = plain.ok("TASK_GET", "TASKS", sid=psid, want=0, req={"cpu": 10, "nvidia": 100})
    assert r["tasks"] == [] and sorted(r["none"]) == ["cpu", "nvidia"]

    amd, asid = hello(cluster, "amd", gpus=[{"type": "amd", "count": 4, "gflops": 1000.0}])
    r = amd.ok("TASK_GET", "TASKS", sid=asid, want=0, req={"amd": 1e6})
    assert {t["job"] for t in r["tasks"]} == {anygpu}  # only the "any type" job fits
    assert all(t["ptype"] == "amd" and t["gpus"] == 1 for t in r["tasks"])
    r = amd.ok("TASK_GET", "TASKS", sid=asid, want=0, req={"amd": 1e6})
    assert r["tasks"] == [] and r["none"] == ["amd"]

    nv1, nsid = hello(cluster, "nv1", cpu_gflops=10.0,
                      gpus=[{"type": "nvidia", "count": 1, "gflops": 600.0}])
    # one nvidia instance of 600 GFLOPS: a 600 GFLOP unit takes 1 s; ask for 3.5 s
    r = nv1.ok("TASK_GET", "TASKS", sid=nsid, want=0, req={"nvidia": 3.5, "cpu": 0})
    assert [t["job"] for t in r["tasks"]] == [g1] * 4
    assert all(t["ptype"] == "nvidia" and t["gpus"] == 1 and
               t["est_s"] == pytest.approx(1.0) for t in r["tasks"])
    r = nv1.ok("TASK_GET", "TASKS", sid=nsid, want=0, req={"nvidia": 100, "cpu": 1})
    jobs = [t["job"] for t in r["tasks"]]
    assert jobs.count(g1) == 2 and g2 not in jobs and "nvidia" not in r["none"]
    r = nv1.ok("TASK_GET", "TASKS", sid=nsid, want=0, req={"nvidia": 100})
    assert r["none"] == ["nvidia"]  # g2 needs 2 instances: never to this node

    # a reply cut by the count cap does not say "none" for the types it left out
    cpu2 = submit(cluster, 1)
    r = nv1.ok("TASK_GET", "TASKS", sid=nsid, want=1, req={"cpu": 100, "nvidia": 100})
    assert [t["job"] for t in r["tasks"]] == [cpu2] and r["none"] == []

    nv2, n2sid = hello(cluster, "nv2", gpus=[{"type": "nvidia", "count": 2}])
    r = nv2.ok("TASK_GET", "TASKS", sid=n2sid, want=10)  # want semantics: any type it has
    assert {t["job"] for t in r["tasks"]} == {g2}
    assert job(cluster, g2)["job"]["gpus"] == 2


def test_gpu_declarations_and_submissions_are_checked(cluster):
    rpc = cluster.connect()
    for gpus in ([{"type": "cpu", "count": 1}], [{"type": "", "count": 1}],
                 [{"type": "a", "count": 1}, {"type": "a", "count": 2}]):
        rpc.err("HELLO", "INVALID", client="t", node="x", cores=1, gpus=gpus)
    rpc.err("HELLO", "INVALID", client="t", node="x", cores=1, cpu_gflops=-1.0)
    rpc.err("HELLO", "FIELD", client="t", node="x", cores=1,
            gpus=[{"type": "a", "count": 1}] * 5)
    c = cluster.client()
    c.err("SUBMIT", "INVALID", argv=["true"], ntasks=1, gpu_type="nvidia")
    c.err("SUBMIT", "INVALID", argv=["true"], ntasks=1, gpus=1, gpu_type="cpu")
    c.err("SUBMIT", "INVALID", argv=["true"], ntasks=1, deadline_s=0)
    c.err("PSUBMIT", "INVALID", argv=["true"], procs=1, gpus=1)
    c.err("PSUBMIT", "INVALID", argv=["true"], procs=1, deadline_s=60)
    assert c.ok("JOB_LIST", "JOBS")["jobs"] == []


def test_gpu_declaration_survives_cluster_kill(cluster_factory):
    cl = cluster_factory({"store.sync": "full"})
    rpc, sid = hello(cl, "nv", gpus=[{"type": "nvidia", "count": 2, "gflops": 100.0}])
    cl.restart()
    jid = submit(cl, 2, gpus=2, gpu_type="nvidia")
    rpc = cl.connect()
    r = rpc.ok("TASK_GET", "TASKS", sid=sid, want=0, req={"nvidia": 1})
    assert [t["job"] for t in r["tasks"]] == [jid]
    nodes = cl.client().ok("NODE_LIST", "NODES")["nodes"]
    assert nodes[0]["gpus"] == [{"type": "nvidia", "count": 2, "gflops": 100.0}]


# ---------------------------------------------------------------------------
# deadlines and late results (item 8, X4)

LATE = {"store.sync": "full", "tasks.default_estimate_s": 0.05, "tasks.min_wait_s": 0,
        "tasks.k_wait": 1, "tasks.heartbeat_s": 1}


def test_late_result_after_reissue_is_accepted_and_counted(cluster_factory, gridnode_bin):
    cl = cluster_factory(LATE)
    r = run_cli(gridnode_bin, "submit", "-e", cl.endpoint, "--deadline", "1", "-n", "2",
                "--", "true")
    assert r.returncode == 0, r.stderr
    jid = 1
    a, asid = hello(cl, "slow")
    b, bsid = hello(cl, "fast")
    ta = a.ok("TASK_GET", "TASKS", sid=asid, want=0, req={"cpu": 0.01})["tasks"]
    assert len(ta) == 1 and ta[0]["idx"] == 0
    assert ta[0]["deadline"] <= int(time.time()) + 2
    # a task handed out by seconds is re-issued only after its deadline: not yet now
    tb = b.ok("TASK_GET", "TASKS", sid=bsid, want=0, req={"cpu": 0.01})["tasks"]
    assert [t["idx"] for t in tb] == [1]
    b.ok("RESULT", "TASKS", sid=bsid, results=[result(tb[0])], want=0)
    time.sleep(2.2)  # past task 0's deadline (1 s, whole seconds)
    tb = wait_until(lambda: b.ok("TASK_GET", "TASKS", sid=bsid, want=0,
                                 req={"cpu": 0.01})["tasks"],
                    scaled(10), interval=0.2, msg="task 0 re-issued after its deadline")
    assert tb[0]["idx"] == 0 and tb[0]["issue"] == 2
    # the slow node's result arrives after its deadline: it wins (first valid result)
    r = a.ok("RESULT", "TASKS", sid=asid, results=[result(ta[0])], want=0)
    assert r["acked"] == 1
    j = job(cl, jid, tasks=True)
    assert j["job"]["state"] == "done" and j["job"]["late"] == 1
    assert j["job"]["deadline_s"] == 1
    t0 = [t for t in j["tasks"] if t["idx"] == 0][0]
    assert t0["late"] is True and t0["issues"] == 2
    # the re-issued copy's result, on time, is a duplicate and not late
    b.ok("RESULT", "TASKS", sid=bsid, results=[result(tb[0])], want=0)
    j = job(cl, jid)["job"]
    assert j["late"] == 1 and j["dups"] == 1
    # counted durably, and shown by the tool
    cl.restart()
    out = run_cli(gridnode_bin, "job", "-e", cl.endpoint, str(jid))
    assert out.returncode == 0, out.stderr
    assert "1 late" in out.stdout and "(late)" in out.stdout, out.stdout


def test_deadline_default_comes_from_the_cluster(cluster_factory):
    cl = cluster_factory({"store.sync": "none", "tasks.deadline_s": 777})
    jid = submit(cl, 1)
    assert job(cl, jid)["job"]["deadline_s"] == 777
    rpc, sid = hello(cl, "n")
    t = rpc.ok("TASK_GET", "TASKS", sid=sid, want=1)["tasks"][0]
    assert abs(t["deadline"] - (time.time() + 777)) < 60


# ---------------------------------------------------------------------------
# the master endpoint list (C1)

def test_master_list_from_a_file_changed_at_run_time(cluster_factory, workdir):
    f = workdir / "endpoints"
    f.write_text("# the schedulers\ntcp://127.0.0.1:7001\n tcp://127.0.0.1:7002 ,\n")
    cl = cluster_factory({"store.sync": "none", "project.name": "einstein",
                          "project.endpoints": "tcp://127.0.0.1:7999",
                          "project.endpoints_file": str(f)})
    rpc = cl.connect()
    r = rpc.ok("MASTER_GET", "MASTER")
    assert r["project"] == "einstein"
    assert r["endpoints"] == ["tcp://127.0.0.1:7001", "tcp://127.0.0.1:7002"]
    tmp = workdir / "endpoints.new"
    tmp.write_text("tcp://127.0.0.1:7003,tcp://127.0.0.1:7004\n")
    os.replace(tmp, f)
    r = rpc.ok("MASTER_GET", "MASTER")
    assert r["endpoints"] == ["tcp://127.0.0.1:7003", "tcp://127.0.0.1:7004"]
    f.unlink()  # unreadable: the configured list, not an empty one
    assert rpc.ok("MASTER_GET", "MASTER")["endpoints"] == ["tcp://127.0.0.1:7999"]
    assert cl.alive()


def test_master_without_project_or_endpoints(cluster_factory, workdir):
    cl = cluster_factory({"store.sync": "none"})
    r = cl.connect().err("MASTER_GET", "NOT_FOUND")
    assert "project" in r["msg"]
    cl2 = cluster_factory({"store.sync": "none", "project.name": "p",
                           "project.endpoints_file": str(workdir / "missing")})
    r = cl2.connect().err("MASTER_GET", "STATE")
    assert "missing" in r["msg"]
