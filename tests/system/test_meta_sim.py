"""System tests of `gridnode meta --simulate`: the metascheduler's policies compared on
traces (issue #10 items 7-8).

They run the real binary (GRIDNODE_BIN) on the shared SWF traces and on small traces
written here: the policy comparison's invariants on 4-site splits of SDSC-SP2 and
KTH-SP2 (the estimate policy with reservations beats random, round robin and least
queued work on mean bounded slowdown; the pooled bound is best), the per-job CSV
(no start before submission, no site over its processors), the SVG, a scenario file,
and bad input (clear messages, exit status 1 for unusable files, 2 for bad options).
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
KTH = TRACES / "KTH-SP2-1996-2.1-cln.swf.gz"
BIN = os.environ.get("GRIDNODE_BIN", str(REPO / "build" / "gridnode"))
ASAN = os.environ.get("GRIDNODE_ASAN", "") not in ("", "0")
TIMEOUT = 600 if ASAN else 180
POLICIES = ["estimate", "earliest_start", "least_queued", "round_robin", "random", "slurm_m",
            "pooled"]


def run(*args, timeout=TIMEOUT):
    p = subprocess.run([BIN, "meta", *map(str, args)], capture_output=True, text=True,
                       timeout=timeout, cwd=REPO)
    assert "Sanitizer" not in p.stderr and "runtime error:" not in p.stderr, p.stderr
    return p


def sim_json(*args):
    p = run("--json", *args)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


def write_trace(path, n, procs, seed, header=True):
    """A random SWF trace of n jobs on `procs` processors; returns the path."""
    rnd = random.Random(seed)
    print("trace seed", seed)
    lines = [f"; MaxProcs: {procs}"] if header else []
    t = 0
    for i in range(1, n + 1):
        t += rnd.randint(0, 400)
        run_s = rnd.randint(1, 3000)
        req = run_s + rnd.randint(0, 2000)
        p = rnd.choice([1, 1, 2, 4, 8, procs // 4, procs // 2])
        lines.append(f"{i} {t} -1 {run_s} {p} -1 -1 {p} {req} -1 1 {rnd.randint(1, 9)} 1 -1 1 "
                     "-1 -1 -1")
    path.write_text("\n".join(lines) + "\n")
    return path


def by_policy(doc):
    return {r["policy"]: r for r in doc["runs"]}


def check_comparison(doc):
    runs = by_policy(doc)
    assert sorted(runs) == sorted(POLICIES)
    est = runs["estimate"]["mean_bsld"]
    for other in ("random", "round_robin", "least_queued"):
        assert est < runs[other]["mean_bsld"], (other, runs)
    pooled = runs["pooled"]["mean_bsld"]
    for name, r in runs.items():
        assert pooled <= r["mean_bsld"] + 1e-9, (name, runs)
        assert r["mean_wait_s"] >= 0 and r["mean_turnaround_s"] >= r["mean_wait_s"]
        for u in r["utilization"].values():
            assert 0 < u <= 1
    assert runs["slurm_m"]["moved"] == 0 and runs["random"]["moved"] == 0
    return runs


# ---- item 8: the comparison on real traces ---------------------------------------

@pytest.mark.slow
@pytest.mark.skipif(not SP2.exists(), reason="no SDSC-SP2 trace")
def test_sp2_four_sites_estimate_beats_blind_policies():
    doc = sim_json("--simulate", SP2, "--sites", 4)
    assert [s["nodes"] for s in doc["sites"]] == [32, 32, 32, 32]
    assert doc["jobs"] + doc["refused"] > 50000 and doc["grid_jobs"] > 20000
    runs = check_comparison(doc)
    assert runs["estimate"]["moved"] > 0  # re-evaluation happens on a real trace
    # a whole-trace 4-site run takes under 10 s (generous here: the machine is shared)
    assert runs["estimate"]["wall_s"] < 30


@pytest.mark.slow
@pytest.mark.skipif(not KTH.exists(), reason="no KTH-SP2 trace")
def test_kth_four_sites_estimate_beats_blind_policies():
    check_comparison(sim_json("--simulate", KTH, "--sites", 4))


# ---- outputs ------------------------------------------------------------------------

def test_outputs_are_well_formed(tmp_path):
    trace = write_trace(tmp_path / "t.swf", 400, 64, seed=7)
    csv_path, svg_path = tmp_path / "jobs.csv", tmp_path / "cmp.svg"
    doc = sim_json("--simulate", trace, "--sites", 2, "--jobs-out", csv_path, "--svg", svg_path)
    runs = by_policy(doc)
    assert sorted(runs) == sorted(POLICIES)
    assert doc["jobs"] == 400 and doc["refused"] == 0
    with open(csv_path, newline="") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 400 * len(POLICIES)
    cap = {"site0": 32, "site1": 32, "pooled": 64}
    for pol in POLICIES:
        mine = [r for r in rows if r["policy"] == pol]
        assert len({r["id"] for r in mine}) == 400
        grid = sum(int(r["grid"]) for r in mine)
        assert grid == doc["grid_jobs"]
        events = {}
        bsld_sum = 0.0
        for r in mine:
            submit, start, end = int(r["submit"]), int(r["start"]), int(r["end"])
            assert submit <= start <= end, r
            assert int(r["wait"]) == start - submit
            bsld_sum += float(r["bsld"])
            events.setdefault(r["site"], []).extend(
                [(start, 1, int(r["procs"])), (end, 0, -int(r["procs"]))])
        assert abs(bsld_sum / 400 - runs[pol]["mean_bsld"]) < 1e-3
        for site, ev in events.items():
            used = 0
            for _, _, d in sorted(ev):
                used += d
                assert used <= cap[site], (pol, site)
    root = ET.parse(svg_path).getroot()
    texts = [t.text for t in root.iter("{http://www.w3.org/2000/svg}text")]
    for pol in POLICIES:
        assert pol in texts
    assert len(list(root.iter("{http://www.w3.org/2000/svg}rect"))) >= 3 * len(POLICIES)


def test_table_by_default_and_one_policy(tmp_path):
    trace = write_trace(tmp_path / "t.swf", 100, 32, seed=3)
    p = run("--simulate", trace, "--sites", 2, "--policy", "estimate")
    assert p.returncode == 0, p.stderr
    assert "POLICY" in p.stdout and "MEAN_BSLD" in p.stdout
    rows = [l.split()[0] for l in p.stdout.splitlines()[5:] if l.strip()]
    assert rows == ["estimate"]


def test_scenario_file_sites_speeds_and_policies(tmp_path):
    trace = write_trace(tmp_path / "t.swf", 300, 64, seed=11)
    (tmp_path / "cons.ini").write_text("[scheduler]\nreservationdepth = unlimited\n")
    scen = tmp_path / "grid.ini"
    scen.write_text("[meta]\ngrid_share = 1\nmargin = 60\n"
                    "[site fast]\nnodes = 16\nspeed = 2\nbatch_config = cons.ini\n"
                    "[site big]\nnodes = 48\nscheduler.backfillpolicy = bestfit\n")
    doc = sim_json("--simulate", trace, "--scenario", scen)
    assert [s["name"] for s in doc["sites"]] == ["fast", "big"]
    assert doc["grid_jobs"] == doc["jobs"]  # grid_share 1: every job goes through the spool
    runs = by_policy(doc)
    assert set(runs["estimate"]["utilization"]) == {"fast", "big"}
    assert set(runs["pooled"]["utilization"]) == {"pooled"}
    # --grid-share on the command line overrides the file
    doc = sim_json("--simulate", trace, "--scenario", scen, "--grid-share", "0",
                   "--policy", "random")
    assert doc["grid_jobs"] == 0


# ---- bad input ----------------------------------------------------------------------

def test_help_documents_every_option():
    p = run("--simulate", "--help")
    assert p.returncode == 0
    for opt in ("--simulate", "--sites", "--procs", "--scenario", "--policy", "--grid-share",
                "--split", "--margin", "--no-reevaluate", "--seed", "--count", "--estimate",
                "--json", "--jobs-out", "--svg", "--local"):
        assert opt in p.stdout, opt


@pytest.mark.parametrize("args,want", [
    (["--simulate", "x.swf"], "--sites N or --scenario"),
    (["--sites", "4", "--simulate"], "--simulate needs a value"),
    (["--simulate", "x.swf", "--sites", "4", "--policy", "best"], "--policy 'best'"),
    (["--simulate", "x.swf", "--sites", "4", "--bogus"], "unknown option '--bogus'"),
    (["--simulate", "x.swf", "--sites", "4", "--grid-share", "1.5"], "--grid-share '1.5'"),
])
def test_bad_options_exit_2(tmp_path, args, want):
    trace = write_trace(tmp_path / "x.swf", 20, 16, seed=1)
    args = [str(trace) if a == "x.swf" else a for a in args]
    p = run(*args)
    assert p.returncode == 2, p.stderr
    assert want in p.stderr and "gridnode meta --simulate --help" in p.stderr


def test_bad_files_exit_1(tmp_path):
    p = run("--simulate", tmp_path / "missing.swf", "--sites", 4)
    assert p.returncode == 1 and "missing.swf" in p.stderr
    trace = write_trace(tmp_path / "t.swf", 20, 16, seed=2)
    bad = tmp_path / "bad.ini"
    bad.write_text("[site a]\nnodes = 8\nspeed = fast\n")
    p = run("--simulate", trace, "--scenario", bad)
    assert p.returncode == 1
    assert "bad.ini:3: speed 'fast'" in p.stderr
    p = run("--simulate", trace, "--scenario", tmp_path / "nope.ini")
    assert p.returncode == 1 and "nope.ini" in p.stderr
    nohdr = write_trace(tmp_path / "nohdr.swf", 20, 16, seed=2, header=False)
    p = run("--simulate", nohdr, "--sites", 2)
    assert p.returncode == 1 and "--procs" in p.stderr
    p = run("--json", "--simulate", nohdr, "--sites", 2, "--procs", 16)
    assert p.returncode == 0, p.stderr
    garbage = tmp_path / "garbage.swf"
    garbage.write_text("1 2 three\n")
    p = run("--simulate", garbage, "--sites", 2, "--procs", 16)
    assert p.returncode == 1 and "garbage.swf" in p.stderr


def test_jobs_wider_than_every_site_are_refused(tmp_path):
    trace = write_trace(tmp_path / "t.swf", 200, 64, seed=5)  # some jobs use 32 procs
    doc = sim_json("--simulate", trace, "--sites", 4)  # sites of 16
    assert doc["refused"] > 0 and doc["jobs"] + doc["refused"] == 200


def test_local_trace_per_site_competes_with_grid_jobs(tmp_path):
    """A site's own trace as local load (item 7: "one per site as local load that the grid
    jobs compete with"): all of it runs at that site, and the estimate policy steers the
    grid jobs away from the site it keeps busy."""
    grid = tmp_path / "grid.swf"  # light: 1-processor jobs of 600 s every 300 s
    grid.write_text("; MaxProcs: 16\n" + "".join(
        f"{i} {i * 300} -1 600 1 -1 -1 1 900 -1 1 1 1 -1 1 -1 -1 -1\n" for i in range(1, 121)))
    busy = write_trace(tmp_path / "busy.swf", 300, 16, seed=22)  # keeps 16 processors busy
    out = tmp_path / "jobs.csv"
    doc = sim_json("--simulate", grid, "--sites", 2, "--procs", 32, "--grid-share", 1,
                   "--local", "site0=%s" % busy, "--policy", "estimate", "--jobs-out", out)
    assert doc["local_traced"] > 250 and doc["grid_jobs"] + doc["local_traced"] == doc["jobs"]
    rows = list(csv.DictReader(out.open()))
    local = [r for r in rows if r["grid"] == "0"]
    assert len(local) == doc["local_traced"]
    assert all(r["site"] == "site0" and int(r["id"]) > 10**9 for r in local)
    g = [r for r in rows if r["grid"] == "1"]
    on = {n: sum(r["site"] == n for r in g) for n in ("site0", "site1")}
    assert on["site1"] > 3 * on["site0"], ("grid jobs should mostly avoid the loaded site", on)
    # the same from a scenario file (path relative to it), and its errors
    scen = tmp_path / "s.ini"
    scen.write_text("[meta]\ngrid_share = 1\n[site a]\nnodes = 16\nlocal_trace = busy.swf\n"
                    "[site b]\nnodes = 16\n")
    doc2 = sim_json("--simulate", grid, "--scenario", scen, "--policy", "estimate")
    assert doc2["local_traced"] == doc["local_traced"]
    p = run("--simulate", grid, "--sites", 2, "--procs", 32, "--local", "nosite=%s" % busy)
    assert p.returncode == 2 and "--local 'nosite'" in p.stderr
    p = run("--simulate", grid, "--sites", 2, "--procs", 32, "--local",
            "site1=%s" % (tmp_path / "missing.swf"))
    assert p.returncode == 1 and "missing.swf" in p.stderr and "site1" in p.stderr


def test_unequal_splits_by_weights_and_shares(tmp_path):
    """--sites 3:1 splits in proportion; a scenario's `share` does the same from the
    trace's MaxProcs; local and grid jobs' waits are reported apart (issue 25)."""
    trace = write_trace(tmp_path / "t.swf", 300, 64, seed=7)
    d = sim_json("--simulate", trace, "--sites", "3:1", "--policy", "slurm_m")
    assert [s["nodes"] for s in d["sites"]] == [48, 16]
    r = d["runs"][0]
    for k in ("local_mean_wait_s", "local_max_wait_s", "local_mean_bsld", "grid_max_wait_s",
              "local_over_2d"):
        assert k in r, k
    assert r["local_max_wait_s"] >= r["local_mean_wait_s"] >= 0
    assert r["grid_max_wait_s"] >= r["grid_mean_wait_s"] >= 0
    # the mean of all jobs lies between the local and the grid means
    lo, hi = sorted([r["local_mean_wait_s"], r["grid_mean_wait_s"]])
    assert lo - 1e-6 <= r["mean_wait_s"] <= hi + 1e-6
    sc = tmp_path / "s.ini"
    sc.write_text("[site big]\nshare = 0.75\n[site small]\nshare = 0.25\n")
    d2 = sim_json("--simulate", trace, "--scenario", sc, "--policy", "slurm_m")
    assert [s["nodes"] for s in d2["sites"]] == [48, 16]
    assert d2["runs"][0]["mean_bsld"] == pytest.approx(r["mean_bsld"])
    for bad in ("3:", "3:0", "a:b", ":1"):
        p = run("--simulate", trace, "--sites", bad)
        assert p.returncode == 2 and "--sites" in p.stderr, (bad, p.stderr)
    sc.write_text("[site a]\nnode_procs = 2\n")
    p = run("--simulate", trace, "--scenario", sc)
    assert p.returncode == 1 and "nodes = N or share = F" in p.stderr, p.stderr
