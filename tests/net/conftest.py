"""Fixtures for tests/net: the grid across network namespaces joined by emulated links.

This kernel has no netem, so links are emulated in user space: ``build/net/linkemu``
(tests/net/linkemu.c) owns a TUN device in every namespace the test creates and
forwards IPv4 packets between them with delay, jitter, loss, duplication, reordering
and partitions, changed at run time through its stdin (``NetLab.link()``).

* ``netlab(n)``: n namespaces ``gnt<pid>x<i>`` with 10.201.0.<i>/24 on their gnlink0
  (private addresses, used only inside them), and the emulator. Skips, with the
  reason, when not root or when namespaces or /dev/net/tun are unavailable. Everything
  is removed at teardown whatever the outcome: processes first (by PID, through the
  system tests' ProcRegistry), then the emulator (by PID), then the namespaces.
* ``NetLab.cluster(i, sets)``, ``NetLab.clients(i, n, server, sets)``: the roles started
  inside namespace i with the system tests' Cluster and Proc classes.
* ``NetLab.tool(i, *args)``: a user tool (``gridnode submit/job/nodes ...``) run in
  namespace i.

The system tests' conftest is loaded under another module name and its fixtures
(``procs``, ``workdir``, ``gridnode_bin``) are re-exported here.
"""

import atexit
import importlib.util
import json
import os
import select
import signal
import subprocess
import time
from pathlib import Path

import pytest

_spec = importlib.util.spec_from_file_location(
    "gridnode_sysconf", Path(__file__).resolve().parents[1] / "system" / "conftest.py")
sysconf = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(sysconf)

# fixtures and hooks of the system tests, used here as they are
procs = sysconf.procs
workdir = sysconf.workdir
gridnode_bin = sysconf.gridnode_bin
pytest_sessionfinish = sysconf.pytest_sessionfinish
scaled = sysconf.scaled
wait_until = sysconf.wait_until
REPO = sysconf.REPO
SUBNET = "10.201.0."
LINKEMU = os.environ.get("GRIDNODE_LINKEMU", str(Path(sysconf.GRIDNODE_BIN).parent / "net" /
                                                 "linkemu"))
# the asan binary lives in build/asan/: its emulator is the plain build's
if not os.path.exists(LINKEMU):
    LINKEMU = str(Path(sysconf.GRIDNODE_BIN).parent.parent / "net" / "linkemu")


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "slow: long test; `make check` runs it only against the plain binary")


# namespaces made by this process, deleted at exit as a last resort (a test that was
# interrupted before its fixture's teardown)
_NAMESPACES = set()


def _delete_namespaces():
    for nm in list(_NAMESPACES):
        subprocess.run(["ip", "netns", "del", nm], capture_output=True, timeout=10)
        _NAMESPACES.discard(nm)


atexit.register(_delete_namespaces)


def _run(*args, check=True, timeout=10):
    r = subprocess.run([str(a) for a in args], capture_output=True, text=True,
                       timeout=timeout, stdin=subprocess.DEVNULL)
    if check and r.returncode != 0:
        raise RuntimeError("%s failed: %s" % (" ".join(map(str, args)), r.stderr.strip()))
    return r


def _unavailable():
    """Why namespaces cannot be used here, or None."""
    if os.geteuid() != 0:
        return "tests/net need root (network namespaces and TUN devices); CI runs them as root"
    if not os.path.exists("/dev/net/tun"):
        return "tests/net need /dev/net/tun (TUN devices)"
    probe = "gnt%dprobe" % os.getpid()
    r = _run("ip", "netns", "add", probe, check=False)
    if r.returncode != 0:
        return "network namespaces unavailable (ip netns add: %s)" % r.stderr.strip()
    _run("ip", "netns", "del", probe, check=False)
    return None


class NetLab:
    """n network namespaces joined by the link emulator (node numbers from 1)."""

    def __init__(self, registry, binary, workdir, n, seed=None):
        self.registry = registry
        self.binary = binary
        self.workdir = Path(workdir)
        self.names = []
        self.emu = None
        self.seed = seed if seed is not None else int(time.time() * 1000) % 1000003
        try:
            for i in range(1, n + 1):
                name = "gnt%dx%d" % (os.getpid(), i)
                _run("ip", "netns", "add", name)
                self.names.append(name)
                _NAMESPACES.add(name)
            self.emulog = open(self.workdir / "linkemu.log", "ab")
            self.emu = subprocess.Popen(
                [LINKEMU, "--seed", str(self.seed)] +
                ["%s=%s" % (nm, self.addr(i + 1)) for i, nm in enumerate(self.names)],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.emulog)
            line = self._readline(10)
            if not line.startswith("ready"):
                raise RuntimeError("linkemu did not start: %r (log %s)" % (
                    line, self.workdir / "linkemu.log"))
            for i, nm in enumerate(self.names):
                ex = ("ip", "netns", "exec", nm)
                _run(*ex, "ip", "link", "set", "lo", "up")
                _run(*ex, "ip", "addr", "add", "%s/24" % self.addr(i + 1), "dev", "gnlink0")
                _run(*ex, "ip", "link", "set", "gnlink0", "up")
        except BaseException:
            self.close()
            raise

    @staticmethod
    def addr(i):
        return SUBNET + str(i)

    def ns(self, i):
        return self.names[i - 1]

    def _readline(self, timeout):
        fd = self.emu.stdout.fileno()
        buf = b""
        deadline = time.monotonic() + timeout
        while not buf.endswith(b"\n"):
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                raise RuntimeError("linkemu did not answer within %s s" % timeout)
            c = os.read(fd, 1)
            if not c:
                raise RuntimeError("linkemu exited (log %s)" % (self.workdir / "linkemu.log"))
            buf += c
        return buf.decode().strip()

    def link(self, cmd):
        """Sends one emulator command (see tests/net/linkemu.c); returns its answer."""
        self.emu.stdin.write((cmd + "\n").encode())
        self.emu.stdin.flush()
        r = self._readline(10)
        if not r.startswith("ok"):
            raise RuntimeError("linkemu %r: %s" % (cmd, r))
        return r

    def exec_args(self, i, args):
        return ["ip", "netns", "exec", self.ns(i)] + [str(a) for a in args]

    def cluster(self, i, sets=None, name="cluster"):
        """A started cluster listening on node i's address."""
        lab = self

        class NsCluster(sysconf.Cluster):
            def args(self, listen):
                return lab.exec_args(i, super().args(listen))

        s = dict(sets or {})
        s.setdefault("cluster.listen", "tcp://%s:*" % self.addr(i))
        c = NsCluster(self.registry, self.binary, self.workdir / name, sets=s, name=name)
        c.start()
        return c

    def client(self, i, server, name, sets=None):
        """A `gridnode client` in namespace i (a sysconf.Proc; stdout drained)."""
        args = [self.binary, "client", "--set", "client.server=%s" % server.endpoint,
                "--set", "client.state_dir=%s" % (self.workdir / name),
                "--set", "client.name=%s" % name]
        for k, v in (sets or {}).items():
            args += ["--set", "%s=%s" % (k, sysconf._ini(v))]
        p = sysconf.Proc(self.registry, self.exec_args(i, args), self.workdir / (name + ".log"))
        p.name = name
        p.drain_stdout(self.workdir / (name + ".out"))
        return p

    def tool(self, i, *args, timeout=30, check=True):
        """Runs `gridnode ARGS` in namespace i; returns the CompletedProcess."""
        r = subprocess.run(self.exec_args(i, [self.binary] + list(args)), capture_output=True,
                           text=True, timeout=scaled(timeout), stdin=subprocess.DEVNULL)
        if check and r.returncode != 0:
            raise AssertionError("gridnode %s: exit %d\n%s%s" % (
                " ".join(map(str, args)), r.returncode, r.stdout, r.stderr))
        return r

    def tool_json(self, i, *args, **kw):
        return json.loads(self.tool(i, *args, "--json", **kw).stdout)

    def close(self):
        if self.emu is not None:
            try:
                self.emu.stdin.close()  # end of input ends the emulator
            except OSError:
                pass
            try:
                self.emu.wait(5)
            except subprocess.TimeoutExpired:
                os.kill(self.emu.pid, signal.SIGKILL)
                self.emu.wait(5)
            self.emu = None
            self.emulog.close()
        for nm in self.names:
            _run("ip", "netns", "del", nm, check=False)
            _NAMESPACES.discard(nm)
        self.names = []


def _ip4(hexaddr):
    b = bytes.fromhex(hexaddr)
    return ".".join(str(x) for x in reversed(b))


def tcp_established(pid, port, peers=None):
    """Established TCP connections of process pid's namespace on local port `port`
    (only those from the addresses in `peers`, when given)."""
    n = 0
    for f in ("tcp", "tcp6"):
        try:
            lines = Path("/proc/%d/net/%s" % (pid, f)).read_text().splitlines()[1:]
        except OSError:
            continue
        for ln in lines:
            parts = ln.split()
            if int(parts[1].split(":")[1], 16) == port and parts[3] == "01":
                remote = parts[2].split(":")[0]
                n += peers is None or (len(remote) == 8 and _ip4(remote) in peers)
    return n


def fd_count(pid):
    return len(os.listdir("/proc/%d/fd" % pid))


@pytest.fixture
def netlab(procs, gridnode_bin, workdir):
    """netlab(n, seed=None) -> NetLab; torn down after the test's processes."""
    why = _unavailable()
    if why:
        pytest.skip(why)
    if not os.access(LINKEMU, os.X_OK):
        pytest.fail("%s not built: make %s" % (LINKEMU, "build/net/linkemu"))
    labs = []

    def make(n, seed=None):
        lab = NetLab(procs, gridnode_bin, workdir, n, seed)
        labs.append(lab)
        return lab

    try:
        yield make
    finally:
        for p in reversed(procs.procs):  # the roles first, while their links exist
            p.stop(signal.SIGTERM, timeout=scaled(5))  # (procs checks their logs after)
        for lab in labs:
            lab.close()
