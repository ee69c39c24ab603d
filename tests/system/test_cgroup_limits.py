"""cgroup limits of tasks (issue 23, docs/security.md "Resource limits",
roles/client/live/cgroup.c): a task over client.task_memory_mb is killed by the kernel
inside its own cgroup and ends with the memory-limit reason while one under it succeeds;
a task cannot start more processes than client.task_pids_max while the client and other
tasks go on; the client's cgroups are gone after the tasks and after the client; the
directory of a client that is gone is removed at start. Both the sandboxed start and
the forked one of client.sandbox = off are covered. Real cluster and clients, every wait
bounded; skipped, with the reason, where this host's cgroups are not writable.
"""

import os
import re
import subprocess
from pathlib import Path

import pytest

from conftest import FAST_CLIENT as CLIENT, FAST_CLUSTER as FAST, Client, scaled, wait_until

CLIENT_SANDBOX = True   # conftest client_factory: the shipped execution boundary

ROOT = Path("/sys/fs/cgroup")
PY = "/usr/bin/python3"
LIMITS = dict(CLIENT, **{"client.task_memory_mb": 64, "client.task_pids_max": 32,
                         "client.slots": 2})
# a node-side error is final at once (a lone node would otherwise run it three times)
CLUSTER = dict(FAST, **{"tasks.max_attempts": 1})


def _own(controller):
    """This process's cgroup path for a v1 controller (None: v2's)."""
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, ctl, path = line.split(":", 2)
        if (controller is None and ctl == "") or (controller in ctl.split(",")):
            return path
    return None


def cgroups_writable():
    """None when this host's cgroups can take a task's limits, else why not."""
    if os.geteuid() != 0:
        return "not root"
    if (ROOT / "cgroup.controllers").exists():
        ctl = (ROOT / "cgroup.subtree_control").read_text().split()
        if "memory" not in ctl or "pids" not in ctl:
            return "cgroup v2 without memory and pids enabled at the root"
        probe = ROOT / ("gridnode-probe-%d" % os.getpid())
    else:
        for c in ("memory", "pids"):
            if not (ROOT / c / "cgroup.procs").exists():
                return "no cgroup v1 %s hierarchy" % c
        probe = ROOT / "pids" / ("gridnode-probe-%d" % os.getpid())
    try:
        probe.mkdir()
        probe.rmdir()
    except OSError as e:
        return "cannot make a cgroup: %s" % e
    return None


WHY = cgroups_writable()
pytestmark = pytest.mark.skipif(WHY is not None, reason="cgroups not writable here: %s" % WHY)


def bases(node):
    """The client's cgroup directories gridnode/client-PID, from its start log."""
    line = wait_until(lambda: re.search(r"cgroup limits: (.*)", node.log()), scaled(20),
                      msg="the client's cgroup line").group(1)
    assert line.startswith(("v1 memory+pids", "v2 memory+pids")), line
    paths = [Path(p) for p in re.findall(r"(/sys/fs/cgroup/\S+?/client-%d)" % node.pid, line)]
    assert paths and all(p.is_dir() for p in paths), line
    return paths


def children(paths):
    return [c for p in paths if p.exists() for c in p.iterdir() if c.is_dir()]


def busy_children(paths):
    """The tasks' cgroups with a process in them (an ended task's empty cgroup is kept
    for the next task, and removed when the client stops)."""
    return [c for c in children(paths) if (c / "cgroup.procs").read_text().strip()]


def submit(cl, argv, shell=False, ntasks=1):
    return cl.client().ok("SUBMIT", "SUBMITTED", argv=argv, shell=shell, ntasks=ntasks)["job"]


def tasks(cl, job):
    r = cl.client().ok("JOB_GET", "JOB", job=job, tasks=True, output=True, count=10)
    for t in r["tasks"]:
        for k in ("stdout", "stderr"):
            if isinstance(t.get(k), bytes):
                t[k] = t[k].decode(errors="replace")
    return r["job"], r["tasks"]


def wait_end(cl, job, timeout=60):
    return wait_until(lambda: tasks(cl, job)[0]["state"] in ("done", "failed") and tasks(cl, job),
                      scaled(timeout), msg="job %d ends" % job)


def memory_case(cl, node):
    paths = bases(node)
    big = submit(cl, [PY, "-c", "b = b'x' * (200 << 20); print(len(b))"])
    small = submit(cl, [PY, "-c", "b = b'x' * (16 << 20); print('small', len(b))"])
    j, (t,) = wait_end(cl, big)
    assert j["state"] == "failed", (j, t)
    assert t.get("error") == "memory limit: task used more than 64 MiB (cgroup)", t
    assert "finished: memory limit: task used more than 64 MiB (cgroup)" in node.log()
    j, (t,) = wait_end(cl, small)
    assert j["state"] == "done" and t["exit"] == 0 and "small" in t["stdout"], (j, t)
    # the tasks' cgroups are gone once they ended; the client's own one stays
    wait_until(lambda: not busy_children(paths), scaled(10), msg="the tasks' cgroups empty")
    assert all(p.is_dir() for p in paths)
    node.stop()
    assert not any(p.exists() for p in paths), paths


def test_memory_limit_kills_the_task_not_the_client(cluster_factory, client_factory):
    cl = cluster_factory(CLUSTER)
    (node,) = client_factory(cl, 1, sets=LIMITS)
    memory_case(cl, node)


def test_memory_limit_without_the_sandbox(cluster_factory, client_factory):
    cl = cluster_factory(CLUSTER)
    (node,) = client_factory(cl, 1, sets=dict(LIMITS, **{"client.sandbox": False}))
    wait_until(lambda: "client.sandbox = off" in node.log(), scaled(20), msg="start")
    memory_case(cl, node)


FORKS = """
import subprocess
ps, err = [], None
for i in range(200):
    try:
        ps.append(subprocess.Popen(["sleep", "60"]))
    except OSError as e:
        err = e
        break
print("started", len(ps), "error", err)
for p in ps:
    p.kill()
    p.wait()
"""


def test_process_limit(cluster_factory, client_factory):
    cl = cluster_factory(CLUSTER)
    (node,) = client_factory(cl, 1, sets=LIMITS)
    paths = bases(node)
    forks = submit(cl, [PY, "-c", FORKS])
    other = submit(cl, ["echo", "other"], ntasks=4)
    j, (t,) = wait_end(cl, forks)
    assert t["exit"] == 0, t
    m = re.search(r"started (\d+) error (.*)", t["stdout"])
    assert m, t
    assert int(m.group(1)) < 32 and "Resource temporarily unavailable" in m.group(2), t
    j, ts = wait_end(cl, other)
    assert j["state"] == "done" and all(x["stdout"] == "other\n" for x in ts), ts
    assert node.alive()
    wait_until(lambda: not busy_children(paths), scaled(10), msg="the tasks' cgroups empty")
    node.stop()
    assert not any(p.exists() for p in paths), paths


def test_stale_directory_of_a_dead_client_is_removed(cluster_factory, client_factory):
    cl = cluster_factory(CLUSTER)
    (first,) = client_factory(cl, 1, sets=LIMITS)
    grids = [p.parent for p in bases(first)]
    first.stop()
    dead = subprocess.Popen(["true"])
    dead.wait()
    stale = [g / ("client-%d" % dead.pid) for g in grids]
    made = []
    try:
        for s in stale:
            for d in (s.parent, s, s / "t7"):
                if not d.exists():
                    d.mkdir()
                    made.append(d)
        (node,) = client_factory(cl, 1, sets=LIMITS)
        bases(node)
        assert not any(s.exists() for s in stale), stale
        assert "of a client that is gone" in node.log()
        node.stop()
    finally:
        for d in reversed(made):
            if d.exists():
                d.rmdir()


def _gone(pid):
    """Whether process pid has ended (gone, or a zombie not yet reaped)."""
    try:
        return Path("/proc/%d/stat" % pid).read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


def test_leftover_directory_with_this_clients_pid_is_emptied(cluster_factory, client_factory,
                                                             procs, gridnode_bin, workdir):
    """PIDs wrap (pid_max is often 32768): a client may get the PID of one that was killed
    with SIGKILL and left gridnode/client-PID with task cgroups t1, t2 in it. The new
    client empties that directory at start (killing what was left running there) instead
    of failing its first tasks with "cannot make the task's cgroup: File exists"."""
    cl = cluster_factory(CLUSTER)
    (first,) = client_factory(cl, 1, sets=LIMITS)
    grids = [p.parent for p in bases(first)]
    first.stop()
    pidfile = workdir / "leftover.pid"
    wrap = workdir / "wrap.sh"
    # the wrapper makes the leftovers for its own PID, which exec keeps for the client;
    # a process of the gone client is left running in t1 (in every hierarchy)
    wrap.write_text("#!/bin/sh\n( sleep 300 & echo $! > %s )\nfor g in %s; do\n"
                    "  mkdir -p $g/client-$$/t1 $g/client-$$/t2\n"
                    "  cat %s > $g/client-$$/t1/cgroup.procs\ndone\nexec %s \"$@\"\n"
                    % (pidfile, " ".join(str(g) for g in grids), pidfile, gridnode_bin))
    wrap.chmod(0o755)
    node = None
    try:
        node = Client(procs, wrap, "node9", workdir / "node9", cl.endpoint, LIMITS, None,
                      workdir / "node9.log", sandbox=True)
        paths = bases(node)
        leftover = int(pidfile.read_text())
        assert "was left by a gone client with this PID" in node.log()
        wait_until(lambda: _gone(leftover), scaled(10), msg="the gone client's process killed")
        job = submit(cl, ["echo", "hi"], ntasks=4)
        j, ts = wait_end(cl, job)
        assert j["state"] == "done" and all(t["stdout"] == "hi\n" for t in ts), (j, ts)
        node.stop()
        assert not any(p.exists() for p in paths), paths
    finally:
        if pidfile.exists() and not _gone(int(pidfile.read_text())):
            os.kill(int(pidfile.read_text()), 9)
            wait_until(lambda: _gone(int(pidfile.read_text())), scaled(10), msg="leftover killed")
        for g in grids:
            for d in ("t1", "t2", ""):
                p = g / ("client-%d" % (node.pid if node else 0)) / d
                if node and p.exists():
                    try:
                        p.rmdir()
                    except OSError:  # still busy: the next client of this PID empties it
                        pass


def test_parallel_job_memory_limit_reaches_the_node(cluster_factory, client_factory):
    """PSUBMIT mem_mb (the job's per-host limit) travels in PSYNC_ACK and caps the job's
    cgroup on the node, with no client-wide memory limit set."""
    cl = cluster_factory(CLUSTER)
    (node,) = client_factory(cl, 1, sets=dict(CLIENT, **{"client.slots": 2}))
    bases(node)
    wait_until(lambda: any(n["active"] for n in cl.rpc(37)["nodes"]), scaled(20), msg="node")
    big = cl.client().ok("PSUBMIT", "SUBMITTED", procs=1, limit_s=60, mem_mb=64,
                         argv=[PY, "-c", "b = b'x' * (200 << 20); print(len(b))"])["job"]
    small = cl.client().ok("PSUBMIT", "SUBMITTED", procs=1, limit_s=60, mem_mb=64,
                           argv=[PY, "-c", "b = b'x' * (16 << 20); print('small')"])["job"]
    for jid, want in ((big, "killed"), (small, "done")):
        wait_until(lambda: cl.rpc(34, job=jid)["job"]["state"] in ("done", "failed", "killed"),
                   scaled(60), msg="parallel job %d ends" % jid)
        j = cl.rpc(34, job=jid)["job"]
        assert j["state"] == want, j
    j = cl.rpc(34, job=big)["job"]
    assert j["reason"] == ("process 0 on host node1: memory limit: the job's processes on "
                           "this host used more than 64 MiB (cgroup)"), j
