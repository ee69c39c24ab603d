"""The node's parallel processes at high rates (issue 9, batch_e2e): a node starts a
process without waiting for it to execute its program, measures its processes in one
pass over /proc at most once a second, and still reports a program that cannot be
executed as "could not start" with the reason. Real cluster and client on loopback;
every wait bounded; no assertion on speed."""

from conftest import TYPES, scaled, wait_until

T = dict(TYPES, PSUBMIT=39, SD_INFO=42, SD_STATE=43)
SD = {"store.sync": "none", "tasks.heartbeat_s": 1, "tasks.idle_wait_s": 1,
      "queues.sync_ms": 100}
CLIENT = {"rpc.timeout_ms": 2000, "rpc.backoff_min_s": 0.2, "rpc.backoff_max_s": 1,
          "client.slots": 8}


def grid(cluster_factory, client_factory):
    cl = cluster_factory(SD)
    client_factory(cl, 1, sets=CLIENT)
    wait_until(lambda: sum(len(k["hosts"]) for k in cl.rpc(T["SD_INFO"])["clusters"]) >= 1,
               scaled(15), interval=0.1, msg="the host")
    return cl


def job(cl, jid):
    return cl.rpc(T["JOB_GET"], job=jid)["job"]


def ended(cl, jid, timeout=30):
    return wait_until(lambda: (lambda j: j if j["state"] in ("done", "failed", "killed")
                               else None)(job(cl, jid)), scaled(timeout), interval=0.1,
                      msg="job %d ended" % jid)


def test_program_that_cannot_run_is_reported(cluster_factory, client_factory):
    cl = grid(cluster_factory, client_factory)
    bad = cl.rpc(T["PSUBMIT"], argv=["/nonexistent/gridnode-no-such-program", "x"],
                 procs=2, ppn=2)["job"]
    j = ended(cl, bad)
    assert j["state"] == "failed", j
    assert "could not start" in j["reason"] and "cannot run" in j["reason"] \
        and "/nonexistent/gridnode-no-such-program" in j["reason"], j["reason"]
    # the node is fine afterwards: a good job runs, with its output and exit status
    ok = cl.rpc(T["PSUBMIT"], argv=["echo hello; exit 3"], shell=True, procs=1)["job"]
    j = ended(cl, ok)
    assert j["state"] == "failed" and "exited with 3" in j["reason"], j


def test_many_short_processes_all_reported(cluster_factory, client_factory):
    """200 one-process jobs of `true` on 8 slots: each is started once and its exit
    reported (the node no longer waits for each exec; exits arrive in any order)."""
    cl = grid(cluster_factory, client_factory)
    rpc = cl.client()
    ids = [rpc.ok(T["PSUBMIT"], argv=["true"], procs=1)["job"] for _ in range(200)]
    for jid in ids:
        j = ended(cl, jid, timeout=120)
        assert j["state"] == "done", j
