"""System tests of `gridnode client --emulate` (roles/client/emulate*.c over the engine).

They run the real binary on the shipped scenarios and assert outcomes: the deadline-aware
default beats BOINC's figures on BOINC's own sample, a feasible steady scenario misses no
deadline and keeps shares within 5 %, RPC attempts back off exponentially during a
6-hour server outage and resume after it, the JSON, table, timeline and RPC log outputs
are well formed, runs are reproducible from the printed seed, and bad input of every
kind gets a clear error naming the problem (and the line), never a crash.
"""

import csv
import json
import os
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
BIN = os.environ.get("GRIDNODE_BIN", str(REPO / "build" / "gridnode"))
ASAN = os.environ.get("GRIDNODE_ASAN", "") not in ("", "0")
TIMEOUT = 180 if ASAN else 60
SCEN = REPO / "configs" / "scenarios"


def emulate(*args, check=True):
    """Runs `gridnode client --emulate ...`; returns the CompletedProcess."""
    p = subprocess.run([BIN, "client", "--emulate", *map(str, args)], capture_output=True,
                       text=True, timeout=TIMEOUT, cwd=REPO)
    assert p.returncode >= 0, f"killed by signal {-p.returncode}: {p.stderr}"
    assert "Sanitizer" not in p.stderr and "runtime error" not in p.stderr, p.stderr
    if check:
        assert p.returncode == 0, p.stderr
    return p


def figures(*args):
    """The JSON objects printed by --json, one per policy."""
    p = emulate(*args, "--json")
    return [json.loads(line) for line in p.stdout.splitlines() if line.strip()]


def bad(tmp_path, text, *extra):
    f = tmp_path / "bad.ini"
    f.write_text(text)
    p = emulate(f, *extra, check=False)
    assert p.returncode in (1, 2), (p.returncode, p.stderr)
    assert p.stdout == ""
    return p.stderr


MINIMAL = "[host]\ncpus = 1\n\n[project a]\nsize_mean = 10\ndeadline = 100\n"


# ---- BOINC's sample ----------------------------------------------------------------

def test_boinc_sample_beats_boinc():
    """30 days of BOINC's sample: wasted <= 0.05, idle <= 0.23, share violation <= 0.05
    (BOINC: 0.322, 0.224, 0.060), and the BOINC-faithful setting wastes far more."""
    default, faithful = figures(SCEN / "boinc-sample.ini", "--compare", "rec,boinc")
    assert default["policy"] == "rec" and faithful["policy"] == "rec/boinc"
    assert default["duration_s"] == 30 * 86400
    assert default["wasted_fraction"] <= 0.05
    assert default["idle_fraction"] <= 0.21  # issue 11 item 11b: seed 1 (others 0.23)
    assert default["share_violation"] <= 0.05
    assert faithful["wasted_fraction"] > 0.25
    # issue 11 item 11b: at most 0.40 scheduler RPCs per job (0.71, then 0.62, 0.51; 0.37
    # since projects with short deadlines work in batches, docs/client-scheduling.md 2.8)
    assert default["rpcs_per_job"] <= 0.40
    # a late result either finished late or was reported late
    assert 0 <= default["missed_report"] <= default["missed"]
    for d in (default, faithful):
        for key in ("policy", "idle_fraction", "wasted_fraction", "share_violation",
                    "monotony", "rpcs_per_job", "sim_wall_s"):
            assert key in d
        assert 0 <= d["monotony"] <= 1
        assert d["rpcs_per_job"] == pytest.approx(d["rpcs"] / d["jobs"], rel=1e-5)
        shares = [p["used_share"] for p in d["projects"]]
        assert sum(shares) == pytest.approx(1, abs=1e-6)


def test_compare_prints_policies_side_by_side():
    p = emulate(SCEN / "boinc-sample.ini", "--duration", "2d", "--compare", "rec,debt2004")
    lines = p.stdout.splitlines()
    assert "seed 1" in lines[0] and "2 days" in lines[0]
    head = lines[1].split()
    assert head == ["policy", "rec", "debt2004"]
    rows = {l.split()[0]: l.split()[1:] for l in lines[2:] if l.strip()}
    for key in ("idle_fraction", "wasted_fraction", "share_violation", "monotony",
                "rpcs_per_job", "sim_wall_s"):
        assert len(rows[key]) == 2
        for v in rows[key]:
            float(v)
    assert any(l.startswith("used share P1 (0.667)") for l in lines)
    assert "seed 1" in p.stderr


def test_both_policies_and_fetch_modes_run():
    runs = figures(SCEN / "cpu-gpu.ini", "--duration", "5d", "--compare",
                   "rec,debt2004,rec/boinc,debt2004/boinc")
    assert [r["policy"] for r in runs] == ["rec", "debt2004", "rec/boinc", "debt2004/boinc"]
    for r in runs:
        assert r["jobs"] > 0 and r["idle_fraction"] < 0.1
        assert {p["name"] for p in r["projects"]} == {"cpuonly", "gpuonly", "mixed", "amdish"}


# ---- outcomes on purpose-built scenarios --------------------------------------------

def test_feasible_steady_scenario():
    """Feasible steady work for 30 days: no missed deadline, shares within 5 %, at most
    one RPC per job."""
    (d,) = figures(SCEN / "steady.ini")
    assert d["duration_s"] == 30 * 86400
    assert d["missed"] == 0 and d["wasted_fraction"] == 0
    assert d["share_violation"] <= 0.05
    assert d["rpcs_per_job"] <= 1
    assert d["idle_fraction"] < 0.01
    for p in d["projects"]:
        assert abs(p["used_share"] - p["share"]) <= 0.05


def test_steady_boinc_sample_rpcs():
    """BOINC's sample without outages or off periods: at most one RPC per job."""
    (d,) = figures(SCEN / "boinc-sample.ini", "--duration", "10d",
                   "--set", "host.on_frac=1", "--set", "project P1.up_frac=1",
                   "--set", "project P2.up_frac=1")
    assert d["rpcs_per_job"] <= 1
    assert d["wasted_fraction"] < 0.01
    assert d["share_violation"] <= 0.05


def test_tight_deadlines_deadline_aware_wastes_less():
    aware, faithful = figures(SCEN / "tight-deadline.ini", "--duration", "10d",
                              "--compare", "rec,rec/boinc")
    assert aware["wasted_fraction"] < 0.05
    assert faithful["wasted_fraction"] > 2 * aware["wasted_fraction"]


def test_outage_backs_off_exponentially_and_resumes(tmp_path):
    """During the 6-hour outage of "flaky" (2d-2d6h) every RPC to it fails and after the
    n-th consecutive failure the next one waits min(60 s x 2^n, 4 h) x U[0.5, 1]; RPCs
    succeed again after the outage, within the 4-hour cap, while "steady" is served."""
    log = tmp_path / "rpc.csv"
    (d,) = figures(SCEN / "server-outage.ini", "--rpc-log", log)
    assert d["missed"] == 0 and d["idle_fraction"] < 0.01
    rows = list(csv.DictReader(log.open()))
    assert rows and set(rows[0]) >= {"policy", "time", "project", "kind", "ok", "url",
                                      "nrpc_failures", "min_rpc_time"}
    start, end = 2 * 86400, 2 * 86400 + 6 * 3600
    flaky = [r for r in rows if r["project"] == "flaky"]
    during = [r for r in flaky if start <= float(r["time"]) < end]
    assert len(during) >= 5 and all(r["ok"] == "0" for r in during)
    # each row shows the state left by the previous attempt (nrpc_failures, min_rpc_time).
    # A result finishing during the backoff may bring the next try forward to 60 s after
    # the last failure (a probe, docs/client-scheduling.md section 2 rule 4); a failed
    # probe leaves nrpc_failures and the backoff as they were.
    waits = []
    for prev, cur in zip(during, during[1:]):
        n = int(cur["nrpc_failures"])
        assert n in (int(prev["nrpc_failures"]), int(prev["nrpc_failures"]) + 1)
        wait = float(cur["min_rpc_time"]) - float(prev["time"])
        bound = min(60 * 2 ** n, 4 * 3600)
        assert 60 - 1e-3 <= wait <= bound + 1e-3, (n, wait)
        assert float(cur["time"]) >= float(cur["min_rpc_time"]) - 1e-3  # never early
        if n == int(prev["nrpc_failures"]) + 1 and wait >= 0.5 * bound - 1e-3:
            waits.append(wait)  # a regular try: min(60 s x 2^n, 4 h) x U[0.5, 1]
    assert len(waits) >= 4 and max(waits) > 8 * min(waits)
    after = [r for r in flaky if float(r["time"]) >= end]
    assert after and after[0]["ok"] == "1"
    assert float(after[0]["time"]) - end <= 4 * 3600 + 120
    assert any(r["ok"] == "1" and float(r["time"]) < start for r in flaky)
    steady = [float(r["time"]) for r in rows if r["project"] == "steady" and r["ok"] == "1"]
    assert any(start <= t < end for t in steady)


def test_master_list_reread_after_moved_endpoints(tmp_path):
    """A project whose scheduler moves is found again through its master list after
    10 consecutive failures; the new endpoint resets the failures."""
    log = tmp_path / "rpc.csv"
    f = tmp_path / "moved.ini"
    f.write_text(MINIMAL + "moved_at = 1d\nschedulers = 2\n\n[emulation]\nduration = 20d\n")
    (d,) = figures(f, "--rpc-log", log)
    rows = list(csv.DictReader(log.open()))
    masters = [r for r in rows if r["kind"] == "master"]
    assert masters and masters[0]["ok"] == "1"
    assert int(masters[0]["nrpc_failures"]) == 10
    later = [r for r in rows if float(r["time"]) > float(masters[0]["time"]) and r["kind"] == "rpc"]
    assert later and later[0]["url"] == "a/v2/sched0" and later[0]["ok"] == "1"
    fails = [r for r in rows if r["kind"] == "rpc" and r["ok"] == "0"]
    assert {r["url"] for r in fails} == {"a/sched0", "a/sched1"}  # both tried per session
    assert d["master_fetches"] >= 1


@pytest.mark.slow
def test_year_of_boinc_sample_and_big_host():
    (d,) = figures(SCEN / "boinc-sample.ini", "--duration", "365d")
    assert d["wasted_fraction"] <= 0.05 and d["idle_fraction"] <= 0.23
    assert d["share_violation"] <= 0.05 and d["rpcs_per_job"] <= 0.40
    (b,) = figures(SCEN / "big-host.ini", "--duration", "60d")
    assert b["idle_fraction"] < 0.01 and b["wasted_fraction"] < 0.01
    assert len(b["projects"]) == 20


# ---- outputs, seeds ---------------------------------------------------------------

def test_timeline_svg(tmp_path):
    svg = tmp_path / "t.svg"
    emulate(SCEN / "cpu-gpu.ini", "--duration", "1d", "--compare", "rec,boinc",
            "--timeline", svg, "--timeline-window", "0:6h")
    root = ET.parse(svg).getroot()
    assert root.tag.endswith("svg")
    ns = "{http://www.w3.org/2000/svg}"
    texts = [t.text for t in root.iter(ns + "text")]
    assert "rec" in texts and "rec/boinc" in texts
    for row in ("cpu 0", "cpu 7", "nvidia 0", "nvidia 1", "amd 0"):
        assert row in texts
    bars = [r for r in root.iter(ns + "rect") if r.find(ns + "title") is not None]
    assert len(bars) > 20
    for r in bars:
        x, w = float(r.get("x")), float(r.get("width"))
        assert 90 - 1e-6 <= x and x + w <= 90 + 1100 + 1


def test_seed_reproducible_and_overridable():
    a = figures(SCEN / "boinc-sample.ini", "--duration", "3d")[0]
    b = figures(SCEN / "boinc-sample.ini", "--duration", "3d")[0]
    c = figures(SCEN / "boinc-sample.ini", "--duration", "3d", "--seed", "7")[0]
    strip = lambda d: {k: v for k, v in d.items() if k != "sim_wall_s"}
    assert strip(a) == strip(b)
    assert a["seed"] == 1 and c["seed"] == 7
    assert strip(a) != strip(c)
    p = emulate(SCEN / "boinc-sample.ini", "--duration", "1d", "--seed", "7")
    assert "seed 7" in p.stderr and "seed 7" in p.stdout


def test_check_prints_effective_scenario_that_reparses(tmp_path):
    p = emulate(SCEN / "boinc-sample.ini", "--set", "client.policy=debt2004", "--check")
    text = p.stdout
    assert "policy = debt2004" in text and "min_buf = 180" in text
    assert "[project P2]" in text and "deadline = 500" in text
    again = tmp_path / "again.ini"
    again.write_text(text)
    assert emulate(again, "--check").stdout == text


def test_help_documents_every_option_and_key():
    for args in (["--help"], ["x.ini", "--help"]):
        p = emulate(*args)
        for opt in ("--duration", "--seed", "--policy", "--compare", "--json", "--timeline",
                    "--timeline-window", "--rpc-log", "--set", "--check", "--help"):
            assert opt in p.stdout
        for key in ("min_buf", "additional_buf", "time_slice", "poll", "rec_half_life",
                    "cpus", "on_frac", "on_mean", "share", "up_frac", "outage", "no_work",
                    "rpc_failure_rate", "size_mean", "size_sd", "size_est", "deadline",
                    "checkpoint", "deadline_slack"):
            assert f"  {key} " in p.stdout


def test_shipped_scenarios_parse():
    names = sorted(f.name for f in SCEN.glob("*.ini"))
    for need in ("boinc-sample.ini", "cpu-gpu.ini", "tight-deadline.ini",
                 "server-outage.ini", "big-host.ini"):
        assert need in names
    for f in SCEN.glob("*.ini"):
        emulate(f, "--check")


# ---- bad input ----------------------------------------------------------------------

@pytest.mark.parametrize("text,needle", [
    (MINIMAL + "share = 5\nshare = 6\n", "bad.ini:8: [project a] share: duplicate key"),
    (MINIMAL + "colour = red\n", "bad.ini:7: [project a]: unknown key 'colour'"),
    (MINIMAL + "share = -3\n", "bad.ini:7: [project a] share: -3 is out of range"),
    (MINIMAL + "deadline_check = maybe\n", "bad.ini:7: [project a] deadline_check"),
    (MINIMAL + "outage = 5d-2d\n", "bad.ini:7: [project a] outage: window"),
    (MINIMAL + "size_dist = gamma\n", "bad.ini:7: [project a] size_dist"),
    (MINIMAL.replace("deadline = 100", "deadline = soon"), "bad.ini:6: [project a] deadline"),
    (MINIMAL + "[host]\ncpus = 2\n", "bad.ini:8: section [host] appears twice"),
    (MINIMAL + "[planet x]\nsize = 1\n", "bad.ini:8: unknown section [planet x]"),
    (MINIMAL + "just words\n", "bad.ini:7: syntax error"),
    (MINIMAL + "  share = 4\n", "bad.ini:7: indented line"),
    (MINIMAL + "outage = " + "1d-2d, " * 40 + "\n", "bad.ini:7: line longer than"),
    ("[host]\ncpus = 1\n", "no [project NAME] section"),
    ("[project a]\nsize_mean = 1\ndeadline = 9\n", "[host] cpus is required"),
    ("[host]\ncpus = 1\n[project a]\nshare = 1\n", "bad.ini:4: [project a] has no application"),
    ("[host]\ncpus = 1\n[project a]\nsize_mean = 1\n", "[app a]: size_mean and deadline are required"),
    (MINIMAL + "type = tpu\n", "type 'tpu' is neither cpu nor a [gpu NAME]"),
    (MINIMAL + "usage = 2\n", "usage 2 exceeds the 1 cpu instance(s)"),
    (MINIMAL + "[app b]\nsize_mean = 1\ndeadline = 5\n", "[app b]: project is required"),
    (MINIMAL + "[app b]\nproject = zz\nsize_mean = 1\ndeadline = 5\n", "project 'zz' is not defined"),
    (MINIMAL + "[gpu nv]\nflops = 3\n", "[gpu nv]: count is required"),
    ("[client]\ntime_slice = 0\n" + MINIMAL, "bad.ini:2: [client] time_slice: 0 is out of range"),
    ("[client]\nrpc_backoff_min = 2h\nrpc_backoff_max = 1h\n" + MINIMAL, "rpc_backoff_min must be"),
])
def test_bad_scenarios_name_the_problem(tmp_path, text, needle):
    err = bad(tmp_path, text)
    assert needle in err, err
    assert err.startswith("gridnode client --emulate: ")


def test_bad_command_lines(tmp_path):
    ok = tmp_path / "ok.ini"
    ok.write_text(MINIMAL)
    cases = [
        ([SCEN / "nope.ini"], 1, "nope.ini: No such file"),
        ([ok, "--policy", "fifo"], 2, "unknown policy 'fifo'"),
        ([ok, "--compare", "rec,lottery"], 2, "unknown policy 'lottery'"),
        ([ok, "--duration", "soon"], 1, "--duration soon"),
        ([ok, "--duration", "0"], 1, "--duration 0"),
        ([ok, "--seed", "-4"], 1, "--seed -4"),
        ([ok, "--set", "client.min_buf"], 1, "expected section.key=value"),
        ([ok, "--set", "client.colour=red"], 1, "unknown key 'colour'"),
        ([ok, "--set", "project a.share=zero"], 1, "'zero' is not a number"),
        ([ok, "--timeline-window", "5h:1h"], 2, "--timeline-window"),
        ([ok, "--frobnicate"], 2, "unknown option '--frobnicate'"),
        ([ok, "--seed"], 2, "--seed needs a value"),
        ([ok, "--rpc-log", tmp_path / "no" / "dir.csv"], 1, "dir.csv"),
        ([ok, "--timeline", tmp_path / "no" / "t.svg"], 1, "t.svg"),
    ]
    for args, code, needle in cases:
        p = emulate(*args, check=False)
        assert p.returncode == code, (args, p.returncode, p.stderr)
        assert needle in p.stderr, (args, p.stderr)
    p = subprocess.run([BIN, "client", "--emulate"], capture_output=True, text=True,
                       timeout=TIMEOUT)
    assert p.returncode == 2 and "needs a scenario file" in p.stderr


def test_set_overrides_any_key(tmp_path):
    (a,) = figures(SCEN / "steady.ini", "--duration", "2d", "--set", "project gamma.share=500")
    shares = {p["name"]: p["share"] for p in a["projects"]}
    assert shares["gamma"] == pytest.approx(500 / 800)
    (b,) = figures(SCEN / "steady.ini", "--duration", "2d", "--policy", "debt2004/boinc")
    assert b["policy"] == "debt2004/boinc"


def _server_downs(root, project):
    """[(t0, t1)] of the "PROJECT server down" bars of the first panel, from the tooltips."""
    ns = "{http://www.w3.org/2000/svg}"
    out = []
    for r in root.iter(ns + "rect"):
        t = r.find(ns + "title")
        if t is not None and t.text.startswith(project + " server down "):
            a, b = t.text.split()[-2].split("-")
            out.append((float(a), float(b), float(r.get("x")), float(r.get("width"))))
    return out


def test_timeline_draws_server_outages_and_one_axis_unit(tmp_path):
    """issue 27: the timeline has a "P server" row per project, dark while its server was
    down: the scheduled outage window (2d-2d6h) as one bar exactly over it, and random
    unavailability (up_frac) replayed as the run met it: every RPC the run made to that
    server failed inside a drawn down period and succeeded outside one. The x axis
    reads in one unit, named in its label."""
    svg, log = tmp_path / "t.svg", tmp_path / "rpc.csv"
    emulate(SCEN / "server-outage.ini", "--set", "project steady.up_frac=0.8",
            "--set", "project steady.up_mean=4h", "--timeline", svg,
            "--timeline-window", "1d:3d", "--rpc-log", log)
    root = ET.parse(svg).getroot()
    ns = "{http://www.w3.org/2000/svg}"
    texts = [t.text for t in root.iter(ns + "text")]
    assert "flaky server" in texts and "steady server" in texts
    assert any(t and t.startswith("server down") for t in texts), texts  # the legend
    assert "time since the start of the emulation (h)" in texts, texts
    ticks = [t for t in texts if t and t.replace(".", "").isdigit()]
    assert ticks and all(24 <= float(t) <= 72 for t in ticks), ticks  # hours, no "1d0h"
    assert not any(t and t[-1] in "sdh" and t[:-1].replace(".", "").isdigit()
                   for t in texts), texts
    flaky = _server_downs(root, "flaky")
    assert [(a, b) for a, b, _, _ in flaky] == [(172800, 194400)], flaky
    _, _, x, w = flaky[0]  # the window 1d..3d over 1100 pixels from x = 90
    assert abs(x - (90 + 1100 / 2)) < 0.1 and abs(w - 1100 * 6 / 48) < 0.1, (x, w)
    steady = [(a, b) for a, b, _, _ in _server_downs(root, "steady")]
    assert steady, "up_frac 0.8 over two days draws some down periods"
    seen = 0
    with open(log, newline="") as f:
        for row in csv.DictReader(f):
            t = float(row["time"])
            if row["project"] != "steady" or row["policy"] != "rec" or not 86400 < t < 259200:
                continue
            if any(abs(t - a) < 1 or abs(t - b) < 1 for a, b in steady):
                continue  # at an edge (the tooltips give whole seconds)
            inside = any(a < t < b for a, b in steady)
            assert inside == (row["ok"] == "0"), (t, row["ok"], steady)
            seen += 1
    assert seen > 10
