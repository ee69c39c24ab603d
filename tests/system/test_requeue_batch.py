"""System tests of `gridnode requeue -e BATCH JOB` (issue 15 item 5): JOB_CTL requeue,
hold and release in the live batch role (docs/batch.md "Hold, release and requeue",
docs/wire.md 6.16). Real cluster manager, client and batch role on loopback; every wait
is bounded and generous."""

import os
import signal
import subprocess

from conftest import scaled, wait_until
from test_batch_live import SD, T, grid, job, wait_state
from test_security import keys  # noqa: F401 (fixture)

T = dict(T, JOB_CTL=56)


def lines(path):
    return path.read_text().split() if path.exists() else []


def gone(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def tool(gridnode_bin, *args):
    return subprocess.run([gridnode_bin, *args], capture_output=True, text=True,
                          timeout=scaled(20))


def test_requeue_running_job_survives_kill9_and_runs_again(
        cluster_factory, client_factory, batch_factory, workdir, gridnode_bin):
    cl, b = grid(cluster_factory, client_factory, batch_factory, nodes=1, slots=1)
    out = workdir / "pids"
    jid = b.rpc(T["PSUBMIT"], argv=["echo $$ >> %s; exec sleep 60" % out], shell=True,
                procs=1, limit_s=120)["job"]
    wait_until(lambda: len(lines(out)) == 1, scaled(30), msg="first run started")
    first = wait_state(b, jid, ("running",))
    old_cjob, old_pid = first["tasks"][0]["cjob"], int(lines(out)[0])
    sub = first["job"]["submitted"]
    r = tool(gridnode_bin, "requeue", "-e", b.endpoint, str(jid))
    assert r.returncode == 0 and "requeued" in r.stdout, r.stderr
    # the transitional state is stored before OK: kill -9 now, the restart completes it
    b.kill(signal.SIGKILL)
    b.restart()
    wait_until(lambda: len(lines(out)) == 2, scaled(40), msg="second run started")
    new_pid = int(lines(out)[1])
    assert new_pid != old_pid
    wait_until(lambda: gone(old_pid), scaled(20), msg="old run's process killed")
    assert cl.rpc(T["JOB_GET"], job=old_cjob)["job"]["state"] == "cancelled"
    j = wait_state(b, jid, ("running",))
    assert j["job"]["requeues"] == 1 and j["job"]["submitted"] == sub, j
    assert j["tasks"][0]["cjob"] not in (0, old_cjob)
    r = tool(gridnode_bin, "job", "-e", b.endpoint, str(jid))
    assert r.returncode == 0 and "requeued 1 times" in r.stdout, r.stdout
    r = tool(gridnode_bin, "checkjob", "-e", b.endpoint, str(jid))
    assert r.returncode == 0 and "requeues" in r.stdout, r.stdout + r.stderr
    # cancelled: a cancel is final, requeue refused with a clear text
    b.client().ok(T["CANCEL"], job=jid)
    wait_until(lambda: gone(new_pid), scaled(20), msg="second run's process killed")
    r = tool(gridnode_bin, "requeue", "-e", b.endpoint, str(jid))
    assert r.returncode == 1 and "cancelled" in r.stderr and "submit it again" in r.stderr, \
        r.stderr
    assert len(lines(out)) == 2
    e = b.client().err(T["JOB_CTL"], "INVALID", job=jid, op="restart")
    assert "requeue" in e["msg"]
    b.client().err(T["JOB_CTL"], "NOT_FOUND", job=999, op="requeue")
    assert b.alive()


def test_requeue_ended_array_runs_it_again_and_hold_release(
        cluster_factory, client_factory, batch_factory, workdir, gridnode_bin):
    cl, b = grid(cluster_factory, client_factory, batch_factory, nodes=1, slots=2)
    out = workdir / "runs"
    jid = b.rpc(T["SUBMIT"], argv=["sh", "-c", "echo {i} >> %s; exit {i}" % out], ntasks=2,
                limit_s=60)["job"]
    j = wait_state(b, jid, ("done", "failed"))
    assert j["job"]["state"] == "failed" and j["job"]["done"] == 2
    # hold of an ended job: STATE naming requeue
    e = b.client().err(T["JOB_CTL"], "STATE", job=jid, op="hold")
    assert "requeue" in e["msg"]
    # requeue of an ended job runs it again from scratch (Slurm requeues completed jobs)
    r = tool(gridnode_bin, "requeue", "-e", b.endpoint, str(jid))
    assert r.returncode == 0 and "requeued" in r.stdout, r.stderr
    wait_until(lambda: len(lines(out)) == 4, scaled(30), msg="both tasks ran again")
    j = wait_state(b, jid, ("done", "failed"))
    assert j["job"]["state"] == "failed" and j["job"]["requeues"] == 1, j
    assert j["job"]["done"] == 2 and j["job"]["failed"] == 1, j
    assert sorted(lines(out)) == ["0", "0", "1", "1"]
    assert [t["exit"] for t in j["tasks"]] == [0, 1]
    # hold / release by JOB_CTL; a job never started: requeue is OK, changes nothing
    held = b.rpc(T["SUBMIT"], argv=["sh", "-c", "echo h >> %s" % out], ntasks=1,
                 hold=True)["job"]

    def hold_shown():
        r = tool(gridnode_bin, "checkjob", "-e", b.endpoint, str(held))
        assert r.returncode == 0, r.stderr
        return [ln.split()[1] for ln in r.stdout.splitlines() if ln.startswith("hold ")]

    assert hold_shown() == ["yes"] and job(b, held)["job"]["state"] == "queued"
    b.client().ok(T["JOB_CTL"], job=held, op="requeue")
    b.client().ok(T["JOB_CTL"], job=held, op="hold")     # held already: OK, no change
    assert "requeues" not in job(b, held)["job"]
    b.restart()                                          # the hold is stored
    assert hold_shown() == ["yes"] and len(lines(out)) == 4
    r = tool(gridnode_bin, "release", "-e", b.endpoint, str(held))
    assert r.returncode == 0 and "released" in r.stdout, r.stderr
    wait_state(b, held, ("done",))
    r = tool(gridnode_bin, "hold", "-e", b.endpoint, str(held))
    assert r.returncode == 1 and "already done" in r.stderr, r.stderr


def test_job_ctl_at_the_batch_role_only_owner_or_admin(cluster_factory, client_factory,
                                                       batch_factory, keys):
    """hold, release and requeue of another user's batch job are DENIED (as CANCEL);
    the owner and the administrators may."""
    cl = cluster_factory(dict(SD))
    b = batch_factory([cl], sets=keys.sets())
    alice, bob = keys.rpc(b.endpoint, "alice"), keys.rpc(b.endpoint, "bob")
    jid = alice.ok(T["SUBMIT"], argv=["true"], ntasks=1, hold=True)["job"]
    for op in ("hold", "release", "requeue"):
        e = bob.err(T["JOB_CTL"], "DENIED", job=jid, op=op)
        assert "belongs to another user" in e["msg"] and op in e["msg"], e
    for op in ("requeue", "hold", "release", "hold"):
        assert alice.call(T["JOB_CTL"], job=jid, op=op)["t"] == T["OK"]
    b.client().ok(T["JOB_CTL"], job=jid, op="release")  # admin
    assert b.alive()
