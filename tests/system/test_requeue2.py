"""System tests of issue 15 item 5: `gridnode requeue` of a parallel job on the cluster
(the killed run's processes must be gone before the job is placed again)."""

import json
import os
import subprocess
import time

from conftest import scaled, wait_until

SD = {"store.sync": "none", "queues.sync_ms": 100, "tasks.heartbeat_s": 1,
      "tasks.idle_wait_s": 1}


def run(gridnode_bin, *args, timeout=60):
    return subprocess.run([gridnode_bin] + [str(a) for a in args], capture_output=True,
                          text=True, timeout=scaled(timeout), stdin=subprocess.DEVNULL)


def gone(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    try:  # a zombie of the client is gone for our purpose
        with open("/proc/%d/stat" % pid) as f:
            return f.read().split(")")[-1].split()[0] == "Z"
    except OSError:
        return True


def test_requeue_parallel_job_kills_then_runs_again(cluster_factory, client_factory,
                                                    gridnode_bin, workdir):
    """A running 2-rank parallel job is requeued and the cluster killed -9 right after
    the OK: the old ranks are killed, the job runs again from scratch (new processes,
    the new run's output only), requeues 1; a cancelled one cannot be requeued."""
    cl = cluster_factory(SD)
    client_factory(cl, 1, sets={"client.slots": 2, "rpc.timeout_ms": 2000,
                                "rpc.backoff_min_s": 0.2, "rpc.backoff_max_s": 1})
    d = workdir / "marks"
    d.mkdir()
    # first run: note the pid, then sleep long; the next run: say so and end
    script = ('m=%s/m$GRIDNODE_RANK; if [ -e $m ]; then echo again$GRIDNODE_RANK; '
              'else echo $$ > $m.t; mv $m.t $m; echo first; exec sleep 300; fi' % d)
    ep = cl.endpoint
    last = []

    def submit():
        last[:] = [run(gridnode_bin, "submit", "-e", ep, "--json", "-p", "2", "--ppn", "2",
                       "--shell", script)]
        return last[0].returncode == 0 or None
    try:
        wait_until(lambda: submit() or time.sleep(0.5), scaled(30), msg="submitted")
    except AssertionError:
        raise AssertionError(last[0].stderr)
    u = cl.connect(timeout=scaled(30))
    job = max(j["job"] for j in u.ok("JOB_LIST", "JOBS")["jobs"])

    def get(output=False):
        return u.ok("JOB_GET", "JOB", job=job, output=output)["job"]

    wait_until(lambda: all((d / ("m%d" % i)).exists() for i in range(2)), scaled(60),
               msg="both ranks started")
    pids = [int((d / ("m%d" % i)).read_text()) for i in range(2)]
    assert get()["state"] == "running"
    r = run(gridnode_bin, "requeue", "-e", ep, job)
    assert r.returncode == 0 and "requeued" in r.stdout, (r.stdout, r.stderr)
    # kill -9 right after the OK: the transitional state is stored and completes
    cl.restart()
    ep = cl.endpoint
    u = cl.connect(timeout=scaled(30))
    wait_until(lambda: all(gone(p) for p in pids), scaled(60), msg="old ranks killed")
    wait_until(lambda: get()["state"] == "done", scaled(90), msg="requeued job ran again")
    g = get(output=True)
    assert g["requeues"] == 1, g
    outs = sorted(rk["stdout"] for rk in g["ranks"])
    assert outs == [b"again0\n", b"again1\n"], g["ranks"]
    assert all(rk["exit"] == 0 and rk["state"] == "exited" for rk in g["ranks"]), g["ranks"]
    r = run(gridnode_bin, "job", "-e", ep, "--json", job)
    assert r.returncode == 0 and json.loads(r.stdout)["job"]["requeues"] == 1, r.stdout
    r = run(gridnode_bin, "job", "-e", ep, job)
    assert "requeued 1 times" in r.stdout, r.stdout
    # a finished job requeues too (nothing left to kill): it runs again
    r = run(gridnode_bin, "requeue", "-e", ep, job)
    assert r.returncode == 0, r.stderr
    wait_until(lambda: get()["requeues"] == 2 and get()["state"] == "done", scaled(90),
               msg="requeued again and done")
    # a cancel is final
    r = run(gridnode_bin, "submit", "-e", ep, "--json", "-p", "1", "--shell", "exec sleep 300")
    assert r.returncode == 0, r.stderr
    j2 = max(j["job"] for j in u.ok("JOB_LIST", "JOBS")["jobs"])
    assert run(gridnode_bin, "cancel", "-e", ep, j2).returncode == 0
    r = run(gridnode_bin, "requeue", "-e", ep, j2)
    assert r.returncode == 1 and "cancelled job cannot be requeued" in r.stderr, r.stderr


def test_requeue_exit_report_repeated_after_restart(cluster_factory, gridnode_bin):
    """A node speaking the wire: the killed run's exit is committed by the cluster, but
    the acknowledgement is lost with it (kill -9), so the node reports that exit again to
    the restarted cluster. The job stays requeueing until the node's report, that report
    does not count for the new run, and the new run then runs and ends normally."""
    # the node is silent across the restart and the pause below: a short inactivity bound
    # (k_wait_dead x 1 s) would rightly take it for dead on a slow machine (ASan)
    cl = cluster_factory(dict(SD, **{"tasks.k_wait_dead": 120}))
    node = cl.connect()
    sid = node.ok("HELLO", "WELCOME", client="raw", node="r1", cores=2, slots=2,
                  procs=True)["sid"]
    node.ok("PSYNC", "PSYNC_ACK", sid=sid, procs=[])
    r = run(gridnode_bin, "submit", "-e", cl.endpoint, "-p", "1", "--shell", "sleep 300")
    assert r.returncode == 0, r.stderr
    u = cl.connect(timeout=scaled(30))
    job = max(j["job"] for j in u.ok("JOB_LIST", "JOBS")["jobs"])

    def state():
        return u.ok("JOB_GET", "JOB", job=job)["job"]["state"]

    def wants():
        ack = node.ok("PSYNC", "PSYNC_ACK", sid=sid, procs=procs)
        return [(p["job"], p["rank"], p["want"]) for p in ack["procs"]]

    procs = []
    assert wait_until(lambda: wants() == [(job, 0, "run")] or time.sleep(0.1), scaled(30),
                      msg="rank 0 placed on r1")
    procs = [{"job": job, "rank": 0, "state": "run"}]
    wants()
    r = run(gridnode_bin, "requeue", "-e", cl.endpoint, job)
    assert r.returncode == 0 and "requeued" in r.stdout, (r.stdout, r.stderr)
    assert wants() == [(job, 0, "kill")]
    # the process is killed; its exit is committed and acknowledged (no longer listed)...
    procs = [{"job": job, "rank": 0, "state": "exit", "exit": -1, "signal": 9}]
    assert wants() == []
    # ... but that acknowledgement never reached the node: the cluster dies
    cl.restart()
    node = cl.connect(timeout=scaled(30))
    u = cl.connect(timeout=scaled(30))
    time.sleep(scaled(2))  # schedule turns pass: nothing may decide the node forgot it
    assert state() == "requeueing"
    # the node reports the exit again: acknowledged, and still requeueing (not a new run)
    assert wants() == []
    assert state() == "requeueing"
    # the node has forgotten it: the job goes back and runs again on r1
    procs = []
    assert wait_until(lambda: wants() == [(job, 0, "run")] or time.sleep(0.1), scaled(30),
                      msg="rank 0 placed again")
    procs = [{"job": job, "rank": 0, "state": "exit", "exit": 0, "signal": 0,
              "stdout": b"again\n", "stderr": b""}]
    assert wants() == []
    g = u.ok("JOB_GET", "JOB", job=job)["job"]
    assert g["state"] == "done" and g["requeues"] == 1, g
