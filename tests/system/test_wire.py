"""System tests of the cluster's wire protocol (docs/wire.md) against a real
`gridnode cluster` process; no `gridnode client` is needed.

Every wait is a bounded polling loop; timing settings of the cluster and the
deadlines are scaled by conftest.SCALE (x3 under GRIDNODE_ASAN=1).
"""

import json
import os
import random
import re
import signal
import subprocess
import sys
import time

import msgpack
import pytest
import zmq

from conftest import (ERRORS, REPO, SCALE, TYPES, Cluster, ProcRegistry, Rpc, curve_client,
                      scaled, wait_until)
from pynode import PyNode

ERR = TYPES["ERROR"]
REPLY_TYPES = {TYPES[n] for n in ("ERROR", "OK", "WELCOME", "TASKS", "STATUS_ACK",
                                  "SUBMITTED", "JOBS", "JOB", "NODES", "PSYNC_ACK",
                                  "CONSOLE_OUT", "SD_STATE", "PURGED", "EVENT_LIST", "ACCTS",
                                  "FILE_STATE", "FILE_DATA", "WORK_WAKE", "JOB_ENDED")}


def pack(obj):
    return msgpack.packb(obj, use_bin_type=True)


def hello(rpc, name, **kw):
    fields = dict(client="test 1", node=name, cores=1)
    fields.update(kw)
    return rpc.ok("HELLO", expect="WELCOME", **fields)["sid"]


def submit(rpc, ntasks=1, argv=("/bin/echo", "{i}"), **kw):
    return rpc.ok("SUBMIT", expect="SUBMITTED", argv=list(argv), ntasks=ntasks, **kw)["job"]


def job_get(rpc, job, **kw):
    return rpc.ok("JOB_GET", expect="JOB", job=job, **kw)


def result_of(task, **kw):
    r = {"job": task["job"], "idx": task["idx"], "issue": task["issue"], "exit": 0}
    r.update(kw)
    return r


def node_map(rpc, sid):
    nodes = rpc.ok("NODE_LIST", expect="NODES")["nodes"]
    return next(n for n in nodes if n["sid"] == sid)


def poll_task(rpc, sid, timeout, want=1):
    """TASK_GET every 0.1 s until tasks come; returns them (bounded)."""
    return wait_until(lambda: rpc.ok("TASK_GET", sid=sid, want=want)["tasks"], timeout,
                      interval=0.1, msg="a task to be (re-)issued")


@pytest.fixture(scope="module")
def shared_cluster(gridnode_bin, tmp_path_factory):
    """One cluster for the many small validation cases (started once)."""
    reg = ProcRegistry()
    c = Cluster(reg, gridnode_bin, tmp_path_factory.mktemp("wire") / "cluster",
                sets={"store.sync": "none"})
    try:
        c.start()
        yield c
    finally:
        reports = reg.teardown()
    if reports:
        pytest.fail("sanitizer report in " + ", ".join(reports), pytrace=False)


def assert_serves(cluster):
    """The cluster still answers a normal request."""
    r = cluster.connect().call("JOB_LIST")
    assert r["t"] == TYPES["JOBS"] and isinstance(r["jobs"], list), r


# ---------------------------------------------------------------------------
# a node written from docs/wire.md alone


def test_pynode_completes_job(cluster):
    u = cluster.connect()
    job = submit(u, 3, argv=["/bin/echo", "task", "{i}", "of", "{n}", "job", "{job}"],
                 name="echo3", user="tester")
    node = PyNode(cluster.endpoint, name="py1", timeout=scaled(10))
    try:
        w = node.hello()
        assert len(w["sid"]) == 32 and w["resumed"] is False
        results = node.run(until_empty=True, deadline_s=scaled(30))
        assert sorted(r["idx"] for r in results) == [0, 1, 2]
        node.leave()
    finally:
        node.close()
    info = job_get(u, job, tasks=True, output=True)
    j = info["job"]
    assert (j["state"], j["ntasks"], j["done"], j["failed"], j["dups"]) == ("done", 3, 3, 0, 0)
    assert j["name"] == "echo3" and j["user"] == "tester" and j["finished"] >= j["submitted"]
    assert [t["idx"] for t in info["tasks"]] == [0, 1, 2]
    for t in info["tasks"]:
        assert t["state"] == "ok" and t["issues"] == 1 and t["exit"] == 0
        assert t["stdout"] == b"task %d of 3 job %d\n" % (t["idx"], job)
        assert t["node"] == node.sid and t["received"] > 0
    # without output=true the outputs are left out
    assert all("stdout" not in t for t in job_get(u, job, tasks=True)["tasks"])
    n = node_map(u, node.sid)
    assert n["node"] == "py1" and n["results"] == 3 and n["active"] is False  # after LEAVE


def test_pynode_stdin_shell_and_failures(cluster):
    """stdin per task, shell jobs, a failing program, an exec failure (node-side error)."""
    u = cluster.connect()
    cat = submit(u, 2, argv=["cat"], stdin=[b"zero\n", b"one\n"])
    sh = submit(u, 1, argv=["echo $0-$1; exit 3", "a", "b"], shell=True)
    node = PyNode(cluster.endpoint, name="py2", timeout=scaled(10))
    try:
        node.hello()
        node.run(until_empty=True, deadline_s=scaled(30))
    finally:
        node.close()
    t = job_get(u, cat, tasks=True, output=True)["tasks"]
    assert [x["stdout"] for x in t] == [b"zero\n", b"one\n"]
    info = job_get(u, sh, tasks=True, output=True)
    assert info["job"]["state"] == "failed" and info["job"]["failed"] == 1
    assert info["tasks"][0]["stdout"] == b"a-b\n" and info["tasks"][0]["exit"] == 3
    assert info["tasks"][0]["state"] == "failed"


def test_doc_python_example_runs(cluster):
    """The example session of docs/wire.md section 11.2 runs as printed."""
    doc = (REPO / "docs" / "wire.md").read_text()
    code = re.findall(r"```python\n(.*?)```", doc, re.S)[0]
    p = subprocess.run([sys.executable, "-c", code, cluster.endpoint], capture_output=True,
                       text=True, timeout=scaled(60))
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert lines[0] == "done"
    assert lines[1:] == ["%d ok b'task %d of 3\\n'" % (i, i) for i in range(3)]


def test_doc_hex_examples(shared_cluster):
    """The bytes of section 11.1 are what a peer sends and what the cluster answers."""
    rpc = shared_cluster.connect()
    req = bytes.fromhex("83 a1 76 01 a1 74 20 a2 69 64 01")
    assert pack({"v": 1, "t": 32, "id": 1}) == req
    rpc.send_frames([req])
    reply = Rpc.decode(rpc.recv_raw()[0])
    assert reply["t"] == TYPES["JOBS"] and reply["id"] == 1
    rpc.send_frames([bytes.fromhex("84 a1 76 01 a1 74 24 a2 69 64 02 a3 6a 6f 62 07")])
    raw = rpc.recv_raw()[0]
    assert raw == bytes.fromhex("85 a1 76 01 a1 74 01 a2 69 64 02 a4 63 6f 64 65 05 a3 6d 73"
                                " 67 a8 6e 6f 20 6a 6f 62 20 37")


# ---------------------------------------------------------------------------
# bad frames: one ERROR reply each, and the cluster keeps serving

V = {"v": 1, "t": TYPES["JOB_LIST"], "id": 5}


def _msg(t, **f):
    m = {"v": 1, "t": TYPES[t], "id": 5}
    m.update(f)
    return pack(m)


def _nest(depth):
    return b"\x91" * depth + b"\x01"


RESULT_OK = {"job": 1, "idx": 0, "issue": 1, "exit": 0}
BAD_FRAMES = [
    # name, frames, code, reply id
    ("not-msgpack-text", [b"hello world, this is not msgpack"], "MALFORMED", 0),
    ("reserved-byte-c1", [b"\xc1"], "MALFORMED", 0),
    ("random-bytes", [bytes(random.Random(7).randrange(256) for _ in range(64))],
     "MALFORMED", 0),
    ("empty-frame", [b""], "MALFORMED", 0),
    ("truncated-map", [pack(V)[:-3]], "MALFORMED", 0),
    ("truncated-header", [b"\x85\xa1v"], "MALFORMED", 0),
    ("huge-array32", [b"\xdd\xff\xff\xff\xff"], "MALFORMED", 0),
    ("huge-map32", [b"\xdf\xff\xff\xff\xff"], "MALFORMED", 0),
    ("huge-str32", [b"\xdb\xff\xff\xff\xffabc"], "MALFORMED", 0),
    ("huge-bin32", [b"\xc6\xff\xff\xff\xffabc"], "MALFORMED", 0),
    ("huge-ext32", [b"\xc9\xff\xff\xff\xff\x01abc"], "MALFORMED", 0),
    ("huge-array-inside-map", [b"\x84\xa1v\x01\xa1t\x20\xa2id\x05\xa1x\xdd\x7f\xff\xff\xff"],
     "MALFORMED", 0),
    ("nesting-100", [_nest(100)], "MALFORMED", 0),
    ("nesting-100-in-field", [b"\x84\xa1v\x01\xa1t\x20\xa2id\x05\xa1x" + _nest(100)],
     "MALFORMED", 0),
    ("trailing-byte", [pack(V) + b"\x00"], "MALFORMED", 0),
    ("two-objects", [pack(V) + pack(V)], "MALFORMED", 0),
    ("root-array", [pack([1, 2, 3])], "MALFORMED", 0),
    ("root-int", [pack(5)], "MALFORMED", 0),
    ("root-str", [pack("JOB_LIST")], "MALFORMED", 0),
    ("root-nil", [b"\xc0"], "MALFORMED", 0),
    ("int-keys-only", [pack({1: 1, 2: 2})], "VERSION", 0),
    ("non-string-key", [pack({"v": 1, "t": 32, "id": 5, 7: 1})], "FIELD", 5),
    ("bin-key", [pack({"v": 1, "t": 32, "id": 5, b"x": 1})], "FIELD", 5),
    ("version-2", [pack({"v": 2, "t": 32, "id": 5})], "VERSION", 5),
    ("version-missing", [pack({"t": 32, "id": 5})], "VERSION", 5),
    ("version-str", [pack({"v": "1", "t": 32, "id": 5})], "VERSION", 5),
    ("id-missing", [pack({"v": 1, "t": 32})], "FIELD", 0),
    ("id-negative", [pack({"v": 1, "t": 32, "id": -5})], "FIELD", 0),
    ("id-str", [pack({"v": 1, "t": 32, "id": "5"})], "FIELD", 0),
    ("id-nil", [pack({"v": 1, "t": 32, "id": None})], "FIELD", 0),
    ("type-missing", [pack({"v": 1, "id": 5})], "TYPE", 5),
    ("type-unknown", [pack({"v": 1, "t": 99, "id": 5})], "TYPE", 5),
    ("type-huge", [pack({"v": 1, "t": 1 << 40, "id": 5})], "TYPE", 5),
    ("type-float", [pack({"v": 1, "t": 32.0, "id": 5})], "TYPE", 5),
    ("reply-ERROR", [_msg("ERROR", code=1, msg="x")], "TYPE", 5),
    ("reply-OK", [_msg("OK")], "TYPE", 5),
    ("reply-WELCOME", [_msg("WELCOME", sid="x", hb_s=1, resumed=False)], "TYPE", 5),
    ("reply-TASKS", [_msg("TASKS", tasks=[], more=False, wait_s=1)], "TYPE", 5),
    ("reply-JOBS", [_msg("JOBS", jobs=[])], "TYPE", 5),
    ("wrong-type-job-str", [_msg("JOB_GET", job="1")], "FIELD", 5),
    ("wrong-type-ntasks-neg", [_msg("SUBMIT", argv=["x"], ntasks=-1)], "FIELD", 5),
    ("wrong-type-argv-str", [_msg("SUBMIT", argv="/bin/true", ntasks=1)], "FIELD", 5),
    ("wrong-type-argv-elem", [_msg("SUBMIT", argv=["/bin/echo", 3], ntasks=1)], "FIELD", 5),
    ("wrong-type-stdin-str", [_msg("SUBMIT", argv=["x"], ntasks=1, stdin=["in"])],
     "FIELD", 5),
    ("wrong-type-cores-float", [_msg("HELLO", client="c", node="n", cores=1.5)], "FIELD", 5),
    ("wrong-type-sid-bin", [_msg("TASK_GET", sid=b"abc", want=1)], "FIELD", 5),
    ("wrong-type-bool-int", [_msg("JOB_GET", job=1, tasks=1)], "FIELD", 5),
    ("wrong-type-complexity-str", [_msg("SUBMIT", argv=["x"], ntasks=1, complexity="1")],
     "FIELD", 5),
    ("wrong-type-ext", [_msg("JOB_GET", job=msgpack.ExtType(1, b"\x01"))], "FIELD", 5),
    ("required-missing", [_msg("SUBMIT", argv=["x"])], "FIELD", 5),
    ("required-nil", [_msg("SUBMIT", argv=["x"], ntasks=None)], "FIELD", 5),
    ("hello-cores-missing", [_msg("HELLO", client="c", node="n")], "FIELD", 5),
    ("too-long-node", [_msg("HELLO", client="c", node="x" * 257, cores=1)], "FIELD", 5),
    ("too-long-sid", [_msg("TASK_GET", sid="s" * 65, want=1)], "FIELD", 5),
    ("too-long-error", [_msg("RESULT", sid="s", want=0,
                             results=[dict(RESULT_OK, error="e" * 1025)])], "FIELD", 5),
    ("too-long-argv-elem", [_msg("SUBMIT", argv=["a" * 65537], ntasks=1)], "FIELD", 5),
    ("uint-over-cap-want", [_msg("TASK_GET", sid="s", want=1025)], "FIELD", 5),
    ("uint-over-cap-ntasks", [_msg("SUBMIT", argv=["x"], ntasks=10000001)], "FIELD", 5),
    ("uint-over-cap-signal", [_msg("RESULT", sid="s", want=0,
                                   results=[dict(RESULT_OK, signal=256)])], "FIELD", 5),
    ("too-large-argv", [_msg("SUBMIT", argv=["x"] * 257, ntasks=1)], "FIELD", 5),
    ("too-large-results", [_msg("RESULT", sid="s", want=0, results=[RESULT_OK] * 1025)],
     "FIELD", 5),
    ("too-large-running", [_msg("STATUS", sid="s", running=[
        {"job": 1, "idx": 0, "issue": 1}] * 1025)], "FIELD", 5),
    ("result-not-map", [_msg("RESULT", sid="s", want=0, results=[1])], "FIELD", 5),
    ("result-missing-exit", [_msg("RESULT", sid="s", want=0,
                                  results=[{"job": 1, "idx": 0, "issue": 1}])], "FIELD", 5),
    ("result-stdout-str", [_msg("RESULT", sid="s", want=0,
                                results=[dict(RESULT_OK, stdout="text")])], "FIELD", 5),
    ("multi-frame", [pack(V), pack(V)], "MALFORMED", 0),
    ("multi-frame-three", [b"a", b"b", b"c"], "MALFORMED", 0),
]


@pytest.mark.parametrize("name,frames,code,rid", BAD_FRAMES, ids=[b[0] for b in BAD_FRAMES])
def test_bad_frame_gets_error(shared_cluster, name, frames, code, rid):
    rpc = shared_cluster.connect()
    rpc.send_frames(frames)
    reply_frames = rpc.recv_raw()
    assert len(reply_frames) == 1, reply_frames
    r = Rpc.decode(reply_frames[0])
    assert r["v"] == 1 and r["t"] == ERR, r
    assert r["code"] == ERRORS[code], "%s: got code %s (%s)" % (name, r["code"], r["msg"])
    assert r["id"] == rid and isinstance(r["msg"], str) and r["msg"]
    # nothing else arrives, and the cluster still serves
    assert not rpc.sock.poll(50)
    assert_serves(shared_cluster)


def test_result_map_with_int_key_is_field_error(shared_cluster):
    rpc = shared_cluster.connect()
    rpc.err("RESULT", "FIELD", sid="s", want=0, results=[{"job": 1, "idx": 0, "issue": 1,
                                                          "exit": 0, 5: 5}])


def test_unknown_keys_ignored(shared_cluster):
    rpc = shared_cluster.connect()
    r = rpc.ok("JOB_LIST", expect="JOBS", extra={"a": [1, 2, {"b": None}]},
               more=msgpack.ExtType(3, b"xyz"))
    assert isinstance(r["jobs"], list)


def test_req_socket_peer(shared_cluster):
    rpc = shared_cluster.connect(socket_type=zmq.REQ)
    r = rpc.call("JOB_LIST")
    assert r["t"] == TYPES["JOBS"]
    rpc.send_frames([b"\xc1"])
    r = Rpc.decode(rpc.recv_raw()[0])
    assert r["t"] == ERR and r["code"] == ERRORS["MALFORMED"]
    r = rpc.call("JOB_GET", job=424242)
    assert r["t"] == ERR and r["code"] == ERRORS["NOT_FOUND"] and r["id"] == 2


def test_dealer_with_delimiter_is_treated_as_req(shared_cluster):
    rpc = shared_cluster.connect()
    rpc.send_frames([b"", pack(V)])
    frames = rpc.recv_raw()
    assert len(frames) == 2 and frames[0] == b""
    assert Rpc.decode(frames[1])["t"] == TYPES["JOBS"]
    rpc.send_frames([b"", pack(V), pack(V)])
    frames = rpc.recv_raw()
    assert frames[0] == b"" and Rpc.decode(frames[1])["code"] == ERRORS["MALFORMED"]


def test_pipelined_requests_matched_by_id(shared_cluster):
    rpc = shared_cluster.connect()
    for i in range(1, 51):
        rpc.send_frames([pack({"v": 1, "t": 32, "id": i})])
    ids = set()
    for _ in range(50):
        ids.add(Rpc.decode(rpc.recv_raw()[0])["id"])
    assert ids == set(range(1, 51))


@pytest.mark.slow
def test_oversized_frame_drops_connection(shared_cluster):
    """A frame over 64 MiB gets no reply (libzmq drops the connection); the DEALER
    reconnects and the cluster serves it again."""
    rpc = shared_cluster.connect()
    big = pack({"v": 1, "t": 32, "id": 9, "x": b"\0" * ((64 << 20) + 16)})
    rpc.send_frames([big])
    assert not rpc.sock.poll(int(scaled(2) * 1000))
    del big
    r = wait_until(lambda: _try_call(rpc, "JOB_LIST"), scaled(20), msg="reconnect")
    assert r["t"] == TYPES["JOBS"]


def _try_call(rpc, t):
    try:
        return rpc.call(t, timeout=1)
    except AssertionError:
        return None


def _fuzz_frame(rng, bases):
    kind = rng.randrange(5)
    if kind == 0:
        return bytes(rng.randrange(256) for _ in range(rng.randrange(0, 48))), None
    if kind == 1:  # structured: a valid envelope with random fields
        mid = rng.randrange(1, 1 << 32)
        m = {"v": 1, "t": rng.choice(list(TYPES.values()) + [0, 5, 99]), "id": mid}
        for _ in range(rng.randrange(4)):
            m[rng.choice(["sid", "job", "argv", "ntasks", "want", "results", "tasks",
                          "stdin", "running", "from", "count", "x"])] = _rand_value(rng, 3)
        return pack(m), mid
    data = bytearray(rng.choice(bases))
    for _ in range(rng.randrange(1, 4)):
        op = rng.randrange(4)
        pos = rng.randrange(len(data) + 1)
        if op == 0 and data:
            data[min(pos, len(data) - 1)] ^= 1 << rng.randrange(8)
        elif op == 1:
            data[pos:pos] = bytes([rng.choice([0x00, 0x7f, 0x80, 0xc0, 0xc1, 0xcc, 0xd9, 0xdc,
                                               0xdd, 0xde, 0xdf, 0xff, rng.randrange(256)])])
        elif op == 2 and data:
            del data[pos:pos + rng.randrange(1, 4)]
        else:
            data = data[:pos]
    return bytes(data), None


def _rand_value(rng, depth):
    k = rng.randrange(9 if depth > 0 else 7)
    if k == 0:
        return rng.choice([0, 1, 5, 1023, 1024, 1025, (1 << 32) - 1, 1 << 32, (1 << 64) - 1])
    if k == 1:
        return -rng.randrange(1, 1 << 40)
    if k == 2:
        return rng.choice(["", "x", "{i}", "/bin/true", "s" * 70])
    if k == 3:
        return bytes(rng.randrange(256) for _ in range(rng.randrange(8)))
    if k == 4:
        return rng.choice([True, False, None])
    if k == 5:
        return rng.choice([0.0, -1.0, 1.5, float("inf"), float("nan")])
    if k == 6:
        return msgpack.ExtType(rng.randrange(128), b"e")
    if k == 7:
        return [_rand_value(rng, depth - 1) for _ in range(rng.randrange(4))]
    return {rng.choice(["job", "idx", "issue", "exit", "error", "stdout", "a"]):
            _rand_value(rng, depth - 1) for _ in range(rng.randrange(4))}


def test_random_fuzz_frames(shared_cluster):
    seed = int(os.environ.get("GRIDNODE_SEED", random.randrange(1 << 31)))
    print("fuzz seed %d (set GRIDNODE_SEED to repeat)" % seed)
    rng = random.Random(seed)
    rpc = shared_cluster.connect()
    sid = hello(rpc, "fuzzer")
    bases = [
        pack(V),
        _msg("SUBMIT", argv=["/bin/true", "{i}"], ntasks=2, name="fz", stdin=[b"a", b"b"]),
        _msg("HELLO", client="c", node="n", cores=2, mhz=1000),
        _msg("TASK_GET", sid=sid, want=1),
        _msg("RESULT", sid=sid, want=0, results=[dict(RESULT_OK, stdout=b"x", wall_s=0.1)]),
        _msg("STATUS", sid=sid, running=[{"job": 1, "idx": 0, "issue": 1}]),
        _msg("JOB_GET", job=1, tasks=True, output=True, count=5),
        _msg("CANCEL", job=3),
        _msg("NODE_LIST"),
    ]
    n = 2000
    # requests a role holds open until something happens (long polls: EVENTS, WORK_WAIT,
    # JOB_WAIT) are answered later by design, not within the fuzzer's 10 s: not sent
    held = {TYPES["EVENTS"], TYPES["WORK_WAIT"], TYPES["JOB_WAIT"]}
    for i in range(n):
        frame, mid = _fuzz_frame(rng, bases)
        try:
            m = msgpack.unpackb(frame, strict_map_key=False)
        except Exception:
            m = None
        if isinstance(m, dict) and isinstance(m.get("t"), int) and m["t"] in held:
            continue
        rpc.send_frames([frame])
        try:
            frames = rpc.recv_raw(scaled(10))
        except AssertionError:
            raise AssertionError("seed %d frame %d (%s): no reply" % (seed, i, frame.hex()))
        assert len(frames) == 1, (seed, i)
        r = Rpc.decode(frames[0])
        assert isinstance(r, dict) and r.get("v") == 1 and r.get("t") in REPLY_TYPES, \
            (seed, i, frame.hex(), r)
        if r["t"] == ERR:
            assert 1 <= r["code"] <= 9, (seed, i, r)
        if mid is not None:
            assert r["id"] == mid, (seed, i, frame.hex(), r)
    assert_serves(shared_cluster)


# ---------------------------------------------------------------------------
# handler errors


def test_unknown_session(cluster):
    u = cluster.connect()
    bogus = "0" * 32
    u.err("TASK_GET", "SESSION", sid=bogus, want=1)
    u.err("RESULT", "SESSION", sid=bogus, want=1, results=[])
    u.err("STATUS", "SESSION", sid=bogus, running=[])
    u.err("LEAVE", "SESSION", sid=bogus)
    # HELLO with an unknown sid makes a new session with a new id
    w = u.ok("HELLO", expect="WELCOME", sid=bogus, client="c", node="n", cores=1)
    assert w["sid"] != bogus and w["resumed"] is False
    w2 = u.ok("HELLO", expect="WELCOME", sid=w["sid"], client="c", node="n2", cores=4)
    assert w2["sid"] == w["sid"] and w2["resumed"] is True
    n = node_map(u, w["sid"])
    assert n["node"] == "n2" and n["cores"] == 4 and n["slots"] == 4 and n["active"]


def test_unknown_job_and_cancel_states(cluster):
    u = cluster.connect()
    u.err("JOB_GET", "NOT_FOUND", job=77)
    u.err("CANCEL", "NOT_FOUND", job=77)
    job = submit(u, 1)
    sid = hello(u, "n")
    t = u.ok("TASK_GET", sid=sid, want=1)["tasks"][0]
    u.ok("RESULT", sid=sid, want=0, results=[result_of(t)])
    assert job_get(u, job)["job"]["state"] == "done"
    u.err("CANCEL", "STATE", job=job)
    other = submit(u, 5)
    u.ok("CANCEL", expect="OK", job=other)
    u.err("CANCEL", "STATE", job=other)
    j = job_get(u, other)["job"]
    assert j["state"] == "cancelled" and j["finished"] > 0
    # a cancelled job yields no tasks
    assert u.ok("TASK_GET", sid=sid, want=5)["tasks"] == []


@pytest.mark.parametrize("fields", [
    dict(argv=["/bin/echo"], ntasks=0),
    dict(argv=[], ntasks=1),
    dict(argv=[""], ntasks=1),
    dict(argv=["/bin/echo", "a\0b"], ntasks=1),
    dict(argv=["cat"], ntasks=2, stdin=[b"only one"]),
    dict(argv=["cat"], ntasks=1, stdin=[b"a", b"b"]),
    dict(argv=["/bin/echo"], ntasks=1, complexity=0),
    dict(argv=["/bin/echo"], ntasks=1, complexity=-1.5),
    dict(argv=["/bin/echo"], ntasks=1, complexity=float("nan")),
    dict(argv=["/bin/echo"], ntasks=1, complexity=float("inf")),
], ids=["ntasks0", "argv-empty", "argv0-empty", "argv-nul", "stdin-short", "stdin-long",
        "complexity0", "complexity-neg", "complexity-nan", "complexity-inf"])
def test_invalid_submit(shared_cluster, fields):
    u = shared_cluster.connect()
    before = len(u.ok("JOB_LIST")["jobs"])
    r = u.err("SUBMIT", "INVALID", **fields)
    assert "SUBMIT" in r["msg"]
    assert len(u.ok("JOB_LIST")["jobs"]) == before


# ---------------------------------------------------------------------------
# durability


def test_submit_survives_sigkill(cluster_factory):
    c = cluster_factory({"store.sync": "full"})
    u = c.connect()
    job = submit(u, 4, argv=["/bin/echo", "{i}"], name="durable", stdin=[b"0", b"1", b"2",
                                                                          b"3"])
    c.restart(signal.SIGKILL)
    u = c.connect()
    j = job_get(u, job)["job"]
    assert (j["name"], j["ntasks"], j["state"], j["issued"]) == ("durable", 4, "queued", 0)
    assert submit(u, 1) == job + 1  # ids are never reused


def test_acknowledged_results_survive_sigkill(cluster_factory):
    c = cluster_factory({"store.sync": "full"})
    u = c.connect()
    job = submit(u, 4, argv=["cat"], stdin=[b"in%d" % i for i in range(4)])
    sid = hello(u, "killme")
    tasks = u.ok("TASK_GET", sid=sid, want=3)["tasks"]
    assert [t["idx"] for t in tasks] == [0, 1, 2]
    assert [t["stdin"] for t in tasks] == [b"in0", b"in1", b"in2"]
    r = u.ok("RESULT", sid=sid, want=0, results=[
        result_of(tasks[0], stdout=b"out0", wall_s=0.01),
        result_of(tasks[1], exit=2, stdout=b"out1", stderr=b"err1")])
    assert r["acked"] == 2
    c.restart(signal.SIGKILL)
    u = c.connect()
    info = job_get(u, job, tasks=True, output=True)
    j = info["job"]
    assert (j["state"], j["done"], j["failed"], j["issued"]) == ("running", 2, 1, 3)
    st = [t["state"] for t in info["tasks"]]
    assert st == ["ok", "failed", "issued", "pending"]
    assert info["tasks"][0]["stdout"] == b"out0" and info["tasks"][1]["stderr"] == b"err1"
    assert info["tasks"][0]["node"] == sid
    n = node_map(u, sid)
    assert n["node"] == "killme" and n["results"] == 2
    # the node resumes its session and finishes; nothing was lost or duplicated
    w = u.ok("HELLO", expect="WELCOME", sid=sid, client="c", node="killme", cores=1)
    assert w["resumed"] is True
    r = u.ok("RESULT", sid=sid, want=5, results=[result_of(tasks[2])])
    assert [t["idx"] for t in r["tasks"]] == [3] and r["tasks"][0]["issue"] == 1
    u.ok("RESULT", sid=sid, want=0, results=[result_of(r["tasks"][0])])
    j = job_get(u, job)["job"]
    assert (j["state"], j["done"], j["failed"], j["dups"]) == ("failed", 4, 1, 0)


def test_sigkill_during_pipelined_submits(cluster_factory):
    """Every SUBMIT acknowledged before a SIGKILL at an arbitrary moment is there
    after the restart, and job ids stay dense and unique."""
    c = cluster_factory({"store.sync": "full"})
    rpc = c.connect()
    for i in range(1, 201):
        rpc.send_frames([pack({"v": 1, "t": 30, "id": i, "argv": ["/bin/true"], "ntasks": 1,
                               "name": "p%d" % i})])
    acked = {}
    deadline = time.monotonic() + scaled(10)
    while len(acked) < 40 and time.monotonic() < deadline:
        if rpc.sock.poll(100):
            r = Rpc.decode(rpc.sock.recv())
            if r["t"] == TYPES["SUBMITTED"]:
                acked[r["id"]] = r["job"]
    c.kill(signal.SIGKILL)
    assert acked, "no SUBMIT was acknowledged"
    c.restart()
    jobs = {j["job"]: j for j in c.connect().ok("JOB_LIST")["jobs"]}
    for rid, job in acked.items():
        assert jobs[job]["name"] == "p%d" % rid
    assert sorted(jobs) == list(range(1, len(jobs) + 1))


# ---------------------------------------------------------------------------
# re-issue (X4), first valid result wins, duplicates

REISSUE = {"store.sync": "none", "tasks.default_estimate_s": 0.2,
           "tasks.min_wait_s": round(1.5 * SCALE, 2), "tasks.k_wait": 2}


def _reissued(cluster):
    u = cluster.connect()
    job = submit(u, 1, argv=["/bin/echo", "x"])
    a, b = hello(u, "A"), hello(u, "B")
    ta = u.ok("TASK_GET", sid=a, want=1)["tasks"][0]
    assert ta["issue"] == 1
    # not before its wait expired
    assert u.ok("TASK_GET", sid=b, want=1)["tasks"] == []
    # A asking again does not get its own task back
    tb = poll_task(u, b, scaled(15))[0]
    assert (tb["job"], tb["idx"], tb["issue"]) == (job, 0, 2)
    return u, job, a, b, ta, tb


@pytest.mark.parametrize("order", ["reissue-first", "late-first"])
def test_reissue_first_result_wins(cluster_factory, order):
    c = cluster_factory(REISSUE)
    u, job, a, b, ta, tb = _reissued(c)
    first, second = ((b, tb, b"B"), (a, ta, b"A")) if order == "reissue-first" else \
        ((a, ta, b"A"), (b, tb, b"B"))
    u.ok("RESULT", sid=first[0], want=0, results=[result_of(first[1], stdout=first[2])])
    # the loser's heartbeat tells it to stop
    key = {"job": job, "idx": 0, "issue": second[1]["issue"]}
    assert u.ok("STATUS", sid=second[0], running=[key])["cancel"] == [key]
    r = u.ok("RESULT", sid=second[0], want=0, results=[result_of(second[1], stdout=second[2])])
    assert r["acked"] == 1
    info = job_get(u, job, tasks=True, output=True)
    j, t = info["job"], info["tasks"][0]
    assert (j["state"], j["done"], j["failed"], j["dups"]) == ("done", 1, 0, 1)
    assert t["state"] == "ok" and t["stdout"] == first[2] and t["node"] == first[0]
    assert t["issue"] == first[1]["issue"] and t["issues"] == 2
    # an exact repeat of the winning delivery is ignored
    if order == "reissue-first":
        u.ok("RESULT", sid=first[0], want=0, results=[result_of(first[1], stdout=first[2])])
        assert job_get(u, job)["job"]["dups"] == 1


def test_resent_late_winner_is_not_a_duplicate(cluster_factory):
    c = cluster_factory(REISSUE)
    u, job, a, b, ta, tb = _reissued(c)
    res = result_of(ta, stdout=b"A")
    u.ok("RESULT", sid=a, want=0, results=[res])
    u.ok("RESULT", sid=a, want=0, results=[res])  # the first reply was "lost"
    assert job_get(u, job)["job"]["dups"] == 0


def test_many_expired_tasks_all_reissued(cluster_factory):
    c = cluster_factory(dict(REISSUE, **{"tasks.min_wait_s": 0.3}))
    u = c.connect()
    job = submit(u, 100, argv=["/bin/true"])
    a, b = hello(u, "A"), hello(u, "B")
    assert len(u.ok("TASK_GET", sid=a, want=100)["tasks"]) == 100
    time.sleep(scaled(0.8))
    u.ok("TASK_GET", sid=a, want=1)  # A asks again: its expired tasks are skipped
    got = set()
    deadline = time.monotonic() + scaled(2)  # all 100 are expired: B should get them now
    while len(got) < 100 and time.monotonic() < deadline:
        got |= {t["idx"] for t in u.ok("TASK_GET", sid=b, want=1000)["tasks"]}
        time.sleep(0.1)
    assert len(got) == 100, "only %d of 100 expired tasks re-issued (job %d)" % (len(got), job)


def test_result_extra_keys_cannot_spoof_state(cluster):
    u = cluster.connect()
    job = submit(u, 1)
    sid = hello(u, "n")
    t = u.ok("TASK_GET", sid=sid, want=1)["tasks"][0]
    u.ok("RESULT", sid=sid, want=0, results=[result_of(t, exit=1, state="ok", node="x")])
    task = job_get(u, job, tasks=True)["tasks"][0]
    assert task["state"] == "failed" and task["node"] == sid


def test_cancel_then_result_keeps_running_count(cluster):
    u = cluster.connect()
    j1 = submit(u, 1)
    sid = hello(u, "n")
    t1 = u.ok("TASK_GET", sid=sid, want=1)["tasks"][0]
    u.ok("CANCEL", job=j1)
    submit(u, 1)
    assert len(u.ok("TASK_GET", sid=sid, want=1)["tasks"]) == 1
    assert node_map(u, sid)["running"] == 1
    u.ok("RESULT", sid=sid, want=0, results=[result_of(t1)])
    assert node_map(u, sid)["running"] == 1


# ---------------------------------------------------------------------------
# heartbeats (C10), LEAVE, node-side errors, inactivity (X5)


def test_heartbeat_postpones_reissue_and_cancels(cluster_factory):
    c = cluster_factory(dict(REISSUE, **{"tasks.heartbeat_s": 2}))
    u = c.connect()
    job = submit(u, 1)
    a, b = hello(u, "A"), hello(u, "B")
    ta = u.ok("TASK_GET", sid=a, want=1)["tasks"][0]
    key = {"job": job, "idx": 0, "issue": ta["issue"]}
    end = time.monotonic() + 2 * float(REISSUE["tasks.min_wait_s"])
    while time.monotonic() < end:
        assert u.ok("STATUS", expect="STATUS_ACK", sid=a, running=[key])["cancel"] == []
        assert u.ok("TASK_GET", sid=b, want=1)["tasks"] == [], "re-issued despite heartbeats"
        time.sleep(0.2)
    # A falls silent: after hb_s x k_wait the task goes to B
    tb = poll_task(u, b, scaled(20))[0]
    assert tb["issue"] == 2
    # cancelled job: its tasks come back in "cancel"; unknown ones too; B's own is kept
    job2 = submit(u, 1)
    t2 = u.ok("TASK_GET", sid=a, want=1)["tasks"][0]
    assert t2["job"] == job2
    u.ok("CANCEL", expect="OK", job=job2)
    k2 = {"job": job2, "idx": 0, "issue": 1}
    ghost = {"job": 999, "idx": 0, "issue": 1}
    never = {"job": job, "idx": 5, "issue": 1}
    assert u.ok("STATUS", sid=a, running=[k2, ghost, never])["cancel"] == [k2, ghost, never]
    kb = {"job": job, "idx": 0, "issue": 2}
    assert u.ok("STATUS", sid=b, running=[kb])["cancel"] == []


def test_leave_releases_tasks_at_once(cluster_factory):
    c = cluster_factory({"store.sync": "none", "tasks.min_wait_s": 600})
    u = c.connect()
    job = submit(u, 2)
    a, b = hello(u, "A"), hello(u, "B")
    ta = u.ok("TASK_GET", sid=a, want=2)["tasks"]
    assert len(ta) == 2
    assert u.ok("TASK_GET", sid=b, want=2)["tasks"] == []
    u.ok("LEAVE", expect="OK", sid=a, results=[result_of(ta[0], stdout=b"from A")])
    tb = u.ok("TASK_GET", sid=b, want=2)["tasks"]
    assert [(t["idx"], t["issue"]) for t in tb] == [(1, 2)]
    assert node_map(u, a)["active"] is False and node_map(u, a)["running"] == 0
    assert node_map(u, b)["active"] is True
    info = job_get(u, job, tasks=True, output=True)
    assert info["tasks"][0]["stdout"] == b"from A" and info["tasks"][1]["state"] == "issued"
    # LEAVE without results, and the session stays usable
    u.ok("LEAVE", expect="OK", sid=b)
    u.ok("RESULT", sid=b, want=0, results=[result_of(tb[0])])
    assert job_get(u, job)["job"]["state"] == "done"


def test_node_side_error_retries_then_fails(cluster_factory):
    c = cluster_factory({"store.sync": "none", "tasks.min_wait_s": 600,
                         "tasks.max_attempts": 3})
    u = c.connect()
    job = submit(u, 1)
    a, b = hello(u, "A"), hello(u, "B")
    holder, other = a, b
    t = u.ok("TASK_GET", sid=holder, want=1)["tasks"][0]
    for attempt in (1, 2):
        assert t["issue"] == attempt
        u.ok("RESULT", sid=holder, want=0,
             results=[result_of(t, exit=-1, error="cannot exec: attempt %d" % attempt)])
        j = job_get(u, job, tasks=True)
        assert (j["job"]["done"], j["job"]["dups"]) == (0, attempt)
        assert j["tasks"][0]["state"] == "issued"
        # re-issuable at once, to another node
        t = u.ok("TASK_GET", sid=other, want=1)["tasks"][0]
        holder, other = other, holder
    assert t["issue"] == 3
    u.ok("RESULT", sid=holder, want=0, results=[result_of(t, exit=-1, error="final")])
    info = job_get(u, job, tasks=True)
    j, task = info["job"], info["tasks"][0]
    assert (j["state"], j["done"], j["failed"], j["dups"]) == ("failed", 1, 1, 2)
    assert task["state"] == "failed" and task["error"] == "final" and task["issue"] == 3
    assert u.ok("TASK_GET", sid=other, want=1)["tasks"] == []


def test_program_failure_and_timeout_are_final(cluster_factory):
    c = cluster_factory({"store.sync": "none", "tasks.min_wait_s": 600})
    u = c.connect()
    job = submit(u, 3)
    a, b = hello(u, "A"), hello(u, "B")
    ts = u.ok("TASK_GET", sid=a, want=3)["tasks"]
    u.ok("RESULT", sid=a, want=0, results=[
        result_of(ts[0], exit=3), result_of(ts[1], exit=-1, signal=9),
        result_of(ts[2], exit=-1, signal=9, timeout=True)])
    info = job_get(u, job, tasks=True)
    assert info["job"]["state"] == "failed" and info["job"]["failed"] == 3
    assert [t["state"] for t in info["tasks"]] == ["failed"] * 3
    assert u.ok("TASK_GET", sid=b, want=3)["tasks"] == []


def test_result_for_unknown_task_is_acked_and_dropped(cluster):
    u = cluster.connect()
    job = submit(u, 2)
    sid = hello(u, "n")
    r = u.ok("RESULT", sid=sid, want=0, results=[
        {"job": 999, "idx": 0, "issue": 1, "exit": 0},
        {"job": job, "idx": 1, "issue": 1, "exit": 0}])  # idx 1 never issued
    assert r["acked"] == 2 and r["tasks"] == []
    j = job_get(u, job)["job"]
    assert (j["done"], j["dups"], j["issued"]) == (0, 0, 0)


def test_tasks_reply_fields(cluster_factory):
    c = cluster_factory({"store.sync": "none", "tasks.idle_wait_s": 4})
    u = c.connect()
    sid = hello(u, "n")
    r = u.ok("TASK_GET", expect="TASKS", sid=sid, want=1)
    assert r["tasks"] == [] and r["more"] is False and r["wait_s"] == 4 and "acked" not in r
    job = submit(u, 2, argv=["/bin/echo", "{job}-{i}-{n}"], complexity=2.5, limit_s=77)
    r = u.ok("TASK_GET", sid=sid, want=0)
    assert r["tasks"] == [] and r["more"] is True
    r = u.ok("TASK_GET", sid=sid, want=1)
    assert r["wait_s"] == 0 and r["more"] is True
    t = r["tasks"][0]
    # issue 11: processor type, report deadline and estimate on this host
    assert t.pop("ptype") == "cpu" and t.pop("est_s") > 0
    assert abs(t.pop("deadline") - (time.time() + 86400)) < 120
    assert t == {"job": job, "idx": 0, "issue": 1, "limit_s": 77, "complexity": 2.5,
                 "argv": ["/bin/echo", "%d-0-2" % job], "shell": False, "stdin": b""}
    n = node_map(u, sid)
    assert n["running"] == 1 and n["cur_job"] == job and n["cur_since"] > 0
    jobs = u.ok("JOB_LIST")["jobs"]
    assert set(jobs[0]) == {"job", "name", "user", "state", "ntasks", "issued", "running",
                            "done", "failed", "dups", "submitted", "finished", "argv",
                            "shell", "network", "limit_s", "deadline_s", "late"}
    assert (jobs[0]["state"], jobs[0]["issued"], jobs[0]["running"]) == ("running", 1, 1)
    assert jobs[0]["argv"] == ["/bin/echo", "{job}-{i}-{n}"]


def test_job_get_paging(cluster):
    u = cluster.connect()
    job = submit(u, 10)
    sid = hello(u, "n")
    ts = u.ok("TASK_GET", sid=sid, want=6)["tasks"]
    u.ok("RESULT", sid=sid, want=0, results=[result_of(t, stdout=b"%d" % t["idx"])
                                             for t in ts if t["idx"] % 2 == 0])
    page = job_get(u, job, tasks=True, output=True, **{"from": 3, "count": 4})["tasks"]
    assert [t["idx"] for t in page] == [3, 4, 5, 6]
    assert [t["state"] for t in page] == ["issued", "ok", "issued", "pending"]
    assert page[1]["stdout"] == b"4"
    assert [t["idx"] for t in job_get(u, job, tasks=True, **{"from": 8})["tasks"]] == [8, 9]
    assert job_get(u, job, tasks=True, **{"from": 50})["tasks"] == []
    assert len(job_get(u, job, tasks=True)["tasks"]) == 10


def test_silent_node_becomes_inactive(cluster_factory):
    hb = 1
    c = cluster_factory({"store.sync": "none", "tasks.heartbeat_s": hb,
                         "tasks.idle_wait_s": 1, "tasks.k_wait": 2, "tasks.k_wait_dead": 3})
    u = c.connect()
    a, b = hello(u, "A"), hello(u, "B")
    t0 = time.monotonic()

    def a_inactive():
        u.ok("TASK_GET", sid=b, want=0)  # B keeps talking
        return not node_map(u, a)["active"]

    wait_until(a_inactive, scaled(20), interval=0.3, msg="node A inactive")
    assert time.monotonic() - t0 >= 2.0  # not before k_wait_dead x heartbeat (3 s)
    assert node_map(u, b)["active"] is True
    u.ok("TASK_GET", sid=a, want=0)
    assert node_map(u, a)["active"] is True


def test_stats_files(cluster_factory):
    c = cluster_factory({"store.sync": "none", "stats.interval_s": 1})
    u = c.connect()
    job = submit(u, 2, name="statjob")
    sid = hello(u, "statnode", mhz=2400, cores=4)
    t = u.ok("TASK_GET", sid=sid, want=1)["tasks"][0]
    u.ok("RESULT", sid=sid, want=0, results=[result_of(t, wall_s=0.5)])
    path = c.state_dir / "stats.json"

    def stats_ready():
        try:
            st = json.loads(path.read_text())
        except (OSError, ValueError):
            return None
        jobs = [j for j in st.get("jobs", []) if j["job"] == job]
        return st if jobs and jobs[0]["done"] == 1 else None

    st = wait_until(stats_ready, scaled(15), interval=0.2, msg="stats.json with progress")
    j = next(j for j in st["jobs"] if j["job"] == job)
    assert j["name"] == "statjob" and j["ntasks"] == 2 and abs(j["progress"] - 0.5) < 1e-6
    n = next(n for n in st["nodes"] if n["sid"] == sid)
    assert n["node"] == "statnode" and n["active"] is True and n["results"] == 1
    assert st["active_nodes"] >= 1 and st["power"]["mhz_total"] >= 2400 * 4
    html = (c.state_dir / "stats.html").read_text()
    assert "statnode" in html and "statjob" in html and "50.0%" in html


# ---------------------------------------------------------------------------
# storage faults (GRIDNODE_FAULT_COMMIT=N fails the N-th commit with EIO)


def test_fault_commit_on_submit(cluster_factory):
    c = cluster_factory({"store.sync": "full"}, env={"GRIDNODE_FAULT_COMMIT": "1"})
    u = c.connect()
    u.err("SUBMIT", "STORAGE", argv=["cat"], ntasks=2, stdin=[b"a", b"b"], name="f")
    assert c.alive()
    assert u.ok("JOB_LIST")["jobs"] == []
    job = submit(u, 2, argv=["cat"], stdin=[b"a", b"b"], name="f")
    assert job == 1
    sid = hello(u, "n")
    ts = u.ok("TASK_GET", sid=sid, want=2)["tasks"]
    assert [t["stdin"] for t in ts] == [b"a", b"b"]
    c.restart(signal.SIGKILL)
    jobs = c.connect().ok("JOB_LIST")["jobs"]
    assert [(j["job"], j["name"], j["issued"]) for j in jobs] == [(1, "f", 2)]


def test_fault_commit_on_result(cluster_factory):
    # commits: 1 SUBMIT, 2 HELLO, 3 TASK_GET, 4 RESULT (fails)
    c = cluster_factory({"store.sync": "full"}, env={"GRIDNODE_FAULT_COMMIT": "4"})
    u = c.connect()
    job = submit(u, 1)
    sid = hello(u, "n")
    t = u.ok("TASK_GET", sid=sid, want=1)["tasks"][0]
    res = result_of(t, stdout=b"out")
    u.err("RESULT", "STORAGE", sid=sid, want=1, results=[res])
    assert c.alive()
    info = job_get(u, job, tasks=True)
    assert (info["job"]["done"], info["tasks"][0]["state"]) == (0, "issued")
    assert node_map(u, sid)["results"] == 0
    r = u.ok("RESULT", sid=sid, want=1, results=[res])
    assert r["acked"] == 1
    info = job_get(u, job, tasks=True, output=True)
    assert info["job"]["state"] == "done" and info["tasks"][0]["stdout"] == b"out"
    assert info["job"]["dups"] == 0
    c.restart(signal.SIGKILL)
    j = job_get(c.connect(), job)["job"]
    assert (j["state"], j["done"], j["dups"]) == ("done", 1, 0)


def test_fault_commit_on_hello(cluster_factory):
    c = cluster_factory({"store.sync": "none"}, env={"GRIDNODE_FAULT_COMMIT": "1"})
    u = c.connect()
    u.err("HELLO", "STORAGE", client="c", node="n", cores=1)
    assert u.ok("NODE_LIST")["nodes"] == []
    sid = hello(u, "n")
    assert [n["sid"] for n in u.ok("NODE_LIST")["nodes"]] == [sid]


@pytest.mark.slow
def test_tasks_reply_fits_in_a_frame(cluster):
    u = cluster.connect()
    for _ in range(2):
        submit(u, 4, argv=["cat"], stdin=[b"x" * (9 << 20)] * 4)
    sid = hello(u, "n", cores=8)
    node = cluster.connect()
    node.close()
    node.sock = zmq.Context.instance().socket(zmq.DEALER)
    node.sock.setsockopt(zmq.LINGER, 0)
    node.sock.setsockopt(zmq.MAXMSGSIZE, 64 << 20)  # as gridnode client does
    curve_client(node.sock)
    node.sock.connect(cluster.endpoint)
    try:
        r = node.call("TASK_GET", sid=sid, want=8, timeout=scaled(5))
    finally:
        node.close()
    assert 0 < len(r["tasks"]) < 8


def test_conftest_type_table_matches_wire_h():
    """The tests' TYPES/ERRORS tables must list every type and code of wire/wire.h."""
    import re
    from conftest import ERRORS, REPO
    header = (REPO / "wire" / "wire.h").read_text()
    types = {m.group(1): int(m.group(2)) for m in re.finditer(r"\bWT_(\w+) = (\d+)", header)}
    errors = {m.group(1): int(m.group(2)) for m in re.finditer(r"\bWE_(\w+) = (\d+)", header)}
    assert types and errors
    assert types == TYPES
    assert errors == ERRORS
