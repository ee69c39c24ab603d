"""The command-line tools' misleading corners (issue 27, "Misleading"): unknown values and
malformed numbers are refused with the option named (exit 2, the usage status of every
command), --version, the client's --help naming --emulate, --check-config reporting
every error of a file, several ids for cancel, submit's endpoint line at a batch role,
`job`'s truncated task table and --output where no output is kept, protocol names kept
out of error text, UTF-8 table columns, and setres refusals in users' units. Real roles
on loopback where a role is needed; waits are bounded."""

import json
import os
import subprocess

import pytest

from conftest import GRIDNODE_BIN, REPO, TYPES, scaled, security_env, wait_until

T = TYPES
SD = {"store.sync": "none", "queues.sync_ms": 100, "tasks.heartbeat_s": 1,
      "tasks.idle_wait_s": 1}
CLIENT = {"rpc.timeout_ms": 2000, "rpc.backoff_min_s": 0.2, "rpc.backoff_max_s": 1}


def gn(*args, rc=None, ep=None, user="alice", stdin=None):
    """Runs gridnode ARGS (with -e EP when given); asserts the exit status when rc is set."""
    cmd = [GRIDNODE_BIN] + [str(a) for a in args] + (["-e", ep] if ep else [])
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=scaled(30),
                       env=dict(security_env(), USER=user, PATH="/usr/bin:/bin"),
                       stdin=stdin if stdin is not None else subprocess.DEVNULL)
    if rc is not None:
        assert r.returncode == rc, (args, r.returncode, r.stdout, r.stderr)
    return r


# ---------------------------------------------------------------------------
# item 1: unknown values and malformed numbers


def test_jobs_unknown_state_refused_with_the_list(cluster):
    for bad in ("bogus", "running,bogus", "running,", ""):
        r = gn("jobs", "-t", bad, rc=2, ep=cluster.endpoint)
        assert r.stdout == ""
        if bad:
            assert "unknown job state" in r.stderr and "queued" in r.stderr \
                and "placed" in r.stderr, r.stderr
    # every state of every level is accepted (an empty table, exit 0)
    for good in ("queued,running,held,done,failed,cancelled", "waiting,requeueing",
                 "placing,placed", "pending,starting"):
        gn("jobs", "-t", good, rc=0, ep=cluster.endpoint)


NUMERIC = [
    (["dump", "/nonexistent", "--limit"], "--limit"),
    (["jobs", "--queue"], "--queue"),
    (["job", "1", "--from"], "--from"),
    (["job", "1", "--count"], "--count"),
    (["showstart", "1", "-n"], "-n"),
    (["setres", "node1", "-d", "60", "-p"], "-p"),
    (["setres", "node1", "-d", "60", "-t"], "-t"),
    (["submit", "--tasks"], "--tasks"),
    (["submit", "--retries"], "--retries"),
    (["submit", "--queue"], "--queue"),
    (["jobs", "--timeout"], "--timeout"),
    (["jobs", "--connect-timeout"], "--connect-timeout"),
]


@pytest.mark.parametrize("args,opt", NUMERIC, ids=[" ".join(a) for a, _ in NUMERIC])
@pytest.mark.parametrize("value", ["abc", "-1", "5x", " 5", "+5", ""])
def test_numeric_options_refuse_non_numbers(args, opt, value):
    tail = ["true"] if args[0] == "submit" else []
    r = gn(*(args + [value] + tail), ep="tcp://127.0.0.1:9")
    assert r.returncode == 2, (args, value, r.returncode, r.stdout, r.stderr)
    assert opt in r.stderr, r.stderr


@pytest.mark.parametrize("args", [["cancel", "12abc"], ["hold", "1", "x"], ["job", "-3"],
                                  ["purge", "--older-than", " 5"], ["showstart", "-1@10"],
                                  ["showstart", "4@+10"]])
def test_numeric_arguments_refuse_garbage(args):
    r = gn(*args, ep="tcp://127.0.0.1:9")
    assert r.returncode == 2, (args, r.returncode, r.stderr)


def test_dump_limit_still_works(cluster):
    cluster.kill()
    r = gn("dump", str(cluster.state_dir), "--limit", "0", rc=0)
    assert "first ones shown" in r.stdout or "(0 records)" in r.stdout


# ---------------------------------------------------------------------------
# item 7: --version, client --help, --check-config lists every error


def test_version():
    for flag in ("--version", "-V"):
        r = gn(flag, rc=0)
        assert r.stdout.startswith("gridnode ") and "wire protocol 1" in r.stdout, r.stdout
    assert "--version" in gn("help", rc=0).stdout


def test_client_help_names_emulate():
    out = gn("client", "--help", rc=0).stdout
    assert "--emulate" in out and "gridnode client --emulate --help" in out


BAD_INI = """[cluster]
nosuchkey = 1
this line is wrong
listen = tcp://127.0.0.1:7300
[tasks
[tasks]
heartbeat_s = abc
heartbeat_s = 5
"""


@pytest.mark.parametrize("role", ["cluster", "client", "meta"])
def test_check_config_lists_every_error(role, tmp_path):
    ini = tmp_path / ("%s.ini" % role)
    sect = {"cluster": "cluster", "client": "client", "meta": "meta"}[role]
    ini.write_text(BAD_INI.replace("[cluster]", "[%s]" % sect)
                   .replace("listen = tcp://127.0.0.1:7300\n", ""))
    r = gn(role, "--check-config", "-c", ini, "--set", "nodot=1", "--set",
           "%s.nokey=2" % sect)
    assert r.returncode == 1, (r.returncode, r.stdout, r.stderr)
    lines = [l for l in r.stderr.splitlines() if l]
    pre = "gridnode %s: configuration error: " % role
    assert all(l.startswith(pre) for l in lines), lines
    got = [l[len(pre):] for l in lines]
    # one line each, file:line: message, in the order of the file, then the --set ones
    assert got[0] == "%s:2: unknown key [%s] nosuchkey" % (ini, sect), got
    assert got[1].startswith("%s:3: syntax error" % ini), got
    assert got[2].startswith("%s:4: syntax error" % ini), got
    if role == "meta":  # no [tasks] section: its keys are unknown there
        assert got[3] == "%s:6: unknown key [tasks] heartbeat_s" % ini, got
    elif role == "cluster":
        assert got[3] == "%s:6: [tasks] heartbeat_s: 'abc' is not an integer" % ini, got
    assert got[-2] == "--set nodot=1: expected section.key=value", got
    assert got[-1] == "--set %s.nokey=2: unknown key [%s] nokey" % (sect, sect), got


# ---------------------------------------------------------------------------
# item 5: cancel takes several ids, as hold/release/requeue


def submit_rpc(role, **kw):
    fields = dict(argv=["sleep", "30"], ntasks=1)
    fields.update(kw)
    return role.rpc(T["SUBMIT"], **fields)["job"]


def test_cancel_several_names_the_failed(cluster):
    a, b = submit_rpc(cluster), submit_rpc(cluster)
    r = gn("cancel", a, 999, b, ep=cluster.endpoint)
    assert r.returncode == 1, (r.stdout, r.stderr)
    assert "job %d cancelled" % a in r.stdout and "job %d cancelled" % b in r.stdout
    assert "job 999:" in r.stderr and "1 of 3 jobs not cancelled: 999" in r.stderr, r.stderr
    for j in (a, b):
        assert cluster.rpc(T["JOB_GET"], job=j)["job"]["state"] == "cancelled"
    # all fine: exit 0, JSON one line each
    c, d = submit_rpc(cluster), submit_rpc(cluster)
    r = gn("cancel", c, d, "--json", rc=0, ep=cluster.endpoint)
    assert [json.loads(l) for l in r.stdout.splitlines()] == [
        {"job": c, "cancelled": True}, {"job": d, "cancelled": True}]
    # hold names the failing id too
    r = gn("hold", 998, rc=1, ep=cluster.endpoint)
    assert "job 998:" in r.stderr
