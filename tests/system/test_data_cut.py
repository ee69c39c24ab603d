"""Cut-through (issue 26 evidence 8, docs/data.md "Speed"): a SUBMIT may name an input whose
upload to the cluster is still going; the node reads the chunks the cluster holds
meanwhile (a read of a chunk not there yet is held until it arrives), both hashes are
checked, a failed or stalled upload fails the task naming the file, and a job accepted
with an input in flight survives kill -9 of the cluster (the upload goes on from what was
acknowledged)."""

import hashlib
import json
import os
import signal
import time

from conftest import FAST_CLIENT, FAST_CLUSTER as FAST, Proc, scaled, wait_until
from test_data import run_cli, stored_path, wait_job

CHUNK = 1 << 20


def sha(b):
    return hashlib.sha256(b).hexdigest()


def put(c, data, h, off, n=1, user="alice"):
    st = None
    for k in range(n):
        o = off + k * CHUNK
        st = c.ok("FILE_PUT", "FILE_STATE", hash=h, size=len(data), off=o,
                  data=data[o:o + CHUNK], user=user)
    return st


def submit(c, h, size, user="alice", **kw):
    return c.ok("SUBMIT", "SUBMITTED", argv=["sha256sum", "in.bin"], ntasks=1, user=user,
                inputs=[{"name": "in.bin", "hash": h, "size": size}], **kw)["job"]


def task_text(job):
    t = job["tasks"][0]
    return " ".join(str(t.get(k, "")) for k in ("reason", "error", "stderr", "stdout"))


def test_a_job_names_an_input_still_uploading_and_gets_it_whole(cluster_factory, client_factory):
    cl = cluster_factory(FAST)
    c = cl.client()
    data = os.urandom(6 * CHUNK + 321)
    h, size = sha(data), len(data)
    st = put(c, data, h, 0)
    assert st["early"] and not st["done"] and st["have"] == CHUNK, st
    # a user names only its own uploads; the owner's SUBMIT is taken before the last chunk
    r = c.err("SUBMIT", "INVALID", argv=["true"], ntasks=1, user="bob",
              inputs=[{"name": "in.bin", "hash": h, "size": size}])
    assert "still being uploaded" in r["msg"] and "another user" in r["msg"], r
    st = c.ok("FILE_HAVE", "FILE_STATE", hash=h, size=size, user="bob")
    assert "early" not in st, st  # bob's tool uploads it whole before its SUBMIT
    jid = submit(c, h, size)
    node, = client_factory(cl, sets=FAST_CLIENT)
    # the node asks for chunks the cluster does not hold yet: they wait there
    wait_until(lambda: cl.rpc("JOB_GET", job=jid)["job"]["issued"] == 1, scaled(30),
               msg="the task is issued while its input uploads")
    for off in range(CHUNK, size, CHUNK):
        put(c, data, h, off)
        time.sleep(0.05)  # pacing only: the node reads as the chunks come
    job = wait_job(cl, jid)
    assert job["job"]["state"] == "done", job
    assert job["tasks"][0]["stdout"].decode().split()[0] == h, job
    assert stored_path(cl, h).read_bytes() == data
    assert "input %s fetched (%d bytes)" % (h[:12], size) in node.log()


def test_a_cut_through_upload_whose_bytes_do_not_match_fails_the_task(cluster_factory,
                                                                        client_factory):
    cl = cluster_factory(FAST)
    c = cl.client()
    data = os.urandom(3 * CHUNK)
    h, size = sha(data), len(data)
    put(c, data, h, 0)
    jid = submit(c, h, size)
    node, = client_factory(cl, sets=FAST_CLIENT)
    put(c, data, h, CHUNK)
    bad = data[:2 * CHUNK] + os.urandom(CHUNK)
    r = c.err("FILE_PUT", "INVALID", hash=h, size=size, off=2 * CHUNK, data=bad[2 * CHUNK:],
              user="alice")
    assert "changed while it was sent" in r["msg"], r
    job = wait_job(cl, jid)
    assert job["job"]["state"] == "failed", job
    text = task_text(job)
    assert "in.bin" in text and h[:12] in text and "upload failed" in text, text
    assert not stored_path(cl, h).exists()


def test_kill9_of_the_cluster_during_a_cut_through_upload(cluster_factory, client_factory):
    cl = cluster_factory(dict(FAST, **{"store.sync": "full",
                                       "files.upload_wait_s": max(2, int(scaled(2)))}))
    node, = client_factory(cl, sets=FAST_CLIENT)  # reading while the cluster dies
    c = cl.client()
    data = os.urandom(4 * CHUNK + 99)
    h, size = sha(data), len(data)
    put(c, data, h, 0)
    jid = submit(c, h, size)
    put(c, data, h, CHUNK)
    stalled = os.urandom(2 * CHUNK)  # another input whose uploader goes away
    put(c, stalled, sha(stalled), 0)
    jid2 = submit(c, sha(stalled), len(stalled))
    cl.restart()  # kill -9 with two jobs accepted and their inputs in flight
    c = cl.client()
    st = c.ok("FILE_HAVE", "FILE_STATE", hash=h, size=size, user="alice")
    assert st["have"] == 2 * CHUNK and not st["done"], st
    put(c, data, h, 2 * CHUNK, n=3)  # the uploader goes on from what was acknowledged
    assert c.ok("JOB_GET", "JOB", job=jid)["job"]["state"] != "failed"
    job = wait_job(cl, jid)
    assert job["job"]["state"] == "done", job
    assert job["tasks"][0]["stdout"].decode().split()[0] == h, job
    # the other upload brought nothing more: its task fails naming the file and the limit
    job = wait_job(cl, jid2)
    assert job["job"]["state"] == "failed", job
    text = task_text(job)
    assert sha(stalled)[:12] in text and "stalled: no chunk" in text, text


def test_gridnode_submit_sends_the_submit_before_the_last_chunk(cluster_factory, client_factory,
                                                               gridnode_bin, tmp_path):
    cl = cluster_factory(FAST)
    node, = client_factory(cl, sets=FAST_CLIENT)
    data = os.urandom(5 * CHUNK + 17)
    (tmp_path / "in.bin").write_bytes(data)
    r = run_cli(gridnode_bin, "submit", "-e", cl.endpoint, "--input", tmp_path / "in.bin",
                "--json", "sha256sum", "in.bin")
    assert r.returncode == 0, r.stderr
    jid = json.loads(r.stdout)["job"]
    log = cl.log()
    assert log.index("job %d submitted" % jid) < log.index("file %s stored" % sha(data)[:12]), log
    job = wait_job(cl, jid)
    assert job["tasks"][0]["stdout"].decode().split()[0] == sha(data), job


def test_gridnode_submit_goes_on_with_the_upload_after_kill9_of_the_cluster(
        cluster_factory, client_factory, gridnode_bin, procs, tmp_path):
    cl = cluster_factory(dict(FAST, **{"store.sync": "full"}))
    data = os.urandom(96 * CHUNK)
    (tmp_path / "in.bin").write_bytes(data)
    h = sha(data)
    # a reply lost in the restart is given up after --timeout, then the upload goes on
    tool = Proc(procs, [gridnode_bin, "submit", "-e", cl.endpoint, "--json",
                        "--timeout", int(scaled(2) * 1000), "--retries", 10,
                        "--input", tmp_path / "in.bin", "sha256sum", "in.bin"],
                tmp_path / "tool.log")
    wait_until(lambda: "job 1 submitted" in cl.log(), scaled(60), interval=0.01,
               msg="the SUBMIT before the last chunk")
    tool.send_signal(signal.SIGSTOP)  # the tool stands still while the cluster restarts
    st = cl.rpc("FILE_HAVE", hash=h, size=len(data))
    assert not st["done"], st
    cl.restart()
    tool.send_signal(signal.SIGCONT)
    assert tool.wait(scaled(60)) == 0, tool.log()
    assert "going on with the upload" in tool.log(), tool.log()
    client_factory(cl, sets=FAST_CLIENT)
    job = wait_job(cl, 1)
    assert job["tasks"][0]["stdout"].decode().split()[0] == h, job
