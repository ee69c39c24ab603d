"""System tests of identities and idempotent submission (issue #8 items 8 and 9): real
cluster managers, clients and user tools on loopback, kill -9 and restarts, wiped state
directories. Every wait is bounded and scaled; no test asserts on speed.
"""

import shutil
import signal
import subprocess
import threading

import zmq

from conftest import TYPES, curve_client, curve_server, scaled, wait_until

T = dict(TYPES, PSUBMIT=39)


def jobs(cl):
    return cl.client().ok("JOB_LIST", "JOBS")["jobs"]


def test_submit_with_the_same_key_stores_one_job(cluster_factory):
    cl = cluster_factory({"store.sync": "full"})
    rpc = cl.client()
    a = rpc.ok("SUBMIT", "SUBMITTED", argv=["true"], ntasks=2, user="ann", key="k-1")
    b = rpc.ok("SUBMIT", "SUBMITTED", argv=["true"], ntasks=2, user="ann", key="k-1")
    assert b["job"] == a["job"] and b.get("repeat") is True and not a.get("repeat")
    # the key is the user's: another user's same key is another request
    c = rpc.ok("SUBMIT", "SUBMITTED", argv=["true"], ntasks=2, user="bob", key="k-1")
    assert c["job"] != a["job"]
    # without a key every SUBMIT is new
    d = rpc.ok("SUBMIT", "SUBMITTED", argv=["true"], ntasks=1, user="ann")
    e = rpc.ok("SUBMIT", "SUBMITTED", argv=["true"], ntasks=1, user="ann")
    assert d["job"] != e["job"]
    rpc.err("SUBMIT", "INVALID", argv=["true"], ntasks=1, key="")
    rpc.err("SUBMIT", "FIELD", argv=["true"], ntasks=1, key="x" * 129)
    n = len(jobs(cl))
    # the key survives kill -9 once the first SUBMITTED was sent
    cl.restart(signal.SIGKILL)
    f = cl.client().ok("SUBMIT", "SUBMITTED", argv=["true"], ntasks=2, user="ann", key="k-1")
    assert f["job"] == a["job"] and f.get("repeat") is True
    assert len(jobs(cl)) == n
    # PSUBMIT too (a waiting parallel job: no hosts yet)
    p = cl.client().ok("PSUBMIT", "SUBMITTED", argv=["true"], procs=1, wait=True, user="ann",
                       key="p-1")
    cl.restart(signal.SIGKILL)
    q = cl.client().ok("PSUBMIT", "SUBMITTED", argv=["true"], procs=1, wait=True, user="ann",
                       key="p-1")
    assert q["job"] == p["job"] and q["state"] == "waiting" and q.get("repeat") is True
    assert len(jobs(cl)) == n + 1


def test_submit_tool_retries_with_its_key_when_the_cluster_does_not_answer(
        cluster_factory, gridnode_bin, workdir):
    """The cluster is stopped (SIGSTOP) while the tool sends: its first request and its
    retries all wait in the socket buffers; when the cluster resumes, it reads them all,
    stores one job and answers the later ones with it."""
    cl = cluster_factory({"store.sync": "none"})
    err = workdir / "submit.err"
    cl.proc.send_signal(signal.SIGSTOP)
    try:
        with open(err, "wb") as ef:
            tool = subprocess.Popen(
                [gridnode_bin, "submit", "-e", cl.endpoint, "--timeout", "700", "--retries",
                 "100", "--json", "-n", "3", "--", "true"],
                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=ef)
        try:
            wait_until(lambda: err.read_text().count("sending again") >= 2, scaled(30),
                       msg="the tool to retry twice")
        finally:
            cl.proc.send_signal(signal.SIGCONT)
        out, _ = tool.communicate(timeout=scaled(60))
    finally:
        if tool.poll() is None:
            tool.kill()
            tool.wait(timeout=10)
    assert tool.returncode == 0, err.read_text()
    assert "same request key" in err.read_text()
    js = jobs(cl)
    assert len(js) == 1 and js[0]["ntasks"] == 3, js
    assert b'"job":%d' % js[0]["job"] in out.replace(b" ", b""), out
    # an explicit --key: a second run with it returns the same job
    r1 = subprocess.run([gridnode_bin, "submit", "-e", cl.endpoint, "--key", "nightly-7",
                         "--", "true"], capture_output=True, text=True, timeout=scaled(30))
    r2 = subprocess.run([gridnode_bin, "submit", "-e", cl.endpoint, "--key", "nightly-7",
                         "--", "true"], capture_output=True, text=True, timeout=scaled(30))
    assert r1.returncode == 0 and r2.returncode == 0, (r1.stderr, r2.stderr)
    assert r1.stdout == r2.stdout and "submitted job" in r1.stdout
    assert len(jobs(cl)) == 2


def _lossy_proxy(endpoint, drop, stop):
    """A ZeroMQ proxy in front of the cluster that forwards every request but drops the
    first `drop` replies (the cluster stored the job; the tool never hears of it)."""
    ctx = zmq.Context.instance()
    front, back = ctx.socket(zmq.ROUTER), ctx.socket(zmq.DEALER)
    for s in (front, back):
        s.setsockopt(zmq.LINGER, 0)
    curve_server(front)
    curve_client(back)
    port = front.bind_to_random_port("tcp://127.0.0.1")
    back.connect(endpoint)
    state = {"dropped": 0, "forwarded": 0}

    def run():
        poller = zmq.Poller()
        poller.register(front, zmq.POLLIN)
        poller.register(back, zmq.POLLIN)
        peer = None
        try:
            while not stop.is_set():
                for sock, _ in poller.poll(100):
                    if sock is front:
                        frames = front.recv_multipart()
                        peer = frames[0]  # the tool's attempts come one after another
                        back.send_multipart(frames[1:])
                        state["forwarded"] += 1
                    else:
                        frames = back.recv_multipart()
                        if state["dropped"] < drop:
                            state["dropped"] += 1
                        elif peer is not None:
                            front.send_multipart([peer] + frames)
        finally:
            front.close()
            back.close()

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return "tcp://127.0.0.1:%d" % port, t, state


def test_submit_tool_reply_lost_retry_returns_the_stored_job(cluster_factory, gridnode_bin):
    """The first two SUBMITs are stored but their replies are lost: the tool's retries
    with the same key get the first job back; exactly one job exists (the issue's 33 of
    83 duplicates)."""
    cl = cluster_factory({"store.sync": "none"})
    stop = threading.Event()
    ep, thread, state = _lossy_proxy(cl.endpoint, 2, stop)
    try:
        r = subprocess.run([gridnode_bin, "submit", "-e", ep, "--timeout", "1500", "--retries",
                            "5", "-n", "2", "--", "true"], capture_output=True, text=True,
                           timeout=scaled(60))
    finally:
        stop.set()
        thread.join(timeout=10)
    assert r.returncode == 0, r.stderr
    assert state["dropped"] == 2 and state["forwarded"] == 3, state
    assert r.stderr.count("same request key") == 2, r.stderr
    js = jobs(cl)
    assert len(js) == 1 and "submitted job %d" % js[0]["job"] in r.stdout, (js, r.stdout)
    assert cl.log().count("repeated with the same key") == 2
    # the same with a parallel job
    stop = threading.Event()
    ep, thread, state = _lossy_proxy(cl.endpoint, 1, stop)
    try:
        r = subprocess.run([gridnode_bin, "submit", "-e", ep, "--timeout", "1500", "--retries",
                            "3", "-p", "1", "--wait-resources", "--", "true"],
                           capture_output=True, text=True, timeout=scaled(60))
    finally:
        stop.set()
        thread.join(timeout=10)
    assert r.returncode == 0, r.stderr
    assert len(jobs(cl)) == 2 and "submitted parallel job" in r.stdout, r.stdout


FAST = {"store.sync": "full", "tasks.heartbeat_s": 1, "tasks.idle_wait_s": 1,
        "tasks.k_wait": 500, "tasks.k_wait_dead": 600, "tasks.min_wait_s": 300}
CLIENT = {"rpc.timeout_ms": 1000, "rpc.backoff_min_s": 0.2, "rpc.backoff_max_s": 1,
          "client.slots": 1}


def _job(cl, jid):
    r = cl.client().ok("JOB_GET", "JOB", job=jid, tasks=True, output=True)
    for t in r.get("tasks", []):
        for k in ("stdout", "stderr"):
            if isinstance(t.get(k), bytes):
                t[k] = t[k].decode()
    return r


def test_results_of_a_reset_state_are_not_stored_for_new_jobs(cluster_factory, client_factory,
                                                              workdir):
    """Issue #8 item 8: a node holds a finished, unreported result of job 1 when the
    cluster's state directory is wiped; the new state's job 1 must not get it."""
    cl = cluster_factory(FAST)
    inc1 = cl.client().ok("HELLO", "WELCOME", client="t", node="probe", cores=1)["inc"]
    (a,) = client_factory(cl, 1, sets=CLIENT, prefix="a")
    flag = workdir / "started"
    jid = cl.client().ok("SUBMIT", "SUBMITTED", argv=["touch %s; sleep 1.5; echo OLD" % flag],
                         ntasks=1, shell=True)["job"]
    assert jid == 1
    wait_until(lambda: flag.exists(), scaled(20), msg="the old task to start")
    cl.kill(signal.SIGKILL)  # the node cannot report its result
    wait_until(lambda: "task 1.0 finished" in a.log(), scaled(20), msg="the old task to end")
    shutil.rmtree(cl.state_dir)  # a new state: job ids start at 1 again
    cl.restart()
    inc2 = cl.client().ok("HELLO", "WELCOME", client="t", node="probe", cores=1)["inc"]
    assert inc2 and inc2 != inc1
    new = cl.client().ok("SUBMIT", "SUBMITTED", argv=["echo NEW"], ntasks=1, shell=True)["job"]
    assert new == 1
    t = wait_until(lambda: (lambda ts: ts[0] if ts and ts[0]["state"] in ("ok", "failed")
                            else None)(_job(cl, 1)["tasks"]), scaled(40), msg="new job 1 done")
    assert t["stdout"] == "NEW\n", t
    wait_until(lambda: "forgot 1 task(s)" in a.log() or "dropped 1 result(s)" in cl.log(),
               scaled(10), msg="the old result to be dropped")
    assert "OLD" not in str(_job(cl, 1))


def test_cluster_drops_results_of_another_incarnation(cluster):
    """The cluster side alone: RESULT with a foreign "inc" is acknowledged, counted as
    stale and not stored; with its own "inc" (or none) it is stored."""
    rpc = cluster.client()
    w = rpc.ok("HELLO", "WELCOME", client="t", node="n1", cores=1)
    sid, inc = w["sid"], w["inc"]
    assert len(inc) == 32
    jid = rpc.ok("SUBMIT", "SUBMITTED", argv=["true"], ntasks=1)["job"]
    ts = rpc.ok("TASK_GET", "TASKS", sid=sid, want=1)["tasks"]
    assert len(ts) == 1
    res = {"job": jid, "idx": 0, "issue": ts[0]["issue"], "exit": 0, "stdout": b"x"}
    r = rpc.ok("RESULT", "TASKS", sid=sid, results=[res], want=0, inc="0" * 32)
    assert r["acked"] == 1 and r["stale"] == 1
    assert _job(cluster, jid)["tasks"][0]["state"] == "issued"
    assert "dropped 1 result(s)" in cluster.log()
    r = rpc.ok("RESULT", "TASKS", sid=sid, results=[res], want=0, inc=inc)
    assert r["acked"] == 1 and "stale" not in r
    assert _job(cluster, jid)["tasks"][0]["state"] == "ok"
    # the incarnation survives a restart
    cluster.restart()
    assert cluster.client().ok("HELLO", "WELCOME", client="t", node="n1", cores=1)["inc"] == inc
