"""`make install` and the man pages generated from the --help texts (issue #15 item 7).

The man pages are made by scripts/mkman.sh from the binary under test, so a command
added to `gridnode help` without a working `--help` fails here, and so does a page
that does not render."""
import os
import shutil
import subprocess

import pytest

from conftest import GRIDNODE_BIN, REPO


def commands():
    out = subprocess.run([GRIDNODE_BIN, "help"], capture_output=True, text=True, check=True).stdout
    return sorted({l.split()[0] for l in out.splitlines() if l.startswith("  ") and l.strip()})


def test_help_lists_each_command_once():
    out = subprocess.run([GRIDNODE_BIN, "help"], capture_output=True, text=True, check=True).stdout
    names = [l.split()[0] for l in out.splitlines() if l.startswith("  ") and l.strip()]
    assert len(names) == len(set(names)), "a command is listed twice: %s" % names


def test_man_pages_from_help(tmp_path):
    out = tmp_path / "man"
    r = subprocess.run(["bash", str(REPO / "scripts" / "mkman.sh"), GRIDNODE_BIN, str(out)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    cmds = commands()
    assert len(cmds) >= 20
    assert (out / "gridnode.1").exists()
    for c in cmds:
        page = out / ("gridnode-%s.1" % c)
        assert page.exists(), "no man page for %s" % c
        text = page.read_text()
        first = subprocess.run([GRIDNODE_BIN, c, "--help"], capture_output=True,
                               text=True).stdout.splitlines()[0]
        assert first.replace("\\", "\\e") in text
        assert text.startswith(".TH GRIDNODE-%s 1" % c.upper())
    if shutil.which("man"):
        r = subprocess.run(["man", "-l", str(out / "gridnode-submit.1")], capture_output=True,
                           text=True, env=dict(os.environ, MANPAGER="cat", PAGER="cat",
                                               MANWIDTH="100"), timeout=60)
        assert r.returncode == 0, r.stderr
        assert "gridnode-submit - submit a job" in r.stdout
        assert "--tasks N" in r.stdout


@pytest.mark.skipif(os.path.realpath(GRIDNODE_BIN) != os.path.realpath(REPO / "build" / "gridnode"),
                    reason="make install installs build/gridnode; this run tests another binary")
def test_make_install_and_uninstall(tmp_path):
    dest = tmp_path / "dest"
    r = subprocess.run(["make", "-s", "-C", str(REPO), "install", "DESTDIR=%s" % dest,
                        "PREFIX=/opt/gn"], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    root = dest / "opt" / "gn"
    exe = root / "bin" / "gridnode"
    assert os.access(exe, os.X_OK)
    assert subprocess.run([str(exe), "help"], capture_output=True).returncode == 0
    man = root / "share" / "man" / "man1"
    assert {p.name for p in man.iterdir()} >= {"gridnode.1", "gridnode-submit.1", "gridnode-meta.1"}
    assert (root / "share" / "doc" / "gridnode" / "examples" / "cluster.ini").exists()
    assert (root / "share" / "doc" / "gridnode" / "wire.md").exists()
    r = subprocess.run(["make", "-s", "-C", str(REPO), "uninstall", "DESTDIR=%s" % dest,
                        "PREFIX=/opt/gn"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert [p for p in root.rglob("*") if p.is_file()] == []
