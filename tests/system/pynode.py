"""A gridnode node (execution host) in Python, written from docs/wire.md alone.

It imports nothing from the gridnode repository: only pyzmq, msgpack and the
standard library, and uses only what docs/wire.md describes (sections 1-9).

    node = PyNode("tcp://127.0.0.1:7300", name="py1")
    node.hello()
    node.run()          # fetch, run, report until the cluster says "no tasks"
    node.leave()

or from the shell: python3 pynode.py ENDPOINT [NAME]
"""

import itertools
import os
import subprocess
import sys
import time

import msgpack
import zmq

VERSION = 1
T = dict(ERROR=1, OK=2, HELLO=10, WELCOME=11, TASK_GET=12, TASKS=13, RESULT=14,
         LEAVE=15, STATUS=16, STATUS_ACK=17, SUBMIT=30, SUBMITTED=31, JOB_LIST=32,
         JOBS=33, JOB_GET=34, JOB=35, CANCEL=36, NODE_LIST=37, NODES=38)
ERRORS = {1: "MALFORMED", 2: "VERSION", 3: "TYPE", 4: "FIELD", 5: "NOT_FOUND",
          6: "SESSION", 7: "INVALID", 8: "STORAGE", 9: "STATE"}
OUTPUT_CAP = 1 << 20  # bytes of stdout/stderr kept per task (wire cap is 16 MiB)


class WireError(Exception):
    """An ERROR reply (section 7)."""

    def __init__(self, code, msg):
        super().__init__("%s (%d): %s" % (ERRORS.get(code, "?"), code, msg))
        self.code = code
        self.name = ERRORS.get(code, "?")
        self.msg = msg


class PyNode:
    def __init__(self, endpoint, name="pynode", cores=1, slots=None, timeout=10.0,
                 cluster="", client="pynode 1"):
        self.endpoint = endpoint
        self.name = name
        self.cores = cores
        self.slots = slots if slots is not None else cores
        self.timeout = timeout
        self.cluster = cluster
        self.client = client
        self.ctx = zmq.Context.instance()
        self.sock = None
        self.ids = itertools.count(1)
        self.sid = None
        self.hb_s = 10
        self.unacked = []  # results not yet acknowledged (section 8, step 4)
        self.cancelled = 0
        self._connect()

    # ---- transport (section 1) ----

    def _connect(self):
        if self.sock is not None:
            self.sock.close(0)
        self.sock = self.ctx.socket(zmq.DEALER)
        self.sock.setsockopt(zmq.LINGER, 0)
        from conftest import curve_client
        curve_client(self.sock)
        self.sock.connect(self.endpoint)

    def close(self):
        if self.sock is not None:
            self.sock.close(0)
            self.sock = None

    def call(self, t, timeout=None, **fields):
        """Sends one request; returns the reply with the same id. Raises WireError on
        an ERROR reply and TimeoutError when no reply came in time."""
        msg = {"v": VERSION, "t": T[t], "id": next(self.ids)}
        msg.update(fields)
        self.sock.send(msgpack.packb(msg, use_bin_type=True))
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        while True:
            left = deadline - time.monotonic()
            if left <= 0 or not self.sock.poll(int(left * 1000) + 1):
                raise TimeoutError("%s: no reply from %s" % (t, self.endpoint))
            reply = msgpack.unpackb(self.sock.recv(), raw=False,
                                   unicode_errors="surrogateescape")
            if not isinstance(reply, dict) or reply.get("id") != msg["id"]:
                continue  # a late reply to an earlier request
            if reply.get("t") == T["ERROR"]:
                raise WireError(reply.get("code", 0), reply.get("msg", ""))
            return reply

    # ---- the node messages (section 5) ----

    def hello(self):
        fields = dict(client=self.client, node=self.name, cores=self.cores,
                      slots=self.slots, os=" ".join(os.uname()[0:3:2]),
                      cluster=self.cluster)
        if self.sid:
            fields["sid"] = self.sid
        w = self.call("HELLO", **fields)
        assert w["t"] == T["WELCOME"], w
        self.sid = w["sid"]
        self.hb_s = max(1, w["hb_s"])
        return w

    def _session(self, t, **fields):
        """A request carrying sid; on SESSION, says HELLO again and retries once."""
        try:
            return self.call(t, sid=self.sid, **fields)
        except WireError as e:
            if e.name != "SESSION":
                raise
            self.hello()
            return self.call(t, sid=self.sid, **fields)

    def task_get(self, want=1):
        r = self._session("TASK_GET", want=want)
        assert r["t"] == T["TASKS"], r
        return r

    def result(self, results, want=1):
        """Sends results (plus any earlier unacknowledged ones); returns TASKS."""
        batch = self.unacked + list(results)
        self.unacked = batch
        r = self._session("RESULT", results=batch, want=want)
        assert r["t"] == T["TASKS"] and r["acked"] == len(batch), r
        self.unacked = []
        return r

    def status(self, running):
        r = self._session("STATUS", running=running)
        assert r["t"] == T["STATUS_ACK"], r
        return r["cancel"]

    def leave(self, results=()):
        batch = self.unacked + list(results)
        fields = {"results": batch} if batch else {}
        r = self._session("LEAVE", **fields)
        assert r["t"] == T["OK"], r
        self.unacked = []
        return r

    # ---- running one task (section 5.2, 5.3, 5.5) ----

    def run_task(self, task):
        """Runs one task with heartbeats; returns its result map, or None if the
        cluster cancelled it."""
        argv = list(task["argv"])
        if task.get("shell"):
            argv = ["/bin/sh", "-c"] + argv
        key = {"job": task["job"], "idx": task["idx"], "issue": task["issue"]}
        result = dict(key)
        start = time.monotonic()
        try:
            p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, start_new_session=True)
        except OSError as e:
            result.update(exit=-1, error="cannot run %s: %s" % (argv[0], e), wall_s=0.0)
            return result
        stdin = task.get("stdin") or b""
        limit = task["limit_s"] if task.get("limit_s") else None
        out = err = b""
        timed_out = False
        while True:
            left = None if limit is None else limit - (time.monotonic() - start)
            step = self.hb_s if left is None else max(0.01, min(self.hb_s, left))
            try:
                out, err = p.communicate(input=stdin, timeout=step)
                break
            except subprocess.TimeoutExpired:
                stdin = None  # already written; communicate() keeps the rest
            if limit is not None and time.monotonic() - start >= limit:
                timed_out = True
                p.kill()
                out, err = p.communicate()
                break
            if key in self.status([key]):
                p.kill()
                p.communicate()
                self.cancelled += 1
                return None
        wall = time.monotonic() - start
        rc = p.returncode
        result["wall_s"] = wall
        if rc < 0:
            result["exit"] = -1
            result["signal"] = -rc
        else:
            result["exit"] = rc
        if timed_out:
            result["timeout"] = True
        result["stdout"] = out[:OUTPUT_CAP]
        result["stderr"] = err[:OUTPUT_CAP]
        if len(out) > OUTPUT_CAP:
            result["out_trunc"] = True
        if len(err) > OUTPUT_CAP:
            result["err_trunc"] = True
        return result

    def run(self, until_empty=True, max_tasks=None, deadline_s=60.0):
        """The pull loop of section 8: TASK_GET, then run + RESULT with want=1 until
        the cluster gives no tasks (until_empty) or max_tasks were run. Returns the
        results delivered."""
        if not self.sid:
            self.hello()
        done = []
        deadline = time.monotonic() + deadline_s
        want = 1 if max_tasks is None else min(1, max_tasks)
        reply = self.task_get(want)
        while time.monotonic() < deadline:
            tasks = reply["tasks"]
            if not tasks:
                if until_empty:
                    break
                time.sleep(min(reply["wait_s"], max(0.0, deadline - time.monotonic())))
                reply = self.task_get(1)
                continue
            results = [r for r in (self.run_task(t) for t in tasks) if r is not None]
            done += results
            want = 1 if max_tasks is None or len(done) < max_tasks else 0
            reply = self.result(results, want=want)
            if want == 0:
                break
        return done


def main(argv):
    if len(argv) < 2:
        print("usage: pynode.py ENDPOINT [NAME]", file=sys.stderr)
        return 2
    node = PyNode(argv[1], name=argv[2] if len(argv) > 2 else "pynode")
    node.hello()
    results = node.run(until_empty=True)
    node.leave()
    print("ran %d task(s)" % len(results))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
