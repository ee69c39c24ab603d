"""Live equals simulated (issue 9, item 9): one policy, two drivers.

A 300-job excerpt of a real SWF trace, scaled so that jobs run 0.2-5 s as `sleep`, is
run live (this process submits each job at its scaled submit time to a real batch role,
which schedules it onto a real cluster manager and real clients on loopback), then the
same jobs are replayed by `gridnode batch --simulate --time-scale 1000` with the times
the live role recorded: submission, run time as the scheduler saw it (its start
decision to the moment it learnt of the end) and the cluster's start delay (the engine
counts the walltime from the cluster's start once it is reported: --start-delays). The simulator must make every start decision at the
same millisecond as the live cycle did (DECISION_MS), so in the same order, and each
cluster start must be within TOLERANCE_S of the simulated one (docs/batch.md, "Live
equals simulated", says why and what the test measured)."""

import csv
import gzip
import json
import math
import subprocess
import time
from pathlib import Path

import pytest

from conftest import TYPES, scaled, wait_until

T = dict(TYPES, PSUBMIT=39, NODE_LIST=37)
SD = {"store.sync": "none", "queues.sync_ms": 100, "tasks.heartbeat_s": 1,
      "tasks.idle_wait_s": 1}
CLIENT = {"rpc.timeout_ms": 2000, "rpc.backoff_min_s": 0.2, "rpc.backoff_max_s": 1}
TRACE = Path(__file__).resolve().parents[2] / ".." / "shared" / "traces" / \
    "SDSC-SP2-1998-4.2-cln.swf.gz"
TOLERANCE_S = 0.5
DECISION_MS = 0   # the live cycle's start decisions vs the simulator's (docs/batch.md)
HOSTS, SLOTS = 2, 8          # the live machine: 2 hosts of 8 cores = 16 engine nodes
NJOBS, FIRST = 300, 2000     # the excerpt: usable jobs FIRST .. FIRST + NJOBS - 1
RUN_MIN, RUN_MAX = 0.2, 5.0  # scaled run times, seconds


def swf_line(jid, submit, run, procs, req):
    """One SWF record (18 fields; -1 where unknown)."""
    f = [jid, submit, -1, run, procs, -1, -1, procs, req, -1, 1, 1, 1, 1, 1, -1, -1, -1]
    return " ".join(str(x) for x in f)


def excerpt():
    """The workload: [(id, submit_s, run_s, procs, limit_s)], scaled from the trace.
    Sizes are scaled from the trace's 128 processors to the 16 live cores; run times
    are mapped logarithmically from [1 s, 18 h] onto [RUN_MIN, RUN_MAX] (order kept);
    submit times are compressed so that the offered load is about 1.4x the machine
    (a queue forms: reservations and backfill are exercised); walltimes are the run
    time rounded up plus 1 to 3 s (over-estimates, as users give)."""
    recs = []
    with gzip.open(TRACE, "rt") as f:
        for line in f:
            if line.startswith(";") or not line.strip():
                continue
            v = line.split()
            run, procs, submit = int(v[3]), int(v[4]), int(v[1])
            if run <= 0 or procs <= 0:
                continue
            recs.append((int(v[0]), submit, run, procs))
            if len(recs) >= FIRST + NJOBS:
                break
    recs = recs[FIRST:]
    jobs = []
    for jid, submit, run, procs in recs:
        x = math.log(max(1, min(run, 64800))) / math.log(64800)
        r = round(RUN_MIN * (RUN_MAX / RUN_MIN) ** x, 3)
        p = max(1, min(HOSTS * SLOTS, math.ceil(procs * HOSTS * SLOTS / 128)))
        jobs.append([jid, submit, r, p, math.ceil(r) + 1 + jid % 3])
    work = sum(j[2] * j[3] for j in jobs)
    span = work / (HOSTS * SLOTS) / 1.4
    s0, s1 = jobs[0][1], jobs[-1][1]
    for j in jobs:
        j[1] = round((j[1] - s0) * span / max(1, s1 - s0), 3)
    return [tuple(j) for j in jobs]


def simulate(gridnode_bin, workdir, rows, procs, delays=None):
    """--simulate of rows [(id, submit_ms, run_ms, procs, limit_ms)] on `procs`
    one-core nodes, in milliseconds, with --start-delays {id: ms} if given; returns
    ({id: start_ms}, the JSON figures)."""
    swf = workdir / "live.swf"
    swf.write_text("; MaxProcs: %d\n" % procs +
                   "\n".join(swf_line(*r) for r in rows) + "\n")
    out = workdir / "sim.csv"
    extra = []
    if delays is not None:
        lines = ((k,) + (v if isinstance(v, tuple) else (v,)) for k, v in delays.items())
        (workdir / "delays.txt").write_text("".join(" ".join(map(str, x)) + "\n" for x in lines))
        extra = ["--start-delays", str(workdir / "delays.txt")]
    r = subprocess.run([gridnode_bin, "batch", "--simulate", str(swf), "--time-scale", "1000",
                        "--procs", str(procs), "--jobs-out", str(out), "--json", "-q"] + extra,
                       capture_output=True, text=True, timeout=scaled(60))
    assert r.returncode == 0, r.stderr
    with out.open() as f:
        return {int(row["id"]): int(row["start"]) for row in csv.DictReader(f)}, json.loads(r.stdout)


def test_time_scale_simulates_in_milliseconds(gridnode_bin, workdir):
    """--time-scale: hand-computed EASY schedule of a trace written in milliseconds."""
    rows = [(1, 0, 2000, 2, 3000), (2, 500, 1500, 4, 2000), (3, 600, 700, 2, 1000)]
    starts, fig = simulate(gridnode_bin, workdir, rows, 4)
    # 2 waits for job 1 (4 procs); 3 backfills at its submission, ending before 2000
    assert starts == {1: 0, 2: 2000, 3: 600}
    assert fig["time_scale"] == 1000 and fig["max_wait_s"] == 1.5 and fig["makespan_s"] == 3
    # the same trace in seconds: the same schedule, 1000x longer
    swf = workdir / "s.swf"
    swf.write_text("".join(swf_line(*r) + "\n" for r in rows))
    r = subprocess.run([gridnode_bin, "batch", "--simulate", str(swf), "--procs", "4", "--json",
                        "-q"], capture_output=True, text=True, timeout=scaled(60))
    assert r.returncode == 0 and json.loads(r.stdout)["max_wait_s"] == 1500
    r = subprocess.run([gridnode_bin, "batch", "--simulate", str(swf), "--time-scale", "0"],
                       capture_output=True, text=True, timeout=scaled(60))
    assert r.returncode == 2 and "--time-scale wants a positive divisor" in r.stderr


def test_start_delays_replay_the_clusters_start(gridnode_bin, workdir):
    """--start-delays: the engine counts a job's walltime from its cluster's start once
    that is known, after the cycle of that instant (as the live role learns it)."""
    # 2 procs; job 1 runs on one; the wide job 2 is reserved at job 1's walltime end
    # (3000 + its start delay); job 3 (submitted at 100, 2950 ms) backfills only if it
    # ends by then
    rows = [(1, 0, 2500, 1, 3000), (2, 0, 1000, 2, 1000), (3, 100, 500, 1, 2950)]
    assert simulate(gridnode_bin, workdir, rows, 2)[0] == {1: 0, 2: 2500, 3: 3500}
    assert simulate(gridnode_bin, workdir, rows, 2, {1: 99})[0] == {1: 0, 2: 2500, 3: 100}
    # a delay known only at the instant of job 3's cycle comes after that cycle
    assert simulate(gridnode_bin, workdir, rows, 2, {1: 100})[0] == {1: 0, 2: 2500, 3: 3500}
    # with the instant the role heard of it (third number): told in that turn, before its
    # cycle, and that instant cycles: heard at 100 backfills 3 at 100, heard at 101
    # (after the cycle of 100) at 101; a start of 99 heard at 200 is too late for 3
    assert simulate(gridnode_bin, workdir, rows, 2, {1: (100, 100)})[0] == {1: 0, 2: 2500, 3: 100}
    assert simulate(gridnode_bin, workdir, rows, 2, {1: (100, 101)})[0] == {1: 0, 2: 2500, 3: 101}
    assert simulate(gridnode_bin, workdir, rows, 2, {1: (99, 200)})[0] == {1: 0, 2: 2500, 3: 3500}
    (workdir / "bad3.txt").write_text("1 5 4\n")
    r = subprocess.run([gridnode_bin, "batch", "--simulate", str(workdir / "live.swf"),
                        "--start-delays", str(workdir / "bad3.txt")],
                       capture_output=True, text=True, timeout=scaled(60))
    assert r.returncode != 0 and "HEARD >= DELAY" in r.stderr, r.stderr
    (workdir / "bad.txt").write_text("1 2\n2 x\n")
    r = subprocess.run([gridnode_bin, "batch", "--simulate", str(workdir / "live.swf"),
                        "--start-delays", str(workdir / "bad.txt")],
                       capture_output=True, text=True, timeout=scaled(60))
    assert r.returncode != 0 and "bad.txt line 2: want JOB DELAY" in r.stderr, r.stderr
    r = subprocess.run([gridnode_bin, "batch", "--start-delays", "x"], capture_output=True,
                       text=True, timeout=scaled(60))
    assert r.returncode == 2 and "--start-delays only applies to --simulate" in r.stderr


@pytest.mark.slow
@pytest.mark.skipif(not TRACE.exists(), reason="trace %s not available" % TRACE)
def test_live_equals_simulated(cluster_factory, client_factory, batch_factory, workdir,
                               gridnode_bin):
    jobs = excerpt()
    assert len(jobs) == NJOBS
    cl = cluster_factory(SD)
    client_factory(cl, HOSTS, sets=dict(CLIENT, **{"client.slots": SLOTS}))
    b = batch_factory([cl])
    wait_until(lambda: sum(1 for n in b.rpc(T["NODE_LIST"])["nodes"] if n["active"]) == HOSTS,
               scaled(20), msg="the batch role sees the hosts")
    rpc = b.client()
    ids = {}
    t0 = time.monotonic() + 0.5
    for jid, submit, run, procs, limit in jobs:   # bounded: 300 submissions
        delay = t0 + submit - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        r = rpc.ok(T["PSUBMIT"], argv=["sleep", "%.3f" % run], procs=procs, limit_s=limit,
                   name="swf%d" % jid)
        ids[jid] = r["job"]
    last = max(j[1] for j in jobs)
    ended = ("done", "failed", "killed", "cancelled")

    def all_ended():
        return all(rpc.call(T["JOB_GET"], job=ids[j[0]])["job"]["state"] in ended
                   for j in jobs)

    wait_until(all_ended, scaled(120 + 2 * last), interval=1, msg="every job ended")
    live = {}
    for jid, submit, run, procs, limit in jobs:
        j = rpc.call(T["JOB_GET"], job=ids[jid])["job"]
        assert j["state"] == "done", (jid, j)
        assert 0 < j["decided"] <= j["started"] + 5, (jid, j)
        live[jid] = dict(submitted=j["submitted"], decided=j["decided"], started=j["started"],
                         heard=j["start_heard"], finished=j["finished"], procs=procs,
                         limit=limit)
    base = min(v["submitted"] for v in live.values())
    # the engine's view of each job: submitted, started by a cycle at `decided`, its
    # end learnt at `finished` (so the replay's run time is finished - decided), its
    # walltime counted from the decision until the cluster reports its own start
    # (`started`), then from that (batch_job_started_at; the replay's --start-delays)
    rows = [(jid, v["submitted"] - base, v["finished"] - v["decided"], v["procs"],
             v["limit"] * 1000) for jid, v in live.items()]
    rows.sort(key=lambda r: (r[1], r[0]))
    # and when the role heard of that start (it cycles then): the replay needs no
    # guess about how late the report came (a busy machine delays it by 100s of ms)
    delays = {jid: (v["started"] - v["decided"],) +
              ((v["heard"] - v["decided"],) if v["heard"] else ()) for jid, v in live.items()}
    sim, fig = simulate(gridnode_bin, workdir, rows, HOSTS * SLOTS, delays)
    waited = sum(1 for v in live.values() if v["started"] - v["submitted"] > 100)
    dec = {jid: live[jid]["decided"] - base - sim[jid] for jid in live}      # ms
    diffs = {jid: (live[jid]["started"] - base - sim[jid]) / 1000.0 for jid in live}
    worst = max(diffs, key=lambda k: abs(diffs[k]))
    wdec = max(dec, key=lambda k: abs(dec[k]))
    report = ("%d jobs, %d waited > 0.1 s, makespan %d s; |live - sim| start: mean %.3f s, "
              "max %.3f s (job %d); start decisions: %d of %d at the simulated ms, max "
              "%d ms off (job %d)" % (len(live), waited, fig["makespan_s"],
                                      sum(abs(d) for d in diffs.values()) / len(diffs),
                                      abs(diffs[worst]), worst,
                                      sum(1 for d in dec.values() if d == 0), len(dec),
                                      abs(dec[wdec]), wdec))
    print(report)
    (workdir / "report.txt").write_text(report + "\n")
    (workdir / "live.json").write_text(json.dumps(
        {jid: dict(v, sim=sim[jid], job=ids[jid]) for jid, v in live.items()}))
    assert waited >= NJOBS // 10, "the workload formed no queue: " + report
    # the promise: the cluster's starts within TOLERANCE_S of the simulator's
    assert abs(diffs[worst]) <= TOLERANCE_S, report
    # and the reason it holds: each start decision is the simulator's, to the ms
    assert abs(dec[wdec]) <= DECISION_MS, report
    # the same start order: a job the simulator starts later is not started earlier
    # live (jobs of one simulated cycle have no order between them)
    order = sorted(live, key=lambda k: (sim[k], live[k]["decided"]))
    inversions = [(a, c) for a, c in zip(order, order[1:])
                  if sim[c] > sim[a] and live[a]["decided"] > live[c]["decided"]]
    assert not inversions, "start order differences %s; %s" % (inversions[:5], report)
