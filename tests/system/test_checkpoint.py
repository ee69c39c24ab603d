"""Task checkpoints (issue 26 feature 5, docs/data.md "Checkpoints"): a task finds
GRIDNODE_CHECKPOINT_DIR; what it writes there survives a kill -9 of its client (the
task runs again with it in place), and with `submit --checkpoint-s` the latest
checkpoint goes to the cluster, so a task re-issued to another node continues there.
A symbolic link in the directory is not followed; a checkpoint over files.ckpt_mb is
not uploaded and the result says so. Real cluster and sandboxed clients; bounded waits."""

import hashlib
import json
import subprocess

from conftest import FAST_CLIENT, FAST_CLUSTER as FAST, scaled, wait_until
from test_data import run_cli, stored_path, wait_job

CLIENT_SANDBOX = True
SETS = dict(FAST_CLIENT, **{"client.slots": 1})

# counts to N in $GRIDNODE_CHECKPOINT_DIR/n, from where the checkpoint left it
COUNT = ('d="$GRIDNODE_CHECKPOINT_DIR"; n=$(cat "$d/n" 2>/dev/null || echo 0); s=$n; '
         'while [ "$n" -lt 30 ]; do n=$((n+1)); echo $n > "$d/n.tmp"; mv "$d/n.tmp" "$d/n"; '
         'sleep 0.2; done; echo start=$s end=$n')


def sha(b):
    return hashlib.sha256(b).hexdigest()


def submit(gridnode_bin, cl, script, *opts):
    r = run_cli(gridnode_bin, "submit", "-e", cl.endpoint, "--shell", "--json", *opts, script)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)["job"]


def counted(node):
    """The count a task of node reached in its checkpoint directory (0: none yet)."""
    best = 0
    for f in (node.state_dir / "work").glob("*/.gridnode-checkpoint/n"):
        try:
            best = max(best, int(f.read_text() or 0))
        except (OSError, ValueError):
            pass
    return best


def restart(client, workdir):
    """kill -9 of the client, then the same command line again (its state dir)."""
    client.stop(9)
    log = open(workdir / ("%s-restart.log" % client.name), "wb")
    return subprocess.Popen(client.args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=log)


def start_of(task):
    out = task["stdout"].decode()
    assert "end=30" in out, task
    return int(out.split("start=")[1].split()[0])


def test_a_task_killed_with_its_client_resumes_from_its_checkpoint(cluster_factory,
                                                                   client_factory, gridnode_bin,
                                                                   workdir):
    cl = cluster_factory(FAST)
    node, = client_factory(cl, sets=SETS)
    jid = submit(gridnode_bin, cl, COUNT)
    wait_until(lambda: counted(node) >= 5, scaled(30), msg="the task counted to 5")
    again = restart(node, workdir)
    try:
        job = wait_job(cl, jid)
        assert job["job"]["state"] == "done", job
        assert start_of(job["tasks"][0]) >= 5, job["tasks"][0]
        # done: the checkpoint kept for it is dropped
        wait_until(lambda: not list((node.state_dir / "ckpt").glob("%d.*/*" % jid)), scaled(10),
                   msg="its kept checkpoint dropped")
    finally:
        again.kill()
        again.wait(timeout=10)


def test_a_task_reissued_to_another_node_continues_from_the_uploaded_checkpoint(
        cluster_factory, client_factory, gridnode_bin):
    cl = cluster_factory(FAST)
    a, = client_factory(cl, sets=SETS)
    jid = submit(gridnode_bin, cl, COUNT, "--checkpoint-s", 1)
    r = run_cli(gridnode_bin, "job", "-e", cl.endpoint, jid)
    assert "checkpoints: every 1 s" in r.stdout, r.stdout
    # checkpoints with a count of 5 or more are at the cluster (their files, by content):
    # two of them, since a node names a checkpoint (CKPT) after its upload and before it
    # uploads the next; a file alone may be one not yet named (seen once under load)
    wait_until(lambda: sum(stored_path(cl, sha(b"%d\n" % k)).exists() for k in range(5, 31)) >= 2,
               scaled(40), msg="two checkpoints uploaded")
    a.stop(9)  # the node is gone for good: the task is issued to another
    b, = client_factory(cl, sets=SETS)
    job = wait_job(cl, jid, timeout=90)
    assert job["job"]["state"] == "done", job["tasks"]
    t = job["tasks"][0]
    assert start_of(t) >= 5, t
    assert "task %d.0 finished" % jid in b.log()  # it ran on the second node


def test_checkpoint_links_are_not_followed_and_the_cap_gives_a_note(cluster_factory,
                                                                     client_factory,
                                                                     gridnode_bin):
    cl = cluster_factory(dict(FAST, **{"files.ckpt_mb": 1}))
    client_factory(cl, sets=dict(SETS, **{"client.slots": 2}))
    link = submit(gridnode_bin, cl,
                  'd="$GRIDNODE_CHECKPOINT_DIR"; ln -s /etc/passwd "$d/leak"; echo ok > "$d/n"; '
                  'sleep 3; echo done', "--checkpoint-s", 1)
    big = submit(gridnode_bin, cl,
                 'head -c 2000000 /dev/zero > "$GRIDNODE_CHECKPOINT_DIR/big"; sleep 3; echo done',
                 "--checkpoint-s", 1)
    j = wait_job(cl, link)
    t = j["tasks"][0]
    assert j["job"]["state"] == "done" and t["stdout"] == b"done\n", j
    assert "'leak' is a symbolic link: not followed" in t.get("files_note", ""), t
    assert stored_path(cl, sha(b"ok\n")).exists()  # the rest of it was uploaded
    assert not stored_path(cl, sha(open("/etc/passwd", "rb").read())).exists()
    j = wait_job(cl, big)
    t = j["tasks"][0]
    assert j["job"]["state"] == "done" and t["stdout"] == b"done\n", j
    assert "files.ckpt_mb = 1 MB" in t.get("files_note", ""), t
    assert not stored_path(cl, sha(bytes(2000000))).exists()


def test_checkpoint_s_is_kept_with_the_job(cluster):
    # through the batch role: test_data_batch.py
    r = cluster.client().ok("SUBMIT", "SUBMITTED", argv=["true"], ntasks=1, checkpoint_s=10)
    job = cluster.client().ok("JOB_GET", "JOB", job=r["job"])["job"]
    assert job["checkpoint_s"] == 10, job
    cluster.restart()  # kept with the job (table jobdata) across kill -9
    job = cluster.client().ok("JOB_GET", "JOB", job=r["job"])["job"]
    assert job["checkpoint_s"] == 10, job
