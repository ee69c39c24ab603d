"""bench/job_wait_held.py - what held JOB_WAITs cost a role's turn (issue 28,
daemon/endwait.c): a batch role on a cluster manager without nodes (its jobs stay
queued), HELD user tools each holding a JOB_WAIT on its own queued job, then N
sequential SUBMITs (one commit each, store.sync none: the turn's CPU) timed, with and
without the waits held.

  /usr/bin/python3 bench/job_wait_held.py [GRIDNODE] [HELD] [N]

Prints submissions per second with 0 and HELD waits held, and whether every held
wait was answered once its job was cancelled."""
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "system"))
import conftest  # noqa: E402  (keys, Rpc, the role classes)

gridnode = sys.argv[1] if len(sys.argv) > 1 else "build/gridnode"
held_n = int(sys.argv[2]) if len(sys.argv) > 2 else 1000
n = int(sys.argv[3]) if len(sys.argv) > 3 else 1000
T = conftest.TYPES


def submits_per_s(c, count):
    t0 = time.monotonic()
    for _ in range(count):
        c.ok("SUBMIT", "SUBMITTED", argv=["true"], ntasks=1)
    return count / (time.monotonic() - t0)


reg = conftest.ProcRegistry()
with tempfile.TemporaryDirectory() as d:
    try:
        fast = {"store.sync": "none"}  # the turn's CPU, not the disk's flush
        cl = conftest.Cluster(reg, gridnode, Path(d) / "cluster", sets=fast)
        cl.start()
        b = conftest.Batch(reg, gridnode, Path(d) / "batch", [cl], sets=fast)
        b.start()
        c = b.client()
        jobs = [c.ok("SUBMIT", "SUBMITTED", argv=["true"], ntasks=1)["job"]
                for _ in range(held_n)]
        base = submits_per_s(c, n)
        tools = []
        for j in jobs:  # one peer each: a peer holds one JOB_WAIT at a time
            r = conftest.Rpc(b.endpoint, timeout=60)
            r.sock.send(r.message("JOB_WAIT", dict(jobs=[j], wait_ms=60000))[1])
            tools.append(r)
        time.sleep(2)  # the requests arrive and are held
        with_held = submits_per_s(c, n)
        for j in jobs:
            c.ok("CANCEL", job=j)
        answered = sum(1 for r, j in zip(tools, jobs)
                       if [x["job"] for x in conftest.Rpc.decode(r.recv_raw(30)[-1])["jobs"]] == [j])
        print("%s: %d submits/s with no wait held, %d/s with %d held; %d of %d answered "
              "at their job's end" % (gridnode, base, with_held, held_n, answered, held_n))
    finally:
        conftest.Rpc.close_all()
        reg.teardown()
