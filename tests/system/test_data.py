"""Files through the grid at the cluster level (issue 26, docs/data.md): content-addressed
input files uploaded in chunks (FILE_HAVE, FILE_PUT), resumable across kill -9 of the
cluster, named by hash in SUBMIT (an unknown hash or a name escaping the working
directory refused), placed into each task's sandboxed working directory on the node,
and outputs collected and fetched back, checked byte for byte."""

import hashlib
import json
import os
import subprocess
import time

from conftest import FAST_CLIENT, FAST_CLUSTER as FAST, scaled, wait_until
from test_authz import Keys
from test_disk_full import fill, free, on_tmpfs

CLIENT_SANDBOX = True
CHUNK = 1 << 20


def run_cli(gridnode_bin, *args, timeout=60, cwd=None):
    return subprocess.run([gridnode_bin] + [str(a) for a in args], capture_output=True,
                          text=True, timeout=scaled(timeout), stdin=subprocess.DEVNULL,
                          env=dict(os.environ), cwd=cwd)


def sha(b):
    return hashlib.sha256(b).hexdigest()


def stored_path(cl, h):
    return cl.state_dir / "files" / h[:2] / h


# ---- the same job and checks at the batch role and the grid spool (test_data_batch.py,
# test_data_meta.py): the level changes, not the user's job ----

THREE_TASKS = ("cat shared.bin data/sub/deep.txt part{i}.txt | sha256sum > out_{i}.sum; "
               "cp part{i}.txt copy.out; head -c 1500000 shared.bin > big.out")


def submit_three_tasks(gridnode_bin, endpoint, tmp_path):
    """Submits to endpoint three tasks reading a file of three chunks (all of them), a
    directory and a file of their own, keeping *.sum and *.out. Returns (the job's id,
    the shared file's bytes)."""
    shared = tmp_path / "shared.bin"
    shared.write_bytes(os.urandom(CHUNK * 5 // 2))  # three chunks on every hop
    d = tmp_path / "data"
    (d / "sub").mkdir(parents=True)
    (d / "sub" / "deep.txt").write_bytes(b"deep\n")
    for i in range(3):
        (tmp_path / ("part%d.txt" % i)).write_bytes(b"part %d\n" % i)
    r = run_cli(gridnode_bin, "submit", "-e", endpoint, "-n", 3, "--shell",
                "--input", shared, "--input", d, "--input", tmp_path / "part{i}.txt",
                "--output", "*.sum", "--output", "*.out", "--json", THREE_TASKS)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)["job"], shared.read_bytes()


def three_tasks_sum(shared, i):
    return sha(shared + b"deep\n" + b"part %d\n" % i)


def check_three_tasks_kept(tasks, shared, role):
    """Each of the three tasks' rows names its three outputs; its sum, read from role's
    store, is the one of its inputs."""
    assert len(tasks) == 3, tasks
    for t in tasks:
        i = t["idx"]
        files = {f["name"]: f for f in t["files"]}
        assert set(files) == {"out_%d.sum" % i, "copy.out", "big.out"}, t
        got = stored_path(role, files["out_%d.sum" % i]["hash"]).read_bytes()
        assert got.decode().split()[0] == three_tasks_sum(shared, i)


def check_three_tasks_fetched(gridnode_bin, endpoint, jid, out, shared):
    """gridnode fetch at endpoint gets the nine outputs into out, checked byte for byte."""
    r = run_cli(gridnode_bin, "fetch", "-e", endpoint, jid, out)
    assert r.returncode == 0, r.stderr
    assert "9 file(s) fetched" in r.stdout, r.stdout
    for i in range(3):
        assert (out / str(i) / "copy.out").read_bytes() == b"part %d\n" % i
        assert (out / str(i) / "big.out").read_bytes() == shared[:1500000]
        got = (out / str(i) / ("out_%d.sum" % i)).read_text().split()[0]
        assert got == three_tasks_sum(shared, i)


def upload_cut_by_kill9(role, tmp_path):
    """The first chunk of a file of three uploaded to role (store.sync full), then role
    killed (-9) and restarted: the acknowledged chunk is kept. Returns (the file, its
    hash, its size)."""
    data = os.urandom(2 * CHUNK + 777)
    src = tmp_path / "in.bin"
    src.write_bytes(data)
    h, size = sha(data), len(data)
    c = role.client()
    assert c.ok("FILE_HAVE", "FILE_STATE", hash=h, size=size)["have"] == 0
    st = c.ok("FILE_PUT", "FILE_STATE", hash=h, size=size, off=0, data=data[:CHUNK])
    assert st["have"] == CHUNK and not st["done"]
    role.restart()  # kill -9 between the upload's chunks
    st = role.client().ok("FILE_HAVE", "FILE_STATE", hash=h, size=size)
    assert st["have"] == CHUNK and not st["done"], st
    return src, h, size


def test_upload_in_chunks_survives_kill9_and_is_verified(cluster_factory):
    cl = cluster_factory(dict(FAST, **{"store.sync": "full"}))
    data = os.urandom(2 * CHUNK + 12345)
    h, size = sha(data), len(data)
    c = cl.client()
    st = c.ok("FILE_HAVE", "FILE_STATE", hash=h, size=size)
    assert st["have"] == 0 and not st["done"] and st["chunk"] == CHUNK
    for off in (0, CHUNK):
        st = c.ok("FILE_PUT", "FILE_STATE", hash=h, size=size, off=off,
                  data=data[off:off + CHUNK])
    assert st["have"] == 2 * CHUNK and not st["done"]
    cl.restart()  # kill -9 between two chunks: what was acknowledged stays
    c = cl.client()
    st = c.ok("FILE_HAVE", "FILE_STATE", hash=h, size=size)
    assert st["have"] == 2 * CHUNK and not st["done"], st
    # a chunk sent again (its reply lost) is not taken twice: the state says where to go on
    st = c.ok("FILE_PUT", "FILE_STATE", hash=h, size=size, off=CHUNK, data=data[CHUNK:2 * CHUNK])
    assert st["have"] == 2 * CHUNK
    st = c.ok("FILE_PUT", "FILE_STATE", hash=h, size=size, off=2 * CHUNK, data=data[2 * CHUNK:])
    assert st["done"] and st["have"] == size
    assert stored_path(cl, h).read_bytes() == data
    cl.restart()  # kill -9 between the upload and the SUBMIT naming it
    st = cl.client().ok("FILE_HAVE", "FILE_STATE", hash=h, size=size)
    assert st["done"], st
    assert cl.client().err("FILE_HAVE", "INVALID", hash=h, size=size + 1)
    cl.client().ok("SUBMIT", "SUBMITTED", argv=["true"], ntasks=1,
                   inputs=[{"name": "in.bin", "hash": h, "size": size}])


def test_bytes_that_do_not_match_their_hash_are_refused(cluster):
    data = b"x" * 1000
    h = sha(b"y" * 1000)
    r = cluster.client().err("FILE_PUT", "INVALID", hash=h, size=1000, off=0, data=data)
    assert "changed while it was sent" in r["msg"]
    st = cluster.client().ok("FILE_HAVE", "FILE_STATE", hash=h, size=1000)
    assert st["have"] == 0 and not st["done"]
    assert not stored_path(cluster, h).exists()
    cluster.client().err("FILE_HAVE", "INVALID", hash="ABC", size=1)


def test_submit_naming_an_unknown_hash_or_an_escaping_name_is_refused(cluster):
    c = cluster.client()
    base = {"argv": ["true"], "ntasks": 1}
    r = c.err("SUBMIT", "INVALID", inputs=[{"name": "a.dat", "hash": sha(b"nope"), "size": 4}],
              **base)
    assert "holds no file" in r["msg"] and "a.dat" in r["msg"], r
    data = b"hello"
    c.ok("FILE_PUT", "FILE_STATE", hash=sha(data), size=5, off=0, data=data)
    for bad in ("../a", "/etc/passwd", "a/../../b", "a//b", "."):
        r = c.err("SUBMIT", "INVALID", inputs=[{"name": bad, "hash": sha(data), "size": 5}],
                  **base)
        assert "working directory" in r["msg"] or "empty component" in r["msg"], r
        r = c.err("SUBMIT", "INVALID", outputs=[bad], **base)
        assert "output" in r["msg"], r
    r = c.err("SUBMIT", "INVALID", inputs=[{"name": "a", "hash": sha(data), "size": 5, "task": 1}],
              **base)
    assert "task 1" in r["msg"], r
    two = [{"name": "a", "hash": sha(data), "size": 5}] * 2
    r = c.err("SUBMIT", "INVALID", inputs=two, **base)
    assert "twice" in r["msg"], r
    c.ok("SUBMIT", "SUBMITTED", inputs=[{"name": "d/a", "hash": sha(data), "size": 5}], **base)


def test_cluster_limit_per_job(cluster_factory):
    cl = cluster_factory(dict(FAST, **{"files.job_mb": 1}))
    r = cl.client().err("FILE_HAVE", "REFUSED", hash=sha(b"z"), size=2 * CHUNK)
    assert "files.job_mb" in r["msg"]


def test_submit_input_uploads_once_and_the_tool_refuses_escapes(cluster, gridnode_bin, tmp_path):
    f = tmp_path / "in.dat"
    f.write_bytes(os.urandom(3 * CHUNK // 2))
    ep = cluster.endpoint
    for _ in range(2):
        r = run_cli(gridnode_bin, "submit", "-e", ep, "--input", f, "--output", "*.out", "cat",
                    "in.dat")
        assert r.returncode == 0, r.stderr
    assert cluster.log().count("stored (") == 1, cluster.log()
    assert stored_path(cluster, sha(f.read_bytes())).read_bytes() == f.read_bytes()
    r = run_cli(gridnode_bin, "submit", "-e", ep, "--output", "../x", "true")
    assert r.returncode != 0 and "--output '../x'" in r.stderr, r.stderr
    r = run_cli(gridnode_bin, "submit", "-e", ep, "--input", tmp_path / "missing", "true")
    assert r.returncode != 0 and "missing" in r.stderr, r.stderr


def wait_job(cl, jid, timeout=60):
    def done():
        j = cl.client().ok("JOB_GET", "JOB", job=jid, tasks=False)["job"]
        return j["state"] in ("done", "failed", "cancelled")
    wait_until(done, scaled(timeout), msg="job %d ends" % jid)
    return cl.client().ok("JOB_GET", "JOB", job=jid, tasks=True, output=True)


def client_state(gridnode_bin, node):
    r = run_cli(gridnode_bin, "client", "status", "-s", node.state_dir, "--json")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_inputs_reach_sandboxed_tasks_and_outputs_come_back(cluster_factory, client_factory,
                                                             gridnode_bin, tmp_path):
    cl = cluster_factory(FAST)
    shared = tmp_path / "shared.bin"
    shared.write_bytes(os.urandom(CHUNK * 5 // 2))
    d = tmp_path / "data"
    (d / "sub").mkdir(parents=True)
    (d / "sub" / "deep.txt").write_bytes(b"deep\n")
    for i in range(4):
        (tmp_path / ("part%d.txt" % i)).write_bytes(b"part %d\n" % i)
    node, = client_factory(cl, sets=dict(FAST_CLIENT, **{"client.slots": 2}))
    # the task sees its inputs, cannot change the node's copy, and cannot see the cache
    script = ("cat shared.bin data/sub/deep.txt part{i}.txt | sha256sum > out_{i}.sum; "
              "cp part{i}.txt copy.out; ln -s /etc/passwd leak.out; head -c 1500000 shared.bin "
              "> big_{i}.out; "
              "(echo x >> shared.bin) 2>/dev/null && echo WROTE; "
              "echo cache=$(ls -A %s/cache 2>/dev/null | wc -l); true" % node.state_dir)
    r = run_cli(gridnode_bin, "submit", "-e", cl.endpoint, "-n", 4, "--shell",
                "--input", shared, "--input", d, "--input", tmp_path / "part{i}.txt",
                "--output", "*.sum", "--output", "*.out", "--json", script)
    assert r.returncode == 0, r.stderr
    jid = json.loads(r.stdout)["job"]
    job = wait_job(cl, jid)
    assert job["job"]["state"] == "done", job
    for t in job["tasks"]:
        i = t["idx"]
        assert t["stdout"] == b"cache=0\n", t
        files = {f["name"]: f for f in t["files"]}
        assert set(files) == {"out_%d.sum" % i, "copy.out", "big_%d.out" % i}, t
        assert "leak.out" in t.get("files_note", ""), t
        want = hashlib.sha256(shared.read_bytes() + b"deep\n" + b"part %d\n" % i).hexdigest()
        got = stored_path(cl, files["out_%d.sum" % i]["hash"]).read_bytes()
        assert got.decode().split()[0] == want
        assert stored_path(cl, files["copy.out"]["hash"]).read_bytes() == b"part %d\n" % i
    # the shared input crossed to the node once for the 4 tasks (and the directory's file)
    st = client_state(gridnode_bin, node)
    assert st["files_fetched"] == 6, st
    assert "input %s fetched" % sha(shared.read_bytes())[:12] in node.log()

    # gridnode job --output lists them; gridnode fetch gets them, checked, resumable
    r = run_cli(gridnode_bin, "job", "-e", cl.endpoint, jid, "--output")
    assert r.returncode == 0 and "copy.out" in r.stdout and "1500000" in r.stdout, r.stdout
    out = tmp_path / "results"
    r = run_cli(gridnode_bin, "fetch", "-e", cl.endpoint, jid, out)
    assert r.returncode == 0, r.stderr
    assert "12 file(s) fetched" in r.stdout, r.stdout
    for i in range(4):
        assert (out / str(i) / "copy.out").read_bytes() == b"part %d\n" % i
        assert (out / str(i) / ("big_%d.out" % i)).read_bytes() == shared.read_bytes()[:1500000]
    # cut short: a partial download goes on, a file already here is skipped
    big = out / "2" / "big_2.out"
    big.rename(out / "2" / ".big_2.out.part")
    os.truncate(out / "2" / ".big_2.out.part", CHUNK + 5)
    (out / "3" / "copy.out").write_bytes(b"changed")
    r = run_cli(gridnode_bin, "fetch", "-e", cl.endpoint, jid, out)
    assert r.returncode == 0, r.stderr
    assert "2 file(s) fetched (1500007 bytes), 10 already here" in r.stdout, r.stdout
    assert big.read_bytes() == shared.read_bytes()[:1500000]
    assert (out / "3" / "copy.out").read_bytes() == b"part 3\n"
    assert not (out / "2" / ".big_2.out.part").exists()
    assert "have not finished" not in r.stdout


def test_only_the_owner_reads_a_jobs_files_and_nodes_only_inputs(cluster_factory, tmp_path):
    keys = Keys(tmp_path / "keys").add("alice", "user").add("bob", "user").add("node7", "node")
    cl = cluster_factory(dict(FAST, **keys.sets()))
    alice, bob, node = (keys.rpc(cl.endpoint, n) for n in ("alice", "bob", "node7"))
    data = b"alice's data"
    h = sha(data)
    st = alice.ok("FILE_PUT", "FILE_STATE", hash=h, size=len(data), off=0, data=data)
    assert st["done"]
    jid = alice.ok("SUBMIT", "SUBMITTED", argv=["true"], ntasks=1,
                   inputs=[{"name": "d", "hash": h, "size": len(data)}])["job"]
    get = dict(hash=h, job=jid, off=0, len=100)
    assert alice.ok("FILE_GET", "FILE_DATA", **get)["data"] == data
    assert node.ok("FILE_GET", "FILE_DATA", **get)["data"] == data
    r = bob.err("FILE_GET", "DENIED", **get)
    assert "belongs to another user" in r["msg"]
    node.err("FILE_GET", "DENIED", idx=0, **get)
    alice.err("FILE_GET", "NOT_FOUND", idx=0, **get)  # not an output of task 0
    alice.err("FILE_GET", "NOT_FOUND", **dict(get, hash=sha(b"other")))


def test_a_full_disk_refuses_the_chunk_and_keeps_what_was_acknowledged(cluster_factory):
    cl = on_tmpfs(cluster_factory(dict(FAST, **{"store.sync": "full"}), start=False), 24576)
    data = os.urandom(8 * CHUNK)
    h, size = sha(data), len(data)
    c = cl.client()
    c.ok("FILE_PUT", "FILE_STATE", hash=h, size=size, off=0, data=data[:CHUNK])
    fill(cl)
    have = CHUNK
    for _ in range(8):
        r = c.call("FILE_PUT", hash=h, size=size, off=have, data=data[have:have + CHUNK])
        if r.get("t") == 1:
            break
        have = r["have"]
    assert r.get("code") == 8 and "disk full" in r["msg"], r
    assert cl.alive()
    assert c.ok("FILE_HAVE", "FILE_STATE", hash=h, size=size)["have"] == have
    free(cl)
    while have < size:
        have = c.ok("FILE_PUT", "FILE_STATE", hash=h, size=size, off=have,
                    data=data[have:have + CHUNK])["have"]
    assert c.ok("FILE_HAVE", "FILE_STATE", hash=h, size=size)["done"]
    with open("/proc/%d/root%s" % (cl.pid, stored_path(cl, h)), "rb") as f:
        assert f.read() == data


def test_a_result_naming_outputs_the_cluster_lacks_keeps_none_of_them(cluster):
    c = cluster.client()
    sid = c.ok("HELLO", "WELCOME", client="t 1", node="n1", cores=1)["sid"]
    jid = c.ok("SUBMIT", "SUBMITTED", argv=["true"], ntasks=2, outputs=["*.out"])["job"]
    tasks = c.ok("TASK_GET", "TASKS", sid=sid, want=2)["tasks"]
    assert all(t["outputs"] == ["*.out"] and t["inputs"] == [] for t in tasks), tasks
    data = b"kept"
    c.ok("FILE_PUT", "FILE_STATE", hash=sha(data), size=4, off=0, data=data)
    good = [{"name": "a.out", "hash": sha(data), "size": 4}]
    bad = [{"name": "../b.out", "hash": sha(data), "size": 4}]
    res = [dict(job=t["job"], idx=t["idx"], issue=t["issue"], exit=0, files=f)
           for t, f in zip(tasks, (good, bad))]
    c.ok("RESULT", "TASKS", sid=sid, results=res, want=0)
    got = {t["idx"]: t for t in c.ok("JOB_GET", "JOB", job=jid, tasks=True)["tasks"]}
    ok_idx, bad_idx = tasks[0]["idx"], tasks[1]["idx"]
    assert got[ok_idx]["files"] == good, got
    assert "files" not in got[bad_idx] and "../b.out" in got[bad_idx]["files_note"], got
    assert c.ok("FILE_GET", "FILE_DATA", hash=sha(data), job=jid, idx=ok_idx, off=0,
                len=10)["data"] == data


def test_gridnode_lines_give_inputs(cluster, gridnode_bin, tmp_path):
    (tmp_path / "table.csv").write_bytes(b"a,b\n1,2\n")
    script = tmp_path / "job.sh"
    script.write_text("#!/bin/sh\n#GRIDNODE --input table.csv --output '*.res'\nwc -l table.csv\n")
    r = run_cli(gridnode_bin, "submit", "-e", cluster.endpoint, script, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert cluster.log().count("stored (8 bytes)") == 1, cluster.log()


def test_purge_sweeps_the_files_no_job_names(cluster_factory):
    cl = cluster_factory(dict(FAST, **{"files.keep_s": 0}))
    c = cl.client()
    blobs = [os.urandom(1000 + k) for k in range(3)]
    for b in blobs:
        c.ok("FILE_PUT", "FILE_STATE", hash=sha(b), size=len(b), off=0, data=b)
    named = lambda b: [{"name": "x", "hash": sha(b), "size": len(b)}]
    gone = c.ok("SUBMIT", "SUBMITTED", argv=["true"], ntasks=1, inputs=named(blobs[0]))["job"]
    c.ok("SUBMIT", "SUBMITTED", argv=["true"], ntasks=1, inputs=named(blobs[1]))
    c.ok("CANCEL", "OK", job=gone)
    c.ok("PURGE", "PURGED", jobs=[gone])
    # blobs[0]: its only job purged; blobs[2]: never named; blobs[1]: a job still names it
    wait_until(lambda: not stored_path(cl, sha(blobs[0])).exists(), scaled(20),
               msg="the purged job's input is swept")
    wait_until(lambda: not stored_path(cl, sha(blobs[2])).exists(), scaled(20),
               msg="the unnamed file is swept")
    assert stored_path(cl, sha(blobs[1])).read_bytes() == blobs[1]
    cl.restart()
    c = cl.client()
    assert not c.ok("FILE_HAVE", "FILE_STATE", hash=sha(blobs[0]), size=1000)["done"]
    assert c.ok("FILE_HAVE", "FILE_STATE", hash=sha(blobs[1]), size=1001)["done"]


def test_a_node_goes_on_with_a_download_a_restart_cut_short(cluster_factory, client_factory,
                                                            gridnode_bin, tmp_path):
    cl = cluster_factory(FAST)
    data = os.urandom(3 * CHUNK + 7)
    (tmp_path / "in.bin").write_bytes(data)
    r = run_cli(gridnode_bin, "submit", "-e", cl.endpoint, "--input", tmp_path / "in.bin",
                "--shell", "--json", "sha256sum in.bin")
    assert r.returncode == 0, r.stderr
    jid = json.loads(r.stdout)["job"]
    # what a node killed during the download left: the first bytes in its part file
    part = tmp_path / "node1" / "cache" / "part"
    part.mkdir(parents=True)
    (part / sha(data)).write_bytes(data[:CHUNK + 3])
    node, = client_factory(cl, sets=FAST_CLIENT)
    job = wait_job(cl, jid)
    assert job["tasks"][0]["stdout"].decode().split()[0] == sha(data), job
    st = client_state(gridnode_bin, node)
    assert st["files_fetched"] == 1 and st["bytes_fetched"] == len(data) - CHUNK - 3, st
    assert "the first %d were here" % (CHUNK + 3) in node.log()


def test_the_batch_role_refuses_escaping_names(cluster, batch_factory):
    # task arrays carry files through the batch role (test_data_batch.py); a name that
    # escapes is refused there as at the cluster
    b = batch_factory([cluster])
    r = b.client().err("SUBMIT", "INVALID", argv=["true"], ntasks=1, outputs=["../x"])
    assert "output '../x'" in r["msg"], r


def test_another_users_upload_of_the_same_file_is_waited_for_not_spoiled(cluster_factory, gridnode_bin,
                                                                          tmp_path):
    """A partial upload takes chunks only from its user (docs/data.md "Limits"): bob, who
    knows the hash of alice's upload under way, cannot put other bytes into it; his own
    `gridnode submit --input` of the same file waits for hers and then uses it."""
    keys = Keys(tmp_path / "keys").add("alice", "user").add("bob", "user")
    cl = cluster_factory(dict(FAST, **keys.sets()))
    alice, bob = keys.rpc(cl.endpoint, "alice"), keys.rpc(cl.endpoint, "bob")
    f = tmp_path / "shared.dat"
    data = os.urandom(5 * CHUNK // 2)
    f.write_bytes(data)
    h, size = sha(data), len(data)
    alice.ok("FILE_PUT", "FILE_STATE", hash=h, size=size, off=0, data=data[:CHUNK])
    st = bob.ok("FILE_PUT", "FILE_STATE", hash=h, size=size, off=CHUNK, data=b"\0" * CHUNK)
    assert st["wait_ms"] > 0 and st["have"] == CHUNK and not st.get("early"), st
    st = bob.ok("FILE_HAVE", "FILE_STATE", hash=h, size=size)
    assert st["wait_ms"] > 0, st
    env = dict(os.environ, GRIDNODE_KEY=keys.key("bob"))
    p = subprocess.Popen([gridnode_bin, "submit", "-e", cl.endpoint, "--input", str(f), "cat",
                          "shared.dat"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         stdin=subprocess.DEVNULL, env=env)
    try:
        time.sleep(2)  # bob's tool asks, is told to wait, and sends nothing
        assert p.poll() is None, p.communicate()
        assert alice.ok("FILE_HAVE", "FILE_STATE", hash=h, size=size)["have"] == CHUNK
        alice.ok("FILE_PUT", "FILE_STATE", hash=h, size=size, off=CHUNK, data=data[CHUNK:2 * CHUNK])
        st = alice.ok("FILE_PUT", "FILE_STATE", hash=h, size=size, off=2 * CHUNK, data=data[2 * CHUNK:])
        assert st["done"], st
        out, err = p.communicate(timeout=scaled(30))
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode == 0, err
    assert "another user's upload of the same file is under way" in err, err
    assert stored_path(cl, h).read_bytes() == data
    assert cl.log().count("stored (") == 1, cl.log()


def test_a_users_outputs_count_in_its_files_limit(cluster_factory, client_factory, tmp_path):
    """Outputs uploaded by a node are charged to the job's owner once its result names
    them (docs/data.md "Limits"), so files.user_mb bounds what a user's jobs leave too."""
    keys = Keys(tmp_path / "keys").add("alice", "user").add("bob", "user")
    cl = cluster_factory(dict(FAST, **keys.sets(), **{"files.user_mb": 2}))
    client_factory(cl, sets=FAST_CLIENT)
    alice, bob = keys.rpc(cl.endpoint, "alice"), keys.rpc(cl.endpoint, "bob")
    jid = alice.ok("SUBMIT", "SUBMITTED", argv=["sh", "-c", "head -c 1500000 /dev/urandom > o.bin"],
                   ntasks=1, outputs=["o.bin"])["job"]
    j = wait_job(cl, jid)
    f, = j["tasks"][0]["files"]
    assert f["size"] == 1500000, j
    small = os.urandom(700000)
    r = alice.err("FILE_HAVE", "REFUSED", hash=sha(small), size=len(small))
    assert "user alice holds 2 MB" in r["msg"] and "files.user_mb" in r["msg"], r
    # bob's own limit is untouched by alice's outputs
    assert not bob.ok("FILE_HAVE", "FILE_STATE", hash=sha(small), size=len(small))["done"]
