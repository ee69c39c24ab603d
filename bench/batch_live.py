"""Benchmarks of the live batch role (issue 9, item 10): batch_e2e, batch_submit and
batch_mem (bench/batch_*.sh call this file).

usage: /usr/bin/python3 bench/batch_live.py GRIDNODE e2e|submit|mem [N]

Every run starts its own processes (cluster manager, clients, batch role) on free
loopback ports in a temporary directory and stops them (SIGTERM, then SIGKILL, by
PID) whatever happens; every phase is bounded in time. Progress goes to stderr; one
JSON line to stdout.

 e2e     N (default 10,000) separate 1-process `true` jobs (SUBMIT ntasks 1, as
         `gridnode submit -- true` sends) to the batch role, which starts them on a
         cluster manager with one client of 64 slots; jobs_per_s = N / (first
         submission to the last job's end as the batch role reports it). Submissions
         are pipelined (WINDOW requests in flight). With SLURM=1 (bench/batch_e2e.sh
         sets it when slurm-local can run) the same N through Slurm 22.05 in the same
         run: slurm_jobs_per_s (its loop_complete: one sbatch per job, submission to
         the queue empty; SLURM_JOBS jobs, default 2,000, as its rate hardly depends
         on N and 10,000 would not fit make bench's 10 minutes) and ratio.
 submit  N (default 50,000) SUBMITs pipelined to a batch role whose cluster has no
         hosts (nothing starts), store.sync = full: per_s = N durable acknowledgements
         / time from the first send to the last reply.
 mem     N (default 100,000) pending 1-process jobs (no hosts): bytes_per_job = (RSS
         after - RSS before) / N, RSS from /proc/PID/status (VmRSS: resident anonymous
         plus mapped LMDB pages); anon_bytes_per_job the same for RssAnon (the heap).
"""
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import msgpack
import zmq

WIRE_VERSION = 1
SUBMIT, SUBMITTED, JOB_LIST, JOBS, NODE_LIST, ERROR = 30, 31, 32, 33, 37, 1
WINDOW = 512


def log(*a):
    print("batch_live:", *a, file=sys.stderr, flush=True)


class Procs:
    """The processes of one run, stopped by PID at the end."""

    def __init__(self, gridnode):
        self.gridnode = gridnode
        self.tmp = tempfile.mkdtemp(prefix="gridnode-bench-batch-")
        self.procs = []
        self.names = []

    def start(self, name, args, wait_listen=True, budget=30):
        logf = open(os.path.join(self.tmp, name + ".log"), "w")
        p = subprocess.Popen([self.gridnode] + args, stdout=subprocess.PIPE, stderr=logf,
                             text=True)
        self.procs.append(p)
        self.names.append(name)
        if not wait_listen:
            return p, None
        deadline = time.monotonic() + budget
        while time.monotonic() < deadline:
            line = p.stdout.readline()
            if not line:
                sys.exit("batch_live: %s exited; log %s" % (name, logf.name))
            if "listening on" in line:
                return p, line.split("listening on", 1)[1].strip()
        sys.exit("batch_live: %s did not start in %d s" % (name, budget))

    def cpu(self):
        """{name: CPU seconds (user + system)} of the processes still running."""
        out = {}
        tck = os.sysconf("SC_CLK_TCK")
        for name, p in zip(self.names, self.procs):
            try:
                with open("/proc/%d/stat" % p.pid) as f:
                    v = f.read().rsplit(")", 1)[1].split()
                out[name] = round((int(v[11]) + int(v[12])) / tck, 2)
            except OSError:
                pass
        return out

    def stop(self):
        for p in self.procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + 10
        for p in self.procs:
            try:
                p.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        shutil.rmtree(self.tmp, ignore_errors=True)


def grid(P, slots, sync):
    """A cluster (with `slots` client slots, or no client when 0) and a batch role
    scheduling onto it; returns (batch endpoint, batch Popen)."""
    d = P.tmp
    _, cl = P.start("cluster", ["cluster", "--set", "cluster.state_dir=%s/cl" % d,
                                "--set", "cluster.listen=tcp://127.0.0.1:*",
                                "--set", "store.sync=none", "--set", "queues.sync_ms=100"])
    if slots:
        P.start("client", ["client", "--set", "client.server=" + cl,
                           "--set", "client.state_dir=%s/n1" % d, "--set", "client.name=node1",
                           "--set", "client.slots=%d" % slots], wait_listen=False)
    bp, ep = P.start("batch", ["batch", "--set", "batch.state_dir=%s/b" % d,
                               "--set", "batch.listen=tcp://127.0.0.1:*",
                               "--set", "batch.clusters=" + cl, "--set", "store.sync=" + sync,
                               "--set", "store.map_mb=1024",
                               "--set", "limits.peer_queue=100000"])
    return ep, bp


class Dealer:
    def __init__(self, ep):
        self.ctx = zmq.Context.instance()
        self.s = self.ctx.socket(zmq.DEALER)
        self.s.setsockopt(zmq.LINGER, 0)
        self.s.setsockopt(zmq.SNDHWM, 0)
        self.s.setsockopt(zmq.RCVHWM, 0)
        self.s.connect(ep)
        self.id = 0

    def send(self, t, **f):
        self.id += 1
        m = {"v": WIRE_VERSION, "t": t, "id": self.id}
        m.update(f)
        self.s.send(msgpack.packb(m, use_bin_type=True))
        return self.id

    def recv(self, timeout):
        if not self.s.poll(int(timeout * 1000)):
            return None
        return msgpack.unpackb(self.s.recv_multipart()[-1], raw=False, strict_map_key=False)

    def call(self, t, timeout=10, **f):
        i = self.send(t, **f)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            r = self.recv(deadline - time.monotonic())
            if r and r.get("id") == i:
                return r
        sys.exit("batch_live: no reply to request type %d" % t)

    def close(self):
        self.s.close(0)


def submit_all(d, n, budget):
    """n SUBMITs of `true`, WINDOW in flight; returns (t_first_send, t_last_reply)."""
    body = {"argv": ["true"], "ntasks": 1, "name": "bench"}
    sent = acked = 0
    t0 = time.monotonic()
    deadline = t0 + budget
    while acked < n:
        while sent < n and sent - acked < WINDOW:
            d.send(SUBMIT, **body)
            sent += 1
        r = d.recv(max(0.01, deadline - time.monotonic()))
        if r is None:
            sys.exit("batch_live: submissions stalled at %d of %d" % (acked, n))
        if r.get("t") != SUBMITTED:
            sys.exit("batch_live: submission refused: %r" % r)
        acked += 1
        if time.monotonic() > deadline:
            sys.exit("batch_live: over the %d s budget submitting" % budget)
    return t0, time.monotonic()


def job_states(d):
    """{state: count} and the last 'finished' (ms) over every job of the batch role."""
    counts, last, frm = {}, 0, 0
    while True:
        r = d.call(JOB_LIST, **{"from": frm, "count": 10000})
        for j in r.get("jobs", []):
            counts[j["state"]] = counts.get(j["state"], 0) + 1
            last = max(last, j.get("finished", 0))
        if "next" not in r:
            return counts, last
        frm = r["next"]


def wait_hosts(d, n, budget=30):
    deadline = time.monotonic() + budget
    while time.monotonic() < deadline:
        if sum(1 for h in d.call(NODE_LIST).get("nodes", []) if h.get("active")) >= n:
            return
        time.sleep(0.1)
    sys.exit("batch_live: the batch role sees no host after %d s" % budget)


def rss(pid, key):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
    return 0


def slurm(n):
    """Slurm's end-to-end figure for n jobs from ../shared/tools/slurm-local (ht
    profile: its high-throughput tuning), or (None, why). Bounded: 180 s to install and
    start, 180 s for the workload (its loop and array phases)."""
    tools = os.environ.get("SLURM_LOCAL_TOOLS", "../shared/tools/slurm-local")
    if os.geteuid() != 0 or not os.path.isdir(tools):
        return None, "slurm-local needs root and %s" % tools
    env = dict(os.environ, SLURM_LOCAL_PROFILE="ht", SLURM_LOCAL_SMOKE="0",
               SLURM_LOCAL_DIR=os.environ.get("SLURM_LOCAL_DIR", "/tmp/slurm-local-bench"),
               SLURM_LOCAL_CTLD_PORT="6917", SLURM_LOCAL_SLURMD_PORT="6918",
               SLURM_LOCAL_TIMEOUT="150")
    try:
        up = subprocess.run(["bash", os.path.join(tools, "up.sh")], env=env, timeout=180,
                            capture_output=True, text=True)
        if up.returncode != 0:
            return None, "slurm-local up.sh failed: " + up.stderr.strip()[-300:]
        return slurm_loop(tools, env, n)
    except subprocess.TimeoutExpired:
        return None, "slurm-local timed out"
    finally:
        subprocess.run(["bash", os.path.join(tools, "down.sh")], env=env, timeout=120,
                       capture_output=True)


def slurm_loop(tools, env, n):
    """throughput.sh's loop phase (one sbatch per job): its loop_complete figure, read as
    it is printed; its later phases (an array, test-only, a reservation: not reported
    here) are not waited for, its process group (started here) is ended by its id and
    down.sh stops Slurm. At most 180 s."""
    tp = subprocess.Popen(["bash", os.path.join(tools, "throughput.sh"), str(n)], env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          start_new_session=True)
    got, out, err = None, b"", b""
    try:
        deadline = time.monotonic() + 180
        fds = [tp.stdout.fileno(), tp.stderr.fileno()]
        while got is None and tp.stdout.fileno() in fds and time.monotonic() < deadline:
            for fd in select.select(fds, [], [], 1)[0]:
                data = os.read(fd, 65536)
                if not data:
                    fds.remove(fd)
                elif fd == tp.stderr.fileno():
                    err = (err + data)[-4096:]
                else:
                    out += data
            for line in out.decode(errors="replace").split("\n")[:-1]:  # whole lines
                if line.startswith("loop_complete:") and "=" in line:
                    got = float(line.split("=", 1)[1].split()[0])
    finally:
        if tp.poll() is None:
            os.killpg(tp.pid, signal.SIGTERM)
        try:
            tp.wait(10)
        except subprocess.TimeoutExpired:
            os.killpg(tp.pid, signal.SIGKILL)
            tp.wait(10)
        tp.stdout.close()
        tp.stderr.close()
    if got is not None:
        return got, "loop_complete, profile ht"
    return None, ("slurm-local throughput.sh gave no loop_complete: " +
                  err.decode(errors="replace")[-300:])


def e2e(P, n):
    ep, _ = grid(P, 64, "full")
    d = Dealer(ep)
    wait_hosts(d, 1)
    log("e2e: %d jobs through %s" % (n, ep))
    wall0 = time.time()
    t0, t1 = submit_all(d, n, 300)
    deadline = time.monotonic() + 600
    while True:
        counts, last = job_states(d)
        ended = sum(v for k, v in counts.items() if k in ("done", "failed", "cancelled"))
        if ended >= n or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    d.close()
    if ended < n:
        sys.exit("batch_live: only %d of %d jobs ended within the budget: %r" % (ended, n, counts))
    span = last / 1000.0 - wall0
    out = {"bench": "batch_e2e", "jobs": n, "jobs_per_s": round(n / span, 1),
           "seconds": round(span, 3), "submit_per_s": round(n / (t1 - t0), 1),
           "states": counts, "slots": 64, "cpu_s": P.cpu()}
    return out


def submit_bench(P, n):
    ep, _ = grid(P, 0, "full")
    d = Dealer(ep)
    d.call(JOB_LIST)  # connected
    t0, t1 = submit_all(d, n, 120)
    d.close()
    return {"bench": "batch_submit", "jobs": n, "per_s": round(n / (t1 - t0), 1),
            "seconds": round(t1 - t0, 3), "sync": "full", "window": WINDOW}


def mem(P, n):
    ep, bp = grid(P, 0, "none")
    d = Dealer(ep)
    d.call(JOB_LIST)
    time.sleep(0.5)
    r0, a0 = rss(bp.pid, "VmRSS"), rss(bp.pid, "RssAnon")
    submit_all(d, n, 240)
    d.call(JOB_LIST)
    time.sleep(1)
    r1, a1 = rss(bp.pid, "VmRSS"), rss(bp.pid, "RssAnon")
    d.close()
    return {"bench": "batch_mem", "jobs": n, "bytes_per_job": round((r1 - r0) / n, 1),
            "anon_bytes_per_job": round((a1 - a0) / n, 1), "rss_before": r0, "rss_after": r1}


def main():
    gridnode, mode = os.path.abspath(sys.argv[1]), sys.argv[2]
    defaults = {"e2e": 10000, "submit": 50000, "mem": 100000}
    n = int(sys.argv[3]) if len(sys.argv) > 3 else defaults[mode]
    P = Procs(gridnode)
    try:
        out = {"e2e": e2e, "submit": submit_bench, "mem": mem}[mode](P, n)
    finally:
        P.stop()
    if mode == "e2e" and os.environ.get("SLURM") != "1":
        out["slurm_note"] = ("not run (BATCH_E2E_SLURM=0, not root, or no "
                             "../shared/tools/slurm-local)")
    if mode == "e2e" and os.environ.get("SLURM") == "1":
        ns = int(os.environ.get("SLURM_JOBS", "2000"))
        log("e2e: %d jobs through Slurm (slurm-local, ht profile)" % ns)
        s, why = slurm(ns)
        out["slurm_note"] = why
        out["slurm_jobs"] = ns
        if s:
            out["slurm_jobs_per_s"] = s
            out["ratio"] = round(out["jobs_per_s"] / s, 1)
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
