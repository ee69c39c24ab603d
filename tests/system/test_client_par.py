"""The multi-project client (roles/client/live/) as a cluster node: parallel jobs
(PSYNC, roles/client/live/live_par.c) and node health (issue 11, h-unify-b).

Every client here runs with a `[project main]` config (conftest's
GRIDNODE_TEST_PROJECT_CLIENT switch, set per test) and fast `[sched]` keys, so the same
scenarios the single-cluster client passes (test_node_spawn, test_batch_live,
test_node_health) run against the engine-driven client; one more test shows the engine
giving the cores of running parallel ranks up and taking them back."""

import json
import os
import subprocess

import pytest

import test_batch_live as bl
import test_node_health as nh
import test_node_spawn as ns
from conftest import TYPES, scaled, wait_until

CLIENT_SANDBOX = True   # conftest client_factory: the shipped execution boundary

T = dict(TYPES, PSUBMIT=39)

# the engine's timing in seconds, as test_client_multi's, and prompt reports
SCHED = {
    "sched.min_buf": 4, "sched.additional_buf": 4, "sched.time_slice": 2,
    "sched.poll_s": 0.5, "sched.tick_s": 0.1, "sched.rpc_backoff_min": 0.5,
    "sched.rpc_backoff_max": 2, "sched.rsc_backoff_min": 0.5, "sched.rsc_backoff_max": 1,
    "sched.default_est_s": 0.5, "sched.report_cushion": 1, "sched.report_max_delay": 1,
}


@pytest.fixture
def project_clients(monkeypatch, client_factory):
    """client_factory starting multi-project clients (one project: the server) with
    SCHED under the test's own sets."""
    monkeypatch.setenv("GRIDNODE_TEST_PROJECT_CLIENT", "1")

    def start(server, n=1, sets=None, **kw):
        def merged(i):
            s = sets(i) if callable(sets) else sets
            pairs = list(SCHED.items())
            pairs += list(s.items()) if isinstance(s, dict) else list(s or ())
            return pairs
        return client_factory(server, n, sets=merged, **kw)

    return start


def _states(*words):
    """Process states ('R', 'S', 'T', ...) of our uniquely marked processes."""
    out = []
    for pid in nh._pids_of(*words):
        try:
            with open("/proc/%d/stat" % pid) as f:
                out.append(f.read().rsplit(")", 1)[1].split()[0])
        except OSError:
            pass
    return out


def test_parallel_processes_run_and_report(cluster_factory, project_clients):
    ns.test_program_that_cannot_run_is_reported(cluster_factory, project_clients)


def test_parallel_job_and_cancel_through_batch(cluster_factory, project_clients, batch_factory,
                                              workdir):
    bl.test_parallel_job_and_cancel(cluster_factory, project_clients, batch_factory, workdir)


def test_broken_node_drains_and_comes_back(cluster_factory, project_clients, gridnode_bin,
                                           workdir, monkeypatch):
    # the scenario bounds the tasks failed by what the node held when it noticed (4,
    # its slots): a work buffer of one task per instance, as the single-cluster client
    monkeypatch.setitem(SCHED, "sched.min_buf", 0.1)
    monkeypatch.setitem(SCHED, "sched.additional_buf", 0)
    nh.test_broken_node_stops_taking_work(cluster_factory, project_clients, gridnode_bin,
                                          workdir)


def _status(binary, state_dir):
    r = subprocess.run([binary, "client", "status", "--json", "-s", str(state_dir)],
                       capture_output=True, text=True, timeout=scaled(20))
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_ranks_take_cores_from_the_engine(cluster_factory, project_clients, gridnode_bin):
    """A 2-slot node runs two bag-of-tasks sleeps; a parallel job of 1 rank lands on it:
    one sleep is suspended (SIGSTOP) while the rank runs, both run again after it."""
    cl = cluster_factory(dict(nh.FAST, **{"tasks.heartbeat_s": 5, "tasks.k_wait_dead": 60}))
    (node,) = project_clients(cl, 1, sets={"client.slots": 2, "rpc.timeout_ms": 2000})
    u = cl.connect()
    bag, rank = "271.%d" % (os.getpid() % 1000), "272.%d" % (os.getpid() % 1000)
    nh.submit(u, 2, argv=["sleep", bag])
    wait_until(lambda: _states("sleep", bag).count("T") == 0 and len(_states("sleep", bag)) == 2,
               scaled(30), msg="two bag-of-tasks sleeps running")
    pj = u.ok("PSUBMIT", argv=["sleep 4; echo %s" % rank], shell=True, procs=1,
              limit_s=60)["job"]
    wait_until(lambda: sorted(_states("sleep", bag)) == ["S", "T"] or
               sorted(_states("sleep", bag)) == ["R", "T"], scaled(20),
               msg="one bag sleep suspended while the rank runs")
    assert "parallel processes take 1 of 2 CPU instance(s)" in node.log()
    st = _status(gridnode_bin, node.state_dir)
    cpu = st["ptypes"][0]
    assert (cpu["instances"], cpu["ranks"], st["health"]) == (1, 1, ""), st
    wait_until(lambda: u.ok("JOB_GET", job=pj)["job"]["state"] == "done", scaled(30),
               msg="the parallel job to finish")
    wait_until(lambda: len(_states("sleep", bag)) == 2 and "T" not in _states("sleep", bag),
               scaled(20), msg="both bag sleeps running again")
    assert node.alive()
