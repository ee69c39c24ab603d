"""Node loss is not job failure (issue 24 item 1): a parallel process lost to a client's
kill -9 and restart is run again, at the cluster for a job submitted there
(queues.lost_requeues) and at the batch role for a job it placed (batch.lost_requeues),
while a job's own failure is never rerun. Real roles and clients; bounded waits."""

import subprocess

from conftest import FAST_CLIENT, FAST_CLUSTER, scaled, wait_until

SETS = dict(FAST_CLIENT, **{"client.slots": 1})


def restart(client, workdir):
    """kill -9 of the client, then the same command line again (its state dir)."""
    client.stop(9)
    log = open(workdir / ("%s-restart.log" % client.name), "wb")
    return subprocess.Popen(client.args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=log)


def started(cl, jid):
    """The node reported the job's process started (not only told to start it: a client
    killed before that gets the same "run" again after its restart, nothing is lost)."""
    ranks = cl.rpc(34, job=jid)["job"].get("ranks") or []
    return bool(ranks) and ranks[0]["state"] == "started"


def ended(role, jid):
    return role.rpc(34, job=jid)["job"]["state"] in ("done", "failed", "killed", "cancelled")


def test_cluster_requeues_a_job_whose_process_was_lost(cluster_factory, client_factory, workdir):
    cl = cluster_factory(dict(FAST_CLUSTER, **{"store.sync": "none"}))
    (a,) = client_factory(cl, 1, sets=SETS)
    wait_until(lambda: any(n["active"] for n in cl.rpc(37)["nodes"]), scaled(20), msg="node")
    jid = cl.rpc(39, argv=["sleep 2; echo ran"], shell=True, procs=1, limit_s=60)["job"]
    wait_until(lambda: started(cl, jid), scaled(20), msg="its process started")
    again = restart(a, workdir)
    try:
        wait_until(lambda: ended(cl, jid), scaled(60), msg="job ends")
        j = cl.rpc(34, job=jid)["job"]
        assert j["state"] == "done" and j.get("requeues") == 1 and not j.get("lost"), j
        assert "requeued after a node failure" in cl.log()
    finally:
        again.kill()
        again.wait(timeout=10)


def test_batch_reruns_an_element_lost_to_a_client_restart(cluster_factory, client_factory,
                                                          batch_factory, workdir):
    cl = cluster_factory(dict(FAST_CLUSTER, **{"store.sync": "none"}))
    (a,) = client_factory(cl, 1, sets=SETS)
    b = batch_factory([cl])
    wait_until(lambda: any(n["active"] for n in b.rpc(37)["nodes"]), scaled(20), msg="node")
    jid = b.rpc(39, argv=["sleep 2; echo ran"], shell=True, procs=1, limit_s=60)["job"]
    own = b.rpc(39, argv=["exit 3"], shell=True, procs=1, limit_s=60)["job"]
    wait_until(lambda: b.rpc(34, job=jid, tasks=True)["tasks"][0].get("cjob"), scaled(30),
               msg="started at the cluster")
    first = b.rpc(34, job=jid, tasks=True)["tasks"][0]["cjob"]
    wait_until(lambda: started(cl, first), scaled(20), msg="its process started")
    again = restart(a, workdir)
    try:
        wait_until(lambda: ended(b, jid) and ended(b, own), scaled(90), msg="jobs end")
        j = b.rpc(34, job=jid, tasks=True)
        assert j["job"]["state"] == "done", j
        assert j["tasks"][0]["cjob"] != first, j  # a new run, a new cluster job
        # the lost run at the cluster: failed, marked lost (not the job's own doing)
        c1 = cl.rpc(34, job=first)["job"]
        assert c1["state"] == "failed" and c1.get("lost") is True, c1
        assert "requeued after a node failure (1 of 5)" in b.log()
        # its own failure is not rerun
        o = b.client().ok("CHECKJOB", "JOBCHECK", job=own)["job"]
        assert o["requeues"] == 0, o
        assert b.client().ok("CHECKJOB", "JOBCHECK", job=jid)["job"]["requeues"] == 1
        assert b.rpc(34, job=own)["job"]["state"] == "failed"
    finally:
        again.kill()
        again.wait(timeout=10)
