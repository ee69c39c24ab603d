"""The multi-project volunteer client (issue 11): several cluster managers as projects
with resource shares, driven by the engine (roles/client/live/): share split, a project
that goes down and comes back, attach/detach/status through the control socket, state
kept across kill -9."""

import json
import signal
import subprocess
import time

import pytest

from conftest import Proc, scaled, wait_until

CLIENT_SANDBOX = True   # conftest client_factory: the shipped execution boundary

FAST = {
    "sched.min_buf": 4, "sched.additional_buf": 4, "sched.time_slice": 2,
    "sched.poll_s": 0.5, "sched.tick_s": 0.1, "sched.rpc_backoff_min": 0.5,
    "sched.rpc_backoff_max": 2, "sched.rsc_backoff_min": 0.5, "sched.rsc_backoff_max": 1,
    "sched.default_est_s": 0.5, "rpc.timeout_ms": 2000,
}


def write_ini(path, state_dir, projects, slots=2, extra=None, sandbox=True):
    lines = ["[client]", "state_dir = %s" % state_dir, "slots = %d" % slots,
             "log_level = debug"] + ([] if sandbox else ["sandbox = false"]) + ["[sched]"]
    for k, v in FAST.items():
        if k.startswith("sched."):
            lines.append("%s = %s" % (k.split(".", 1)[1], v))
    lines += ["[rpc]", "timeout_ms = %d" % FAST["rpc.timeout_ms"]]
    for name, share, eps in projects:
        lines += ["[project %s]" % name, "share = %s" % share, "endpoints = %s" % ",".join(eps)]
    for k, v in (extra or {}).items():
        lines += [k, v]
    path.write_text("\n".join(lines) + "\n")


def start_client(procs, binary, workdir, ini, name="vc"):
    log = workdir / ("%s.log" % name)
    return Proc(procs, [binary, "client", "-c", str(ini)], log)


def ctl(binary, state_dir, *args, check=True):
    r = subprocess.run([binary, "client", *args, "-s", str(state_dir)], capture_output=True,
                       text=True, timeout=scaled(20))
    if check:
        assert r.returncode == 0, r.stderr
    return r


def state(binary, state_dir):
    return json.loads(ctl(binary, state_dir, "status", "--json").stdout)


def submit(binary, cluster, n, *prog):
    r = subprocess.run([binary, "submit", "-e", cluster.endpoint, "-n", str(n), "--", *prog],
                       capture_output=True, text=True, timeout=scaled(20))
    assert r.returncode == 0, r.stderr
    return int(r.stdout.split()[2])


def job_done(binary, cluster, job):
    r = subprocess.run([binary, "job", "-e", cluster.endpoint, str(job), "--json"],
                       capture_output=True, text=True, timeout=scaled(20))
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)["job"]["done"]


def wait_endpoint(state_dir):
    wait_until(lambda: (state_dir / "endpoint").exists(), scaled(15), msg="control endpoint")


def run_s(st):
    return {p["name"]: p["run_s"] for p in st["projects"]}


@pytest.mark.slow
def test_shares_3_2_1(procs, gridnode_bin, workdir, cluster_factory):
    """Three clusters with shares 3:2:1, a 2-slot client, tasks of 0.5 s: the CPU time each
    project got in the client's first 60 s is within 0.05 of its share (10 % of the largest
    share's 0.5; 60 s hold ~240 tasks). Measured from the start, not over a window after
    a warm-up: the REC policy equalizes what each project got since it attached (10-day
    half-life), so a project that got less at first (its first work fetch came last, or an
    RPC of its timed out on a busy machine) gets more afterwards, and a window that starts
    after the lag but before the catch-up ended sees the catch-up as a skew (61.6 % for a
    once in the fresh-clone run; the first 20 s gave a 0.45-0.48, the next 40 s 0.49-0.52,
    the whole 60 s 0.48-0.50)."""
    cl = [cluster_factory(name="p%d" % i) for i in range(3)]
    for c in cl:
        submit(gridnode_bin, c, 400, "sleep", "0.5")
    sd = workdir / "vc"
    ini = workdir / "vc.ini"
    write_ini(ini, sd, [("a", 3, [cl[0].endpoint]), ("b", 2, [cl[1].endpoint]),
                        ("c", 1, [cl[2].endpoint])])
    start_client(procs, gridnode_bin, workdir, ini)
    wait_endpoint(sd)
    time.sleep(60)
    st = state(gridnode_bin, sd)
    used = run_s(st)
    total = sum(used.values())
    assert total > 60, used  # 2 slots x 60 s, minus start-up and scheduling gaps
    for name, share in (("a", 3 / 6), ("b", 2 / 6), ("c", 1 / 6)):
        assert abs(used[name] / total - share) <= 0.05, (used, st["projects"])


def test_project_down_then_back(procs, gridnode_bin, workdir, cluster_factory):
    """Project b goes down: the client keeps both slots busy with a's work, b backs off
    (failures counted); b comes back on the same port and gets work done again."""
    a, b = cluster_factory(name="pa"), cluster_factory(name="pb")
    ja = submit(gridnode_bin, a, 300, "sleep", "0.3")
    jb = submit(gridnode_bin, b, 300, "sleep", "0.3")
    sd = workdir / "vc"
    ini = workdir / "vc.ini"
    write_ini(ini, sd, [("a", 1, [a.endpoint]), ("b", 1, [b.endpoint])])
    start_client(procs, gridnode_bin, workdir, ini)
    wait_endpoint(sd)
    wait_until(lambda: job_done(gridnode_bin, b, jb) >= 3, scaled(30), msg="b did work")
    b.kill(signal.SIGKILL)
    done_a = job_done(gridnode_bin, a, ja)
    wait_until(lambda: next(p for p in state(gridnode_bin, sd)["projects"]
                            if p["name"] == "b")["failures"] >= 1, scaled(60),
               msg="b's RPCs fail")
    # a keeps the client busy while b is down
    wait_until(lambda: job_done(gridnode_bin, a, ja) >= done_a + 20, scaled(30),
               msg="a goes on while b is down")
    b.restart(signal.SIGKILL) if b.alive() else b.start(listen=b.endpoint)
    done_b = job_done(gridnode_bin, b, jb)
    wait_until(lambda: job_done(gridnode_bin, b, jb) > done_b, scaled(60),
               msg="b gets work done again after it came back")


def test_attach_detach_status_kill9(procs, gridnode_bin, workdir, cluster_factory):
    """A client started with no project (client.server empty) gets one by `client attach`;
    status shows it with its tasks; kill -9 and restart keeps the project and its
    results (each task reported once); detach forgets it."""
    a = cluster_factory(name="pa")
    ja = submit(gridnode_bin, a, 30, "sleep", "0.2")
    sd = workdir / "vc"
    ini = workdir / "vc.ini"
    write_ini(ini, sd, [])
    args = [gridnode_bin, "client", "-c", str(ini), "--set", "client.server="]
    p = Proc(procs, args, workdir / "vc.log")
    wait_endpoint(sd)
    assert state(gridnode_bin, sd)["projects"] == []
    r = ctl(gridnode_bin, sd, "attach", "alpha", "--share", "50", "--scheduler", a.endpoint)
    assert "attached" in r.stdout
    bad = ctl(gridnode_bin, sd, "attach", "x y", "--scheduler", a.endpoint, check=False)
    assert bad.returncode != 0 and "name" in bad.stderr
    wait_until(lambda: job_done(gridnode_bin, a, ja) >= 5, scaled(30), msg="tasks done")
    table = ctl(gridnode_bin, sd, "status").stdout
    assert "alpha" in table and "PROJECT" in table and "SHORTFALL" in table
    p.stop(signal.SIGKILL)
    (sd / "endpoint").unlink()
    p = Proc(procs, args, workdir / "vc2.log")
    wait_endpoint(sd)
    st = state(gridnode_bin, sd)
    assert [x["name"] for x in st["projects"]] == ["alpha"]
    assert st["projects"][0]["share"] == 50
    wait_until(lambda: job_done(gridnode_bin, a, ja) == 30, scaled(60), msg="all 30 done")
    r = subprocess.run([gridnode_bin, "job", "-e", a.endpoint, str(ja), "--json"],
                       capture_output=True, text=True, timeout=scaled(20))
    job = json.loads(r.stdout)["job"]
    assert job["done"] == 30 and job["dups"] == 0, job
    ctl(gridnode_bin, sd, "detach", "alpha")
    assert state(gridnode_bin, sd)["projects"] == []
    nf = ctl(gridnode_bin, sd, "detach", "alpha", check=False)
    assert nf.returncode != 0 and "no project" in nf.stderr
    p.stop(signal.SIGTERM)
