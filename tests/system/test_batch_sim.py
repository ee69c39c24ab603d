"""System tests of `gridnode batch`: the trace simulator from the command line.

They run the real binary (GRIDNODE_BIN, default build/gridnode) on the shared SWF
traces (<repo>/../shared/traces) and on small traces written here: the SDSC-SP2
replays of docs/batch.md with their exact figures, an independent Python
re-implementation of FCFS / EASY / conservative compared job by job on random
traces, the per-job CSV (capacity, no start before submission), the Gantt SVG,
estimates, diagnose -p, and every kind of bad input. Seeds are printed.
"""

import csv
import json
import os
import random
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
TRACES = Path(__file__).resolve().parents[3] / "shared" / "traces"
SP2 = TRACES / "SDSC-SP2-1998-4.2-cln.swf.gz"


@pytest.fixture(autouse=True)
def _needs_traces(request):
    """A test that replays the shared traces is skipped, saying so, where the repository
    was cloned without ../shared beside it (CI always has it)."""
    import inspect
    src = inspect.getsource(request.function)
    if ("SP2" in src or "TRACES" in src) and not TRACES.is_dir():
        pytest.skip("no shared traces at %s (clone the repository beside shared/)" % TRACES)
BIN = os.environ.get("GRIDNODE_BIN", str(REPO / "build" / "gridnode"))
ASAN = os.environ.get("GRIDNODE_ASAN", "") not in ("", "0")
TIMEOUT = 180 if ASAN else 60


def run(*args, timeout=TIMEOUT):
    p = subprocess.run([BIN, "batch", *map(str, args)], capture_output=True, text=True,
                       timeout=timeout, cwd=REPO)
    # an ASan/UBSan report must fail the test even where a failure exit is expected
    assert "Sanitizer" not in p.stderr and "runtime error:" not in p.stderr, p.stderr
    return p


def sim_json(*args):
    p = run("--quiet", "--json", *args)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


def read_jobs(path):
    with open(path, newline="") as f:
        return [{k: (float(v) if k == "bsld" else int(v)) for k, v in row.items()}
                for row in csv.DictReader(f)]


def check_schedule(jobs, procs):
    """No start before submission, figures consistent, processors never exceeded."""
    events = []
    for j in jobs:
        assert j["start"] >= j["submit"]
        assert j["wait"] == j["start"] - j["submit"]
        run_s = j["end"] - j["start"]
        assert run_s >= 0
        bsld = max(1.0, (j["wait"] + run_s) / max(run_s, 10))
        assert abs(j["bsld"] - bsld) < 1e-3
        events.append((j["start"], 1, j["procs"]))
        events.append((j["end"], 0, -j["procs"]))
    used = 0
    for _, _, d in sorted(events):  # ends (0) before starts (1) at equal times
        used += d
        assert used <= procs


# ---- the live role is not there yet; usage -----------------------------------------

def test_live_role_without_clusters_says_what_to_set():
    p = run()
    assert p.returncode == 1
    assert "batch.clusters" in p.stderr


def test_help_documents_every_option():
    p = run("--help")
    assert p.returncode == 0
    for opt in ("--simulate", "--procs", "--node-procs", "--policy", "--depth", "--backfill",
                "--estimate ", "--start", "--count", "--estimates", "--json", "--jobs-out",
                "--gantt", "--gantt-range", "--diagnose-at", "--config", "--set",
                "--check-config", "--quiet"):
        assert opt in p.stdout, opt


@pytest.mark.parametrize("args,message", [
    (["--simulate", SP2, "--policy", "sjf"], "--policy wants fcfs, easy or conservative"),
    (["--simulate", SP2, "--procs", "0"], "--procs wants a positive count, not '0'"),
    (["--simulate", SP2, "--procs", "12x"], "--procs wants a positive count, not '12x'"),
    (["--simulate", SP2, "--estimate", "guess"], "--estimate wants requested or actual"),
    (["--simulate", SP2, "--depth", "deep"], "--depth wants a count or 'unlimited'"),
    (["--simulate", SP2, "--backfill", "worst"], "--backfill wants none, firstfit or bestfit"),
    (["--simulate", SP2, "--gantt-range", "5:1"], "--gantt-range wants FROM:TO"),
    (["--simulate", SP2, "--count", "-3"], "--count wants a positive count"),
    (["--simulate", SP2, "--bogus"], "unknown option or missing value: '--bogus'"),
    (["--simulate"], "unknown option or missing value: '--simulate'"),
    (["--simulate", SP2, "--set", "priority.nosuch=1"], "unknown key 'nosuch' in [priority]"),
])
def test_bad_usage(args, message):
    p = run(*args)
    assert p.returncode == 2, p.stderr
    assert message in p.stderr


def test_missing_trace(tmp_path):
    p = run("--simulate", tmp_path / "nope.swf")
    assert p.returncode == 1
    assert f"{tmp_path / 'nope.swf'}: cannot open" in p.stderr


def test_malformed_trace(tmp_path):
    t = tmp_path / "bad.swf"
    t.write_text("; MaxProcs: 8\n1 0 -1 10 2 -1 -1 2 20 -1 1 1 1 -1 1 -1 -1 -1\n"
                 "2 5 -1 10 two -1 -1 2 20 -1 1 1 1 -1 1 -1 -1 -1\n")
    p = run("--simulate", t)
    assert p.returncode == 1
    assert f"{t}:3: field 5 is not a number" in p.stderr
    t.write_text("; MaxProcs: 8\n1 0 -1 10 2 -1 -1\n")
    p = run("--simulate", t)
    assert p.returncode == 1 and f"{t}:2: expected 18 fields, found 7" in p.stderr


def test_headerless_trace_needs_procs(tmp_path):
    t = tmp_path / "plain.swf"
    t.write_text("1 0 -1 10 2 -1 -1 2 20 -1 1 1 1 -1 1 -1 -1 -1\n")
    p = run("--simulate", t)
    assert p.returncode == 1 and "no MaxProcs or MaxNodes header; give --procs N" in p.stderr
    d = sim_json("--simulate", t, "--procs", 4)
    assert d["jobs"] == 1 and d["procs"] == 4


def test_config_errors(tmp_path):
    c = tmp_path / "b.ini"
    c.write_text("[scheduler]\nreservationdepth = 2\n[priority]\nxfactorweight = x\n")
    p = run("--simulate", SP2, "-c", c)
    assert p.returncode == 1
    assert f"{c}:4: xfactorweight must be a number, not 'x'" in p.stderr
    c.write_text("[scheduler]\nbackfillpolicy = bestfit\nbackfillpolicy = none\n")
    p = run("--check-config", "-c", c)
    assert p.returncode == 1 and "duplicate key 'backfillpolicy'" in p.stderr
    p = run("--check-config", "-c", tmp_path / "missing.ini")
    assert p.returncode == 1 and "cannot open" in p.stderr


def test_check_config_shipped():
    p = run("--check-config", "-c", "configs/batch.ini", "--set", "user:alice.maxjob=3")
    assert p.returncode == 0, p.stderr
    assert "reservationdepth = 1" in p.stdout and "backfillpolicy = firstfit" in p.stdout
    assert "[user alice]" in p.stdout and "maxjob = 3" in p.stdout


# ---- SDSC-SP2 replays (docs/batch.md) ------------------------------------------------

# First 10,000 usable jobs, 128 processors, requested walltimes.
SP2_10K = {
    "fcfs": (0.7234878468, 26596.6561, 16983.0, 145434.0, 212.3654102),
    "easy": (0.7253153835, 6664.4643, 0.0, 160675.0, 22.07676194),
    "conservative": (0.7235626345, 7222.2236, 0.0, 151547.0, 29.3263543),
}


@pytest.mark.parametrize("policy", ["fcfs", "easy", "conservative"])
def test_sp2_first_10000(policy, tmp_path):
    out = tmp_path / "jobs.csv"
    d = sim_json("--simulate", SP2, "--count", 10000, "--policy", policy, "--jobs-out", out)
    for key in ("jobs", "utilization", "mean_wait_s", "median_wait_s", "max_wait_s", "mean_bsld",
                "sim_wall_s"):
        assert key in d
    assert d["jobs"] == 10000 and d["procs"] == 128
    assert d["skipped"]["no_run_time"] == 1088 and d["killed_at_walltime"] == 661
    want = SP2_10K[policy]
    got = (d["utilization"], d["mean_wait_s"], d["median_wait_s"], d["max_wait_s"],
           d["mean_bsld"])
    for w, g in zip(want, got):
        assert g == pytest.approx(w, rel=1e-6), (policy, got)
    jobs = read_jobs(out)
    assert len(jobs) == 10000
    check_schedule(jobs, 128)
    assert sum(j["wait"] for j in jobs) / len(jobs) == pytest.approx(d["mean_wait_s"])


# The whole trace (59,715 records, 54,044 usable jobs).
SP2_ALL = {
    "fcfs": (0.7595818686, 1536541.854, 976406.0, 5481706.0, 13900.35325),
    "easy": (0.8245091357, 20572.49687, 1228.0, 459740.0, 88.53151694),
    "conservative": (0.8242315728, 24337.85473, 2630.0, 434256.0, 101.967493),
}


@pytest.mark.slow
@pytest.mark.parametrize("policy", ["fcfs", "easy", "conservative"])
def test_sp2_whole_trace(policy, tmp_path):
    out = tmp_path / "jobs.csv"
    d = sim_json("--simulate", SP2, "--policy", policy, "--jobs-out", out)
    assert d["jobs"] == 54044
    assert d["skipped"]["no_run_time"] == 5671 and d["killed_at_walltime"] == 4134
    got = (d["utilization"], d["mean_wait_s"], d["median_wait_s"], d["max_wait_s"],
           d["mean_bsld"])
    for w, g in zip(SP2_ALL[policy], got):
        assert g == pytest.approx(w, rel=1e-6), (policy, got)
    check_schedule(read_jobs(out), 128)


# ---- an independent implementation, job by job ----------------------------------------

def earliest(events, t, length, need):
    """First start >= t where the free processors described by events ((time, delta)
    pairs, all at or after t) stay >= need for `length` seconds."""
    times = sorted({e[0] for e in events})
    level, free = {}, 0
    for x in times:
        free += sum(d for tv, d in events if tv == x)
        level[x] = free
    for k, c in enumerate(times):
        if all(level[x] >= need for x in times[k:] if x < c + length):
            return c
    raise AssertionError("never fits")


def reference(jobs, procs, policy):
    """Plain FCFS / EASY / conservative on a processor pool (jobs sorted by submit)."""
    start = [None] * len(jobs)
    running = []  # [actual end, walltime end, procs]
    queue, nxt, free = [], 0, procs
    while nxt < len(jobs) or queue or running:
        t = min(([jobs[nxt][0]] if nxt < len(jobs) else []) + [r[0] for r in running])
        for r in [r for r in running if r[0] == t]:
            free += r[2]
            running.remove(r)
        while nxt < len(jobs) and jobs[nxt][0] == t:
            queue.append(nxt)
            nxt += 1

        def begin(i):
            nonlocal free
            _, run_s, p, wall = jobs[i]
            start[i] = t
            free -= p
            running.append([t + min(run_s, wall), t + wall, p])
            queue.remove(i)

        while queue and jobs[queue[0]][2] <= free:
            begin(queue[0])
        if queue and policy == "easy":  # shadow time and extra processors
            need, acc, shadow = jobs[queue[0]][2], free, t
            for end in sorted({r[1] for r in running}):
                if acc >= need:
                    break
                acc += sum(r[2] for r in running if r[1] == end)
                shadow = end
            extra = acc - need
            for i in list(queue[1:]):
                p, wall = jobs[i][2], jobs[i][3]
                if p <= free and (t + wall <= shadow or p <= extra):
                    if t + wall > shadow:
                        extra -= p
                    begin(i)
        if queue and policy == "conservative":  # everyone reserved, in order
            events = [(t, free)] + [(r[1], r[2]) for r in running]
            for i in list(queue):
                p, wall = jobs[i][2], jobs[i][3]
                s = earliest(events, t, wall, p)
                events += [(s, -p), (s + wall, p)]
                if s == t:
                    begin(i)
    return start


@pytest.mark.parametrize("policy", ["fcfs", "easy", "conservative"])
def test_against_python_reference(policy, tmp_path):
    seed = int(os.environ.get("BATCH_TEST_SEED", random.randrange(1 << 30)))
    print(f"seed {seed} (set BATCH_TEST_SEED to repeat)")
    rnd = random.Random(seed)
    procs, t, jobs, lines = 16, 0, [], ["; MaxProcs: 16"]
    for i in range(150):
        t += rnd.choice([0, rnd.randrange(150)])
        p = rnd.choice([1, 1, 2, 4, 8, rnd.randrange(1, 17)])
        run_s = rnd.randrange(1, 300)
        wall = run_s + rnd.choice([0, rnd.randrange(400)])
        jobs.append((t, run_s, p, wall))
        lines.append(f"{i + 1} {t} -1 {run_s} {p} -1 -1 {p} {wall} -1 1 {i % 4} 1 -1 1 -1 -1 -1")
    trace = tmp_path / "rand.swf"
    trace.write_text("\n".join(lines) + "\n")
    out = tmp_path / "jobs.csv"
    sim_json("--simulate", trace, "--policy", policy, "--jobs-out", out)
    got = {j["id"]: j["start"] for j in read_jobs(out)}
    want = reference(jobs, procs, policy)
    for i, w in enumerate(want):
        assert got[i + 1] == w, f"seed {seed}: job {i + 1} starts at {got[i + 1]}, reference {w}"


# ---- outputs and options -----------------------------------------------------------------

def test_gantt_svg(tmp_path):
    svg = tmp_path / "g.svg"
    sim_json("--simulate", SP2, "--count", 500, "--gantt", svg, "--gantt-range", "0:86400")
    root = ET.parse(svg).getroot()
    rects = [e for e in root.iter() if e.tag.endswith("rect")]
    assert len(rects) > 50
    titles = [e.text for e in root.iter() if e.tag.endswith("title")]
    assert any(t and t.startswith("job ") for t in titles)


def test_estimates_exact_with_conservative():
    """With exact run times, conservative backfill's first estimates are exact."""
    d = sim_json("--simulate", SP2, "--count", 3000, "--policy", "conservative",
                 "--estimate", "actual", "--estimates")
    assert d["estimate_mae_s"] == 0
    e = sim_json("--simulate", SP2, "--count", 3000, "--policy", "easy", "--estimates")
    assert e["estimate_mae_s"] > 0


def test_diagnose(tmp_path):
    p = run("--simulate", SP2, "--count", 2000, "--diagnose-at", 86400, "--quiet")
    assert p.returncode == 0, p.stderr
    assert "diagnose -p at t=" in p.stdout and "queuetime" in p.stdout and "xfactor" in p.stdout


def test_plain_trace_and_nodes():
    """A plain (not gzipped) trace with only MaxNodes; whole nodes of 4 processors."""
    d = sim_json("--simulate", TRACES / "lublin_256.swf", "--count", 2000)
    assert d["procs"] == 256 and d["jobs"] == 2000
    n = sim_json("--simulate", SP2, "--count", 2000, "--node-procs", 4)
    one = sim_json("--simulate", SP2, "--count", 2000)
    assert n["node_procs"] == 4 and n["mean_wait_s"] >= one["mean_wait_s"]


def test_trace_order_and_late_header(tmp_path):
    """The trace is simulated while it is read; a trace out of submit order, or
    with a header line below its first job, gives what the same trace sorted, or
    with that line on top, gives (the run is done again on the whole trace)."""
    seed = int(os.environ.get("BATCH_TEST_SEED", random.randrange(1 << 30)))
    print(f"seed {seed} (set BATCH_TEST_SEED to repeat)")
    rnd = random.Random(seed)
    recs = []
    for i in range(3000):  # over 256 KB: several blocks
        p = rnd.choice([1, 2, 4, 8, 16])
        run_s = rnd.randrange(1, 4000)
        submit = i * 30 + (rnd.randrange(-600, 0) if i % 97 == 50 else 0)
        recs.append(f"{i + 1} {max(submit, 0)} -1 {run_s} {p} -1 -1 {p} {run_s + 600} -1 1 "
                    f"{i % 7} 1 -1 {i % 3} -1 -1 -1" + " " * 40)

    def figures(name, head, body, tail=""):
        trace = tmp_path / name
        trace.write_text(head + "\n".join(body) + "\n" + tail)
        out = tmp_path / (name + ".csv")
        d = sim_json("--simulate", trace, "--jobs-out", out)
        del d["trace"], d["sim_wall_s"], d["read_s"], d["jobs_per_s"]
        return d, sorted(map(tuple, (j.values() for j in read_jobs(out))))

    by_submit = sorted(recs, key=lambda r: int(r.split()[1]))
    assert by_submit != recs
    want = figures("sorted.swf", "; MaxProcs: 32\n", by_submit)
    assert figures("unsorted.swf", "; MaxProcs: 32\n", recs) == want
    late = figures("late.swf", "; MaxProcs: 16\n", by_submit, "; MaxProcs: 32\n")
    assert late == want
    assert figures("bottom.swf", "", by_submit, "; MaxProcs: 32\n") == want
    d = sim_json("--simulate", tmp_path / "unsorted.swf", "--start", 1000, "--count", 500)
    assert d["jobs"] == 500


def test_set_and_window():
    base = sim_json("--simulate", SP2, "--count", 3000)
    x = sim_json("--simulate", SP2, "--count", 3000, "--set", "priority.xfactorweight=100")
    assert x["mean_wait_s"] != base["mean_wait_s"]
    w = sim_json("--simulate", SP2, "--start", 1000, "--count", 1000)
    assert w["jobs"] == 1000
    bf = sim_json("--simulate", SP2, "--count", 3000, "--backfill", "bestfit")
    assert bf["jobs"] == 3000 and bf["policy"] == "easy (bestfit)"


def test_config_with_fairshare_and_throttles(tmp_path):
    """A full batch.ini on a real trace: fairshare, xfactor, class priority, throttles."""
    c = tmp_path / "fs.ini"
    c.write_text("[scheduler]\nreservationdepth = 4\n[priority]\nxfactorweight = 10\n"
                 "fsuserweight = 50\nclassweight = 1\n[fairshare]\nfspolicy = dedicatedps\n"
                 "fsinterval = 6:00:00\nfsdepth = 4\nfsdecay = 0.7\n[user DEFAULT]\n"
                 "fstarget = 5\nmaxjob = 8\n[class q2]\npriority = 500\n")
    out = tmp_path / "jobs.csv"
    d = sim_json("--simulate", SP2, "--count", 3000, "-c", c, "--jobs-out", out)
    base = sim_json("--simulate", SP2, "--count", 3000)
    assert d["jobs"] == 3000 and d["policy"] == "depth 4 (firstfit)"
    assert d["mean_wait_s"] != base["mean_wait_s"]
    check_schedule(read_jobs(out), 128)
    p = run("--simulate", SP2, "--count", 3000, "-c", c, "--diagnose-at", 200000, "--quiet")
    assert p.returncode == 0 and "fsuser" in p.stdout



def _svg_texts(path):
    root = ET.parse(path).getroot()  # parses as XML
    return root, [e for e in root.iter() if e.tag.endswith("text")]


@pytest.mark.parametrize("rng,unit", [("0:100", "s"), ("0:3000", "min"), (None, "h"),
                                      ("0:864000", "d")])
def test_gantt_labels_ids_and_one_axis_unit(tmp_path, rng, unit):
    """issue 27: the Gantt chart names its axes in one unit chosen from the range, has a
    caption, writes the id of a job inside its rectangle where it fits (a tiny job keeps
    only its tooltip), and its tick labels do not overlap."""
    t = tmp_path / "small.swf"
    t.write_text("; MaxProcs: 16\n"
                 "1007 0 -1 40000 8 -1 -1 8 40000 -1 1 1 1 -1 1 -1 -1 -1\n"
                 "4242 0 -1 5 1 -1 -1 1 5 -1 1 1 1 -1 1 -1 -1 -1\n"
                 "1009 10 -1 7200 8 -1 -1 8 7200 -1 1 1 1 -1 1 -1 -1 -1\n")
    svg = tmp_path / "g.svg"
    sim_json("--simulate", t, "--gantt", svg, *(["--gantt-range", rng] if rng else []))
    root, texts = _svg_texts(svg)
    words = [e.text or "" for e in texts]
    assert "processors" in words
    assert "time since the first submission of the trace (%s)" % unit in words, words
    assert any(w.startswith("one colour per job") for w in words), words
    assert any(w.startswith("Schedule of 16 processors") for w in words), words
    if unit in ("s", "min", "h"):  # 1007 runs over the whole range, tall and wide
        assert "1007" in words, words
    if unit != "s":  # 5 s of one processor: too narrow for its id
        assert "4242" not in words
    else:  # 13 pixels a second: it fits
        assert "4242" in words
    titles = [e.text for e in root.iter() if e.tag.endswith("title")]
    assert any(x.startswith("job 4242:") for x in titles), titles
    # tick labels: plain numbers of the one unit, increasing, never closer than a label
    ticks = [(float(e.get("x")), e.text) for e in texts
             if e.get("text-anchor") == "middle" and e.get("font-size") is None
             and (e.text or "").replace(".", "").isdigit()]
    assert 3 <= len(ticks) <= 11, ticks
    xs = [x for x, _ in ticks]
    assert xs == sorted(xs)
    for (x0, a), (x1, _) in zip(ticks, ticks[1:]):
        assert x1 - x0 > 7 * len(a) + 10, ticks
