"""System tests of issue 15 items 3-5 (operator experience): submit's option checking
in the user's words and --opt=value everywhere, job scripts with #GRIDNODE directives,
`jobs` filters and sort, hold / release / requeue, node drain / resume."""

import json
import os
import subprocess
import time

from conftest import scaled, wait_until

SETS = {"store.sync": "none"}


def run(gridnode_bin, *args, timeout=60, cwd=None, env=None):
    return subprocess.run([gridnode_bin] + [str(a) for a in args], capture_output=True,
                          text=True, timeout=scaled(timeout), stdin=subprocess.DEVNULL,
                          cwd=cwd, env=env or dict(os.environ))


# ---- item 3: submit checks every option, in the words the user typed -------------------

BAD_SUBMITS = [
    (["-p", "0", "x"], "-p/--procs must be at least 1"),
    (["-p", "2", "--ppn", "0", "x"], "--ppn must be at least 1"),
    (["--ppn", "2", "x"], "--ppn is for parallel jobs"),
    (["-p", "2", "-n", "3", "x"], "-n/--tasks is for a bag of tasks"),
    (["-p", "2", "--stdin", "in{i}", "x"], "--stdin is for a bag of tasks"),
    (["--queue", "1", "x"], "--queue is for a parallel job"),
    (["--mem=100", "x"], "--mem is for a parallel job"),
    (["--tasks=0", "x"], "-n/--tasks must be at least 1"),
    (["--tasks"], "--tasks needs a value"),
    (["--wait=yes", "x"], "--wait takes no value"),
    (["--frobnicate", "x"], "unknown option '--frobnicate'"),
    (["--timeout=soon", "x"], "--timeout wants milliseconds"),
]


def test_submit_refuses_nonsense_locally(gridnode_bin):
    # nothing listens there: every refusal must come before any connection attempt
    for args, words in BAD_SUBMITS:
        r = run(gridnode_bin, "submit", "-e", "tcp://127.0.0.1:1", "--connect-timeout", "0",
                *args)
        assert r.returncode == 2, (args, r.returncode, r.stderr)
        assert words in r.stderr, (args, r.stderr)
        assert "cannot reach" not in r.stderr and "SUBMIT" not in r.stderr, r.stderr


def test_opt_equals_value_everywhere(cluster_factory, gridnode_bin):
    cl = cluster_factory(SETS)
    ep = cl.endpoint
    r = run(gridnode_bin, "submit", "--endpoint=" + ep, "--tasks=3", "--name=eq",
            "--limit=30", "--", "/bin/echo", "--not-an-option=kept")
    assert r.returncode == 0, r.stderr
    job = int(r.stdout.split()[2])
    r = run(gridnode_bin, "job", "--endpoint=" + ep, "--json", str(job))
    assert r.returncode == 0, r.stderr
    j = json.loads(r.stdout)
    j = j.get("job", j)
    assert j["ntasks"] == 3 and j["name"] == "eq", j
    assert j["argv"] == ["/bin/echo", "--not-an-option=kept"], j
    # the program's own --x=y after PROGRAM stays one word
    for cmd in (["jobs"], ["nodes"], ["console"]):
        r = run(gridnode_bin, *cmd, "--endpoint=" + ep, "--timeout=20000")
        assert r.returncode == 0, (cmd, r.stderr)


def test_role_refusal_is_told_in_option_words(cluster_factory, gridnode_bin):
    cl = cluster_factory(SETS)
    r = run(gridnode_bin, "submit", "-e", cl.endpoint, "-p", "2", "--queue", "200", "x")
    assert r.returncode == 1
    assert "PSUBMIT" not in r.stderr and "--queue" in r.stderr, r.stderr


# ---- item 5: job scripts with #GRIDNODE directives --------------------------------------

SCRIPT = """#!/bin/sh
# a job kept in a file
#GRIDNODE -n 3 --name "from script"
#GRIDNODE --limit=60
echo "task {i} of {n}: $1"
#GRIDNODE --name not-a-directive-after-the-first-command
"""


def test_job_script_directives(cluster_factory, client_factory, gridnode_bin, workdir):
    cl = cluster_factory(SETS)
    client_factory(cl, 1)
    script = workdir / "job.sh"
    script.write_text(SCRIPT)
    r = run(gridnode_bin, "submit", "-e", cl.endpoint, "--wait", "--json", script, "hello")
    assert r.returncode == 0, r.stderr
    job = json.loads(r.stdout.splitlines()[0])["job"]
    r = run(gridnode_bin, "job", "-e", cl.endpoint, "--json", "--output", str(job))
    assert r.returncode == 0, r.stderr
    j = json.loads(r.stdout)
    assert j["job"]["ntasks"] == 3 and j["job"]["name"] == "from script", j["job"]
    outs = sorted(t.get("stdout", "") for t in j["tasks"])
    assert outs == ["task %d of 3: hello\n" % i for i in range(3)], outs
    # the command line overrides the directives
    r = run(gridnode_bin, "submit", "-e", cl.endpoint, "--json", "-n", "2", "--name=cli", script)
    assert r.returncode == 0, r.stderr
    job = json.loads(r.stdout)["job"]
    j = json.loads(run(gridnode_bin, "job", "-e", cl.endpoint, "--json", str(job)).stdout)
    assert j["job"]["ntasks"] == 2 and j["job"]["name"] == "cli", j["job"]
    # a stray word in a directive line is an error, named
    script.write_text("#!/bin/sh\n#GRIDNODE -n 2 oops\necho\n")
    r = run(gridnode_bin, "submit", "-e", cl.endpoint, script)
    assert r.returncode == 2 and "'oops'" in r.stderr and "#GRIDNODE" in r.stderr, r.stderr
    script.write_text("#!/bin/sh\n#GRIDNODE -p 0\necho\n")
    r = run(gridnode_bin, "submit", "-e", cl.endpoint, script)
    assert r.returncode == 2 and "-p/--procs must be at least 1" in r.stderr, r.stderr


# ---- item 5: jobs filters (server-side, paged) and sort ---------------------------------

def test_jobs_filters_paging_and_sort(cluster_factory, gridnode_bin):
    cl = cluster_factory(dict(SETS, **{"tasks.min_wait_s": 600}))
    u = cl.connect(timeout=scaled(60))
    ids = {}
    for k in range(9):
        user, name = ("ann", "bob", "cy")[k % 3], "j%d" % (k % 2)
        ids[k] = u.ok("SUBMIT", "SUBMITTED", argv=["/bin/true"], ntasks=1 + k, user=user,
                      name=name)["job"]
    u.ok("CANCEL", "OK", job=ids[4])
    # server-side filters, paged two rows at a time: every match exactly once, in order
    seen, frm = [], 0
    while True:
        f = {"user": "bob", "count": 2}
        if frm:
            f["from"] = frm
        r = u.ok("JOB_LIST", "JOBS", **f)
        seen += [j["job"] for j in r["jobs"]]
        assert all(j["user"] == "bob" for j in r["jobs"])
        if "next" not in r:
            break
        assert r["next"] > frm
        frm = r["next"]
    assert seen == [ids[1], ids[4], ids[7]], seen
    r = u.ok("JOB_LIST", "JOBS", state="cancelled,done")
    assert [j["job"] for j in r["jobs"]] == [ids[4]]
    r = u.ok("JOB_LIST", "JOBS", queue=0)  # bags of tasks have no queue
    assert r["jobs"] == []
    ep = cl.endpoint
    r = run(gridnode_bin, "jobs", "-e", ep, "--json", "-u", "ann", "--name=j0")
    assert r.returncode == 0, r.stderr
    assert [j["job"] for j in json.loads(r.stdout)] == [ids[0], ids[6]]
    r = run(gridnode_bin, "jobs", "-e", ep, "--json", "--sort=-tasks", "-t", "queued")
    assert [j["ntasks"] for j in json.loads(r.stdout)] == [9, 8, 7, 6, 4, 3, 2, 1]
    r = run(gridnode_bin, "jobs", "-e", ep, "--sort", "user", "--state", "queued")
    assert r.returncode == 0, r.stderr
    users = [ln.split()[2] for ln in r.stdout.splitlines()[1:]]
    assert users == sorted(users) and len(users) == 8, r.stdout
    for bad in (["--sort", "colour"], ["-q", "x"], ["-u"], ["extra"]):
        r = run(gridnode_bin, "jobs", "-e", ep, *bad)
        assert r.returncode == 2 and r.stderr, (bad, r.stderr)
    # the filters are bounded like every field
    u.err("JOB_LIST", "FIELD", queue=300)


# ---- item 5: hold / release, durable ---------------------------------------------------

def test_hold_release_survives_kill9(cluster_factory, client_factory, gridnode_bin):
    cl = cluster_factory(SETS)
    ep = cl.endpoint
    r = run(gridnode_bin, "submit", "-e", ep, "--json", "-n", "2", "/bin/true")
    assert r.returncode == 0, r.stderr
    job = json.loads(r.stdout)["job"]
    r = run(gridnode_bin, "hold", "-e", ep, job)
    assert r.returncode == 0 and "held" in r.stdout, r.stderr
    r = run(gridnode_bin, "hold", "-e", ep, "999999")
    assert r.returncode == 1 and "no job 999999" in r.stderr, r.stderr
    cl.restart()  # kill -9: the hold was acknowledged, so it is stored
    ep = cl.endpoint
    client_factory(cl, 1)
    u = cl.connect(timeout=scaled(60))

    def state():
        return u.ok("JOB_GET", "JOB", job=job)["job"]

    wait_until(lambda: u.ok("NODE_LIST", "NODES")["nodes"], scaled(30), msg="node")
    time.sleep(scaled(2))  # the node asks for work meanwhile: nothing may be handed out
    j = state()
    assert j["state"] == "held" and j["issued"] == 0, j
    r = run(gridnode_bin, "jobs", "-e", ep, "--json", "-t", "held")
    assert [x["job"] for x in json.loads(r.stdout)] == [job]
    r = run(gridnode_bin, "release", "-e", ep, job)
    assert r.returncode == 0 and "released" in r.stdout, r.stderr
    wait_until(lambda: state()["state"] == "done", scaled(60), msg="released job done")
    r = run(gridnode_bin, "release", "-e", ep, job)
    assert r.returncode == 1 and "already done" in r.stderr, r.stderr


# ---- item 5: node drain / resume (NODE_CTL) ----------------------------------------------


def test_drain_resume_survives_kill9(cluster_factory, client_factory, gridnode_bin):
    """A drained node finishes what it runs ('drain', then 'drained' with the reason),
    gets no new tasks, stays drained across kill -9 of the cluster manager, and works
    again after --resume."""
    cl = cluster_factory(SETS)
    ep = cl.endpoint
    client_factory(cl, 2, sets={"client.slots": "1"})
    u = cl.connect(timeout=scaled(60))
    wait_until(lambda: len(u.ok("NODE_LIST", "NODES")["nodes"]) == 2, scaled(30), msg="nodes")
    # refused locally, in the user's words
    for args, want in ((["--drain", "node1"], "--drain needs --reason"),
                       (["--reason", "x"], "--reason goes with --drain"),
                       (["--drain"], "--drain needs a value"),
                       (["--drain", "node1", "--resume", "node2", "--reason", "x"], "not both")):
        r = run(gridnode_bin, "nodes", "-e", ep, *args)
        assert r.returncode == 2 and want in r.stderr, (args, r.stderr)
    r = run(gridnode_bin, "nodes", "-e", ep, "--drain", "nosuch", "--reason", "x")
    assert r.returncode == 1 and "no node named nosuch" in r.stderr, r.stderr
    # a task runs on each node; node1 is drained meanwhile
    r = run(gridnode_bin, "submit", "-e", ep, "--json", "-n", "2", "--shell", "--",
            "sleep 3")
    job1 = json.loads(r.stdout)["job"]

    def node(name):
        return [n for n in u.ok("NODE_LIST", "NODES")["nodes"] if n["node"] == name][0]

    def ran_on(tasks):  # the node names of the results' sessions
        names = {n["sid"]: n["node"] for n in u.ok("NODE_LIST", "NODES")["nodes"]}
        return {names.get(t.get("node")) for t in tasks}

    wait_until(lambda: node("node1")["running"] == 1, scaled(30), msg="node1 runs a task")
    r = run(gridnode_bin, "nodes", "-e", ep, "--drain", "node1", "--reason", "disk check")
    assert r.returncode == 0 and "node node1 drained" in r.stdout, r.stderr
    r = run(gridnode_bin, "nodes", "-e", ep)
    row = [ln for ln in r.stdout.splitlines() if ln.startswith("node1 ")][0]
    assert " drain " in row, r.stdout
    assert "DRAINED NODE" in r.stdout and "disk check" in r.stdout, r.stdout
    wait_until(lambda: u.ok("JOB_GET", "JOB", job=job1)["job"]["state"] == "done",
               scaled(60), msg="running task of the drained node finished")
    r = run(gridnode_bin, "nodes", "-e", ep)
    row = [ln for ln in r.stdout.splitlines() if ln.startswith("node1 ")][0]
    assert " drained " in row, r.stdout
    # kill -9: the drain was acknowledged, so it is stored
    cl.restart()
    ep = cl.endpoint
    u = cl.connect(timeout=scaled(60))
    wait_until(lambda: len([n for n in u.ok("NODE_LIST", "NODES")["nodes"] if n["active"]]) == 2,
               scaled(60), msg="both nodes back")
    assert node("node1")["drain"] == "disk check"
    r = run(gridnode_bin, "submit", "-e", ep, "--json", "-n", "4", "--shell", "--",
            "true")
    job2 = json.loads(r.stdout)["job"]
    wait_until(lambda: u.ok("JOB_GET", "JOB", job=job2)["job"]["state"] == "done",
               scaled(60), msg="job on the other node")
    tasks = u.ok("JOB_GET", "JOB", job=job2, tasks=True, output=True)["tasks"]
    assert ran_on(tasks) == {"node2"}, tasks
    r = run(gridnode_bin, "nodes", "-e", ep, "--resume", "node1")
    assert r.returncode == 0 and "node node1 resumed" in r.stdout, r.stderr
    assert "drain" not in node("node1")
    r = run(gridnode_bin, "submit", "-e", ep, "--json", "-n", "6", "--shell", "--",
            "sleep 1")
    job3 = json.loads(r.stdout)["job"]
    wait_until(lambda: u.ok("JOB_GET", "JOB", job=job3)["job"]["state"] == "done",
               scaled(60), msg="job after resume")
    tasks = u.ok("JOB_GET", "JOB", job=job3, tasks=True, output=True)["tasks"]
    assert "node1" in ran_on(tasks), tasks
