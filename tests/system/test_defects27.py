"""System tests of the "wrong results" defects of issue 27, each through every level
it applies to (cluster manager, batch role, grid spool): --ppn honoured by the batch
role and the spool, parallel processes counted as running work, requests a site
refuses for good ended at once by the spool with the site's reason, a site's end
state and reason carried up to `job --wait`, and showstart's estimates of jobs that
each need the whole partition. Every wait is bounded; no test asserts on speed."""

import re
import subprocess

import pytest

from conftest import TYPES, scaled, wait_until

T = dict(TYPES, PSUBMIT=39, NODE_LIST=37, NODES=38, ESTIMATE=84, SITE_INFO=94)
SD = {"store.sync": "none", "queues.sync_ms": 100, "tasks.heartbeat_s": 1,
      "tasks.idle_wait_s": 1}
CLIENT = {"rpc.timeout_ms": 2000, "rpc.backoff_min_s": 0.2, "rpc.backoff_max_s": 1}


def site(cluster_factory, client_factory, batch_factory, name="s", nodes=2, slots=2,
         bsets=None):
    cl = cluster_factory(SD, name="cl_" + name)
    client_factory(cl, nodes, sets=dict(CLIENT, **{"client.slots": slots}), prefix=name + "n")
    b = batch_factory([cl], name="b_" + name, sets=dict({"batch.log_level": "debug"}, **(bsets or {})))
    wait_until(lambda: sum(1 for n in b.rpc(T["NODE_LIST"])["nodes"] if n["active"]) == nodes,
               scaled(20), msg="site %s sees its hosts" % name)
    return cl, b


def run(gridnode_bin, *args, timeout=20):
    return subprocess.run([gridnode_bin] + [str(a) for a in args], capture_output=True,
                          text=True, timeout=scaled(timeout))


def jget(role, jid):
    return role.rpc(T["JOB_GET"], job=jid)["job"]


def submitted_id(r):
    assert r.returncode == 0, r.stderr
    return int(re.search(r"job (\d+)", r.stdout).group(1))


# ---- 1. --ppn at the batch role and the spool ----

def test_ppn_spreads_ranks_over_hosts_at_batch_and_spool(
        cluster_factory, client_factory, batch_factory, meta_factory, gridnode_bin):
    cl, b = site(cluster_factory, client_factory, batch_factory)
    m = meta_factory({"s": b})
    # -p 2 --ppn 1: one process per host, so both hosts, at the batch role and through
    # the spool; without --ppn both fit on one host of 2 cores
    jb = submitted_id(run(gridnode_bin, "submit", "-e", b.endpoint, "-p", 2, "--ppn", 1,
                          "--limit", 60, "--", "sleep", 30))
    wait_until(lambda: jget(b, jb)["state"] == "running", scaled(30), msg="batch job runs")
    hb = jget(b, jb)["hosts"]
    assert sorted(hb) == ["sn1", "sn2"], hb
    cj = cl.rpc(T["JOB_LIST"])["jobs"]
    assert any(sorted(j.get("hosts", [])) == ["sn1", "sn2"] for j in cj), cj
    run(gridnode_bin, "cancel", "-e", b.endpoint, jb)
    wait_until(lambda: jget(b, jb)["state"] == "cancelled", scaled(30), msg="cancelled")
    jm = submitted_id(run(gridnode_bin, "submit", "-e", m.endpoint, "-p", 2, "--ppn", 1,
                          "--limit", 60, "--", "sleep", 30))
    wait_until(lambda: jget(m, jm)["gstate"] == "running", scaled(40), msg="spool job runs")
    sj = jget(b, jget(m, jm)["site_job"])
    assert sorted(sj["hosts"]) == ["sn1", "sn2"] and sj["ppn"] == 1, sj
    run(gridnode_bin, "cancel", "-e", m.endpoint, jm)
    # a request the site can never honour is refused at submit, naming the cause, at
    # the batch role as at the cluster
    for ep in (b.endpoint, cl.endpoint):
        r = run(gridnode_bin, "submit", "-e", ep, "-p", 3, "--ppn", 3, "--", "true")
        assert r.returncode != 0 and "per host" in r.stderr, (ep, r.stdout, r.stderr)
    e = b.client().err(T["PSUBMIT"], "INVALID", argv=["true"], procs=6, ppn=1)
    assert "host" in e["msg"], e


# ---- 4. a site's end state and reason carried up to `job --wait` ----

HOG = "python3 -c \"import time; b = b'x' * (300 << 20); time.sleep(60)\""
SPIN = "while :; do :; done"


@pytest.mark.parametrize("limit,prog,word", [
    (("--mem", 64), HOG, "memory"),
    (("--cpu", 1), SPIN, "CPU time"),
])
def test_limit_kill_same_exit_and_reason_at_every_level(
        cluster_factory, client_factory, batch_factory, meta_factory, gridnode_bin,
        limit, prog, word):
    """A job killed at a limit: exit 4 and the reason at the cluster, the batch role
    (which sends the limit on: --cpu was dropped there) and the spool alike."""
    cl, b = site(cluster_factory, client_factory, batch_factory, nodes=1)
    m = meta_factory({"s": b})
    for role in (cl, b, m):
        r = run(gridnode_bin, "submit", "-e", role.endpoint, "-p", 1, *limit, "--limit", 60,
                "--shell", "--wait", "--", prog, timeout=90)
        assert r.returncode == 4, (role.name, r.returncode, r.stdout, r.stderr)
        jid = int(re.search(r"job (\d+)", r.stdout).group(1))
        j = run(gridnode_bin, "job", "-e", role.endpoint, jid)
        assert j.returncode == 0 and "killed" in j.stdout, (role.name, j.stdout)
        assert word in j.stdout, (role.name, j.stdout)
        row = jget(role, jid)
        assert row["state"] == "killed" and word in row["reason"], (role.name, row)
        w = run(gridnode_bin, "job", "-e", role.endpoint, "--wait", jid)
        assert w.returncode == 4, (role.name, w.returncode, w.stderr)


# ---- 3. the spool checks a request as its sites do, and ends a job they refuse ----

def test_spool_refuses_what_sites_refuse_and_ends_refused_jobs(
        cluster_factory, client_factory, batch_factory, meta_factory, gridnode_bin):
    cl_a, a = site(cluster_factory, client_factory, batch_factory, name="a", nodes=1)
    cl_b, b = site(cluster_factory, client_factory, batch_factory, name="b", nodes=1)
    m = meta_factory({"a": a, "b": b})
    long_arg = "x" * 60000
    # the same argv check at every level, parallel or not, naming the field
    for role in (cl_a, a, m):
        for extra in ((), ("-p", 1)):
            r = run(gridnode_bin, "submit", "-e", role.endpoint, *extra, "--", "echo", long_arg)
            assert r.returncode != 0 and "16384" in r.stderr, (role.name, extra, r.stderr)
    e = m.client().err(T["PSUBMIT"], "INVALID", argv=["echo", long_arg], procs=1)
    assert "argv" in e["msg"], e
    assert m.rpc(T["JOB_LIST"])["jobs"] == []
    # a request both sites refuse for good (a class neither has): ended at once, failed,
    # with the site's reason in the row, not retried max_attempts times
    jid = m.rpc(T["PSUBMIT"], argv=["true"], procs=1, **{"class": "nosuch"})["job"]
    wait_until(lambda: jget(m, jid)["gstate"] == "failed", scaled(30), msg="refused job ends")
    j = jget(m, jid)
    assert "no such class" in j["reason"] and "refused by site" in j["reason"], j
    assert j["attempts"] == 2 and j["exit"] != 0, j
    w = run(gridnode_bin, "job", "-e", m.endpoint, "--wait", jid)
    assert w.returncode == 3, (w.returncode, w.stderr)
    out = run(gridnode_bin, "job", "-e", m.endpoint, jid).stdout
    assert "no such class" in out, out


# ---- 2. a node running a parallel job is not idle ----

def test_parallel_processes_count_as_running_work(
        cluster_factory, client_factory, batch_factory, gridnode_bin):
    import json
    import urllib.request
    cl = cluster_factory(dict(SD, **{"stats.http": "127.0.0.1:0", "stats.interval_s": 1}))
    client_factory(cl, 1, sets=dict(CLIENT, **{"client.slots": 2}), prefix="pn")
    wait_until(lambda: any(n["active"] for n in cl.rpc(T["NODE_LIST"])["nodes"]), scaled(20),
               msg="the node joins")
    b = batch_factory([cl])
    jid = cl.rpc(T["PSUBMIT"], argv=["sleep 60"], shell=True, procs=2, ppn=2,
                 limit_s=120)["job"]
    wait_until(lambda: jget(cl, jid)["state"] == "running" and
               all(r["state"] == "started" for r in jget(cl, jid)["ranks"]), scaled(30),
               msg="both processes run")
    n = cl.rpc(T["NODE_LIST"])["nodes"][0]
    assert (n["running"], n["procs_running"], n["tasks_running"]) == (2, 2, 0), n
    r = run(gridnode_bin, "nodes", "-e", cl.endpoint)
    assert r.returncode == 0, r.stderr
    head, row = r.stdout.splitlines()[0].split(), r.stdout.splitlines()[1].split()
    assert row[head.index("RUNNING")] == "2", r.stdout
    url = cl.state_dir / "stats.url"
    wait_until(url.exists, scaled(10), msg="stats.url")

    def page_running():
        st = cl.state_dir / "stats.json"
        nodes = json.loads(st.read_text())["nodes"] if st.exists() else []
        with urllib.request.urlopen(url.read_text().strip().rstrip("/") + "/metrics",
                                    timeout=scaled(10)) as f:
            metrics = f.read().decode()
        return (nodes and nodes[0]["running"] == 2 and nodes[0]["procs_running"] == 2
                and re.search(r'node_procs_running\{[^}]*\} 2', metrics))

    wait_until(page_running, scaled(20), msg="the stats page counts the processes")
    # the batch role's hosts: their cores running its job's processes (here none: the job
    # went to the cluster directly), then its own job's
    wait_until(lambda: b.rpc(T["NODE_LIST"])["nodes"], scaled(20), msg="batch sees the host")
    assert b.rpc(T["NODE_LIST"])["nodes"][0]["running"] == 0
    cl.rpc(T["CANCEL"], job=jid)
    wait_until(lambda: cl.rpc(T["NODE_LIST"])["nodes"][0]["running"] == 0, scaled(30),
               msg="idle again")
    bj = b.rpc(T["PSUBMIT"], argv=["sleep 60"], shell=True, procs=2, limit_s=120)["job"]
    wait_until(lambda: jget(b, bj)["state"] == "running", scaled(30), msg="batch job runs")
    wait_until(lambda: b.rpc(T["NODE_LIST"])["nodes"][0]["running"] == 2, scaled(10),
               msg="batch counts its busy cores")
    b.rpc(T["CANCEL"], job=bj)


# ---- 5. showstart of jobs that each need the whole partition ----

def test_showstart_orders_jobs_that_need_the_whole_partition(
        cluster_factory, client_factory, batch_factory, gridnode_bin):
    cl, b = site(cluster_factory, client_factory, batch_factory, nodes=1, slots=2)
    run_id = b.rpc(T["PSUBMIT"], argv=["sleep 60"], shell=True, procs=2, limit_s=100)["job"]
    wait_until(lambda: jget(b, run_id)["state"] == "running", scaled(30), msg="R runs")
    a = b.rpc(T["PSUBMIT"], argv=["true"], shell=True, procs=2, limit_s=200)["job"]
    c = b.rpc(T["PSUBMIT"], argv=["true"], shell=True, procs=2, limit_s=300)["job"]

    def start(jid):
        r = b.rpc(T["ESTIMATE"], job=jid)
        return r["earliest"]

    wait_until(lambda: start(a) > 0 and start(c) > 0, scaled(20), msg="estimates")
    sa, sc = start(a), start(c)
    # c cannot start before a ends: a's start plus its walltime (200 s)
    assert sc >= sa + 200 * 1000, (sa, sc)
    for jid, lo in ((a, sa), (c, sc)):
        r = run(gridnode_bin, "showstart", "-e", b.endpoint, "--json", jid)
        assert r.returncode == 0, r.stderr
    b.rpc(T["CANCEL"], job=c)
    b.rpc(T["CANCEL"], job=a)
    b.rpc(T["CANCEL"], job=run_id)
