"""A site's grid reservation moves up (issue 25; docs/batch.md "Grid reservations move
up"), live: when the job before it ends early, the batch role lays the reservation of a
spool's job again at the sooner start its job could have, before backfill fills the
hole, and stores it (kill -9 keeps the new window). Real cluster manager and clients on
loopback; waits are bounded."""

import signal
import time

from conftest import TYPES, scaled, wait_until

T = TYPES
SD = {"store.sync": "none", "queues.sync_ms": 100, "tasks.heartbeat_s": 1,
      "tasks.idle_wait_s": 1}
CLIENT = {"rpc.timeout_ms": 2000, "rpc.backoff_min_s": 0.2, "rpc.backoff_max_s": 1,
          "client.slots": 1}


def jstate(b, jid):
    return b.rpc(T["JOB_GET"], job=jid)["job"]


def resv(b, name):
    rs = b.rpc(T["RESV_LIST"], name=name)["resvs"]
    return rs[0] if rs else None


def test_grid_reservation_moves_up_and_survives_kill9(cluster_factory, client_factory,
                                                      batch_factory):
    cl = cluster_factory(SD)
    client_factory(cl, 2, sets=CLIENT)
    b = batch_factory([cl], sets={"batch.admins": "root"})
    wait_until(lambda: sum(1 for n in b.rpc(T["NODE_LIST"])["nodes"] if n["active"]) == 2,
               scaled(20), msg="the batch role sees both hosts")
    # a local job on one host until about 12 s (it asks 20 s)
    x = b.rpc(T["PSUBMIT"], argv=["sleep 12"], shell=True, procs=1, limit_s=20,
              user="alice")["job"]
    wait_until(lambda: jstate(b, x)["state"] == "running", scaled(20), msg="x runs")
    # the spool's first job holds the other host for 300 s and ends after 3 s (the spool
    # reserves a little more than the walltime, as metasend.c does)
    now = int(time.time() * 1000)
    ra = b.rpc(T["RESERVE"], user="meta", procs=1, start=now, duration_s=310, flex=True)["resv"]
    a = b.rpc(T["PSUBMIT"], argv=["sleep 3"], shell=True, procs=1, limit_s=300, user="meta",
              resv=ra["name"], early=True)["job"]
    wait_until(lambda: jstate(b, a)["state"] == "running", scaled(20), msg="a runs")
    # its second job needs both hosts: reserved after a's requested end
    rb = b.rpc(T["RESERVE"], user="meta", procs=2, start=now, duration_s=310, flex=True)["resv"]
    assert rb["start"] >= now + 250_000, rb
    g = b.rpc(T["PSUBMIT"], argv=["true"], shell=True, procs=2, limit_s=300, user="meta",
              resv=rb["name"], early=True)["job"]
    # a local job that would fill the hole a leaves (one host, 100 s asked)
    loc = b.rpc(T["PSUBMIT"], argv=["sleep 30"], shell=True, procs=1, limit_s=100,
                user="alice")["job"]
    wait_until(lambda: jstate(b, a)["state"] == "done", scaled(30), msg="a ended")
    # g's reservation moves up to x's requested end, and the local job stays queued
    wait_until(lambda: (resv(b, rb["name"]) or {}).get("start", rb["start"]) < rb["start"],
               scaled(20), msg="the reservation moved up")
    moved = resv(b, rb["name"])
    assert moved["start"] <= now + 60_000 and moved["end"] - moved["start"] == 310_000, moved
    assert jstate(b, loc)["state"] == "queued"
    if jstate(b, g)["state"] == "queued":  # before x ends: the new window is stored
        b.kill(signal.SIGKILL)
        b.restart()
        back = resv(b, rb["name"])
        assert back is None or (back["start"], back["end"]) == (moved["start"], moved["end"])
    wait_until(lambda: jstate(b, g)["state"] == "done", scaled(60), msg="g ran")
    wait_until(lambda: jstate(b, loc)["state"] in ("running", "done"), scaled(60),
               msg="the local job ran")
    # g went first: without the move the local job would have run in the hole first
    assert jstate(b, g)["started"] <= jstate(b, loc)["started"], (jstate(b, g), jstate(b, loc))
