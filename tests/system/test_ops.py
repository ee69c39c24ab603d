"""System tests of issue 15 items 3-5 (operator experience): submit's option checking
in the user's words and --opt=value everywhere, job scripts with #GRIDNODE directives,
`jobs` filters and sort, hold / release / requeue, node drain / resume."""

import json
import os
import subprocess

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
