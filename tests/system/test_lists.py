"""System tests of bounded list replies (JOBS, NODES paged by bytes and count), the
job states users see ("failed" for a job with failed tasks), the exit status of
`gridnode job --wait`, and the tools following every page ("next")."""

import json
import os
import subprocess

import msgpack

from conftest import TYPES, scaled

SETS = {"store.sync": "none", "store.map_mb": 1024, "tasks.min_wait_s": 600}
LIST_MAX = 1 << 20


def run_cli(gridnode_bin, *args, timeout=60):
    return subprocess.run([gridnode_bin] + [str(a) for a in args], capture_output=True,
                          text=True, timeout=scaled(timeout), stdin=subprocess.DEVNULL,
                          env=dict(os.environ))


def raw_call(rpc, t, **fields):
    """One request; returns (reply map, reply frame size in bytes)."""
    m, data = rpc.message(t, fields)
    rpc.sock.send(data)
    while True:
        frame = rpc.recv_raw(scaled(30))[-1]
        reply = msgpack.unpackb(frame)
        if reply.get("id") == m["id"]:
            return reply, len(frame)


def hello(rpc, name):
    return rpc.ok("HELLO", expect="WELCOME", client="test 1", node=name, cores=1)["sid"]


def test_job_list_is_paged_and_bounded_with_huge_argvs(cluster_factory, gridnode_bin):
    cl = cluster_factory(SETS)
    u = cl.connect(timeout=scaled(60))
    big = ["/bin/echo"] + ["x" * 16000] * 254 + ["\u00e9" * 8000]  # ~4 MiB each
    jobs = [u.ok("SUBMIT", "SUBMITTED", argv=big, ntasks=1, name="big%d" % i)["job"]
            for i in range(17)]  # 17 x 4 MiB: one unpaged JOBS would pass the 64 MiB frame
    seen, frm, pages = [], 0, 0
    while True:
        fields = {"from": frm} if frm else {}
        r, size = raw_call(u, "JOB_LIST", **fields)
        assert r["t"] == TYPES["JOBS"] and size < 2 * LIST_MAX, size
        for j in r["jobs"]:
            assert j["argv_trunc"] is True and sum(len(a.encode()) for a in j["argv"]) <= 4096
            assert j["argv"][0] == "/bin/echo"
        seen += [j["job"] for j in r["jobs"]]
        pages += 1
        if "next" not in r:
            break
        assert r["next"] > frm and r["next"] == r["jobs"][-1]["job"] + 1
        frm = r["next"]
    assert seen == jobs and pages == 1  # 17 x 4 KiB rows fit one page
    # count bounds a page too
    r = u.ok("JOB_LIST", "JOBS", count=5)
    assert [j["job"] for j in r["jobs"]] == jobs[:5] and r["next"] == jobs[5]
    r = u.ok("JOB_LIST", "JOBS", count=5, **{"from": jobs[15]})
    assert [j["job"] for j in r["jobs"]] == jobs[15:] and "next" not in r
    # the job itself still has its whole argv
    assert u.ok("JOB_GET", "JOB", job=jobs[3])["job"]["argv"] == big
    out = run_cli(gridnode_bin, "jobs", "-e", cl.endpoint, "--json")
    assert out.returncode == 0, out.stderr
    assert [j["job"] for j in json.loads(out.stdout)] == jobs
    out = run_cli(gridnode_bin, "jobs", "-e", cl.endpoint)
    assert out.returncode == 0 and out.stdout.count("big") == 17, out.stderr


def test_job_list_pages_by_count_and_the_tool_follows(cluster_factory, gridnode_bin):
    cl = cluster_factory(SETS)
    u = cl.connect()
    jobs = [u.ok("SUBMIT", "SUBMITTED", argv=["/bin/true"], ntasks=1)["job"]
            for _ in range(1005)]
    r = u.ok("JOB_LIST", "JOBS")
    assert len(r["jobs"]) == 1000 and r["next"] == jobs[1000]
    out = run_cli(gridnode_bin, "jobs", "-e", cl.endpoint, "--json")
    assert [j["job"] for j in json.loads(out.stdout)] == jobs


def test_node_list_is_paged_and_the_tool_follows(cluster_factory, gridnode_bin):
    cl = cluster_factory(SETS)
    u = cl.connect()
    sids = {hello(u, "n%d" % i) for i in range(2100)}
    r, size = raw_call(u, "NODE_LIST")
    assert len(r["nodes"]) == 1000 and r["next"] == 1000 and size < 2 * LIST_MAX
    r = u.ok("NODE_LIST", "NODES", count=50, **{"from": 2090})
    assert len(r["nodes"]) == 10 and "next" not in r
    out = run_cli(gridnode_bin, "nodes", "-e", cl.endpoint, "--json")
    assert out.returncode == 0, out.stderr
    got = [n["sid"] for n in json.loads(out.stdout)]
    assert len(got) == 2100 and set(got) == sids
    out = run_cli(gridnode_bin, "nodes", "-e", cl.endpoint)
    assert out.returncode == 0 and len(out.stdout.splitlines()) == 2101


def test_failed_tasks_make_a_failed_job_and_wait_says_so(cluster_factory, gridnode_bin):
    cl = cluster_factory(SETS)
    u = cl.connect()
    ok = u.ok("SUBMIT", "SUBMITTED", argv=["/bin/true"], ntasks=2)["job"]
    bad = u.ok("SUBMIT", "SUBMITTED", argv=["/bin/false"], ntasks=2)["job"]
    gone = u.ok("SUBMIT", "SUBMITTED", argv=["/bin/true"], ntasks=1)["job"]
    sid = hello(u, "n")
    ts = u.ok("TASK_GET", "TASKS", sid=sid, want=4)["tasks"]
    res = [{"job": t["job"], "idx": t["idx"], "issue": t["issue"],
            "exit": 1 if (t["job"] == bad and t["idx"] == 1) else 0} for t in ts]
    u.ok("RESULT", "TASKS", sid=sid, want=0, results=res)
    u.ok("CANCEL", "OK", job=gone)
    states = {j["job"]: j["state"] for j in u.ok("JOB_LIST", "JOBS")["jobs"]}
    assert states == {ok: "done", bad: "failed", gone: "cancelled"}
    assert u.ok("JOB_GET", "JOB", job=bad)["job"]["state"] == "failed"
    r = u.err("CANCEL", "STATE", job=bad)
    assert "already failed" in r["msg"]
    out = json.loads(run_cli(gridnode_bin, "jobs", "-e", cl.endpoint, "--json").stdout)
    assert {j["job"]: j["state"] for j in out} == states
    table = run_cli(gridnode_bin, "jobs", "-e", cl.endpoint).stdout
    assert " failed " in table
    for jid, code in ((ok, 0), (bad, 3), (gone, 5)):
        r = run_cli(gridnode_bin, "job", jid, "--wait", "-e", cl.endpoint)
        assert r.returncode == code, (jid, r.returncode, r.stderr)
        r = run_cli(gridnode_bin, "job", jid, "--wait", "--summary", "-e", cl.endpoint)
        assert r.returncode == code, (jid, r.returncode, r.stderr)
    help_ = run_cli(gridnode_bin, "job", "--help").stdout
    assert "3 failed" in help_ and "5 cancelled" in help_


def test_job_output_follows_next_in_table_and_json(cluster_factory, gridnode_bin):
    cl = cluster_factory(SETS)
    u = cl.connect(timeout=scaled(60))
    n = 40
    jid = u.ok("SUBMIT", "SUBMITTED", argv=["/bin/echo", "{i}"], ntasks=n)["job"]
    sid = hello(u, "n")
    ts = u.ok("TASK_GET", "TASKS", sid=sid, want=n)["tasks"]
    blob = b"y" * (1 << 20)  # 40 x 1 MiB: more than one 32 MiB JOB reply
    for k in range(0, n, 8):
        u.ok("RESULT", "TASKS", sid=sid, want=0, results=[
            {"job": t["job"], "idx": t["idx"], "issue": t["issue"], "exit": 0,
             "stdout": b"task-%d\n" % t["idx"] + blob} for t in ts[k:k + 8]])
    r = u.ok("JOB_GET", "JOB", job=jid, tasks=True, output=True)
    assert "next" in r and len(r["tasks"]) < n  # the server does cut the reply
    out = run_cli(gridnode_bin, "job", jid, "--output", "-e", cl.endpoint, timeout=120)
    assert out.returncode == 0, out.stderr
    for i in range(n):
        assert "task-%d\n" % i in out.stdout
    rows = [ln for ln in out.stdout.splitlines() if ln.split()[:2] and
            ln.split()[0].isdigit() and ln.split()[1] == "ok"]
    assert len(rows) == n
    out = run_cli(gridnode_bin, "job", jid, "--json", "-e", cl.endpoint, timeout=120)
    j = json.loads(out.stdout)
    assert [t["idx"] for t in j["tasks"]] == list(range(n)) and "next" not in j
