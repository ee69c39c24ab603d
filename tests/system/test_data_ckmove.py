"""A checkpoint travels with a task the batch role moves to another cluster (issue 26
feature 5, docs/data.md "Checkpoints", docs/wire.md 6.19 "Moving a pinned task"): the
batch role reads the old cluster's latest checkpoint of the task (JOB task row `ckpt`),
copies its files (FILE_GET), offers them to the new cluster and names them in its SUBMIT
(`ckpt`), so the task goes on from its count there. A SUBMIT's `ckpt` the cluster cannot
take is INVALID with a clear reason. One batch role over two real clusters, each with
one sandboxed client; bounded waits."""

import hashlib
import json

from conftest import FAST_CLIENT, FAST_CLUSTER as FAST, scaled, wait_until
from test_data import run_cli, stored_path

CLIENT_SANDBOX = True
SETS = dict(FAST_CLIENT, **{"client.slots": 1})
BATCH = {"batch.log_level": "debug"}

# counts to 30 in $GRIDNODE_CHECKPOINT_DIR/n from where the checkpoint left it
COUNT = ('d="$GRIDNODE_CHECKPOINT_DIR"; n=$(cat "$d/n" 2>/dev/null || echo 0); s=$n; '
         'while [ "$n" -lt 30 ]; do n=$((n+1)); echo $n > "$d/n.tmp"; mv "$d/n.tmp" "$d/n"; '
         'sleep 0.2; done; echo start=$s end=$n > result.txt')


def sha(b):
    return hashlib.sha256(b).hexdigest()


def batch_job(b, jid):
    return b.client().ok("JOB_GET", "JOB", job=jid, tasks=True)


def move_to_b(cluster_factory, client_factory, batch_factory, gridnode_bin, stop_a=False,
              script=COUNT, cb_sets=None):
    """A job's class is a cluster (docs/batch.md): COUNT of class `main` runs on cluster
    A; once two of its checkpoints are there its host leaves, and while the task waits
    to move the operator gives the name `main` to cluster B (kill -9 of the batch role,
    started again with the new list: A stays, as `old`), so B is the only place it can
    go (stop_a: A's manager is killed first). The batch role, the job, its cluster job
    at A, the two clusters, once the task ended."""
    ca, cb = cluster_factory(FAST), cluster_factory(dict(FAST, **(cb_sets or {})))
    na, = client_factory(ca, sets=SETS)  # cluster A's only host; B has none yet
    b = batch_factory(["main=" + ca.endpoint, "spare=" + cb.endpoint], sets=BATCH)
    wait_until(lambda: any(n["active"] for n in b.client().ok("NODE_LIST", "NODES")["nodes"]),
               scaled(20), msg="the batch role sees A's host")
    r = run_cli(gridnode_bin, "submit", "-e", b.endpoint, "--shell", "--checkpoint-s", 1,
                "--class", "main", "--output", "result.txt", "--json", script)
    assert r.returncode == 0, r.stderr
    jid = json.loads(r.stdout)["job"]
    # two checkpoints with a count of 5 or more are at cluster A (see test_checkpoint.py)
    wait_until(lambda: sum(stored_path(ca, sha(b"%d\n" % k)).exists() for k in range(5, 31)) >= 2,
               scaled(40), msg="two checkpoints reach cluster A")
    cjob = batch_job(b, jid)["tasks"][0]["cjob"]
    # the old job's task row names its latest checkpoint (for its owner and peers)
    row = ca.client().ok("JOB_GET", "JOB", job=cjob, tasks=True)["tasks"][0]
    ck, = [f for f in row["ckpt"] if f["name"] == "n"]  # n.tmp may be caught too
    assert int(stored_path(ca, ck["hash"]).read_bytes()) >= 5, row
    na.stop(9)  # the host leaves for good
    wait_until(lambda: "moving: its host" in (batch_job(b, jid)["tasks"][0].get("reason") or ""),
               scaled(30), msg="the task waits to move")
    if stop_a:
        ca.kill()
    b.clusters = ["old=" + ca.endpoint, "main=" + cb.endpoint]
    b.restart()  # kill -9: the kept cluster job is stored with the task
    client_factory(cb, sets=SETS)  # the only host of class main now
    wait_until(lambda: batch_job(b, jid)["job"]["state"] in ("done", "failed", "cancelled"),
               scaled(90), msg="the moved task ends")
    job = batch_job(b, jid)
    assert job["job"]["state"] == "done", job
    t, = job["tasks"]
    assert t["cluster"] == "main" and t["endpoint"] == cb.endpoint, t  # cluster B
    f, = t["files"]
    start = int(stored_path(b, f["hash"]).read_text().split("start=")[1].split()[0])
    return b, start, cjob, ca


def test_a_checkpoint_moves_with_its_task_to_another_cluster(cluster_factory, client_factory,
                                                             batch_factory, gridnode_bin):
    b, start, cjob, ca = move_to_b(cluster_factory, client_factory, batch_factory, gridnode_bin)
    assert start >= 5, start  # it went on from A's checkpoint, not from 0
    assert "with its checkpoint" in b.log()
    # the old job is cancelled at A once B took the task
    wait_until(lambda: ca.client().ok("JOB_GET", "JOB", job=cjob)["job"]["state"] == "cancelled",
               scaled(20), msg="the old job is cancelled at cluster A")


def test_a_move_whose_old_cluster_is_down_starts_from_the_start(cluster_factory, client_factory,
                                                                 batch_factory, gridnode_bin):
    b, start, _, _ = move_to_b(cluster_factory, client_factory, batch_factory, gridnode_bin,
                               stop_a=True)
    assert start == 0, start  # bounded: the request deadline, then from the start
    assert ("starts from the start on cluster main: cluster old, which holds its checkpoint, "
            "does not answer") in b.log()


def test_a_submits_ckpt_the_cluster_cannot_take_is_invalid(cluster, batch_factory, meta_factory):
    c = cluster.client()
    data = b"7\n"
    st = c.ok("FILE_PUT", "FILE_STATE", hash=sha(data), size=len(data), off=0, data=data)
    assert st["done"], st
    ok = dict(name="n", hash=sha(data), size=len(data))
    job = dict(argv=["true"], ntasks=1, checkpoint_s=1)
    missing = dict(ok, hash=sha(b"not here"))
    assert "not stored whole" in c.err("SUBMIT", "INVALID", ckpt=[missing], **job)["msg"]
    assert "needs checkpoint_s" in c.err("SUBMIT", "INVALID", ckpt=[ok], argv=["true"],
                                         ntasks=1)["msg"]
    assert "needs ntasks 1" in c.err("SUBMIT", "INVALID", ckpt=[ok], **dict(job, ntasks=2))["msg"]
    assert "'..' component" in c.err("SUBMIT", "INVALID", ckpt=[dict(ok, name="../n")],
                                     **job)["msg"]
    # taken: the task's latest checkpoint until it records its own (issue 0: no issue here)
    jid = c.ok("SUBMIT", "SUBMITTED", ckpt=[ok], **dict(job, argv=["sleep", "600"]))["job"]
    row = c.ok("JOB_GET", "JOB", job=jid, tasks=True)["tasks"][0]
    assert row["ckpt"] == [ok] and row["ckpt_issue"] == 0, row
    # a batch role takes no ckpt from its users: it is the clusters' field
    b = batch_factory([cluster], sets=BATCH)
    assert "cluster manager only" in b.client().err("SUBMIT", "INVALID", ckpt=[ok], **job)["msg"]
    # nor does the grid spool (one vocabulary: the same refusal at every level above)
    m = meta_factory({"site": b})
    assert "cluster manager only" in m.client().err("SUBMIT", "INVALID", ckpt=[ok], **job)["msg"]


def test_a_checkpoint_the_new_cluster_refuses_is_dropped_and_the_task_starts_over(
        cluster_factory, client_factory, batch_factory, gridnode_bin):
    """The new cluster takes the carried files (files.job_mb) but refuses them as a
    checkpoint (over its files.ckpt_mb): the SUBMIT is INVALID, and the batch role starts
    the task there again without the checkpoint instead of failing it."""
    pad = 'head -c 1200000 /dev/zero > "$GRIDNODE_CHECKPOINT_DIR/pad"; '
    b, start, _, _ = move_to_b(cluster_factory, client_factory, batch_factory, gridnode_bin,
                               script=pad + COUNT, cb_sets={"files.ckpt_mb": 1})
    assert start == 0, start
    assert "the cluster refused the checkpoint carried to it" in b.log()
