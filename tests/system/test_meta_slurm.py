"""System tests of a real Slurm cluster as a metascheduler site (issue 14): a private
single-node Slurm on loopback (tests/system/slurmlocal.py) beside a gridnode batch site,
under one `gridnode meta`. Skipped, with the reason, where Slurm cannot run (not root,
not installed). Every wait is bounded and generous; no test asserts on speed."""

import signal

import pytest

import slurmlocal
from conftest import TYPES, scaled, wait_until
from test_meta_live import T, mjob, resvs, site, wait_gstate

pytestmark = pytest.mark.skipif(slurmlocal.unavailable() is not None,
                                reason=str(slurmlocal.unavailable()))

FAST = {"meta.estimate_timeout_ms": 2000, "meta.reeval_s": 0}


@pytest.fixture(scope="module")
def slurm():
    s = slurmlocal.SlurmLocal(cpus=4, features="ssd,avx2")  # features: issue 27
    try:
        s.up()
    except Exception as e:  # noqa: BLE001 - the reason goes into the skip
        s.down()
        pytest.skip("cannot start a private Slurm: %s" % e)
    yield s
    s.down()


@pytest.fixture
def hpc(slurm):
    """The Slurm site's URL, with a clean cluster before and after the test (short: the
    whole meta.sites value must fit in 160 bytes)."""
    if "slurmctld" not in slurm.pids:
        slurm.start_ctld()
    slurm.clean()
    yield "slurm://%s?partition=debug&dir=%s" % (slurm.conf, slurm.out)
    if "slurmctld" not in slurm.pids:
        slurm.start_ctld()
    slurm.clean()


def meta_jobs_at_slurm(slurm, m, jid):
    """Slurm's jobs made by this spool (their name is the spool's key meta:<inc>:<job>.<n>;
    the incarnation is in the reservation name m<inc>-<job>-<n> of its job jid)."""
    inc = mjob(m, jid)["resv"][1:].split("-")[0]
    assert inc
    return [j for j in slurm.jobs() if j["name"].startswith("meta:%s:" % inc)]


def submit(m, cmd, procs=1, limit_s=60):
    return m.rpc(T["PSUBMIT"], argv=[cmd], shell=True, procs=procs, limit_s=limit_s)["job"]


def test_placed_by_estimate_on_both_and_busy_loses_to_idle(
        slurm, hpc, cluster_factory, client_factory, batch_factory, meta_factory, workdir):
    gn = site(cluster_factory, client_factory, batch_factory, "gn", slots=2)
    m = meta_factory({"gn": gn, "hpc": hpc}, sets=FAST)
    wait_until(lambda: all(s["known"] for s in m.rpc(T["SITE_INFO"])["sites"]), scaled(30),
               msg="both sites known")
    info = {s["name"]: s for s in m.rpc(T["SITE_INFO"])["sites"]}
    assert info["hpc"]["cores"] == 4 and info["hpc"]["largest_procs"] == 4, info
    # gridnode busy for a minute: the job goes to the idle Slurm site, into a reservation
    gn.rpc(T["PSUBMIT"], argv=["sleep 60"], shell=True, procs=2, limit_s=120)
    mark = workdir / "ran-at-slurm"
    jid = submit(m, "echo here > %s; sleep 5" % mark, procs=2)
    j = wait_gstate(m, jid, ("running",), timeout=60)
    assert j["site"] == "hpc" and j["site_job"] > 0 and j["resv"].startswith("m"), j
    # Slurm runs it in the spool's reservation
    sj = [x for x in slurm.jobs() if x["id"] == j["site_job"]]
    assert sj and sj[0]["resv"] == j["resv"] and sj[0]["state"] == "RUNNING", sj
    j = wait_gstate(m, jid, ("done", "failed"), timeout=60)
    assert j["gstate"] == "done" and mark.read_text().strip() == "here", j
    sj = [x for x in slurm.jobs() if x["id"] == j["site_job"]]
    assert sj and sj[0]["state"] == "COMPLETED", sj
    wait_until(lambda: j["resv"] not in slurm.resvs(), scaled(30), msg="reservation released")
    # now Slurm is full for minutes and gridnode frees up: the next job goes to gridnode
    for row in gn.rpc(T["JOB_LIST"])["jobs"]:
        if row["state"] not in ("done", "cancelled", "failed", "killed"):
            gn.client().ok(T["CANCEL"], job=row["job"])
    slurm.sbatch("-n", "4", "-t", "5", "--wrap", "sleep 300")
    wait_until(lambda: any(x["state"] == "RUNNING" for x in slurm.jobs()), scaled(30),
               msg="Slurm busy")
    jid2 = submit(m, "true", procs=2)
    j = wait_gstate(m, jid2, ("done", "failed"), timeout=60)
    assert j["gstate"] == "done" and j["site"] == "gn", j
    assert len(meta_jobs_at_slurm(slurm, m, jid)) == 1  # only the first one went there
    assert m.alive()


def test_cancel_reaches_slurm(slurm, hpc, meta_factory):
    m = meta_factory({"hpc": hpc}, sets=FAST)
    jid = submit(m, "sleep 120", limit_s=180)
    j = wait_gstate(m, jid, ("running",), timeout=60)
    sid = j["site_job"]
    assert [x for x in slurm.jobs() if x["id"] == sid][0]["state"] == "RUNNING"
    m.client().ok(T["CANCEL"], job=jid)
    assert mjob(m, jid)["gstate"] == "cancelled"
    wait_until(lambda: [x for x in slurm.jobs() if x["id"] == sid][0]["state"] == "CANCELLED",
               scaled(30), msg="cancelled at Slurm")
    wait_until(lambda: j["resv"] not in slurm.resvs(), scaled(40), msg="reservation released")
    m.client().err(T["CANCEL"], "STATE", job=jid)


def test_kill9_mid_placement_no_duplicate_no_stray(slurm, hpc, meta_factory):
    m = meta_factory({"hpc": hpc}, sets=dict(FAST, **{"store.sync": "full"}))
    wait_until(lambda: m.rpc(T["SITE_INFO"])["sites"][0]["known"], scaled(30),
               msg="site known")
    ids = [submit(m, "sleep 1", limit_s=30) for _ in range(6)]
    # killed while placements are under way: some job reserved or submitted, not all
    wait_until(lambda: any(mjob(m, i)["gstate"] != "queued" for i in ids), scaled(30),
               interval=0.005, msg="a placement under way")
    m.kill(signal.SIGKILL)
    m.restart()
    for jid in ids:
        wait_gstate(m, jid, ("done",), timeout=90)
    # each job ran exactly once at Slurm: one non-cancelled Slurm job per spool job
    ran = {}
    for x in meta_jobs_at_slurm(slurm, m, ids[0]):
        if x["state"] != "CANCELLED":
            gid = int(x["name"].split(":")[2].split(".")[0])
            ran[gid] = ran.get(gid, 0) + 1
    assert sorted(ran) == sorted(ids) and set(ran.values()) == {1}, ran
    # and no reservation of the spool is left behind (the sweep runs when the site is up)
    wait_until(lambda: not [r for r in slurm.resvs() if r.startswith("m")], scaled(40),
               msg="no reservation of the spool left at Slurm")


@pytest.mark.slow  # ~16 s under ASan; the plain run covers it
def test_slurm_outage_sends_jobs_elsewhere(
        slurm, hpc, cluster_factory, client_factory, batch_factory, meta_factory):
    gn = site(cluster_factory, client_factory, batch_factory, "gn", slots=2)
    m = meta_factory({"gn": gn, "hpc": hpc}, sets=dict(FAST, **{"meta.site_down_s": 3}))
    wait_until(lambda: all(s["known"] for s in m.rpc(T["SITE_INFO"])["sites"]), scaled(30),
               msg="both sites known")
    # gridnode busy for 15 s: with Slurm up the job would go there; Slurm's controller stops
    gn.rpc(T["PSUBMIT"], argv=["sleep 15"], shell=True, procs=2, limit_s=30)
    slurm.stop("slurmctld")
    wait_until(lambda: not {s["name"]: s for s in m.rpc(T["SITE_INFO"])["sites"]}["hpc"]["up"],
               scaled(30), msg="the Slurm site seen down")
    jid = submit(m, "true", procs=1)
    j = wait_gstate(m, jid, ("done", "failed"), timeout=90)
    assert j["gstate"] == "done" and j["site"] == "gn", j
    assert m.alive()
    # Slurm back: the site comes up again and takes work
    slurm.start_ctld()
    wait_until(lambda: {s["name"]: s for s in m.rpc(T["SITE_INFO"])["sites"]}["hpc"]["up"],
               scaled(60), msg="the Slurm site up again")
    assert TYPES["SUBMIT"] == T["SUBMIT"]


def test_jobs_run_as_the_site_identity(slurm, hpc, meta_factory):
    """user=NAME: the job runs under that account at Slurm (sbatch as NAME), its
    reservation is for NAME; the grid user is in the job's comment."""
    import os
    os.chmod(slurm.out, 0o777)
    m = meta_factory({"hpc": hpc + "&user=nobody"}, sets=FAST)
    who = os.path.join(slurm.out, "who")
    jid = m.rpc(T["PSUBMIT"], argv=["id -un > %s" % who], shell=True, procs=1, limit_s=60,
                user="alice")["job"]
    j = wait_gstate(m, jid, ("done", "failed"), timeout=60)
    assert j["gstate"] == "done" and j["site"] == "hpc", j
    with open(who) as f:
        assert f.read().strip() == "nobody"
    r = slurm.run("squeue", "-h", "-t", "all", "-j", str(j["site_job"]), "-O",
                  "UserName:|,Comment:|")
    assert r.stdout.startswith("nobody|") and "user alice" in r.stdout, r.stdout


def test_features_and_constraint(slurm, hpc, meta_factory):
    """issue 27: the Slurm site reports its nodes' features (sinfo %f) as a batch site
    does (SITE features, feature_hosts), so the spool's --constraint eligibility works
    for it: a job its node satisfies goes there, with --constraint passed on to sbatch
    (and the reservation's Features); one it cannot satisfy is INVALID naming the site
    and the features its hosts have; a count beyond its nodes with the feature too."""
    m = meta_factory({"hpc": hpc}, sets=FAST)

    def row():
        return m.client().ok("SITE_INFO", "SITE")["sites"][0]
    wait_until(lambda: row()["known"] and row()["features"], scaled(30),
               msg="the Slurm site's features known")
    r = row()
    assert r["features"] == ["avx2,ssd"] and r["feature_hosts"] == [1], r
    jid = m.rpc(T["PSUBMIT"], argv=["true"], shell=True, procs=1, limit_s=60,
                constraint="ssd & avx2")["job"]
    j = wait_gstate(m, jid, ("done", "failed"), timeout=60)
    assert j["gstate"] == "done" and j["site"] == "hpc" and j["constraint"] == "ssd&avx2", j
    q = slurm.run("squeue", "-h", "-t", "all", "-j", str(j["site_job"]), "-O", "Feature:|")
    assert q.stdout.strip().startswith("ssd&avx2|"), q.stdout
    e = m.client().err("PSUBMIT", "INVALID", argv=["true"], procs=1, constraint="gpu|fpga")
    assert "site hpc" in e["msg"] and "avx2,ssd" in e["msg"], e
    # counts: one node has ssd, so ssd*1 goes (passed on to Slurm as it is), ssd*2 not
    jid = m.rpc(T["PSUBMIT"], argv=["true"], shell=True, procs=2, limit_s=60,
                constraint="ssd*1&avx2")["job"]
    j = wait_gstate(m, jid, ("done", "failed"), timeout=60)
    assert j["gstate"] == "done" and j["site"] == "hpc", j
    q = slurm.run("squeue", "-h", "-t", "all", "-j", str(j["site_job"]), "-O", "Feature:|")
    assert q.stdout.strip().startswith("ssd*1&avx2|"), q.stdout
    e = m.client().err("PSUBMIT", "INVALID", argv=["true"], procs=2, constraint="ssd*2")
    assert "too few hosts for its counts" in e["msg"], e


def test_output_in_one_hop(slurm, hpc, meta_factory, gridnode_bin):
    """issue 27: `gridnode job -e SPOOL ID --output` shows the job's output as its Slurm
    site has it (slurm-ID.out and .err, read by the adapter, relayed by the spool), not
    a pointer to the site; --json carries the site's reply under at_site."""
    import subprocess
    m = meta_factory({"hpc": hpc}, sets=FAST)
    jid = m.rpc(T["PSUBMIT"], argv=["echo out-$((6*7)); echo err-line >&2"], shell=True,
                procs=1, limit_s=60)["job"]
    j = wait_gstate(m, jid, ("done", "failed"), timeout=60)
    assert j["gstate"] == "done", j
    r = subprocess.run([gridnode_bin, "job", str(jid), "-e", m.endpoint, "--output"],
                       capture_output=True, text=True, timeout=scaled(30))
    assert r.returncode == 0, (r.stdout, r.stderr)
    assert "out-42" in r.stdout and "err-line" in r.stdout, r.stdout
    g = m.client().ok("JOB_GET", "JOB", job=jid, tasks=True, output=True)
    ranks = g["at_site"]["job"]["ranks"]
    assert ranks[0]["stdout"] == b"out-42\n" and not ranks[0]["out_trunc"], ranks
