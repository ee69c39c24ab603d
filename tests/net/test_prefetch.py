"""Latency tolerance of the client (issue 16 item 7): a client keeps enough tasks queued
to cover its round trip, so short tasks across a 200 ms link (each way) take not much
longer than on a clean link, every task still ends exactly once, and the queued tasks
(named in the client's heartbeats) are not re-issued to another node while they wait.

The same workload runs on the same grid twice: link clean, then 200 ms each way. The
issue's target is 1.25x (bench/wan.sh measures it on the full workload); the bound
here is loose (1.6x) for a busy machine. Measured values are printed (pytest -s).
"""

import json
import time

from conftest import scaled, wait_until

CLUSTER = {"store.sync": "none", "tasks.heartbeat_s": 1, "tasks.idle_wait_s": 1,
           "tasks.k_wait": 3, "tasks.k_wait_dead": 6, "tasks.default_estimate_s": 1,
           "tasks.min_wait_s": 3, "limits.peer_timeout_s": 10}


def test_prefetch_covers_round_trip(netlab):
    lab = netlab(4)
    cl = lab.cluster(1, CLUSTER)
    ep = cl.endpoint
    clients = [lab.client(i + 2, cl, "pf%d" % (i + 1), {"client.slots": 2})
               for i in range(2)]

    def tool(*args):
        return json.loads(lab.tool(4, args[0], "-e", ep, *args[1:], "--json").stdout)

    wait_until(lambda: len(tool("nodes")) == 2, scaled(30), interval=0.3, msg="2 clients")

    def run(tag):
        """200 tasks of 0.1 s on 4 slots (5 s of work per slot): wall seconds, job."""
        t0 = time.monotonic()
        r = lab.tool(4, "submit", "-e", ep, "-n", 200, "--shell", "--",
                     "sleep 0.1; echo %s{i}" % tag)
        jid = int(r.stdout.split()[2])
        wait_until(lambda: tool("job", str(jid), "--summary")["job"]["state"]
                   in ("done", "failed"), scaled(120), interval=0.25, msg="job %s" % tag)
        wall = time.monotonic() - t0
        j = tool("job", str(jid), "--output")
        assert j["job"]["state"] == "done" and j["job"]["dups"] == 0, j["job"]
        for t in j["tasks"]:
            assert t["state"] == "ok" and t["stdout"] == "%s%d\n" % (tag, t["idx"]), t
        return wall, sum(t["issues"] for t in j["tasks"]) - len(j["tasks"])

    clean, _ = run("c")
    lab.link("set 0 both delay=200")  # every link 400 ms between namespaces...
    lab.link("set 1 both delay=0")    # ...except at the cluster: 200 ms each way
    slow, reissued = run("w")
    print("200 tasks of 0.1 s on 2x2 slots: clean %.1f s, 200 ms each way %.1f s (%.2fx), "
          "%d re-issued" % (clean, slow, slow / clean, reissued))
    # without prefetch every task costs a round trip: ~3x here
    assert slow <= 1.6 * clean + 1.0, (clean, slow)
    # queued tasks are protected by the heartbeats: none waits into a re-issue
    assert reissued <= 2, reissued
    for c in clients:
        assert c.alive(), c.log()[-2000:]
