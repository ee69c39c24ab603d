"""Latency tolerance of the client (issue 16 item 7): a client keeps enough tasks queued
to cover its round trip, so short tasks across a 200 ms link (each way) take not much
longer than on a clean link, every task still ends exactly once, and the queued tasks
(named in the client's heartbeats) are not re-issued to another node while they wait.

The same workload runs on the same grid twice: link clean, then 200 ms each way, timed
on the cluster's clock (submission to end). The issue's target is 1.25x (bench/wan.sh
measures it on the full workload); the bound here is loose (1.6x) for a busy machine.
Without prefetching this takes about 7x. Measured values are printed (pytest -s).
"""

import json
import signal

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

    held = [0]  # the most tasks the cluster saw issued to one node at once

    def ended(jid):
        held[0] = max([held[0]] + [n["running"] for n in tool("nodes")])
        return tool("job", str(jid), "--summary")["job"]["state"] in ("done", "failed")

    def run(tag):
        """200 tasks of 0.1 s on 4 slots (5 s of work per slot): the grid's seconds
        (submission to end on the cluster's clock, without the tool's round trips) and
        the re-issue count."""
        r = lab.tool(4, "submit", "-e", ep, "-n", 200, "--shell", "--",
                     "sleep 0.1; echo %s{i}" % tag)
        jid = int(r.stdout.split()[2])
        wait_until(lambda: ended(jid), scaled(120), interval=0.25, msg="job %s" % tag)
        j = tool("job", str(jid), "--output")
        wall = (j["job"]["finished"] - j["job"]["submitted"]) / 1000
        assert j["job"]["state"] == "done" and j["job"]["dups"] == 0, j["job"]
        for t in j["tasks"]:
            assert t["state"] == "ok" and t["stdout"] == "%s%d\n" % (tag, t["idx"]), t
        return wall, sum(t["issues"] for t in j["tasks"]) - len(j["tasks"])

    clean, _ = run("c")
    held[0] = 0
    lab.link("set 0 both delay=200")  # every link 400 ms between namespaces...
    lab.link("set 1 both delay=0")    # ...except at the cluster: 200 ms each way
    slow, reissued = run("w")
    print("200 tasks of 0.1 s on 2x2 slots: clean %.1f s, 200 ms each way %.1f s (%.2fx), "
          "%d re-issued, up to %d tasks held by a node" % (clean, slow, slow / clean, reissued,
                                                          held[0]))
    assert held[0] > 2, held[0]  # work was queued beyond the slots
    # without prefetch every task costs a round trip: ~3x here
    assert slow <= 1.6 * clean + 1.0, (clean, slow)
    # queued tasks are protected by the heartbeats: none waits into a re-issue
    assert reissued <= 2, reissued
    for c in clients:
        assert c.alive(), c.log()[-2000:]


def test_prefetched_tasks_survive_kill(netlab):
    """A client killed (-9) while holding a queue of prefetched tasks across a 200 ms link
    restarts from its store, runs what it held (slots at a time) and every task ends
    exactly once with its own output."""
    lab = netlab(3)
    cl = lab.cluster(1, CLUSTER)
    ep = cl.endpoint
    sets = {"client.slots": 2}
    c = lab.client(2, cl, "pk", sets)
    lab.link("set 0 both delay=200")
    lab.link("set 1 both delay=0")

    def job(jid, *extra):
        return json.loads(lab.tool(3, "job", "-e", ep, str(jid), "--json", *extra).stdout)

    r = lab.tool(3, "submit", "-e", ep, "-n", 80, "--shell", "--", "sleep 0.1; echo k{i}")
    jid = int(r.stdout.split()[2])
    wait_until(lambda: job(jid, "--summary")["job"]["done"] >= 10, scaled(60), interval=0.3,
               msg="some progress")
    c.stop(sig=signal.SIGKILL)
    c = lab.client(2, cl, "pk", sets)  # the same name: the same state directory
    wait_until(lambda: job(jid, "--summary")["job"]["state"] in ("done", "failed"),
               scaled(90), interval=0.5, msg="the job to end")
    j = job(jid, "--output")
    assert j["job"]["state"] == "done" and j["job"]["done"] == 80, j["job"]
    for t in j["tasks"]:
        assert t["state"] == "ok" and t["stdout"] == "k%d\n" % t["idx"], t
    assert "task(s) to rerun" in c.log()
    assert c.alive(), c.log()[-2000:]
