"""Shared fixtures for gridnode's system tests (pytest, run with /usr/bin/python3).

What is here, for every test file in tests/system/:

* the ``slow`` marker (tests marked slow run only against the plain binary);
* ``GRIDNODE_BIN`` (default ``<repo>/build/gridnode``) as ``gridnode_bin``;
* ``GRIDNODE_ASAN=1`` scales every timeout by 3 (``SCALE``, ``scaled()``);
* ``workdir``: a fresh directory per test;
* ``procs``: a registry that kills every process it started, by PID, when the test
  ends, whatever the outcome (SIGTERM, then SIGKILL after a bounded wait);
* ``cluster_factory`` / ``cluster``: a ``Cluster`` on a free loopback port, with
  ``kill(sig)``, ``restart()`` on the same state dir (and port) and ``rpc()``;
* ``client_factory``: N ``gridnode client`` processes with arbitrary --set pairs;
* ``Rpc``: a tiny DEALER client (linger 0, bounded polls) speaking docs/wire.md;
* ``wait_until``: bounded polling;
* security (docs/security.md): the whole suite runs with CURVE on. At import one key
  pair, "grid", is made and GRIDNODE_KEY / GRIDNODE_SERVER_KEY /
  GRIDNODE_AUTHORIZED_KEYS point at it (an admin identity), so every role, node and
  tool started by a test serves and connects securely; ``Rpc`` and the fake servers of
  the tests call ``curve_client()`` / ``curve_server()``. tests/system/test_security.py
  makes its own keys. A test that needs plain passes GRIDNODE_PLAIN=1 (loopback only).

zmq and msgpack are imported lazily, so test files that only run the binary work
with any Python that has pytest.

A sanitizer report (ASan/UBSan/LSan) in a process's stderr fails the test at
teardown, naming the log file.
"""

import atexit
import itertools
import os
import select
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
GRIDNODE_BIN = os.environ.get("GRIDNODE_BIN", str(REPO / "build" / "gridnode"))
ASAN = os.environ.get("GRIDNODE_ASAN", "") not in ("", "0")
SCALE = 3.0 if ASAN else 1.0

# Message type numbers and error codes of docs/wire.md (protocol version 1).
WIRE_VERSION = 1
TYPES = {
    "ERROR": 1, "OK": 2,
    "HELLO": 10, "WELCOME": 11, "TASK_GET": 12, "TASKS": 13, "RESULT": 14,
    "LEAVE": 15, "STATUS": 16, "STATUS_ACK": 17,
    "SUBMIT": 30, "SUBMITTED": 31, "JOB_LIST": 32, "JOBS": 33, "JOB_GET": 34,
    "JOB": 35, "CANCEL": 36, "NODE_LIST": 37, "NODES": 38,
    "PSYNC": 18, "PSYNC_ACK": 19, "PSUBMIT": 39, "CONSOLE": 40, "CONSOLE_OUT": 41,
    "SD_INFO": 42, "SD_STATE": 43, "PURGE": 54, "PURGED": 55, "JOB_CTL": 56, "NODE_CTL": 57,
    "EVENTS": 60, "EVENT_LIST": 61,  # issue 9, cluster side (h-cluster)
    "SHOWQ": 80, "QUEUE": 81, "CHECKJOB": 82, "JOBCHECK": 83, "ESTIMATE": 84, "STARTS": 85,
    "DIAGNOSE": 86, "DIAG": 87, "RESV_SET": 88, "RESV": 89, "RESV_LIST": 90, "RESVS": 91,
    "RESV_RELEASE": 92, "RESERVE": 93, "SITE_INFO": 94, "SITE": 95,
    "MASTER_GET": 100, "MASTER": 101, "CLIENT_STATUS": 102, "CLIENT_STATE": 103,
    "ATTACH": 104, "DETACH": 105,
    "ACCT": 106, "ACCTS": 107,  # issue 27: accounting
    "FILE_HAVE": 120, "FILE_STATE": 121, "FILE_PUT": 122, "FILE_GET": 123,  # issue 26
    "FILE_DATA": 124, "CKPT": 125,
    "SHOWBF": 130, "BACKFILL": 131, "CHECKNODE": 132, "NODECHECK": 133,  # issue 27: Maui
    "SHOWSTATS": 134, "SITESTATS": 135, "TASK_PIN": 148, "WORK_WAIT": 152, "WORK_WAKE": 153,
    "JOB_WAIT": 160, "JOB_ENDED": 161,  # issue 28
}
TYPE_NAMES = {v: k for k, v in TYPES.items()}
ERRORS = {
    "MALFORMED": 1, "VERSION": 2, "TYPE": 3, "FIELD": 4, "NOT_FOUND": 5,
    "SESSION": 6, "INVALID": 7, "STORAGE": 8, "STATE": 9, "REFUSED": 10,
    "DENIED": 17, "AUTH": 22,
}
ERROR_NAMES = {v: k for k, v in ERRORS.items()}

SANITIZER_MARKS = ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error:",
                   "AddressSanitizer:DEADLYSIGNAL", "ERROR: UndefinedBehaviorSanitizer",
                   "gridnode BUG: wire:")  # wire/wire.h WIRE_CHECK_OUT (the ASan build)


# ---------------------------------------------------------------------------
# security: one CURVE key pair for the whole suite (module docstring)


def write_keypair(directory, name):
    """Writes NAME.key (secret, 0600) and NAME.pub in gridnode keygen's format; returns
    (public, secret) as z85 text."""
    import zmq
    pub, sec = zmq.curve_keypair()
    pub, sec = pub.decode(), sec.decode()
    d = Path(directory)
    fd = os.open(str(d / (name + ".key")), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write("# gridnode CURVE secret key of '%s'\n%s\n" % (name, sec))
    (d / (name + ".pub")).write_text("# gridnode CURVE public key of '%s'\n%s\n" % (name, pub))
    return pub, sec


def _suite_keys():
    import shutil
    import tempfile
    d = tempfile.mkdtemp(prefix="gridnode-test-keys.")
    atexit.register(shutil.rmtree, d, True)
    pub, sec = write_keypair(d, "grid")
    (Path(d) / "authorized_keys").write_text("%s grid admin\n" % pub)
    os.environ["GRIDNODE_KEY"] = str(Path(d) / "grid.key")
    os.environ["GRIDNODE_SERVER_KEY"] = str(Path(d) / "grid.pub")
    os.environ["GRIDNODE_AUTHORIZED_KEYS"] = str(Path(d) / "authorized_keys")
    os.environ.pop("GRIDNODE_PLAIN", None)
    return {"dir": d, "public": pub, "secret": sec}


SUITE_KEYS = _suite_keys()


def _key_of(value):
    """z85 text from a key value: a key file, or the literal "z85:KEY" (docs/security.md:
    server keys only; never guessed from the length)."""
    if value.startswith("z85:"):
        return value[4:]
    for line in Path(value).read_text().splitlines():
        line = line.strip()
        if len(line) == 40 and " " not in line:
            return line
    raise ValueError("no key in %s" % value)


def curve_client(sock, key=None, server_key=None):
    """Makes a pyzmq socket a CURVE client (before connect) with the suite's keys (or
    the given key file / server key), unless GRIDNODE_PLAIN is set."""
    if os.environ.get("GRIDNODE_PLAIN") and key is None:
        return sock
    import zmq
    sec = _key_of(key or os.environ["GRIDNODE_KEY"]).encode()
    sock.curve_serverkey = _key_of(server_key or os.environ["GRIDNODE_SERVER_KEY"]).encode()
    sock.curve_publickey = zmq.curve_public(sec)
    sock.curve_secretkey = sec
    return sock


def security_env():
    """The GRIDNODE_* security variables of this process, for a test that builds a
    process's environment from scratch."""
    names = ("GRIDNODE_KEY", "GRIDNODE_SERVER_KEY", "GRIDNODE_AUTHORIZED_KEYS", "GRIDNODE_PLAIN")
    return {k: os.environ[k] for k in names if k in os.environ}


def curve_server(sock):
    """Makes a pyzmq socket (a test's fake role) a CURVE server with the suite's server
    key (before bind). Without a ZAP handler in its context it admits any client key."""
    if os.environ.get("GRIDNODE_PLAIN"):
        return sock
    sock.curve_server = True
    sock.curve_secretkey = SUITE_KEYS["secret"].encode()
    return sock


# Every PID started in this session, killed at exit as a last resort.
_ALL_PIDS = set()


# Small protocol timings so re-issue and inactivity happen within seconds (tests of the
# task protocol: test_grid, test_client_live, test_validation).
FAST_CLUSTER = {
    "store.sync": "none",
    "tasks.heartbeat_s": 1,
    "tasks.idle_wait_s": 1,
    "tasks.k_wait": 2,
    "tasks.k_wait_dead": 3,
    "tasks.default_estimate_s": 1,
    "tasks.min_wait_s": 1,
}
FAST_CLIENT = {"rpc.timeout_ms": 1000, "rpc.backoff_min_s": 0.2, "rpc.backoff_max_s": 1}


def scaled(seconds):
    """A timeout, scaled for the slower ASan build."""
    return seconds * SCALE


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "slow: long test; `make check` runs it only against the plain binary")


def _kill_all_at_exit():
    for pid in list(_ALL_PIDS):
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


atexit.register(_kill_all_at_exit)


def pytest_sessionfinish(session, exitstatus):
    _kill_all_at_exit()


def wait_until(pred, timeout, interval=0.05, msg="condition"):
    """Calls pred() until it returns a true value, which is returned; fails the test
    after `timeout` seconds (already scaled by the caller if it should be)."""
    deadline = time.monotonic() + timeout
    last = None
    while True:
        last = pred()
        if last:
            return last
        if time.monotonic() > deadline:
            raise AssertionError("timed out after %.1f s waiting for %s (last: %r)"
                                 % (timeout, msg, last))
        time.sleep(interval)


# ---------------------------------------------------------------------------
# processes


class Proc:
    """One started process: stdout is a pipe (read with readline_timeout), stderr goes
    to a log file. Registered with a ProcRegistry that kills it at teardown."""

    def __init__(self, registry, args, log_path, env=None, cwd=None):
        self.args = [str(a) for a in args]
        self.log_path = Path(log_path)
        self.registry = registry
        full_env = dict(os.environ)
        if env:
            full_env.update({k: str(v) for k, v in env.items()})
        self._log = open(self.log_path, "ab")
        self.popen = subprocess.Popen(self.args, stdin=subprocess.DEVNULL,
                                      stdout=subprocess.PIPE, stderr=self._log,
                                      env=full_env, cwd=cwd)
        self.pid = self.popen.pid
        _ALL_PIDS.add(self.pid)
        registry.add(self)
        self._buf = b""
        self._drain = None

    def readline_timeout(self, timeout):
        """One line of stdout (str, without the newline) within timeout seconds, or
        None on timeout or end of file. Must not be called after drain_stdout()."""
        deadline = time.monotonic() + timeout
        fd = self.popen.stdout.fileno()
        while b"\n" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            r, _, _ = select.select([fd], [], [], left)
            if not r:
                return None
            chunk = os.read(fd, 4096)
            if not chunk:
                return None
            self._buf += chunk
        line, self._buf = self._buf.split(b"\n", 1)
        return line.decode(errors="replace")

    def drain_stdout(self, path=None):
        """From now on copies stdout to `path` (or discards it) in a thread, so the
        process never blocks on a full pipe."""
        out = open(path, "ab") if path else None
        if out and self._buf:
            out.write(self._buf)
        self._buf = b""
        stream = self.popen.stdout

        def run():
            try:
                for chunk in iter(lambda: stream.read1(4096), b""):
                    if out:
                        out.write(chunk)
                        out.flush()
            except (OSError, ValueError):
                pass
            finally:
                if out:
                    out.close()

        self._drain = threading.Thread(target=run, daemon=True)
        self._drain.start()

    def alive(self):
        return self.popen.poll() is None

    def send_signal(self, sig):
        if self.alive():
            try:
                os.kill(self.pid, sig)
            except OSError:
                pass

    def wait(self, timeout):
        """Exit status, or None if still running after timeout seconds."""
        try:
            return self.popen.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return None

    def stop(self, sig=signal.SIGTERM, timeout=None):
        """Sends sig, waits (bounded), then SIGKILL. Returns the exit status."""
        timeout = scaled(10) if timeout is None else timeout
        if self.alive():
            self.send_signal(sig)
            rc = self.wait(timeout)
            if rc is not None:
                return self._reap()
            self.send_signal(signal.SIGKILL)
        self.wait(scaled(10))
        return self._reap()

    def _reap(self):
        rc = self.popen.poll()
        if rc is not None:
            _ALL_PIDS.discard(self.pid)
            for f in (self.popen.stdout,):
                try:
                    f.close()
                except Exception:
                    pass
            try:
                self._log.close()
            except Exception:
                pass
        return rc

    def log(self):
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def sanitizer_report(self):
        text = self.log()
        for mark in SANITIZER_MARKS:
            if mark in text:
                return text
        return None


class ProcRegistry:
    """Every process a test started; teardown() stops all of them by PID."""

    def __init__(self):
        self.procs = []
        self.logs_checked = set()

    def add(self, p):
        self.procs.append(p)

    def teardown(self):
        # Stop in reverse order (clients before the cluster), SIGTERM first so that
        # sanitizer builds get to report leaks, SIGKILL after a bounded wait.
        for p in reversed(self.procs):
            try:
                p.stop(signal.SIGTERM, timeout=scaled(5))
            except Exception:
                try:
                    os.kill(p.pid, signal.SIGKILL)
                except OSError:
                    pass
        reports = []
        for p in self.procs:
            if p.log_path in self.logs_checked:
                continue
            self.logs_checked.add(p.log_path)
            if p.sanitizer_report():
                reports.append(str(p.log_path))
        return reports


@pytest.fixture(scope="session")
def gridnode_bin():
    path = Path(GRIDNODE_BIN)
    if not path.is_file() or not os.access(path, os.X_OK):
        pytest.fail("gridnode binary %s not found: build it (make) or set GRIDNODE_BIN" % path)
    return str(path)


@pytest.fixture
def workdir(tmp_path):
    """A fresh directory for this test (pytest keeps the last few runs' ones)."""
    return tmp_path


@pytest.fixture
def procs():
    reg = ProcRegistry()
    try:
        yield reg
    finally:
        reports = reg.teardown()
    if reports:
        pytest.fail("sanitizer report in " + ", ".join(reports), pytrace=False)


# ---------------------------------------------------------------------------
# the wire client

_ctx = None


def _zmq():
    global _ctx
    import zmq
    if _ctx is None:
        _ctx = zmq.Context()
    return zmq, _ctx


class RpcTimeout(AssertionError):
    pass


class Rpc:
    """A DEALER connected to a gridnode endpoint. call() sends one request and
    returns the reply (dict) with the same id; replies with other ids are dropped."""

    _open = []

    def __init__(self, endpoint, timeout=None, socket_type=None, key=None, server_key=None,
                 plain=False):
        zmq, ctx = _zmq()
        self.zmq = zmq
        self.endpoint = endpoint
        self.timeout = scaled(10) if timeout is None else timeout
        self.sock = ctx.socket(zmq.DEALER if socket_type is None else socket_type)
        self.sock.setsockopt(zmq.LINGER, 0)
        # a DEALER with no connection blocks in send (a key refused at the handshake
        # never makes one): bounded, like every wait of the suite
        self.sock.setsockopt(zmq.SNDTIMEO, max(1, int(self.timeout * 1000)))
        if not plain:
            curve_client(self.sock, key, server_key)
        self.sock.connect(endpoint)
        self.ids = itertools.count(1)
        Rpc._open.append(self)

    def close(self):
        if self.sock is not None:
            self.sock.close(0)
            self.sock = None

    @staticmethod
    def close_all():
        for r in Rpc._open:
            r.close()
        Rpc._open.clear()

    def message(self, t, fields):
        import msgpack
        t = TYPES[t] if isinstance(t, str) else t
        m = {"v": WIRE_VERSION, "t": t, "id": next(self.ids)}
        m.update(fields)
        return m, msgpack.packb(m, use_bin_type=True)

    def send_frames(self, frames):
        self.sock.send_multipart(frames)

    def recv_raw(self, timeout=None):
        """The next reply's frames, or raises RpcTimeout."""
        timeout = self.timeout if timeout is None else timeout
        if not self.sock.poll(int(timeout * 1000)):
            raise RpcTimeout("no reply from %s within %.1f s" % (self.endpoint, timeout))
        return self.sock.recv_multipart()

    @staticmethod
    def decode(data):
        import msgpack
        return msgpack.unpackb(data, raw=False, strict_map_key=False,
                               unicode_errors="surrogateescape")

    def call(self, t, timeout=None, **fields):
        """Sends request t (name or number) with fields; returns the reply map."""
        m, data = self.message(t, fields)
        try:
            self.sock.send(data)
        except self.zmq.Again:
            raise RpcTimeout("cannot send %s to %s: no connection within %.1f s" % (
                TYPE_NAMES.get(m["t"], m["t"]), self.endpoint, self.timeout))
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise RpcTimeout("no reply to %s id %d from %s" % (
                    TYPE_NAMES.get(m["t"], m["t"]), m["id"], self.endpoint))
            frames = self.recv_raw(left)
            reply = self.decode(frames[-1])
            if isinstance(reply, dict) and reply.get("id") == m["id"]:
                return reply

    def ok(self, t, expect=None, **fields):
        """call() that fails the test on an ERROR reply (or a reply type other than
        expect, a name)."""
        r = self.call(t, **fields)
        if r.get("t") == TYPES["ERROR"]:
            raise AssertionError("%s failed: %s %s" % (
                t, ERROR_NAMES.get(r.get("code"), r.get("code")), r.get("msg")))
        if expect is not None:
            assert r.get("t") == TYPES[expect], r
        return r

    def err(self, t, code, **fields):
        """call() that expects an ERROR with the given code (a name); returns it."""
        r = self.call(t, **fields)
        assert r.get("t") == TYPES["ERROR"], "expected %s error, got %r" % (code, r)
        assert r.get("code") == ERRORS[code], "expected %s, got %s: %s" % (
            code, ERROR_NAMES.get(r.get("code")), r.get("msg"))
        return r

    def submit_pipelined(self, n, fields, window=256):
        """n SUBMITs of fields, window of them in flight (a role's peer queue holds
        1,000; libzmq grants credit in halves); returns their job ids, in reply order.
        Each reply waits at most scaled(30) s."""
        pending, ids, sent = set(), [], 0
        while len(ids) < n:
            while sent < n and len(pending) < window:
                m, data = self.message(TYPES["SUBMIT"], dict(fields))
                self.sock.send(data)
                pending.add(m["id"])
                sent += 1
            r = self.decode(self.recv_raw(scaled(30))[-1])
            assert r.get("t") == TYPES["SUBMITTED"], r
            pending.discard(r["id"])
            ids.append(r["job"])
        return ids


@pytest.fixture(autouse=True)
def _close_rpc_sockets():
    yield
    Rpc.close_all()


# ---------------------------------------------------------------------------
# the cluster


class Cluster:
    """A `gridnode cluster` process on its own state dir. start() picks a free port
    (tcp://127.0.0.1:*) the first time; restart() reuses the same port, so nodes
    connected to it reconnect by themselves."""

    def __init__(self, registry, binary, state_dir, sets=None, env=None, name="cluster"):
        self.registry = registry
        self.binary = binary
        self.state_dir = Path(state_dir)
        self.sets = dict(sets or {})
        self.env = dict(env or {})
        self.name = name
        self.proc = None
        self.endpoint = None
        self._rpc = None
        self.starts = 0

    def args(self, listen):
        a = [self.binary, "cluster", "--set", "cluster.state_dir=%s" % self.state_dir,
             "--set", "cluster.listen=%s" % listen]
        for k, v in self.sets.items():
            if k in ("cluster.state_dir", "cluster.listen"):
                continue
            a += ["--set", "%s=%s" % (k, _ini(v))]
        return a

    def start(self, timeout=None, listen=None, env=None):
        """Starts the process and waits for its "listening on" line. Returns the
        endpoint. Raises (with the log) if it exits or says nothing in time."""
        timeout = scaled(15) if timeout is None else timeout
        listen = listen or self.sets.get("cluster.listen") or "tcp://127.0.0.1:*"
        e = dict(self.env)
        e.update(env or {})
        self.starts += 1
        log = self.state_dir.parent / ("%s.%d.log" % (self.name, self.starts))
        self.proc = Proc(self.registry, self.args(listen), log, env=e)
        deadline = time.monotonic() + timeout
        while True:
            line = self.proc.readline_timeout(max(0.0, deadline - time.monotonic()))
            if line is None:
                rc = self.proc.stop(signal.SIGKILL, timeout=scaled(5))
                raise AssertionError("cluster did not start (exit %s); log %s:\n%s" % (
                    rc, log, self.proc.log()[-3000:]))
            if "listening on" in line:
                self.endpoint = line.split("listening on", 1)[1].strip()
                break
        self.proc.drain_stdout(self.state_dir.parent / ("%s.%d.out" % (self.name, self.starts)))
        if self._rpc:
            self._rpc.close()
            self._rpc = None
        return self.endpoint

    @property
    def pid(self):
        return self.proc.pid if self.proc else None

    def alive(self):
        return self.proc is not None and self.proc.alive()

    def kill(self, sig=signal.SIGKILL, timeout=None):
        """Sends sig and waits for the exit (bounded). Returns the exit status."""
        return self.proc.stop(sig, timeout=scaled(10) if timeout is None else timeout)

    def restart(self, sig=signal.SIGKILL, same_port=True, timeout=None, env=None):
        """Stops the cluster with sig (if running) and starts it again on the same
        state dir, by default on the same port (retried while the port is busy)."""
        if self.alive():
            self.kill(sig)
        if not same_port or not self.endpoint:
            return self.start(timeout=timeout, env=env)
        old = self.endpoint
        deadline = time.monotonic() + scaled(20)
        while True:
            try:
                return self.start(timeout=timeout, listen=old, env=env)
            except AssertionError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)

    def rpc(self, t, **fields):
        """One request on the cluster's shared client; returns the reply map."""
        return self.client().call(t, **fields)

    def client(self):
        """The shared Rpc client for the current endpoint."""
        if self._rpc is None or self._rpc.sock is None:
            self._rpc = Rpc(self.endpoint)
        return self._rpc

    def connect(self, **kw):
        """A new, separate Rpc client (its own DEALER and identity)."""
        return Rpc(self.endpoint, **kw)

    def log(self):
        return self.proc.log() if self.proc else ""


def _ini(v):
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


@pytest.fixture
def cluster_factory(procs, gridnode_bin, workdir):
    """make(sets=None, env=None, start=True, name="cluster") -> Cluster. Each cluster
    gets its own state dir workdir/<name>; logs are workdir/<name>.<n>.log."""
    made = []

    def make(sets=None, env=None, start=True, name=None):
        name = name or ("cluster" if not made else "cluster%d" % (len(made) + 1))
        c = Cluster(procs, gridnode_bin, workdir / name, sets=sets, env=env, name=name)
        made.append(c)
        if start:
            c.start()
        return c

    return make


@pytest.fixture
def cluster(cluster_factory):
    """A started cluster with default settings (store.sync=none for speed)."""
    return cluster_factory({"store.sync": "none"})


# ---------------------------------------------------------------------------
# clients


class Client(Proc):
    """A `gridnode client` process."""

    def __init__(self, registry, binary, name, state_dir, server, sets, env, log, extra=(),
                 sandbox=False):
        self.name = name
        self.state_dir = Path(state_dir)
        self.server = server
        args = [binary, "client", "--set", "client.server=%s" % server,
                "--set", "client.state_dir=%s" % state_dir, "--set", "client.name=%s" % name]
        pairs = list((sets or {}).items() if isinstance(sets, dict) else (sets or ()))
        if not sandbox and not any(k == "client.sandbox" for k, _ in pairs):
            pairs.append(("client.sandbox", False))
        for k, v in pairs:
            args += ["--set", "%s=%s" % (k, _ini(v))]
        args += [str(a) for a in extra]
        if os.environ.get("GRIDNODE_TEST_PROJECT_CLIENT") == "1":
            # the multi-project client (roles/client/live/) with the server as its one
            # project, for running a suite against it
            ini = Path(str(state_dir) + ".ini")
            ini.write_text("[project main]\nendpoints = %s\n" % server)
            args += ["-c", str(ini)]
        super().__init__(registry, args, log, env=env)
        self.drain_stdout(self.log_path.with_suffix(".out"))


@pytest.fixture
def client_factory(procs, gridnode_bin, workdir, request):
    """start(server, n=1, sets=None, env=None, prefix="node", args=()) -> [Client]:
    starts n `gridnode client` processes named prefix1..prefixN (numbering goes on
    across calls), each with its own state dir workdir/<name> and log
    workdir/<name>.log (stdout in workdir/<name>.out). `server` is a Cluster or an
    endpoint. sets: extra --set pairs (any keys `gridnode client --help` lists) as a
    dict, a list of (key, value) pairs (for repeated keys), or a function of the
    client's number returning either. args: more command-line arguments.

    The execution boundary (client.sandbox, docs/security.md) is on, as shipped, in
    the test files that set CLIENT_SANDBOX = True (the boundary's own tests and the
    grid, client and parallel files written for it); elsewhere these clients run with
    client.sandbox = false unless sets says otherwise, because those tests' tasks
    write marker files into the test's own directory under /tmp (mode 0700, root's),
    which a sandboxed task rightly cannot reach."""
    counter = itertools.count(1)
    sandbox = getattr(request.module, "CLIENT_SANDBOX", False)

    def start(server, n=1, sets=None, env=None, prefix="node", args=()):
        endpoint = server.endpoint if isinstance(server, Cluster) else str(server)
        out = []
        for _ in range(n):
            i = next(counter)
            name = "%s%d" % (prefix, i)
            s = sets(i) if callable(sets) else sets
            out.append(Client(procs, gridnode_bin, name, workdir / name, endpoint, s, env,
                              workdir / ("%s.log" % name), extra=args, sandbox=sandbox))
        return out

    return start


# ---------------------------------------------------------------------------
# the live batch role (issue 9)


class Batch(Cluster):
    """A `gridnode batch` live role on its own state dir, scheduling onto the cluster
    managers in `clusters` (Cluster objects or endpoints). start/kill/restart/rpc as
    for Cluster."""

    def __init__(self, registry, binary, state_dir, clusters, sets=None, env=None,
                 name="batch"):
        super().__init__(registry, binary, state_dir, sets=sets, env=env, name=name)
        self.clusters = clusters

    def args(self, listen):
        eps = ",".join(c.endpoint if isinstance(c, Cluster) else str(c)
                       for c in self.clusters)
        a = [self.binary, "batch", "--set", "batch.state_dir=%s" % self.state_dir,
             "--set", "batch.listen=%s" % listen, "--set", "batch.clusters=%s" % eps]
        for k, v in self.sets.items():
            if k in ("batch.state_dir", "batch.listen", "batch.clusters"):
                continue
            a += ["--set", "%s=%s" % (k, _ini(v))]
        return a

    def start(self, timeout=None, listen=None, env=None):
        listen = listen or self.sets.get("batch.listen") or "tcp://127.0.0.1:*"
        return super().start(timeout=timeout, listen=listen, env=env)


@pytest.fixture
def batch_factory(procs, gridnode_bin, workdir):
    """make(clusters, sets=None, env=None, start=True, name="batch") -> Batch; state
    dir workdir/<name>, logs workdir/<name>.<n>.log."""

    def make(clusters, sets=None, env=None, start=True, name="batch"):
        b = Batch(procs, gridnode_bin, workdir / name, clusters,
                  sets=dict({"store.sync": "none"}, **(sets or {})), env=env, name=name)
        if start:
            b.start()
        return b

    return make


# ---------------------------------------------------------------------------
# the metascheduler (issue 10)


class Meta(Cluster):
    """A `gridnode meta` spool on its own state dir, placing onto the batch sites in
    `sites` (a dict name -> Batch or endpoint). start/kill/restart/rpc as for Cluster."""

    def __init__(self, registry, binary, state_dir, sites, sets=None, env=None, name="meta"):
        super().__init__(registry, binary, state_dir, sets=sets, env=env, name=name)
        self.sites = sites

    def args(self, listen):
        eps = ",".join("%s=%s" % (n, s.endpoint if isinstance(s, Cluster) else s)
                       for n, s in self.sites.items())
        a = [self.binary, "meta", "--set", "meta.state_dir=%s" % self.state_dir,
             "--set", "meta.listen=%s" % listen, "--set", "meta.sites=%s" % eps]
        for k, v in self.sets.items():
            if k in ("meta.state_dir", "meta.listen", "meta.sites"):
                continue
            a += ["--set", "%s=%s" % (k, _ini(v))]
        return a

    def start(self, timeout=None, listen=None, env=None):
        listen = listen or self.sets.get("meta.listen") or "tcp://127.0.0.1:*"
        return super().start(timeout=timeout, listen=listen, env=env)


@pytest.fixture
def meta_factory(procs, gridnode_bin, workdir):
    """make(sites, sets=None, env=None, start=True, name="meta") -> Meta; sites is a dict
    name -> Batch (or endpoint); state dir workdir/<name>, logs workdir/<name>.<n>.log."""

    def make(sites, sets=None, env=None, start=True, name="meta"):
        m = Meta(procs, gridnode_bin, workdir / name, sites,
                 sets=dict({"store.sync": "none", "meta.log_level": "debug"}, **(sets or {})),
                 env=env, name=name)
        if start:
            m.start()
        return m

    return make
