"""System tests of the wire decoder's hardening (issue #8, items 4 and 5) against a
real `gridnode cluster`: frames that would cost far more to decode than their type
can need are refused cheaply, and text cut to a byte limit stays valid UTF-8 and is
shown escaped in the tools' tables.

Every wait is bounded; deadlines are scaled by conftest.SCALE (x3 under ASan).
"""

import msgpack

from conftest import ERRORS, TYPES, scaled


def pack(obj):
    return msgpack.packb(obj, use_bin_type=True)


def vm_hwm_kb(pid):
    """Peak resident set size of a process (VmHWM, KiB)."""
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    raise AssertionError("no VmHWM for pid %d" % pid)


def frame_with_nils(fields, key, n):
    """A request map with `fields` plus `key` holding an array32 of n nils, built by
    hand so the 60 MiB frame costs the test no more than its bytes."""
    assert len(fields) < 15
    body = b"".join(pack(k) + pack(v) for k, v in fields.items())
    return (bytes([0x80 | (len(fields) + 1)]) + body + pack(key) + b"\xdd" +
            n.to_bytes(4, "big") + b"\xc0" * n)


def test_huge_unknown_value_refused_cheaply(cluster):
    """Issue #8 item 4: 60 MiB of nils under an unknown key used to cost ~1.6 GB and
    seconds of stall; it is now refused from the headers alone."""
    rpc = cluster.connect(timeout=scaled(60))
    rpc.ok("JOB_LIST", expect="JOBS")  # connected, steady state
    before = vm_hwm_kb(cluster.pid)
    n = 60 << 20
    hello = dict(v=1, t=TYPES["HELLO"], id=77, client="c 1", node="n1", cores=1)
    rpc.send_frames([frame_with_nils(hello, "junk", n)])
    r = rpc.decode(rpc.recv_raw()[0])
    assert r["t"] == TYPES["ERROR"] and r["code"] == ERRORS["FIELD"], r
    assert r["id"] == 77 and "junk" in r["msg"], r
    # a known array field declaring more elements than its cap
    result = dict(v=1, t=TYPES["RESULT"], id=78, sid="s", want=0)
    rpc.send_frames([frame_with_nils(result, "results", n)])
    r = rpc.decode(rpc.recv_raw()[0])
    assert r["code"] == ERRORS["FIELD"] and "results" in r["msg"] and r["id"] == 78, r
    # still serving, and the peak grew by about the frames' bytes, not 25 times them
    r = rpc.ok("JOB_LIST", expect="JOBS")
    grew_mb = (vm_hwm_kb(cluster.pid) - before) / 1024
    assert grew_mb < 400, "cluster peak RSS grew by %.0f MiB" % grew_mb
    assert cluster.alive()
