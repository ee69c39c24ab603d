"""System tests of the cluster manager's SCore-D resource management (issue 3): real
clusters and clients on loopback, parallel jobs as real processes, process states read
from /proc. Every wait is bounded; no test asserts on speed.
"""

import grp
import json
import os
import pwd
import signal
import subprocess
import time

import pytest

from conftest import TYPES, scaled, wait_until

SD = {
    "store.sync": "none",
    "tasks.heartbeat_s": 1,
    "tasks.idle_wait_s": 1,
    "tasks.k_wait": 2,
    "tasks.k_wait_dead": 5,
    "queues.quantum_ms": 500,
    "queues.sync_ms": 100,
}
CLIENT = {"rpc.timeout_ms": 2000, "rpc.backoff_min_s": 0.2, "rpc.backoff_max_s": 1,
          "client.slots": 2}
T = dict(TYPES, PSUBMIT=39, CONSOLE=40, CONSOLE_OUT=41, SD_INFO=42, SD_STATE=43, PSYNC=18,
         PSYNC_ACK=19)
REFUSED = 10


def call(cl, t, **f):
    return cl.client().call(T[t], **f)


def psubmit(cl, script, procs=1, **kw):
    r = call(cl, "PSUBMIT", argv=[script], shell=True, procs=procs, **kw)
    assert r["t"] == T["SUBMITTED"], r
    return r


def refused(cl, script, procs=1, **kw):
    r = call(cl, "PSUBMIT", argv=[script], shell=True, procs=procs, **kw)
    assert r["t"] == T["ERROR"] and r["code"] == REFUSED, r
    return r["msg"]


def console(cl, cmd):
    r = call(cl, "CONSOLE", cmd=cmd)
    assert r["t"] == T["CONSOLE_OUT"], r
    return r["out"]


def info(cl):
    r = call(cl, "SD_INFO")
    assert r["t"] == T["SD_STATE"], r
    return r


def job(cl, jid):
    r = call(cl, "JOB_GET", job=jid)
    assert r["t"] == T["JOB"], r
    return r["job"]


def wait_state(cl, jid, states, timeout=20):
    states = (states,) if isinstance(states, str) else states
    return wait_until(lambda: (lambda j: j if j["state"] in states else None)(job(cl, jid)),
                      scaled(timeout), interval=0.1, msg="job %d in %s" % (jid, states))


def wait_hosts(cl, n, timeout=15):
    wait_until(lambda: sum(len(k["hosts"]) for k in info(cl)["clusters"]) >= n,
               scaled(timeout), interval=0.1, msg="%d hosts" % n)


def proc_state(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return None


def pids_of(d, jid, n, timeout=15):
    """Pids that the ranks of job jid wrote to d/<jid>.<rank>."""
    def read():
        out = []
        for r in range(n):
            p = d / ("%d.%d" % (jid, r))
            if not p.exists() or not p.read_text().strip():
                return None
            out.append(int(p.read_text().split()[0]))
        return out
    return wait_until(read, scaled(timeout), interval=0.1, msg="pids of job %d" % jid)


def grid(cluster_factory, client_factory, workdir, clients, sets=None, hosts=None, rc=None):
    """A cluster with a hosts file and clients; clients: [(prefix, cluster)]; the i-th
    client (from 1) is named prefix + i (client_factory numbers across calls)."""
    s = dict(SD, **(sets or {}))
    if hosts:
        (workdir / "hosts.ini").write_text(hosts)
        s["queues.hosts"] = workdir / "hosts.ini"
    if rc:
        (workdir / "scored.rc").write_text(rc)
        s["queues.rc"] = workdir / "scored.rc"
    cl = cluster_factory(s)
    for name, cname in clients:
        client_factory(cl, 1, prefix=name, sets=dict(CLIENT, **{"client.cluster": cname}))
    wait_hosts(cl, len(clients))
    return cl


def test_admission_faster_cluster_then_less_loaded_and_env(cluster_factory, client_factory,
                                                           workdir):
    hosts = "[slow1]\ncluster = slow\nspeed = 1\n\n[fast2]\ncluster = fast\nspeed = 2\n"
    cl = grid(cluster_factory, client_factory, workdir, [("slow", "x"), ("fast", "x")],
              hosts=hosts)
    names = {k["name"]: k for k in info(cl)["clusters"]}
    assert set(names) == {"slow", "fast"} and names["fast"]["speed"] == 2
    d = workdir / "out"
    d.mkdir()
    script = "echo $GRIDNODE_RANK $GRIDNODE_SIZE $GRIDNODE_HOSTS $GRIDNODE_NODE > %s/$GRIDNODE_JOB.$GRIDNODE_RANK.env; sleep 60" % d
    # equal load (both idle): the faster cluster
    j1 = psubmit(cl, script, procs=2, ppn=2)
    assert j1["state"] == "queued" and j1["cluster"] == "fast"
    wait_state(cl, j1["job"], "running")
    # fast now holds 2 processes on 2 cores (load 1, relative 0.5) > slow's 0
    j2 = psubmit(cl, script, procs=2, ppn=2)
    assert j2["cluster"] == "slow"
    wait_state(cl, j2["job"], "running")
    for jid, host in ((j1["job"], "fast2"), (j2["job"], "slow1")):
        for r in range(2):
            f = d / ("%d.%d.env" % (jid, r))
            wait_until(lambda: f.exists() and f.read_text().strip(), scaled(10), msg=str(f))
            assert f.read_text().split() == [str(r), "2", host, host]
    j = job(cl, j1["job"])
    assert j["hosts"] == ["fast2"] and j["queue"] == 1 and j["kind"] == "parallel"
    for jid in (j1["job"], j2["job"]):
        assert call(cl, "CANCEL", job=jid)["t"] == T["OK"]
        wait_until(lambda: all(r["state"] == "exited" for r in job(cl, jid)["ranks"]),
                   scaled(10), msg="ranks killed")
    assert job(cl, j1["job"])["state"] == "cancelled"


def test_refusal_wait_and_memory_sum(cluster_factory, client_factory, workdir):
    cl = grid(cluster_factory, client_factory, workdir, [("a", "c")])
    # two hosts needed, one present: refused naming hosts; with wait: waits
    msg = refused(cl, "true", procs=2, ppn=1)
    assert "hosts" in msg
    w = psubmit(cl, "true", procs=2, ppn=1, wait=True)
    assert w["state"] == "waiting" and "hosts" in w["reason"]
    time.sleep(0.5)
    assert job(cl, w["job"])["state"] == "waiting"
    client_factory(cl, 1, prefix="b", sets=dict(CLIENT, **{"client.cluster": "c"}))
    j = wait_state(cl, w["job"], "done")
    assert sorted(j["hosts"]) == ["a1", "b2"]
    # memory: cluster limit 1000 MiB, queue 1 at 60 % -> one job at a time
    console(cl, "limit c mem 1000; queue 1 mem 60")
    a = psubmit(cl, "sleep 2", procs=1)
    assert job(cl, a["job"])["mem_lim"] == 600
    msg = refused(cl, "sleep 1", procs=1)
    assert "memory" in msg and "600" in msg
    # an explicit smaller limit fits beside it
    small = psubmit(cl, "sleep 1", procs=1, mem_mb=300)
    assert job(cl, small["job"])["mem_lim"] == 300
    b = psubmit(cl, "true", procs=1, wait=True)
    assert b["state"] == "waiting" and "memory" in b["reason"]
    k = [k for k in info(cl)["clusters"] if k["name"] == "c"][0]
    assert k["held_mem"] == 900 and k["held_mem"] <= k["mem_mb"]
    wait_state(cl, b["job"], "done", timeout=30)
    assert job(cl, a["job"])["state"] == "done"
    # the sum of admitted limits never passed the cluster limit (checked while b waited)


def test_queue_states_group_and_durability(cluster_factory, client_factory, workdir):
    cl = grid(cluster_factory, client_factory, workdir, [("a", "c")])
    d = workdir / "out"
    d.mkdir()
    console(cl, "disable 2; deactivate 0")
    assert "disabled" in refused(cl, "true", queue=2)
    q = psubmit(cl, "touch %s/ran" % d, queue=0)
    assert q["state"] == "queued"
    time.sleep(1.5)
    assert job(cl, q["job"])["state"] == "queued" and not (d / "ran").exists()
    assert all(r["state"] == "new" for r in job(cl, q["job"])["ranks"])
    # the accepted job and the console state survive kill -9
    cl.restart(signal.SIGKILL)
    assert job(cl, q["job"])["state"] == "queued"
    qs = info(cl)["queues"]
    assert [x["state"] for x in qs] == ["enabled", "activated", "disabled"]
    console(cl, "activate 0")
    wait_state(cl, q["job"], "done")
    assert (d / "ran").exists()
    # group: only members of the queue's group may submit
    me = pwd.getpwuid(os.getuid())
    gname = grp.getgrgid(me.pw_gid).gr_name
    console(cl, "queue 1 group %s" % gname)
    ok = psubmit(cl, "true", user=me.pw_name)
    assert ok["state"] in ("queued", "running")
    other = "nobody"
    try:
        member = gname in [g.gr_name for g in grp.getgrall() if other in g.gr_mem] or \
            pwd.getpwnam(other).pw_gid == me.pw_gid
    except KeyError:
        member = False
    if not member:
        assert "group" in refused(cl, "true", user=other)


def test_startup_file_applied_once_and_console_durable(cluster_factory, client_factory, workdir):
    rc = "# initial state\nqueue 2 mode exclusive\nqueue 0 cpu 100\nlimit c jobs 5\n"
    cl = grid(cluster_factory, client_factory, workdir, [("a", "c")], rc=rc)
    qs = info(cl)["queues"]
    assert qs[2]["mode"] == "exclusive" and qs[0]["max_cpu_s"] == 100
    k = [k for k in info(cl)["clusters"] if k["name"] == "c"][0]
    assert k["max_jobs"] == 5
    console(cl, "queue 2 mode gang; queue 1 residence 7")
    r = call(cl, "CONSOLE", cmd="queue 1 cpu 5; queue 9 mode gang")
    assert r["t"] == T["ERROR"]  # all or nothing
    cl.restart(signal.SIGKILL)
    qs = info(cl)["queues"]
    assert qs[2]["mode"] == "gang" and qs[1]["residence_s"] == 7 and qs[1]["max_cpu_s"] == 0
    assert qs[0]["max_cpu_s"] == 100


@pytest.mark.slow  # ~19 s under ASan (timed slices); the plain run covers it
def test_gang_time_slicing_all_or_nothing(cluster_factory, client_factory, workdir):
    cl = grid(cluster_factory, client_factory, workdir, [("a", "c"), ("b", "c")])
    d = workdir / "out"
    d.mkdir()
    spin = "echo $$ > %s/$GRIDNODE_JOB.$GRIDNODE_RANK; while :; do :; done" % d
    j1 = psubmit(cl, spin, procs=2, ppn=1)["job"]
    j2 = psubmit(cl, spin, procs=2, ppn=1)["job"]
    p1, p2 = pids_of(d, j1, 2), pids_of(d, j2, 2)
    seen = {j1: set(), j2: set()}
    mixed_since = {j1: None, j2: None}
    longest_mixed = 0.0
    end = time.monotonic() + scaled(6)
    while time.monotonic() < end:
        now = time.monotonic()
        # /proc cannot be read atomically: a sample counts only when two reads in a row
        # agree, so a switch landing between reading j1 and j2 is not taken for overlap
        snap = [proc_state(p) for p in p1 + p2]
        if snap != [proc_state(p) for p in p1 + p2]:
            continue
        assert None not in snap, snap
        both_running = True
        for jid, pids, st in ((j1, p1, snap[:2]), (j2, p2, snap[2:])):
            run = [s != "T" for s in st]
            kind = "run" if all(run) else "stop" if not any(run) else "mixed"
            seen[jid].add(kind)
            both_running &= kind == "run"
            if kind == "mixed":
                mixed_since[jid] = mixed_since[jid] or now
                longest_mixed = max(longest_mixed, now - mixed_since[jid])
            else:
                mixed_since[jid] = None
        assert not both_running, "two jobs ran at once on the same hosts"
        time.sleep(0.02)
    # both jobs ran and were stopped, in turns; a job is never left half-stopped
    assert {"run", "stop"} <= seen[j1] and {"run", "stop"} <= seen[j2], seen
    assert longest_mixed < scaled(1.0), longest_mixed
    print("gang: longest partial switch %.3f s" % longest_mixed)
    for jid in (j1, j2):
        call(cl, "CANCEL", job=jid)
    for p in p1 + p2:
        wait_until(lambda: proc_state(p) in (None, "Z"), scaled(10), msg="pid %d gone" % p)


def test_exclusive_runs_to_completion(cluster_factory, client_factory, workdir):
    cl = grid(cluster_factory, client_factory, workdir, [("a", "c")])
    console(cl, "queue 1 mode exclusive")
    j1 = psubmit(cl, "sleep 2", procs=2, ppn=2)["job"]
    j2 = psubmit(cl, "sleep 1", procs=2, ppn=2)["job"]
    wait_state(cl, j1, "running")
    states = set()
    while job(cl, j1)["state"] != "done":
        states.add(job(cl, j1)["state"])
        assert job(cl, j2)["state"] == "queued"
        time.sleep(0.1)
    assert states == {"running"}
    a, b = job(cl, j1), wait_state(cl, j2, "done")
    assert b["started"] >= a["finished"] - 1000


def test_cpu_demotion_then_kill(cluster_factory, client_factory, workdir):
    cl = grid(cluster_factory, client_factory, workdir, [("a", "c")])
    # the maximum CPU time is inherited at submission and kept after demotion (K7)
    console(cl, "queue 0 residence 1; queue 0 cpu 3; queue 1 cpu 1000")
    jid = psubmit(cl, "while :; do :; done", procs=1, queue=0)["job"]
    assert job(cl, jid)["max_cpu_s"] == 3
    j = wait_until(lambda: (lambda x: x if x["demotions"] >= 1 else None)(job(cl, jid)),
                   scaled(20), msg="demotion")
    assert j["queue"] == 1 and "moved to queue 1" in j["reason"]
    j = wait_state(cl, jid, "killed", timeout=30)
    assert "CPU time" in j["reason"] and j["cpu_s"] > 3
    assert j["ranks"][0]["state"] in ("started", "exited")
    wait_until(lambda: job(cl, jid)["ranks"][0]["state"] == "exited", scaled(10), msg="exit")


def test_memory_hog_killed(cluster_factory, client_factory, workdir):
    cl = grid(cluster_factory, client_factory, workdir, [("a", "c")])
    console(cl, "queue 1 mem 50")
    hog = "python3 -c \"import time; b = b'x' * (300 << 20); time.sleep(60)\""
    jid = psubmit(cl, hog, procs=1, mem_mb=64)["job"]
    assert job(cl, jid)["mem_lim"] == 64
    j = wait_state(cl, jid, "killed", timeout=30)
    assert "memory" in j["reason"] and "64 MiB" in j["reason"]
    wait_until(lambda: job(cl, jid)["ranks"][0]["state"] == "exited", scaled(10), msg="exit")


def test_user_memory_limit_enforced_without_queue_percentage(cluster_factory, client_factory,
                                                              workdir):
    """Issue #8 item 14: --mem alone (no queue %, no console limit) is enforced."""
    cl = grid(cluster_factory, client_factory, workdir, [("a", "c")])
    hog = "python3 -c \"import time; b = b'x' * (300 << 20); time.sleep(60)\""
    jid = psubmit(cl, hog, procs=1, mem_mb=64)["job"]
    assert job(cl, jid)["mem_lim"] == 64
    j = wait_state(cl, jid, "killed", timeout=30)
    assert "memory" in j["reason"] and "64 MiB" in j["reason"], j["reason"]
    wait_until(lambda: job(cl, jid)["ranks"][0]["state"] == "exited", scaled(10), msg="exit")
    # a small job under its limit is not touched
    ok = psubmit(cl, "sleep 0.5", procs=1, mem_mb=64, disk_mb=64)["job"]
    assert job(cl, ok)["disk_lim"] == 64
    assert wait_state(cl, ok, ("done", "failed", "killed"))["state"] == "done"


def test_tools_console_submit_jobs_stats(cluster_factory, client_factory, workdir, gridnode_bin):
    cl = grid(cluster_factory, client_factory, workdir, [("a", "c")],
              sets={"stats.interval_s": 1})

    def tool(*args):
        return subprocess.run([gridnode_bin, args[0], "-e", cl.endpoint] + list(args[1:]),
                              capture_output=True, text=True, timeout=scaled(30),
                              stdin=subprocess.DEVNULL)
    r = tool("console", "queue 2 mode exclusive; queues")
    assert r.returncode == 0 and "ok: queue 2 mode exclusive" in r.stdout, r
    assert "exclusive" in r.stdout.splitlines()[-1]
    r = tool("console", "queue 7 mode gang")
    assert r.returncode != 0 and "no queue" in r.stderr
    r = tool("submit", "-p", "2", "--ppn", "2", "--queue", "2", "--wait", "--shell", "--", "true")
    assert r.returncode == 0 and "to cluster c" in r.stdout, r
    r = tool("submit", "-p", "4", "--", "true")
    assert r.returncode != 0 and "REFUSED" not in r.stderr and "hosts" in r.stderr
    r = tool("jobs")
    assert "parallel jobs:" in r.stdout and " done " in r.stdout, r.stdout
    r = tool("job", "1")
    assert "RANK" in r.stdout and r.stdout.count("exited") == 2, r.stdout
    r = tool("console", "hosts")
    assert "a1" in r.stdout
    import json
    st = wait_until(lambda: (lambda d: d if d.get("clusters") else None)(
        json.loads((cl.state_dir / "stats.json").read_text())), scaled(10), msg="stats")
    assert st["clusters"][0]["name"] == "c" and len(st["queues"]) == 3
    assert st["parallel_jobs"][0]["state"] == "done"


def test_rank_output_collected_truncated_and_durable(cluster_factory, client_factory, workdir,
                                                     gridnode_bin):
    cl = grid(cluster_factory, client_factory, workdir, [])
    for name in ("a", "b"):
        client_factory(cl, 1, prefix=name, sets=dict(CLIENT, **{"client.cluster": "c",
                                                                "run.max_output_kb": 1}))
    wait_hosts(cl, 2)
    script = ("echo rank $GRIDNODE_RANK on $GRIDNODE_NODE; echo err$GRIDNODE_RANK >&2; "
              "if [ $GRIDNODE_RANK = 1 ]; then head -c 3000 /dev/zero | tr '\\0' x; fi")
    jid = psubmit(cl, script, procs=2, ppn=1)["job"]
    hosts = wait_state(cl, jid, "done")["hosts"]  # rank r runs on hosts[r] (ppn 1)
    assert sorted(hosts) == ["a1", "b2"]

    def check():
        ranks = call(cl, "JOB_GET", job=jid, tasks=True, output=True)["job"]["ranks"]
        r0, r1 = ranks
        assert r0["stdout"] == ("rank 0 on %s\n" % hosts[0]).encode() and r0["stderr"] == b"err0\n"
        assert r0["out_trunc"] is False and r0["err_trunc"] is False
        first = ("rank 1 on %s\n" % hosts[1]).encode()
        assert r1["stdout"] == first + b"x" * (1024 - len(first)) and r1["out_trunc"] is True
        assert r1["stderr"] == b"err1\n"
        assert "stdout" not in job(cl, jid)["ranks"][0]  # only when asked
        t = subprocess.run([gridnode_bin, "job", "-e", cl.endpoint, str(jid), "--output"],
                           capture_output=True, text=True, timeout=scaled(30),
                           stdin=subprocess.DEVNULL)
        assert t.returncode == 0, t.stderr
        for r in range(2):
            assert "rank %d (host %s):" % (r, hosts[r]) in t.stdout, t.stdout
            assert "rank %d on %s" % (r, hosts[r]) in t.stdout and "err%d" % r in t.stdout
        assert t.stdout.count("[stdout truncated by the client]") == 1, t.stdout
        t = subprocess.run([gridnode_bin, "job", "-e", cl.endpoint, str(jid), "--json"],
                           capture_output=True, text=True, timeout=scaled(30),
                           stdin=subprocess.DEVNULL)
        assert t.returncode == 0 and "rank 0 on %s" % hosts[0] in t.stdout, t.stdout
        assert json.loads(t.stdout)["job"]["ranks"][1]["out_trunc"] is True
    check()
    # the exit is recorded once: a repeated exit report (here a forged one) changes nothing
    sid = [n["sid"] for n in call(cl, "NODE_LIST")["nodes"] if n["node"] == hosts[0]][0]
    r = call(cl, "PSYNC", sid=sid, procs=[{"job": jid, "rank": 0, "state": "exit", "exit": 0,
                                           "stdout": b"forged", "stderr": b""}])
    assert r["t"] == T["PSYNC_ACK"], r
    # stored in the cluster's LMDB before the reply: survives kill -9
    cl.restart(signal.SIGKILL)
    check()
    d = subprocess.run([gridnode_bin, "dump", str(cl.state_dir), "--json"], capture_output=True,
                       text=True, timeout=scaled(30), stdin=subprocess.DEVNULL)
    assert d.returncode == 0, d.stderr
    recs = [json.loads(x) for x in d.stdout.splitlines()]
    assert len([x for x in recs if x["table"] == "poutput"]) == 2
    # the nodes forgot the processes once the cluster had recorded their exits
    for name in ("a1", "b2"):
        wd = workdir / name / "work"
        wait_until(lambda: not list(wd.glob("p%d.*" % jid)), scaled(10), msg="%s forgot" % name)
