"""The chaos test of issue 24 (item 6), bounded: scripts/chaos.py runs a whole grid
(meta spool, 2 batch sites, a cluster manager and 2 clients each) while kill -9 hits
every level, then checks that every keyed job ran once to its end, its output reads back
down the path, no copy is left at a site the spool does not point to and no reservation
of the spool is left (docs/meta.md "Chaos test"). The long form, with more jobs and
minutes and three seeds, is the script itself."""

import importlib.util
import json
import signal
import subprocess
import sys

import pytest

from conftest import GRIDNODE_BIN, REPO, scaled

SCRIPT = REPO / "scripts" / "chaos.py"


def load_chaos():
    spec = importlib.util.spec_from_file_location("chaos", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_a_double_run_is_told_from_a_rerun(tmp_path):
    """The marker count the chaos test relies on: a run killed midway, or a parallel run
    one of whose ranks was lost, then run again, is one complete run; two runs that both
    wrote every rank's done line are two."""
    chaos = load_chaos()
    p = tmp_path / "m"
    p.write_text("start 3.0.0 7\nstart 3.0.1 7\ndone 3.0.0 7\n"  # rank 1 of run 7 lost
                 "start 3.0.0 9\nstart 3.0.1 9\ndone 3.0.1 9\ndone 3.0.0 9\n"
                 "garbage line\n")
    marks = chaos.read_markers(p)
    assert chaos.complete_runs(marks, 0, 2)[0] == 1
    assert chaos.complete_runs(marks, 0, 1)[0] == 2  # one rank: 7 and 9 both completed
    p.write_text("start 3.1.0 4\ndone 3.1.0 4\nstart 3.1.0 4\ndone 3.1.0 4\n")
    assert chaos.complete_runs(chaos.read_markers(p), 1, 1)[0] == 2  # same id, 2 sites
    assert chaos.complete_runs(chaos.read_markers(p), 0, 1)[0] == 0
    assert chaos.read_markers(tmp_path / "none") == {}


def test_script_help_and_bad_usage():
    r = subprocess.run([sys.executable, str(SCRIPT), "--help"], capture_output=True,
                       text=True, timeout=30)
    assert r.returncode == 0 and "--seed" in r.stdout and "--minutes" in r.stdout, r
    r = subprocess.run([sys.executable, str(SCRIPT), "--jobs", "0"], capture_output=True,
                       text=True, timeout=30)
    assert r.returncode == 2 and "--jobs 0 is out of range" in r.stderr, r


@pytest.mark.slow
def test_kill9_at_every_level_keeps_every_job_exactly_once(gridnode_bin):
    """20 keyed jobs (parallel jobs of 1-2 processes, task arrays of 2-4 elements) while
    about 20 kill -9s hit the spool, both batch roles, both cluster managers and the
    clients over 75 s (seed 10 hits every level); then every check of the script."""
    env = dict(__import__("os").environ, GRIDNODE_BIN=gridnode_bin)
    args = [sys.executable, str(SCRIPT), "--seed", "10", "--jobs", "20", "--minutes", "1.25",
            "--sites", "2", "--clients", "2", "--drain", str(int(scaled(150))), "--json"]
    p = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         env=env)
    try:
        out, err = p.communicate(timeout=scaled(420))
    except subprocess.TimeoutExpired:
        p.send_signal(signal.SIGTERM)  # the script stops every role it started
        out, err = p.communicate(timeout=60)
        pytest.fail("chaos.py did not finish in time:\n%s\n%s" % (out, err[-3000:]))
    assert p.returncode == 0, "chaos.py found violations:\n%s\n%s" % (out, err[-3000:])
    fig = json.loads(out.splitlines()[0])
    assert fig["violations"] == 0 and fig["acked"] == 20, fig
    assert all(fig["kills"][lv] > 0 for lv in ("meta", "batch", "cluster", "client")), fig
    assert fig["outputs_read"] >= 20 and fig["complete_runs"] >= 20, fig
