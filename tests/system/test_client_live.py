"""One live client (issue 11, the single-cluster client folded into the engine-driven
one, roles/client/live/): a config with only client.server is one project named after
the server; the incarnation rule per project; a node handed back its own expired task
adopts the new issue number. Real clusters and clients on loopback; every process is
started through conftest's registry and killed by PID at teardown; generous deadlines.
"""

import json
import shutil
import signal
import subprocess
import time

from conftest import FAST_CLIENT as CLIENT, FAST_CLUSTER as FAST, scaled, wait_until

CLIENT_SANDBOX = True   # conftest client_factory: the shipped execution boundary

SCHED = {  # the multi-project client's engine, fast (as tests/system/test_client_multi.py)
    "min_buf": 4, "additional_buf": 4, "time_slice": 2, "poll_s": 0.5, "tick_s": 0.1,
    "rpc_backoff_min": 0.5, "rpc_backoff_max": 2, "rsc_backoff_min": 0.5,
    "rsc_backoff_max": 1, "default_est_s": 0.5,
}


def submit(cl, argv, ntasks, **extra):
    return cl.client().ok("SUBMIT", "SUBMITTED", argv=argv, ntasks=ntasks, **extra)["job"]


def job(cl, jid):
    return cl.client().ok("JOB_GET", "JOB", job=jid, tasks=True, output=False, count=1000)


def status(gridnode_bin, state_dir):
    r = subprocess.run([gridnode_bin, "client", "status", "-s", str(state_dir), "--json"],
                       capture_output=True, text=True, timeout=scaled(20))
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_server_only_config_is_one_project(cluster_factory, client_factory, gridnode_bin):
    """client.server alone: one project named after the server (share 100, that one
    endpoint), results reported at once, the status command works on it; the automatic
    [sched] values show as -1 in --check-config."""
    cl = cluster_factory(FAST)
    (a,) = client_factory(cl, 1, sets=dict(CLIENT, **{"client.slots": 2}))
    jid = submit(cl, ["echo", "hi {i}"], 4)
    wait_until(lambda: job(cl, jid)["job"]["state"] == "done", scaled(30), msg="job done")
    wait_until(lambda: (a.state_dir / "endpoint").exists(), scaled(10), msg="control")
    st = status(gridnode_bin, a.state_dir)
    assert [(p["name"], p["share"], p["endpoints"]) for p in st["projects"]] == \
        [(cl.endpoint, 100, [cl.endpoint])]
    assert st["tasks"] == []  # every result reported and acknowledged
    r = subprocess.run([gridnode_bin, "client", "--set", "client.server=%s" % cl.endpoint,
                        "--check-config"], capture_output=True, text=True,
                       timeout=scaled(20))
    assert r.returncode == 0 and "min_buf = -1" in r.stdout, r.stdout + r.stderr


def test_own_expired_task_handed_back_is_adopted(cluster_factory, client_factory):
    """The client is cut off (SIGSTOP) long enough for its task to expire; when it comes
    back, the cluster re-issues that task to it: the client keeps the copy it runs under
    the new issue number (no second copy), and the one result wins."""
    cl = cluster_factory(FAST)
    (a,) = client_factory(cl, 1, sets=dict(CLIENT, **{"client.slots": 1}))
    jid = submit(cl, ["sh", "-c", "sleep 7; echo once {i}"], 1, limit_s=120)
    wait_until(lambda: job(cl, jid)["tasks"][0]["state"] == "issued", scaled(20),
               msg="the task to reach the client")
    a.popen.send_signal(signal.SIGSTOP)
    try:
        wait_until(lambda: job(cl, jid)["tasks"][0]["state"] != "issued"
                   or job(cl, jid)["tasks"][0].get("issues", 1) > 1
                   or "inactive" in cl.log(), scaled(20), msg="the task to expire")
    finally:
        a.popen.send_signal(signal.SIGCONT)
    wait_until(lambda: job(cl, jid)["job"]["state"] == "done", scaled(60), msg="job done")
    j = job(cl, jid)
    assert j["job"]["done"] == 1 and j["job"].get("dups", 0) == 0, j["job"]
    assert j["tasks"][0]["issues"] >= 2, j["tasks"][0]
    wait_until(lambda: "re-issued to us" in a.log(), scaled(10), msg="adoption logged")
    assert a.log().count("finished: ran") == 1  # one process, one result


def test_cluster_reset_drops_only_its_tasks(cluster_factory, procs, gridnode_bin, workdir):
    """Two projects; one cluster restarts with a reset state (a new incarnation): the
    client drops the tasks it held from that cluster (their ids may now name other
    jobs), keeps the other project's, and takes the new cluster's work."""
    from conftest import Proc
    ca, cb = cluster_factory(FAST), cluster_factory(FAST)
    state = workdir / "vc"
    ini = workdir / "vc.ini"
    lines = ["[client]", "state_dir = %s" % state, "slots = 2", "log_level = debug",
             "[rpc]", "timeout_ms = 2000", "[sched]"]
    lines += ["%s = %s" % kv for kv in SCHED.items()]
    lines += ["[project a]", "share = 100", "endpoints = %s" % ca.endpoint,
              "[project b]", "share = 100", "endpoints = %s" % cb.endpoint]
    ini.write_text("\n".join(lines) + "\n")
    vc = Proc(procs, [gridnode_bin, "client", "-c", str(ini)], workdir / "vc.log")
    ja = submit(ca, ["sleep", "120"], 1, limit_s=300)
    jb = submit(cb, ["sleep", "120"], 1, limit_s=300)
    for cl, j in ((ca, ja), (cb, jb)):
        wait_until(lambda: job(cl, j)["tasks"][0]["state"] == "issued", scaled(30),
                   msg="both projects' tasks at the client")
    wait_until(lambda: (state / "endpoint").exists(), scaled(10), msg="control")
    ca.kill()
    shutil.rmtree(ca.state_dir)
    ca.restart()  # same port, fresh state: a new incarnation
    # the old job id 1 now names another job on the new cluster
    jnew = submit(ca, ["echo", "new {i}"], 2)
    assert jnew == ja
    wait_until(lambda: "project a: the cluster's state changed" in vc.log(), scaled(60),
               msg="the client to see the new incarnation")
    assert "forgot 1 task(s)" in vc.log()
    wait_until(lambda: job(ca, jnew)["job"]["state"] == "done", scaled(60), msg="new job")
    st = status(gridnode_bin, state)
    held = [(t["project"], t["job"]) for t in st["tasks"]]
    assert ("b", jb) in held and all(p != "a" for p, _ in held), held
    assert "project b: the cluster's state changed" not in vc.log()
    assert job(cb, jb)["tasks"][0]["state"] == "issued"
    time.sleep(0)  # (the b task keeps running: nothing more to wait for)
