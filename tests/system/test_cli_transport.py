"""System tests of how the user tools reach a role: over tcp:// they speak ZMTP
themselves (cmd/zmtp.c) and never load libzmq (the start-up cost that made a tool
call take 5-20 ms); other endpoints (ipc://) go through libzmq, loaded on first use
(daemon/zmqdl.c). Either way the tools behave the same, and an unreachable endpoint
gives the same clear error within --timeout.

The suite runs with CURVE on (conftest.py); the tools' own ZMTP client speaks CURVE
too (tests/system/test_curve_tool.py), and plain where configured on loopback
(GRIDNODE_PLAIN=1, the cluster too), as these tests do."""

import json
import os
import subprocess
import time

from conftest import scaled


def run_cli(gridnode_bin, *args, env=None, timeout=60):
    e = dict(os.environ)
    e.update(env or {})
    return subprocess.run([gridnode_bin] + [str(a) for a in args], capture_output=True,
                          text=True, timeout=scaled(timeout), stdin=subprocess.DEVNULL, env=e)


PLAIN = {"GRIDNODE_PLAIN": "1"}


def loaded_libs(gridnode_bin, *args, env=None):
    """The shared objects the dynamic loader loaded while the tool ran (LD_DEBUG)."""
    p = run_cli(gridnode_bin, *args, env=dict(env or {}, LD_DEBUG="libs"))
    assert p.returncode == 0, p.stderr[-2000:]
    return p, [l for l in p.stderr.splitlines() if "calling init:" in l]


def test_tools_over_tcp_do_not_load_libzmq(cluster_factory, gridnode_bin):
    cluster = cluster_factory(env=PLAIN)
    p, libs = loaded_libs(gridnode_bin, "submit", "-e", cluster.endpoint, "--json", "--", "true",
                          env=PLAIN)
    assert libs and not [l for l in libs if "libzmq" in l], libs
    job = json.loads(p.stdout)["job"]
    p, libs = loaded_libs(gridnode_bin, "jobs", "-e", cluster.endpoint, "--json", env=PLAIN)
    assert not [l for l in libs if "libzmq" in l], libs
    assert [j["job"] for j in json.loads(p.stdout)] == [job]
    # the role itself did load it (lazily) and serves
    maps = open("/proc/%d/maps" % cluster.pid).read()
    assert "libzmq" in maps


def test_tools_over_ipc_use_libzmq(cluster_factory, gridnode_bin, workdir):
    cl = cluster_factory(start=False)
    ep = cl.start(listen="ipc://%s/cluster.sock" % workdir)
    assert ep.startswith("ipc://")
    p, libs = loaded_libs(gridnode_bin, "submit", "-e", ep, "--json", "-n", "3", "--", "true")
    assert [l for l in libs if "libzmq" in l], libs
    job = json.loads(p.stdout)["job"]
    p = run_cli(gridnode_bin, "job", "-e", ep, job)
    assert p.returncode == 0 and ("job %d:" % job) in p.stdout, p.stderr
    p = run_cli(gridnode_bin, "jobs", "-e", ep)
    assert p.returncode == 0 and "queued" in p.stdout, p.stderr


def test_unreachable_tcp_endpoint_is_a_clear_error_within_timeout(gridnode_bin, workdir):
    import socket
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there now
    t0 = time.monotonic()
    p = run_cli(gridnode_bin, "jobs", "-e", "tcp://127.0.0.1:%d" % port, "--timeout", 400,
                env=PLAIN)
    took = time.monotonic() - t0
    assert p.returncode == 1
    assert "cannot reach tcp://127.0.0.1:%d" % port in p.stderr
    assert "Connection refused" in p.stderr and "is the role running" in p.stderr
    assert 0.3 <= took < scaled(30)
    # with CURVE (libzmq, which retries the connection for ever): the same message, at
    # the timeout or the connect window, whichever comes first
    t0 = time.monotonic()
    p = run_cli(gridnode_bin, "jobs", "-e", "tcp://127.0.0.1:%d" % port, "--timeout", 400)
    took = time.monotonic() - t0
    assert p.returncode == 1
    assert "cannot reach tcp://127.0.0.1:%d" % port in p.stderr, p.stderr
    assert "Connection refused" in p.stderr and "is the role running" in p.stderr
    assert 0.3 <= took < scaled(30)
    t0 = time.monotonic()
    p = run_cli(gridnode_bin, "jobs", "-e", "tcp://127.0.0.1:%d" % port, "--timeout", 60000)
    assert p.returncode == 1 and "Connection refused" in p.stderr, p.stderr
    assert time.monotonic() - t0 < scaled(20)


def test_refused_connection_fails_fast_whatever_the_reply_timeout(gridnode_bin):
    """Issue #15: a role that is not running is reported after the connect window
    (--connect-timeout, default 1 s), not after the 10 s reply timeout; an
    unresolvable host at once; each with its real cause."""
    import socket
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    t0 = time.monotonic()
    p = run_cli(gridnode_bin, "jobs", "-e", "tcp://127.0.0.1:%d" % port, "--timeout", 60000)
    assert p.returncode == 1 and "Connection refused" in p.stderr, p.stderr
    assert time.monotonic() - t0 < scaled(20)
    p = run_cli(gridnode_bin, "jobs", "-e", "tcp://no-such-host.invalid:7300", "--timeout", 60000)
    assert p.returncode == 1 and "cannot resolve no-such-host.invalid" in p.stderr, p.stderr
    assert "host name" in p.stderr
    p = run_cli(gridnode_bin, "jobs", "-e", "ipc:///nonexistent-dir/x.sock", "--timeout", 60000)
    assert p.returncode == 1 and "No such file or directory" in p.stderr, p.stderr
    p = run_cli(gridnode_bin, "jobs", "--connect-timeout", "soon")
    assert p.returncode != 0 and "--connect-timeout wants milliseconds" in p.stderr


def test_cluster_started_late_is_reached_within_timeout(cluster_factory, gridnode_bin):
    """Like libzmq's reconnection: a tool started before its cluster manager still
    gets its answer once the manager listens, within --timeout."""
    cl = cluster_factory()
    ep = cl.endpoint
    cl.kill()
    proc = subprocess.Popen([gridnode_bin, "jobs", "-e", ep, "--timeout", str(int(scaled(20000))),
                             "--connect-timeout", str(int(scaled(20000)))],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            stdin=subprocess.DEVNULL)
    try:
        time.sleep(0.5)
        cl.restart()  # same port
        out, err = proc.communicate(timeout=scaled(30))
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err
    assert "JOB" in out
