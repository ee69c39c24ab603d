"""Checkpoints of parallel jobs (issue 26 item 5, docs/data.md "Checkpoints of parallel
jobs"): with `submit -p N --checkpoint-s S` every rank finds its own
GRIDNODE_CHECKPOINT_DIR and marks a complete generation by writing its number into
`.generation` there, last; each rank's node sends that rank's checkpoint to the cluster,
which keeps per job the newest generation EVERY rank delivered. When the job runs again
(requeued by `gridnode requeue`, after a kill -9 of the cluster; or after a kill -9 of a
rank's client; or run again by a batch role as a new cluster job naming the old one),
every rank starts with its own files of that generation: never a generation one rank
did not deliver. A checkpoint over files.ckpt_mb, a marker that is not a number and a
forgotten marker are named in the rank's files_note; CKPTs from outside are refused
with clear errors; nothing crashes. Real cluster, two real sandboxed clients, real
processes; bounded waits."""

import json
import subprocess

from conftest import FAST_CLIENT, TYPES, scaled, wait_until
import msgpack
from pynode import PyNode
from test_data import run_cli, sha, stored_path

CLIENT_SANDBOX = True  # the shipped execution boundary: a rank dies with its client

T = dict(TYPES, SD_INFO=42)
SD = {"store.sync": "none", "tasks.heartbeat_s": 1, "tasks.idle_wait_s": 1,
      "queues.sync_ms": 100}
NODE = dict(FAST_CLIENT, **{"client.slots": 1})  # one core each: a rank per host

# Each rank counts generations, 1.2 s apart (longer than --checkpoint-s 1, so that its
# node sees every one): the count file first (rename), the marker last. Rank 0 goes to
# generation 4, rank 1 stops at 2 and waits: generations 3 and 4 are rank 0's alone.
# Started again from a checkpoint, a rank prints what it found and ends.
COUNT = r'''
d="$GRIDNODE_CHECKPOINT_DIR"; r=$GRIDNODE_RANK
g=$(cat "$d/.generation" 2>/dev/null || echo 0)
if [ "$g" -gt 0 ]; then echo "start gen=$g count=$(cat "$d/count")"; exit 0; fi
top=2; [ "$r" = 0 ] && top=4
while [ "$g" -lt "$top" ]; do
  g=$((g+1)); echo "rank $r count $g" > "$d/count.tmp"; mv "$d/count.tmp" "$d/count"
  echo $g > "$d/.generation"; sleep 1.2
done
sleep 60
'''


def hosts(cl):
    return sum(len(k["hosts"]) for k in cl.rpc(T["SD_INFO"])["clusters"])


def two_hosts(cluster_factory, client_factory, sets=None, nodes=None):
    cl = cluster_factory(dict(SD, **(sets or {})))
    got = client_factory(cl, 2, sets=NODE)
    if nodes is not None:
        nodes.extend(got)
    wait_until(lambda: hosts(cl) >= 2, scaled(20), interval=0.1, msg="two hosts")
    return cl


def submit(gridnode_bin, ep, script, *opts):
    r = run_cli(gridnode_bin, "submit", "-e", ep, "-p", 2, "--shell", "--json", *opts, script)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)["job"]


def job(cl, jid, **kw):
    return cl.rpc(T["JOB_GET"], job=jid, **kw)["job"]


def at_generation_2(cl, jid):
    """Generation 2 complete (both ranks), and rank 0's generation 4 at the cluster too."""
    wait_until(lambda: job(cl, jid).get("ckpt_gen", 0) >= 2
               and stored_path(cl, sha(b"rank 0 count 4\n")).exists(),
               scaled(40), interval=0.2, msg="generation 2 complete, rank 0 at 4")
    assert job(cl, jid)["ckpt_gen"] == 2  # 3 and 4 are rank 0's only


def resumed_at_2(j):
    """Each rank started from ITS files of generation 2, the one both ranks delivered."""
    outs = sorted(p["stdout"].decode().strip() for p in j["ranks"])
    assert outs == ["start gen=2 count=rank 0 count 2", "start gen=2 count=rank 1 count 2"], outs


def ended(cl, jid):
    wait_until(lambda: job(cl, jid)["state"] not in ("waiting", "queued", "running",
                                                     "requeueing"),
               scaled(60), msg="job %d ends" % jid)
    return job(cl, jid, output=True)


def test_a_requeued_parallel_job_resumes_from_the_complete_generation(
        cluster_factory, client_factory, gridnode_bin):
    cl = two_hosts(cluster_factory, client_factory)
    jid = submit(gridnode_bin, cl.endpoint, COUNT, "--checkpoint-s", 1)
    assert job(cl, jid)["checkpoint_s"] == 1
    at_generation_2(cl, jid)
    r = run_cli(gridnode_bin, "job", "-e", cl.endpoint, jid)
    assert "checkpoints: every 1 s" in r.stdout and "complete: generation 2" in r.stdout, r.stdout
    # kill -9 of the cluster: the ranks' checkpoints and the complete generation survive
    cl.restart()
    wait_until(lambda: job(cl, jid)["state"] == "running", scaled(30), msg="running again")
    assert job(cl, jid)["ckpt_gen"] == 2
    r = run_cli(gridnode_bin, "requeue", "-e", cl.endpoint, jid)
    assert r.returncode == 0, r.stderr
    j = ended(cl, jid)
    assert j["state"] == "done" and j["requeues"] == 1, j
    resumed_at_2(j)


def test_a_rank_lost_with_its_client_restarts_the_job_from_the_complete_generation(
        cluster_factory, client_factory, gridnode_bin, workdir):
    nodes = []
    cl = two_hosts(cluster_factory, client_factory, nodes=nodes)
    jid = submit(gridnode_bin, cl.endpoint, COUNT, "--checkpoint-s", 1)
    at_generation_2(cl, jid)
    # kill -9 of rank 1's client, started again on its state: its rank is lost, the job
    # is requeued (queues.lost_requeues) and placed again on both hosts
    host1 = next(p["host"] for p in job(cl, jid)["ranks"] if p["rank"] == 1)
    node = next(n for n in nodes if n.name == host1)
    node.stop(9)
    log = open(workdir / ("%s-restart.log" % node.name), "wb")
    again = subprocess.Popen(node.args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                             stderr=log)
    try:
        j = ended(cl, jid)
        assert j["state"] == "done" and j["requeues"] == 1, j
        resumed_at_2(j)
    finally:
        again.kill()
        again.wait(timeout=10)
        log.close()


def cluster_jobs(cl):
    return sorted(x["job"] for x in cl.rpc(T["JOB_LIST"])["jobs"] if x.get("kind") == "parallel")


def test_through_the_batch_role_a_lost_run_restarts_from_the_complete_generation(
        cluster_factory, client_factory, batch_factory, gridnode_bin, workdir):
    nodes = []
    cl = two_hosts(cluster_factory, client_factory, nodes=nodes)
    b = batch_factory([cl])
    wait_until(lambda: sum(n["active"] for n in b.client().ok("NODE_LIST", "NODES")["nodes"])
               >= 2, scaled(20), msg="the batch role sees both hosts")
    bid = submit(gridnode_bin, b.endpoint, COUNT, "--checkpoint-s", 1)
    wait_until(lambda: cluster_jobs(cl), scaled(30), msg="started on the cluster")
    first = cluster_jobs(cl)[0]
    assert job(cl, first)["checkpoint_s"] == 1  # passed on by the batch role
    at_generation_2(cl, first)
    # kill -9 of rank 1's client: the cluster job fails "lost" (the batch role placed it),
    # the batch role runs the job again as a new cluster job, from the old one's checkpoint
    host1 = next(p["host"] for p in job(cl, first)["ranks"] if p["rank"] == 1)
    node = next(n for n in nodes if n.name == host1)
    node.stop(9)
    log = open(workdir / ("%s-restart.log" % node.name), "wb")
    again = subprocess.Popen(node.args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                             stderr=log)
    try:
        wait_until(lambda: b.client().ok("JOB_GET", "JOB", job=bid)["job"]["state"]
                   in ("done", "failed", "cancelled"), scaled(90), msg="batch job %d ends" % bid)
        assert b.client().ok("JOB_GET", "JOB", job=bid)["job"]["state"] == "done"
        second = [x for x in cluster_jobs(cl) if x != first]
        assert len(second) == 1, cluster_jobs(cl)
        j = ended(cl, second[0])
        assert j["state"] == "done", j
        resumed_at_2(j)
    finally:
        again.kill()
        again.wait(timeout=10)
        log.close()


def test_through_the_spool_the_period_reaches_the_cluster(cluster_factory, client_factory,
                                                        batch_factory, meta_factory,
                                                        gridnode_bin):
    """One user vocabulary: `-e META -p 2 --checkpoint-s 1` is taken by the spool, passed
    on to its batch site and from there to the cluster, which keeps the generation."""
    cl = two_hosts(cluster_factory, client_factory)
    b = batch_factory([cl])
    m = meta_factory({"site": b}, sets={"meta.policy": "round_robin"})
    wait_until(lambda: m.client().ok("SITE_INFO", "SITE")["sites"][0].get("up"), scaled(20),
               msg="the spool sees its site")
    mid = submit(gridnode_bin, m.endpoint, 'echo 1 > "$GRIDNODE_CHECKPOINT_DIR/.generation"; '
                 "sleep 3", "--checkpoint-s", 1)
    wait_until(lambda: cluster_jobs(cl), scaled(30), msg="started on the cluster")
    cj = cluster_jobs(cl)[0]
    assert job(cl, cj)["checkpoint_s"] == 1
    wait_until(lambda: job(cl, cj).get("ckpt_gen", 0) == 1, scaled(30),
               msg="generation 1 complete at the cluster")
    wait_until(lambda: m.client().ok("JOB_GET", "JOB", job=mid)["job"]["state"] == "done",
               scaled(60), msg="spool job %d done" % mid)


# A checkpoint over files.ckpt_mb (rank 0) and a marker that is not a number (rank 1):
# nothing is sent, the rank's files_note says why, the job runs to its end.
BAD = r'''
d="$GRIDNODE_CHECKPOINT_DIR"
if [ "$GRIDNODE_RANK" = 0 ]; then head -c 2000000 /dev/zero > "$d/big"; echo 1 > "$d/.generation"
else echo 1 > "$d/count"; echo "one" > "$d/.generation"; fi
sleep 3; echo done
'''


def test_bad_rank_checkpoints_are_named_and_nothing_crashes(cluster_factory, client_factory,
                                                           gridnode_bin):
    cl = two_hosts(cluster_factory, client_factory, {"files.ckpt_mb": 1})
    jid = submit(gridnode_bin, cl.endpoint, BAD, "--checkpoint-s", 1)
    j = ended(cl, jid)
    assert j["state"] == "done", j
    notes = {p["rank"]: p.get("files_note", "") for p in j["ranks"]}
    assert "files.ckpt_mb = 1 MB" in notes[0], notes
    assert "holds 'one', not a generation number" in notes[1], notes
    assert "ckpt_gen" not in j, j
    assert not stored_path(cl, sha(bytes(2000000))).exists()
    assert not stored_path(cl, sha(b"1\n")).exists()  # rank 1's count: never sent
    # a rank that never writes the marker: nothing sent, and its note says why
    jid = submit(gridnode_bin, cl.endpoint, 'echo 5 > "$GRIDNODE_CHECKPOINT_DIR/n"; sleep 2',
                 "--checkpoint-s", 1)
    j = ended(cl, jid)
    assert j["state"] == "done", j
    for p in j["ranks"]:
        assert "holds files but no .generation" in p.get("files_note", ""), p
    assert not stored_path(cl, sha(b"5\n")).exists()
    # CKPT from outside (a node written from docs/wire.md): clear refusals, nothing crashes
    py = PyNode(cl.endpoint, name="py-ckpt")
    try:
        py.hello()
        f = [{"name": "n", "hash": sha(b"x"), "size": 1}]
        for k, (fields, want) in enumerate((
                (dict(job=jid, idx=0, issue=0, gen=5), "does not run on this node"),
                (dict(job=10 ** 9, idx=0, issue=0, gen=5), "no parallel job"),
                (dict(job=jid, idx=0, issue=0, gen=2 ** 40), "gen"))):
            py.sock.send(msgpack.packb(dict(v=1, t=125, id=1000 + k, sid=py.sid, files=f,
                                            **fields), use_bin_type=True))
            assert py.sock.poll(int(scaled(10) * 1000)), fields
            r = msgpack.unpackb(py.sock.recv(), raw=False)
            assert r["t"] == T["ERROR"] and want in r["msg"], (fields, r)
    finally:
        py.close()
    assert job(cl, jid)["state"] == "done"  # the cluster is still there
    # a checkpoint period out of range is refused by the tool
    r = run_cli(gridnode_bin, "submit", "-e", cl.endpoint, "-p", 2, "--checkpoint-s", 0, "true")
    assert r.returncode != 0 and "--checkpoint-s" in r.stderr, r.stderr
