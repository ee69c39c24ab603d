"""System tests of the shared daemon skeleton (daemon/daemon.c) and the state-directory
lock, against real processes on loopback (issue #8 items 1, 4 and 13).

* a peer that sends many requests and never reads its replies: the cluster's memory
  stays bounded (limits.peer_queue), other peers are still served, the log says
  replies were dropped;
* a multi-frame request is refused with MALFORMED and its frames are freed;
* two processes on one state directory: the second cluster / client exits non-zero
  naming the directory and the holder's PID, the first keeps working, `gridnode dump`
  still reads the state, and after kill -9 of the holder a restart succeeds.
"""

import json
import os
import re
import signal
import subprocess
import time

import pytest

from conftest import ASAN, ERRORS, TYPES, curve_client, scaled, wait_until

# Memory measurements need freed memory to leave the process: ASan would otherwise hold
# up to 256 MiB of freed blocks in its quarantine (use-after-free detection).
MEM_ENV = {"ASAN_OPTIONS": ":".join(
    x for x in (os.environ.get("ASAN_OPTIONS", ""), "quarantine_size_mb=0") if x)} \
    if ASAN else {}


def rss_kb(pid, field="VmRSS"):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise AssertionError("no %s for pid %d" % (field, pid))


def run(binary, *args, timeout=30):
    return subprocess.run([binary] + [str(a) for a in args], capture_output=True, text=True,
                          timeout=scaled(timeout), stdin=subprocess.DEVNULL)


def raw_dealer(endpoint, **opts):
    import zmq
    from conftest import _zmq
    _, ctx = _zmq()
    s = ctx.socket(zmq.DEALER)
    s.setsockopt(zmq.LINGER, 0)
    for k, v in opts.items():
        s.setsockopt(getattr(zmq, k), v)
    curve_client(s)
    s.connect(endpoint)
    return s


# ---------------------------------------------------------------------------
# item 1: replies to a peer that never reads are bounded


def test_unread_replies_are_bounded_and_logged(cluster_factory):
    import msgpack
    cl = cluster_factory({"store.sync": "none", "limits.peer_queue": 200}, env=MEM_ENV)
    rpc = cl.client()
    # a job whose JOB reply is a few KB (one line per task)
    job = rpc.ok("SUBMIT", expect="SUBMITTED", argv=["/bin/echo", "{i}"], ntasks=300)["job"]
    size = len(msgpack.packb(rpc.ok("JOB_GET", expect="JOB", job=job, tasks=True)))
    assert size > 3000, size
    base = rss_kb(cl.pid)
    # The flooding peer: it never reads and keeps little in its own buffers.
    s = raw_dealer(cl.endpoint, SNDHWM=0, RCVHWM=1, RCVBUF=4096)
    try:
        sent, deadline = 0, time.monotonic() + scaled(120)
        while sent < 40000 and time.monotonic() < deadline:
            s.send(msgpack.packb({"v": 1, "t": TYPES["JOB_GET"], "id": sent + 1, "job": job,
                                 "tasks": True}))
            sent += 1
        assert sent == 40000
        # another peer is still served while the flood is processed
        other = cl.connect()
        assert other.ok("NODE_LIST", expect="NODES") is not None
        wait_until(lambda: "replies dropped" in cl.log(), scaled(60), msg="drop report")
        # let the cluster work through the whole flood, then check its peak memory
        wait_until(lambda: other.call("NODE_LIST")["t"] == TYPES["NODES"] and
                   rss_kb(cl.pid) > 0 and _quiet(cl), scaled(120), interval=1,
                   msg="flood processed")
        peak = rss_kb(cl.pid, "VmHWM")
        # 40,000 unread replies of >3 KB would be >120 MB; 200 queued ones are <1 MB.
        assert peak - base < 60 * 1024, (base, peak, size)
        m = re.search(r"replies dropped: (\d+) to (\S+)", cl.log())
        assert m and int(m.group(1)) > 0 and m.group(2) == "127.0.0.1", cl.log()[-2000:]
        assert "limits.peer_queue = 200" in cl.log()
        assert other.ok("JOB_GET", expect="JOB", job=job)["job"]["job"] == job
    finally:
        s.close(0)
    assert cl.alive()


def _quiet(cl):
    """True once the cluster's CPU time stops growing for a second (flood processed)."""
    def cpu():
        with open("/proc/%d/stat" % cl.pid) as f:
            parts = f.read().rsplit(")", 1)[1].split()
        return int(parts[11]) + int(parts[12])
    a = cpu()
    time.sleep(1)
    return cpu() - a <= 2


# ---------------------------------------------------------------------------
# item 4: multi-frame requests


def test_multiframe_request_refused_and_freed(cluster_factory):
    import msgpack
    cluster = cluster_factory({"store.sync": "none"}, env=MEM_ENV)
    base = rss_kb(cluster.pid)
    s = raw_dealer(cluster.endpoint)
    try:
        big = b"\0" * (16 << 20)
        body = msgpack.packb({"v": 1, "t": TYPES["NODE_LIST"], "id": 7})
        s.send_multipart([body, big, big, big], copy=False)
        assert s.poll(int(scaled(30) * 1000)), "no reply to a multi-frame request"
        frames = s.recv_multipart()
        r = msgpack.unpackb(frames[-1], raw=False)
        assert len(frames) == 1 and r["t"] == TYPES["ERROR"], r
        assert r["code"] == ERRORS["MALFORMED"] and r["id"] == 0 and "one frame" in r["msg"]
        # the 48 MiB were released (large frames are separate mappings)
        wait_until(lambda: rss_kb(cluster.pid) - base < 24 * 1024, scaled(20),
                   msg="multi-frame request freed")
        # the same connection is still served
        s.send(body)
        assert s.poll(int(scaled(10) * 1000))
        assert msgpack.unpackb(s.recv(), raw=False)["t"] == TYPES["NODES"]
    finally:
        s.close(0)


# ---------------------------------------------------------------------------
# item 13: one process per state directory


LOCKED = re.compile(r"state directory (\S+) is in use by another gridnode process "
                    r"\(pid (\d+)\); stop it first")


def test_second_cluster_on_same_state_dir_refused(cluster_factory, gridnode_bin):
    cl = cluster_factory({"store.sync": "none"})
    job = cl.client().ok("SUBMIT", expect="SUBMITTED", argv=["/bin/true"], ntasks=2)["job"]
    endpoint_before = (cl.state_dir / "endpoint").read_text()
    r = run(gridnode_bin, "cluster", "--set", "cluster.state_dir=%s" % cl.state_dir,
            "--set", "cluster.listen=tcp://127.0.0.1:*")
    assert r.returncode != 0
    m = LOCKED.search(r.stderr)
    assert m, r.stderr
    assert m.group(1) == str(cl.state_dir) and int(m.group(2)) == cl.pid
    assert "listening" not in r.stdout
    # the first one keeps working, its endpoint file untouched
    assert (cl.state_dir / "endpoint").read_text() == endpoint_before
    assert cl.client().ok("JOB_GET", expect="JOB", job=job)["job"]["job"] == job
    assert (cl.state_dir / "lock").read_text().strip() == str(cl.pid)
    # read-only access still works while the cluster runs
    d = run(gridnode_bin, "dump", cl.state_dir, "--json")
    assert d.returncode == 0, d.stderr
    # kill -9: the kernel drops the lock, a restart on the same state works
    cl.kill(signal.SIGKILL)
    cl.restart()
    assert cl.client().ok("JOB_GET", expect="JOB", job=job)["job"]["job"] == job
    assert (cl.state_dir / "lock").read_text().strip() == str(cl.pid)


def test_second_client_on_same_state_dir_refused(cluster, client_factory, gridnode_bin,
                                                 procs, workdir):
    from conftest import Client
    (node,) = client_factory(cluster)
    lock = node.state_dir / "lock"
    wait_until(lambda: lock.exists() and lock.read_text().strip() == str(node.pid),
               scaled(15), msg="client lock")
    r = run(gridnode_bin, "client", "--set", "client.server=%s" % cluster.endpoint,
            "--set", "client.state_dir=%s" % node.state_dir, "--set", "client.name=dup")
    assert r.returncode != 0
    m = LOCKED.search(r.stderr)
    assert m and m.group(1) == str(node.state_dir) and int(m.group(2)) == node.pid, r.stderr
    assert node.alive()
    job = cluster.rpc("SUBMIT", argv=["/bin/echo", "{i}"], ntasks=3)["job"]
    wait_until(lambda: cluster.rpc("JOB_GET", job=job)["job"]["state"] == "done", scaled(30),
               msg="job done by the first client")
    names = {n.get("node") for n in cluster.rpc("NODE_LIST")["nodes"]}
    assert names == {"node1"}, names
    # kill -9 of the holder: a new client on the same state starts and takes the lock
    node.stop(signal.SIGKILL)
    again = Client(procs, gridnode_bin, "node1", node.state_dir, cluster.endpoint, None, None,
                   workdir / "node1.again.log")
    wait_until(lambda: lock.read_text().strip() == str(again.pid), scaled(15),
               msg="restarted client holds the lock")
    job2 = cluster.rpc("SUBMIT", argv=["/bin/echo", "{i}"], ntasks=2)["job"]
    wait_until(lambda: cluster.rpc("JOB_GET", job=job2)["job"]["state"] == "done", scaled(30),
               msg="job done by the restarted client")
    assert again.alive()


# ---------------------------------------------------------------------------
# scripts/grid up after a crash


def _free_port():
    import socket
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def _free_runs(n, length):
    """n base ports, each the first of `length` consecutive free ports, all distinct."""
    import socket
    held, bases = [], []
    try:
        while len(bases) < n:
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            base = s.getsockname()[1]
            run = [s]
            try:
                for k in range(1, length):
                    t = socket.socket()
                    run.append(t)
                    t.bind(("127.0.0.1", base + k))
            except OSError:
                for t in run:
                    t.close()
                continue
            held += run
            bases.append(base)
        return bases
    finally:
        for s in held:
            s.close()


def test_grid_up_after_crash_starts_no_duplicates(gridnode_bin, workdir):
    from conftest import REPO
    grid = str(REPO / "scripts" / "grid")
    d = workdir / "g"
    env = dict(os.environ, GRIDNODE_BIN=gridnode_bin)
    seen = set()

    def sh(*args):
        r = subprocess.run([grid] + list(args) + ["--dir", str(d)], capture_output=True,
                           text=True, timeout=scaled(60), env=env, stdin=subprocess.DEVNULL)
        for f in (d / "pids").glob("*.pid"):
            seen.add(int(f.read_text()))
        return r

    def pid(name):
        return int((d / "pids" / ("%s.pid" % name)).read_text())

    try:
        r = sh("up", "--clients", "2", "--port", str(_free_port()))
        assert r.returncode == 0, r.stdout + r.stderr
        assert "started 3, kept 0" in r.stdout
        nodes = {n: pid(n) for n in ("node1", "node2")}
        seen.update(nodes.values())
        wait_until(lambda: all((d / n / "lock").exists() and
                               (d / n / "lock").read_text().strip() == str(p)
                               for n, p in nodes.items()), scaled(15), msg="client locks")
        # the cluster crashes; `up` restarts it and keeps the running clients
        old = pid("cluster")
        os.kill(old, signal.SIGKILL)
        wait_until(lambda: not os.path.exists("/proc/%d/cmdline" % old) or
                   open("/proc/%d/stat" % old).read().split(")")[1].split()[0] == "Z",
                   scaled(10), msg="cluster gone")
        r = sh("up", "--clients", "2")
        assert r.returncode == 0, r.stdout + r.stderr
        assert "started 1, kept 2" in r.stdout, r.stdout
        assert {n: pid(n) for n in nodes} == nodes
        # a lost PID file: the duplicate client refuses the locked state and is reported
        (d / "pids" / "node1.pid").unlink()
        r = sh("up", "--clients", "2")
        assert r.returncode != 0
        assert "node1 exited at once" in r.stderr and "in use by another gridnode process" \
            in r.stderr and "(pid %d)" % nodes["node1"] in r.stderr, r.stderr
        assert os.path.exists("/proc/%d" % nodes["node1"])
        assert (d / "node1" / "lock").read_text().strip() == str(nodes["node1"])
    finally:
        sh("down")
        for p in seen:  # whatever `down` left, only if it is still a gridnode process
            try:
                with open("/proc/%d/cmdline" % p, "rb") as f:
                    if b"gridnode" in f.read():
                        os.kill(p, signal.SIGKILL)
            except OSError:
                pass


def test_grid_up_with_batch_runs_jobs_through_the_scheduler(gridnode_bin, workdir):
    """`scripts/grid up --batch`: a batch role drives the cluster; jobs submitted to it run
    on the grid's clients; `status` shows its queue; `down` stops it with the rest."""
    from conftest import REPO
    grid = str(REPO / "scripts" / "grid")
    d = workdir / "gb"
    env = dict(os.environ, GRIDNODE_BIN=gridnode_bin)
    bport = _free_port()
    pids = set()

    def sh(*args):
        r = subprocess.run([grid] + list(args) + ["--dir", str(d)], capture_output=True,
                           text=True, timeout=scaled(60), env=env, stdin=subprocess.DEVNULL)
        for f in (d / "pids").glob("*.pid"):
            pids.add(int(f.read_text()))
        return r

    try:
        r = sh("up", "--clients", "2", "--port", str(_free_port()), "--batch-port", str(bport))
        assert r.returncode == 0, r.stdout + r.stderr
        assert "started 4, kept 0" in r.stdout and "batch scheduler on" in r.stdout, r.stdout
        ep = "tcp://127.0.0.1:%d" % bport
        # the grid is secure with its own keys: use the ones `up` printed
        assert "GRIDNODE_KEY=%s/keys/admin.key" % d in r.stdout, r.stdout
        tool_env = dict(os.environ, GRIDNODE_KEY=str(d / "keys" / "admin.key"),
                        GRIDNODE_SERVER_KEY=str(d / "keys" / "server.pub"))
        r = subprocess.run([gridnode_bin, "submit", "-e", ep, "-n", "3", "--wait",
                            "--timeout", str(int(scaled(10) * 1000)), "--", "true"],
                           capture_output=True, text=True, timeout=scaled(120), env=tool_env)
        assert r.returncode == 0, r.stdout + r.stderr
        r = sh("status")
        assert r.returncode == 0 and "batch: running" in r.stdout, r.stdout + r.stderr
        assert "active jobs" in r.stdout, r.stdout
        r = sh("down")
        assert r.returncode == 0
        for p in pids:
            wait_until(lambda: not os.path.exists("/proc/%d/cmdline" % p) or
                       open("/proc/%d/stat" % p).read().split(")")[1].split()[0] == "Z",
                       scaled(15), msg="pid %d stopped" % p)
    finally:
        sh("down")
        for p in pids:
            try:
                with open("/proc/%d/cmdline" % p, "rb") as f:
                    if b"gridnode" in f.read():
                        os.kill(p, signal.SIGKILL)
            except OSError:
                pass


def test_grid_up_meta_runs_a_job_through_every_level(gridnode_bin, workdir):
    """`scripts/grid up --meta`: a meta role over two batch sites, each with its cluster
    manager and a client; a job submitted at the top runs on a client of one site and
    its result is seen at every level; `status` covers every role; `down` leaves no
    process behind."""
    from conftest import REPO
    grid = str(REPO / "scripts" / "grid")
    d = workdir / "gm"
    env = dict(os.environ, GRIDNODE_BIN=gridnode_bin)
    ports = _free_runs(3, 2)  # cluster ports, batch ports (P, P+1 each), the meta port
    pids = set()

    def sh(*args):
        r = subprocess.run([grid] + list(args) + ["--dir", str(d)], capture_output=True,
                           text=True, timeout=scaled(60), env=env, stdin=subprocess.DEVNULL)
        for f in (d / "pids").glob("*.pid"):
            pids.add(int(f.read_text()))
        return r

    def tool(*args):  # as the grid's admin (scripts/grid made the grid's keys)
        tenv = dict(os.environ, GRIDNODE_KEY=str(d / "keys" / "admin.key"),
                    GRIDNODE_SERVER_KEY=str(d / "keys" / "server.pub"))
        tenv.pop("GRIDNODE_PLAIN", None)
        r = subprocess.run([gridnode_bin] + [str(a) for a in args], capture_output=True,
                           text=True, timeout=scaled(30), stdin=subprocess.DEVNULL, env=tenv)
        assert r.returncode == 0, r.stdout + r.stderr
        return r.stdout

    try:
        r = sh("up", "--meta", "--sites", "2", "--clients", "1", "--slots", "1",
               "--port", str(ports[0]), "--batch-port", str(ports[1]),
               "--meta-port", str(ports[2]))
        assert r.returncode == 0, r.stdout + r.stderr
        assert "started 7, kept 0" in r.stdout, r.stdout
        meta = "tcp://127.0.0.1:%d" % ports[2]
        # the job's directory, writable by the slot uid its task runs under: the task's
        # /tmp is its own (docs/security.md, "Execution boundary")
        shared = workdir / "shared"
        shared.mkdir(mode=0o1777)
        shared.chmod(0o1777)
        out = shared / "ran-here"
        r = tool("submit", "-e", meta, "--name", "top", "--limit", "60", "--chdir", shared,
                 "--shell", "--", "echo grid-result; echo x > %s" % out)
        jid = int(r.split()[2])

        def row():
            return json.loads(tool("jobs", "-e", meta, "--json"))[0]
        wait_until(lambda: row()["gstate"] == "done", scaled(60), interval=0.3,
                   msg="job done at the spool")
        j = row()
        assert j["job"] == jid and j["site"] in ("site1", "site2") and j["exit"] == 0, j
        assert out.read_text() == "x\n"
        # down the path: the site's job names the cluster job holding the output
        s = int(j["site"][4:])
        sj = json.loads(tool("job", j["site_job"], "-e", "tcp://127.0.0.1:%d" % (ports[1] + s - 1),
                             "--json"))
        cj = json.loads(tool("job", sj["tasks"][0]["cjob"], "-e",
                             "tcp://127.0.0.1:%d" % (ports[0] + s - 1), "--json"))
        assert cj["job"]["ranks"][0]["stdout"] == "grid-result\n"
        assert cj["job"]["hosts"] == ["s%d-node1" % s]
        # the tools' tables at the top show the site
        assert re.search(r"^\s+%d\s+top\s.*\sdone\s+%s\s" % (jid, j["site"]),
                         tool("jobs", "-e", meta), re.M)
        assert "site %s (tcp://127.0.0.1:%d)" % (j["site"], ports[1] + s - 1) in \
            tool("job", jid, "-e", meta)
        r = sh("status")
        assert r.returncode == 0, r.stdout + r.stderr
        for n in ("meta", "site1-batch", "site2-batch", "site1-cluster", "site2-cluster",
                  "site1-node1", "site2-node1"):
            assert "  %s: running" % n in r.stdout, r.stdout
        assert "site2 batch queue" in r.stdout and "grid spool" in r.stdout
        # `up` again keeps everything; after a crash it restarts only what died
        victim = int((d / "pids" / "site2-batch.pid").read_text())
        os.kill(victim, signal.SIGKILL)
        wait_until(lambda: not os.path.exists("/proc/%d/cmdline" % victim) or
                   open("/proc/%d/stat" % victim).read().split(")")[1].split()[0] == "Z",
                   scaled(10), msg="batch gone")
        r = sh("up")  # the DIR remembers the shape (grid.env)
        assert r.returncode == 0 and "started 1, kept 6" in r.stdout, r.stdout + r.stderr
        # `up --only` one role while a role of another site is down (issue 24 item 5)
        for name in ("site2-cluster", "site1-node1"):
            victim = int((d / "pids" / ("%s.pid" % name)).read_text())
            os.kill(victim, signal.SIGKILL)
            wait_until(lambda: not os.path.exists("/proc/%d/cmdline" % victim) or
                       open("/proc/%d/stat" % victim).read().split(")")[1].split()[0] == "Z",
                       scaled(10), msg="%s gone" % name)
        r = sh("up", "--only", "site1-node1")
        assert r.returncode == 0 and "started 1" in r.stdout, r.stdout + r.stderr
        r = sh("up", "--only", "site2-batch")  # its own site's cluster is what it needs
        assert r.returncode != 0 and "site2 cluster is not running" in r.stderr, r.stderr
        r = sh("down")
        assert r.returncode == 0
        for p in pids:
            wait_until(lambda: not os.path.exists("/proc/%d/cmdline" % p) or
                       open("/proc/%d/stat" % p).read().split(")")[1].split()[0] == "Z",
                       scaled(15), msg="pid %d stopped" % p)
    finally:
        sh("down")
        for p in pids:
            try:
                with open("/proc/%d/cmdline" % p, "rb") as f:
                    if b"gridnode" in f.read():
                        os.kill(p, signal.SIGKILL)
            except OSError:
                pass


# ---------------------------------------------------------------------------
# issue 15 item 4: scripts/grid help, refused counts and ports, status after down,
# appended logs, one role restarted alone; make demo's port and kept results

BAD_GRID_ARGS = [
    (["up", "--clients", "0"], "--clients '0' is out of range"),
    (["up", "--clients", "two"], "--clients 'two' is not a whole number"),
    (["up", "--slots", "-1"], "--slots '-1' is not a whole number"),
    (["up", "--clients"], "--clients needs a value"),
    (["up", "--port", "80"], "--port '80' is out of range"),
    (["up", "--port", "70000"], "--port '70000' is out of range"),
    (["up", "--batch", "--port", "7400", "--batch-port", "7400"], "ports overlap"),
    (["up", "--meta", "--sites", "3", "--port", "7400", "--batch-port", "7402"],
     "ports overlap"),
    (["up", "--meta", "--meta-port", "7301"], "--meta-port 7301 is one of the cluster"),
    (["up", "--only", "node9", "--clients", "2"], "no role named 'node9'"),
    (["restart"], "restart needs the name of a role"),
    (["frobnicate"], "unknown command 'frobnicate'"),
]


def test_grid_help_and_bad_arguments(gridnode_bin, workdir):
    from conftest import REPO
    grid = str(REPO / "scripts" / "grid")
    env = dict(os.environ, GRIDNODE_BIN=gridnode_bin)
    for h in (["--help"], ["help"], ["-h"], ["up", "--help"]):
        r = subprocess.run([grid] + h, capture_output=True, text=True, timeout=30, env=env)
        assert r.returncode == 0 and "scripts/grid restart NAME" in r.stdout, (h, r.stderr)
        assert "set -eu" not in r.stdout and "usage()" not in r.stdout, r.stdout  # no source
    for args, want in BAD_GRID_ARGS:
        d = workdir / "bad"
        r = subprocess.run([grid] + args + ["--dir", str(d)], capture_output=True,
                           text=True, timeout=30, env=env, stdin=subprocess.DEVNULL)
        assert r.returncode == 2, (args, r.stdout, r.stderr)
        assert want in r.stderr, (args, r.stderr)
        assert not (d / "pids").exists(), args  # nothing was started


def test_grid_status_logs_and_restart_of_one_role(gridnode_bin, workdir):
    from conftest import REPO
    grid = str(REPO / "scripts" / "grid")
    d = workdir / "g"
    env = dict(os.environ, GRIDNODE_BIN=gridnode_bin)
    seen = set()

    def sh(*args):
        r = subprocess.run([grid] + list(args) + ["--dir", str(d)], capture_output=True,
                           text=True, timeout=scaled(60), env=env, stdin=subprocess.DEVNULL)
        for f in (d / "pids").glob("*.pid"):
            seen.add(int(f.read_text()))
        return r

    def pid(name):
        return int((d / "pids" / ("%s.pid" % name)).read_text())

    try:
        port = _free_port()
        r = sh("up", "--clients", "2", "--port", str(port))
        assert r.returncode == 0, r.stdout + r.stderr
        cl, n1, n2 = pid("cluster"), pid("node1"), pid("node2")
        log1 = (d / "logs" / "node1.log").read_text()
        assert "grid: started client node1 pid %d" % n1 in log1
        # an operator's own line in authorized_keys (a user's key) survives `restart`
        # and `up` (issue 27: they rewrote the file without it)
        kd = workdir / "alice_keys"
        kd.mkdir()
        subprocess.run([gridnode_bin, "keygen", "-d", str(kd), "alice"], check=True,
                       capture_output=True, timeout=30)
        pub = [x for x in (kd / "alice.pub").read_text().splitlines()
               if x and not x.startswith("#")][0]
        auth = d / "keys" / "authorized_keys"
        with open(auth, "a") as f:
            f.write("%s alice user groups=physics\n" % pub)
        # node1 alone restarted: new pid, the others untouched, its log appended
        r = sh("restart", "node1")
        assert r.returncode == 0, r.stdout + r.stderr
        assert "started 1, kept 2" in r.stdout, r.stdout
        assert pid("node1") != n1 and pid("node2") == n2 and pid("cluster") == cl
        log2 = (d / "logs" / "node1.log").read_text()
        assert log2.startswith(log1)
        assert "grid: started client node1 pid %d" % pid("node1") in log2
        assert "%s alice user groups=physics" % pub in auth.read_text()
        # the cluster crashes: status says so by name; `up --only cluster` restarts it on
        # the remembered port and its crashed run's log is still there
        os.kill(cl, signal.SIGKILL)
        wait_until(lambda: not os.path.exists("/proc/%d/cmdline" % cl) or
                   open("/proc/%d/stat" % cl).read().split(")")[1].split()[0] == "Z",
                   scaled(10), msg="cluster gone")
        r = sh("status")
        assert "cluster: not running" in r.stdout and "node2: running (pid %d)" % n2 \
            in r.stdout, r.stdout
        r = sh("up", "--only", "cluster")
        assert r.returncode == 0, r.stdout + r.stderr
        assert "tcp://127.0.0.1:%d" % port in r.stdout and "started 1, kept 2" in r.stdout
        clog = (d / "logs" / "cluster.log").read_text()
        assert "started cluster cluster pid %d" % cl in clog
        assert "started cluster cluster pid %d" % pid("cluster") in clog
        # `up --only node2` of a running role keeps it
        r = sh("up", "--only", "node2")
        assert r.returncode == 0 and "node2 already running" in r.stdout and pid("node2") == n2
        # after down: every role and the whole grid "not running", exit status 1
        r = sh("down")
        assert r.returncode == 0, r.stderr
        r = sh("status")
        assert r.returncode == 1
        for n in ("cluster", "node1", "node2"):
            assert "  %s: not running" % n in r.stdout, r.stdout
        assert "grid: not running" in r.stdout and "running (pid" not in r.stdout
        # a node restarted while its cluster is down: a clear error, nothing started
        r = sh("up", "--only", "node1")
        assert r.returncode == 2 and "cluster is not running; start it first" in r.stderr
        assert not (d / "pids" / "node1.pid").exists()
    finally:
        sh("down")
        for p in seen:
            try:
                with open("/proc/%d/cmdline" % p, "rb") as f:
                    if b"gridnode" in f.read():
                        os.kill(p, signal.SIGKILL)
            except OSError:
                pass


@pytest.mark.slow
def test_make_demo_port_and_kept_results(gridnode_bin, workdir):
    """The demo on a chosen port (DEMO_PORT) keeps each run's results in its own
    demo-<timestamp> directory and leaves an earlier demo's directory alone."""
    from conftest import REPO
    import socket
    for _ in range(50):
        base = _free_port() // 10 * 10
        if base < 1024 or base > 65000:
            continue
        socks = []
        try:
            for p in (base, base + 1, base + 100, base + 101, base + 200):
                s = socket.socket()
                socks.append(s)
                s.bind(("127.0.0.1", p))
            break
        except OSError:
            continue
        finally:
            for s in socks:
                s.close()
    runs = workdir / "runs"
    old = runs / "demo-20000101-000000"
    old.mkdir(parents=True)
    (old / "demo.txt").write_text("an earlier demo\n")
    env = dict(os.environ, DEMO_PORT=str(base), DEMO_RUNS=str(runs), DEMO_JOBS="1")
    r = subprocess.run(["bash", str(REPO / "scripts" / "demo.sh")], capture_output=True,
                       text=True, timeout=scaled(180), env=env, stdin=subprocess.DEVNULL)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    assert (old / "demo.txt").read_text() == "an earlier demo\n"
    new = [p for p in runs.glob("demo-2*") if p != old]
    assert len(new) == 1
    assert "results kept in %s" % new[0] in r.stdout
    assert (runs / "demo-latest").resolve() == new[0].resolve()
    txt = (new[0] / "demo.txt").read_text()
    assert "tcp://127.0.0.1:%d" % (base + 200) in txt and "exit 0" in txt, txt[-2000:]
    assert (new[0] / "logs" / "meta.log").stat().st_size > 0
