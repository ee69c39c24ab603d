"""Issue 16 fixes that need no emulated network: every request path records node activity
the same way (PSYNC first after inactivity), and ROUTER sockets drop peers that stopped
answering heartbeats (descriptors return to their baseline)."""

import json
import os
import signal
import subprocess

from conftest import SUITE_KEYS, scaled, wait_until

FAST = {"store.sync": "none", "tasks.heartbeat_s": 1, "tasks.idle_wait_s": 1,
        "tasks.k_wait": 2, "tasks.k_wait_dead": 3}


def nodes(gridnode_bin, cl):
    r = subprocess.run([gridnode_bin, "nodes", "-e", cl.endpoint, "--json"], capture_output=True,
                       text=True, timeout=scaled(20), stdin=subprocess.DEVNULL)
    assert r.returncode == 0, r.stderr
    return {n["node"]: n for n in json.loads(r.stdout)}


def test_psync_first_after_inactivity_updates_activity(cluster_factory, gridnode_bin):
    cl = cluster_factory(FAST)
    rpc = cl.connect()
    sid = rpc.ok("HELLO", "WELCOME", client="t", node="quiet", cores=1, procs=True)["sid"]
    wait_until(lambda: not nodes(gridnode_bin, cl)["quiet"]["active"], scaled(20),
               interval=0.3, msg="the silent node to become inactive")
    r = rpc.call("PSYNC", sid=sid, procs=[], wait_ms=0)
    assert r["t"] == 19, r  # PSYNC_ACK
    n = nodes(gridnode_bin, cl)["quiet"]
    assert n["active"], n
    wait_until(lambda: "node quiet (%s) active again" % sid in cl.log(), scaled(10),
               msg="the 'active again' log line after a PSYNC")


def test_router_drops_frozen_peers_and_frees_descriptors(cluster_factory, gridnode_bin):
    """A peer that stops answering (SIGSTOP: no FIN, like a partition) is disconnected
    after limits.peer_timeout_s and its descriptor released."""
    cl = cluster_factory(dict(FAST, **{"limits.peer_timeout_s": 2}))
    fds = lambda: len(os.listdir("/proc/%d/fd" % cl.pid))
    cl.rpc("NODE_LIST")
    base = fds()
    # the peer holds 5 connections with the suite's CURVE key (conftest.SUITE_KEYS)
    code = ("import zmq,time,sys\nc=zmq.Context()\nk=[]\nfor i in range(5):\n"
            " s=c.socket(zmq.DEALER)\n"
            " if sys.argv[2]: s.curve_secretkey=sys.argv[3].encode();"
            " s.curve_publickey=sys.argv[2].encode(); s.curve_serverkey=sys.argv[2].encode()\n"
            " s.connect(sys.argv[1]); s.send(b'x'); k.append(s)\n"
            "print('up',flush=True)\ntime.sleep(600)\n")
    plain = bool(os.environ.get("GRIDNODE_PLAIN"))
    p = subprocess.Popen(["/usr/bin/python3", "-c", code, cl.endpoint,
                          "" if plain else SUITE_KEYS["public"],
                          "" if plain else SUITE_KEYS["secret"]],
                         stdout=subprocess.PIPE, stdin=subprocess.DEVNULL)
    try:
        assert p.stdout.readline().strip() == b"up"
        wait_until(lambda: fds() >= base + 5, scaled(10), msg="5 connections accepted")
        p.send_signal(signal.SIGSTOP)
        wait_until(lambda: fds() <= base, scaled(30), interval=0.3,
                   msg="the frozen peer's 5 connections to be dropped (%d before)" % base)
    finally:
        p.kill()
        p.wait(10)
