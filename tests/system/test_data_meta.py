"""Files through the grid spool (issue 26, docs/data.md "Through the grid spool"): the
user's tool uploads to the spool as to a cluster or a batch role (FILE_HAVE, FILE_PUT),
the spool keeps its own copy, offers a job's inputs to the batch site it places the job
on before the SUBMIT naming them, copies the outputs back once the site's job ended, and
`gridnode job --output` and `gridnode fetch` at the spool give them, checked byte for
byte. A spool killed (-9) between the upload and the placement loses nothing; a user's
files beyond the spool's files.user_mb are refused there."""

import json
import os
import signal
import time

import pytest

import slurmlocal
from conftest import scaled, wait_until
from test_data import (CHUNK, check_three_tasks_fetched, check_three_tasks_kept, run_cli, sha,
                       stored_path, submit_three_tasks, upload_cut_by_kill9)
from test_data_batch import grid
from test_meta_slurm import hpc, slurm  # noqa: F401 - fixtures (a private Slurm)


def spool_job(m, jid):
    return m.client().ok("JOB_GET", "JOB", job=jid, tasks=True)


def wait_spool(m, jid, timeout=90):
    wait_until(lambda: spool_job(m, jid)["job"]["state"] in ("done", "failed", "killed",
                                                               "cancelled"),
               scaled(timeout), msg="spool job %d ends" % jid)
    return spool_job(m, jid)


def test_inputs_and_outputs_through_the_spool(cluster_factory, client_factory, batch_factory,
                                              meta_factory, gridnode_bin, tmp_path):
    cl, b = grid(cluster_factory, client_factory, batch_factory)
    m = meta_factory({"site": b})
    jid, shared = submit_three_tasks(gridnode_bin, m.endpoint, tmp_path)
    h = sha(shared)
    # the spool keeps its own copy, content-addressed as every level's
    assert stored_path(m, h).read_bytes() == shared
    job = wait_spool(m, jid)
    assert job["job"]["state"] == "done", job
    # offered to the batch site, which offered it to its cluster
    assert stored_path(b, h).read_bytes() == shared
    assert stored_path(cl, h).read_bytes() == shared
    check_three_tasks_kept(job["tasks"], shared, m)  # copied back into the spool's store
    # gridnode job --output at the spool lists them; fetch gets them, verified
    r = run_cli(gridnode_bin, "job", "-e", m.endpoint, jid, "--output")
    assert r.returncode == 0 and "files kept at the grid spool" in r.stdout, (r.stdout, r.stderr)
    assert "copy.out" in r.stdout and "1500000" in r.stdout, r.stdout
    check_three_tasks_fetched(gridnode_bin, m.endpoint, jid, tmp_path / "results", shared)
    # a SUBMIT naming a file the spool does not hold is refused there
    e = m.client().err("SUBMIT", "INVALID", argv=["true"], ntasks=1,
                       inputs=[{"name": "x", "hash": "ab" * 32, "size": 3}])
    assert "the grid spool holds no file" in e["msg"], e


def test_a_reservation_begins_once_the_inputs_can_be_there(cluster_factory, client_factory,
                                                           batch_factory, meta_factory,
                                                           gridnode_bin, tmp_path):
    """Issue 25 item 4 (docs/meta.md "Staging time"): at a site with a bandwidth, the
    spool reserves at the first of the site's possible starts after the inputs can be
    there (3 MB at 1 MB/s: 3 s from now on an idle site), not at the earliest one."""
    cl, b = grid(cluster_factory, client_factory, batch_factory)
    sites = tmp_path / "sites"
    sites.write_text("site=%s bandwidth_mb_s=1\n" % b.endpoint)
    m = meta_factory({}, sets={"meta.sites_file": str(sites)})
    data = tmp_path / "in.bin"
    data.write_bytes(os.urandom(3_000_000))
    t0 = int(time.time() * 1000)
    r = run_cli(gridnode_bin, "submit", "-e", m.endpoint, "--input", data, "--shell",
                "--json", "sha256sum in.bin > in.sum", "--output", "in.sum")
    assert r.returncode == 0, r.stderr
    jid = json.loads(r.stdout)["job"]
    job = wait_spool(m, jid)
    assert job["job"]["state"] == "done", job
    sets = [ln for ln in b.log().splitlines() if "set by meta" in ln]
    assert sets, b.log()[-2000:]
    start = int(sets[-1].split("set by meta: ")[1].split("..")[0])
    assert start >= t0 + 2500, (start - t0, sets)


def test_kill9_of_the_spool_between_upload_and_placement(cluster_factory, client_factory,
                                                         batch_factory, meta_factory,
                                                         gridnode_bin, tmp_path):
    cl, b = grid(cluster_factory, client_factory, batch_factory)
    m = meta_factory({"site": b}, sets={"store.sync": "full"})
    src, h, size = upload_cut_by_kill9(m, tmp_path)
    # the tool goes on from there; the job is held at the spool (not placed yet)
    r = run_cli(gridnode_bin, "submit", "-e", m.endpoint, "--shell", "--hold", "--input", src,
                "--output", "*.sum", "--json", "sha256sum in.bin > in.sum")
    assert r.returncode == 0, r.stderr
    jid = json.loads(r.stdout)["job"]
    m.restart()  # kill -9 after the upload and the SUBMIT, before the placement
    assert spool_job(m, jid)["job"]["state"] == "held"
    r = run_cli(gridnode_bin, "release", "-e", m.endpoint, jid)
    assert r.returncode == 0, r.stderr
    job = wait_spool(m, jid)
    assert job["job"]["state"] == "done", job
    f, = job["tasks"][0]["files"]
    assert stored_path(m, f["hash"]).read_text().split()[0] == h
    assert "file %s stored" % h[:12] in b.log()  # offered to the batch site, whole


def test_a_users_files_beyond_the_spools_files_user_mb_are_refused(meta_factory, batch_factory,
                                                                    cluster, gridnode_bin,
                                                                    tmp_path):
    m = meta_factory({"site": batch_factory([cluster])}, sets={"files.user_mb": 1})
    a, a2 = os.urandom(600 * 1024), os.urandom(600 * 1024)
    c = m.client()
    c.ok("FILE_PUT", "FILE_STATE", hash=sha(a), size=len(a), off=0, data=a, user="alice")
    e = c.err("FILE_HAVE", "REFUSED", hash=sha(a2), size=len(a2), user="alice")
    assert "files.user_mb" in e["msg"] and "alice holds 1 MB" in e["msg"], e
    # through the tool: the error names the limit and what the user holds
    big = tmp_path / "big.bin"
    big.write_bytes(a2)
    r = run_cli(gridnode_bin, "submit", "-e", m.endpoint, "--user", "alice", "--input", big,
                "true")
    assert r.returncode != 0 and "files.user_mb" in r.stderr, r.stderr
    assert "alice holds 1 MB" in r.stderr, r.stderr


def test_outputs_copied_back_to_the_spool_count_for_their_owner(cluster_factory, client_factory,
                                                                 batch_factory, meta_factory):
    cl, b = grid(cluster_factory, client_factory, batch_factory)
    m = meta_factory({"site": b}, sets={"files.user_mb": 2})
    jid = m.client().ok("SUBMIT", "SUBMITTED", argv=["sh", "-c", "head -c 1500000 /dev/urandom > o.bin"],
                        ntasks=1, outputs=["o.bin"], user="carol")["job"]
    job = wait_spool(m, jid)
    assert job["job"]["state"] == "done", job
    small = os.urandom(700000)
    r = m.client().err("FILE_HAVE", "REFUSED", hash=sha(small), size=len(small), user="carol")
    assert "user carol holds 2 MB" in r["msg"], r


def test_checkpoint_s_goes_on_through_the_spool(cluster_factory, client_factory, batch_factory,
                                                meta_factory):
    cl, b = grid(cluster_factory, client_factory, batch_factory)
    m = meta_factory({"site": b})
    jid = m.client().ok("SUBMIT", "SUBMITTED", argv=["true"], ntasks=2, checkpoint_s=10)["job"]
    job = wait_spool(m, jid)
    assert job["job"]["state"] == "done", job
    bj = b.client().ok("JOB_GET", "JOB", job=job["job"]["site_job"], tasks=True)
    assert len(bj["tasks"]) == 2, bj
    for t in bj["tasks"]:  # each task ran as a one-task job of the cluster, on its host
        cj = cl.client().ok("JOB_GET", "JOB", job=t["cjob"])["job"]
        assert cj["checkpoint_s"] == 10 and cj["ntasks"] == 1, cj


def test_a_site_refusing_an_input_refuses_the_job_there(cluster_factory, client_factory,
                                                        batch_factory, meta_factory, gridnode_bin,
                                                        tmp_path):
    # the site's own files.user_mb holds for the job's owner: the spool's offer is refused,
    # and with no other site the job fails naming why
    cl, b = grid(cluster_factory, client_factory, batch_factory, bsets={"files.user_mb": 1})
    m = meta_factory({"site": b})
    big = tmp_path / "big.bin"
    big.write_bytes(os.urandom(1536 * 1024))
    r = run_cli(gridnode_bin, "submit", "-e", m.endpoint, "--user", "alice", "--input", big,
                "--json", "true")
    assert r.returncode == 0, r.stderr  # the spool itself has no limit
    job = wait_spool(m, json.loads(r.stdout)["job"])
    assert job["job"]["state"] == "failed", job
    why = job["job"]["reason"]
    assert "refused by site site" in why and "big.bin" in why and "files.user_mb" in why, why


@pytest.mark.skipif(slurmlocal.unavailable() is not None, reason=str(slurmlocal.unavailable()))
def test_a_slurm_site_refuses_files_naming_why(slurm, hpc, meta_factory, gridnode_bin, tmp_path):
    m = meta_factory({"hpc": hpc}, sets={"meta.estimate_timeout_ms": 2000})
    f = tmp_path / "in.txt"
    f.write_bytes(b"input\n")
    r = run_cli(gridnode_bin, "submit", "-e", m.endpoint, "--input", f, "--json", "cat in.txt")
    assert r.returncode == 0, r.stderr
    job = wait_spool(m, json.loads(r.stdout)["job"])
    assert job["job"]["state"] == "failed", job
    assert "takes no files" in job["job"]["reason"], job["job"]
    assert "no workdir" in job["job"]["reason"], job["job"]


def test_offering_inputs_resumes_after_kill9_of_the_spool(cluster_factory, client_factory,
                                                          batch_factory, meta_factory,
                                                          gridnode_bin, tmp_path):
    cl, b = grid(cluster_factory, client_factory, batch_factory)
    # round_robin: no estimates, the site is chosen at once (an array: no reservation)
    # a stopped site is not taken as down while the test looks (meta.request_timeout_ms)
    m = meta_factory({"site": b}, sets={"meta.policy": "round_robin", "store.sync": "full",
                                        "meta.request_timeout_ms": 30000})
    wait_until(lambda: m.client().ok("SITE_INFO", "SITE")["sites"][0].get("up"), scaled(20),
               msg="the spool sees its site")
    data = os.urandom(3 * CHUNK + 99)
    src = tmp_path / "in.bin"
    src.write_bytes(data)
    h, size = sha(data), len(data)
    # an earlier offer cut short: the site holds the first chunk, charged to the job's
    # user as the spool's offer charges it (another user's upload would be waited for)
    b.client().ok("FILE_PUT", "FILE_STATE", hash=h, size=size, off=0, data=data[:CHUNK],
                  user="carol")
    # the site stops answering while the spool offers the file; the spool is killed (-9)
    b.proc.send_signal(signal.SIGSTOP)
    try:
        r = run_cli(gridnode_bin, "submit", "-e", m.endpoint, "-n", 2, "--shell", "--input", src,
                    "--output", "*.sum", "--json", "--user", "carol", "sha256sum in.bin > in{i}.sum")
        assert r.returncode == 0, r.stderr
        jid = json.loads(r.stdout)["job"]
        wait_until(lambda: "offering file %s" % h[:12] in m.log(), scaled(20),
                   msg="the spool offers the input to its site")
        row = spool_job(m, jid)["job"]
        assert row["gstate"] == "placing" and "sending its inputs to site" in row["reason"], row
        m.kill()
    finally:
        b.proc.send_signal(signal.SIGCONT)
    m.restart()
    # the submission is sent again: the offer goes on from what the site holds
    job = wait_spool(m, jid)
    assert job["job"]["state"] == "done", job
    assert "holds %d bytes of the file: going on from there" % CHUNK in m.log()
    assert stored_path(b, h).read_bytes() == data
    for t in job["tasks"]:
        f, = t["files"]
        assert stored_path(m, f["hash"]).read_text().split()[0] == h


def test_a_copy_of_outputs_goes_on_from_what_the_spool_holds(cluster_factory, client_factory,
                                                             batch_factory, meta_factory,
                                                             gridnode_bin, tmp_path):
    # the state a kill -9 of the spool leaves mid-copy: a part of the output in its store
    # (a durable chunk); the copy goes on from there and the whole file checks out
    cl, b = grid(cluster_factory, client_factory, batch_factory)
    m = meta_factory({"site": b}, sets={"store.sync": "full"})
    data = os.urandom(2 * CHUNK + 4321)
    src = tmp_path / "in.bin"
    src.write_bytes(data)
    out = data[1:]  # what the task leaves: its input but the first byte
    m.client().ok("FILE_PUT", "FILE_STATE", hash=sha(out), size=len(out), off=0,
                  data=out[:CHUNK])
    m.restart()
    r = run_cli(gridnode_bin, "submit", "-e", m.endpoint, "--shell", "--input", src,
                "--output", "out.bin", "--json", "tail -c +2 in.bin > out.bin")
    assert r.returncode == 0, r.stderr
    jid = json.loads(r.stdout)["job"]
    job = wait_spool(m, jid)
    assert job["job"]["state"] == "done", job
    f, = job["tasks"][0]["files"]
    assert f["hash"] == sha(out) and stored_path(m, f["hash"]).read_bytes() == out
    r = run_cli(gridnode_bin, "fetch", "-e", m.endpoint, jid, tmp_path / "res")
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "res" / "0" / "out.bin").read_bytes() == out


def test_under_curve_the_owner_reads_at_the_spool_and_is_charged_at_its_site(
        cluster_factory, client_factory, batch_factory, meta_factory, workdir):
    from test_authz import Keys
    from test_data_batch import BATCH, FAST, FAST_CLIENT
    # the suite's key is the grid's peer (the spool's key toward its site, and the batch
    # role's toward its cluster)
    k = (Keys(workdir / "keys", suite_kind="peer").add("alice", "user").add("bob", "user")
         .add("worker", "node"))
    cl = cluster_factory(dict(FAST, **k.sets()))
    client_factory(cl, 1, sets=dict(FAST_CLIENT, **{"client.slots": 2}),
                   env={"GRIDNODE_KEY": k.key("worker")})
    b = batch_factory([cl], sets=dict(BATCH, **dict(k.sets(), **{"files.user_mb": 1})))
    m = meta_factory({"site": b}, sets=k.sets())
    alice, bob = k.rpc(m.endpoint, "alice"), k.rpc(m.endpoint, "bob")
    data = os.urandom(700 * 1024)
    h = sha(data)
    # "user" is the key's own name whatever the tool says: alice is charged
    alice.ok("FILE_PUT", "FILE_STATE", hash=h, size=len(data), off=0, data=data, user="bob")
    jid = alice.ok("SUBMIT", "SUBMITTED", argv=["sha256sum in.bin > in.sum"], shell=True,
                   ntasks=1, inputs=[{"name": "in.bin", "hash": h, "size": len(data)}],
                   outputs=["*.sum"])["job"]
    wait_until(lambda: alice.ok("JOB_GET", "JOB", job=jid)["job"]["state"] in ("done", "failed"),
               scaled(90), msg="alice's job ends")
    t, = alice.ok("JOB_GET", "JOB", job=jid, tasks=True)["tasks"]
    assert t["state"] == "ok", t
    f, = t["files"]
    get = dict(hash=f["hash"], job=jid, idx=0, off=0, len=1000)
    assert alice.ok("FILE_GET", "FILE_DATA", **get)["data"].split()[0].decode() == h
    assert "belongs to another user" in bob.err("FILE_GET", "DENIED", **get)["msg"]
    inp = dict(hash=h, job=jid, off=0, len=10)
    assert alice.ok("FILE_GET", "FILE_DATA", **inp)["data"] == data[:10]
    assert "belongs to another user" in bob.err("FILE_GET", "DENIED", **inp)["msg"]
    # the spool offered the input to its site for alice: charged to her there
    other = os.urandom(600 * 1024)
    e = k.rpc(b.endpoint, "alice").err("FILE_HAVE", "REFUSED", hash=sha(other), size=len(other))
    assert "alice holds 1 MB" in e["msg"], e


def test_a_job_moved_to_another_site_gets_its_inputs_offered_there(meta_factory, tmp_path):
    from test_meta_moves import FakeSite, T as MT

    class FileSite(FakeSite):
        """A fake batch site that holds every file offered to it (FILE_HAVE: done)."""

        def handle(self, rid, m):
            if m["t"] == 120 and not self.down:  # FILE_HAVE -> FILE_STATE
                with self.lock:
                    self.log.append((120, dict(m, _at=time.monotonic())))
                self.reply(rid, 121, m["id"], hash=m["hash"], size=m["size"], have=m["size"],
                           done=True, chunk=CHUNK)
                return
            super().handle(rid, m)

    a, b = FileSite("a", 300), FileSite("b", 900)
    try:
        m = meta_factory({"a": a.endpoint, "b": b.endpoint},
                         sets={"meta.reeval_s": 1, "meta.move_margin_s": 30})
        wait_until(lambda: all(s["known"] for s in m.client().ok("SITE_INFO", "SITE")["sites"]),
                   scaled(20), msg="sites known")
        data = b"an input\n"
        h = sha(data)
        m.client().ok("FILE_PUT", "FILE_STATE", hash=h, size=len(data), off=0, data=data)
        jid = m.client().ok("SUBMIT", "SUBMITTED", argv=["cat", "in.txt"], ntasks=1, limit_s=60,
                            inputs=[{"name": "in.txt", "hash": h, "size": len(data)}])["job"]
        wait_until(lambda: spool_job(m, jid)["job"]["gstate"] == "placed", scaled(20),
                   msg="placed at a")
        assert spool_job(m, jid)["job"]["site"] == "a"
        assert a.count(120, hash=h) >= 1  # offered to a before its SUBMIT there
        b.start_in_s = 0  # b now offers a start 300 s earlier: the job moves there
        wait_until(lambda: spool_job(m, jid)["job"]["site"] == "b" and
                   spool_job(m, jid)["job"]["gstate"] == "placed", scaled(30), msg="moved to b")
        have = [x["_at"] for t, x in b.log if t == 120 and x.get("hash") == h]
        sub = [x["_at"] for t, x in b.log if t == MT["SUBMIT"]]
        assert have and sub and have[0] < sub[0], (have, sub)
        s, = [x for t, x in b.log if t == MT["SUBMIT"]]
        assert s["inputs"] == [{"name": "in.txt", "hash": h, "size": len(data)}], s
    finally:
        a.close()
        b.close()


def test_before_the_copy_the_spool_shows_no_file_it_does_not_hold(
        cluster_factory, client_factory, batch_factory, meta_factory, gridnode_bin, tmp_path):
    cl, b = grid(cluster_factory, client_factory, batch_factory)
    m = meta_factory({"site": b})
    go = tmp_path / "go"
    # task 1 waits for the test (the client runs unsandboxed here): task 0's outputs are
    # at the batch site while the job still runs
    script = ("if [ {i} = 1 ]; then while [ ! -e %s ]; do sleep 0.1; done; fi; "
              "echo {i} > o.txt" % go)
    r = run_cli(gridnode_bin, "submit", "-e", m.endpoint, "-n", 2, "--shell", "--limit", 120,
                "--output", "o.txt", "--json", script)
    assert r.returncode == 0, r.stderr
    jid = json.loads(r.stdout)["job"]

    def first_done():
        t = spool_job(m, jid)["tasks"]
        return t and t[0]["state"] == "ok" and t[0]
    t0 = wait_until(first_done, scaled(60), msg="task 0 ends at the site")
    assert "files" not in t0, t0  # the site's copy: not the spool's yet
    r = run_cli(gridnode_bin, "fetch", "-e", m.endpoint, jid, tmp_path / "early")
    assert r.returncode == 0 and "1 task(s) have not finished" in r.stdout, (r.stdout, r.stderr)
    go.write_text("")
    job = wait_spool(m, jid)
    assert job["job"]["state"] == "done", job
    r = run_cli(gridnode_bin, "fetch", "-e", m.endpoint, jid, tmp_path / "res")
    assert r.returncode == 0 and "2 file(s) fetched" in r.stdout, (r.stdout, r.stderr)
    for i in range(2):
        assert (tmp_path / "res" / str(i) / "o.txt").read_text() == "%d\n" % i


def test_files_no_job_names_are_swept_at_the_spool(cluster, batch_factory, meta_factory):
    m = meta_factory({"site": batch_factory([cluster])}, sets={"files.keep_s": 0})
    wait_until(lambda: "files: swept" in m.log(), scaled(20), msg="the sweep at start")
    named, loose = os.urandom(1000), os.urandom(2000)
    c = m.client()
    for d in (named, loose):
        c.ok("FILE_PUT", "FILE_STATE", hash=sha(d), size=len(d), off=0, data=d)
    c.ok("SUBMIT", "SUBMITTED", argv=["true"], ntasks=1, hold=True,
         inputs=[{"name": "in", "hash": sha(named), "size": len(named)}])
    m.restart()  # the sweep runs at start (then hourly)
    wait_until(lambda: "file %s (2000 bytes) deleted: no job names it" % sha(loose)[:12]
               in m.log(), scaled(20), msg="the sweep deletes the file no job names")
    assert not stored_path(m, sha(loose)).exists()
    assert stored_path(m, sha(named)).read_bytes() == named
    st = m.client().ok("FILE_HAVE", "FILE_STATE", hash=sha(loose), size=len(loose))
    assert st["have"] == 0 and not st["done"], st
