"""System tests of the whole foundation path: a real cluster manager, real
`gridnode client` processes running real tasks, the user tools, kills and restarts.

Every process is started through conftest's registry and killed by PID at teardown.
Timings are generous and scaled for the ASan build; no test asserts on speed.
"""

import json
import os
import re
import signal
import subprocess
import time

import pytest

from conftest import FAST_CLIENT as CLIENT, FAST_CLUSTER as FAST, TYPES, curve_server, scaled, wait_until

CLIENT_SANDBOX = True   # conftest client_factory: the shipped execution boundary


def submit(cl, argv, ntasks, **extra):
    r = cl.client().ok("SUBMIT", "SUBMITTED", argv=argv, ntasks=ntasks, **extra)
    return r["job"]


def shared_file(workdir, name):
    """A file the job's tasks share with the test: each task has a private /tmp and runs
    under a slot uid of its own (docs/security.md, "Execution boundary"), so the file is
    made writable for any uid, in a directory the job starts in (submit --chdir)."""
    d = workdir / "shared"
    d.mkdir(exist_ok=True)
    d.chmod(0o1777)
    return d / name


def shared_log(workdir, name):
    """shared_file, made beforehand and writable by any uid (tasks append to it)."""
    f = shared_file(workdir, name)
    f.touch()
    f.chmod(0o666)
    return f


def job(cl, jid, tasks=True, output=True, count=100000):
    """JOB_GET, with each task's stdout/stderr (msgpack bin) decoded to text."""
    r = cl.client().ok("JOB_GET", "JOB", job=jid, tasks=tasks, output=output, count=count)
    for t in r.get("tasks", []):
        for k in ("stdout", "stderr"):
            if isinstance(t.get(k), bytes):
                t[k] = t[k].decode()
    return r


def wait_done(cl, jid, timeout):
    return wait_until(lambda: job(cl, jid, tasks=False)["job"]["state"] in ("done", "failed", "cancelled"),
                      scaled(timeout), interval=0.2, msg="job %d to end" % jid)


def run_cli(gridnode_bin, *args, timeout=30, env=None):
    e = dict(os.environ)
    e.update(env or {})
    return subprocess.run([gridnode_bin] + [str(a) for a in args], capture_output=True,
                          text=True, timeout=scaled(timeout), stdin=subprocess.DEVNULL, env=e)


def test_200_tasks_over_4_clients_exactly_once(cluster_factory, client_factory, workdir):
    # no fault here: a task is issued again only when its node stops answering, not
    # because a busy machine (ASan, sandboxed starts) took more than FAST's 2 s for it
    cl = cluster_factory(dict(FAST, **{"tasks.min_wait_s": 60}))
    client_factory(cl, 4, sets=dict(CLIENT, **{"client.slots": 2}))
    runs = shared_log(workdir, "runs")
    jid = submit(cl, ["echo {i} >> %s; echo $(( {i} * {i} ))" % runs], 200, shell=True,
                 chdir=str(runs.parent))
    wait_done(cl, jid, 120)
    j = job(cl, jid)
    assert j["job"]["done"] == 200 and j["job"]["failed"] == 0
    assert j["job"]["dups"] == 0
    tasks = j["tasks"]
    assert [t["idx"] for t in tasks] == list(range(200))
    for t in tasks:
        assert t["state"] == "ok", t
        assert t["stdout"] == "%d\n" % (t["idx"] * t["idx"]), t
        assert t["exit"] == 0 and t["issues"] == 1
    # every task ran exactly once, as a real process
    lines = runs.read_text().split()
    assert sorted(int(x) for x in lines) == list(range(200))
    nodes = cl.client().ok("NODE_LIST", "NODES")["nodes"]
    assert len(nodes) == 4
    assert sum(n["results"] for n in nodes) == 200
    assert sum(1 for n in nodes if n["results"] > 0) >= 2


def test_client_killed_mid_task_is_reissued(cluster_factory, client_factory):
    cl = cluster_factory(FAST)
    (a,) = client_factory(cl, 1, sets=dict(CLIENT, **{"client.slots": 1}), prefix="a")
    jid = submit(cl, ["sleep 2; echo finished {i}"], 1, shell=True, limit_s=60)
    wait_until(lambda: job(cl, jid)["tasks"][0]["state"] == "issued", scaled(20),
               msg="the task to reach client a")
    a.stop(signal.SIGKILL)
    (b,) = client_factory(cl, 1, sets=dict(CLIENT, **{"client.slots": 1}), prefix="b")
    wait_done(cl, jid, 60)
    t = job(cl, jid)["tasks"][0]
    assert t["state"] == "ok" and t["stdout"] == "finished 0\n"
    assert t["issues"] == 2, t
    nodes = {n["node"]: n for n in cl.client().ok("NODE_LIST", "NODES")["nodes"]}
    assert t["node"] == nodes[b.name]["sid"]
    wait_until(lambda: not {n["node"]: n for n in cl.client().ok(
        "NODE_LIST", "NODES")["nodes"]}[a.name]["active"], scaled(30), msg="a inactive")


def test_cluster_killed_mid_job_loses_nothing(cluster_factory, client_factory):
    cl = cluster_factory(dict(FAST, **{"store.sync": "full"}))
    client_factory(cl, 2, sets=dict(CLIENT, **{"client.slots": 2}))
    jid = submit(cl, ["sleep 0.2; echo out {i}"], 40, shell=True)
    wait_until(lambda: job(cl, jid, tasks=False)["job"]["done"] >= 8, scaled(60),
               msg="8 results")
    jid2 = submit(cl, ["echo second {i}"], 3, shell=True)  # acknowledged just before the kill
    before = {t["idx"]: t for t in job(cl, jid)["tasks"] if t["state"] == "ok"}
    cl.kill(signal.SIGKILL)
    time.sleep(0.5)
    cl.restart()
    after = job(cl, jid)
    for idx, t in before.items():  # every acknowledged result survived, unchanged
        assert after["tasks"][idx]["state"] == "ok"
        assert after["tasks"][idx]["stdout"] == t["stdout"]
        assert after["tasks"][idx]["node"] == t["node"]
    assert job(cl, jid2, tasks=False)["job"]["ntasks"] == 3
    wait_done(cl, jid, 120)
    wait_done(cl, jid2, 60)
    final = job(cl, jid)
    assert final["job"]["done"] == 40 and final["job"]["failed"] == 0
    assert all(t["stdout"] == "out %d\n" % t["idx"] for t in final["tasks"])
    assert all(t["stdout"] == "second %d\n" % t["idx"] for t in job(cl, jid2)["tasks"])


def test_client_restart_reruns_and_reports_from_its_store(cluster_factory, client_factory,
                                                          workdir):
    # k_wait large: the cluster must not re-issue; the restarted client finishes the task
    cl = cluster_factory(dict(FAST, **{"tasks.k_wait": 500, "tasks.k_wait_dead": 600,
                                       "tasks.min_wait_s": 300}))
    sets = dict(CLIENT, **{"client.slots": 1})
    (a,) = client_factory(cl, 1, sets=sets, prefix="a")
    runs = shared_file(workdir, "runs")
    jid = submit(cl, ["echo start >> %s; sleep 1; echo done {i}" % runs], 1, shell=True,
                 chdir=str(runs.parent))
    wait_until(lambda: runs.exists(), scaled(20), msg="the task to start")
    a.stop(signal.SIGKILL)
    # the same command line, so the same name and state dir: a restarted client
    restarted = subprocess.Popen(a.args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                 stderr=open(workdir / "a1-restart.log", "wb"))
    try:
        wait_done(cl, jid, 60)
        t = job(cl, jid)["tasks"][0]
        assert t["state"] == "ok" and t["stdout"] == "done 0\n" and t["issues"] == 1
        assert runs.read_text().count("start") == 2  # rerun after the restart
        log = (workdir / "a1-restart.log").read_text()
        assert "1 task(s) to rerun" in log
    finally:
        restarted.kill()
        restarted.wait(timeout=10)


def test_finished_result_kept_while_server_down(cluster_factory, client_factory, workdir):
    cl = cluster_factory(dict(FAST, **{"tasks.k_wait": 500, "tasks.k_wait_dead": 600,
                                       "tasks.min_wait_s": 300, "store.sync": "full"}))
    (a,) = client_factory(cl, 1, sets=dict(CLIENT, **{"client.slots": 1}), prefix="a")
    flag = shared_file(workdir, "started")
    jid = submit(cl, ["touch %s; sleep 1.5; echo result {i}" % flag], 1, shell=True,
                 chdir=str(flag.parent))
    wait_until(lambda: flag.exists(), scaled(20), msg="the task to start")
    cl.kill(signal.SIGKILL)  # the client cannot report the result
    wait_until(lambda: "task %d.0 finished" % jid in a.log(), scaled(20),
               msg="the task to finish")
    a.stop(signal.SIGKILL)  # and then dies before reporting it
    cl.restart()
    restarted = subprocess.Popen(a.args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                 stderr=open(workdir / "a1-restart.log", "wb"))
    try:
        wait_done(cl, jid, 60)
        t = job(cl, jid)["tasks"][0]
        assert t["stdout"] == "result 0\n" and t["issues"] == 1
        assert "1 finished result(s) to report" in (workdir / "a1-restart.log").read_text()
    finally:
        restarted.kill()
        restarted.wait(timeout=10)


def test_client_backs_off_then_connects(cluster_factory, client_factory):
    """No server: the client waits for the connection without counting failures (issue
    16: a send on a still-connecting socket is no failed round). A server that accepts
    but never answers (overloaded): randomized exponential backoff, capped. Then a real
    cluster on that port serves the client."""
    import zmq
    cl = cluster_factory(FAST, start=False)
    port = _free_port()
    ep = "tcp://127.0.0.1:%d" % port
    (a,) = client_factory(ep, 1, sets=dict(CLIENT, **{"rpc.timeout_ms": 300}))
    wait_until(lambda: "waiting for the connection" in a.log(), scaled(10), msg="waiting")
    time.sleep(1)
    assert "retry" not in a.log()
    ctx = zmq.Context()
    mute = curve_server(ctx.socket(zmq.ROUTER))
    mute.linger = 0
    mute.bind(ep)
    try:
        wait_until(lambda: len(re.findall(r"retry \d+ in", a.log())) >= 4, scaled(30),
                   msg="four retries")
    finally:
        mute.close()
        ctx.term()
    delays = [float(x) for x in re.findall(r"retry \d+ in ([0-9.]+) s", a.log())]
    assert max(delays) <= 1.0 + 1e-9  # capped at backoff_max_s
    assert max(delays[2:]) >= 0.4     # grew beyond the first delay's range
    cl.start(listen=ep)
    jid = submit(cl, ["echo", "hello", "{i}"], 2)
    wait_done(cl, jid, 60)
    assert [t["stdout"] for t in job(cl, jid)["tasks"]] == ["hello 0\n", "hello 1\n"]


def test_limits_truncation_and_exec_failure(cluster_factory, client_factory):
    cl = cluster_factory(dict(FAST, **{"tasks.max_attempts": 2}))
    client_factory(cl, 1, sets=dict(CLIENT, **{"client.slots": 3, "run.max_output_kb": 1,
                                               "run.kill_grace_s": 1}))
    slow = submit(cl, ["sleep", "30"], 1, limit_s=1)
    big = submit(cl, ["head -c 10000 /dev/zero | tr '\\0' x; echo err >&2"], 1, shell=True)
    bad = submit(cl, ["/nonexistent/program-{i}"], 1)
    for j in (slow, big, bad):
        wait_done(cl, j, 60)
    t = job(cl, slow)["tasks"][0]
    assert t["state"] == "failed" and t["timeout"] is True and t["signal"] == signal.SIGTERM
    assert t["wall_s"] < 20
    t = job(cl, big)["tasks"][0]
    assert t["state"] == "ok" and len(t["stdout"]) == 1024 and t["out_trunc"] is True
    assert t["stderr"] == "err\n" and t["err_trunc"] is False
    j = job(cl, bad)
    t = j["tasks"][0]
    assert t["state"] == "failed" and "cannot run '/nonexistent/program-0'" in t["error"]
    assert j["job"]["dups"] == 1  # the first error result, before max_attempts


def test_cancel_stops_running_tasks(cluster_factory, client_factory, gridnode_bin):
    cl = cluster_factory(FAST)
    client_factory(cl, 1, sets=dict(CLIENT, **{"client.slots": 2}))
    marker = "97.%d" % (os.getpid() % 1000)
    jid = submit(cl, ["sleep", marker], 4)
    wait_until(lambda: _pids_of("sleep", marker), scaled(20), msg="sleeps running")
    r = run_cli(gridnode_bin, "cancel", jid, "-e", cl.endpoint)
    assert r.returncode == 0 and "cancelled" in r.stdout
    wait_until(lambda: not _pids_of("sleep", marker), scaled(20), msg="sleeps killed")
    assert job(cl, jid, tasks=False)["job"]["state"] == "cancelled"
    r = run_cli(gridnode_bin, "cancel", jid, "-e", cl.endpoint)
    assert r.returncode == 1 and "already cancelled" in r.stderr


def test_sigterm_leaves_and_releases_tasks(cluster_factory, client_factory):
    cl = cluster_factory(dict(FAST, **{"tasks.k_wait": 500, "tasks.k_wait_dead": 600,
                                       "tasks.min_wait_s": 300}))
    (a,) = client_factory(cl, 1, sets=dict(CLIENT, **{"client.slots": 1}), prefix="a")
    jid = submit(cl, ["sleep 1; echo {i}"], 1, shell=True)
    wait_until(lambda: job(cl, jid)["tasks"][0]["state"] == "issued", scaled(20),
               msg="issued to a")
    a.stop(signal.SIGTERM)
    assert "left the server" in a.log()
    client_factory(cl, 1, sets=dict(CLIENT, **{"client.slots": 1}), prefix="b")
    wait_done(cl, jid, 30)  # long before the 300 s re-issue wait: LEAVE released it
    assert job(cl, jid)["tasks"][0]["issues"] == 2


def test_user_tools(cluster_factory, client_factory, gridnode_bin, workdir):
    cl = cluster_factory(FAST)
    client_factory(cl, 2, sets=dict(CLIENT, **{"client.slots": 2}))
    for i in range(3):
        (workdir / ("in%d.txt" % i)).write_text("line %d\n" % i)
    r = run_cli(gridnode_bin, "submit", "-e", cl.endpoint, "-n", 3, "--name", "cat",
                "--stdin", str(workdir / "in{i}.txt"), "--wait", "--", "tr", "a-z", "A-Z")
    assert r.returncode == 0, r.stderr
    m = re.search(r"submitted job (\d+) \(3 tasks\)", r.stdout)
    assert m, r.stdout
    jid = int(m.group(1))
    r = run_cli(gridnode_bin, "job", jid, "-e", cl.endpoint, "--json")
    assert r.returncode == 0
    j = json.loads(r.stdout)
    assert [t["stdout"] for t in j["tasks"]] == ["LINE 0\n", "LINE 1\n", "LINE 2\n"]
    r = run_cli(gridnode_bin, "job", jid, "-e", cl.endpoint, "--output")
    assert r.returncode == 0 and "LINE 2" in r.stdout and "TASK" in r.stdout
    assert re.search(r"^\s+\d+\s+ok\s.*\snode[12]$", r.stdout, re.M), r.stdout  # names, not ids
    r = run_cli(gridnode_bin, "jobs", "-e", cl.endpoint)
    assert r.returncode == 0 and "cat" in r.stdout and "done" in r.stdout
    r = run_cli(gridnode_bin, "jobs", "-e", cl.endpoint, "--json")
    assert json.loads(r.stdout)[0]["state"] == "done"
    r = run_cli(gridnode_bin, "nodes", "-e", cl.endpoint)
    assert r.returncode == 0 and "node1" in r.stdout and "node2" in r.stdout
    nodes = json.loads(run_cli(gridnode_bin, "nodes", "-e", cl.endpoint, "--json").stdout)
    assert {n["node"] for n in nodes} == {"node1", "node2"}
    r = run_cli(gridnode_bin, "job", 999, "-e", cl.endpoint)
    assert r.returncode == 1 and "no job 999" in r.stderr and "NOT_FOUND" not in r.stderr
    r = run_cli(gridnode_bin, "submit", "-e", cl.endpoint, "--stdin",
                str(workdir / "missing{i}"), "--", "cat")
    assert r.returncode == 1 and "missing0" in r.stderr
    # dump works while both roles run
    r = run_cli(gridnode_bin, "dump", cl.state_dir, "--json")
    assert r.returncode == 0, r.stderr
    recs = [json.loads(x) for x in r.stdout.splitlines()]
    assert {x["table"] for x in recs} >= {"meta", "jobs", "tasks", "results", "nodes"}
    assert any(x["table"] == "jobs" and x["value"]["name"] == "cat" for x in recs)
    r = run_cli(gridnode_bin, "dump", cl.state_dir)
    assert r.returncode == 0 and "== jobs (1 record)" in r.stdout and "state of a cluster" in r.stdout
    r = run_cli(gridnode_bin, "dump", workdir / "node1", "--table", "projects")
    assert r.returncode == 0 and "sid" in r.stdout  # the session, per project
    r = run_cli(gridnode_bin, "dump", workdir / "nowhere")
    assert r.returncode == 1 and "nowhere" in r.stderr


def test_unreachable_cluster_is_reported(gridnode_bin):
    r = run_cli(gridnode_bin, "jobs", "-e", "tcp://127.0.0.1:%d" % _free_port(),
                "--timeout", 300)
    assert r.returncode == 1 and "cannot reach" in r.stderr and "scripts/grid status" in r.stderr


@pytest.mark.parametrize("cmd", ["cluster", "client", "submit", "jobs", "job", "cancel", "purge",
                                 "nodes", "dump", "showq", "checkjob", "showstart", "diagnose",
                                 "canceljob", "setres", "showres", "releaseres"])
def test_help_on_every_command(gridnode_bin, cmd):
    r = run_cli(gridnode_bin, cmd, "--help")
    assert r.returncode == 0 and r.stdout.startswith("usage: gridnode " + cmd)


def test_unknown_command_and_bad_config(gridnode_bin, workdir):
    r = run_cli(gridnode_bin, "frobnicate")
    assert r.returncode == 2 and "unknown command" in r.stderr
    r = run_cli(gridnode_bin, "help")
    assert r.returncode == 0 and "cluster" in r.stdout
    bad = workdir / "bad.ini"
    bad.write_text("[tasks]\nk_wait = fast\n")
    r = run_cli(gridnode_bin, "cluster", "-c", bad, "--check-config")
    assert r.returncode == 1 and "k_wait" in r.stderr and "bad.ini" in r.stderr
    r = run_cli(gridnode_bin, "cluster", "--set", "tasks.nokey=1", "--check-config")
    assert r.returncode == 1 and "unknown key [tasks] nokey" in r.stderr
    r = run_cli(gridnode_bin, "cluster", "--set", "tasks.k_wait=5", "--set",
                "tasks.k_wait_dead=4", "--set", "cluster.state_dir=%s" % (workdir / "s"))
    assert r.returncode == 1 and "k_wait_dead" in r.stderr
    r = run_cli(gridnode_bin, "client", "-c", workdir / "nope.ini", "--check-config")
    assert r.returncode == 1 and "cannot open" in r.stderr


@pytest.mark.parametrize("role", ["cluster", "client"])
def test_shipped_configs_parse_and_document_every_key(gridnode_bin, role):
    from conftest import REPO
    path = REPO / "configs" / ("%s.ini" % role)
    r = run_cli(gridnode_bin, role, "-c", path, "--check-config")
    assert r.returncode == 0, r.stderr
    shipped = path.read_text()
    helptext = run_cli(gridnode_bin, role, "--help").stdout
    keys = re.findall(r"^  (\w+)\.(\w+)\s", helptext, re.M)
    assert keys
    for section, key in keys:
        assert "[%s]" % section in shipped
        assert re.search(r"^%s =" % key, shipped, re.M), (section, key)
        assert re.search(r"^; .*\(default: .*\)\n%s =" % key, shipped, re.M), key


def test_cluster_state_dir_of_another_role_is_refused(cluster_factory, client_factory, workdir,
                                                      gridnode_bin):
    cl = cluster_factory(FAST)
    (a,) = client_factory(cl, 1, sets=CLIENT)
    wait_until(lambda: "session" in a.log(), scaled(20), msg="client session")
    a.stop(signal.SIGTERM)
    r = run_cli(gridnode_bin, "cluster", "--set", "cluster.state_dir=%s" % a.state_dir,
                "--set", "cluster.listen=tcp://127.0.0.1:*", timeout=20)
    assert r.returncode == 1 and "belongs to the client role" in r.stderr


def _free_port():
    import socket
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def _pids_of(*argv):
    want = "\0".join(argv)
    found = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open("/proc/%s/cmdline" % d, "rb") as f:
                    if f.read().rstrip(b"\0").decode(errors="replace") == want:
                        found.append(int(d))
            except OSError:
                pass
    return found
