"""System tests of accounting (issue 27, docs/accounting.md): the durable record of each
finished job that a role keeps in its "acct" table, the ACCT request (docs/wire.md 6.18)
and `gridnode acct` (sacct's filters, --format, --csv, --json, --usage). Real roles and
clients on loopback; every wait is bounded."""

import csv
import io
import json
import os
import signal
import subprocess
import time

from conftest import TYPES, scaled, wait_until
from test_authz import Keys

T = TYPES
FAST = {"store.sync": "none", "tasks.heartbeat_s": 1, "tasks.idle_wait_s": 1,
        "tasks.k_wait": 2, "tasks.k_wait_dead": 5, "tasks.min_wait_s": 600,
        "queues.quantum_ms": 500, "queues.sync_ms": 100, "jobs.retention_s": 0}
CLIENT = {"rpc.timeout_ms": 2000, "rpc.backoff_min_s": 0.2, "rpc.backoff_max_s": 1,
          "client.slots": 2}


def run_cli(gridnode_bin, *args, key=None, timeout=30):
    env = dict(os.environ)
    if key:
        env["GRIDNODE_KEY"] = key
    return subprocess.run([gridnode_bin] + [str(a) for a in args], capture_output=True,
                          text=True, timeout=scaled(timeout), stdin=subprocess.DEVNULL, env=env)


def acct_json(gridnode_bin, ep, *args, key=None):
    r = run_cli(gridnode_bin, "acct", "-e", ep, "--json", *args, key=key)
    assert r.returncode == 0, r.stdout + r.stderr
    return json.loads(r.stdout)


def state(cl, jid):
    return cl.client().ok("JOB_GET", "JOB", job=jid)["job"]["state"]


def by_job(rows):
    return {r["job"]: r for r in rows}


def three_jobs(cl):
    """One job done, one failed, one cancelled while running; their ids."""
    u = cl.client()
    ok = u.ok("SUBMIT", "SUBMITTED", argv=["true"], ntasks=2, name="ok",
              user="carol")["job"]
    bad = u.ok("SUBMIT", "SUBMITTED", argv=["sh", "-c", "exit 3"], ntasks=1, name="bad",
               user="dave")["job"]
    wait_until(lambda: state(cl, ok) == "done" and state(cl, bad) == "failed", scaled(60),
               msg="the done and the failed job ended")
    run = u.ok("SUBMIT", "SUBMITTED", argv=["sleep", "60"], ntasks=1, name="long")["job"]
    wait_until(lambda: state(cl, run) == "running", scaled(30), msg="the long job running")
    u.ok("CANCEL", "OK", job=run)
    return ok, bad, run


def test_a_bag_sums_its_tasks_times(cluster_factory, client_factory, gridnode_bin):
    cl = cluster_factory(FAST)
    client_factory(cl, n=1, sets=CLIENT)
    u = cl.client()
    # 4 tasks of 0.3 s each on a 2-slot node: 1.2 s of run time, at least 0.6 s of wall
    jid = u.ok("SUBMIT", "SUBMITTED", argv=["sleep", "0.3"], ntasks=4, name="s")["job"]
    wait_until(lambda: state(cl, jid) == "done", scaled(60), msg="the bag done")
    r = acct_json(gridnode_bin, cl.endpoint, "-j", jid)[0]
    tasks = cl.client().ok("JOB_GET", "JOB", job=jid, tasks=True)["tasks"]
    want = sum(t.get("wall_s", 0) for t in tasks)
    assert abs(r["run_s"] - want) < 1e-6 and r["run_s"] >= 1.2, (r, tasks)
    assert r["started"] >= r["submitted"] and r["finished"] - r["started"] >= 500, r
    assert r["procs"] == 4 and r["kind"] == "array"


def test_records_of_finished_jobs_outlive_purge_and_kill_9(cluster_factory, client_factory,
                                                            gridnode_bin):
    cl = cluster_factory(FAST)
    client_factory(cl, n=1, sets=CLIENT)
    t0 = int(time.time() * 1000)
    ok, bad, run = three_jobs(cl)
    pj = cl.client().ok("PSUBMIT", "SUBMITTED", argv=["sleep 1"], shell=True, procs=1,
                        limit_s=60, name="par")["job"]
    wait_until(lambda: state(cl, pj) == "done", scaled(60), msg="the parallel job done")
    queued = cl.client().ok("SUBMIT", "SUBMITTED", argv=["x"], ntasks=1, name="q",
                            hold=True)["job"]
    rows = by_job(acct_json(gridnode_bin, cl.endpoint))
    assert set(rows) == {ok, bad, run, pj}, rows  # running or queued jobs have none
    assert (rows[ok]["state"], rows[ok]["exit"], rows[ok]["kind"], rows[ok]["procs"]) == \
        ("done", 0, "array", 2)
    assert (rows[bad]["state"], rows[bad]["exit"], rows[bad]["kind"]) == ("failed", 1, "bag")
    # a bag's times are its tasks': CPU and wall summed from their results, the node list
    for jid in (ok, bad):
        r = rows[jid]
        assert r["hosts"] == ["node1"] and r["cores"] == 1 and r["cpu_s"] >= 0, r
        assert r["submitted"] <= r["started"] <= r["finished"] and r["run_s"] >= 0, r
    assert rows[run]["state"] == "cancelled" and rows[run]["reason"] == "cancelled"
    p = rows[pj]
    assert (p["state"], p["exit"], p["kind"], p["procs"], p["nhosts"]) == \
        ("done", 0, "parallel", 1, 1), p
    assert len(p["hosts"]) == 1 and p["hosts"][0]
    assert t0 <= p["submitted"] <= p["started"] <= p["finished"], p
    assert p["run_s"] >= 0.5 and "cpu_s" in p
    for r in rows.values():
        assert t0 <= r["submitted"] <= r["finished"] <= int(time.time() * 1000), r
    assert queued not in rows
    # gridnode purge removes the jobs; their records stay
    r = run_cli(gridnode_bin, "purge", "-e", cl.endpoint, "--older-than", "0")
    assert r.returncode == 0, r.stderr
    cl.client().err("JOB_GET", "NOT_FOUND", job=ok)
    assert by_job(acct_json(gridnode_bin, cl.endpoint)) == rows
    # kill -9: still there, the same
    cl.restart()
    assert by_job(acct_json(gridnode_bin, cl.endpoint)) == rows
    # the table, the default columns (sacct's), and --format
    r = run_cli(gridnode_bin, "acct", "-e", cl.endpoint)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].split()[:7] == ["JOBID", "NAME", "USER", "ACCOUNT", "KIND", "STATE",
                                    "EXITCODE"], lines
    assert len(lines) == 5 and any(ln.split()[0] == str(bad) and "failed" in ln and " 1:0 " in ln
                                   for ln in lines), lines
    r = run_cli(gridnode_bin, "acct", "-e", cl.endpoint, "--format", "jobid,state,exitcode",
                "--csv")
    assert r.returncode == 0, r.stderr
    got = list(csv.reader(io.StringIO(r.stdout)))
    assert got[0] == ["jobid", "state", "exitcode"]
    assert sorted(got[1:]) == sorted([[str(ok), "done", "0:0"], [str(bad), "failed", "1:0"],
                                      [str(run), "cancelled", "0:0"], [str(pj), "done", "0:0"]])
    # an unknown value is empty in CSV ("-" in the table): the cancelled job never started
    r = run_cli(gridnode_bin, "acct", "-e", cl.endpoint, "-j", run, "-o", "jobid,start", "--csv")
    assert r.stdout.splitlines() == ["jobid,start", "%d," % run], r.stdout
    r = run_cli(gridnode_bin, "acct", "-e", cl.endpoint, "-j", run, "-o", "jobid,start")
    assert r.stdout.splitlines()[1].split() == [str(run), "-"], r.stdout
    r = run_cli(gridnode_bin, "acct", "-e", cl.endpoint, "--format", "jobid,bogus")
    assert r.returncode == 2 and "unknown field 'bogus'" in r.stderr and "nodelist" in r.stderr


def test_filters_paging_and_usage(cluster_factory, client_factory, gridnode_bin):
    cl = cluster_factory(FAST)
    client_factory(cl, n=1, sets=CLIENT)
    ok, bad, run = three_jobs(cl)
    ep = cl.endpoint
    wait_until(lambda: len(acct_json(gridnode_bin, ep)) == 3, scaled(20), msg="3 records")
    assert [r["job"] for r in acct_json(gridnode_bin, ep, "-s", "failed,cancelled")] == [bad, run]
    assert [r["job"] for r in acct_json(gridnode_bin, ep, "-j", ok)] == [ok]
    assert acct_json(gridnode_bin, ep, "-u", "nobody-here") == []
    assert [r["job"] for r in acct_json(gridnode_bin, ep, "-u", "carol,dave")] == [ok, bad]
    # the time window: a window before the jobs, one around them, relative times
    assert acct_json(gridnode_bin, ep, "-E", "2001-01-01") == []
    assert len(acct_json(gridnode_bin, ep, "-S", "now-1hour", "-E", "now")) == 3
    assert acct_json(gridnode_bin, ep, "-S", "2999-01-01T00:00") == []
    r = run_cli(gridnode_bin, "acct", "-e", ep, "-S", "yesterday")
    assert r.returncode == 2 and "YYYY-MM-DD" in r.stderr, r.stderr
    # ACCT pages by count and says where to go on; the tool follows every page
    u = cl.client()
    p1 = u.ok("ACCT", "ACCTS", count=2)
    assert [r["job"] for r in p1["rows"]] == [ok, bad] and p1["next"] == run
    p2 = u.ok("ACCT", "ACCTS", count=2, **{"from": p1["next"]})
    assert [r["job"] for r in p2["rows"]] == [run] and "next" not in p2
    u.err("ACCT", "NOT_FOUND", job=999999)
    u.err("ACCT", "FIELD", start="yesterday")
    # --usage: one line per user and account, and the total
    r = run_cli(gridnode_bin, "acct", "-e", ep, "--usage", "--json")
    assert r.returncode == 0, r.stderr
    use = json.loads(r.stdout)
    assert {(x["user"], x["jobs"]) for x in use} == {("carol", 1), ("dave", 1), ("", 1)}, use
    r = run_cli(gridnode_bin, "acct", "-e", ep, "--usage")
    assert r.returncode == 0 and r.stdout.splitlines()[-1].split()[:2] == ["TOTAL", "-"]
    r = run_cli(gridnode_bin, "acct", "-e", ep, "--usage", "--csv")
    assert r.stdout.splitlines()[0] == "user,account,jobs,elapsed_s,core_s,cpu_s"
    assert "sacct" in run_cli(gridnode_bin, "acct", "--help").stdout


def test_a_user_sees_only_its_own_records_under_curve(cluster_factory, client_factory,
                                                      gridnode_bin, workdir):
    k = Keys(workdir / "keys").add("alice", "user").add("bob", "user")
    cl = cluster_factory(dict(FAST, **k.sets()))
    client_factory(cl, n=1, sets=CLIENT)
    a = k.rpc(cl.endpoint, "alice").ok("SUBMIT", "SUBMITTED", argv=["true"], ntasks=1)["job"]
    b = k.rpc(cl.endpoint, "bob").ok("SUBMIT", "SUBMITTED", argv=["true"], ntasks=1)["job"]
    wait_until(lambda: state(cl, a) == "done" and state(cl, b) == "done", scaled(60),
               msg="both jobs done")
    mine = acct_json(gridnode_bin, cl.endpoint, key=k.key("alice"))
    assert [(r["job"], r["user"]) for r in mine] == [(a, "alice")], mine
    # asking for bob's records, or bob's job, gives alice nothing of bob's
    assert [r["job"] for r in acct_json(gridnode_bin, cl.endpoint, "-u", "bob",
                                        key=k.key("alice"))] == [a]
    r = run_cli(gridnode_bin, "acct", "-e", cl.endpoint, "-j", b, key=k.key("alice"))
    assert r.returncode == 1 and "no accounting record" in r.stderr, r.stderr
    # the admin sees both
    assert {r["job"] for r in acct_json(gridnode_bin, cl.endpoint)} == {a, b}


# ---------------------------------------------------------------------------
# the batch role: the same records, request and tool


def test_batch_role_keeps_records_of_its_jobs(cluster_factory, client_factory, batch_factory,
                                              gridnode_bin):
    import test_batch_live as bl
    cl, b = bl.grid(cluster_factory, client_factory, batch_factory, nodes=1, slots=2,
                    bsets={"acct.keep_days": 30})
    u = b.client()
    arr = u.ok("SUBMIT", "SUBMITTED", argv=["true"], ntasks=3, name="arr", user="carol",
               account="physics")["job"]
    bad = u.ok("PSUBMIT", "SUBMITTED", argv=["sleep 0.5; exit 7"], shell=True, procs=2,
               limit_s=60, name="par", user="dave")["job"]
    bl.wait_state(b, arr, ("done", "failed"))
    bl.wait_state(b, bad, ("done", "failed", "killed"))
    run = u.ok("PSUBMIT", "SUBMITTED", argv=["sleep 60"], shell=True, procs=1, limit_s=120,
               name="long", user="carol")["job"]
    bl.wait_state(b, run, ("running",))
    u.ok("CANCEL", "OK", job=run)
    wait_until(lambda: len(acct_json(gridnode_bin, b.endpoint)) == 3, scaled(20),
               msg="3 records at the batch role")
    rows = by_job(acct_json(gridnode_bin, b.endpoint))
    a = rows[arr]
    assert (a["state"], a["exit"], a["kind"], a["procs"], a["user"], a["group"]) == \
        ("done", 0, "array", 3, "carol", "physics"), a
    assert a["hosts"] == ["node1"] and a["site"] and a["started"] >= a["submitted"]
    p = rows[bad]
    assert (p["state"], p["exit"], p["kind"], p["procs"], p["cores"]) == \
        ("failed", 7, "parallel", 2, 2), p
    assert p["run_s"] >= 0.4 and p["started"] <= p["finished"]
    assert rows[run]["state"] == "cancelled"
    # kill -9: the records are still there; filters as at the cluster
    b.kill(signal.SIGKILL)
    b.restart()
    assert by_job(acct_json(gridnode_bin, b.endpoint)) == rows
    assert [r["job"] for r in acct_json(gridnode_bin, b.endpoint, "-A", "physics")] == [arr]
    assert [r["job"] for r in acct_json(gridnode_bin, b.endpoint, "-s", "failed")] == [bad]
    r = run_cli(gridnode_bin, "acct", "-e", b.endpoint, "--usage", "--json")
    use = {(x["user"], x["account"]): x for x in json.loads(r.stdout)}
    assert use[("dave", "")]["core_s"] >= 2 * 0.4 and use[("carol", "physics")]["jobs"] == 1


# ---------------------------------------------------------------------------
# the grid spool: the same records, request and tool; a site keeps its own


def test_grid_spool_keeps_records_of_its_jobs(cluster_factory, client_factory, batch_factory,
                                              meta_factory, gridnode_bin):
    import test_meta_live as ml
    s = ml.site(cluster_factory, client_factory, batch_factory, "one")
    m = meta_factory({"one": s})
    u = m.client()
    ok = u.ok("PSUBMIT", "SUBMITTED", argv=["sleep 0.3"], shell=True, procs=2, limit_s=60,
              name="par", user="carol", account="physics")["job"]
    bad = u.ok("SUBMIT", "SUBMITTED", argv=["sh", "-c", "exit 5"], ntasks=1, limit_s=60,
               name="bad", user="dave")["job"]
    ml.wait_gstate(m, ok, ("done", "failed"), timeout=60)
    ml.wait_gstate(m, bad, ("done", "failed"), timeout=60)
    run = u.ok("PSUBMIT", "SUBMITTED", argv=["sleep 60"], shell=True, procs=1, limit_s=120,
               name="long", user="carol")["job"]
    ml.wait_gstate(m, run, ("running",), timeout=60)
    u.ok("CANCEL", "OK", job=run)
    wait_until(lambda: len(acct_json(gridnode_bin, m.endpoint)) == 3, scaled(30),
               msg="3 records at the spool")
    rows = by_job(acct_json(gridnode_bin, m.endpoint))
    p = rows[ok]
    assert (p["state"], p["exit"], p["kind"], p["procs"], p["site"], p["user"], p["group"]) == \
        ("done", 0, "parallel", 2, "one", "carol", "physics"), p
    assert p["submitted"] <= p["finished"]
    b = rows[bad]
    assert (b["state"], b["kind"], b["site"]) == ("failed", "bag", "one") and b["exit"] != 0, b
    assert rows[run]["state"] == "cancelled"
    m.kill(signal.SIGKILL)
    m.restart()
    assert by_job(acct_json(gridnode_bin, m.endpoint)) == rows
    assert [r["job"] for r in acct_json(gridnode_bin, m.endpoint, "-u", "dave")] == [bad]
    # the site has its own records of the same jobs (under its own ids)
    site_rows = acct_json(gridnode_bin, s.endpoint)
    assert sorted(r["user"] for r in site_rows) == ["carol", "carol", "dave"], site_rows


def test_retention_cap_and_a_job_without_a_record_gets_one_when_purged(
        cluster_factory, client_factory, gridnode_bin):
    cl = cluster_factory(dict(FAST, **{"acct.max_records": 1}))
    client_factory(cl, n=1, sets=CLIENT)
    u = cl.client()
    a = u.ok("SUBMIT", "SUBMITTED", argv=["true"], ntasks=1, name="a")["job"]
    wait_until(lambda: state(cl, a) == "done", scaled(30), msg="a done")
    b = u.ok("SUBMIT", "SUBMITTED", argv=["true"], ntasks=1, name="b")["job"]
    wait_until(lambda: state(cl, b) == "done", scaled(30), msg="b done")
    # acct.max_records = 1: the oldest record goes within a sweep (once a second)
    wait_until(lambda: [r["job"] for r in acct_json(gridnode_bin, cl.endpoint)] == [b],
               scaled(20), msg="only the newest record kept")
    # without the cap, job a is one that has no record (as a job that ended before the
    # role kept accounting): purging it writes its record first
    cl.sets["acct.max_records"] = 0
    cl.restart()
    assert [r["job"] for r in acct_json(gridnode_bin, cl.endpoint)] == [b]
    r = run_cli(gridnode_bin, "purge", "-e", cl.endpoint, a)
    assert r.returncode == 0, r.stderr
    rows = by_job(acct_json(gridnode_bin, cl.endpoint))
    assert sorted(rows) == [a, b] and rows[a]["state"] == "done" and rows[a]["name"] == "a"
    assert rows[a]["hosts"] == ["node1"], rows[a]
