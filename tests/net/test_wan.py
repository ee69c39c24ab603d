"""The grid across emulated wide-area links (issue 16): the cluster manager, each client
and the user tool in their own network namespace.

Namespace 1 holds the cluster, 2..N+1 the clients, the last one the user tool. Bounds
are loose (a busy 2-core machine); measured values are printed (pytest -s shows them).
"""

import json
import time

from conftest import fd_count, scaled, tcp_established, wait_until

CLUSTER = {"store.sync": "none", "tasks.heartbeat_s": 1, "tasks.idle_wait_s": 1,
           "tasks.k_wait": 3, "tasks.k_wait_dead": 6, "tasks.default_estimate_s": 1,
           "tasks.min_wait_s": 2, "limits.peer_timeout_s": 3}
CLIENT = {"rpc.timeout_ms": 2000, "rpc.link_timeout_s": 3}


class Grid:
    def __init__(self, netlab, nclients, cluster_sets=None, client_sets=None, slots=2):
        self.lab = netlab(nclients + 2)
        self.user = nclients + 2
        sets = dict(CLUSTER, **(cluster_sets or {}))
        self.cl = self.lab.cluster(1, sets)
        self.port = int(self.cl.endpoint.rsplit(":", 1)[1])
        self.clients = [self.lab.client(i + 2, self.cl, "node%d" % (i + 1),
                                        dict(CLIENT, **{"client.slots": slots},
                                             **(client_sets or {})))
                        for i in range(nclients)]

    def conns(self):
        """The cluster's established connections from client namespaces."""
        return tcp_established(self.cl.pid, self.port,
                               {self.lab.addr(i + 2) for i in range(len(self.clients))})

    def tool(self, *args, **kw):
        return self.lab.tool(self.user, args[0], "-e", self.cl.endpoint, *args[1:], **kw)

    def submit(self, script, n, *extra):
        r = self.tool("submit", "-n", n, "--shell", *extra, "--", script)
        return int(r.stdout.split()[2])

    def job(self, jid, output=False):
        args = ["job", str(jid), "--json"] + (["--output"] if output else [])
        return json.loads(self.tool(*args).stdout)

    def nodes(self):
        return {n["node"]: n for n in json.loads(self.tool("nodes", "--json").stdout)}

    def wait_done(self, jid, timeout):
        return wait_until(lambda: self.job(jid)["job"]["state"] in ("done", "failed"),
                          scaled(timeout), interval=0.5, msg="job %d to end" % jid)

    def check_exactly_once(self, jid, expect):
        """Every task ended once, ok, with its own correct output."""
        j = self.job(jid, output=True)
        assert j["job"]["state"] == "done" and j["job"]["done"] == j["job"]["ntasks"], j["job"]
        for t in j["tasks"]:
            assert t["state"] == "ok" and t["stdout"] == expect(t["idx"]), t
        return j


def test_partitions_heal_fast_and_release_connections(netlab):
    """Two-way and one-way partitions of two of three clients: each task ends with
    exactly one correct result, clients are served again within seconds of the heal
    (not after their backoff), and the cluster's connections and descriptors return to
    their baseline."""
    g = Grid(netlab, 3, client_sets={"rpc.backoff_max_s": 60})
    g.lab.link("set 0 both delay=20 jitter=5")
    # each client holds two connections: its requests' and its file transfers', on
    # which an idle node keeps a WORK_WAIT (docs/wire.md 5.7)
    wait_until(lambda: g.conns() >= 6, scaled(20),
               msg="3 clients connected, twice each")
    jid = g.submit("sleep 0.5; echo r{i}", 90)
    wait_until(lambda: g.job(jid)["job"]["done"] >= 10, scaled(60), interval=0.5,
               msg="some progress")
    base_conn = g.conns()
    base_fds = fd_count(g.cl.pid)
    assert base_conn == 6, base_conn
    g.lab.link("down 3 both")   # node2: two-way
    g.lab.link("down 4 out")    # node3: its packets to the cluster are lost
    time.sleep(15)              # beyond every heartbeat timeout and several backoffs
    heal = time.time() * 1000
    g.lab.link("up 3")
    g.lab.link("up 4")
    for name in ("node2", "node3"):
        n = wait_until(lambda: g.nodes()[name]["last"] > heal and g.nodes()[name],
                       scaled(20), interval=0.2, msg="%s served after the heal" % name)
        took = (n["last"] - heal) / 1000
        print("%s served again %.1f s after the heal" % (name, took))
        assert took <= 8, took  # issue 16: within 5 s (loose bound for a busy machine)
    g.wait_done(jid, 120)
    g.check_exactly_once(jid, lambda i: "r%d\n" % i)
    # the partitioned clients' old connections are gone; nothing else piles up
    wait_until(lambda: g.conns() == base_conn, scaled(30),
               interval=0.5, msg="connections back to %d" % base_conn)
    wait_until(lambda: fd_count(g.cl.pid) <= base_fds, scaled(30), interval=0.5,
               msg="descriptors back to %d" % base_fds)
    for c in g.clients:
        assert c.alive(), c.log()[-2000:]


def test_task_handed_back_to_its_holder_is_protected(netlab):
    """A client cut off long enough for its task to expire gets that task back after the
    heal: it keeps running its copy under the new issue, and its heartbeats protect
    that issue (no further re-issues, no second copy)."""
    g = Grid(netlab, 1)
    jid = g.submit("sleep 14; echo once {i}", 1, "--limit", "120")
    wait_until(lambda: g.job(jid)["job"]["running"] == 1, scaled(20), interval=0.3,
               msg="the task running")
    g.lab.link("down 2 both")
    wait_until(lambda: "expired" in g.cl.log() or g.job(jid)["tasks"][0]["issues"] >= 1,
               scaled(5), msg="cut off")
    time.sleep(7)  # the task's re-issue time passes while the node is cut off
    g.lab.link("up 2")
    wait_until(lambda: g.job(jid)["tasks"][0]["issues"] >= 2, scaled(20), interval=0.3,
               msg="the task re-issued to its holder")
    g.wait_done(jid, 60)
    j = g.check_exactly_once(jid, lambda i: "once %d\n" % i)
    assert j["tasks"][0]["issues"] == 2, j["tasks"][0]
    assert j["job"]["dups"] == 0, j["job"]
    assert "keeping the copy we run" in g.clients[0].log()


def test_loss_without_needless_reissues(netlab):
    """30 % loss each way on every client's link: all tasks end exactly once and only a
    few are re-issued (each re-issue costs a recomputation)."""
    g = Grid(netlab, 2, cluster_sets={"tasks.heartbeat_s": 2, "limits.peer_timeout_s": 30},
             client_sets={"rpc.link_timeout_s": 30})
    g.lab.link("set 2 both delay=10 loss=0.3")
    g.lab.link("set 3 both delay=10 loss=0.3")

    def sample(tag):
        jid = g.submit("sleep 1; echo %s{i}" % tag, 16)
        g.wait_done(jid, 240)
        j = g.check_exactly_once(jid, lambda i: "%s%d\n" % (tag, i))
        extra = sum(t["issues"] for t in j["tasks"]) - len(j["tasks"])
        print("re-issues at 30%% loss: %d of %d tasks; %s" % (extra, len(j["tasks"]),
                                                            g.lab.link("stats")))
        return extra, j

    extra, j = sample("l")
    if extra > 4:
        # Random loss now and then stalls a TCP connection (retransmission back-off)
        # for longer than a task's re-issue time, and one stall re-issues all that its
        # client holds at once: a second sample of 16 tasks on the same links must then
        # stay within the bound (a client that needlessly loses its tasks fails both).
        extra, j = sample("m")
    assert extra <= 4, j["tasks"]


def test_flapping_link(netlab):
    """A client whose link goes down and up every second or two, with some loss and
    reordering: every task ends exactly once, the client never restarts, and once the
    link is steady it is served as usual."""
    g = Grid(netlab, 2)
    g.lab.link("set 3 both delay=30 jitter=20 reorder=0.05 dup=0.02 loss=0.05")
    g.lab.link("flap 3 1500 1000")
    jid = g.submit("sleep 0.3; echo f{i}", 40)
    time.sleep(12)
    g.lab.link("up 3")
    g.wait_done(jid, 120)
    g.check_exactly_once(jid, lambda i: "f%d\n" % i)
    jid2 = g.submit("echo g{i}", 6)
    g.wait_done(jid2, 30)
    g.check_exactly_once(jid2, lambda i: "g%d\n" % i)
    for c in g.clients:
        assert c.alive(), c.log()[-2000:]
