"""The execution boundary (issue 23, docs/security.md "Execution boundary",
roles/client/live/sandbox.c): on the secure default a task of alice cannot reach bob's
task, the node's keys, state or configuration, the grid's keys, or the client's process;
tasks still work normally; the client not running as root; the refusal where namespaces
are unavailable and the explicit opt-out. Every attack is made by a real task and its
failure read from the task's own output. Real cluster and clients on loopback, processes
started through conftest's registry and stopped by PID, every wait bounded.
"""

import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from conftest import (FAST_CLIENT as CLIENT, FAST_CLUSTER as FAST, SUITE_KEYS, TYPES as T,
                      Proc, Rpc, scaled, wait_until, write_keypair)

CLIENT_SANDBOX = True   # conftest client_factory: the shipped execution boundary

POOL = (61000, 61127)  # client.slot_uids' default


class Grid:
    """A cluster admitting the users alice and bob, and one client whose keys, config
    and state lie in the directory the users' jobs start in (workdir/shared's parent),
    readable by any uid: only the boundary keeps tasks out of them."""

    def __init__(self, workdir, cluster_factory, client_factory):
        self.dir = workdir
        workdir.chmod(0o755)
        keys = workdir / "keys"  # the grid's keys (scripts/grid's layout)
        keys.mkdir(mode=0o755)
        self.pub = {}
        for name in ("alice", "bob"):
            self.pub[name], _ = write_keypair(keys, name)
        self.auth = keys / "authorized_keys"
        self.auth.write_text("%s grid admin\n%s alice user\n%s bob user\n" % (
            SUITE_KEYS["public"], self.pub["alice"], self.pub["bob"]))
        self.auth.chmod(0o644)
        self.keys = keys
        nk = workdir / "nodekeys"  # the node's own key and the keys it admits
        nk.mkdir(mode=0o755)
        shutil.copy(os.environ["GRIDNODE_KEY"], nk / "node.key")
        (nk / "node.key").chmod(0o600)
        shutil.copy(self.auth, nk / "authorized_keys")
        (nk / "authorized_keys").chmod(0o644)
        self.nodekeys = nk
        conf = workdir / "conf"
        conf.mkdir(mode=0o755)
        self.ini = conf / "client.ini"
        self.ini.write_text("[client]\nslots = 4\n; a secret-looking line\ncode = conf-secret\n")
        self.ini.chmod(0o644)
        self.shared = workdir / "shared"
        self.shared.mkdir(mode=0o1777)
        self.shared.chmod(0o1777)
        self.cl = cluster_factory(dict(FAST, **{"security.authorized_keys": self.auth}))
        env = {"GRIDNODE_KEY": nk / "node.key", "GRIDNODE_AUTHORIZED_KEYS": nk / "authorized_keys",
               "GRIDNODE_SECRET_TEST": "client-env-secret"}
        (self.node,) = client_factory(self.cl, 1, sets=CLIENT, env=env, args=("-c", self.ini))
        wait_until(lambda: "sandbox:" in self.node.log(), scaled(20), msg="the sandbox's start")

    def rpc(self, name):
        return Rpc(self.cl.endpoint, key=str(self.keys / (name + ".key")), timeout=scaled(10))

    def submit(self, who, script, **kw):
        kw.setdefault("chdir", str(self.shared))
        if kw["chdir"] is None:  # the task's own fresh directory
            del kw["chdir"]
        r = self.rpc(who).call(T["SUBMIT"], argv=[script], shell=True, ntasks=1, **kw)
        assert r["t"] == T["SUBMITTED"], r
        return r["job"]

    def task(self, jid):
        r = self.cl.client().ok("JOB_GET", "JOB", job=jid, tasks=True, output=True, count=10)
        t = r["tasks"][0]
        for k in ("stdout", "stderr"):
            if isinstance(t.get(k), bytes):
                t[k] = t[k].decode(errors="replace")
        return r["job"], t

    def wait_done(self, jid, timeout=60):
        return wait_until(lambda: self.task(jid)[0]["state"] in ("done", "failed", "cancelled")
                          and self.task(jid), scaled(timeout), msg="job %d ends" % jid)


@pytest.fixture
def grid(workdir, cluster_factory, client_factory):
    return Grid(workdir, cluster_factory, client_factory)


def host_pid_of(marker, timeout=20):
    """The host PID of the process whose command line holds marker."""
    def find():
        for p in Path("/proc").iterdir():
            if p.name.isdigit():
                try:
                    if marker.encode() in (p / "cmdline").read_bytes():
                        return int(p.name)
                except OSError:
                    pass
        return None
    return wait_until(find, scaled(timeout), msg="process %s" % marker)


def attempts(pairs):
    """A shell script making each attack; prints 'BLOCKED name' or 'LEAK name'."""
    lines = []
    for name, cmd in pairs:
        lines.append("if ( %s ) >/dev/null 2>&1; then echo LEAK %s; else echo BLOCKED %s; fi"
                     % (cmd, name, name))
    return "\n".join(lines)


def test_alice_cannot_reach_bob_the_node_or_the_grid(grid):
    g = grid
    # bob's task: a secret in its own directory and in its /tmp, then waits
    bob = g.submit("bob", "echo bob-secret > secret.txt; echo tmp-secret > /tmp/bob-tmp; "
                          "sleep 120; : bobmarker", chdir=None)
    found = wait_until(lambda: list((g.node.state_dir / "work").glob("*/secret.txt")),
                       scaled(30), msg="bob's task")
    bob_pwd = str(found[0].parent)
    assert oct(found[0].parent.stat().st_mode & 0o777) == "0o700"
    bob_pid = host_pid_of("bobmarker")
    client_pid = g.node.pid
    pairs = [
        ("list-bob-dir", "ls -A %s | grep -q ." % bob_pwd),
        ("read-bob-secret", "cat %s/secret.txt" % bob_pwd),
        # alice's own directory is beneath the same parent: it is all she sees there
        ("list-sibling-dirs", "ls -A %s | grep -qx %s" % (os.path.dirname(bob_pwd),
                                                          os.path.basename(bob_pwd))),
        ("read-node-key", "cat %s/node.key" % g.nodekeys),
        ("read-node-authorized", "cat %s/authorized_keys" % g.nodekeys),
        ("list-grid-keys", "ls -A %s | grep -q ." % g.keys),
        ("read-grid-key", "cat %s/alice.pub" % g.keys),
        ("read-suite-keys", "ls -A %s | grep -q ." % SUITE_KEYS["dir"]),
        ("read-config", "cat %s" % g.ini),
        # beneath the node's state directory: the path to her own directory, nothing else
        ("list-node-state", "ls -A %s | grep -vqx work" % g.node.state_dir),
        ("read-node-store", "cat %s/data.mdb" % g.node.state_dir),
        ("client-cmdline", "cat /proc/%d/cmdline" % client_pid),
        ("client-environ", "cat /proc/%d/environ" % client_pid),
        ("init-environ", "cat /proc/1/environ"),
        ("init-fds", "ls /proc/1/fd"),
        ("signal-bob", "kill -0 %d" % bob_pid),
        ("signal-client", "kill -0 %d" % client_pid),
        ("see-bob-proc", "test -e /proc/%d" % bob_pid),
        ("bob-tmp", "cat /tmp/bob-tmp"),
        # the client's own GRIDNODE_ variables; the task's checkpoint directory is its own
        ("gridnode-env", "env | grep -v '^GRIDNODE_CHECKPOINT_DIR=' | grep -q GRIDNODE_"),
    ]
    alice = g.submit("alice", attempts(pairs) + "\nls /proc | grep -c '^[0-9]'; id -u")
    job, t = g.wait_done(alice)
    out = t["stdout"]
    assert t["exit"] == 0, t
    for name, _ in pairs:
        assert "BLOCKED %s\n" % name in out, (name, out, t["stderr"])
    assert "LEAK" not in out, out
    nprocs, uid = out.strip().splitlines()[-2:]
    assert int(nprocs) <= 6, out  # her shell, its children, the init: not the host's
    assert POOL[0] <= int(uid) <= POOL[1], out
    # bob's task is untouched, and ends at once when cancelled (its whole namespace)
    os.kill(bob_pid, 0)
    assert g.task(bob)[0]["state"] == "running"
    g.rpc("bob").call(T["CANCEL"], job=bob)
    wait_until(lambda: not os.path.exists("/proc/%d" % bob_pid), scaled(20),
               msg="bob's process gone after the cancel")


def test_tasks_still_work(grid):
    g = grid
    script = ("id -u; echo out; echo err >&2; cat; echo \"$GREETING\"; pwd; "
              "stat -c %a .; ls -A; test -w /tmp && echo tmp-ok; exit 3")
    j = g.submit("alice", script, stdin=[b"from-stdin\n"], env=["GREETING=hello"], chdir=None)
    job, t = g.wait_done(j)
    lines = t["stdout"].splitlines()
    assert POOL[0] <= int(lines[0]) <= POOL[1], t
    assert lines[1:4] == ["out", "from-stdin", "hello"], t
    assert lines[4].startswith(str(g.node.state_dir)), t  # its own directory
    assert lines[5] == "700", t
    assert lines[6:] == [".gridnode-checkpoint", ".stdin", "tmp-ok"], t  # issue 26
    assert t["stderr"] == "err\n" and t["exit"] == 3, t
    # the job's directory (submit --chdir) is where it starts, and shared
    j = g.submit("alice", "pwd; echo made > by-alice")
    job, t = g.wait_done(j)
    assert t["stdout"] == "%s\n" % g.shared and (g.shared / "by-alice").read_text() == "made\n"
    # a --chdir into the node's private directories is refused with the reason
    j = g.submit("alice", "pwd", chdir=str(g.nodekeys))
    job, t = g.wait_done(j)
    assert "keeps it private" in t.get("error", ""), t
    # wall-clock limit: SIGTERM reaches the task (not only its init)
    j = g.submit("alice", "trap 'echo got-term; exit 7' TERM; sleep 30 & wait", limit_s=1)
    job, t = g.wait_done(j)
    assert t["timeout"] is True and "got-term" in t["stdout"], t
    # no network unless asked: the cluster's port is not reachable
    port = g.cl.endpoint.rsplit(":", 1)[1]
    j = g.submit("alice", "python3 -c 'import socket; socket.create_connection((\"127.0.0.1\", "
                          "%s), 2)' && echo connected || echo no-network" % port)
    job, t = g.wait_done(j)
    assert t["stdout"].strip().endswith("no-network"), t


def test_client_not_root_sandboxes_in_a_user_namespace(cluster_factory, procs, gridnode_bin,
                                                       workdir):
    uid = 64123
    base = Path(tempfile.mkdtemp(prefix="gridnode-nonroot."))
    try:
        os.chown(base, uid, uid)
        keys = base / "keys"
        keys.mkdir()
        shutil.copy(os.environ["GRIDNODE_KEY"], keys / "node.key")
        shutil.copy(os.environ["GRIDNODE_SERVER_KEY"], keys / "server.pub")
        shutil.copy(os.environ["GRIDNODE_AUTHORIZED_KEYS"], keys / "authorized_keys")
        for p in (keys, keys / "node.key", keys / "server.pub", keys / "authorized_keys"):
            os.chown(p, uid, uid)
        (keys / "node.key").chmod(0o600)
        shared = base / "shared"
        shared.mkdir(mode=0o777)
        os.chown(shared, uid, uid)
        cl = cluster_factory(FAST)
        env = {"GRIDNODE_KEY": keys / "node.key", "GRIDNODE_SERVER_KEY": keys / "server.pub",
               "GRIDNODE_AUTHORIZED_KEYS": keys / "authorized_keys"}
        args = ["setpriv", "--reuid=%d" % uid, "--regid=%d" % uid, "--clear-groups",
                gridnode_bin, "client", "--set", "client.server=%s" % cl.endpoint,
                "--set", "client.state_dir=%s" % (base / "state"), "--set", "client.name=nr"]
        for k, v in CLIENT.items():
            args += ["--set", "%s=%s" % (k, v)]
        node = Proc(procs, args, workdir / "nr.log", env=env)
        wait_until(lambda: "user namespace" in node.log() or node.popen.poll() is not None,
                   scaled(20), msg="the client's start")
        assert "sandbox: user namespace (uid %d" % uid in node.log(), node.log()
        script = attempts([
            ("read-own-key", "cat %s" % (keys / "node.key")),
            ("list-state", "ls -A %s | grep -vqx work" % (base / "state")),
            ("client-environ", "cat /proc/%d/environ" % node.pid),
            ("init-environ", "cat /proc/1/environ"),
            ("init-mem", "head -c1 /proc/1/mem"),
        ]) + "\nid -u; echo ok > %s/x" % shared
        r = cl.client().ok("SUBMIT", "SUBMITTED", argv=[script], shell=True, ntasks=1,
                           chdir=str(shared))
        jid = r["job"]

        def done():
            j = cl.client().ok("JOB_GET", "JOB", job=jid, tasks=True, output=True, count=1)
            return j["job"]["state"] in ("done", "failed") and j["tasks"][0]
        t = wait_until(done, scaled(60), msg="the task")
        out = t["stdout"].decode()
        assert "LEAK" not in out and out.count("BLOCKED") == 5, out
        assert out.strip().splitlines()[-1] == str(uid), out
        assert (shared / "x").read_text() == "ok\n"
        node.stop(signal.SIGTERM, timeout=scaled(10))
    finally:
        shutil.rmtree(base, ignore_errors=True)


def _client_in_userns(gridnode_bin, workdir, cl, extra, limit_ns):
    """gridnode client as root of a user namespace of its own whose PID and mount
    namespace limits are 0 when limit_ns: no namespace can be made below it."""
    zero = ("echo 0 > /proc/sys/user/max_pid_namespaces && "
            "echo 0 > /proc/sys/user/max_mnt_namespaces && " if limit_ns else "")
    cmd = ["unshare", "--user", "--map-root-user", "sh", "-c", zero + 'exec "$@"', "sh",
           gridnode_bin, "client", "--set", "client.server=%s" % cl.endpoint,
           "--set", "client.state_dir=%s" % (workdir / "ns"), "--set", "client.name=ns"]
    for k, v in list(CLIENT.items()) + list(extra.items()):
        cmd += ["--set", "%s=%s" % (k, v)]
    return cmd


def test_refuses_without_namespaces_unless_the_operator_opts_out(cluster_factory, procs,
                                                                 gridnode_bin, workdir):
    cl = cluster_factory(FAST)
    r = subprocess.run(_client_in_userns(gridnode_bin, workdir, cl, {}, True),
                       capture_output=True, text=True, timeout=scaled(30),
                       stdin=subprocess.DEVNULL)
    assert r.returncode != 0, r
    assert "cannot sandbox tasks" in r.stderr and "client.sandbox = off" in r.stderr, r.stderr
    # the explicit opt-out: runs, and says so at start
    node = Proc(procs, _client_in_userns(gridnode_bin, workdir, cl, {"client.sandbox": "false"},
                                         True), workdir / "optout.log")
    wait_until(lambda: "volunteer client" in node.log() or node.popen.poll() is not None,
               scaled(20), msg="the client's start")
    assert node.popen.poll() is None, node.log()
    assert "client.sandbox = off: tasks run without the execution boundary" in node.log()
    r = cl.client().ok("SUBMIT", "SUBMITTED", argv=["echo", "unboxed"], ntasks=1)

    def done():
        j = cl.client().ok("JOB_GET", "JOB", job=r["job"], tasks=True, output=True, count=1)
        return j["job"]["state"] == "done" and j["tasks"][0]
    assert wait_until(done, scaled(30), msg="the task")["stdout"] == b"unboxed\n"
    node.stop(signal.SIGTERM, timeout=scaled(10))
