"""System tests of forgetting idle sessions (nodes.forget_after_s), the cap on sessions
per peer address (nodes.max_sessions_per_address), and purging finished jobs
(`gridnode purge`, jobs.retention_s)."""

import os
import signal
import subprocess
import time

import pytest

from conftest import ERRORS, TYPES, scaled, wait_until

# sessions go inactive after 1.5 s of silence (max(heartbeat, idle wait) x k_wait_dead)
FAST = {"store.sync": "none", "tasks.heartbeat_s": 1, "tasks.idle_wait_s": 1,
        "tasks.k_wait": 1, "tasks.k_wait_dead": 1.5, "tasks.min_wait_s": 600}
CLIENT = {"rpc.timeout_ms": 1000, "rpc.backoff_min_s": 0.2, "rpc.backoff_max_s": 1,
          "client.slots": 1}


def run_cli(gridnode_bin, *args, timeout=60):
    return subprocess.run([gridnode_bin] + [str(a) for a in args], capture_output=True,
                          text=True, timeout=scaled(timeout), stdin=subprocess.DEVNULL,
                          env=dict(os.environ))


def hello(rpc, name, sid=None):
    f = {"client": "test 1", "node": name, "cores": 1}
    if sid:
        f["sid"] = sid
    return rpc.call("HELLO", **f)


def node_sids(cl):
    return {n["sid"]: n for n in cl.client().ok("NODE_LIST", "NODES", count=100000)["nodes"]}


def test_hellos_from_one_address_are_capped(cluster_factory, gridnode_bin):
    cl = cluster_factory(dict(FAST, **{"nodes.max_sessions_per_address": 20,
                                       "nodes.forget_after_s": 0}))
    u = cl.connect(timeout=scaled(30))
    first = []
    for i in range(20):
        r = hello(u, "h%d" % i)
        assert r["t"] == TYPES["WELCOME"], r
        first.append(r["sid"])
    # at the cap and every session active: refused, with a message saying what to do
    r = hello(u, "over")
    assert r["t"] == TYPES["ERROR"] and r["code"] == ERRORS["REFUSED"], r
    assert "127.0.0.1" in r["msg"] and "max_sessions_per_address" in r["msg"], r
    # resuming a session is not a new one; the user tools do not need sessions
    r = hello(u, "h0", sid=first[0])
    assert r["t"] == TYPES["WELCOME"] and r["resumed"] is True, r
    p = run_cli(gridnode_bin, "submit", "-e", cl.endpoint, "--", "/bin/true")
    assert p.returncode == 0, p.stderr
    p = run_cli(gridnode_bin, "nodes", "-e", cl.endpoint)
    assert p.returncode == 0 and "h19" in p.stdout, p.stderr
    assert len(node_sids(cl)) == 20
    # once they are inactive, each new session replaces the oldest idle one
    wait_until(lambda: not any(n["active"] for n in node_sids(cl).values()), scaled(30),
               msg="sessions inactive")
    second = []
    for i in range(20):
        r = hello(u, "k%d" % i)
        assert r["t"] == TYPES["WELCOME"], r
        second.append(r["sid"])
    sids = node_sids(cl)
    assert set(sids) == set(second), sorted(n["node"] for n in sids.values())
    r = hello(u, "over2")
    assert r["t"] == TYPES["ERROR"] and r["code"] == ERRORS["REFUSED"], r
    # the replaced sessions are gone: their requests say SESSION
    u.err("TASK_GET", "SESSION", sid=first[5], want=1)
    # and they stay gone after kill -9 and restart
    cl.restart(signal.SIGKILL)
    assert set(node_sids(cl)) == set(second)
    u2 = cl.connect(timeout=scaled(30))
    u2.err("TASK_GET", "SESSION", sid=first[0], want=1)
    assert hello(u2, "over3")["code"] == ERRORS["REFUSED"]  # the cap counts loaded sessions


def test_default_cap_keeps_many_local_clients_working(cluster_factory, client_factory):
    cl = cluster_factory(FAST)  # default cap
    clients = client_factory(cl, n=12, sets=CLIENT)
    wait_until(lambda: len([n for n in node_sids(cl).values() if n["active"]]) == 12,
               scaled(60), msg="12 clients joined")
    jid = cl.client().ok("SUBMIT", "SUBMITTED", argv=["/bin/true"], ntasks=24)["job"]
    wait_until(lambda: cl.client().ok("JOB_GET", "JOB", job=jid)["job"]["state"] == "done",
               scaled(60), msg="job done")
    assert all(c.alive() for c in clients)


def test_idle_sessions_are_forgotten_and_a_live_client_says_hello_again(
        cluster_factory, client_factory):
    cl = cluster_factory(dict(FAST, **{"nodes.forget_after_s": 2}))
    u = cl.connect(timeout=scaled(30))
    idle = [hello(u, "idle%d" % i)["sid"] for i in range(30)]
    # a session holding an issued task is never forgotten, however silent
    busy = hello(u, "busy")["sid"]
    jid = u.ok("SUBMIT", "SUBMITTED", argv=["/bin/true"], ntasks=1)["job"]
    t = u.ok("TASK_GET", "TASKS", sid=busy, want=1)
    assert len(t["tasks"]) == 1
    (client,) = client_factory(cl, n=1, sets=CLIENT)
    wait_until(lambda: any(n["node"] == client.name for n in node_sids(cl).values()),
               scaled(30), msg="client joined")
    old_sid = [s for s, n in node_sids(cl).items() if n["node"] == client.name][0]
    client.send_signal(signal.SIGSTOP)  # silent: inactive, then forgotten
    try:
        wait_until(lambda: not set(idle) & set(node_sids(cl)) and
                   old_sid not in node_sids(cl), scaled(60), msg="idle sessions forgotten")
    finally:
        client.send_signal(signal.SIGCONT)
    sids = node_sids(cl)
    assert busy in sids and not sids[busy]["active"]
    u.err("TASK_GET", "SESSION", sid=idle[0], want=1)
    assert "forgotten" in cl.log()
    # the client gets SESSION, says HELLO again and carries on computing
    jid2 = cl.client().ok("SUBMIT", "SUBMITTED", argv=["/bin/true"], ntasks=3)["job"]
    wait_until(lambda: cl.client().ok("JOB_GET", "JOB", job=jid2)["job"]["state"] == "done",
               scaled(60), msg="job done by the re-joined client")
    assert any(n["node"] == client.name and s != old_sid for s, n in node_sids(cl).items())
    # forgotten records stay forgotten after kill -9; the busy one and its task survive
    cl.restart(signal.SIGKILL)
    sids = node_sids(cl)
    assert busy in sids and not set(idle) & set(sids) and old_sid not in sids
    assert cl.client().ok("JOB_GET", "JOB", job=jid)["job"]["state"] == "running"


def rss_kb(pid, field="RssAnon"):
    """Resident anonymous memory (heap): the store's mapped file pages are RssFile."""
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


@pytest.mark.slow  # plain binary only: ASan's quarantine keeps freed memory resident
def test_rss_falls_after_forgetting_100k_sessions(cluster_factory):
    cl = cluster_factory(dict(FAST, **{"nodes.forget_after_s": 1,
                                       "nodes.max_sessions_per_address": 0}))
    u = cl.connect(timeout=scaled(60))
    base = rss_kb(cl.pid)
    total, window, deadline = 100000, 500, time.monotonic() + scaled(240)
    sent = got = 0
    while got < total:
        assert time.monotonic() < deadline, "only %d HELLOs answered" % got
        while sent < total and sent - got < window:
            m, data = u.message("HELLO", {"client": "t", "node": "n%d" % sent, "cores": 1})
            u.sock.send(data)
            sent += 1
        u.recv_raw(scaled(60))
        got += 1
    peak = rss_kb(cl.pid)
    assert peak - base > 20000, (base, peak)  # 100k sessions do take memory
    wait_until(lambda: len(node_sids(cl)) == 0, scaled(120), msg="sessions forgotten")
    # the node table, its hashes and the address lists shrink; what stays is allocator and
    # LMDB page caches (about a third of the growth when measured)
    wait_until(lambda: rss_kb(cl.pid) < base + (peak - base) * 0.7, scaled(60),
               msg="RSS back down (base %d kB, peak %d kB)" % (base, peak))
