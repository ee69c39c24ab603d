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
    a = [str(x) for x in args]
    cmd = [GRIDNODE_BIN] + a[:1] + (["-e", ep] if ep else []) + a[1:]
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


# ---------------------------------------------------------------------------
# items 3, 8, 4: submit's endpoint line, --output where no output is kept, the real run
# time at a batch role, the truncated task table, --summary of a parallel job

P = dict(TYPES, PSUBMIT=39, NODE_LIST=37)


def site(cluster_factory, client_factory, batch_factory, slots=2):
    cl = cluster_factory(SD, name="cl_a")
    client_factory(cl, 1, sets=dict(CLIENT, **{"client.slots": slots}), prefix="an")
    b = batch_factory([cl], name="b_a")
    wait_until(lambda: sum(1 for n in b.rpc(P["NODE_LIST"])["nodes"] if n["active"]) == 1,
               scaled(20), msg="the batch role sees its host")
    return cl, b


def jget(role, jid, **kw):
    return role.rpc(T["JOB_GET"], job=jid, **kw)["job"]


def test_batch_and_spool_submit_output_and_run_time(cluster_factory, client_factory,
                                                    batch_factory, meta_factory):
    cl, b = site(cluster_factory, client_factory, batch_factory)
    m = meta_factory({"a": b})
    # item 3: the line names the endpoint that places the job, and the right id
    r = gn("submit", "-p", "1", "--limit", "60", "--", "sh", "-c", "echo pout; sleep 2",
           rc=0, ep=b.endpoint)
    assert "to cluster" not in r.stdout, r.stdout
    assert "at %s, which places it" % b.endpoint in r.stdout, r.stdout
    pj = int(r.stdout.split()[3])
    assert jget(b, pj)["kind"] == "parallel"
    r = gn("submit", "-p", "1", "--limit", "60", "--", "true", rc=0, ep=m.endpoint)
    assert "to cluster" not in r.stdout and "at %s, which places it" % m.endpoint in r.stdout
    gj = int(r.stdout.split()[3])
    r = gn("submit", "-p", "1", "--limit", "60", "--", "true", rc=0, ep=cl.endpoint)
    assert "to cluster " in r.stdout and not r.stdout.rstrip().endswith("to cluster"), r.stdout
    wait_until(lambda: jget(b, pj)["state"] in ("done", "failed"), scaled(60), msg="pj ends")
    # item 8: the real run time (the batch role sends no run_s), not "ran 0.0 s"
    out = gn("job", pj, rc=0, ep=b.endpoint).stdout
    ran = float(out.split("; ran ")[1].split(" s")[0])
    assert ran >= 1.5, out
    # --output at the batch role: where the output is, exit 1; that command shows it
    r = gn("job", pj, "--output", rc=1, ep=b.endpoint)
    assert "keeps no output" in r.stderr and cl.endpoint in r.stderr, r.stderr
    cmd = r.stderr.split("run gridnode ")[1].split()
    assert cmd[0] == "job" and cmd[-2] == "-e"
    r2 = gn(*cmd, rc=0)
    assert "pout" in r2.stdout, r2.stdout
    # a task array at the batch role: each element's cluster job named, exit 1
    r = gn("submit", "-n", "2", "--limit", "60", "--", "echo", "t{i}", rc=0, ep=b.endpoint)
    bj = int(r.stdout.split()[2])
    wait_until(lambda: jget(b, bj)["state"] in ("done", "failed"), scaled(60), msg="bj ends")
    r = gn("job", bj, "--output", rc=1, ep=b.endpoint)
    assert "keeps no task output" in r.stderr and "--output -e %s" % cl.endpoint in r.stderr
    line = [l for l in r.stderr.splitlines() if l.startswith("  cluster ")][0]
    cmd = line.split(": gridnode ")[1].split()
    out = gn(*cmd, rc=0).stdout
    assert "t0" in out and "t1" in out, out
    # the spool relays its site's answer (issue 27): a batch site's names the cluster
    # job that keeps the output, exit 1 (test_meta_output.py, test_meta_slurm.py)
    wait_until(lambda: jget(m, gj)["gstate"] in ("done", "failed"), scaled(60),
               msg="the spool's job ends")
    r = gn("job", gj, "--output", rc=1, ep=m.endpoint)
    assert "output, as site job" in r.stdout and cl.endpoint in r.stderr, (r.stdout, r.stderr)
    gn("job", gj, rc=0, ep=m.endpoint)


def test_job_says_when_tasks_are_left_out(cluster):
    jid = submit_rpc(cluster, ntasks=1500, argv=["true"])
    r = gn("job", jid, rc=0, ep=cluster.endpoint)
    rows = [l for l in r.stdout.splitlines() if l.split() and l.split()[0].isdigit()]
    assert len(rows) == 1000
    assert "showing tasks 0 to 999 of 1500" in r.stdout and "--all" in r.stdout, r.stdout
    r = gn("job", jid, "--all", rc=0, ep=cluster.endpoint)
    rows = [l for l in r.stdout.splitlines() if l.split() and l.split()[0].isdigit()]
    assert len(rows) == 1500 and "showing" not in r.stdout
    r = gn("job", jid, "--from", 1400, rc=0, ep=cluster.endpoint)
    assert "showing tasks 1400 to 1499 of 1500" in r.stdout, r.stdout
    r = gn("job", jid, "--from", 2000, rc=0, ep=cluster.endpoint)
    assert "no task from --from 2000" in r.stdout
    j = json.loads(gn("job", jid, "--all", "--json", rc=0, ep=cluster.endpoint).stdout)
    assert len(j["tasks"]) == 1500


def test_summary_of_a_parallel_job(cluster):
    jid = cluster.rpc(P["PSUBMIT"], argv=["true"], procs=1, limit_s=60, wait=True)["job"]
    full = gn("job", jid, rc=0, ep=cluster.endpoint).stdout
    short = gn("job", jid, "--summary", rc=0, ep=cluster.endpoint).stdout
    assert "RANK" in full, full
    assert "RANK" not in short and "limits:" in short and str(jid) in short, short


# ---------------------------------------------------------------------------
# item 2: errors in the user's words; --json keeps the code

PROTOCOL_NAMES = ("NOT_FOUND", "INVALID", "STATE", "REFUSED", "DENIED", "FIELD", "SUBMIT",
                  "PSUBMIT", "JOB_GET", "CANCEL", "JOB_CTL")


def test_errors_without_protocol_names(cluster):
    ep = cluster.endpoint
    cases = [
        (("job", 999), "no job 999", "gridnode jobs"),
        (("cancel", 999), "no job 999", "gridnode jobs"),
        (("hold", 999), "no job 999", None),
        (("submit", "-p", "1", "--queue", "200", "--", "true"), "queue", None),
    ]
    for args, what, hint in cases:
        r = gn(*args, rc=1, ep=ep)
        assert what in r.stderr, (args, r.stderr)
        assert hint is None or hint in r.stderr, (args, r.stderr)
        assert not any(n in r.stderr for n in PROTOCOL_NAMES), (args, r.stderr)
    jid = submit_rpc(cluster)
    gn("cancel", jid, rc=0, ep=ep)
    r = gn("cancel", jid, rc=1, ep=ep)
    assert "already cancelled" in r.stderr and "STATE" not in r.stderr, r.stderr
    # --json: the code stays, as a JSON line on stderr
    r = gn("job", 999, "--json", rc=1, ep=ep)
    e = json.loads(r.stderr.strip().splitlines()[-1])
    assert e["code"] == 5 and e["error"] == "NOT_FOUND" and "999" in e["msg"], e


# ---------------------------------------------------------------------------
# item 6: UTF-8 names keep the table's columns


def display_width(s):
    import unicodedata
    return sum(0 if unicodedata.combining(ch) else
               2 if unicodedata.east_asian_width(ch) in ("W", "F") else 1 for ch in s)


def test_utf8_names_keep_columns(cluster):
    names = ["plain", "café", "日本語のジョブ", "ÅÄÖåäöÅÄÖåäöÅÄÖåäöxyz", "e\u0301t\u0301e\u0301"]
    for n in names:
        submit_rpc(cluster, name=n, user="zoë")
    out = gn("jobs", rc=0, ep=cluster.endpoint).stdout.splitlines()
    head, rows = out[0], [l for l in out[1:] if l.strip()]
    assert len(rows) == len(names), out
    col = display_width(head[:head.index("USER")])
    st = display_width(head[:head.index("STATE")])
    for row in rows:
        # the user column starts where its heading does, and so does the state after it
        w, hits = 0, 0
        for i, ch in enumerate(row):
            if w == col:
                assert row[i:].startswith("zoë"), (row, out)
                hits += 1
            if w == st:
                assert row[i:].startswith("queued"), (row, out)
                hits += 1
            w += display_width(ch)
        assert hits == 2, (row, out)


# ---------------------------------------------------------------------------
# item 9: setres refusals in the users' units


def test_setres_refusal_names_job_and_local_time(cluster_factory, client_factory, batch_factory,
                                                 monkeypatch):
    import re
    monkeypatch.setenv("GRIDNODE_PLAIN", "1")
    cl, b = site(cluster_factory, client_factory, batch_factory, slots=1)
    jid = b.rpc(P["PSUBMIT"], argv=["sleep 60"], shell=True, procs=1, limit_s=120)["job"]
    wait_until(lambda: jget(b, jid)["state"] == "running", scaled(30), msg="the job runs")
    host = jget(b, jid)["hosts"][0]
    r = gn("setres", host, "-d", "10:00", rc=1, ep=b.endpoint, user="root")
    assert "runs job %d until " % jid in r.stderr, r.stderr
    assert re.search(r"until \d{4}-\d\d-\d\d \d\d:\d\d:\d\d", r.stderr), r.stderr
    assert "REFUSED" not in r.stderr
    gn("cancel", jid, rc=0, ep=b.endpoint)
