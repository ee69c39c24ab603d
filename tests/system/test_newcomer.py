"""The newcomer's transcript (docs/newcomer.md, issue 27 evidence 5) is what the commands
print today: scripts/newcomer.py starts a real grid (spool, batch role, cluster manager,
client) on free ports, runs a three-step workflow with dependencies at the spool,
reads its outputs and accounting, stops the grid, and writes the normalized
transcript; it must equal the file in docs/, so the documentation cannot drift.
"""

import difflib
import os
import signal
import subprocess
import sys

from conftest import REPO, scaled

SCRIPT = REPO / "scripts" / "newcomer.py"
DOC = REPO / "docs" / "newcomer.md"


def test_newcomer_transcript_matches_docs(gridnode_bin, workdir):
    out, d = workdir / "newcomer.md", workdir / "grid"
    env = dict(os.environ, GRIDNODE_BIN=gridnode_bin)
    try:
        r = subprocess.run(["/usr/bin/python3", str(SCRIPT), "--out", str(out), "--dir", str(d)],
                           capture_output=True, text=True, timeout=scaled(180), env=env,
                           stdin=subprocess.DEVNULL)
        assert r.returncode == 0, "scripts/newcomer.py failed:\n" + r.stdout + r.stderr
    finally:  # the script stops its grid; after a timeout, whatever is left of it
        for f in (d / "pids").glob("*.pid") if (d / "pids").is_dir() else ():
            try:
                pid = int(f.read_text())
                with open("/proc/%d/cmdline" % pid, "rb") as c:
                    if b"gridnode" in c.read():
                        os.kill(pid, signal.SIGKILL)
            except (OSError, ValueError):
                pass
    got, want = out.read_text(), DOC.read_text()
    if got != want:
        diff = "".join(difflib.unified_diff(want.splitlines(True), got.splitlines(True),
                                            "docs/newcomer.md", "the transcript of this run"))
        sys.stderr.write(diff)
        raise AssertionError("docs/newcomer.md differs from what the commands print now: "
                             "run scripts/newcomer.py --write to refresh docs/newcomer.md "
                             "(and read the difference: it may be a regression)\n" + diff)
