"""Files with parallel jobs (issue 26, docs/data.md "Parallel jobs"): PSUBMIT takes
`inputs` and `outputs` as SUBMIT does; every rank's host fetches the inputs into its
cache and places them in the rank's working directory before the rank starts; the
files each rank leaves that match an output glob are uploaded before its exit is
reported, and `gridnode fetch` lays them out DIR/RANK/FILE. Checked byte for byte, on
two hosts, at a cluster and through a batch role; names that escape and files never
uploaded are refused."""

import hashlib
import json
import os

from conftest import FAST_CLIENT, TYPES, scaled, wait_until
from test_data import CHUNK, run_cli, sha, stored_path

CLIENT_SANDBOX = True   # conftest client_factory: the shipped execution boundary
T = dict(TYPES, PSUBMIT=39, SD_INFO=42)
SD = {"store.sync": "none", "tasks.heartbeat_s": 1, "tasks.idle_wait_s": 1,
      "queues.sync_ms": 100}
# one core each: a two-rank job takes both hosts
NODE = dict(FAST_CLIENT, **{"client.slots": 1})
# each rank: the hash of what it was given, and where it ran
SCRIPT = ("cat shared.bin part$GRIDNODE_RANK.txt | sha256sum > rank.sum; "
          "echo $GRIDNODE_NODE > host.out; ls -A > ls.txt")


def two_hosts(cluster_factory, client_factory):
    cl = cluster_factory(SD)
    client_factory(cl, 2, sets=NODE)
    wait_until(lambda: sum(len(k["hosts"]) for k in cl.rpc(T["SD_INFO"])["clusters"]) >= 2,
               scaled(20), interval=0.1, msg="two hosts")
    return cl


def inputs(tmp_path):
    shared = tmp_path / "shared.bin"
    shared.write_bytes(os.urandom(CHUNK * 3 // 2))  # two chunks on every hop
    for i in range(2):
        (tmp_path / ("part%d.txt" % i)).write_bytes(b"part %d\n" % i)
    return shared


def check_fetched(out, shared, nranks=2):
    hosts = set()
    for i in range(nranks):
        d = out / str(i)
        want = hashlib.sha256(shared.read_bytes() + b"part %d\n" % i).hexdigest()
        assert (d / "rank.sum").read_text().split()[0] == want, i
        hosts.add((d / "host.out").read_text().strip())
        # the rank's working directory held its own inputs, not the other rank's
        assert not (d / "ls.txt").exists()
    assert len(hosts) == nranks, hosts


def submit(gridnode_bin, ep, shared, tmp_path):
    r = run_cli(gridnode_bin, "submit", "-e", ep, "-p", 2, "--shell", "--json",
                "--input", shared, "--input", tmp_path / "part{i}.txt",
                "--output", "*.sum", "--output", "*.out", SCRIPT)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)["job"]


def test_parallel_job_with_files_at_the_cluster(cluster_factory, client_factory, gridnode_bin,
                                               tmp_path):
    cl = two_hosts(cluster_factory, client_factory)
    shared = inputs(tmp_path)
    jid = submit(gridnode_bin, cl.endpoint, shared, tmp_path)
    wait_until(lambda: cl.rpc(T["JOB_GET"], job=jid)["job"]["state"] not in
               ("waiting", "queued", "running"), scaled(60), msg="job %d ends" % jid)
    j = cl.rpc(T["JOB_GET"], job=jid, output=True)["job"]
    assert j["state"] == "done", j
    for p in j["ranks"]:
        names = {f["name"] for f in p["files"]}
        assert names == {"rank.sum", "host.out"}, p
        for f in p["files"]:  # held whole at the cluster, content-addressed
            assert stored_path(cl, f["hash"]).stat().st_size == f["size"]
    r = run_cli(gridnode_bin, "job", "-e", cl.endpoint, jid, "--output")
    assert r.returncode == 0 and "rank.sum" in r.stdout, (r.stdout, r.stderr)
    out = tmp_path / "results"
    r = run_cli(gridnode_bin, "fetch", "-e", cl.endpoint, jid, out)
    assert r.returncode == 0 and "4 file(s) fetched" in r.stdout, (r.stdout, r.stderr)
    check_fetched(out, shared)
    # kill -9 of the cluster: the job's record keeps its files, the ranks' kept outputs
    # stay named (FILE_GET), a new fetch gets them all again
    cl.restart()
    r = run_cli(gridnode_bin, "fetch", "-e", cl.endpoint, jid, tmp_path / "again")
    assert r.returncode == 0 and "4 file(s) fetched" in r.stdout, (r.stdout, r.stderr)
    check_fetched(tmp_path / "again", shared)
    st = cl.client().ok("JOB_GET", "JOB", job=jid)["job"]
    assert st["state"] == "done", st


def test_parallel_job_files_refused(cluster_factory, client_factory, gridnode_bin, tmp_path):
    cl = cluster_factory(SD)
    c = cl.client()
    base = {"argv": ["true"], "procs": 2}
    r = c.err("PSUBMIT", "INVALID", inputs=[{"name": "a.dat", "hash": sha(b"nope"), "size": 4}],
              **base)
    assert "holds no file" in r["msg"] and "a.dat" in r["msg"], r
    data = b"hello"
    c.ok("FILE_PUT", "FILE_STATE", hash=sha(data), size=5, off=0, data=data)
    for bad in ("../a", "/etc/passwd", "a/../../b"):
        r = c.err("PSUBMIT", "INVALID", inputs=[{"name": bad, "hash": sha(data), "size": 5}],
                  **base)
        assert "working directory" in r["msg"], r
        r = c.err("PSUBMIT", "INVALID", outputs=[bad], **base)
        assert "output" in r["msg"], r
    # "task" names a rank: rank 2 of a two-rank job does not exist
    r = c.err("PSUBMIT", "INVALID",
              inputs=[{"name": "a", "hash": sha(data), "size": 5, "task": 2}], **base)
    assert "task 2" in r["msg"], r
    # each rank's inputs are named in its start command: at most 4096 entries a rank
    many = [{"name": "f%d" % i, "hash": sha(data), "size": 5} for i in range(4097)]
    r = c.err("PSUBMIT", "INVALID", inputs=many, **base)
    assert "4097 input entries" in r["msg"] and "4096" in r["msg"], r
    c.ok("PSUBMIT", "SUBMITTED", inputs=many[:4096], wait=True, **base)
    r = run_cli(gridnode_bin, "submit", "-e", cl.endpoint, "-p", 2, "--output", "../x", "true")
    assert r.returncode != 0 and "--output '../x'" in r.stderr, r.stderr
    r = run_cli(gridnode_bin, "submit", "-e", cl.endpoint, "-p", 2, "--input",
                tmp_path / "missing", "true")
    assert r.returncode != 0 and "missing" in r.stderr, r.stderr


def test_parallel_job_with_files_through_the_batch_role(cluster_factory, client_factory,
                                                        batch_factory, gridnode_bin, tmp_path):
    cl = two_hosts(cluster_factory, client_factory)
    b = batch_factory([cl], sets={"batch.log_level": "debug"})
    wait_until(lambda: sum(n["active"] for n in b.client().ok("NODE_LIST", "NODES")["nodes"])
               >= 2, scaled(20), msg="the batch role sees both hosts")
    shared = inputs(tmp_path)
    jid = submit(gridnode_bin, b.endpoint, shared, tmp_path)
    # the batch role keeps its own copy of every input
    assert stored_path(b, sha(shared.read_bytes())).read_bytes() == shared.read_bytes()
    wait_until(lambda: b.client().ok("JOB_GET", "JOB", job=jid)["job"]["state"]
               in ("done", "failed", "cancelled"), scaled(60), msg="batch job %d ends" % jid)
    j = b.client().ok("JOB_GET", "JOB", job=jid, tasks=True)
    assert j["job"]["state"] == "done", j
    # started on the cluster as one parallel job with its files, on both hosts
    assert stored_path(cl, sha(shared.read_bytes())).read_bytes() == shared.read_bytes()
    names = {f["name"] for f in j["tasks"][0]["files"]}
    assert names == {"0/rank.sum", "0/host.out", "1/rank.sum", "1/host.out"}, j["tasks"]
    for f in j["tasks"][0]["files"]:  # copied back into the batch role's own store
        assert stored_path(b, f["hash"]).stat().st_size == f["size"]
    r = run_cli(gridnode_bin, "job", "-e", b.endpoint, jid, "--output")
    assert r.returncode == 0 and "0/rank.sum" in r.stdout, (r.stdout, r.stderr)
    out = tmp_path / "results"
    r = run_cli(gridnode_bin, "fetch", "-e", b.endpoint, jid, out)
    assert r.returncode == 0 and "4 file(s) fetched" in r.stdout, (r.stdout, r.stderr)
    check_fetched(out, shared)  # DIR/RANK/FILE, as at the cluster


def test_parallel_job_with_files_through_the_grid_spool(cluster_factory, client_factory,
                                                        batch_factory, meta_factory,
                                                        gridnode_bin, tmp_path):
    cl = two_hosts(cluster_factory, client_factory)
    b = batch_factory([cl])
    wait_until(lambda: sum(n["active"] for n in b.client().ok("NODE_LIST", "NODES")["nodes"])
               >= 2, scaled(20), msg="the batch role sees both hosts")
    m = meta_factory({"site": b})
    shared = inputs(tmp_path)
    jid = submit(gridnode_bin, m.endpoint, shared, tmp_path)
    wait_until(lambda: m.client().ok("JOB_GET", "JOB", job=jid)["job"]["state"]
               in ("done", "failed", "killed", "cancelled"), scaled(90),
               msg="spool job %d ends" % jid)
    j = m.client().ok("JOB_GET", "JOB", job=jid, tasks=True)
    assert j["job"]["state"] == "done", j
    for f in j["tasks"][0]["files"]:  # copied back into the spool's own store
        assert stored_path(m, f["hash"]).stat().st_size == f["size"]
    out = tmp_path / "results"
    r = run_cli(gridnode_bin, "fetch", "-e", m.endpoint, jid, out)
    assert r.returncode == 0 and "4 file(s) fetched" in r.stdout, (r.stdout, r.stderr)
    check_fetched(out, shared)  # DIR/RANK/FILE at every level


def test_rank_whose_input_is_gone_fails_naming_it(cluster_factory, client_factory):
    cl = cluster_factory(SD)
    data = b"input of the job\n"
    c = cl.client()
    c.ok("FILE_PUT", "FILE_STATE", hash=sha(data), size=len(data), off=0, data=data)
    jid = c.ok("PSUBMIT", "SUBMITTED", argv=["cat", "in.dat"], procs=1, wait=True,
               inputs=[{"name": "in.dat", "hash": sha(data), "size": len(data)}])["job"]
    stored_path(cl, sha(data)).unlink()  # lost at the cluster before any host fetched it
    client_factory(cl, 1, sets=NODE)
    wait_until(lambda: cl.rpc(T["JOB_GET"], job=jid)["job"]["state"] in ("failed", "done"),
               scaled(30), msg="job %d ends" % jid)
    j = cl.rpc(T["JOB_GET"], job=jid)["job"]
    assert j["state"] == "failed" and "could not start" in j["reason"] \
        and "in.dat" in j["reason"], j


def test_many_inputs_start_over_several_replies(cluster_factory, client_factory):
    """Four ranks on one host with 3,000 input entries each (84,000 msgpack values: more
    than one message may hold): one PSYNC_ACK names at most 4,096 entries, so each rank's
    start follows in its own reply; all run with every input in place."""
    cl = cluster_factory(SD)
    data = b"x\n"
    c = cl.client()
    c.ok("FILE_PUT", "FILE_STATE", hash=sha(data), size=len(data), off=0, data=data)
    many = [{"name": "d/f%d" % i, "hash": sha(data), "size": 2} for i in range(3000)]
    jid = c.ok("PSUBMIT", "SUBMITTED", argv=["test $(cat d/* | wc -l) = 3000"], shell=True,
               procs=4, ppn=4, wait=True, inputs=many)["job"]
    client_factory(cl, 1, sets=dict(FAST_CLIENT, **{"client.slots": 4}))
    wait_until(lambda: cl.rpc(T["JOB_GET"], job=jid)["job"]["state"] in ("failed", "done"),
               scaled(60), msg="job %d ends" % jid)
    j = cl.rpc(T["JOB_GET"], job=jid)["job"]
    assert j["state"] == "done", j
