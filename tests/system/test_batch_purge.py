"""System tests of PURGE and jobs.retention_s at the batch role (docs/wire.md 6.10,
6.11; docs/batch.md "Purge and retention"): the user vocabulary of the cluster manager,
`gridnode purge -e BATCH_EP`, on a batch role scheduling onto a real cluster. Every wait
is bounded; no test asserts on speed."""

import json
import os
import signal
import subprocess

from conftest import TYPES, scaled, wait_until
from test_data import run_cli, sha, stored_path
from test_data_batch import grid as files_grid, wait_batch
from test_security import Keys

T = dict(TYPES, PSUBMIT=39, NODE_LIST=37)
SD = {"store.sync": "none", "queues.sync_ms": 100, "tasks.heartbeat_s": 1,
      "tasks.idle_wait_s": 1}
CLIENT = {"rpc.timeout_ms": 2000, "rpc.backoff_min_s": 0.2, "rpc.backoff_max_s": 1}


def grid(cluster_factory, client_factory, batch_factory, bsets=None):
    cl = cluster_factory(SD)
    client_factory(cl, 1, sets=dict(CLIENT, **{"client.slots": 2}))
    b = batch_factory([cl], sets=bsets)
    wait_until(lambda: any(n["active"] for n in b.rpc(T["NODE_LIST"])["nodes"]), scaled(20),
               msg="the batch role sees the host")
    return cl, b


def state(b, jid):
    r = b.rpc(T["JOB_GET"], job=jid)
    return r["job"]["state"] if r["t"] == T["JOB"] else "gone"


def wait_ended(b, jid):
    wait_until(lambda: state(b, jid) in ("done", "failed"), scaled(30),
               msg="job %d ended" % jid)


def acct_jobs(b):
    return [r["job"] for r in b.client().ok(T["ACCT"], "ACCTS")["rows"]]


def purge_cli(gridnode_bin, b, *args):
    return subprocess.run([gridnode_bin, "purge", "-e", b.endpoint] + [str(a) for a in args],
                          capture_output=True, text=True, timeout=scaled(20),
                          stdin=subprocess.DEVNULL)


def stored(gridnode_bin, b):
    """(table, key) of the batch role's job records and purge markers (gridnode dump)."""
    r = subprocess.run([gridnode_bin, "dump", str(b.state_dir), "--json"], capture_output=True,
                       text=True, timeout=scaled(20), stdin=subprocess.DEVNULL)
    assert r.returncode == 0, r.stderr
    rows = [json.loads(line) for line in r.stdout.splitlines() if line.strip()]
    return {(x["table"], str(x["key"])) for x in rows
            if x["table"] in ("jobs", "elems", "jobdata", "elemfiles")
            or str(x["key"]).startswith("purge/")}


def test_purge_removes_finished_jobs_only_keeps_acct_and_survives_kill_9(
        cluster_factory, client_factory, batch_factory, gridnode_bin):
    cl = cluster_factory(SD)
    client_factory(cl, 1, sets=dict(CLIENT, **{"client.slots": 2}))
    # one element record deleted a turn: a kill -9 right after a purge leaves markers
    b = batch_factory([cl], env={"GRIDNODE_PURGE_TURN_KEYS": "1"})
    wait_until(lambda: any(n["active"] for n in b.rpc(T["NODE_LIST"])["nodes"]), scaled(20),
               msg="the batch role sees the host")
    arr = b.rpc(T["SUBMIT"], argv=["true"], ntasks=20, name="arr")["job"]
    par = b.rpc(T["PSUBMIT"], argv=["true"], shell=True, procs=1, name="par")["job"]
    run = b.rpc(T["PSUBMIT"], argv=["sleep 60"], shell=True, procs=1, limit_s=120)["job"]
    wait_ended(b, arr)
    wait_ended(b, par)
    wait_until(lambda: state(b, run) == "running", scaled(30), msg="the long job runs")
    # the unchanged user tool, pointed at the batch role
    r = purge_cli(gridnode_bin, b, par)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split("\n")[1].split()[:2] == [str(par), "done"], r.stdout
    b.client().err(T["JOB_GET"], "NOT_FOUND", job=par)
    assert par not in [j["job"] for j in b.rpc(T["JOB_LIST"])["jobs"]]
    assert par in acct_jobs(b)  # its accounting record is kept
    # a job not ended: STATE naming it, and nothing of the request is purged
    e = b.client().err(T["PURGE"], "STATE", jobs=[arr, run])
    assert ("job %d is not ended" % run) in e["msg"] and "nothing was purged" in e["msg"]
    assert state(b, arr) == "done" and state(b, run) == "running"
    # unknown (and already purged) ids: NOT_FOUND naming the first
    e = b.client().err(T["PURGE"], "NOT_FOUND", jobs=[arr, 999])
    assert "no job 999" in e["msg"]
    b.client().err(T["PURGE"], "NOT_FOUND", jobs=[par])
    r = purge_cli(gridnode_bin, b, 999)
    assert r.returncode == 1 and "999" in r.stderr, r.stderr
    # a dependency on a purged job: refused at submission, as at the cluster
    b.client().err(T["SUBMIT"], "INVALID", argv=["true"], ntasks=1,
                   dependency="afterok:%d" % par)
    # kill -9 right after the reply: still purged, ids never reused, nothing unreadable
    done = b.client().ok(T["PURGE"], "PURGED", older_than_s=0)
    assert [j["job"] for j in done["jobs"]] == [arr] and done["more"] is False
    assert done["jobs"][0]["state"] == "done" and done["jobs"][0]["name"] == "arr"
    b.kill(signal.SIGKILL)
    b.restart()
    b.client().err(T["JOB_GET"], "NOT_FOUND", job=arr)
    assert [j["job"] for j in b.rpc(T["JOB_LIST"])["jobs"]] == [run]
    assert state(b, run) == "running"
    assert {arr, par} <= set(acct_jobs(b))
    new = b.rpc(T["SUBMIT"], argv=["true"], ntasks=1)["job"]
    assert new > run
    # no record of the purged jobs is left behind, nor a marker
    wait_until(lambda: not {k for t, k in stored(gridnode_bin, b)
                            if k.split(".")[0] in (str(arr), str(par)) or k.startswith("purge/")},
               scaled(10), msg="every record of the purged jobs deleted")
    assert ("jobs", str(run)) in stored(gridnode_bin, b)
    assert "unreadable" not in b.log()
    b.client().ok(T["CANCEL"], job=run)


def test_retention_purges_finished_jobs_by_itself(cluster_factory, client_factory,
                                                  batch_factory):
    cl, b = grid(cluster_factory, client_factory, batch_factory,
                 bsets={"jobs.retention_s": 1})
    jid = b.rpc(T["SUBMIT"], argv=["true"], ntasks=2)["job"]
    wait_until(lambda: state(b, jid) == "gone", scaled(30), msg="the job purged by retention")
    assert jid in acct_jobs(b)
    assert "retention: 1 finished job(s)" in b.log()


def test_purge_is_for_administrators_as_at_the_cluster(cluster_factory, client_factory,
                                                       batch_factory, workdir):
    keys = Keys(workdir / "keys")
    keys.add("alice", "user", "groups=users")
    cl, b = grid(cluster_factory, client_factory, batch_factory, bsets=keys.sets())
    alice = keys.rpc(b.endpoint, "alice")
    jid = alice.ok(T["SUBMIT"], argv=["true"], ntasks=1)["job"]
    wait_until(lambda: alice.call(T["JOB_GET"], job=jid)["job"]["state"] == "done",
               scaled(30), msg="alice's job ended")
    e = alice.err(T["PURGE"], "DENIED", jobs=[jid])
    assert "administrators" in e["msg"]
    assert alice.call(T["JOB_GET"], job=jid)["job"]["state"] == "done"
    r = b.client().ok(T["PURGE"], "PURGED", jobs=[jid])  # the suite key is an admin
    assert [j["job"] for j in r["jobs"]] == [jid]
    alice.err(T["JOB_GET"], "NOT_FOUND", job=jid)


def test_fairshare_usage_of_purged_jobs_outlives_kill_9(cluster_factory, client_factory,
                                                         batch_factory):
    """The fairshare history is rebuilt at start from the element records; a purge
    deletes them, so what the purged jobs ran is kept (table fshist)."""
    fs = {"fairshare.fspolicy": "dedicatedps", "priority.fsuserweight": 100,
          "user:alice.fstarget": 50, "user:bob.fstarget": 50}
    cl, b = grid(cluster_factory, client_factory, batch_factory, bsets=fs)

    def usage():
        rows = b.rpc(T["DIAGNOSE"], what="fairshare")["creds"]
        return {r["name"]: r["usage_pct"] for r in rows if r["kind"] == "user"}

    a = b.rpc(T["PSUBMIT"], argv=["sleep 0.5"], shell=True, procs=1, user="alice")["job"]
    wait_ended(b, a)
    bo = b.rpc(T["PSUBMIT"], argv=["sleep 0.5"], shell=True, procs=1, user="bob")["job"]
    wait_ended(b, bo)
    before = usage()
    assert before["alice"] > 0 and before["bob"] > 0, before
    b.client().ok(T["PURGE"], "PURGED", jobs=[a])
    b.kill(signal.SIGKILL)
    b.restart()
    after = usage()
    assert abs(after["alice"] - before["alice"]) < 0.5, (before, after)
    assert b.rpc(T["JOB_LIST"])["jobs"][0]["job"] == bo


def test_files_only_purged_jobs_named_are_swept_after_the_purge(
        cluster_factory, client_factory, batch_factory, gridnode_bin, tmp_path):
    """A purge that removed a job with files asks for a sweep of the batch role's store
    at the next tick (as the cluster's): a file only purged jobs named goes (after
    files.keep_s, 0 here), one a remaining job names stays."""
    cl, b = files_grid(cluster_factory, client_factory, batch_factory,
                       bsets={"files.keep_s": 0})
    paths = []
    for n in range(2):
        f = tmp_path / ("in%d.bin" % n)
        f.write_bytes(os.urandom(1000 + n))
        r = run_cli(gridnode_bin, "submit", "-e", b.endpoint, "--shell", "--input", f,
                    "--json", "cat in%d.bin > /dev/null" % n)
        assert r.returncode == 0, r.stderr
        jid = json.loads(r.stdout)["job"]
        assert wait_batch(b, jid)["job"]["state"] == "done"
        paths.append((jid, stored_path(b, sha(f.read_bytes()))))
    assert all(p.exists() for _, p in paths)
    b.client().ok("PURGE", "PURGED", jobs=[paths[0][0]])
    wait_until(lambda: not paths[0][1].exists(), scaled(20), msg="the purged job's input swept")
    assert paths[1][1].exists()


def test_an_element_whose_cluster_job_was_purged_unseen_is_not_run_again(
        cluster_factory, client_factory, batch_factory):
    """The batch role down while its cluster job ends and an administrator purges it
    there: back, its JOB_GET hears NOT_FOUND with `purged` (docs/wire.md ERROR), so the
    element ends failed saying so; it is not requeued (it may have run whole)."""
    cl, b = grid(cluster_factory, client_factory, batch_factory)
    jid = b.rpc(T["SUBMIT"], argv=["sleep", "2"], ntasks=1, limit_s=60)["job"]
    wait_until(lambda: cl.client().ok("JOB_LIST", "JOBS")["jobs"], scaled(30),
               msg="the element's job at the cluster")
    cj = cl.client().ok("JOB_LIST", "JOBS")["jobs"][0]["job"]
    b.kill(signal.SIGKILL)
    wait_until(lambda: cl.client().ok("JOB_GET", "JOB", job=cj)["job"]["state"] == "done",
               scaled(30), msg="the cluster job done")
    cl.client().ok("PURGE", "PURGED", jobs=[cj])
    b.start()
    wait_until(lambda: state(b, jid) in ("done", "failed"), scaled(60),
               msg="the batch role to hear of its job's end")
    j = b.rpc(T["JOB_GET"], job=jid, tasks=True)
    assert j["job"]["state"] == "failed", j
    assert "purged its job %d" % cj in json.dumps(j), j
    assert cl.client().ok("JOB_LIST", "JOBS")["jobs"] == [], "the element ran again"
