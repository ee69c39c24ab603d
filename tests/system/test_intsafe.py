"""test_intsafe.py - integer safety of the time and size fields a role receives (issue 23
item 8, docs/wire.md 2 "Ranges"): RESV_SET with start = INT64_MAX (a signed overflow
that aborted the batch role under UBSan) and the other extremes of every time and size
field of the batch role's and the cluster's requests are refused with FIELD naming the
field (or INVALID naming the product), values at the bounds are served, and the roles
stay alive. Run under build/asan/gridnode (GRIDNODE_ASAN=1, make system) the sanitizer
aborts any overflow left, and the process registry reports it at teardown."""

from conftest import TYPES, scaled, wait_until

T = TYPES
SD = {"store.sync": "none", "tasks.heartbeat_s": 1, "tasks.idle_wait_s": 1}
CLIENT = {"rpc.timeout_ms": 2000, "rpc.backoff_min_s": 0.2, "rpc.backoff_max_s": 1}
I64_MAX, I64_MIN, U64_MAX = 2**63 - 1, -2**63, 2**64 - 1
TIME_MAX = 253402300799999       # ms, 9999-12-31T23:59:59.999Z
DURATION_MAX = 3660 * 86400      # s
SIZE_MB_MAX = 2**40


def refused(rpc, t, code, field, **fields):
    e = rpc.err(T[t], code, **fields)
    assert field in e["msg"], (t, fields, e["msg"])
    return e


def test_reservation_times_and_sizes_at_their_extremes(cluster_factory, client_factory,
                                                       batch_factory):
    cl = cluster_factory(SD)
    client_factory(cl, 1, sets=dict(CLIENT, **{"client.slots": 2}))
    b = batch_factory([cl])
    wait_until(lambda: any(n["active"] for n in b.rpc(T["NODE_LIST"])["nodes"]), scaled(30),
               msg="the batch role sees the host")
    rpc = b.client()
    one = {"user": "root", "tasks": 1, "procs": 1}
    # the overflow of the issue, and every extreme of the two times
    for v in (I64_MAX, I64_MIN, TIME_MAX + 1, -TIME_MAX - 1):
        refused(rpc, "RESV_SET", "FIELD", "'start'", start=v, duration_s=60, **one)
        refused(rpc, "RESV_SET", "FIELD", "'end'", end=v, **one)
        refused(rpc, "RESERVE", "FIELD", "'start'", user="meta", procs=1, start=v,
                duration_s=60)
    for v in (U64_MAX, I64_MAX, DURATION_MAX + 1):
        refused(rpc, "RESV_SET", "FIELD", "'duration_s'", duration_s=v, **one)
        refused(rpc, "RESERVE", "FIELD", "'duration_s'", user="meta", procs=1, duration_s=v)
    for k in ("mem_mb", "disk_mb"):
        refused(rpc, "RESV_SET", "FIELD", "'%s'" % k, duration_s=60, **dict(one, **{k: U64_MAX}))
        refused(rpc, "RESV_SET", "FIELD", "'%s'" % k, duration_s=60,
                **dict(one, **{k: SIZE_MB_MAX + 1}))
    refused(rpc, "RESV_SET", "FIELD", "'start'", start=-1 - 2**64 // 4, duration_s=60, **one)
    # counts within their caps whose product is not: INVALID naming it
    refused(rpc, "RESV_SET", "INVALID", "tasks x procs", user="root", tasks=2**20, procs=4096,
            duration_s=60)
    # at the bounds: served (granted or refused for resources), never a crash
    r = rpc.call(T["RESV_SET"], start=TIME_MAX - DURATION_MAX * 1000, duration_s=DURATION_MAX,
                 mem_mb=SIZE_MB_MAX, disk_mb=SIZE_MB_MAX, **one)
    assert r["t"] in (T["RESV"], T["ERROR"]) and r.get("code") != 4, r
    late = rpc.ok(T["RESV_SET"], start=TIME_MAX - 60000, end=TIME_MAX, **one)["resv"]
    assert late["end"] == TIME_MAX
    now = rpc.ok(T["RESV_SET"], start=-TIME_MAX, duration_s=60, **one)["resv"]  # past: now
    assert 0 < now["start"] < TIME_MAX
    r = rpc.call(T["RESERVE"], user="meta", procs=1, start=TIME_MAX - 1000, duration_s=1)
    assert r["t"] in (T["RESV"], T["ERROR"]) and r.get("code") != 4, r
    # the plan across a reservation ending in 9999: estimates and the queue still answer
    st = rpc.ok(T["ESTIMATE"], procs=1, walltime_s=366 * 86400)
    assert 0 < st["earliest"] <= TIME_MAX, st
    r = rpc.call(T["ESTIMATE"], procs=2**20, walltime_s=366 * 86400, mem_mb=SIZE_MB_MAX,
                 disk_mb=SIZE_MB_MAX)
    assert r["t"] in (T["STARTS"], T["ERROR"]) and r.get("code") != 4, r
    refused(rpc, "ESTIMATE", "FIELD", "'walltime_s'", procs=1, walltime_s=U64_MAX)
    refused(rpc, "ESTIMATE", "FIELD", "'procs'", procs=U64_MAX, walltime_s=60)
    assert rpc.ok(T["RESV_LIST"])["resvs"]
    for v in rpc.ok(T["RESV_LIST"])["resvs"]:
        rpc.ok(T["RESV_RELEASE"], user="root", name=v["name"])
    # a job at its extremes at the batch role (limit, memory), and past them
    refused(rpc, "SUBMIT", "FIELD", "'limit_s'", argv=["true"], ntasks=1, limit_s=U64_MAX)
    refused(rpc, "PSUBMIT", "FIELD", "'mem_mb'", argv=["true"], procs=1, mem_mb=U64_MAX)
    refused(rpc, "PSUBMIT", "FIELD", "'cpu_s'", argv=["true"], procs=1, cpu_s=U64_MAX)
    j = rpc.ok(T["PSUBMIT"], argv=["true"], procs=1, limit_s=366 * 86400, mem_mb=1,
               cpu_s=366 * 86400 * 4096)["job"]
    assert rpc.ok(T["CHECKJOB"], job=j)["job"]
    rpc.ok(T["CANCEL"], job=j)
    assert b.alive() and b.rpc(T["SITE_INFO"])["t"] == T["SITE"]


def test_cluster_sizes_and_ages_at_their_extremes(cluster_factory):
    cl = cluster_factory(SD)
    rpc = cl.client()
    for v in (U64_MAX, I64_MAX, 253402300799 + 1):
        refused(rpc, "PURGE", "FIELD", "'older_than_s'", older_than_s=v)
    assert rpc.ok(T["PURGE"], older_than_s=253402300799)["t"] == T["PURGED"]
    for k in ("mem_mb", "disk_mb"):
        refused(rpc, "HELLO", "FIELD", "'%s'" % k, client="c", node="n", cores=1,
                **{k: U64_MAX})
    refused(rpc, "SUBMIT", "FIELD", "'deadline_s'", argv=["true"], ntasks=1,
            deadline_s=U64_MAX)
    refused(rpc, "SUBMIT", "FIELD", "'exit'", argv=["true"], ntasks=1,
            known=[{"exit": I64_MIN}])
    w = rpc.ok(T["HELLO"], client="c", node="n", cores=1, mem_mb=SIZE_MB_MAX,
               disk_mb=SIZE_MB_MAX)
    assert w["sid"]
    refused(rpc, "PSYNC", "FIELD", "'rss_kb'", sid=w["sid"],
            procs=[{"job": 1, "rank": 0, "state": "run", "rss_kb": U64_MAX}])
    refused(rpc, "RESULT", "FIELD", "'exit'", sid=w["sid"], want=0,
            results=[{"job": 1, "idx": 0, "issue": 1, "exit": I64_MAX}])
    # a huge complexity (and the wait derived from it) is clamped, not converted blindly
    rpc.ok(T["SUBMIT"], argv=["true"], ntasks=1, complexity=1e300)
    t = rpc.ok(T["TASK_GET"], sid=w["sid"], want=1)
    assert len(t["tasks"]) == 1 and t["tasks"][0]["complexity"] == 1e300, t
    assert cl.alive() and rpc.ok(T["NODE_LIST"])["nodes"]
