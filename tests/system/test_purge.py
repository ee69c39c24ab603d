"""System tests of forgetting idle sessions (nodes.forget_after_s), the cap on sessions
per peer address (nodes.max_sessions_per_address), and purging finished jobs
(`gridnode purge`, jobs.retention_s)."""

import os
import signal
import subprocess
import time

import pytest

from conftest import ERRORS, TYPES, scaled, wait_until

# sessions go inactive after 1.5 s of silence (max(heartbeat, idle wait) x k_wait_dead)
FAST = {"store.sync": "none", "tasks.heartbeat_s": 1, "tasks.idle_wait_s": 1,
        "tasks.k_wait": 1, "tasks.k_wait_dead": 1.5, "tasks.min_wait_s": 600}
CLIENT = {"rpc.timeout_ms": 1000, "rpc.backoff_min_s": 0.2, "rpc.backoff_max_s": 1,
          "client.slots": 1}


def run_cli(gridnode_bin, *args, timeout=60):
    return subprocess.run([gridnode_bin] + [str(a) for a in args], capture_output=True,
                          text=True, timeout=scaled(timeout), stdin=subprocess.DEVNULL,
                          env=dict(os.environ))


def hello(rpc, name, sid=None):
    f = {"client": "test 1", "node": name, "cores": 1}
    if sid:
        f["sid"] = sid
    return rpc.call("HELLO", **f)


def node_sids(cl):
    return {n["sid"]: n for n in cl.client().ok("NODE_LIST", "NODES", count=100000)["nodes"]}


def test_hellos_from_one_address_are_capped(cluster_factory, gridnode_bin):
    cl = cluster_factory(dict(FAST, **{"nodes.max_sessions_per_address": 20,
                                       "nodes.forget_after_s": 0}))
    u = cl.connect(timeout=scaled(30))
    first = []
    for i in range(20):
        r = hello(u, "h%d" % i)
        assert r["t"] == TYPES["WELCOME"], r
        first.append(r["sid"])
    # at the cap and every session active: refused, with a message saying what to do
    r = hello(u, "over")
    assert r["t"] == TYPES["ERROR"] and r["code"] == ERRORS["REFUSED"], r
    assert "127.0.0.1" in r["msg"] and "max_sessions_per_address" in r["msg"], r
    # resuming a session is not a new one; the user tools do not need sessions
    r = hello(u, "h0", sid=first[0])
    assert r["t"] == TYPES["WELCOME"] and r["resumed"] is True, r
    p = run_cli(gridnode_bin, "submit", "-e", cl.endpoint, "--", "/bin/true")
    assert p.returncode == 0, p.stderr
    p = run_cli(gridnode_bin, "nodes", "-e", cl.endpoint)
    assert p.returncode == 0 and "h19" in p.stdout, p.stderr
    assert len(node_sids(cl)) == 20
    # once they are inactive, each new session replaces the oldest idle one
    wait_until(lambda: not any(n["active"] for n in node_sids(cl).values()), scaled(30),
               msg="sessions inactive")
    second = []
    for i in range(20):
        r = hello(u, "k%d" % i)
        assert r["t"] == TYPES["WELCOME"], r
        second.append(r["sid"])
    sids = node_sids(cl)
    assert set(sids) == set(second), sorted(n["node"] for n in sids.values())
    r = hello(u, "over2")
    assert r["t"] == TYPES["ERROR"] and r["code"] == ERRORS["REFUSED"], r
    # the replaced sessions are gone: their requests say SESSION
    u.err("TASK_GET", "SESSION", sid=first[5], want=1)
    # and they stay gone after kill -9 and restart
    cl.restart(signal.SIGKILL)
    assert set(node_sids(cl)) == set(second)
    u2 = cl.connect(timeout=scaled(30))
    u2.err("TASK_GET", "SESSION", sid=first[0], want=1)
    assert hello(u2, "over3")["code"] == ERRORS["REFUSED"]  # the cap counts loaded sessions


def test_default_cap_keeps_many_local_clients_working(cluster_factory, client_factory):
    cl = cluster_factory(FAST)  # default cap
    clients = client_factory(cl, n=12, sets=CLIENT)
    wait_until(lambda: len([n for n in node_sids(cl).values() if n["active"]]) == 12,
               scaled(60), msg="12 clients joined")
    jid = cl.client().ok("SUBMIT", "SUBMITTED", argv=["/bin/true"], ntasks=24)["job"]
    wait_until(lambda: cl.client().ok("JOB_GET", "JOB", job=jid)["job"]["state"] == "done",
               scaled(60), msg="job done")
    assert all(c.alive() for c in clients)


def test_idle_sessions_are_forgotten_and_a_live_client_says_hello_again(
        cluster_factory, client_factory):
    cl = cluster_factory(dict(FAST, **{"nodes.forget_after_s": 2}))
    u = cl.connect(timeout=scaled(30))
    idle = [hello(u, "idle%d" % i)["sid"] for i in range(30)]
    # a session holding an issued task is never forgotten, however silent
    busy = hello(u, "busy")["sid"]
    jid = u.ok("SUBMIT", "SUBMITTED", argv=["/bin/true"], ntasks=1)["job"]
    t = u.ok("TASK_GET", "TASKS", sid=busy, want=1)
    assert len(t["tasks"]) == 1
    (client,) = client_factory(cl, n=1, sets=CLIENT)
    wait_until(lambda: any(n["node"] == client.name for n in node_sids(cl).values()),
               scaled(30), msg="client joined")
    old_sid = [s for s, n in node_sids(cl).items() if n["node"] == client.name][0]
    client.send_signal(signal.SIGSTOP)  # silent: inactive, then forgotten
    try:
        wait_until(lambda: not set(idle) & set(node_sids(cl)) and
                   old_sid not in node_sids(cl), scaled(60), msg="idle sessions forgotten")
    finally:
        client.send_signal(signal.SIGCONT)
    sids = node_sids(cl)
    assert busy in sids and not sids[busy]["active"]
    u.err("TASK_GET", "SESSION", sid=idle[0], want=1)
    assert "forgotten" in cl.log()
    # the client gets SESSION, says HELLO again and carries on computing
    jid2 = cl.client().ok("SUBMIT", "SUBMITTED", argv=["/bin/true"], ntasks=3)["job"]
    wait_until(lambda: cl.client().ok("JOB_GET", "JOB", job=jid2)["job"]["state"] == "done",
               scaled(60), msg="job done by the re-joined client")
    assert any(n["node"] == client.name and s != old_sid for s, n in node_sids(cl).items())
    # forgotten records stay forgotten after kill -9; the busy one and its task survive
    cl.restart(signal.SIGKILL)
    sids = node_sids(cl)
    assert busy in sids and not set(idle) & set(sids) and old_sid not in sids
    assert cl.client().ok("JOB_GET", "JOB", job=jid)["job"]["state"] == "running"


def rss_kb(pid, field="RssAnon"):
    """Resident anonymous memory (heap): the store's mapped file pages are RssFile."""
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


@pytest.mark.slow  # plain binary only: ASan's quarantine keeps freed memory resident
def test_rss_falls_after_forgetting_100k_sessions(cluster_factory):
    cl = cluster_factory(dict(FAST, **{"nodes.forget_after_s": 1,
                                       "nodes.max_sessions_per_address": 0}))
    u = cl.connect(timeout=scaled(60))
    base = rss_kb(cl.pid)
    total, window, deadline = 100000, 500, time.monotonic() + scaled(240)
    sent = got = 0
    while got < total:
        assert time.monotonic() < deadline, "only %d HELLOs answered" % got
        while sent < total and sent - got < window:
            m, data = u.message("HELLO", {"client": "t", "node": "n%d" % sent, "cores": 1})
            u.sock.send(data)
            sent += 1
        u.recv_raw(scaled(60))
        got += 1
    peak = rss_kb(cl.pid)
    assert peak - base > 20000, (base, peak)  # 100k sessions do take memory
    wait_until(lambda: len(node_sids(cl)) == 0, scaled(120), msg="sessions forgotten")
    # the node table, its hashes and the address lists shrink; what stays is allocator and
    # LMDB page caches (about 45% of the growth when measured on an idle machine; under
    # heavy load up to ~70% was seen, so the bound is loose: it still fails when nothing
    # is given back)
    wait_until(lambda: rss_kb(cl.pid) < base + (peak - base) * 0.85, scaled(120),
               msg="RSS back down (base %d kB, peak %d kB)" % (base, peak))


# ---------------------------------------------------------------------------
# purging finished jobs

def dump_job_ids(gridnode_bin, state_dir):
    """{table: set of job ids} of every record keyed by a job id, from `gridnode dump`."""
    import json
    r = run_cli(gridnode_bin, "dump", state_dir, "--json")
    assert r.returncode == 0, r.stderr
    out = {}
    for line in r.stdout.splitlines():
        rec = json.loads(line)
        k = rec["key"]  # a job id, or "job.idx[.n]" for per-task records
        # acct: a finished job's accounting record outlives its purge (test_acct.py)
        if rec["table"] in ("meta", "nodes", "scored", "acct"):
            continue
        out.setdefault(rec["table"], set()).add(int(str(k).split(".")[0]))
    return out


def has_job(tables, jid):
    return sorted(t for t, ids in tables.items() if jid in ids)


def job_state(cl, jid):
    return cl.client().ok("JOB_GET", "JOB", job=jid)["job"]["state"]


def test_purge_removes_finished_jobs_for_good(cluster_factory, client_factory, gridnode_bin):
    cl = cluster_factory(dict(FAST, **{"jobs.retention_s": 0}))
    client_factory(cl, n=1, sets=CLIENT)
    u = cl.client()
    a = u.ok("SUBMIT", "SUBMITTED", argv=["cat"], ntasks=3, name="a",
             stdin=[b"in%d" % i for i in range(3)])["job"]
    b = u.ok("SUBMIT", "SUBMITTED", argv=["/bin/echo", "{i}"], ntasks=3, name="b")["job"]
    wait_until(lambda: job_state(cl, a) == "done" and job_state(cl, b) == "done",
               scaled(60), msg="jobs done")
    run = u.ok("SUBMIT", "SUBMITTED", argv=["sleep", "60"], ntasks=1, name="r")["job"]
    wait_until(lambda: job_state(cl, run) == "running", scaled(30), msg="job running")
    tables = dump_job_ids(gridnode_bin, cl.state_dir)
    assert has_job(tables, a) == ["jobs", "results", "stdin", "tasks"], tables
    # a running job is refused, naming it, and nothing of the request is purged
    p = run_cli(gridnode_bin, "purge", "-e", cl.endpoint, a, run)
    assert p.returncode == 1 and "job %d is running" % run in p.stderr, p.stderr
    assert job_state(cl, a) == "done"
    u.err("PURGE", "NOT_FOUND", jobs=[10 ** 9])
    # purge one job: the table says what went, the job is gone at once
    p = run_cli(gridnode_bin, "purge", "-e", cl.endpoint, a)
    assert p.returncode == 0, p.stderr
    assert p.stdout.split("\n")[0].split() == ["JOB", "STATE", "ENDED", "NAME"]
    assert p.stdout.split("\n")[1].split()[:2] == [str(a), "done"], p.stdout
    u.err("JOB_GET", "NOT_FOUND", job=a)
    assert a not in [j["job"] for j in u.ok("JOB_LIST", "JOBS")["jobs"]]
    wait_until(lambda: not has_job(dump_job_ids(gridnode_bin, cl.state_dir), a), scaled(30),
               msg="every record of the purged job deleted")
    # nothing comes back after kill -9 and restart; the others are intact
    cl.restart(signal.SIGKILL)
    u = cl.client()
    u.err("JOB_GET", "NOT_FOUND", job=a)
    tables = dump_job_ids(gridnode_bin, cl.state_dir)
    assert not has_job(tables, a) and "results" in has_job(tables, b), tables
    # --older-than 0 purges every finished job, never the running one (--json)
    p = run_cli(gridnode_bin, "purge", "-e", cl.endpoint, "--older-than", "0", "--json")
    import json
    assert p.returncode == 0 and [j["job"] for j in json.loads(p.stdout)] == [b], p.stdout
    assert job_state(cl, run) == "running"
    p = run_cli(gridnode_bin, "purge", "-e", cl.endpoint, "--older-than", "1d")
    assert p.returncode == 0 and "0 job(s) purged" in p.stderr
    p = run_cli(gridnode_bin, "purge", "-e", cl.endpoint)
    assert p.returncode == 2 and "--older-than" in p.stderr
    u.ok("CANCEL", "OK", job=run)
    assert [j["job"] for j in u.ok("PURGE", "PURGED", jobs=[run])["jobs"]] == [run]
    wait_until(lambda: not has_job(dump_job_ids(gridnode_bin, cl.state_dir), run),
               scaled(30), msg="cancelled job's records deleted")


def test_retention_purges_finished_jobs(cluster_factory, gridnode_bin):
    cl = cluster_factory(dict(FAST, **{"jobs.retention_s": 2}))
    u = cl.client()
    old = u.ok("SUBMIT", "SUBMITTED", argv=["x"], ntasks=2, stdin=[b"1", b"2"])["job"]
    u.ok("CANCEL", "OK", job=old)
    keep = u.ok("SUBMIT", "SUBMITTED", argv=["x"], ntasks=2)["job"]  # queued: never purged
    wait_until(lambda: u.call("JOB_GET", job=old)["t"] == TYPES["ERROR"], scaled(30),
               msg="retention purged the job")
    wait_until(lambda: not has_job(dump_job_ids(gridnode_bin, cl.state_dir), old),
               scaled(30), msg="its records deleted")
    assert job_state(cl, keep) == "queued"
    assert "retention" in cl.log()


def test_store_stays_bounded_under_submit_purge_cycles(cluster_factory):
    cl = cluster_factory(dict(FAST, **{"jobs.retention_s": 0}))
    u = cl.connect(timeout=scaled(60))
    data = cl.state_dir / "data.mdb"
    blob = b"x" * 4000
    sizes = []
    for cycle in range(16):
        jid = u.ok("SUBMIT", "SUBMITTED", argv=["cat"], ntasks=500,
                   stdin=[blob] * 500)["job"]  # about 2 MB of records
        u.ok("CANCEL", "OK", job=jid)
        u.ok("PURGE", "PURGED", jobs=[jid])
        wait_until(lambda: u.call("JOB_GET", job=jid)["t"] == TYPES["ERROR"], scaled(30))
        time.sleep(0.3)  # the records go in the next turns
        sizes.append(os.path.getsize(data))
    # LMDB reuses the freed pages: the file stops growing after the first cycles
    assert sizes[-1] <= sizes[3] * 1.5 + (1 << 20), sizes


def test_purge_parallel_jobs(cluster_factory, client_factory, workdir, gridnode_bin):
    from test_scored import grid, psubmit, wait_state
    cl = grid(cluster_factory, client_factory, workdir, [("a", "c")],
              sets={"jobs.retention_s": 0})
    done = psubmit(cl, "echo out-$GRIDNODE_RANK")["job"]
    wait_state(cl, done, ("done",))
    run = psubmit(cl, "sleep 60")["job"]
    wait_state(cl, run, ("running",))
    assert "pjobs" in has_job(dump_job_ids(gridnode_bin, cl.state_dir), done)
    r = cl.client().err("PURGE", "STATE", jobs=[run])
    assert "job %d is running" % run in r["msg"], r
    r = cl.client().ok("PURGE", "PURGED", older_than_s=0)
    assert [(j["job"], j["state"]) for j in r["jobs"]] == [(done, "done")], r
    cl.client().err("JOB_GET", "NOT_FOUND", job=done)
    wait_until(lambda: not has_job(dump_job_ids(gridnode_bin, cl.state_dir), done),
               scaled(30), msg="parallel job's records deleted")
    cl.restart(signal.SIGKILL)
    cl.client().err("JOB_GET", "NOT_FOUND", job=done)
    assert cl.client().ok("JOB_GET", "JOB", job=run)["job"]["kind"] == "parallel"
