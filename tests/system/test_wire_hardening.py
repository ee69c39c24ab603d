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


def run_tool(gridnode_bin, *args):
    import subprocess
    return subprocess.run([gridnode_bin] + [str(a) for a in args], capture_output=True,
                          timeout=scaled(30), stdin=subprocess.DEVNULL)


def utf8_prefix(s, nbytes):
    """The longest prefix of s whose UTF-8 encoding has at most nbytes bytes."""
    out = ""
    for ch in s:
        if len((out + ch).encode()) > nbytes:
            break
        out += ch
    return out


def test_long_multibyte_name_stays_valid_and_escaped(cluster, gridnode_bin):
    """Issue #8 item 5: a node name of multi-byte and control characters, longer than
    the 63 bytes the cluster keeps, is cut on a character boundary (NODE_LIST decodes
    with a strict decoder) and shown escaped on one line by `gridnode nodes`."""
    rpc = cluster.connect()
    name = "x\n\t\x1b[7m\x7f\u0085" + "\u20ac" * 20 + "\U0001F600" * 40
    assert 200 < len(name.encode()) <= 256, len(name.encode())
    sid = rpc.ok("HELLO", expect="WELCOME", client="c\n1", node=name, cores=1,
                 cluster="\u00e9" * 100, os="o\u20ac" * 60, arch="\U0001F600" * 30)["sid"]
    m, data = rpc.message("NODE_LIST", {})
    rpc.sock.send(data)
    raw = rpc.recv_raw()[-1]
    reply = msgpack.unpackb(raw, raw=False)  # strict: fails on invalid UTF-8
    node = next(n for n in reply["nodes"] if n["sid"] == sid)
    assert node["node"] == utf8_prefix(name, 63), node["node"]
    assert node["cluster"] == "\u00e9" * 31
    for key in ("client", "os", "arch"):
        assert isinstance(node.get(key, ""), str)
    # the table: one row for the node, escaped, nothing from the name breaks the line
    p = run_tool(gridnode_bin, "nodes", "-e", cluster.endpoint)
    assert p.returncode == 0, p.stderr
    out = p.stdout.decode("utf-8")  # strict as well
    lines = out.splitlines()
    assert len(lines) == 2, out
    assert lines[1].startswith("x\\n\\t\\x1b[7m"), lines[1]
    assert "\x1b" not in out and "\x7f" not in out and "\u0085" not in out
    # --json stays exact (escaped by JSON, not by us)
    import json
    p = run_tool(gridnode_bin, "nodes", "-e", cluster.endpoint, "--json")
    assert p.returncode == 0, p.stderr
    nodes = json.loads(p.stdout.decode("utf-8"))
    assert any(n["node"] == utf8_prefix(name, 63) for n in nodes), nodes
    # the cluster's log has the name escaped on one line (if it logs it at all)
    log = cluster.log()
    assert "\x1b[7m" not in log
    assert "node x\\n\\t\\x1b[7m" in log, log[-2000:]


def test_error_quoting_peer_bytes_is_valid_utf8(cluster):
    """An error text quoting a peer-supplied session id (cut and with invalid bytes)
    is still valid UTF-8."""
    rpc = cluster.connect()
    m, _ = rpc.message("TASK_GET", {})
    sid = "\u20ac" * 21  # 63 bytes: the cap is 64, the error quotes it cut
    data = pack(dict(v=1, t=TYPES["TASK_GET"], id=5, sid=sid, want=1))
    rpc.send_frames([data])
    r = msgpack.unpackb(rpc.recv_raw()[-1], raw=False)
    assert r["code"] == ERRORS["SESSION"], r
    # an unknown key that is not valid UTF-8 named in a cost-bound error
    key = b"\xa4k\xff\xe2\x82"  # fixstr of 4 invalid bytes as a key
    body = b"".join(pack(k) + pack(v) for k, v in dict(v=1, t=TYPES["JOB_LIST"], id=6).items())
    frame = b"\x84" + body + key + b"\xdd" + (70000).to_bytes(4, "big") + b"\xc0" * 70000
    rpc.send_frames([frame])
    r = msgpack.unpackb(rpc.recv_raw()[-1], raw=False)
    assert r["code"] == ERRORS["FIELD"] and "unknown field 'k?" in r["msg"], r
