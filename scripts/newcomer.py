#!/usr/bin/python3
"""newcomer.py - writes docs/newcomer.md, a newcomer's session with a real grid.

It starts a small local grid (scripts/grid up --meta: a grid spool over one site, a
batch role driving a cluster manager with one client, on free loopback ports in a
temporary directory), then does what a new user does, with gridnode commands only:
submits a three-step workflow at the spool, each step depending on the one before
(--dependency afterok:ID), waits for it, shows the jobs table, follows the hints from
the spool down to the cluster manager that keeps the outputs, reads them, shows the
accounting, and stops the grid. Every command and its real output goes into the
transcript; what changes from run to run (times, ports, the temporary directory,
reservation names, measured seconds and sizes) is replaced by fixed placeholders, so
the file is the same on every run. tests/system/test_newcomer.py runs this script and
compares its transcript with docs/newcomer.md.

Usage: scripts/newcomer.py [--write | --out FILE] [--dir DIR]
  (nothing)    print the transcript on stdout
  --write      write docs/newcomer.md
  --out FILE   write FILE
  --dir DIR    keep the grid's state in DIR (created; default a temporary directory,
               removed afterwards)
GRIDNODE_BIN names the binary (default build/gridnode of this checkout).
Exit status: 0 written; 1 a step did not do what it should (the message says which).
"""
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
GRID = REPO / "scripts" / "grid"
BIN = os.environ.get("GRIDNODE_BIN", str(REPO / "build" / "gridnode"))
SHOWN_DIR = "/tmp/newcomer"  # the temporary directory, as the transcript shows it
SHOWN_PORTS = {"cluster": 17300, "batch": 17400, "meta": 17500}
TIMEOUT = 120

STEP1 = "seq 1 5 > numbers.txt; echo made 5 numbers"
STEP2 = ("while read n; do echo $((n * n)); done < numbers.txt > squares.txt; "
         "echo squared $(wc -l < squares.txt) numbers")
STEP3 = "awk '{ s += $1 } END { print \"sum of squares:\", s }' squares.txt"


class Failed(Exception):
    pass


def free_ports(n):
    """n distinct loopback ports free right now (the grid binds them a moment later)."""
    socks, ports = [], []
    try:
        while len(ports) < n:
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            socks.append(s)
            if s.getsockname()[1] not in ports:
                ports.append(s.getsockname()[1])
    finally:
        for s in socks:
            s.close()
    return ports


class Session:
    """Runs commands, records them with their output, and normalizes what varies."""

    def __init__(self, d):
        self.dir = d
        self.env = dict(os.environ, GRIDNODE_BIN=BIN)
        for k in ("GRIDNODE_PLAIN", "GRIDNODE_CLUSTER", "GRIDNODE_BATCH", "GRIDNODE_META"):
            self.env.pop(k, None)
        self.ports = {}
        self.out = []

    def norm(self, text):
        text = text.replace(str(self.dir), SHOWN_DIR)
        real = {str(p): str(SHOWN_PORTS[k]) for k, p in self.ports.items()}
        if real:  # endpoints and the port options of scripts/grid
            text = re.sub(r"(127\.0\.0\.1:|-port )(\d+)",
                          lambda m: m.group(1) + real.get(m.group(2), m.group(2)), text)
        text = re.sub(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d", "YYYY-MM-DD hh:mm:ss", text)
        text = re.sub(r"\b\d\d:\d\d:\d\d\b", "hh:mm:ss", text)  # acct ELAPSED
        text = re.sub(r"\bm[0-9a-f]{16}-", "mXXXXXXXXXXXXXXXX-", text)  # reservations
        # measured seconds (CPU_S, WALL_S, ran ... s) and use sums: digits become x
        text = re.sub(r"(?<![\d.])\d+\.\d+(?![\d.])",
                      lambda m: re.sub(r"\d", "x", m.group(0)), text)
        # a rank's RSS_KB and DISK_KB (the columns after CPU_S), right-aligned
        return re.sub(r"(x\.x)( +\d+)( +\d+)",
                      lambda m: m.group(1) + " " * (len(m.group(2)) - 1) + "x" +
                      " " * (len(m.group(3)) - 1) + "x", text)

    def note(self, text):
        self.out.append(text.strip() + "\n")

    def run(self, shown, argv, want=0, drop=None):
        """Runs argv (shown as the command line `shown`); records stdout, then stderr
        (lines of either matching drop left out), and the exit status when it is not 0.
        Returns (stdout, stderr) as printed, before normalization."""
        p = subprocess.run(argv, capture_output=True, text=True, timeout=TIMEOUT,
                           env=self.env, stdin=subprocess.DEVNULL, cwd=str(self.dir))
        kept = lambda text: "".join(line for line in text.splitlines(True)
                                    if not (drop and re.match(drop, line)))
        body = kept(p.stdout) + kept(p.stderr)
        if body and not body.endswith("\n"):
            body += "\n"
        if p.returncode != 0:
            body += "[exit %d]\n" % p.returncode
        self.out.append("```\n$ %s\n%s```\n" % (self.norm(shown), self.norm(body)))
        if p.returncode != want:
            raise Failed("%s: exit %d, wanted %d:\n%s%s" % (shown, p.returncode, want,
                                                           p.stdout, p.stderr))
        return p.stdout, p.stderr

    def shown(self, shown):
        """Records a command this script does itself (its output is empty)."""
        self.out.append("```\n$ %s\n```\n" % self.norm(shown))

    def tool(self, shown, *args, **kw):
        return self.run("gridnode " + shown, [BIN] + list(args), **kw)


def sh_quote(s):
    return "'" + s.replace("'", "'\\''") + "'" if re.search(r"[^\w@%+=:,./-]", s) else s


def grid_up(s):
    """scripts/grid up on free ports; a port taken meanwhile gets new ones (3 tries)."""
    for attempt in range(3):
        c, b, m = free_ports(3)
        s.ports = {"cluster": c, "batch": b, "meta": m}
        args = ["up", "--meta", "--sites", "1", "--clients", "1", "--slots", "2",
                "--port", str(c), "--batch-port", str(b), "--meta-port", str(m),
                "--dir", str(s.dir)]
        mark = len(s.out)
        try:
            return s.run("scripts/grid " + " ".join(args), [str(GRID)] + args)
        except Failed:
            if attempt == 2:
                raise
            del s.out[mark:]
            subprocess.run([str(GRID), "down", "--dir", str(s.dir)], capture_output=True,
                           timeout=TIMEOUT, env=s.env, stdin=subprocess.DEVNULL)


def session(s):
    s.note("""
# A newcomer's session: a three-step workflow at the grid spool

This is a real session, written by `scripts/newcomer.py` (the test suite runs it and
compares its transcript with this file, so the file cannot drift from what the
commands print). It starts a small grid on one machine, submits a workflow of three
steps at the grid spool (the metascheduler), each step starting only once the one
before it has ended successfully, reads the results and the accounting, and stops the
grid. What changes from run to run is replaced by placeholders: times
(`YYYY-MM-DD hh:mm:ss`, elapsed `hh:mm:ss`), measured seconds and sizes (digits
shown as `x`), reservation names (`mXXXX...`), the temporary directory (shown as
`/tmp/newcomer`) and the ports (shown as 17300 for the cluster manager, 17400 for
the batch role, 17500 for the spool; the script takes free ones). A command's
standard output comes first, then its standard error; `[exit N]` follows a command
that did not exit 0. `job --wait` also draws a progress line on standard error while
it waits; those lines are left out.

## Start a grid

`scripts/grid up --meta` starts the whole hierarchy on loopback: the grid spool
(`gridnode meta`), and for each site a batch role (`gridnode batch`, the Maui-style
scheduler) driving a cluster manager (`gridnode cluster`) with its clients
(`gridnode client`). Here: one site, one client with two slots.
""")
    grid_up(s)
    meta = "tcp://127.0.0.1:%d" % s.ports["meta"]
    s.note("""
The grid made CURVE keys (docs/security.md); the tools find them through the
variables it printed. `USER` names the owner of the jobs (your own login name
normally; set here so the transcript does not depend on who runs it).
""")
    s.shown("export GRIDNODE_META=%s GRIDNODE_KEY=%s/keys/admin.key "
            "GRIDNODE_SERVER_KEY=%s/keys/server.pub USER=alice" % (meta, s.dir, s.dir))
    s.env.update(GRIDNODE_META=meta, GRIDNODE_KEY="%s/keys/admin.key" % s.dir,
                 GRIDNODE_SERVER_KEY="%s/keys/server.pub" % s.dir, USER="alice",
                 LOGNAME="alice")
    work = s.dir / "work"
    s.note("""
## Submit the workflow

The steps share a directory (`--chdir`): on a real grid a shared file system, here a
directory of this machine. Tasks run under a slot's own uid, so it is writable by all
(mode 1777, like /tmp).
""")
    s.shown("mkdir -m 1777 %s" % work)
    work.mkdir()
    work.chmod(0o1777)
    s.note("""
Step 1 makes the data, step 2 transforms it, step 3 summarizes it. `--dependency
afterok:ID` (Slurm's vocabulary) keeps a step queued, with reason `Dependency`, until
job ID has ended successfully; if it fails, the step is cancelled
(`DependencyNeverSatisfied`) rather than run on missing data.
""")
    ids = []
    for name, script in (("make", STEP1), ("square", STEP2), ("sum", STEP3)):
        dep = ["--dependency", "afterok:%d" % ids[-1]] if ids else []
        args = ["submit", "-e", meta, "--name", name, "--chdir", str(work)] + dep + \
            ["--shell", "--", script]
        shown = "submit -e $GRIDNODE_META --name %s --chdir %s %s--shell -- %s" % (
            name, work, " ".join(dep) + " " if dep else "", sh_quote(script))
        out, _ = s.tool(shown, *args)
        m = re.match(r"submitted job (\d+)", out)
        if not m:
            raise Failed("submit printed no job id: %r" % out)
        ids.append(int(m.group(1)))
    last = ids[-1]
    s.note("""
## Wait for it

`job --wait` follows the last step until it ends (exit 0: done; 3 failed, 4 killed, 5
cancelled), then shows it: where the spool placed it, and the site's own job.
""")
    # the spool answers the wait in the turn the job ends (JOB_WAIT), often before its
    # site acknowledged the release of the job's reservation: the line saying so comes
    # and goes with timing, so it is left out of the transcript as the progress lines
    out, _ = s.tool("job %d -e $GRIDNODE_META --wait" % last, "job", str(last), "-e", meta,
                    "--wait", drop=r"job \d+ \[|\d+ order\(s\) to its site")
    m = re.search(r"site \S+ \((tcp://[^)]+)\), its job (\d+)", out)
    if not m:
        raise Failed("job --wait named no site: %r" % out)
    site_ep = m.group(1)
    s.note("""
## The jobs table

Every step ran at site `site1` (SITE_JOB is the site batch role's job), one after the
other.
""")
    out, _ = s.tool("jobs -e $GRIDNODE_META", "jobs", "-e", meta)
    site_jobs = []
    for j in ids:
        m = re.search(r"^\s+%d\s+\S+\s+\S+\s+done\s+\S+\s+(\d+)\s" % j, out, re.M)
        if not m:
            raise Failed("job %d is not done in the jobs table:\n%s" % (j, out))
        site_jobs.append(m.group(1))
    s.note("""
## Read the outputs

The spool keeps no output: the cluster manager that ran a task keeps it. Asked for
it, the spool and then the site's batch role each say where to look.
""")
    s.tool("job %d -e $GRIDNODE_META --output" % last, "job", str(last), "-e", meta,
           "--output", want=1)
    _, err = s.tool("job %s -e %s --output" % (" ".join(site_jobs), site_ep), "job",
                    *site_jobs, "-e", site_ep, "--output", want=1)
    hints = re.findall(r"gridnode job (\d+) --output -e (\S+)", err)
    if len(hints) != len(ids) or len({ep for _, ep in hints}) != 1:
        raise Failed("the batch role did not name one cluster job per step:\n%s" % err)
    cjobs, cluster_ep = [j for j, _ in hints], hints[0][1]
    s.note("""
At the cluster manager, each step's standard output: 5 numbers made, squared, and
their sum of squares, 1 + 4 + 9 + 16 + 25 = 55. Each step read the file the step
before it wrote: they ran in order.
""")
    out, _ = s.tool("job %s --output -e %s" % (" ".join(cjobs), cluster_ep), "job", *cjobs,
                    "--output", "-e", cluster_ep)
    if "sum of squares: 55" not in out:
        raise Failed("the last step's output is not the sum of squares:\n%s" % out)
    s.note("""
## Accounting

The spool keeps a record of every finished job (kept after `gridnode purge`, for
`acct.keep_days`), as Slurm's `sacct` does; `--usage` sums it per user and account.
""")
    s.tool("acct -e $GRIDNODE_META", "acct", "-e", meta)
    s.tool("acct -e $GRIDNODE_META --usage", "acct", "-e", meta, "--usage")
    s.note("""
## Stop the grid

`down` stops every role of the grid; the state stays in the directory, and `up` with
the same `--dir` starts the same grid again.
""")
    s.run("scripts/grid down --dir %s" % s.dir, [str(GRID), "down", "--dir", str(s.dir)])


def main(argv):
    out_path, keep = None, None
    i = 0
    while i < len(argv):
        a = argv[i]
        if a in ("-h", "--help"):
            print(__doc__.strip())
            return 0
        if a == "--write":
            out_path = REPO / "docs" / "newcomer.md"
        elif a in ("--out", "--dir") and i + 1 < len(argv):
            i += 1
            if a == "--out":
                out_path = Path(argv[i])
            else:
                keep = Path(argv[i]).resolve()
        else:
            print("newcomer.py: unknown argument %r (see --help)" % a, file=sys.stderr)
            return 2
        i += 1
    if keep:
        keep.mkdir(parents=True, exist_ok=True)
    d = keep or Path(tempfile.mkdtemp(prefix="newcomer-")).resolve()
    s = Session(d)
    try:
        session(s)
    except (Failed, subprocess.TimeoutExpired) as e:
        print("newcomer.py: %s" % e, file=sys.stderr)
        return 1
    finally:
        subprocess.run([str(GRID), "down", "--dir", str(d)], capture_output=True,
                       timeout=TIMEOUT, env=s.env, stdin=subprocess.DEVNULL)
        if not keep:
            shutil.rmtree(d, ignore_errors=True)
    text = "\n".join(s.out)
    if out_path:
        out_path.write_text(text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
