#!/usr/bin/python3
"""scripts/chaos.py - kill -9 at every level of a whole grid under load, then check
the exactly-once promise at the top and down the path (issue 24, docs/meta.md "Chaos
test").

Starts on loopback, in a temporary directory, a meta spool over S batch sites, each
with its own cluster manager and C clients (plain mode, the shipped configs with a few
faster timings), submits N keyed jobs at the spool (parallel jobs of 1-2 processes and
task arrays of 2-4 elements), and while they run kills random roles with SIGKILL
(sometimes two levels at once), each restarted after 0-2 s on its own state directory.
The seed fixes the jobs and the kill schedule. After the time budget the kills stop,
every role is up again, and the grid drains (bounded); then the checks:

  acked       every submission was acknowledged (resent with its key on no answer) and
              a final resend of every key gets the same job back (`repeat`)
  done        every acknowledged job is `done` at the spool (the jobs cannot fail by
              themselves; a failed one is listed with its reason)
  output      each element's (rank's) token is read back down the path: spool ->
              site job -> the cluster job the site names -> its stdout
  once        no element completed twice: every process writes a `start` line and, after
              its work, a `done` line with its cluster job id to a marker file; a run of
              an element is complete when every rank of one cluster job wrote `done`; more
              than one complete run of an element is a double run (a run killed midway,
              or one whose other rank was lost, and run again is fine)
  strays      no copy of a spool job is running or done at a site the spool does not
              point to (any other copy is cancelled and never started), and no cluster
              job of an element ran to the end beside the one its site points to
  resv        no reservation owned by the spool (`meta`) is left at any site

Exit status: 0 when every check holds, 1 with the list of violations (the temporary
directory is kept and named), 2 for bad usage or a grid that could not start.
`--json` prints the figures as one JSON line (kills per level, jobs, reruns, moves,
time to drain).

Run with Debian's /usr/bin/python3 (zmq, msgpack). GRIDNODE_BIN names the binary
(default build/gridnode)."""

import argparse
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
T = {"ERROR": 1, "SUBMIT": 30, "SUBMITTED": 31, "JOB_LIST": 32, "JOB_GET": 34,
     "NODE_LIST": 37, "PSUBMIT": 39, "CHECKJOB": 82, "RESV_LIST": 90, "SITE_INFO": 94}
LEVELS = ("meta", "batch", "cluster", "client")
END = ("done", "failed", "killed", "cancelled")
LIMIT_S = 20  # walltime of every job (each sleeps 1-4 s): a reservation lasts this plus 5 s


def log(msg):
    print("chaos: " + msg, file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------
# the wire (docs/wire.md): one DEALER per Rpc, plain on loopback


class Rpc:
    def __init__(self, endpoint):
        import zmq
        self.zmq = zmq
        self.endpoint = endpoint
        self.ctx = zmq.Context.instance()
        self.sock = None
        self.ids = 0

    def _open(self):
        if self.sock is None:
            self.sock = self.ctx.socket(self.zmq.DEALER)
            self.sock.setsockopt(self.zmq.LINGER, 0)
            self.sock.connect(self.endpoint)

    def close(self):
        if self.sock is not None:
            self.sock.close(0)
            self.sock = None

    def call(self, t, timeout=3.0, **fields):
        """The reply map, or None when none came within timeout (the socket is then
        closed, so a late reply never answers a later request)."""
        import msgpack
        self._open()
        self.ids += 1
        m = {"v": 1, "t": T.get(t, t), "id": self.ids}
        m.update(fields)
        self.sock.send(msgpack.packb(m, use_bin_type=True))
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0 or not self.sock.poll(int(left * 1000)):
                self.close()
                return None
            r = msgpack.unpackb(self.sock.recv_multipart()[-1], raw=False,
                                strict_map_key=False, unicode_errors="replace")
            if isinstance(r, dict) and r.get("id") == m["id"]:
                return r

    def ok(self, t, tries=5, **fields):
        """call() retried on no answer (reads only); None after `tries`, or the ERROR."""
        for _ in range(tries):
            r = self.call(t, **fields)
            if r is not None:
                return r
            time.sleep(0.5)
        return None

    def pages(self, t, key, tries=5, **fields):
        """Every row of a paged list (6.2), or None when a page went unanswered."""
        rows, frm = [], 0
        for _ in range(100000):
            r = self.ok(t, tries=tries, **dict(fields, **({"from": frm} if frm else {})))
            if r is None or r.get("t") == T["ERROR"]:
                return None
            rows += r.get(key, [])
            if not r.get("next"):
                return rows
            frm = r["next"]
        return rows


# ---------------------------------------------------------------------------
# the roles


class Role:
    """One gridnode process on its own state dir; restart() reuses its endpoint."""

    def __init__(self, grid, name, level, args, state_dir, listen_key=None):
        self.grid, self.name, self.level = grid, name, level
        self.args, self.state_dir, self.listen_key = args, Path(state_dir), listen_key
        self.endpoint = None
        self.proc = None
        self.starts = 0
        self.log_path = grid.dir / "logs" / (name + ".log")

    def command(self):
        listen = self.endpoint or "tcp://127.0.0.1:*"
        a = [self.grid.bin] + self.args() + ["--set", "security.plain=true"]
        if self.listen_key:
            a += ["--set", "%s=%s" % (self.listen_key, listen)]
        return a

    def start(self, timeout=30):
        """Starts the process; a listening role must write its endpoint file within
        timeout (a restart whose port is still held is tried again). True when up."""
        deadline = time.monotonic() + timeout
        while True:
            ep = self.state_dir / "endpoint"
            if self.listen_key and ep.exists():
                ep.unlink()
            self.starts += 1
            with open(self.log_path, "ab") as f:
                f.write(("== %s chaos: start %d of %s\n" % (
                    time.strftime("%H:%M:%S"), self.starts, self.name)).encode())
                f.flush()
                self.proc = subprocess.Popen(self.command(), stdin=subprocess.DEVNULL,
                                             stdout=f, stderr=f, env=self.grid.env,
                                             start_new_session=True)
            if not self.listen_key:
                return True
            while time.monotonic() < deadline and self.proc.poll() is None:
                if ep.exists() and ep.read_text().strip():
                    self.endpoint = ep.read_text().strip()
                    return True
                time.sleep(0.05)
            if self.proc.poll() is None:
                self.stop()
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.3)

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def kill9(self):
        if self.alive():
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait()

    def stop(self):
        """SIGTERM, then SIGKILL after 10 s; then whatever is left of its process group
        (tasks of a client without the sandbox)."""
        if self.proc is None:
            return
        if self.alive():
            os.kill(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.kill(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except OSError:
            pass


class Grid:
    """meta -> S batch sites -> one cluster manager each -> C clients each."""

    def __init__(self, opts, directory):
        self.o, self.dir = opts, Path(directory)
        self.bin = os.environ.get("GRIDNODE_BIN", str(REPO / "build" / "gridnode"))
        self.env = {k: v for k, v in os.environ.items()
                    if k not in ("GRIDNODE_KEY", "GRIDNODE_SERVER_KEY",
                                 "GRIDNODE_AUTHORIZED_KEYS")}
        self.env["GRIDNODE_PLAIN"] = "1"
        (self.dir / "logs").mkdir(parents=True, exist_ok=True)
        self.markers = self.dir / "markers"
        self.markers.mkdir()
        os.chmod(self.dir, 0o755)  # sandboxed tasks (slot uids) reach the marker dir
        os.chmod(self.markers, 0o777)
        cfg = str(REPO / "configs")
        self.clusters, self.batches, self.clients = [], [], []
        for i in range(1, opts.sites + 1):
            d = self.dir / ("site%d" % i)
            cl = Role(self, "site%d-cluster" % i, "cluster", None, d / "cluster",
                      "cluster.listen")
            cl.args = (lambda cl=cl: [
                "cluster", "-c", cfg + "/cluster.ini",
                "--set", "cluster.state_dir=%s" % cl.state_dir,
                "--set", "tasks.heartbeat_s=2", "--set", "tasks.idle_wait_s=1",
                "--set", "queues.sync_ms=100", "--set", "stats.interval_s=2"])
            self.clusters.append(cl)
            b = Role(self, "site%d-batch" % i, "batch", None, d / "batch", "batch.listen")
            b.args = (lambda b=b, cl=cl: [
                "batch", "-c", cfg + "/batch.ini", "--set", "batch.state_dir=%s" % b.state_dir,
                "--set", "batch.clusters=local=%s" % cl.endpoint])
            self.batches.append(b)
            for n in range(1, opts.clients + 1):
                c = Role(self, "s%d-node%d" % (i, n), "client", None, d / ("node%d" % n))
                c.args = (lambda c=c, cl=cl: [
                    "client", "-c", cfg + "/client.ini",
                    "--set", "client.server=%s" % cl.endpoint,
                    "--set", "client.state_dir=%s" % c.state_dir,
                    "--set", "client.name=%s" % c.name, "--set", "client.cluster=local",
                    "--set", "client.slots=%d" % opts.slots,
                    "--set", "client.sandbox=%s" % ("false" if opts.no_sandbox else "true"),
                    "--set", "rpc.timeout_ms=2000", "--set", "rpc.backoff_min_s=0.2",
                    "--set", "rpc.backoff_max_s=2"])
                c.site = i
                self.clients.append(c)
        self.meta = Role(self, "meta", "meta", None, self.dir / "meta", "meta.listen")
        self.meta.args = lambda: [
            "meta", "-c", cfg + "/meta.ini", "--set", "meta.state_dir=%s" % self.meta.state_dir,
            "--set", "meta.sites=%s" % ",".join(
                "site%d=%s" % (i + 1, b.endpoint) for i, b in enumerate(self.batches)),
            "--set", "meta.reeval_s=3", "--set", "meta.move_margin_s=5",
            "--set", "stats.interval_s=2"]

    def roles(self):
        return [self.meta] + self.batches + self.clusters + self.clients

    def by_level(self, level):
        return {"meta": [self.meta], "batch": self.batches, "cluster": self.clusters,
                "client": self.clients}[level]

    def up(self):
        for cl in self.clusters:
            if not cl.start():
                raise SystemExit("chaos: %s did not start (log %s)" % (cl.name, cl.log_path))
        for c in self.clients:
            c.start()
        for b in self.batches:
            if not b.start():
                raise SystemExit("chaos: %s did not start (log %s)" % (b.name, b.log_path))
        deadline = time.monotonic() + 60
        for i, b in enumerate(self.batches):
            r = Rpc(b.endpoint)
            while True:
                rows = r.pages("NODE_LIST", "nodes") or []
                if sum(1 for n in rows if n.get("active")) >= self.o.clients:
                    break
                if time.monotonic() > deadline:
                    raise SystemExit("chaos: site%d sees no hosts within 60 s (logs in %s)"
                                     % (i + 1, self.dir / "logs"))
                time.sleep(0.3)
            r.close()
        if not self.meta.start():
            raise SystemExit("chaos: meta did not start (log %s)" % self.meta.log_path)
        r = Rpc(self.meta.endpoint)
        deadline = time.monotonic() + 60
        while True:
            s = r.ok("SITE_INFO")
            if s and all(x.get("known") for x in s.get("sites", [])):
                break
            if time.monotonic() > deadline:
                raise SystemExit("chaos: the spool does not know its sites within 60 s")
            time.sleep(0.3)
        r.close()

    def down(self):
        for role in self.roles():
            role.stop()


# ---------------------------------------------------------------------------
# jobs and the kill schedule (both from the seed)


def make_jobs(opts, markers):
    rng = random.Random("jobs-%d" % opts.seed)
    jobs = []
    for n in range(opts.jobs):
        key = "chaos-%d-%d" % (opts.seed, n)
        token = "%s-%08x" % (key, rng.getrandbits(32))
        sleep = rng.choice((1, 1, 2, 2, 3, 4))
        array = rng.random() < 0.35
        mark = "%s/%d" % (markers, n)
        if array:
            ntasks = rng.randint(2, 4)
            elem, rank = "{i}", "0"
        else:
            procs = rng.choice((1, 1, 2))
            elem, rank = "0", "${GRIDNODE_RANK:-0}"
        # start line, the work, done line (with the cluster job: one run), the token
        run = "%s.%s.%s" % (n, elem, rank)
        cmd = ("umask 0; echo \"start %s $GRIDNODE_JOB\" >> %s; sleep %d; "
               "echo \"done %s $GRIDNODE_JOB\" >> %s; echo \"%s.%s.%s\""
               % (run, mark, sleep, run, mark, token, elem, rank))
        j = {"n": n, "key": key, "token": token, "array": array, "argv": [cmd]}
        if array:
            j["req"] = ("SUBMIT", dict(argv=[cmd], shell=True, ntasks=ntasks, limit_s=LIMIT_S,
                                       key=key, chdir=str(markers)))
            j["elements"], j["ranks"] = ntasks, 1
        else:
            j["req"] = ("PSUBMIT", dict(argv=[cmd], shell=True, procs=procs, limit_s=LIMIT_S,
                                        key=key, chdir=str(markers)))
            j["elements"], j["ranks"] = 1, procs
        jobs.append(j)
    return jobs


def make_schedule(opts, grid):
    """[(t, [(role name, restart delay s)])]: a kill every 2-6 s (scaled to the
    hierarchy), one level at a time, a second level one time in five."""
    rng = random.Random("kills-%d" % opts.seed)
    names = {lv: [r.name for r in grid.by_level(lv)] for lv in LEVELS}
    out, t = [], 3.0
    while t < opts.minutes * 60:
        levels = [rng.choice(LEVELS)]
        if rng.random() < 0.2:
            levels.append(rng.choice([lv for lv in LEVELS if lv != levels[0]]))
        out.append((t, [(rng.choice(names[lv]), rng.uniform(0, 2)) for lv in levels]))
        t += rng.uniform(2, 6)
    return out


class Submitter(threading.Thread):
    """Submits half the jobs at once, the rest spread over the first half of the kill
    window, each resent with its key until the spool answers (the spool may be dead or
    restarting)."""

    def __init__(self, grid, jobs, span, deadline):
        super().__init__(daemon=True)
        self.grid, self.jobs, self.span, self.deadline = grid, jobs, span, deadline
        self.resends = 0
        self.errors = []

    def run(self):
        rpc = Rpc(self.grid.meta.endpoint)
        t0 = time.monotonic()
        burst = len(self.jobs) // 2  # a backlog at once (waits, estimates, moves)
        for i, j in enumerate(self.jobs):
            due = t0 + self.span * max(0, i - burst) / max(1, len(self.jobs) - burst)
            time.sleep(max(0.0, due - time.monotonic()))
            t, fields = j["req"]
            while time.monotonic() < self.deadline:
                r = rpc.call(t, timeout=1.0, **fields)  # short: resends happen
                if r is None:
                    self.resends += 1
                    time.sleep(0.3)
                    continue
                if r.get("t") == T["SUBMITTED"]:
                    j["job"] = r["job"]
                    j["repeat"] = bool(r.get("repeat"))
                else:
                    self.errors.append("%s: %s %s" % (j["key"], r.get("code"), r.get("msg")))
                break
        rpc.close()


def chaos(grid, schedule, opts, kills):
    """Runs the schedule (kills, delayed restarts) for the time budget."""
    t0 = time.monotonic()
    pending = []  # (due, role)
    failures = []
    events = list(schedule)
    by_name = {r.name: r for r in grid.roles()}
    while events or pending:
        now = time.monotonic() - t0
        for due, role in list(pending):
            if now >= due:
                pending.remove((due, role))
                if not role.start():
                    failures.append("%s did not restart within 30 s (log %s)"
                                    % (role.name, role.log_path))
        if events and now >= events[0][0]:
            _, targets = events.pop(0)
            hit = []
            for name, delay in targets:
                role = by_name[name]
                if not role.alive():
                    continue  # still restarting
                role.kill9()
                kills[role.level] += 1
                hit.append(role.name)
                pending.append((time.monotonic() - t0 + delay, role))
            if len(hit) > 1:
                kills["double"] += 1
            if hit and opts.verbose:
                log("%.1f s: kill -9 %s" % (now, ", ".join(hit)))
        time.sleep(0.05)
    return failures


# ---------------------------------------------------------------------------
# the checks


def read_markers(path):
    """{(elem, rank): {"start": [cjob...], "done": [cjob...]}} of one job's marker file
    (lines "start|done N.ELEM.RANK CJOB", written by the job's processes)."""
    out = {}
    p = Path(path)
    if not p.exists():
        return out
    for line in p.read_text(errors="replace").splitlines():
        m = re.match(r"(start|done) (\d+)\.(\d+)\.(\d+) (\d*)$", line)
        if not m:
            continue
        d = out.setdefault((int(m.group(3)), int(m.group(4))), {"start": [], "done": []})
        d[m.group(1)].append(int(m.group(5) or 0))
    return out


def complete_runs(marks, elem, ranks):
    """(complete runs, {cluster job: [ranks done]}) of one element. A run is one cluster
    job (the processes' GRIDNODE_JOB); it is complete when each of its `ranks` ranks
    wrote its done line. A rank that wrote two done lines under one cluster job id (two
    runs whose cluster jobs have the same number, at two sites) counts as two runs."""
    runs = {}
    for rk in range(ranks):
        for cjob in marks.get((elem, rk), {}).get("done", []):
            runs.setdefault(cjob, []).append(rk)
    complete = 0
    for rks in runs.values():
        complete += min(rks.count(rk) for rk in range(ranks))
    return complete, {c: sorted(r) for c, r in sorted(runs.items())}


def stdout_of(rank):
    s = rank.get("stdout", b"")
    return s.decode(errors="replace") if isinstance(s, bytes) else str(s)


def check(grid, jobs, opts, figures):
    v = []
    meta = Rpc(grid.meta.endpoint)
    sites = {"site%d" % (i + 1): Rpc(b.endpoint) for i, b in enumerate(grid.batches)}
    clus = {cl.endpoint: Rpc(cl.endpoint) for cl in grid.clusters}
    # every job of every site and cluster, by the token in its argv
    site_rows, clu_rows = {}, {}
    for name, r in sites.items():
        rows = r.pages("JOB_LIST", "jobs")
        if rows is None:
            v.append("site %s: JOB_LIST unanswered" % name)
            rows = []
        site_rows[name] = rows
    for ep, r in clus.items():
        rows = r.pages("JOB_LIST", "jobs")
        if rows is None:
            v.append("cluster %s: JOB_LIST unanswered" % ep)
            rows = []
        clu_rows[ep] = rows
    spool = {row["job"]: row for row in (meta.pages("JOB_LIST", "jobs") or [])}

    def with_token(rows, token):
        return [x for x in rows if any(token in a for a in x.get("argv", []))]

    f = figures
    for j in jobs:
        key = j["key"]
        if "job" not in j:
            v.append("%s: never acknowledged by the spool" % key)
            continue
        # the key is still the job's: one more resend gets it back
        t, fields = j["req"]
        r = meta.ok(t, **fields)
        if not r or r.get("job") != j["job"] or not r.get("repeat"):
            v.append("%s (job %d): a resend of its key got %r, not the job with repeat"
                     % (key, j["job"], r))
        row = spool.get(j["job"])
        if row is None:
            v.append("%s: job %d not in the spool's list" % (key, j["job"]))
            continue
        f["attempts"] += row.get("attempts", 0)
        if row.get("gstate") != "done":
            v.append("%s: job %d is %s at the spool (site %s job %s, exit %s, reason %r)" % (
                key, j["job"], row.get("gstate"), row.get("site"), row.get("site_job"),
                row.get("exit"), row.get("reason")))
        site, sjob = row.get("site"), row.get("site_job")
        # strays: every copy at a site the spool does not point to is cancelled, unstarted
        for name, rows in site_rows.items():
            for x in with_token(rows, j["token"]):
                if name == site and x["job"] == sjob:
                    continue
                f["copies_withdrawn"] += 1
                started = x.get("issued", 0) if x.get("kind") != "parallel" else \
                    x.get("started", 0)
                if x.get("state") != "cancelled" or started:
                    v.append("%s: a copy at %s (job %d) the spool does not point to is %s "
                             "(started %s); the spool points to %s job %s" % (
                                 key, name, x["job"], x.get("state"), started, site, sjob))
        # the site's job: elements, their cluster jobs, outputs
        pointed = set()  # (cluster endpoint, cjob) the site names
        outputs = {}
        sr = sites.get(site)
        sj = sr.ok("JOB_GET", job=sjob, tasks=True, count=100) if sr and sjob else None
        if not sj or sj.get("t") == T["ERROR"]:
            v.append("%s: site %s job %s not readable: %r" % (key, site, sjob, sj))
        else:
            ck = sr.ok("CHECKJOB", job=sjob)
            if ck and ck.get("job"):
                f["batch_requeues"] += ck["job"].get("requeues", 0)
            if j["array"]:
                places = [(t_.get("endpoint"), t_.get("cjob"), t_.get("idx")) for t_ in
                          sj.get("tasks", [])]
            else:
                at = sj.get("output_at") or {}
                places = [(at.get("endpoint"), at.get("cjob"), 0)]
            for ep, cjob, elem in places:
                if not ep or not cjob or ep not in clus:
                    v.append("%s: element %s has no cluster job at site %s job %s (%r; %r)"
                             % (key, elem, site, sjob, (ep, cjob), sj))
                    continue
                pointed.add((ep, cjob))
                cj = clus[ep].ok("JOB_GET", job=cjob, output=True)
                if not cj or cj.get("t") == T["ERROR"]:
                    v.append("%s: cluster job %s at %s unreadable: %r" % (key, cjob, ep, cj))
                    continue
                for rk in cj.get("job", {}).get("ranks", []):
                    outputs[(elem, rk.get("rank"))] = stdout_of(rk)
        for e in range(j["elements"]):
            for rk in range(j["ranks"]):
                want = "%s.%d.%d" % (j["token"], e, rk)
                if want not in outputs.get((e, rk), ""):
                    v.append("%s: element %d rank %d: output %r lacks its token %s" % (
                        key, e, rk, outputs.get((e, rk), "")[:80], want))
                else:
                    f["outputs_read"] += 1
        # cluster copies: any done cluster job of this job must be one the site names
        for ep, rows in clu_rows.items():
            for x in with_token(rows, j["token"]):
                f["cluster_runs"] += 1
                if x.get("lost"):
                    f["lost_runs"] += 1
                f["cluster_requeues"] += x.get("requeues", 0)
                if x.get("state") == "done" and (ep, x["job"]) not in pointed:
                    v.append("%s: cluster job %d at %s ran to the end but its site does not "
                             "point to it" % (key, x["job"], ep))
        # markers: complete runs per element
        marks = read_markers(grid.markers / str(j["n"]))
        for e in range(j["elements"]):
            f["starts"] += sum(len(marks.get((e, rk), {}).get("start", []))
                               for rk in range(j["ranks"]))
            complete, runs = complete_runs(marks, e, j["ranks"])
            f["complete_runs"] += complete
            if complete > 1:
                v.append("%s: element %d ran to completion %d times (done lines by cluster "
                         "job: %s)" % (key, e, complete, runs))
            elif not complete:
                v.append("%s: element %d has no complete run in its marker file" % (key, e))
    # reservations of the spool left at any site
    for name, r in sites.items():
        left = [x for x in (r.pages("RESV_LIST", "resvs") or []) if x.get("owner") == "meta"]
        for x in left:
            v.append("site %s keeps reservation %s of the spool (job %s)"
                     % (name, x.get("name"), x.get("job")))
    for r in [meta] + list(sites.values()) + list(clus.values()):
        r.close()
    return v


def drain(grid, jobs, timeout):
    """Waits (bounded) until every acknowledged job has ended at the spool and no
    reservation of the spool is left at a site. Seconds taken, or None."""
    t0 = time.monotonic()
    meta = Rpc(grid.meta.endpoint)
    ids = {j["job"] for j in jobs if "job" in j}
    ended = False
    while time.monotonic() - t0 < timeout:
        rows = meta.pages("JOB_LIST", "jobs", tries=2)
        if rows is not None:
            left = [x for x in rows if x["job"] in ids and x.get("gstate") not in END]
            if not left:
                ended = True
                break
        time.sleep(1)
    took = time.monotonic() - t0
    # then the reservations (the spool's sweep runs every 15 s)
    while ended and time.monotonic() - t0 < timeout:
        held = 0
        for b in grid.batches:
            r = Rpc(b.endpoint)
            held += len([x for x in (r.pages("RESV_LIST", "resvs", tries=2) or [])
                         if x.get("owner") == "meta"])
            r.close()
        if not held:
            break
        time.sleep(1)
    meta.close()
    return took if ended else None


def count_logs(grid, pattern):
    n = 0
    for p in (grid.dir / "logs").glob("*.log"):
        n += len(re.findall(pattern, p.read_text(errors="replace")))
    return n


def main(argv=None):
    ap = argparse.ArgumentParser(
        prog="chaos.py", description=__doc__.split("\n\n")[0],
        epilog="Example: /usr/bin/python3 scripts/chaos.py --seed 1 --jobs 200 --minutes 5. "
               "See docs/meta.md \"Chaos test\".")
    ap.add_argument("--seed", type=int, default=1, help="RNG seed: the jobs and the kill "
                    "schedule (default 1)")
    ap.add_argument("--jobs", type=int, default=40, help="jobs submitted at the spool "
                    "(default 40)")
    ap.add_argument("--minutes", type=float, default=2.0, help="time budget of the kills, "
                    "minutes (default 2)")
    ap.add_argument("--sites", type=int, default=2, help="batch sites (default 2)")
    ap.add_argument("--clients", type=int, default=3, help="clients per site (default 3)")
    ap.add_argument("--slots", type=int, default=2, help="slots per client (default 2)")
    ap.add_argument("--drain", type=float, default=300, help="longest wait for the grid to "
                    "drain after the kills, s (default 300)")
    ap.add_argument("--dir", help="run in this new directory (default: a temporary one, "
                    "removed when every check holds)")
    ap.add_argument("--keep", action="store_true", help="keep the directory in any case")
    ap.add_argument("--no-sandbox", action="store_true", help="clients without the "
                    "execution boundary (client.sandbox = false)")
    ap.add_argument("--json", action="store_true", help="print the figures as one JSON line")
    ap.add_argument("-v", "--verbose", action="store_true", help="log every kill")
    o = ap.parse_args(argv)
    for name, lo, hi in (("jobs", 1, 100000), ("sites", 1, 16), ("clients", 1, 64),
                         ("slots", 1, 64)):
        if not lo <= getattr(o, name) <= hi:
            ap.error("--%s %s is out of range (%d..%d)" % (name, getattr(o, name), lo, hi))
    if not 0 < o.minutes <= 600 or not 0 < o.drain <= 7200:
        ap.error("--minutes must be in (0, 600] and --drain in (0, 7200]")
    try:
        import msgpack  # noqa: F401
        import zmq  # noqa: F401
    except ImportError as e:
        ap.error("%s: run with Debian's /usr/bin/python3 (python3-zmq, python3-msgpack)" % e)
    if o.dir:
        os.makedirs(o.dir)
        directory = o.dir
    else:
        directory = tempfile.mkdtemp(prefix="gridnode-chaos.")
    grid = Grid(o, directory)
    if not os.access(grid.bin, os.X_OK):
        ap.error("%s is not an executable: build it (make) or set GRIDNODE_BIN" % grid.bin)
    kills = dict({lv: 0 for lv in LEVELS}, double=0)
    figures = dict(seed=o.seed, jobs=o.jobs, sites=o.sites, clients=o.clients,
                   minutes=o.minutes, acked=0, resends=0, attempts=0, moves=0,
                   copies_withdrawn=0, batch_requeues=0, cluster_requeues=0, lost_runs=0,
                   cluster_runs=0, starts=0, complete_runs=0, outputs_read=0,
                   drain_s=None, wall_s=None, kills=kills)
    t_start = time.monotonic()
    violations = []

    def on_term(signum, frame):
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, on_term)  # stop every role started, then exit 1
    try:
        grid.up()
        jobs = make_jobs(o, grid.markers)
        schedule = make_schedule(o, grid)
        span = o.minutes * 60
        sub = Submitter(grid, jobs, span / 2, time.monotonic() + span + 120)
        sub.start()
        violations += chaos(grid, schedule, o, kills)
        log("kills stopped after %.0f s: %s" % (time.monotonic() - t_start, kills))
        for role in grid.roles():
            if not role.alive() and not role.start():
                violations.append("%s did not start after the kills" % role.name)
        sub.join()
        violations += sub.errors
        figures["resends"] = sub.resends
        figures["acked"] = sum(1 for j in jobs if "job" in j)
        took = drain(grid, jobs, o.drain)
        figures["drain_s"] = round(took, 1) if took is not None else None
        if took is None:
            violations.append("the grid did not drain within %.0f s" % o.drain)
        violations += check(grid, jobs, o, figures)
        figures["moves"] = count_logs(grid, r"withdrawn from site \S+, moving to")
    except KeyboardInterrupt:
        violations.append("interrupted")
    finally:
        grid.down()
    figures["wall_s"] = round(time.monotonic() - t_start, 1)
    figures["violations"] = len(violations)
    figures["dir"] = str(grid.dir)
    if o.json:
        print(json.dumps(figures, sort_keys=True))
    else:
        print("chaos: seed %d, %d jobs (%d acked, %d resends), kills %s, moves %d, "
              "batch reruns %d, lost runs %d, drain %s s, wall %s s" % (
                  o.seed, o.jobs, figures["acked"], figures["resends"], kills,
                  figures["moves"], figures["batch_requeues"], figures["lost_runs"],
                  figures["drain_s"], figures["wall_s"]))
    if violations:
        print("chaos: %d violation(s):" % len(violations))
        for x in violations:
            print("  - " + x)
        print("chaos: logs and state kept in %s" % grid.dir)
        return 1
    if o.keep or o.dir:
        print("chaos: state kept in %s" % grid.dir)
    else:
        shutil.rmtree(grid.dir, ignore_errors=True)
    print("chaos: every check holds")
    return 0


if __name__ == "__main__":
    sys.exit(main())
