"""Maui's showbf, checknode and showstats at the batch role (issue 27): the backfill
windows from the scheduler's plan, one host's state, jobs and features, and the site's
statistics from the accounting records (kept across kill -9). Tables by default,
--json for scripts, usage errors exit 2, a refusal or a role without them exits 1."""

import json
import os
import subprocess

from conftest import FAST_CLIENT, FAST_CLUSTER as FAST, scaled, wait_until

SD = dict(FAST, **{"queues.sync_ms": 100})
CLIENT = dict(FAST_CLIENT, **{"client.slots": 2, "client.features": "gpu"})


def cli(gridnode_bin, *args, timeout=60):
    return subprocess.run([gridnode_bin] + [str(a) for a in args], capture_output=True,
                          text=True, timeout=scaled(timeout), stdin=subprocess.DEVNULL,
                          env=dict(os.environ))


def jcli(gridnode_bin, *args):
    r = cli(gridnode_bin, *args, "--json")
    assert r.returncode == 0, r
    return json.loads(r.stdout)


def grid(cluster_factory, client_factory, batch_factory):
    cl = cluster_factory(SD)
    client_factory(cl, 1, sets=CLIENT)
    b = batch_factory([cl])
    wait_until(lambda: any(n["active"] for n in b.client().ok("NODE_LIST", "NODES")["nodes"]),
               scaled(20), msg="the batch role sees the host")
    return cl, b


def state(b, jid):
    return b.client().ok("JOB_GET", "JOB", job=jid)["job"]["state"]


def test_showbf_and_checknode(cluster_factory, client_factory, batch_factory, gridnode_bin):
    """An idle 2-core host: 2 procs for ever. One core running a 60 s job: 1 proc for
    ever; a queued 2-process job reserved at that job's end: 1 proc until then.
    checknode shows the host running that job, its features; unknown hosts and bad
    usage are refused."""
    cl, b = grid(cluster_factory, client_factory, batch_factory)
    ep = b.endpoint
    bf = jcli(gridnode_bin, "showbf", "-e", ep)
    assert [(w["procs"], w["duration_s"]) for w in bf["windows"]] == [(2, -1)], bf
    r = cli(gridnode_bin, "showbf", "-e", ep)
    assert r.returncode == 0 and "2 procs available for INFINITY" in r.stdout, r
    j1 = b.client().ok("PSUBMIT", "SUBMITTED", argv=["sleep", "30"], procs=1,
                       limit_s=60)["job"]
    wait_until(lambda: state(b, j1) == "running", scaled(30), msg="job 1 runs")
    wait_until(lambda: jcli(gridnode_bin, "showbf", "-e", ep)["windows"][0]["procs"] == 1,
               scaled(10), msg="one core left")
    j2 = b.client().ok("PSUBMIT", "SUBMITTED", argv=["true"], procs=2, limit_s=10)["job"]

    def reserved_window():
        w = jcli(gridnode_bin, "showbf", "-e", ep)["windows"]
        return len(w) == 1 and w[0]["procs"] == 1 and 0 <= w[0]["duration_s"] <= 60
    wait_until(reserved_window, scaled(10), msg="a window until job 2's reservation")
    node = jcli(gridnode_bin, "checknode", "node1", "-e", ep)
    assert node["state"] == "running" and node["jobs"] == [j1], node
    assert node["cores"] == 2 and node["cores_busy"] == 1, node
    assert "gpu" in node["features"].split(","), node
    r = cli(gridnode_bin, "checknode", "node1", "-e", ep)
    assert r.returncode == 0 and "gpu" in r.stdout and "1 of 2 busy" in r.stdout, r
    r = cli(gridnode_bin, "checknode", "nosuchhost", "-e", ep)
    assert r.returncode == 1 and "no host 'nosuchhost'" in r.stderr, r
    r = cli(gridnode_bin, "checknode", "-e", ep)
    assert r.returncode == 2, r
    r = cli(gridnode_bin, "showbf", "-c", "nosuchclass", "-e", ep)
    assert r.returncode == 1 and "nosuchclass" in r.stderr, r
    r = cli(gridnode_bin, "showbf", "-e", cl.endpoint)  # a cluster has no such command
    assert r.returncode == 1, r
    b.client().ok("CANCEL", "OK", job=j1)
    b.client().ok("CANCEL", "OK", job=j2)


def test_showstats_from_accounting(cluster_factory, client_factory, batch_factory,
                                   gridnode_bin):
    """Three jobs end (two done, one failed): showstats counts them with their wait and
    expansion factor; the figures come from the accounting records, so a kill -9 of the
    batch role keeps them; --since in the future counts none; bad --since is usage."""
    cl, b = grid(cluster_factory, client_factory, batch_factory)
    ep = b.endpoint
    jobs = [b.client().ok("SUBMIT", "SUBMITTED", argv=["true"], ntasks=1)["job"],
            b.client().ok("PSUBMIT", "SUBMITTED", argv=["true"], procs=2)["job"],
            b.client().ok("SUBMIT", "SUBMITTED", argv=["false"], ntasks=1)["job"]]
    wait_until(lambda: all(state(b, j) in ("done", "failed") for j in jobs), scaled(60),
               msg="the jobs ended")
    st = jcli(gridnode_bin, "showstats", "-e", ep)
    assert st["jobs"] == 3 and st["done"] == 2 and st["failed"] == 1, st
    assert st["started"] == 3 and st["avg_wait_s"] >= 0 and st["avg_xfactor"] >= 1, st
    assert st["cores_up"] == 2 and st["queued"] == 0, st
    r = cli(gridnode_bin, "showstats", "-e", ep)
    assert r.returncode == 0 and "jobs ended      3" in r.stdout and "xfactor" in r.stdout, r
    b.restart()
    again = jcli(gridnode_bin, "showstats", "-e", ep)
    assert (again["jobs"], again["done"], again["failed"]) == (3, 2, 1), again
    none = jcli(gridnode_bin, "showstats", "-e", ep, "--since", "99999999999")
    assert none["jobs"] == 0, none
    recent = jcli(gridnode_bin, "showstats", "-e", ep, "--since", "-1:00:00")
    assert recent["jobs"] == 3, recent
    r = cli(gridnode_bin, "showstats", "-e", ep, "--since", "yesterday")
    assert r.returncode == 2 and "--since" in r.stderr, r


def test_batch_check_config_lists_every_error(gridnode_bin, workdir):
    """`gridnode batch --check-config` names every bad line of the file at once (value,
    unknown key, syntax, credential section, live section), each with its line, not
    only the first; the shipped file passes."""
    bad = workdir / "bad.ini"
    bad.write_text("[scheduler]\nreservationdepth = abc\nbackfillpolicy = sideways\n"
                   "bogus = 1\nnot a key line\n[user alice]\npriority = x\n"
                   "[batch]\nmax_array = 0\n")
    r = cli(gridnode_bin, "batch", "--check-config", "-c", bad)
    assert r.returncode == 1, r
    lines = [x for x in r.stderr.splitlines() if x.startswith("gridnode batch: ")]
    want = [(2, "reservationdepth"), (3, "backfillpolicy"), (4, "unknown key 'bogus'"),
            (5, "syntax error"), (7, "priority"), (9, "max_array")]
    assert len(lines) == len(want), r.stderr
    for line, (n, word) in zip(lines, want):
        assert ("bad.ini:%d: " % n) in line and word in line, (line, n, word)
    shipped = os.path.join(os.path.dirname(__file__), "..", "..", "configs", "batch.ini")
    r = cli(gridnode_bin, "batch", "--check-config", "-c", shipped)
    assert r.returncode == 0, r


def test_plain_group_must_exist(cluster_factory, gridnode_bin):
    """`submit -p --group G` at a cluster manager, plain or from an administrator naming
    the user: G is a group of its host (the queue group rules ask the host about it)
    and the user, when the host knows it, a member; for a user identity its keys
    entry's groups decide (test_security)."""
    cl = cluster_factory(SD)
    c = cl.client()
    r = c.err("PSUBMIT", "INVALID", argv=["true"], procs=1, group="nosuchgroup27")
    assert "group 'nosuchgroup27' is not a group" in r["msg"], r
    r = c.err("PSUBMIT", "INVALID", argv=["true"], procs=1, user="nobody", group="root")
    assert "not a member of group 'root'" in r["msg"], r
    c.ok("PSUBMIT", "SUBMITTED", argv=["true"], procs=1, user="root", group="root", wait=True)
    r = cli(gridnode_bin, "submit", "-e", cl.endpoint, "-p", "1", "--group", "nosuchgroup27",
            "--", "true")
    assert r.returncode != 0 and "nosuchgroup27" in r.stderr, r


def test_diagnose_nodes_and_jobs(cluster_factory, client_factory, batch_factory, gridnode_bin):
    """diagnose -n: the host with its cores, features and the running job, no problem.
    diagnose -j: the running job (no problem), a held job and a job waiting on a
    dependency each with a problem that says so; paging with --json
    gives the same rows; bad usage exits 2. (A user key seeing only its own jobs is
    the same curve_may_touch filter as CHECKJOB's, tested in test_security: this file
    has no user keys.)"""
    cl, b = grid(cluster_factory, client_factory, batch_factory)
    ep = b.endpoint
    c = b.client()
    run = c.ok("PSUBMIT", "SUBMITTED", argv=["sleep", "30"], procs=1, limit_s=60)["job"]
    wait_until(lambda: state(b, run) == "running", scaled(30), msg="the job runs")
    held = c.ok("PSUBMIT", "SUBMITTED", argv=["true"], procs=1, limit_s=60, hold=True)["job"]
    # jobs no host can ever hold (a feature none has, two ranks one a host on one host)
    # are refused at submission already; a job waiting on a dependency is accepted
    dep = c.ok("PSUBMIT", "SUBMITTED", argv=["true"], procs=1, limit_s=60,
                dependency="afterok:%d" % run)["job"]

    nodes = jcli(gridnode_bin, "diagnose", "-n", "-e", ep)
    assert [n["node"] for n in nodes] == ["node1"], nodes
    n = nodes[0]
    assert n["cores"] == 2 and n["cores_busy"] == 1 and n["jobs"] == [run], n
    assert n["state"] == "running" and "gpu" in n["features"].split(","), n
    assert n["problem"] == "" and n["reservations"] == [], n
    r = cli(gridnode_bin, "diagnose", "-n", "-e", ep)
    assert r.returncode == 0 and "node1" in r.stdout and "2(1)" in r.stdout, r
    assert str(run) in r.stdout.splitlines()[1], r

    def rows():
        return {j["job"]: j for j in jcli(gridnode_bin, "diagnose", "-j", "-e", ep)}
    wait_until(lambda: "Dependency" in rows().get(dep, {}).get("problem", ""),
               scaled(20), msg="the dependency shows")
    jobs = rows()
    assert set(jobs) == {run, held, dep}, jobs
    assert jobs[run]["state"] == "active" and jobs[run]["problem"] == "", jobs[run]
    assert jobs[run]["hosts"] == ["node1"] and jobs[run]["started"] > 0, jobs[run]
    assert jobs[run]["walltime_s"] == 60 and jobs[run]["procs"] == 1, jobs[run]
    assert jobs[held]["state"] == "blocked" and "held" in jobs[held]["problem"], jobs[held]
    assert jobs[dep]["hosts"] == [] and jobs[dep]["started"] == 0, jobs[dep]
    r = cli(gridnode_bin, "diagnose", "-j", "-e", ep)
    assert r.returncode == 0 and "Dependency" in r.stdout and "held" in r.stdout, r
    # paging: one row a page gives the same rows in the same order
    paged = b.client()
    got, frm = [], 0
    for _ in range(10):
        p = paged.ok("DIAGNOSE", "DIAG", what="jobs", count=1, **({"from": frm}))
        got += [j["job"] for j in p["jobs"]]
        if "next" not in p:
            break
        frm = p["next"]
    assert got == sorted(jobs), got
    r = cli(gridnode_bin, "diagnose", "-x", "-e", ep)
    assert r.returncode == 2, r
    bad = c.err("DIAGNOSE", "INVALID", what="bogus")
    assert "nodes" in bad["msg"] and "jobs" in bad["msg"], bad
    for j in (dep, held, run):  # dep first: cancelling run ends dep
        c.ok("CANCEL", "OK", job=j)
    wait_until(lambda: jcli(gridnode_bin, "diagnose", "-j", "-e", ep) == [], scaled(20),
               msg="cancelled jobs leave diagnose -j")
