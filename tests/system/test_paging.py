"""Paging of the remaining list replies (docs/wire.md 6.2, 6.7, 6.8, 6.12): the batch
role's QUEUE (showq), RESVS (showres) and DIAG (diagnose), the cluster's SD_STATE and
CONSOLE_OUT. Each reply that would pass its size limit says where to continue
(`next`), and the tools follow every page, as tables and as --json."""

import json
import subprocess
import time

from conftest import TYPES, scaled, security_env, wait_until

T = dict(TYPES, SHOWQ=80, DIAGNOSE=86, RESV_SET=88, RESV_LIST=90, CONSOLE=40, SD_INFO=42)
SD = {"store.sync": "none", "queues.sync_ms": 100, "tasks.heartbeat_s": 1}
CLIENT = {"rpc.timeout_ms": 2000, "rpc.backoff_min_s": 0.2, "rpc.backoff_max_s": 1}


def tool(gridnode_bin, ep, *args, timeout=60):
    r = subprocess.run([gridnode_bin] + [str(a) for a in args] + ["-e", ep],
                       capture_output=True, text=True, timeout=scaled(timeout),
                       env=dict({"USER": "root", "PATH": "/usr/bin:/bin"}, **security_env()), stdin=subprocess.DEVNULL)
    assert r.returncode == 0, (args, r.returncode, r.stdout[-2000:], r.stderr[-2000:])
    return r.stdout


def pages(rpc, t, key, **fields):
    """Every page of a list request; returns (rows, number of pages)."""
    rows, n, frm = [], 0, None
    while True:
        extra = dict(fields, **({"from": frm} if frm is not None else {}))
        r = rpc(T[t], **extra)
        rows += r[key]
        n += 1
        if "next" not in r:
            return rows, n
        assert frm is None or r["next"] > frm
        frm = r["next"]
        assert n < 1000


def test_showq_of_a_queue_longer_than_one_page(cluster_factory, batch_factory, gridnode_bin):
    cl = cluster_factory(SD)
    b = batch_factory([cl], sets={"batch.admins": "root"})
    # held jobs with long names and credentials: ~700 B a row, ~1,500 rows a 1 MiB page
    long = "q" * 60
    n = 0
    deadline = time.monotonic() + scaled(120)
    c = b.connect()
    ids = []
    while n < 2000 and time.monotonic() < deadline:
        r = c.call(T["PSUBMIT"], argv=["true"], procs=1, limit_s=60, hold=True,
                   name="%s%05d" % ("n" * 240, n), user="u" + long, group="g" + long,
                   account="a" + long)
        assert "job" in r, r
        ids.append(r["job"])
        n += 1
    assert n == 2000, "submitted only %d jobs in time" % n
    first = b.rpc(T["SHOWQ"])
    assert "next" in first and 0 < len(first["jobs"]) < n, len(first["jobs"])
    rows, npages = pages(b.rpc, "SHOWQ", "jobs")
    assert npages >= 2 and [r["job"] for r in rows] == ids
    # count pages too, and a user filter across pages
    rows, npages = pages(b.rpc, "SHOWQ", "jobs", count=800)
    assert npages == 3 and [r["job"] for r in rows] == ids
    assert pages(b.rpc, "SHOWQ", "jobs", user="nobody-else")[0] == []
    assert len(pages(b.rpc, "SHOWQ", "jobs", user="u" + long)[0]) == n
    # the tool follows every page: the table counts them all, --json holds them all
    out = tool(gridnode_bin, b.endpoint, "showq")
    assert out.rstrip().endswith("%d jobs" % n), out[-300:]
    js = json.loads(tool(gridnode_bin, b.endpoint, "showq", "--json"))
    assert [r["job"] for r in js] == ids
    # diagnose -p: one row per pending job, paged the same way
    rows, npages = pages(b.rpc, "DIAGNOSE", "jobs", what="priority", count=900)
    assert npages == 3 and sorted(r["job"] for r in rows) == ids
    js = json.loads(tool(gridnode_bin, b.endpoint, "diagnose", "-p", "--json"))
    assert sorted(r["job"] for r in js) == ids
    assert b.alive()


def test_showres_and_diagnose_fairshare_follow_pages(cluster_factory, client_factory,
                                                     batch_factory, gridnode_bin):
    cl = cluster_factory(SD)
    client_factory(cl, 1, sets=dict(CLIENT, **{"client.slots": 1}))
    b = batch_factory([cl], sets={"batch.admins": "root"})
    wait_until(lambda: any(n["active"] for n in b.rpc(T["NODE_LIST"])["nodes"]), scaled(20),
               msg="the batch role sees the host")
    now = b.rpc(T["RESV_LIST"])["now"]
    names = []
    for k in range(25):  # one after the other on the one host
        r = b.rpc(T["RESV_SET"], user="root", name="r%02d" % k, tasks=1, procs=1,
                  start=now + 3600_000 + k * 120_000, duration_s=60, users=["u%d" % k])
        names.append(r["resv"]["name"])
    rows, npages = pages(b.rpc, "RESV_LIST", "resvs", count=7)
    assert npages == 4 and sorted(r["name"] for r in rows) == names
    js = json.loads(tool(gridnode_bin, b.endpoint, "showres", "--json"))
    assert sorted(r["name"] for r in js) == names
    out = tool(gridnode_bin, b.endpoint, "showres")
    assert all(n in out for n in names)
    # fairshare rows: users of 30 held jobs, paged
    c = b.connect()
    for k in range(30):
        c.call(T["PSUBMIT"], argv=["true"], procs=1, limit_s=60, hold=True, user="fs%02d" % k)
    rows, npages = pages(b.rpc, "DIAGNOSE", "creds", what="fairshare", count=8)
    users = sorted(r["name"] for r in rows if r["kind"] == "user")
    assert npages >= 4 and users == ["fs%02d" % k for k in range(30)]
    js = json.loads(tool(gridnode_bin, b.endpoint, "diagnose", "-f", "--json"))
    assert sorted(r["name"] for r in js if r["kind"] == "user") == users


def test_console_output_and_sd_state_are_paged(cluster_factory, client_factory, gridnode_bin):
    cl = cluster_factory(SD)
    for k, name in enumerate(("alpha", "beta", "gamma")):
        client_factory(cl, 1, sets=dict(CLIENT, **{"client.slots": 1, "client.cluster": name}),
                       prefix=name)
    wait_until(lambda: len(cl.rpc(T["SD_INFO"])["clusters"]) == 3, scaled(20),
               msg="three clusters of active hosts")
    rows, npages = pages(cl.rpc, "SD_INFO", "clusters", count=1)
    assert npages == 3 and sorted(r["name"] for r in rows) == ["alpha", "beta", "gamma"]
    assert all(len(cl.rpc(T["SD_INFO"], **{"from": k, "count": 1})["queues"]) ==
               len(cl.rpc(T["SD_INFO"])["queues"]) for k in range(3))
    # parallel jobs waiting for 64 processes: each a console `jobs` line of ~230 bytes
    user = "u" * 200
    c = cl.connect()
    ids = [c.call(T["PSUBMIT"], argv=["true"], procs=64, wait=True, user=user)["job"]
           for _ in range(700)]
    first = cl.rpc(T["CONSOLE"], cmd="jobs")
    assert "next" in first and len(first["out"]) <= 60000
    outs, npages = pages(cl.rpc, "CONSOLE", "out", cmd="jobs")
    text = "".join(outs)
    assert npages >= 3
    lines = text.splitlines()
    assert lines[0].split()[:2] == ["JOB", "USER"]
    assert [int(x.split()[0]) for x in lines[1:]] == ids
    # the tool prints every page; a change is applied once (the first page)
    out = subprocess.run([gridnode_bin, "console", "-e", cl.endpoint, "disable 1; jobs"],
                         capture_output=True, text=True, timeout=scaled(30))
    assert out.returncode == 0, out.stderr
    assert out.stdout.count("ok: ") == 1, out.stdout[:500]
    q1 = [q for q in cl.rpc(T["SD_INFO"])["queues"] if q["queue"] == 1][0]
    assert q1["state"] == "disabled"
    assert [int(x.split()[0]) for x in out.stdout.splitlines() if x.split() and
            x.split()[0].isdigit()] == ids
    js = json.loads(subprocess.run([gridnode_bin, "console", "-e", cl.endpoint, "--json", "jobs"],
                                   capture_output=True, text=True, timeout=scaled(30)).stdout)
    assert js["out"] == text
    assert cl.alive()
