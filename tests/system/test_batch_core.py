"""System tests of the live batch role's core (issue 9 items 3-5, 8): the EVENTS feed
end to end, live backfill, refused starts, kill -9 of a cluster manager, the request
rate toward an idle cluster. Real cluster managers, real clients, loopback only; every
wait is bounded and generous."""

import threading
import time

import msgpack
import pytest

from conftest import TYPES, _zmq, curve_server, scaled, wait_until

T = dict(TYPES, PSUBMIT=39, NODE_LIST=37, NODES=38, EVENTS=60, EVENT_LIST=61)
SD = {"store.sync": "none", "queues.sync_ms": 100, "tasks.heartbeat_s": 1,
      "tasks.idle_wait_s": 1}
CLIENT = {"rpc.timeout_ms": 2000, "rpc.backoff_min_s": 0.2, "rpc.backoff_max_s": 1}


def active_hosts(b):
    return sum(1 for n in b.rpc(T["NODE_LIST"])["nodes"] if n["active"])


def grid(cluster_factory, client_factory, batch_factory, nodes=1, slots=2, bsets=None):
    cl = cluster_factory(SD)
    client_factory(cl, nodes, sets=dict(CLIENT, **{"client.slots": slots}))
    b = batch_factory([cl], sets=dict({"batch.log_level": "debug"}, **(bsets or {})))
    wait_until(lambda: active_hosts(b) == nodes, scaled(20), msg="the batch role sees the hosts")
    return cl, b


def get(b, jid, tasks=False):
    return b.rpc(T["JOB_GET"], job=jid, tasks=tasks)


def state(b, jid):
    return get(b, jid)["job"]["state"]


def wait_state(b, jid, states, timeout=30):
    wait_until(lambda: state(b, jid) in states, scaled(timeout),
               msg="job %d in %s" % (jid, states))
    return get(b, jid, tasks=True)


def runs(path):
    return path.read_text().split() if path.exists() else []


def psub(b, cmd, procs, limit_s, **kw):
    return b.rpc(T["PSUBMIT"], argv=[cmd], shell=True, procs=procs, limit_s=limit_s, **kw)["job"]


def test_live_backfill_does_not_delay_the_wide_jobs_reservation(
        cluster_factory, client_factory, batch_factory):
    # 2 hosts x 2 cores; exact walltimes (each job is ended by its limit) so the plan
    # is exact: A holds 2 cores for 4 s; W needs all 4 and is reserved at A's end
    cl, b = grid(cluster_factory, client_factory, batch_factory, nodes=2, slots=2,
                 bsets={"scheduler.estimates": "yes"})
    a = psub(b, "sleep 100", 2, 4)
    wait_state(b, a, ("running",))
    w = psub(b, "sleep 100", 4, 2)
    long_ = psub(b, "sleep 100", 1, 30)   # would delay W: must wait behind it
    short = psub(b, "sleep 100", 1, 1)    # ends before W's reservation: backfilled
    wait_state(b, short, ("running", "killed", "done"))
    assert state(b, w) == "queued" and state(b, long_) == "queued"
    # the reservation is at A's end as the cluster started it (exact: the engine follows
    # the start the cluster reports)
    wait_until(lambda: get(b, w)["job"]["estimate"] == get(b, a)["job"]["started"] + 4000,
               scaled(10), msg="W reserved at A's actual start + its walltime")
    est = get(b, w)["job"]["estimate"]
    assert est > 0, "the wide job has a reservation"
    jw = wait_state(b, w, ("running",), timeout=40)["job"]
    # started when A's walltime ended: the backfilled job did not delay it
    assert jw["started"] - est <= 1000, (jw["started"], est)
    assert state(b, long_) == "queued", "the long job must not jump ahead of W"
    assert "wall-clock" in wait_state(b, short, ("killed",))["job"]["reason"]
    wait_state(b, long_, ("running",), timeout=40)
    assert get(b, long_)["job"]["started"] >= jw["started"] + 1500


def test_refused_start_goes_back_to_eligible_and_starts_later(
        cluster_factory, client_factory, batch_factory, workdir):
    cl, b = grid(cluster_factory, client_factory, batch_factory, nodes=1, slots=2)
    # behind the batch role's back: the cluster's only host fully taken for ~3 s
    direct = cl.rpc(T["PSUBMIT"], argv=["sleep 3"], shell=True, procs=2, limit_s=30,
                    hosts=["node1", "node1"])
    assert direct["t"] == T["SUBMITTED"], direct
    wait_until(lambda: cl.rpc(T["JOB_GET"], job=direct["job"])["job"]["state"] == "running",
               scaled(20), msg="the direct job runs")
    out = workdir / "ran"
    jid = psub(b, "echo x >> %s" % out, 1, 30)
    # refused by the cluster's admission, requeued with the reason, never lost
    wait_until(lambda: "refused" in get(b, jid)["job"]["reason"], scaled(20),
               msg="the refusal recorded as the reason")
    assert state(b, jid) == "queued"
    j = wait_state(b, jid, ("done", "failed"), timeout=40)["job"]
    assert j["state"] == "done", j
    assert runs(out) == ["x"]
    # retried about once a second while the host was taken, not in a tight loop
    refusals = b.log().count("start refused")
    assert 1 <= refusals <= 10, refusals
    ours = [x for x in cl.rpc(T["JOB_LIST"])["jobs"] if x["job"] != direct["job"]]
    assert len(ours) == 1


def test_kill9_of_a_cluster_manager_loses_nothing_and_runs_nothing_twice(
        cluster_factory, client_factory, batch_factory, workdir):
    cl, b = grid(cluster_factory, client_factory, batch_factory, nodes=2, slots=2)
    out = workdir / "runs"
    jid = b.rpc(T["SUBMIT"], argv=["sh", "-c", "echo {i} >> %s; sleep 1" % out], ntasks=12,
                limit_s=60)["job"]
    wait_until(lambda: len(runs(out)) >= 3, scaled(30), msg="some tasks ran")
    cl.kill()
    time.sleep(1.5)   # the running tasks end while their cluster is down
    cl.restart()
    j = wait_state(b, jid, ("done", "failed"), timeout=90)
    assert j["job"]["state"] == "done", j
    assert sorted(runs(out), key=int) == [str(i) for i in range(12)]
    for t in j["tasks"]:
        assert t["state"] == "ok" and t["exit"] == 0, t


def test_events_carry_host_changes_within_a_second(cluster_factory, client_factory,
                                                   batch_factory):
    cl, b = grid(cluster_factory, client_factory, batch_factory, nodes=1)
    client_factory(cl, 1, sets=dict(CLIENT, **{"client.slots": 2}))
    wait_until(lambda: sum(1 for n in cl.rpc(T["NODE_LIST"])["nodes"] if n["active"]) == 2,
               scaled(20), msg="the cluster sees the second host")
    t0 = time.monotonic()
    wait_until(lambda: active_hosts(b) == 2, scaled(5), interval=0.01,
               msg="the batch role sees it")
    assert time.monotonic() - t0 < scaled(1.0)


class FakeCluster:
    """A ROUTER answering EVENTS (held for wait_ms, empty) and NODE_LIST (no hosts),
    counting every request: what a batch role sends to an idle cluster."""

    def __init__(self):
        zmq, ctx = _zmq()
        self.zmq = zmq
        self.sock = ctx.socket(zmq.ROUTER)
        self.sock.setsockopt(zmq.LINGER, 0)
        curve_server(self.sock)
        port = self.sock.bind_to_random_port("tcp://127.0.0.1")
        self.endpoint = "tcp://127.0.0.1:%d" % port
        self.counts = {}
        self.held = []
        self.stop = False
        self.th = threading.Thread(target=self.run, daemon=True)
        self.th.start()

    def reply(self, rid, t, id_, **f):
        body = dict(v=1, t=t, id=id_, **f)
        self.sock.send_multipart([rid, msgpack.packb(body)])

    def run(self):
        poller = self.zmq.Poller()
        poller.register(self.sock, self.zmq.POLLIN)
        while not self.stop:
            now = time.monotonic()
            for h in [h for h in self.held if h[0] <= now]:
                self.held.remove(h)
                self.reply(h[1], T["EVENT_LIST"], h[2], epoch="e1", inc="i1", first=1,
                           next=1, reset=False, events=[])
            if not poller.poll(20):
                continue
            frames = self.sock.recv_multipart()
            m = msgpack.unpackb(frames[-1], raw=False)
            self.counts[m["t"]] = self.counts.get(m["t"], 0) + 1
            if m["t"] == T["EVENTS"]:
                wait = m.get("wait_ms", 0) if m.get("epoch") == "e1" else 0
                if wait:
                    self.held.append((now + wait / 1000.0, frames[0], m["id"]))
                else:
                    self.reply(frames[0], T["EVENT_LIST"], m["id"], epoch="e1", inc="i1",
                               first=1, next=1, reset=m.get("epoch") != "e1", events=[])
            elif m["t"] == T["NODE_LIST"]:
                self.reply(frames[0], T["NODES"], m["id"], nodes=[])
            else:
                self.reply(frames[0], TYPES["ERROR"], m["id"], code=3, msg="not here")

    def close(self):
        self.stop = True
        self.th.join(5)
        self.sock.close(0)


def test_no_polling_storm_toward_an_idle_cluster(batch_factory):
    fc = FakeCluster()
    try:
        b = batch_factory([fc.endpoint])
        wait_until(lambda: fc.counts.get(T["NODE_LIST"]), scaled(10), msg="synchronised")
        before = sum(fc.counts.values())
        time.sleep(5)
        per_s = (sum(fc.counts.values()) - before) / 5.0
        print("requests per second to an idle cluster: %.2f" % per_s)
        assert per_s <= 1.5, fc.counts
        assert b.alive()
    finally:
        fc.close()


def test_fairshare_history_survives_kill9_and_orders_the_queue(
        cluster_factory, client_factory, batch_factory):
    fs = {"fairshare.fspolicy": "dedicatedps", "priority.fsuserweight": 100,
          "user:DEFAULT.fstarget": 50}
    cl, b = grid(cluster_factory, client_factory, batch_factory, nodes=1, slots=1, bsets=fs)
    heavy = psub(b, "sleep 2", 1, 30, user="alice")
    assert wait_state(b, heavy, ("done",))["job"]["state"] == "done"
    b.kill()
    b.restart()
    wait_until(lambda: active_hosts(b) == 1, scaled(20), msg="the batch role sees the host")
    blocker = psub(b, "sleep 2", 1, 30, user="carol")
    wait_state(b, blocker, ("running",))
    first = psub(b, "true", 1, 30, user="alice")   # submitted first, heavy past usage
    second = psub(b, "true", 1, 30, user="bob")    # no usage: goes first
    a = wait_state(b, first, ("done",), timeout=40)["job"]
    bo = wait_state(b, second, ("done",), timeout=40)["job"]
    assert bo["started"] < a["started"], (bo["started"], a["started"])


def test_throttle_maxjob_per_user_honoured_live(cluster_factory, client_factory,
                                                batch_factory):
    cl, b = grid(cluster_factory, client_factory, batch_factory, nodes=1, slots=4,
                 bsets={"user:alice.maxjob": 1})
    a1 = psub(b, "sleep 2", 1, 30, user="alice")
    a2 = psub(b, "sleep 2", 1, 30, user="alice")
    bob = psub(b, "sleep 2", 1, 30, user="bob")
    wait_state(b, a1, ("running",))
    wait_state(b, bob, ("running",))
    assert state(b, a2) == "queued"       # free cores, but alice is at MAXJOB 1
    j2 = wait_state(b, a2, ("running", "done"), timeout=40)["job"]
    assert j2["started"] >= get(b, a1)["job"]["finished"] - 100


def test_a_cancel_its_cluster_missed_while_down_reaches_it_after(cluster_factory, client_factory,
                                                                  batch_factory):
    """A cancel is an order kept until the cluster took it (docs/batch.md "Orders to
    clusters"): cancelled at the batch role while its cluster manager was down, the
    running cluster job is cancelled when the cluster is back, not left running on hosts
    the batch role counts as free."""
    cl, b = grid(cluster_factory, client_factory, batch_factory)
    jid = b.rpc(T["SUBMIT"], argv=["sleep", "600"], ntasks=1, limit_s=900)["job"]
    wait_state(b, jid, ("running",))
    cj = get(b, jid, tasks=True)["tasks"][0]["cjob"]
    assert cl.rpc(T["JOB_GET"], job=cj)["job"]["state"] == "running"
    cl.kill()
    wait_until(lambda: "its hosts are down for the scheduler" in b.log(), scaled(30),
               msg="the batch role sees its cluster down")
    b.rpc(T["CANCEL"], job=jid)
    assert state(b, jid) == "cancelled"
    b.restart()  # the order outlives a restart of the batch role too
    cl.restart()
    wait_until(lambda: cl.rpc(T["JOB_GET"], job=cj)["job"]["state"] == "cancelled", scaled(30),
               msg="the cluster job cancelled once its cluster is back")
