"""Paging of the remaining list replies (docs/wire.md 6.2, 6.7, 6.8, 6.12): the batch
role's QUEUE (showq), RESVS (showres) and DIAG (diagnose), the cluster's SD_STATE and
CONSOLE_OUT. Each reply that would pass its size limit says where to continue
(`next`), and the tools follow every page, as tables and as --json."""

import json
import subprocess
import time

from conftest import TYPES, scaled, wait_until

T = dict(TYPES, SHOWQ=80, DIAGNOSE=86, RESV_SET=88, RESV_LIST=90, CONSOLE=40, SD_INFO=42)
SD = {"store.sync": "none", "queues.sync_ms": 100, "tasks.heartbeat_s": 1}
CLIENT = {"rpc.timeout_ms": 2000, "rpc.backoff_min_s": 0.2, "rpc.backoff_max_s": 1}


def tool(gridnode_bin, ep, *args, timeout=60):
    r = subprocess.run([gridnode_bin] + [str(a) for a in args] + ["-e", ep],
                       capture_output=True, text=True, timeout=scaled(timeout),
                       env={"USER": "root", "PATH": "/usr/bin:/bin"}, stdin=subprocess.DEVNULL)
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
