"""The link emulator itself: delay, partitions (one-way and two-way) and healing, seen
through TCP connections between two namespaces."""

import subprocess
import time

from conftest import scaled

SERVER = r"""
import socket, sys
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((sys.argv[1], 9000)); s.listen(); s.settimeout(60)
print("up", flush=True)
while True:
    c, _ = s.accept(); c.sendall(c.recv(100)); c.close()
"""

CLIENT = r"""
import socket, sys, time
t = time.monotonic()
try:
    c = socket.create_connection((sys.argv[1], 9000), timeout=float(sys.argv[2]))
    c.sendall(b"ping"); assert c.recv(10) == b"ping"; print("%.3f" % (time.monotonic() - t))
except OSError as e:
    print("fail %s" % e)
"""


def rtt(lab, timeout=3):
    r = subprocess.run(lab.exec_args(1, ["/usr/bin/python3", "-c", CLIENT, lab.addr(2),
                                         str(timeout)]),
                       capture_output=True, text=True, timeout=timeout + 10)
    out = r.stdout.strip()
    return None if out.startswith("fail") else float(out)


def test_delay_partition_heal(netlab, procs, workdir):
    lab = netlab(2)
    import conftest
    srv = conftest.sysconf.Proc(procs, lab.exec_args(2, ["/usr/bin/python3", "-c", SERVER,
                                                         lab.addr(2)]), workdir / "srv.log")
    assert srv.readline_timeout(scaled(10)) == "up"
    base = rtt(lab)
    assert base is not None and base < 1.0
    lab.link("set 2 in delay=150")  # one way only: 2 round trips cost >= 0.3 s
    t = rtt(lab)
    assert t is not None and t >= 0.29, t
    lab.link("set 2 in delay=0")
    lab.link("down 2 out")  # one-way: the SYN gets there, the SYN-ACK does not
    assert rtt(lab, timeout=1.5) is None
    lab.link("up 2")
    assert rtt(lab) is not None
    lab.link("down 1 both")
    assert rtt(lab, timeout=1.5) is None
    lab.link("up 1")
    assert rtt(lab) is not None
    stats = lab.link("stats")
    assert "cut=" in stats and "cut=0 " not in stats, stats
