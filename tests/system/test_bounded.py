"""System tests of the bounded cost of valid requests (issue 23, item 7 and Features 4):
a task array of 10,000,000 elements (the documented cap, docs/wire.md 6.1) costs the
batch role, and through the metascheduler both the spool and the site, memory for the
elements that started plus a constant (docs/batch.md "How a task array is held"); the
role still stops on SIGTERM within 5 s, and kill -9 + restart keeps the job and its
counts.

Memory is VmRSS of /proc/PID/status, read once the submission is acknowledged and the
job is visible (every wait before that is bounded with scaled()). The SIGTERM promise
is measured as it is made: 5 s for the plain build (scaled(5): 15 s under ASan, whose
every step is about three times slower); nothing else here is timed."""

import signal
import time

from conftest import TYPES, scaled, wait_until

T = dict(TYPES, PSUBMIT=39, NODE_LIST=37)
SD = {"store.sync": "none", "queues.sync_ms": 100, "tasks.heartbeat_s": 1,
      "tasks.idle_wait_s": 1}
CLIENT = {"rpc.timeout_ms": 2000, "rpc.backoff_min_s": 0.2, "rpc.backoff_max_s": 1}
BIG = 10_000_000            # the documented cap of SUBMIT ntasks
GROWTH_MAX = 10 * 1024      # kB of VmRSS a role may grow by for such an array
SLOTS = 2                   # elements that start (and keep running) at the site


def rss_kb(pid):
    """VmRSS of a process in kB (Linux /proc)."""
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError("no VmRSS for pid %d" % pid)


def settled_rss(pid):
    """VmRSS once the role is idle: the largest of a few samples (a reply being built
    or a cycle under way is part of what it costs)."""
    out = 0
    for _ in range(5):
        out = max(out, rss_kb(pid))
        time.sleep(0.1)
    return out


def site(cluster_factory, client_factory, batch_factory, name="s"):
    """A cluster manager with one client of SLOTS slots, and a batch role over it."""
    cl = cluster_factory(SD, name="cl_" + name)
    client_factory(cl, 1, sets=dict(CLIENT, **{"client.slots": SLOTS}), prefix=name + "n")
    b = batch_factory([cl], name="b_" + name)
    wait_until(lambda: any(n["active"] for n in ok(b, T["NODE_LIST"])["nodes"]), scaled(20),
               msg="site %s sees its host" % name)
    return b


def sigterm_stop(role):
    """Sends SIGTERM and returns the seconds until the process exited (bounded by a
    generous wait; the caller asserts on the promise)."""
    t0 = time.monotonic()
    role.proc.send_signal(signal.SIGTERM)
    rc = role.proc.wait(scaled(60))
    took = time.monotonic() - t0
    print("%s stopped %.3f s after SIGTERM" % (role.name, took))
    assert rc is not None, "%s still running %.0f s after SIGTERM" % (role.name, took)
    role.proc._reap()
    assert rc == 0, "%s exited %s on SIGTERM:\n%s" % (role.name, rc, role.log()[-2000:])
    return took


def ok(role, t, **fields):
    """One request; an ERROR reply fails the test with its message."""
    return role.client().ok(t, **fields)


def array(b, jid):
    return ok(b, T["JOB_GET"], job=jid)["job"]


def running(b, jid, n):
    wait_until(lambda: array(b, jid)["running"] == n, scaled(40),
               msg="%d elements of job %d running" % (n, jid))
    return array(b, jid)


def test_ten_million_element_arrays_at_the_batch_role(cluster_factory, client_factory,
                                                      batch_factory):
    b = site(cluster_factory, client_factory, batch_factory)
    before = settled_rss(b.pid)
    jobs = []
    for _ in range(2):  # two reached 1.26 GB before
        r = ok(b, T["SUBMIT"], argv=["sleep", "600"], ntasks=BIG, limit_s=3600)
        assert r["state"] == "queued", r
        jobs.append(r["job"])
    j = running(b, jobs[0], SLOTS)
    assert j["ntasks"] == BIG and j["issued"] == SLOTS and j["pending"] == BIG - SLOTS, j
    assert array(b, jobs[1])["pending"] == BIG
    grew = settled_rss(b.pid) - before
    print("batch role: VmRSS %d kB before, +%d kB with two arrays of %d" % (before, grew, BIG))
    assert grew < GROWTH_MAX, "the batch role grew by %d kB for two arrays of %d" % (grew, BIG)

    # the pending elements answer as before: synthesized task rows, the queue's view
    tail = ok(b, "JOB_GET", job=jobs[0], tasks=True, **{"from": BIG - 3, "count": 10})
    assert [t["idx"] for t in tail["tasks"]] == [BIG - 3, BIG - 2, BIG - 1], tail
    assert all(t["state"] == "pending" and t["issues"] == 0 for t in tail["tasks"]), tail
    head = ok(b, T["JOB_GET"], job=jobs[0], tasks=True, **{"from": 0, "count": SLOTS + 1})
    states = sorted(t["state"] for t in head["tasks"])
    assert states.count("running") == SLOTS and states.count("pending") == 1, head
    row = ok(b, T["CHECKJOB"], job=jobs[1])["job"]
    assert row["ntasks"] == BIG and row["queue_state"] in ("eligible", "blocked"), row
    q = ok(b, T["SHOWQ"])["jobs"]
    assert {r["job"] for r in q} >= set(jobs), q

    # kill -9 and a restart keep both jobs, their elements and their counts
    b.restart()
    j = running(b, jobs[0], SLOTS)
    assert j["ntasks"] == BIG and j["issued"] == SLOTS and j["pending"] == BIG - SLOTS, j
    assert array(b, jobs[1])["ntasks"] == BIG and array(b, jobs[1])["pending"] == BIG
    assert settled_rss(b.pid) - before < GROWTH_MAX

    # cancelling a whole array: one request, every element counted, nothing per element
    ok(b, T["CANCEL"], job=jobs[1])
    c = array(b, jobs[1])
    assert c["state"] == "cancelled" and c["done"] == BIG and c["failed"] == BIG, c
    rows = ok(b, T["JOB_GET"], job=jobs[1], tasks=True, **{"from": 5, "count": 2})["tasks"]
    assert [t["state"] for t in rows] == ["cancelled", "cancelled"], rows
    took = sigterm_stop(b)
    assert took < scaled(5), "the batch role took %.1f s to stop on SIGTERM" % took
    # the cancel was committed before its OK: it survives the stop
    b.start()
    c = array(b, jobs[1])
    assert c["state"] == "cancelled" and c["done"] == BIG, c
    assert array(b, jobs[0])["pending"] >= BIG - SLOTS
    assert settled_rss(b.pid) - before < GROWTH_MAX


def test_ten_million_element_array_through_meta(cluster_factory, client_factory,
                                                batch_factory, meta_factory):
    b = site(cluster_factory, client_factory, batch_factory)
    m = meta_factory({"s": b})
    wait_until(lambda: all(s["known"] for s in ok(m, T["SITE_INFO"])["sites"]), scaled(20),
               msg="the site known to the spool")
    before = {"meta": settled_rss(m.pid), "site": settled_rss(b.pid)}
    jid = ok(m, T["SUBMIT"], argv=["sleep", "600"], ntasks=BIG, limit_s=3600)["job"]
    wait_until(lambda: array(m, jid).get("site_job", 0) > 0, scaled(40),
               msg="the array placed at the site")
    sjob = array(m, jid)["site_job"]
    running(b, sjob, SLOTS)
    wait_until(lambda: array(m, jid)["gstate"] == "running", scaled(30),
               msg="the spool follows the array")
    j = array(m, jid)
    assert j["ntasks"] == BIG and j["kind"] == "array", j
    for name, role in (("meta", m), ("site", b)):
        grew = settled_rss(role.pid) - before[name]
        print("%s role: VmRSS %d kB before, +%d kB with the array" % (name, before[name], grew))
        assert grew < GROWTH_MAX, "the %s role grew by %d kB for an array of %d" % (
            name, grew, BIG)
    # kill -9 of the spool keeps the job and its place
    m.restart()
    wait_until(lambda: array(m, jid)["gstate"] == "running", scaled(30),
               msg="the spool follows the array after its restart")
    assert array(m, jid)["site_job"] == sjob and array(m, jid)["ntasks"] == BIG
    for role in (m, b):
        took = sigterm_stop(role)
        assert took < scaled(5), "%s took %.1f s to stop on SIGTERM" % (role.name, took)


def test_ten_million_task_bag_at_the_cluster(cluster_factory, client_factory):
    """The cluster manager's bag of tasks: tasks are handed out from a cursor (next_new),
    so a bag of the cap costs what its issued tasks hold."""
    cl = cluster_factory(SD, name="cl")
    client_factory(cl, 1, sets=dict(CLIENT, **{"client.slots": SLOTS}), prefix="n")
    wait_until(lambda: any(n["active"] for n in ok(cl, T["NODE_LIST"])["nodes"]), scaled(20),
               msg="the cluster sees its node")
    before = settled_rss(cl.pid)
    jid = ok(cl, T["SUBMIT"], argv=["sleep", "600"], ntasks=BIG, limit_s=3600)["job"]
    wait_until(lambda: array(cl, jid)["running"] == SLOTS, scaled(40),
               msg="%d tasks running" % SLOTS)
    grew = settled_rss(cl.pid) - before
    print("cluster role: VmRSS %d kB before, +%d kB with a bag of %d" % (before, grew, BIG))
    assert grew < GROWTH_MAX, "the cluster grew by %d kB for a bag of %d" % (grew, BIG)
    cl.restart()
    j = array(cl, jid)
    assert j["ntasks"] == BIG and j["done"] == 0, j
    took = sigterm_stop(cl)
    assert took < scaled(5), "the cluster took %.1f s to stop on SIGTERM" % took


def test_site_lowers_the_largest_array(cluster_factory, batch_factory):
    """batch.max_array (Slurm's MaxArraySize): a site keeps arrays to its policy; a larger
    one is refused naming the key, one at the limit is taken."""
    cl = cluster_factory(SD, name="cl")
    b = batch_factory([cl], sets={"batch.max_array": 1000})
    e = b.client().err(T["SUBMIT"], "INVALID", argv=["true"], ntasks=1001)
    assert "batch.max_array" in e["msg"] and "1000" in e["msg"], e
    jid = ok(b, T["SUBMIT"], argv=["true"], ntasks=1000)["job"]
    assert array(b, jid)["ntasks"] == 1000
    # a parallel job is one element: the limit is not about it
    ok(b, T["PSUBMIT"], argv=["true"], procs=2)
