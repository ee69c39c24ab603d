"""System tests of the user tools' own CurveZMQ client (cmd/zmtp_curve.c, issue 28): over
tcp:// a tool speaks CURVE itself, without loading libzmq, against a real role with an
authorized-keys file; a refused key and a wrong server key give the words the libzmq
path gives (it is still used for a source address, "tcp://SRC;DST", and ipc://); and
a request costs the TCP connect and three round trips, counted by a TCP proxy that
forwards the bytes and counts the client's flights (each one waits for the server)."""

import json
import os
import select
import socket
import subprocess
import threading

import pytest

from conftest import SUITE_KEYS, scaled, write_keypair


def run_tool(gridnode_bin, *args, env=None, timeout=30):
    e = dict(os.environ)
    e.update(env or {})
    return subprocess.run([gridnode_bin] + [str(a) for a in args], capture_output=True,
                          text=True, timeout=scaled(timeout), stdin=subprocess.DEVNULL, env=e)


def libzmq_loaded(stderr):
    """Whether the dynamic loader loaded libzmq while the tool ran (LD_DEBUG=libs)."""
    return any("calling init:" in l and "libzmq" in l for l in stderr.splitlines())


def said(stderr):
    """The tool's own lines (not the loader's LD_DEBUG lines)."""
    return "\n".join(l for l in stderr.splitlines() if l.startswith("gridnode"))


def via_libzmq(endpoint):
    """The same role through libzmq: a source address is left to it."""
    return "tcp://127.0.0.1:0;" + endpoint[len("tcp://"):]


@pytest.fixture
def keyed(workdir, cluster_factory):
    """A cluster admitting the suite key (admin) and alice; evil's key is not admitted."""
    d = workdir / "keys"
    d.mkdir()
    alice, _ = write_keypair(d, "alice")
    write_keypair(d, "evil")
    auth = d / "authorized_keys"
    auth.write_text("%s grid admin\n%s alice user groups=users\n" % (SUITE_KEYS["public"],
                                                                      alice))
    cl = cluster_factory({"security.authorized_keys": auth})
    return cl, {"GRIDNODE_KEY": str(d / "alice.key")}, {"GRIDNODE_KEY": str(d / "evil.key")}


def test_curve_call_without_libzmq(keyed, gridnode_bin):
    cl, alice, _ = keyed
    p = run_tool(gridnode_bin, "submit", "-e", cl.endpoint, "--json", "--", "true",
                 env=dict(alice, LD_DEBUG="libs"))
    assert p.returncode == 0, p.stderr[-2000:]
    assert not libzmq_loaded(p.stderr)
    job = json.loads(p.stdout)["job"]
    p = run_tool(gridnode_bin, "jobs", "-e", cl.endpoint, "--json", env=dict(alice, LD_DEBUG="libs"))
    assert p.returncode == 0 and not libzmq_loaded(p.stderr), p.stderr[-2000:]
    # the role knows the caller by its key: the job is alice's
    assert [(j["job"], j["user"]) for j in json.loads(p.stdout)] == [(job, "alice")]
    # the check can fail: the libzmq path does load it, and sees the same job
    p = run_tool(gridnode_bin, "jobs", "-e", via_libzmq(cl.endpoint), "--json",
                 env=dict(alice, LD_DEBUG="libs"))
    assert p.returncode == 0 and libzmq_loaded(p.stderr), p.stderr[-2000:]
    assert [j["job"] for j in json.loads(p.stdout)] == [job]


def test_refusals_say_what_the_libzmq_path_says(keyed, gridnode_bin, workdir):
    cl, alice, evil = keyed
    other, _ = write_keypair(workdir, "impostor")
    cases = [(evil, "refused our key"),
             (dict(alice, GRIDNODE_SERVER_KEY="z85:" + other), "server's public key is not")]
    for env, words in cases:
        texts = []
        for ep in (cl.endpoint, via_libzmq(cl.endpoint)):
            p = run_tool(gridnode_bin, "jobs", "-e", ep, "--timeout", int(scaled(10000)),
                         env=env)
            assert p.returncode == 1 and words in p.stderr, p.stderr
            texts.append(said(p.stderr).replace(ep, "EP"))
        assert texts[0] == texts[1]
    assert cl.alive()


class FlightProxy:
    """Forwards one TCP connection at a time to target and counts, per connection, the
    client's flights: bytes from the client after bytes from the server."""

    def __init__(self, target_port):
        self.target = ("127.0.0.1", target_port)
        self.lsock = socket.socket()
        self.lsock.bind(("127.0.0.1", 0))
        self.lsock.listen(8)
        self.port = self.lsock.getsockname()[1]
        self.flights = []
        self.stop = False
        self.th = threading.Thread(target=self.run, daemon=True)
        self.th.start()

    def run(self):
        while not self.stop:
            r, _, _ = select.select([self.lsock], [], [], 0.1)
            if r:
                c, _ = self.lsock.accept()
                self.pump(c, socket.create_connection(self.target))

    def pump(self, c, s):
        flights, last = 0, None
        try:
            while not self.stop:
                r, _, _ = select.select([c, s], [], [], 0.1)
                for src in r:
                    data = src.recv(65536)
                    if not data:
                        return
                    if src is c and last is not c:
                        flights += 1
                    last = src
                    (s if src is c else c).sendall(data)
        except OSError:
            pass
        finally:
            self.flights.append(flights)
            c.close()
            s.close()

    def close(self):
        self.stop = True
        self.th.join(scaled(5))
        self.lsock.close()


def test_a_curve_request_costs_three_round_trips_after_connect(keyed, gridnode_bin):
    cl, alice, _ = keyed
    proxy = FlightProxy(int(cl.endpoint.rsplit(":", 1)[1]))
    try:
        ep = "tcp://127.0.0.1:%d" % proxy.port
        p = run_tool(gridnode_bin, "jobs", "-e", ep, env=alice)
        assert p.returncode == 0, p.stderr
        p = run_tool(gridnode_bin, "jobs", "-e", via_libzmq(ep), env=alice)
        assert p.returncode == 0, p.stderr
    finally:
        proxy.close()
    # greeting + HELLO, INITIATE, the request; libzmq needs more (its greeting is sent
    # in steps, and its request waits for READY too)
    own, libzmq = proxy.flights
    print("client flights per request: own CURVE client %d, libzmq %d" % (own, libzmq))
    assert own == 3, proxy.flights
    assert libzmq > own, proxy.flights


def test_kept_connection_waits_over_curve(keyed, client_factory, gridnode_bin):
    cl, alice, _ = keyed
    client_factory(cl)
    p = run_tool(gridnode_bin, "submit", "-e", cl.endpoint, "--wait", "--", "true",
                 env=dict(alice, LD_DEBUG="libs"), timeout=60)
    assert p.returncode == 0, said(p.stderr)
    assert not libzmq_loaded(p.stderr)
