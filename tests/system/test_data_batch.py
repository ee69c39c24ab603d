"""Files through the batch role (issue 26, docs/data.md "Through the batch role"): the
user's tool uploads to the batch role as to a cluster (FILE_HAVE, FILE_PUT), the batch
role offers a task's inputs to the cluster it starts the task on before the SUBMIT
naming them, copies the task's outputs back when it ends, and `gridnode job --output`
and `gridnode fetch` at the batch role give them, checked byte for byte. An upload cut
by kill -9 of the batch role resumes; a user's files beyond files.user_mb are refused
at the batch role and at the cluster alike."""

import json
import os
import signal
import time

from conftest import FAST_CLIENT, FAST_CLUSTER as FAST, Client, scaled, wait_until
from test_data import (CHUNK, check_three_tasks_fetched, check_three_tasks_kept, run_cli, sha,
                       stored_path, submit_three_tasks, upload_cut_by_kill9)

BATCH = {"batch.log_level": "debug"}
TASK_PIN = 148  # docs/wire.md 6.19 "Moving a pinned task"


def grid(cluster_factory, client_factory, batch_factory, bsets=None, csets=None):
    cl = cluster_factory(dict(FAST, **(csets or {})))
    client_factory(cl, sets=dict(FAST_CLIENT, **{"client.slots": 2}))
    b = batch_factory([cl], sets=dict(BATCH, **(bsets or {})))
    wait_until(lambda: any(n["active"] for n in b.client().ok("NODE_LIST", "NODES")["nodes"]), scaled(20),
               msg="the batch role sees the host")
    return cl, b


def batch_job(b, jid):
    return b.client().ok("JOB_GET", "JOB", job=jid, tasks=True)


def wait_batch(b, jid, timeout=60):
    wait_until(lambda: batch_job(b, jid)["job"]["state"] in ("done", "failed", "cancelled"),
               scaled(timeout), msg="batch job %d ends" % jid)
    return batch_job(b, jid)


def test_inputs_and_outputs_through_the_batch_role(cluster_factory, client_factory,
                                                   batch_factory, gridnode_bin, tmp_path):
    cl, b = grid(cluster_factory, client_factory, batch_factory)
    jid, shared = submit_three_tasks(gridnode_bin, b.endpoint, tmp_path)
    # the batch role keeps its own copy, content-addressed as the cluster's
    h = sha(shared)
    assert stored_path(b, h).read_bytes() == shared
    job = wait_batch(b, jid)
    assert job["job"]["state"] == "done", job
    # each task ran at the cluster as a one-task job pinned to its host, with its inputs
    assert stored_path(cl, h).read_bytes() == shared
    check_three_tasks_kept(job["tasks"], shared, b)
    # gridnode job --output at the batch role lists them; fetch gets them, verified
    r = run_cli(gridnode_bin, "job", "-e", b.endpoint, jid, "--output")
    assert r.returncode == 0 and "copy.out" in r.stdout and "1500000" in r.stdout, (r.stdout,
                                                                                   r.stderr)
    check_three_tasks_fetched(gridnode_bin, b.endpoint, jid, tmp_path / "results", shared)
    # the copies survive a restart of the batch role (stored, not relayed)
    b.restart()
    out2 = tmp_path / "again"
    r = run_cli(gridnode_bin, "fetch", "-e", b.endpoint, jid, out2)
    assert r.returncode == 0 and "9 file(s) fetched" in r.stdout, (r.stdout, r.stderr)
    # a SUBMIT naming a file the batch role does not hold is refused, as at a cluster
    e = b.client().err("SUBMIT", "INVALID", argv=["true"], ntasks=1,
                       inputs=[{"name": "x", "hash": "ab" * 32, "size": 3}])
    assert "the batch role holds no file" in e["msg"], e


def test_an_upload_cut_by_kill9_of_the_batch_role_resumes(cluster_factory, client_factory,
                                                          batch_factory, gridnode_bin, tmp_path):
    cl, b = grid(cluster_factory, client_factory, batch_factory, bsets={"store.sync": "full"})
    src, h, size = upload_cut_by_kill9(b, tmp_path)  # cut before the SUBMIT
    # the tool goes on from there (its FILE_HAVE), submits, the task reads the whole file
    r = run_cli(gridnode_bin, "submit", "-e", b.endpoint, "--shell", "--input", src,
                "--output", "*.sum", "--json", "sha256sum in.bin > in.sum")
    assert r.returncode == 0, r.stderr
    jid = json.loads(r.stdout)["job"]
    job = wait_batch(b, jid)
    assert job["job"]["state"] == "done", job
    f, = job["tasks"][0]["files"]
    assert stored_path(b, f["hash"]).read_text().split()[0] == h
    assert "file %s stored" % h[:12] in cl.log()  # offered to the cluster, whole


def test_offering_inputs_to_the_cluster_resumes_after_kill9(cluster_factory, client_factory,
                                                            batch_factory, gridnode_bin,
                                                            tmp_path):
    cl, b = grid(cluster_factory, client_factory, batch_factory)
    data = os.urandom(3 * CHUNK + 99)
    src = tmp_path / "in.bin"
    src.write_bytes(data)
    h, size = sha(data), len(data)
    # an earlier offer cut short: the cluster holds the first chunk
    cl.client().ok("FILE_PUT", "FILE_STATE", hash=h, size=size, off=0, data=data[:CHUNK])
    # the cluster stops answering while the batch role offers the file; the batch role
    # is killed (-9) then, with its task "starting"
    cl.proc.send_signal(signal.SIGSTOP)
    try:
        r = run_cli(gridnode_bin, "submit", "-e", b.endpoint, "--shell", "--input", src,
                    "--output", "*.sum", "--json", "sha256sum in.bin > in.sum")
        assert r.returncode == 0, r.stderr
        jid = json.loads(r.stdout)["job"]
        wait_until(lambda: "offering file %s" % h[:12] in b.log(), scaled(20),
                   msg="the batch role offers the input to the cluster")
        t = batch_job(b, jid)["tasks"][0]
        assert t["state"] == "starting" and "sending its inputs to cluster" in t["reason"], t
        b.kill()
    finally:
        cl.proc.send_signal(signal.SIGCONT)
    b.restart()
    # the resync starts the task again: the offer goes on from what the cluster holds
    job = wait_batch(b, jid)
    assert job["job"]["state"] == "done", job
    assert "holds %d bytes of the file: going on from there" % CHUNK in b.log()
    f, = job["tasks"][0]["files"]
    assert stored_path(b, f["hash"]).read_text().split()[0] == h
    assert stored_path(cl, h).read_bytes() == data


def test_offering_inputs_survives_kill9_of_the_cluster(cluster_factory, client_factory,
                                                        batch_factory, gridnode_bin, tmp_path):
    cl, b = grid(cluster_factory, client_factory, batch_factory)
    data = os.urandom(2 * CHUNK + 5)
    src = tmp_path / "in.bin"
    src.write_bytes(data)
    cl.proc.send_signal(signal.SIGSTOP)  # the cluster takes the offer, then dies (-9)
    r = run_cli(gridnode_bin, "submit", "-e", b.endpoint, "--shell", "--input", src,
                "--output", "*.sum", "--json", "sha256sum in.bin > in.sum")
    assert r.returncode == 0, r.stderr
    jid = json.loads(r.stdout)["job"]
    wait_until(lambda: "offering file %s" % sha(data)[:12] in b.log(), scaled(20),
               msg="the batch role offers the input to the cluster")
    cl.restart()
    job = wait_batch(b, jid, timeout=90)  # the batch role resynchronises and offers again
    assert job["job"]["state"] == "done", job
    f, = job["tasks"][0]["files"]
    assert stored_path(b, f["hash"]).read_text().split()[0] == sha(data)
    assert stored_path(cl, sha(data)).read_bytes() == data


def two_hosts(cluster_factory, client_factory, batch_factory):
    """A cluster with two one-slot hosts under a batch role that sees both."""
    cl = cluster_factory(FAST)
    nodes = client_factory(cl, 2, sets=dict(FAST_CLIENT, **{"client.slots": 1}))
    b = batch_factory([cl], sets=BATCH)
    wait_until(lambda: sum(n["active"] for n in b.client().ok("NODE_LIST", "NODES")["nodes"]) == 2,
               scaled(20), msg="the batch role sees both hosts")
    return cl, nodes, b


def kill_host(nodes, host, pidf):
    """kill -9 of the client named host, and of the task it left (its pid in pidf)."""
    victim, = [n for n in nodes if n.name == host]
    victim.stop(signal.SIGKILL)
    try:
        os.kill(int(pidf.read_text()), signal.SIGKILL)
    except (OSError, ValueError):
        pass


def test_a_task_pinned_to_a_host_that_is_lost_runs_again_elsewhere(
        cluster_factory, client_factory, batch_factory, gridnode_bin, tmp_path):
    cl, nodes, b = two_hosts(cluster_factory, client_factory, batch_factory)
    src = tmp_path / "in.txt"
    src.write_bytes(b"payload\n")
    mark, pidf = tmp_path / "first-run", tmp_path / "pid"
    # the first run hangs (its host is then killed); the second copies its input
    script = ("if mkdir %s 2>/dev/null; then echo $$ > %s; exec sleep 60; fi; "
              "cp in.txt out.txt" % (mark, pidf))
    r = run_cli(gridnode_bin, "submit", "-e", b.endpoint, "--shell", "--input", src,
                "--output", "out.txt", "--json", script)
    assert r.returncode == 0, r.stderr
    jid = json.loads(r.stdout)["job"]
    wait_until(pidf.exists, scaled(30), msg="the first run starts")
    host = batch_job(b, jid)["tasks"][0]["node"]
    kill_host(nodes, host, pidf)
    job = wait_batch(b, jid, timeout=90)
    assert job["job"]["state"] == "done", job
    t, = job["tasks"]
    assert t["node"] != host and job["job"].get("requeues") == 1, job
    f, = t["files"]
    assert stored_path(b, f["hash"]).read_bytes() == b"payload\n"
    assert "left cluster" in b.log()


# counts in $GRIDNODE_CHECKPOINT_DIR/n from where the checkpoint left it; the first run
# stops at 8 and hangs (its host is then killed), a later one counts on to 30
MOVE = ('d="$GRIDNODE_CHECKPOINT_DIR"; n=$(cat "$d/n" 2>/dev/null || echo 0); s=$n; '
        'stop=30; if mkdir {mark} 2>/dev/null; then echo $$ > {pid}; stop=8; fi; '
        'while [ "$n" -lt $stop ]; do n=$((n+1)); echo $n > "$d/n.tmp"; mv "$d/n.tmp" "$d/n"; '
        'sleep 0.1; done; [ $n -lt 30 ] && exec sleep 600; echo start=$s end=$n > result.txt')


def submit_move(gridnode_bin, cl, b, tmp_path):
    """MOVE submitted to the batch role with --checkpoint-s 1, once its first run's last
    checkpoint (a count of 8) is at the cluster: its job, the first run's pid file."""
    mark, pidf = tmp_path / "first-run", tmp_path / "pid"
    r = run_cli(gridnode_bin, "submit", "-e", b.endpoint, "--shell", "--checkpoint-s", 1,
                "--output", "result.txt", "--json", MOVE.format(mark=mark, pid=pidf))
    assert r.returncode == 0, r.stderr
    wait_until(lambda: stored_path(cl, sha(b"8\n")).exists(), scaled(40),
               msg="the first run's checkpoint reaches the cluster")
    return json.loads(r.stdout)["job"], pidf


def test_a_checkpointing_task_whose_host_is_lost_moves_with_its_checkpoint(
        cluster_factory, client_factory, batch_factory, gridnode_bin, tmp_path):
    cl, nodes, b = two_hosts(cluster_factory, client_factory, batch_factory)
    jid, pidf = submit_move(gridnode_bin, cl, b, tmp_path)
    t = batch_job(b, jid)["tasks"][0]
    host, cjob = t["node"], t["cjob"]
    kill_host(nodes, host, pidf)
    job = wait_batch(b, jid, timeout=90)
    assert job["job"]["state"] == "done", job
    t, = job["tasks"]
    # the same cluster job, moved to the other host, went on from the checkpoint
    assert t["node"] != host and t["cjob"] == cjob, (t, host, cjob)
    f, = t["files"]
    assert stored_path(b, f["hash"]).read_bytes() == b"start=8 end=30\n"
    assert "moved to host %s" % t["node"] in b.log()
    assert "job %d moved from host %s to host %s" % (cjob, host, t["node"]) in cl.log()
    # the cluster moves only a pinned job that has not ended
    c = cl.client()
    assert "already done" in c.err(TASK_PIN, "STATE", job=cjob, host=host)["msg"]
    plain = c.ok("SUBMIT", "SUBMITTED", argv=["true"], ntasks=1)["job"]
    assert "not pinned" in c.err(TASK_PIN, "STATE", job=plain, host=host)["msg"]
    assert "no job" in c.err(TASK_PIN, "NOT_FOUND", job=10 ** 9, host=host)["msg"]


def test_a_move_the_cluster_refuses_after_a_restart_runs_the_task_again_from_the_start(
        cluster_factory, client_factory, batch_factory, gridnode_bin, tmp_path):
    cl, nodes, b = two_hosts(cluster_factory, client_factory, batch_factory)
    jid, pidf = submit_move(gridnode_bin, cl, b, tmp_path)
    # the other host is busy: after its host is lost the task waits, pending
    blk = b.client().ok("SUBMIT", "SUBMITTED", argv=["sleep", "600"], ntasks=1)["job"]
    wait_until(lambda: batch_job(b, blk)["job"]["state"] == "running", scaled(30),
               msg="the other host is taken")
    t = batch_job(b, jid)["tasks"][0]
    host, cjob = t["node"], t["cjob"]
    kill_host(nodes, host, pidf)
    wait_until(lambda: "moving: its host" in (batch_job(b, jid)["tasks"][0].get("reason") or ""),
               scaled(60), msg="the task waits to move")
    b.restart()  # kill -9: the kept cluster job is stored with the task
    # meanwhile its cluster job ends (an operator cancels it): the move is refused
    cl.client().ok("CANCEL", "OK", job=cjob)
    b.client().ok("CANCEL", "OK", job=blk)
    job = wait_batch(b, jid, timeout=90)
    assert job["job"]["state"] == "done", job
    t, = job["tasks"]
    assert t["node"] != host and t["cjob"] != cjob, (t, host, cjob)
    f, = t["files"]
    assert stored_path(b, f["hash"]).read_bytes() == b"start=0 end=30\n"
    assert "cannot move its job %d" % cjob in b.log()


def test_a_kept_job_that_ran_to_its_end_meanwhile_is_the_tasks_end_not_run_again(
        cluster_factory, client_factory, batch_factory, gridnode_bin, tmp_path, procs):
    """The lost host comes back (the task held at the batch role meanwhile) and its cluster
    runs the kept job to its end before the task is placed again: the TASK_PIN is refused (STATE, already done), the batch role
    asks how the job ended, and takes that end (its output) instead of a new run: a
    task that ran whole never runs twice."""
    cl, nodes, b = two_hosts(cluster_factory, client_factory, batch_factory)
    jid, pidf = submit_move(gridnode_bin, cl, b, tmp_path)
    blk = b.client().ok("SUBMIT", "SUBMITTED", argv=["sleep", "600"], ntasks=1)["job"]
    wait_until(lambda: batch_job(b, blk)["job"]["state"] == "running", scaled(30),
               msg="the other host is taken")
    t = batch_job(b, jid)["tasks"][0]
    host, cjob = t["node"], t["cjob"]
    kill_host(nodes, host, pidf)
    wait_until(lambda: "moving: its host" in (batch_job(b, jid)["tasks"][0].get("reason") or ""),
               scaled(60), msg="the task waits to move")
    b.client().ok("JOB_CTL", "OK", job=jid, op="hold")  # not placed on the host coming back
    victim, = [n for n in nodes if n.name == host]
    # back (its state dir, its name): the cluster gives it its pinned task again
    Client(procs, gridnode_bin, victim.name, victim.state_dir, victim.server,
           dict(FAST_CLIENT, **{"client.slots": 1}), None, tmp_path / "back.log")
    wait_until(lambda: cl.client().ok("JOB_GET", "JOB", job=cjob)["job"]["state"] == "done",
               scaled(60), msg="the kept job done at its cluster")
    b.client().ok("JOB_CTL", "OK", job=jid, op="release")
    job = wait_batch(b, jid, timeout=90)
    assert job["job"]["state"] == "done", job
    t, = job["tasks"]
    assert t["cjob"] == cjob, (t, cjob)
    f, = t["files"]
    assert stored_path(b, f["hash"]).read_bytes().endswith(b" end=30\n")
    assert "its kept job %d at cluster" % cjob in b.log()
    ours = [x["job"] for x in cl.client().ok("JOB_LIST", "JOBS")["jobs"]]
    assert len(ours) == 2 and cjob in ours, ("a second run of the task", ours)


def test_a_users_files_beyond_files_user_mb_are_refused(cluster_factory, client_factory,
                                                         batch_factory, gridnode_bin, tmp_path):
    cl, b = grid(cluster_factory, client_factory, batch_factory,
                 csets={"files.user_mb": 1}, bsets={"files.user_mb": 2})
    a, a2 = os.urandom(600 * 1024), os.urandom(600 * 1024)
    c = cl.client()
    c.ok("FILE_PUT", "FILE_STATE", hash=sha(a), size=len(a), off=0, data=a, user="alice")
    e = c.err("FILE_HAVE", "REFUSED", hash=sha(a2), size=len(a2), user="alice")
    assert "files.user_mb" in e["msg"] and "alice holds 1 MB" in e["msg"], e
    # another user has a limit of its own; a file already held costs nothing more
    c.ok("FILE_HAVE", "FILE_STATE", hash=sha(a2), size=len(a2), user="bob")
    assert c.ok("FILE_HAVE", "FILE_STATE", hash=sha(a), size=len(a), user="alice")["done"]
    # through the batch role: it takes a2 (its own limit is 2 MB), but the cluster
    # refuses it for alice when the batch role offers it: the task fails saying so
    f = tmp_path / "a2.bin"
    f.write_bytes(a2)
    r = run_cli(gridnode_bin, "submit", "-e", b.endpoint, "--user", "alice", "--input", f,
                "--json", "true")
    assert r.returncode == 0, r.stderr
    job = wait_batch(b, json.loads(r.stdout)["job"])
    assert job["job"]["state"] == "failed", job
    assert "files.user_mb" in job["tasks"][0]["reason"], job["tasks"][0]
    # the batch role's own limit, through the tool: the error names it
    big = tmp_path / "big.bin"
    big.write_bytes(os.urandom(1536 * 1024))
    r = run_cli(gridnode_bin, "submit", "-e", b.endpoint, "--user", "alice", "--input", big,
                "true")
    assert r.returncode != 0 and "files.user_mb" in r.stderr, r.stderr
    assert "alice holds 1 MB" in r.stderr, r.stderr


def test_checkpoint_s_goes_on_to_the_cluster(cluster_factory, client_factory, batch_factory):
    cl, b = grid(cluster_factory, client_factory, batch_factory)
    jid = b.client().ok("SUBMIT", "SUBMITTED", argv=["true"], ntasks=2, checkpoint_s=10)["job"]
    job = wait_batch(b, jid)
    assert job["job"]["state"] == "done", job
    for t in job["tasks"]:  # each task ran as a one-task job of the cluster, on its host
        cj = cl.client().ok("JOB_GET", "JOB", job=t["cjob"])["job"]
        assert cj["checkpoint_s"] == 10 and cj["ntasks"] == 1, cj


def test_files_no_job_names_are_swept_after_files_keep_s(cluster, batch_factory):
    b = batch_factory([cluster], sets=dict(BATCH, **{"files.keep_s": 0}))
    wait_until(lambda: "files: swept" in b.log(), scaled(20), msg="the sweep at start")
    named, loose = os.urandom(1000), os.urandom(2000)
    c = b.client()
    for d in (named, loose):
        c.ok("FILE_PUT", "FILE_STATE", hash=sha(d), size=len(d), off=0, data=d)
    c.ok("SUBMIT", "SUBMITTED", argv=["true"], ntasks=1,
         inputs=[{"name": "in", "hash": sha(named), "size": len(named)}])
    b.restart()  # the sweep runs at start (then hourly)
    wait_until(lambda: "file %s (2000 bytes) deleted: no job names it" % sha(loose)[:12]
               in b.log(), scaled(20), msg="the sweep deletes the file no job names")
    assert not stored_path(b, sha(loose)).exists()
    assert stored_path(b, sha(named)).read_bytes() == named
    st = b.client().ok("FILE_HAVE", "FILE_STATE", hash=sha(loose), size=len(loose))
    assert st["have"] == 0 and not st["done"], st


def test_under_curve_the_owner_reads_and_is_charged_at_every_level(
        cluster_factory, client_factory, batch_factory, workdir):
    from test_authz import Keys
    # the suite's key is the grid's peer (the batch role's key toward its cluster)
    k = (Keys(workdir / "keys", suite_kind="peer").add("alice", "user").add("bob", "user")
         .add("worker", "node"))
    cl = cluster_factory(dict(FAST, **dict(k.sets(), **{"files.user_mb": 1})))
    client_factory(cl, 1, sets=dict(FAST_CLIENT, **{"client.slots": 2}),
                   env={"GRIDNODE_KEY": k.key("worker")})
    b = batch_factory([cl], sets=dict(BATCH, **k.sets()))
    alice, bob = k.rpc(b.endpoint, "alice"), k.rpc(b.endpoint, "bob")
    wait_until(lambda: any(n["active"] for n in alice.ok("NODE_LIST", "NODES")["nodes"]),
               scaled(20), msg="the batch role sees the host")
    data = os.urandom(700 * 1024)
    h = sha(data)
    # "user" is the key's own name whatever the tool says: alice is charged
    alice.ok("FILE_PUT", "FILE_STATE", hash=h, size=len(data), off=0, data=data, user="bob")
    jid = alice.ok("SUBMIT", "SUBMITTED", argv=["sha256sum in.bin > in.sum"], shell=True,
                   ntasks=1, inputs=[{"name": "in.bin", "hash": h, "size": len(data)}],
                   outputs=["*.sum"])["job"]
    wait_until(lambda: alice.ok("JOB_GET", "JOB", job=jid)["job"]["state"] in ("done", "failed"),
               scaled(60), msg="alice's job ends")
    t, = alice.ok("JOB_GET", "JOB", job=jid, tasks=True)["tasks"]
    assert t["state"] == "ok", t
    f, = t["files"]
    get = dict(hash=f["hash"], job=jid, idx=0, off=0, len=1000)
    assert alice.ok("FILE_GET", "FILE_DATA", **get)["data"].split()[0].decode() == h
    assert "belongs to another user" in bob.err("FILE_GET", "DENIED", **get)["msg"]
    # the batch role offered the input to the cluster for alice: charged to her there
    other = os.urandom(600 * 1024)
    e = k.rpc(cl.endpoint, "alice").err("FILE_HAVE", "REFUSED", hash=sha(other), size=len(other))
    assert "alice holds 1 MB" in e["msg"], e
    # and a user key may not pin a job to a host (the batch role, a peer, may)
    e = k.rpc(cl.endpoint, "alice").err("SUBMIT", "DENIED", argv=["true"], ntasks=1, host="node1")
    assert "'alice' is a user key" in e["msg"] and "host" in e["msg"], e


def test_a_file_the_cluster_swept_meanwhile_is_sent_again(cluster_factory, client_factory,
                                                          batch_factory, gridnode_bin, tmp_path):
    # the cluster sweeps an input no job names any more (files.keep_s 0, after a purge);
    # the batch role, told before that the cluster held it, asks again (files.recheck_s,
    # 1 s here) and sends it anew, so the next job naming it runs. With the answer
    # trusted for ever, that start was refused ("does not hold ... whole").
    cl, b = grid(cluster_factory, client_factory, batch_factory, bsets={"files.recheck_s": 1},
                 csets={"files.keep_s": 0})
    f = tmp_path / "in.bin"
    f.write_bytes(os.urandom(CHUNK + 7))
    h = sha(f.read_bytes())

    def run():
        r = run_cli(gridnode_bin, "submit", "-e", b.endpoint, "--shell", "--input", f,
                    "--json", "sha256sum in.bin")
        assert r.returncode == 0, r.stderr
        return wait_batch(b, json.loads(r.stdout)["job"])

    assert run()["job"]["state"] == "done"
    assert stored_path(cl, h).exists()
    cc = cl.client()
    ended = [j["job"] for j in cc.ok("JOB_LIST", "JOBS")["jobs"]]
    cc.ok("PURGE", "PURGED", jobs=ended)
    wait_until(lambda: not stored_path(cl, h).exists(), scaled(20),
               msg="the cluster sweeps the input no job names")
    time.sleep(1.2)  # the batch role's answer from the cluster is older than recheck_s
    job = run()
    assert job["job"]["state"] == "done", job
    assert stored_path(cl, h).read_bytes() == f.read_bytes()


def test_outputs_copied_back_count_for_their_owner(cluster_factory, client_factory, batch_factory):
    """The batch role's copy of a task's outputs is charged to the job's owner (its
    files.user_mb), as the cluster's is (docs/data.md "Limits")."""
    cl, b = grid(cluster_factory, client_factory, batch_factory, bsets={"files.user_mb": 2})
    jid = b.client().ok("SUBMIT", "SUBMITTED", argv=["sh", "-c", "head -c 1500000 /dev/urandom > o.bin"],
                        ntasks=1, outputs=["o.bin"], user="carol")["job"]
    job = wait_batch(b, jid)
    assert job["job"]["state"] == "done", job
    small = os.urandom(700000)
    r = b.client().err("FILE_HAVE", "REFUSED", hash=sha(small), size=len(small), user="carol")
    assert "user carol holds 2 MB" in r["msg"], r
    b.client().ok("FILE_HAVE", "FILE_STATE", hash=sha(small), size=len(small), user="dave")
