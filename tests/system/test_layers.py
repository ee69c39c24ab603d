"""The layer rule (scripts/layers.py, docs/architecture.md) catches what it promises to:
an include that points up, a role using a role the hierarchy does not allow, a pure folder
including zmq or the daemon layer, and (with --objects) a pure object calling the store.
Each case is a small tree made in a temporary folder; the real tree is checked by `make
layers`, which `make test` runs."""
import os
import shutil
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "scripts", "layers.py")


def tree(tmp_path, files):
    for path, text in files.items():
        p = tmp_path / path
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return subprocess.run([sys.executable, SCRIPT], cwd=tmp_path, capture_output=True,
                          text=True, timeout=60)


GOOD = {
    "lib/text.h": "",
    "wire/wire.h": '#include "lib/text.h"\n',
    "store/store.h": "",
    "daemon/daemon.h": '#include "wire/wire.h"\n#include "store/store.h"\n',
    "roles/batch/engine/batch.h": '#include "lib/text.h"\n',
    "roles/batch/sim/sim.h": '#include "roles/batch/engine/batch.h"\n',
    "roles/batch/live/live.h": ('#include "daemon/daemon.h"\n#include <zmq.h>\n'
                                '#include "roles/batch/engine/batch.h"\n'),
    "roles/meta/sim/sim.h": '#include "roles/batch/sim/sim.h"\n',
    "cmd/main.c": '#include "roles/batch/live/live.h"\n',
}


def test_good_tree_passes(tmp_path):
    r = tree(tmp_path, GOOD)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "points down" in r.stdout


@pytest.mark.parametrize("path,text,words", [
    ("lib/text.h", '#include "wire/wire.h"\n', "lib/ may not use wire/"),
    ("wire/wire.h", '#include "daemon/daemon.h"\n', "wire/ may not use daemon/"),
    ("store/store.h", '#include "wire/wire.h"\n', "store/ may not use wire/"),
    ("daemon/daemon.h", '#include "roles/batch/live/live.h"\n', "daemon/ may not use roles/"),
    ("roles/batch/live/live.h", '#include "cmd/x.h"\n', "may not use cmd/"),
    ("roles/batch/engine/batch.h", '#include "daemon/daemon.h"\n', "is pure"),
    ("roles/batch/engine/batch.h", "#include <zmq.h>\n", "is pure"),
    ("roles/batch/sim/sim.h", "#include <lmdb.h>\n", "is pure"),
    ("roles/batch/engine/batch.h", '#include "roles/batch/live/live.h"\n', "is the policy"),
    ("roles/batch/sim/sim.h", '#include "roles/batch/live/live.h"\n', "drives the engine only"),
    ("roles/batch/live/live.h", '#include "roles/meta/sim/sim.h"\n', "role batch may not use role meta"),
])
def test_violation_is_caught(tmp_path, path, text, words):
    files = dict(GOOD)
    files["cmd/x.h"] = ""
    files[path] = files.get(path, "") + text
    r = tree(tmp_path, files)
    assert r.returncode == 1, r.stdout
    assert path in r.stdout and words in r.stdout, r.stdout


def test_pure_object_calling_the_store_is_caught(tmp_path):
    cc = shutil.which("cc")
    if not cc:
        pytest.skip("no C compiler")
    tree(tmp_path, GOOD)
    objdir = tmp_path / "obj" / "roles" / "batch" / "engine"
    objdir.mkdir(parents=True)
    src = tmp_path / "e.c"
    src.write_text("int store_put(int);\nint f(int x) { return store_put(x); }\n")
    subprocess.run([cc, "-c", "-o", str(objdir / "engine.o"), str(src)], check=True, timeout=60)
    r = subprocess.run([sys.executable, SCRIPT, "--objects", str(tmp_path / "obj")],
                       cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert r.returncode == 1, r.stdout
    assert "roles/batch/engine/engine.c calls store_put" in r.stdout
