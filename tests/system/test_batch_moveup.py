"""A site's grid reservation moves up (issue 25; docs/batch.md "Grid reservations move
up"), live: when the job before it ends early and a spool's job fits now on the freed
nodes, the batch role lays its reservation again from now and starts it, before
backfill fills the hole with a local job. Real cluster manager and clients on loopback;
waits are bounded."""

import time

from conftest import TYPES, scaled, wait_until

T = TYPES
SD = {"store.sync": "none", "queues.sync_ms": 100, "tasks.heartbeat_s": 1,
      "tasks.idle_wait_s": 1}
CLIENT = {"rpc.timeout_ms": 2000, "rpc.backoff_min_s": 0.2, "rpc.backoff_max_s": 1,
          "client.slots": 1}


def jstate(b, jid):
    return b.rpc(T["JOB_GET"], job=jid)["job"]


def test_grid_job_starts_on_the_hole_before_backfill(cluster_factory, client_factory,
                                                     batch_factory):
    cl = cluster_factory(SD)
    # one host at a time: the cluster, and so the batch role, knows them in this order,
    # which is the order its scheduler and its reservations take free hosts in (three
    # hosts joining at once came in any order, and then g's reservation below held a's
    # two hosts, with nothing to move up for)
    for i in range(3):
        client_factory(cl, 1, sets=CLIENT)
        wait_until(lambda: len(cl.client().ok("NODE_LIST", "NODES")["nodes"]) == i + 1,
                   scaled(20), msg="host %d at the cluster" % (i + 1))
    b = batch_factory([cl], sets={"batch.admins": "root"})
    wait_until(lambda: sum(1 for n in b.rpc(T["NODE_LIST"])["nodes"] if n["active"]) == 3,
               scaled(20), msg="the batch role sees the three hosts")
    # a local job on one host for 60 s (it asks 100 s)
    x = b.rpc(T["PSUBMIT"], argv=["sleep 60"], shell=True, procs=1, limit_s=100,
              user="alice")["job"]
    wait_until(lambda: jstate(b, x)["state"] == "running", scaled(20), msg="x runs")
    # the spool's first job holds the two other hosts for 400 s and ends after 3 s (the
    # spool reserves a little more than the walltime, as metasend.c does)
    now = int(time.time() * 1000)
    ra = b.rpc(T["RESERVE"], user="meta", procs=2, start=now, duration_s=410, flex=True)["resv"]
    a = b.rpc(T["PSUBMIT"], argv=["sleep 3"], shell=True, procs=2, limit_s=400, user="meta",
              resv=ra["name"], early=True)["job"]
    wait_until(lambda: jstate(b, a)["state"] == "running", scaled(20), msg="a runs")
    # its second job (two hosts, 450 s) is reserved at a's requested end, on x's host and
    # one of a's: when a ends it fits at once on a's two hosts, but only with one of its
    # own reserved ones, and not all of those are free
    rb = b.rpc(T["RESERVE"], user="meta", procs=2, start=now, duration_s=460, flex=True)["resv"]
    assert rb["start"] >= now + 350_000, rb
    g = b.rpc(T["PSUBMIT"], argv=["true"], shell=True, procs=2, limit_s=450, user="meta",
              resv=rb["name"], early=True)["job"]
    # a local job that would fill the hole a leaves (two hosts, 300 s asked)
    loc = b.rpc(T["PSUBMIT"], argv=["sleep 5"], shell=True, procs=2, limit_s=300,
                user="alice")["job"]
    wait_until(lambda: jstate(b, g)["state"] == "done", scaled(60), msg="g ran")
    # g went first, as soon as a ended, on the hole: x still runs and the local job waits
    # for g (without the move it would have taken a's hosts, and g waited for x)
    assert "of job %d moved up" % g in b.log(), b.log()[-2000:]
    assert jstate(b, x)["state"] == "running"
    wait_until(lambda: jstate(b, loc)["state"] in ("running", "done"), scaled(60),
               msg="the local job ran")
    assert jstate(b, g)["started"] <= jstate(b, loc)["started"]
