"""The node's parallel processes at high rates (issue 9, batch_e2e): a node starts a
process without waiting for it to execute its program, measures its processes in one
pass over /proc at most once a second, and still reports a program that cannot be
executed as "could not start" with the reason. Real cluster and client on loopback;
every wait bounded; no assertion on speed."""

from conftest import TYPES, scaled, wait_until

CLIENT_SANDBOX = True   # conftest client_factory: the shipped execution boundary

T = dict(TYPES, PSUBMIT=39, SD_INFO=42, SD_STATE=43)
SD = {"store.sync": "none", "tasks.heartbeat_s": 1, "tasks.idle_wait_s": 1,
      "queues.sync_ms": 100}
CLIENT = {"rpc.timeout_ms": 2000, "rpc.backoff_min_s": 0.2, "rpc.backoff_max_s": 1,
          "client.slots": 8}


def grid(cluster_factory, client_factory):
    cl = cluster_factory(SD)
    client_factory(cl, 1, sets=CLIENT)
    wait_until(lambda: sum(len(k["hosts"]) for k in cl.rpc(T["SD_INFO"])["clusters"]) >= 1,
               scaled(15), interval=0.1, msg="the host")
    return cl


def job(cl, jid):
    return cl.rpc(T["JOB_GET"], job=jid)["job"]


def ended(cl, jid, timeout=30):
    return wait_until(lambda: (lambda j: j if j["state"] in ("done", "failed", "killed")
                               else None)(job(cl, jid)), scaled(timeout), interval=0.1,
                      msg="job %d ended" % jid)


def test_program_that_cannot_run_is_reported(cluster_factory, client_factory):
    cl = grid(cluster_factory, client_factory)
    bad = cl.rpc(T["PSUBMIT"], argv=["/nonexistent/gridnode-no-such-program", "x"],
                 procs=2, ppn=2)["job"]
    j = ended(cl, bad)
    assert j["state"] == "failed", j
    assert "could not start" in j["reason"] and "cannot run" in j["reason"] \
        and "/nonexistent/gridnode-no-such-program" in j["reason"], j["reason"]
    # the node is fine afterwards: a good job runs, with its output and exit status
    ok = cl.rpc(T["PSUBMIT"], argv=["echo hello; exit 3"], shell=True, procs=1)["job"]
    j = ended(cl, ok)
    assert j["state"] == "failed" and "exited with 3" in j["reason"], j


def test_many_short_processes_all_reported(cluster_factory, client_factory):
    """200 one-process jobs of `true` on 8 slots: each is started once and its exit
    reported (the node no longer waits for each exec; exits arrive in any order)."""
    cl = grid(cluster_factory, client_factory)
    rpc = cl.client()
    ids = [rpc.ok(T["PSUBMIT"], argv=["true"], procs=1)["job"] for _ in range(200)]
    for jid in ids:
        j = ended(cl, jid, timeout=120)
        assert j["state"] == "done", j


def inodes_of(d):
    out = set()
    for e in (d.iterdir() if d.is_dir() else ()):
        try:
            out.add(e.stat().st_ino)
        except OSError:  # renamed by the node meanwhile
            pass
    return out


def test_reused_working_directory_is_clean(cluster_factory, client_factory, workdir):
    """A finished process's directory is reused for the next one (spare directories):
    the next process sees only its own empty output files, gets only its own output,
    and a symlink the first one left as its stdout is not followed (the file it pointed
    to is not truncated)."""
    cl = grid(cluster_factory, client_factory)
    target = workdir / "precious"
    target.write_text("keep me\n")
    a = cl.rpc(T["PSUBMIT"], shell=True, procs=1, argv=[
        "echo secretA; echo secretA >&2; echo x > leftover; mkdir -p d/e; touch d/e/f; "
        "rm stdout; ln -s %s stdout" % target])["job"]
    assert ended(cl, a)["state"] == "done"
    work = workdir / "node1" / "work"

    def spare_inodes():
        # work/spare, or work/par-PROJECT/spare for the multi-project client
        return set().union(*(inodes_of(d) for d in [work / "spare", *work.glob("par-*/spare")]))

    wait_until(spare_inodes, scaled(20), interval=0.1, msg="the first directory kept as a spare")
    inodes = spare_inodes()
    b = cl.rpc(T["PSUBMIT"], shell=True, procs=1, argv=["ls -A; pwd"])["job"]
    assert ended(cl, b)["state"] == "done"
    r = cl.rpc(T["JOB_GET"], job=b, tasks=True, output=True)["job"]["ranks"][0]
    listing = r["stdout"].decode().split()
    assert len(listing) == 3 and listing[:2] == ["stderr", "stdout"] \
        and listing[2].endswith("/p%d.0" % b), listing
    assert b"secretA" not in r["stdout"] + r["stderr"]
    assert target.read_text() == "keep me\n"
    # b ran in a's directory: kept as a spare again after b, with the same inode
    wait_until(lambda: spare_inodes() & inodes, scaled(20),
               interval=0.1, msg="the directory reused and kept again")
