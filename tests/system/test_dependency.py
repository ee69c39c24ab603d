"""Job dependencies (submit --dependency, issue 27) at the cluster manager and the batch role: Slurm's
afterok / afterany / afternotok / after / singleton, terms joined by , or ?; a waiting job
stays queued with reason "Dependency: TERM"; one that can never hold is cancelled with
"DependencyNeverSatisfied: ..."; bad terms and unknown ids are INVALID naming the term; a
waiting job survives kill -9 of the cluster. Order is checked with time stamps the
tasks write (start and end), not with timing assertions."""

import os
import subprocess

from conftest import FAST_CLIENT, FAST_CLUSTER as FAST, scaled, wait_until

CLIENT = dict(FAST_CLIENT, **{"client.slots": 2})


def run_cli(gridnode_bin, *args, timeout=60):
    return subprocess.run([gridnode_bin] + [str(a) for a in args], capture_output=True,
                          text=True, timeout=scaled(timeout), stdin=subprocess.DEVNULL,
                          env=dict(os.environ))


def stamp_job(cl, d, tag, code=0, dependency=None, name=None, sleep=0.5):
    """A one-task job writing TAG.start / TAG.end (time stamps) into d, then exiting code."""
    script = ('date +%%s.%%N > %s/%s.start; sleep %s; date +%%s.%%N > %s/%s.end; exit %d'
              % (d, tag, sleep, d, tag, code))
    f = {"argv": [script], "shell": True, "ntasks": 1}
    if dependency:
        f["dependency"] = dependency
    if name:
        f["name"] = name
    return cl.client().ok("SUBMIT", "SUBMITTED", **f)["job"]


def job(cl, jid):
    return cl.client().ok("JOB_GET", "JOB", job=jid, tasks=False, output=False)["job"]


def ended(cl, jid):
    return job(cl, jid)["state"] in ("done", "failed", "cancelled")


def stamp(d, tag, which):
    return float((d / ("%s.%s" % (tag, which))).read_text())


def test_workflow_runs_in_order(cluster_factory, client_factory, workdir, gridnode_bin):
    """A; B afterok:A; C afterany:B: each starts after the one before ended; while they
    wait they are queued with the term they wait for (JOB_GET and `gridnode jobs`)."""
    cl = cluster_factory(FAST)
    d = workdir / "wf"
    d.mkdir()
    a = stamp_job(cl, d, "A", sleep=1.5)
    b = stamp_job(cl, d, "B", dependency="afterok:%d" % a)
    r = run_cli(gridnode_bin, "submit", "-e", cl.endpoint, "--dependency", "afterany:%d" % b,
                "--shell", "--", "date +%%s.%%N > %s/C.start; date +%%s.%%N > %s/C.end" % (d, d))
    assert r.returncode == 0, r.stderr
    c = int(r.stdout.split()[2])
    jb, jc = job(cl, b), job(cl, c)
    assert jb["state"] == "queued" and jb["reason"] == "Dependency: afterok:%d" % a, jb
    assert jc["reason"] == "Dependency: afterany:%d" % b and jc["dependency"] == "afterany:%d" % b
    r = run_cli(gridnode_bin, "jobs", "-e", cl.endpoint)
    assert r.returncode == 0 and "Dependency: afterok:%d" % a in r.stdout, r.stdout
    r = run_cli(gridnode_bin, "job", b, "-e", cl.endpoint)
    assert r.returncode == 0 and "reason: Dependency: afterok:%d" % a in r.stdout, r.stdout
    client_factory(cl, 1, sets=CLIENT)
    wait_until(lambda: ended(cl, c), scaled(60), msg="C ended")
    assert [job(cl, x)["state"] for x in (a, b, c)] == ["done"] * 3
    assert stamp(d, "B", "start") >= stamp(d, "A", "end")
    assert stamp(d, "C", "start") >= stamp(d, "B", "end")
    assert "reason" not in job(cl, c) and "dependency" not in job(cl, c)


def test_afternotok_and_never_satisfied(cluster_factory, client_factory, workdir):
    """afternotok runs only after a failure; afterok on a failed job and afternotok on a
    succeeded one are cancelled with DependencyNeverSatisfied naming the term and why;
    `?` holds when any term does."""
    cl = cluster_factory(FAST)
    d = workdir / "nok"
    d.mkdir()
    f = stamp_job(cl, d, "F", code=3)
    s = stamp_job(cl, d, "S")
    g = stamp_job(cl, d, "G", dependency="afternotok:%d" % f)
    h = stamp_job(cl, d, "H", dependency="afterok:%d" % f)
    k = stamp_job(cl, d, "K", dependency="afternotok:%d" % s)
    e = stamp_job(cl, d, "E", dependency="afterok:%d?afterok:%d" % (f, s))
    client_factory(cl, 1, sets=CLIENT)
    wait_until(lambda: all(ended(cl, x) for x in (g, h, k, e)), scaled(60), msg="all ended")
    assert job(cl, f)["state"] == "failed" and job(cl, g)["state"] == "done"
    assert stamp(d, "G", "start") >= stamp(d, "F", "end")
    jh, jk = job(cl, h), job(cl, k)
    assert jh["state"] == "cancelled", jh
    assert jh["reason"] == "DependencyNeverSatisfied: afterok:%d (job %d failed)" % (f, f), jh
    assert jk["state"] == "cancelled", jk
    assert jk["reason"] == "DependencyNeverSatisfied: afternotok:%d (job %d done)" % (s, s), jk
    assert not (d / "H.start").exists() and not (d / "K.start").exists()
    assert job(cl, e)["state"] == "done"


def test_singleton_serializes(cluster_factory, client_factory, workdir):
    """Two singleton jobs of one name and user run one after the other (two slots free);
    a job of another name does not wait."""
    cl = cluster_factory(FAST)
    d = workdir / "single"
    d.mkdir()
    s1 = stamp_job(cl, d, "S1", name="nightly", dependency="singleton", sleep=1)
    s2 = stamp_job(cl, d, "S2", name="nightly", dependency="singleton")
    o = stamp_job(cl, d, "O", name="other", dependency="singleton")
    assert job(cl, s2)["reason"] == "Dependency: singleton"
    client_factory(cl, 1, sets=CLIENT)
    wait_until(lambda: ended(cl, s2) and ended(cl, o), scaled(60), msg="S2 ended")
    assert stamp(d, "S2", "start") >= stamp(d, "S1", "end")
    assert job(cl, s1)["state"] == job(cl, s2)["state"] == job(cl, o)["state"] == "done"


def test_bad_terms_are_invalid(cluster_factory, gridnode_bin):
    """Parse errors and unknown job ids are INVALID naming the term; nothing is stored;
    the CLI says which option."""
    cl = cluster_factory(FAST)
    a = cl.client().ok("SUBMIT", "SUBMITTED", argv=["true"], ntasks=1)["job"]
    for dep, word in [("afterok", "afterok"), ("afterok:x", "'x'"), ("aftercorr:%d" % a,
                      "aftercorr"), ("afterok:%d,after:%d?after:1" % (a, a), "both"),
                      ("afterok:999", "afterok:999"), ("singleton:1", "singleton"),
                      ("", "empty"), ("after:%d+5" % a, "+5")]:
        r = cl.client().err("SUBMIT", "INVALID", argv=["true"], ntasks=1, dependency=dep)
        assert word in r["msg"], (dep, r["msg"])
    cl.client().err("SUBMIT", "FIELD", argv=["true"], ntasks=1, dependency="a" * 1025)
    r = cl.client().ok("JOB_LIST", "JOBS")
    assert [j["job"] for j in r["jobs"]] == [a]
    # a waiting job cancelled: cancelled, no longer waiting for anything
    w = cl.client().ok("SUBMIT", "SUBMITTED", argv=["true"], ntasks=1,
                       dependency="afterok:%d" % a)["job"]
    cl.client().ok("CANCEL", "OK", job=w)
    jw = job(cl, w)
    assert jw["state"] == "cancelled" and "dependency" not in jw and "reason" not in jw, jw
    r = run_cli(gridnode_bin, "submit", "-e", cl.endpoint, "-d", "afterok:77", "--", "true")
    assert r.returncode != 0 and "afterok:77" in r.stderr and "--dependency" in r.stderr, r


def test_waiting_job_survives_kill9(cluster_factory, client_factory, workdir):
    """kill -9 of the cluster while B waits on A and C on B: after the restart both still
    wait (the met term of C is gone, the rest kept), then run in order."""
    cl = cluster_factory(FAST)
    d = workdir / "k9"
    d.mkdir()
    a = stamp_job(cl, d, "A")
    b = stamp_job(cl, d, "B", dependency="afterok:%d" % a)
    c = stamp_job(cl, d, "C", dependency="afterok:%d,afterany:%d" % (a, b))
    cl.restart()
    jb, jc = job(cl, b), job(cl, c)
    assert jb["state"] == "queued" and jb["dependency"] == "afterok:%d" % a, jb
    assert jc["dependency"] == "afterok:%d,afterany:%d" % (a, b), jc
    client_factory(cl, 1, sets=CLIENT)
    wait_until(lambda: ended(cl, c), scaled(60), msg="C ended")
    assert stamp(d, "B", "start") >= stamp(d, "A", "end")
    assert stamp(d, "C", "start") >= stamp(d, "B", "end")
    assert [job(cl, x)["state"] for x in (a, b, c)] == ["done"] * 3


SD = dict(FAST, **{"queues.sync_ms": 100})


def pstamp_job(cl, d, tag, code=0, dependency=None, sleep=0.5):
    """A one-process parallel job writing TAG.start / TAG.end into d."""
    script = ('date +%%s.%%N > %s/%s.start; sleep %s; date +%%s.%%N > %s/%s.end; exit %d'
              % (d, tag, sleep, d, tag, code))
    f = {"argv": [script], "shell": True, "procs": 1, "wait": True}
    if dependency:
        f["dependency"] = dependency
    return cl.client().ok("PSUBMIT", "SUBMITTED", **f)["job"]


def pended(cl, jid):
    return job(cl, jid)["state"] in ("done", "failed", "killed", "cancelled")


def test_parallel_jobs_and_bags_depend_on_each_other(cluster_factory, client_factory, workdir):
    """Parallel P1; bag B afterok:P1; parallel P3 afterany:B run in order; a parallel job
    afterok on a failed one is cancelled with the reason; a waiting parallel job survives
    kill -9 of the cluster; PSUBMIT with hosts and a dependency is INVALID."""
    cl = cluster_factory(SD)
    d = workdir / "par"
    d.mkdir()
    p1 = pstamp_job(cl, d, "P1", sleep=1)
    b = stamp_job(cl, d, "B", dependency="afterok:%d" % p1)
    p3 = pstamp_job(cl, d, "P3", dependency="afterany:%d" % b)
    pf = pstamp_job(cl, d, "PF", code=2)
    pn = pstamp_job(cl, d, "PN", dependency="afterok:%d" % pf)
    j3 = job(cl, p3)
    assert j3["state"] == "waiting" and j3["reason"] == "Dependency: afterany:%d" % b, j3
    assert j3["dependency"] == "afterany:%d" % b
    cl.client().err("PSUBMIT", "INVALID", argv=["true"], procs=1, hosts=["x"],
                    dependency="afterok:%d" % p1)
    cl.client().err("PSUBMIT", "INVALID", argv=["true"], procs=1, dependency="afterok:9999")
    cl.restart()
    assert job(cl, p3)["dependency"] == "afterany:%d" % b
    assert job(cl, b)["dependency"] == "afterok:%d" % p1
    client_factory(cl, 1, sets=CLIENT)
    wait_until(lambda: pended(cl, p3) and pended(cl, pn), scaled(60), msg="P3, PN ended")
    assert job(cl, p1)["state"] == job(cl, b)["state"] == job(cl, p3)["state"] == "done"
    assert stamp(d, "B", "start") >= stamp(d, "P1", "end")
    assert stamp(d, "P3", "start") >= stamp(d, "B", "end")
    jn = job(cl, pn)
    assert jn["state"] == "cancelled", jn
    assert jn["reason"] == "DependencyNeverSatisfied: afterok:%d (job %d failed)" % (pf, pf), jn
    assert not (d / "PN.start").exists()


# ---- the batch role: ids are its own; a waiting job's elements stay out of the engine


def batch_grid(cluster_factory, client_factory, batch_factory):
    cl = cluster_factory(SD)
    client_factory(cl, 1, sets=CLIENT)
    b = batch_factory([cl])
    wait_until(lambda: any(n["active"] for n in b.client().ok("NODE_LIST", "NODES")["nodes"]),
               scaled(20), msg="the batch role sees the host")
    return cl, b


def bstamp(b, d, tag, code=0, dependency=None, name=None, sleep=0.5, parallel=False):
    script = ('date +%%s.%%N > %s/%s.start; sleep %s; date +%%s.%%N > %s/%s.end; exit %d'
              % (d, tag, sleep, d, tag, code))
    f = {"argv": [script], "shell": True}
    f.update({"procs": 1} if parallel else {"ntasks": 1})
    if dependency:
        f["dependency"] = dependency
    if name:
        f["name"] = name
    return b.client().ok("PSUBMIT" if parallel else "SUBMIT", "SUBMITTED", **f)["job"]


def test_batch_workflow_never_singleton_kill9(cluster_factory, client_factory, batch_factory,
                                              workdir, gridnode_bin):
    """At the batch role: A; B afterok:A (parallel); C afterany:B run in order, through a
    kill -9 of the batch role while B and C wait; afterok on a failed job is cancelled
    with DependencyNeverSatisfied, afternotok runs; singleton serializes; bad terms and
    ids unknown here are INVALID; showq-style reason Dependency."""
    cl, b = batch_grid(cluster_factory, client_factory, batch_factory)
    d = workdir / "bwf"
    d.mkdir()
    for dep, word in [("afterok:x", "'x'"), ("afterok:1,after:1?after:1", "both"),
                      ("afterok:4242", "afterok:4242")]:
        r = b.client().err("SUBMIT", "INVALID", argv=["true"], ntasks=1, dependency=dep)
        assert word in r["msg"], (dep, r["msg"])
    a = bstamp(b, d, "A", sleep=1.5)
    bb = bstamp(b, d, "B", dependency="afterok:%d" % a, parallel=True)
    c = bstamp(b, d, "C", dependency="afterany:%d" % bb)
    f = bstamp(b, d, "F", code=1)
    g = bstamp(b, d, "G", dependency="afternotok:%d" % f)
    h = bstamp(b, d, "H", dependency="afterok:%d" % f)
    s1 = bstamp(b, d, "S1", name="nightly", dependency="singleton", sleep=1)
    s2 = bstamp(b, d, "S2", name="nightly", dependency="singleton")
    jc = b.client().ok("JOB_GET", "JOB", job=c)["job"]
    assert jc["state"] == "queued" and jc["reason"] == "Dependency: afterany:%d" % bb, jc
    b.restart()
    jb = b.client().ok("JOB_GET", "JOB", job=bb)["job"]
    if not (d / "A.end").exists():  # A still ran when B was read: B must still wait
        assert jb["dependency"] == "afterok:%d" % a and jb["state"] == "queued", jb
    r = run_cli(gridnode_bin, "jobs", "-e", b.endpoint)
    assert r.returncode == 0, r.stderr

    def ended(x):
        return b.client().ok("JOB_GET", "JOB", job=x)["job"]["state"] in (
            "done", "failed", "cancelled")

    wait_until(lambda: all(ended(x) for x in (c, g, h, s2)), scaled(90), msg="all ended")
    st = {x: b.client().ok("JOB_GET", "JOB", job=x)["job"] for x in (a, bb, c, g, h, s1, s2)}
    assert [st[x]["state"] for x in (a, bb, c, g, s1, s2)] == ["done"] * 6, st
    assert stamp(d, "B", "start") >= stamp(d, "A", "end")
    assert stamp(d, "C", "start") >= stamp(d, "B", "end")
    assert stamp(d, "G", "start") >= stamp(d, "F", "end")
    assert stamp(d, "S2", "start") >= stamp(d, "S1", "end")
    assert st[h]["state"] == "cancelled", st[h]
    assert st[h]["reason"] == "DependencyNeverSatisfied: afterok:%d (job %d failed)" % (f, f)
    assert not (d / "H.start").exists()


# ---- the grid spool: ids are the spool's; a waiting job is not placed


def test_spool_workflow_never_kill9(cluster_factory, client_factory, batch_factory,
                                    meta_factory, workdir, gridnode_bin):
    """At the spool over a batch site: A; B afterok:A; C afterany:B run in order through
    a kill -9 of the spool while they wait (the dependency is not sent to the site: its
    ids are the spool's); afterok on a failed job is cancelled with the reason; bad terms
    are INVALID; `gridnode jobs` shows the reason."""
    cl, b = batch_grid(cluster_factory, client_factory, batch_factory)
    m = meta_factory({"s1": b})
    d = workdir / "spool"
    d.mkdir()
    for dep, word in [("afterok:x", "'x'"), ("afterok:4242", "afterok:4242"),
                      ("singleton:2", "singleton")]:
        r = m.client().err("SUBMIT", "INVALID", argv=["true"], ntasks=1, dependency=dep)
        assert word in r["msg"], (dep, r["msg"])
    a = bstamp(m, d, "A", sleep=1.5)
    bb = bstamp(m, d, "B", dependency="afterok:%d" % a, parallel=True)
    c = bstamp(m, d, "C", dependency="afterany:%d" % bb)
    f = bstamp(m, d, "F", code=1)
    h = bstamp(m, d, "H", dependency="afterok:%d" % f)
    g = bstamp(m, d, "G", dependency="afternotok:%d" % f)
    s1 = bstamp(m, d, "S1", name="nightly", dependency="singleton", sleep=1)
    s2 = bstamp(m, d, "S2", name="nightly", dependency="singleton")
    r = run_cli(gridnode_bin, "jobs", "-e", m.endpoint)
    assert r.returncode == 0 and "Dependency: afterany:%d" % bb in r.stdout, r.stdout
    m.restart()
    jc = m.client().ok("JOB_GET", "JOB", job=c)["job"]
    if not (d / "B.end").exists():  # B had not ended when C was read: C must still wait
        assert jc["dependency"] == "afterany:%d" % bb, jc
        assert jc["reason"] == "Dependency: afterany:%d" % bb, jc

    def ended(x):
        return m.client().ok("JOB_GET", "JOB", job=x)["job"]["state"] in (
            "done", "failed", "cancelled")

    wait_until(lambda: all(ended(x) for x in (c, g, h, s2)), scaled(120), msg="all ended")
    st = {x: m.client().ok("JOB_GET", "JOB", job=x)["job"] for x in (a, bb, c, g, h, s1, s2)}
    assert [st[x]["state"] for x in (a, bb, c, g, s1, s2)] == ["done"] * 6, st
    assert stamp(d, "S2", "start") >= stamp(d, "S1", "end")
    assert stamp(d, "B", "start") >= stamp(d, "A", "end")
    assert stamp(d, "C", "start") >= stamp(d, "B", "end")
    assert stamp(d, "G", "start") >= stamp(d, "F", "end")
    assert st[h]["state"] == "cancelled", st[h]
    assert st[h]["reason"] == "DependencyNeverSatisfied: afterok:%d (job %d failed)" % (f, f)
    assert not (d / "H.start").exists()


def test_other_users_jobs_admins_only(cluster_factory, batch_factory, meta_factory, workdir):
    """With CURVE on, a term naming another user's job is INVALID for a user (it may not
    wait on, nor learn of, others' jobs); the owner and an admin may; at every level."""
    from test_authz import Keys
    k = Keys(workdir / "keys").add("alice", "user").add("bob", "user")
    cl = cluster_factory(dict(FAST, **k.sets()))
    b = batch_factory([cl], sets=k.sets())
    m = meta_factory({"s1": b}, sets=k.sets())
    for role in (cl, b, m):
        a = k.rpc(role.endpoint, "alice").ok("SUBMIT", "SUBMITTED", argv=["true"],
                                              ntasks=1)["job"]
        dep = "afterany:%d" % a
        r = k.rpc(role.endpoint, "bob").err("SUBMIT", "INVALID", argv=["true"], ntasks=1,
                                             dependency=dep)
        assert "another user" in r["msg"] and dep in r["msg"], r
        k.rpc(role.endpoint, "alice").ok("SUBMIT", "SUBMITTED", argv=["true"], ntasks=1,
                                         dependency=dep)
        role.client().ok("SUBMIT", "SUBMITTED", argv=["true"], ntasks=1, dependency=dep)
