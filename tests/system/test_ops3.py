"""System tests of issue 15 item 5, the rest: `gridnode requeue` (JOB_CTL op requeue),
`submit --export / --chdir` (the environment and working directory travel with the
job), and the JOB_LIST filters applied by every role (cluster, batch, meta)."""

import json
import os
import subprocess
import time

from conftest import TYPES, scaled, wait_until
from test_security import Keys

SETS = {"store.sync": "none"}


def run(gridnode_bin, *args, timeout=60, cwd=None, env=None):
    return subprocess.run([gridnode_bin] + [str(a) for a in args], capture_output=True,
                          text=True, timeout=scaled(timeout), stdin=subprocess.DEVNULL,
                          cwd=cwd, env=env or dict(os.environ))


def gone(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    # a zombie of the client is gone for our purpose
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().split(")")[-1].split()[0] == "Z"
    except OSError:
        return True


# ---- requeue ---------------------------------------------------------------------------


def test_requeue_kills_restarts_and_survives_kill9(cluster_factory, client_factory,
                                                   gridnode_bin, workdir):
    """A running job is requeued: its running tasks are killed on the node, every task
    runs again from scratch, old results are dropped and the requeue is counted; a
    requeue of a finished job acknowledged just before kill -9 is there after the
    restart; a held job stays held; a cancelled job cannot be requeued."""
    cl = cluster_factory(SETS)
    ep = cl.endpoint
    node = client_factory(cl, 1, sets={"client.slots": "2"})[0]
    d = workdir / "marks"
    d.mkdir()
    # first run: note the pid, then sleep long; any later run: finish at once
    script = ('if [ -e %s/m{i} ]; then echo again{i}; else echo $$ > %s/m{i}; echo first; '
              'exec sleep 300; fi' % (d, d))
    r = run(gridnode_bin, "submit", "-e", ep, "--json", "-n", "2", "--shell", script)
    assert r.returncode == 0, r.stderr
    job = json.loads(r.stdout)["job"]
    u = cl.connect(timeout=scaled(30))

    def get(tasks=False):
        return u.ok("JOB_GET", "JOB", job=job, tasks=tasks, output=tasks)

    wait_until(lambda: all((d / ("m%d" % i)).exists() and (d / ("m%d" % i)).read_text().strip()
                           for i in range(2)), scaled(60), msg="both tasks started")
    pids = [int((d / ("m%d" % i)).read_text()) for i in range(2)]
    assert get()["job"]["state"] == "running"
    r = run(gridnode_bin, "requeue", "-e", ep, job)
    assert r.returncode == 0 and "requeued" in r.stdout, r.stderr
    # the node was told to kill them (not the 300 s sleep running out)
    wait_until(lambda: all(gone(p) for p in pids), scaled(60), msg="old tasks killed")
    wait_until(lambda: get()["job"]["state"] == "done", scaled(60), msg="requeued job done")
    g = get(tasks=True)
    assert g["job"]["requeues"] == 1 and g["job"]["done"] == 2 and g["job"]["dups"] == 0, g
    assert sorted(t["stdout"] for t in g["tasks"]) == [b"again0\n", b"again1\n"], g["tasks"]
    r = run(gridnode_bin, "job", "-e", ep, job)
    assert "requeued 1 times" in r.stdout, r.stdout

    # a finished job: requeue, kill -9 at once after the ack; it is queued afterwards
    node.stop()
    r = run(gridnode_bin, "requeue", "-e", ep, job)
    assert r.returncode == 0, r.stderr
    cl.restart()
    ep = cl.endpoint
    u = cl.connect(timeout=scaled(30))
    g = get(tasks=True)
    assert g["job"]["state"] == "queued" and g["job"]["requeues"] == 2, g["job"]
    assert g["job"]["done"] == 0 and g["job"]["issued"] == 0, g["job"]
    assert all("stdout" not in t and t["state"] == "pending" for t in g["tasks"]), g["tasks"]
    # held stays held through a requeue
    assert run(gridnode_bin, "hold", "-e", ep, job).returncode == 0
    assert run(gridnode_bin, "requeue", "-e", ep, job).returncode == 0
    assert get()["job"]["state"] == "held"
    # errors in plain words
    r = run(gridnode_bin, "requeue", "-e", ep, "999999")
    assert r.returncode == 1 and "no job 999999" in r.stderr, r.stderr
    assert run(gridnode_bin, "cancel", "-e", ep, job).returncode == 0
    r = run(gridnode_bin, "requeue", "-e", ep, job)
    assert r.returncode == 1 and "cancelled job cannot be requeued" in r.stderr, r.stderr
    e = u.err("JOB_CTL", "INVALID", job=job, op="restart")
    assert "requeue" in e["msg"], e


def test_job_ctl_only_owner_or_admin(cluster_factory, workdir):
    """hold, release and requeue of another user's job are DENIED (the owner and the
    administrators may)."""
    keys = Keys(workdir / "keys")
    keys.add("alice", "user")
    keys.add("bob", "user")
    cl = cluster_factory(dict(SETS, **keys.sets()))
    alice, bob = keys.rpc(cl.endpoint, "alice"), keys.rpc(cl.endpoint, "bob")
    job = alice.call("SUBMIT", argv=["true"], ntasks=1)["job"]
    for op in ("hold", "release", "requeue"):
        e = bob.err("JOB_CTL", "DENIED", job=job, op=op)
        assert "belongs to another user" in e["msg"], e
    for op in ("hold", "release", "requeue"):
        assert alice.call("JOB_CTL", job=job, op=op)["t"] == TYPES["OK"]
    assert cl.connect().call("JOB_CTL", job=job, op="requeue")["t"] == TYPES["OK"]  # admin


# ---- JOB_LIST filters in every role ----------------------------------------------------


def _listed(rpc, **filters):
    return sorted(j["job"] for j in rpc.ok("JOB_LIST", "JOBS", **filters)["jobs"])


def test_job_list_filters_in_batch_and_meta(cluster_factory, batch_factory, meta_factory,
                                            gridnode_bin):
    """`gridnode jobs -u/-t/-n/-q` filter at the batch role and the grid spool exactly as
    at the cluster manager (one implementation: wire/joblist.c)."""
    cl = cluster_factory(SETS)
    b = batch_factory([cl])
    m = meta_factory({"site1": b})
    for role in (b, m):
        u = role.connect(timeout=scaled(20))
        ids = {}
        for user, name in (("alice", "a1"), ("bob", "b1"), ("alice", "a2")):
            r = u.ok("SUBMIT", "SUBMITTED", argv=["/bin/sleep", "1"], ntasks=1, user=user,
                     name=name)
            ids[name] = r["job"]
        assert _listed(u) == sorted(ids.values())
        assert _listed(u, user="alice") == sorted([ids["a1"], ids["a2"]])
        assert _listed(u, user="carol") == []
        assert _listed(u, name="b1") == [ids["b1"]]
        assert _listed(u, user="alice", name="b1") == []
        assert _listed(u, state="done,cancelled") == []
        assert _listed(u, queue=0) == []  # bags of tasks have no queue
        u.ok("CANCEL", "OK", job=ids["a2"])
        wait_until(lambda: _listed(u, state="cancelled") == [ids["a2"]], scaled(30),
                   msg="cancelled job listed by state")
        # paging still works with a filter: one row a page, `next` goes on
        p = u.ok("JOB_LIST", "JOBS", user="alice", count=1)
        assert [j["job"] for j in p["jobs"]] == [ids["a1"]] and "next" in p, p
        p = u.ok("JOB_LIST", "JOBS", user="alice", count=1, **{"from": p["next"]})
        assert [j["job"] for j in p["jobs"]] == [ids["a2"]], p
        r = run(gridnode_bin, "jobs", "-e", role.endpoint, "--json", "-u", "bob")
        assert r.returncode == 0, r.stderr
        assert [j["job"] for j in json.loads(r.stdout)] == [ids["b1"]], r.stdout


# ---- submit --export / --chdir ---------------------------------------------------------


def test_export_and_chdir_travel_with_the_job(cluster_factory, client_factory, gridnode_bin,
                                              workdir):
    """--export and --chdir (options and #GRIDNODE directives) reach the task's process
    through the cluster (stored: they survive kill -9 before any node runs the job); the
    default is the node's environment; a --chdir missing on the node fails the task with
    a message naming it; the roles refuse bad values naming the limit."""
    cl = cluster_factory(dict(SETS, **{"tasks.max_attempts": "1"}))
    ep = cl.endpoint
    wd = workdir / "wd"
    wd.mkdir()
    env = dict(os.environ, OPS3_FOO="from submit", OPS3_BAR="bar here")
    show = 'echo "foo=$OPS3_FOO bar=$OPS3_BAR baz=$OPS3_BAZ pwd=$(pwd)"'

    def submit(*args, cwd=None):
        r = run(gridnode_bin, "submit", "-e", ep, "--json", *args, cwd=cwd, env=env)
        assert r.returncode == 0, r.stderr
        return json.loads(r.stdout)["job"]

    jobs = {
        "default": submit("--shell", show),
        "all": submit("--export=ALL,OPS3_BAZ=z", "--shell", show),
        "some": submit("--export", "OPS3_FOO,OPS3_BAZ=1=2,OPS3_UNSET", "--chdir", "wd",
                       "--shell", show, cwd=workdir),
        "missing": submit("--chdir", "/nonexistent/ops3dir", "/bin/true"),
    }
    script = workdir / "job.sh"
    script.write_text("#!/bin/sh\n#GRIDNODE --export=NONE,OPS3_BAZ=script\n"
                      "#GRIDNODE --chdir %s\n%s\n" % (wd, show))
    script.chmod(0o755)
    jobs["script"] = submit(str(script))
    cl.restart()  # kill -9: what was acknowledged is stored with the jobs
    ep = cl.endpoint
    client_factory(cl, 1)  # its own environment has no OPS3_* variables
    u = cl.connect(timeout=scaled(30))

    def out(job):
        g = u.ok("JOB_GET", "JOB", job=job, tasks=True, output=True)
        return g["job"]["state"], g["tasks"][0]

    wait_until(lambda: all(out(j)[0] in ("done", "failed") for j in jobs.values()),
               scaled(60), msg="jobs ended")
    assert out(jobs["default"])[1]["stdout"].decode().startswith("foo= bar= baz= pwd=")
    assert out(jobs["all"])[1]["stdout"] == b"foo=from submit bar=bar here baz=z pwd=%s\n" % (
        out(jobs["all"])[1]["stdout"].split(b"pwd=")[1].strip())
    assert out(jobs["some"])[1]["stdout"].decode() == "foo=from submit bar= baz=1=2 pwd=%s\n" % wd
    assert out(jobs["script"])[1]["stdout"].decode() == "foo= bar= baz=script pwd=%s\n" % wd
    st, t = out(jobs["missing"])
    assert st == "failed" and "/nonexistent/ops3dir" in t.get("error", ""), t
    r = run(gridnode_bin, "job", "-e", ep, jobs["missing"])
    assert "/nonexistent/ops3dir" in r.stdout, r.stdout

    # refused by the role, naming the field and the limit
    e = u.err("SUBMIT", "INVALID", argv=["true"], ntasks=1, env=["1X=2"])
    assert "env entry 0" in e["msg"], e
    e = u.err("SUBMIT", "INVALID", argv=["true"], ntasks=1, env=["A=" + "x" * 40000] * 2)
    assert "64 KiB" in e["msg"], e
    e = u.err("SUBMIT", "INVALID", argv=["true"], ntasks=1, chdir="relative/dir")
    assert "absolute path" in e["msg"], e
    # and by submit, before anything is sent
    r = run(gridnode_bin, "submit", "-e", "tcp://127.0.0.1:1", "--connect-timeout", "0",
            "--export=ALL", "/bin/true", env=dict(env, OPS3_BIG="x" * 70000))
    assert r.returncode == 2 and "64 KiB" in r.stderr, r.stderr
    r = run(gridnode_bin, "submit", "-e", "tcp://127.0.0.1:1", "--connect-timeout", "0",
            "--export=ALL,NONE", "/bin/true")
    assert r.returncode == 2 and "contradict" in r.stderr, r.stderr


def test_export_and_chdir_down_the_hierarchy(cluster_factory, client_factory, batch_factory,
                                             meta_factory, gridnode_bin, workdir):
    """--export / --chdir given to the grid spool or the batch role reach the process
    on the node (the spool passes the request on, the batch role keeps them with the
    job and puts them in the PSUBMIT of each element, the cluster in PSYNC_ACK); a
    parallel job (-p) at the cluster takes them too."""
    sd = {"store.sync": "none", "queues.sync_ms": 100, "tasks.heartbeat_s": 1,
          "tasks.idle_wait_s": 1}
    cl = cluster_factory(sd)
    client_factory(cl, 1, sets={"client.slots": 2, "rpc.timeout_ms": 2000,
                                "rpc.backoff_min_s": 0.2, "rpc.backoff_max_s": 1})
    b = batch_factory([cl])
    wait_until(lambda: any(n["active"] for n in b.rpc("NODE_LIST")["nodes"]), scaled(20),
               msg="batch sees the host")
    m = meta_factory({"s": b})
    wd = workdir / "wd"
    wd.mkdir()
    env = dict(os.environ, OPS3_FOO="foo%d")
    for i, role in enumerate((m, b, cl)):
        out = workdir / ("out%d" % i)
        extra = ["-p", "1"] if role is cl else []
        r = run(gridnode_bin, "submit", "-e", role.endpoint, *extra, "--export",
                "OPS3_FOO,OPS3_BAR=bar", "--chdir", str(wd), "--shell",
                'echo "$OPS3_FOO $OPS3_BAR $(pwd)" > %s' % out, env=env)
        assert r.returncode == 0, r.stderr
        wait_until(out.exists, scaled(60), msg="job via %s ran" % role.name)
        wait_until(lambda: out.read_text().strip(), scaled(10), msg="written")
        assert out.read_text() == "foo%%d bar %s\n" % wd, (role.name, out.read_text())
    # the batch role and the spool refuse what no cluster would take, before queueing it
    for role in (m, b):
        e = role.connect().err("SUBMIT", "INVALID", argv=["true"], ntasks=1, chdir="rel")
        assert "absolute path" in e["msg"], e
