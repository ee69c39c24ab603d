"""The grid spool forgets ended jobs as a cluster does (docs/wire.md 6.10, docs/meta.md
"Purge and retention"): `gridnode purge -e SPOOL` (administrators only), refusals that name
the job and purge nothing, the accounting record kept, the files only purged jobs named
swept, kill -9 right after the reply, and jobs.retention_s."""

import signal

from conftest import TYPES, scaled, wait_until
from test_authz import Keys
from test_data import run_cli, sha, stored_path, submit_three_tasks
from test_data_batch import grid
from test_data_meta import wait_spool

T = TYPES


def test_purge_at_the_spool(cluster_factory, client_factory, batch_factory, meta_factory,
                            gridnode_bin, tmp_path, workdir):
    k = Keys(workdir / "keys").add("alice", "user")
    cl, b = grid(cluster_factory, client_factory, batch_factory)
    m = meta_factory({"site": b}, sets=dict(k.sets(), **{"files.keep_s": 0}))
    jid, shared = submit_three_tasks(gridnode_bin, m.endpoint, tmp_path)
    assert wait_spool(m, jid)["job"]["state"] == "done"
    held = m.client().ok("SUBMIT", "SUBMITTED", argv=["true"], ntasks=1, limit_s=60,
                         hold=True)["job"]
    u = m.client()
    # refusals name the job and purge nothing
    e = u.err("PURGE", "STATE", jobs=[jid, held])
    assert "job %d is queued" % held in e["msg"] and "nothing was purged" in e["msg"], e
    e = u.err("PURGE", "NOT_FOUND", jobs=[jid, 99999])
    assert "no job 99999" in e["msg"], e
    assert u.ok("JOB_GET", "JOB", job=jid)["job"]["state"] == "done"
    # a user may not purge, even its own jobs (as at the cluster)
    e = k.rpc(m.endpoint, "alice").err(T["PURGE"], "DENIED", jobs=[jid])
    assert "alice" in e["msg"], e
    # the tool, as against a cluster
    r = run_cli(gridnode_bin, "purge", "-e", m.endpoint, jid)
    assert r.returncode == 0 and str(jid) in r.stdout, (r.stdout, r.stderr)
    u.err("JOB_GET", "NOT_FOUND", job=jid)
    assert all(j["job"] != jid for j in u.ok("JOB_LIST", "JOBS")["jobs"])
    acct = u.ok("ACCT", "ACCTS")["rows"]
    assert [a["state"] for a in acct if a["job"] == jid] == ["done"], acct
    # its inputs and copied outputs, named by no job now, are swept (files.keep_s 0)
    wait_until(lambda: not stored_path(m, sha(shared)).exists(), scaled(30),
               msg="the purged job's input swept at the spool")
    # kill -9 right after: still purged, and its id is not given again
    m.restart(signal.SIGKILL)
    u = m.client()
    u.err("JOB_GET", "NOT_FOUND", job=jid)
    assert u.ok("JOB_GET", "JOB", job=held)["job"]["state"] == "held"
    new = u.ok("SUBMIT", "SUBMITTED", argv=["true"], ntasks=1, limit_s=60, hold=True)["job"]
    assert new > held > jid
    assert m.alive() and b.alive() and cl.alive()


def test_retention_at_the_spool(cluster_factory, client_factory, batch_factory, meta_factory):
    cl, b = grid(cluster_factory, client_factory, batch_factory)
    m = meta_factory({"site": b}, sets={"jobs.retention_s": 1})
    u = m.client()
    jid = u.ok("SUBMIT", "SUBMITTED", argv=["true"], ntasks=1, limit_s=60)["job"]
    kept = u.ok("SUBMIT", "SUBMITTED", argv=["true"], ntasks=1, limit_s=60, hold=True)["job"]
    wait_until(lambda: u.call("JOB_GET", job=jid)["t"] == TYPES["ERROR"], scaled(90),
               msg="the ended job purged by the retention")
    assert "retention: 1 ended job(s)" in m.log()
    assert u.ok("JOB_GET", "JOB", job=kept)["job"]["state"] == "held"
    assert [a["job"] for a in u.ok("ACCT", "ACCTS")["rows"]] == [jid]


def test_a_job_its_site_purged_before_the_spool_saw_it_end_is_not_placed_again(
        cluster_factory, client_factory, batch_factory, meta_factory):
    """A level that followed a job and hears NOT_FOUND for it places it again (the level
    below lost it) unless the ERROR says `purged`: then the job ended there, may have run
    whole, and ends failed here with a reason saying so. Every level says `purged` for
    an id below its next one, and only then."""
    import os
    cl, b = grid(cluster_factory, client_factory, batch_factory)
    m = meta_factory({"site": b})
    u = m.client()
    jid = u.ok("SUBMIT", "SUBMITTED", argv=["sleep", "2"], ntasks=1, limit_s=60)["job"]
    wait_until(lambda: u.ok("JOB_GET", "JOB", job=jid)["job"].get("site_job"), scaled(30),
               msg="the job placed at the batch site")
    sjob = u.ok("JOB_GET", "JOB", job=jid)["job"]["site_job"]
    os.kill(m.proc.pid, signal.SIGSTOP)  # the spool hears nothing while the site purges
    try:
        wait_until(lambda: b.client().ok("JOB_GET", "JOB", job=sjob)["job"]["state"] == "done",
                   scaled(30), msg="the site's job done")
        b.client().ok("PURGE", "PURGED", jobs=[sjob])
    finally:
        os.kill(m.proc.pid, signal.SIGCONT)
    e = b.client().err("JOB_GET", "NOT_FOUND", job=sjob)
    assert e.get("purged") is True and "purged" in e["msg"], e
    assert "purged" not in b.client().err("JOB_GET", "NOT_FOUND", job=10 ** 9)
    wait_until(lambda: u.ok("JOB_GET", "JOB", job=jid)["job"]["state"] != "running" and
               u.ok("JOB_GET", "JOB", job=jid)["job"]["state"] != "queued", scaled(30),
               msg="the spool to hear of the purge")
    j = u.ok("JOB_GET", "JOB", job=jid)["job"]
    assert j["state"] == "failed" and "purged its job %d" % sjob in j["reason"], j
    assert [x["job"] for x in b.client().ok("JOB_LIST", "JOBS")["jobs"]] == [], \
        "the spool placed the job again"
    # the cluster and the spool say `purged` the same way
    cj = cl.client().ok("SUBMIT", "SUBMITTED", argv=["true"], ntasks=1)["job"]
    wait_until(lambda: cl.client().ok("JOB_GET", "JOB", job=cj)["job"]["state"] == "done",
               scaled(30), msg="a cluster job done")
    cl.client().ok("PURGE", "PURGED", jobs=[cj])
    assert cl.client().err("JOB_GET", "NOT_FOUND", job=cj).get("purged") is True
    assert "purged" not in cl.client().err("JOB_GET", "NOT_FOUND", job=10 ** 9)
    u.ok("PURGE", "PURGED", jobs=[jid])
    assert u.err("JOB_GET", "NOT_FOUND", job=jid).get("purged") is True
    assert "purged" not in u.err("JOB_GET", "NOT_FOUND", job=10 ** 9)
