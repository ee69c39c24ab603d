"""Files through the grid at the cluster level (issue 26, docs/data.md): content-addressed
input files uploaded in chunks (FILE_HAVE, FILE_PUT), resumable across kill -9 of the
cluster, named by hash in SUBMIT (an unknown hash or a name escaping the working
directory refused), placed into each task's sandboxed working directory on the node,
and outputs collected and fetched back, checked byte for byte."""

import hashlib
import os
import subprocess

from conftest import FAST_CLIENT, FAST_CLUSTER as FAST, scaled, wait_until

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
    cl.restart()
    st = cl.client().ok("FILE_HAVE", "FILE_STATE", hash=h, size=size)
    assert st["done"], st
    assert cl.client().err("FILE_HAVE", "INVALID", hash=h, size=size + 1)


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
