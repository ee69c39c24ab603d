"""System tests of the cluster manager's side of batch <-> cluster (issue 9): explicit
placement (PSUBMIT hosts), the change feed (EVENTS -> EVENT_LIST) and the long-polls
(held EVENTS and PSYNC replies). Real clusters and clients on loopback; every wait is
bounded and generous; no test asserts on speed.
"""

import signal
import time

from conftest import TYPES, scaled, wait_until
from test_scored import CLIENT, SD, call, grid, job, wait_state

T = dict(TYPES, PSUBMIT=39, PSYNC=18, PSYNC_ACK=19, EVENTS=60, EVENT_LIST=61)
FIELD, INVALID, REFUSED = 4, 7, 10


def placed(cl, hosts, script="sleep 60", **kw):
    return call(cl, "PSUBMIT", argv=[script], shell=True, procs=len(hosts), hosts=hosts, **kw)


def two_hosts(cluster_factory, client_factory, workdir, sets=None):
    return grid(cluster_factory, client_factory, workdir, [("p", "x"), ("p", "x")], sets=sets)


def test_placed_job_runs_on_the_named_hosts(cluster_factory, client_factory, workdir):
    cl = two_hosts(cluster_factory, client_factory, workdir)
    d = workdir / "out"
    d.mkdir()
    script = "echo $GRIDNODE_NODE $GRIDNODE_RANK > %s/$GRIDNODE_JOB.$GRIDNODE_RANK; sleep 60" % d
    r = placed(cl, ["p2", "p1", "p2"], script, key="batch:x:1")
    assert r["t"] == T["SUBMITTED"] and r["state"] == "running", r
    jid = r["job"]
    for rank, host in enumerate(["p2", "p1", "p2"]):
        f = d / ("%d.%d" % (jid, rank))
        wait_until(lambda: f.exists() and f.read_text().strip(), scaled(15), msg=str(f))
        assert f.read_text().split() == [host, str(rank)]
    j = job(cl, jid)
    assert j["state"] == "running" and j["hosts"] == ["p2", "p1"]
    # the same key again: the same job, not a second one
    again = placed(cl, ["p2", "p1", "p2"], script, key="batch:x:1")
    assert again["t"] == T["SUBMITTED"] and again["job"] == jid and again.get("repeat")


def test_placement_refused_names_host_and_resource(cluster_factory, client_factory, workdir):
    cl = two_hosts(cluster_factory, client_factory, workdir)  # 2 slots each
    r = placed(cl, ["p1", "p1"])
    assert r["t"] == T["SUBMITTED"], r
    busy = placed(cl, ["p1"])
    assert busy["t"] == T["ERROR"] and busy["code"] == REFUSED, busy
    assert "host p1" in busy["msg"] and "0 free core(s) of 2" in busy["msg"]
    unknown = placed(cl, ["nosuch"])
    assert unknown["code"] == REFUSED and "host nosuch: unknown" in unknown["msg"], unknown
    many = placed(cl, ["p2", "p2", "p2"])
    assert many["code"] == REFUSED and "host p2: 2 free core(s) of 2, the job needs 3" in many["msg"]
    mem = placed(cl, ["p2"], mem_mb=1 << 39)
    assert mem["code"] == REFUSED and "host p2" in mem["msg"] and "memory" in mem["msg"], mem
    bad = call(cl, "PSUBMIT", argv=["true"], procs=2, hosts=["p2"])
    assert bad["t"] == T["ERROR"] and bad["code"] == INVALID and "one host per process" in bad["msg"]
    # nothing was stored for the refusals: only the first job exists
    jobs = call(cl, "JOB_LIST")["jobs"]
    assert len([j for j in jobs if "procs" in j]) == 1, jobs


def test_placed_job_over_its_walltime_is_killed(cluster_factory, client_factory, workdir):
    cl = two_hosts(cluster_factory, client_factory, workdir)
    r = placed(cl, ["p1"], limit_s=1)
    assert r["t"] == T["SUBMITTED"], r
    j = wait_state(cl, r["job"], "killed")
    assert j["reason"].startswith("wall-clock limit"), j
