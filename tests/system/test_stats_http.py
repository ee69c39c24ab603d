"""System tests of the statistics page and its HTTP server (stats.http, docs/stats.md):
/, /stats.json and /metrics (Prometheus text format, parsed strictly), finished jobs
collapsed, the stale mark once the role is killed, bad addresses refused, and the page
as headless Chromium draws it (screenshot and DOM)."""

import json
import os
import re
import shutil
import signal
import socket
import struct
import subprocess
import time
import urllib.error
import urllib.request
import zlib

import pytest

from conftest import scaled, wait_until

FAST = {"store.sync": "none", "stats.interval_s": 1, "stats.http": "127.0.0.1:0",
        "tasks.heartbeat_s": 1, "tasks.idle_wait_s": 1}
CLIENT = {"rpc.timeout_ms": 1000, "rpc.backoff_min_s": 0.2, "rpc.backoff_max_s": 1,
          "client.slots": 2}


def run_cli(gridnode_bin, *args, timeout=60):
    return subprocess.run([gridnode_bin] + [str(a) for a in args], capture_output=True,
                          text=True, timeout=scaled(timeout), stdin=subprocess.DEVNULL,
                          env=dict(os.environ))


def url_of(cl):
    p = cl.state_dir / "stats.url"
    wait_until(p.exists, scaled(10), msg="stats.url written")
    return p.read_text().strip()


def get(url, method="GET"):
    """(status, headers, body) of one request; errors are answers too."""
    req = urllib.request.Request(url, method=method)
    try:
        with urllib.request.urlopen(req, timeout=scaled(10)) as r:
            return r.status, r.headers, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.headers, e.read()


def submit(gridnode_bin, cl, *args):
    p = run_cli(gridnode_bin, "submit", "-e", cl.endpoint, *args)
    assert p.returncode == 0, p.stderr
    return int(re.search(r"job (\d+)", p.stdout).group(1))


SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{([a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\.)*"'
                    r'(?:,[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\.)*")*)?\})? '
                    r'(-?[0-9.eE+-]+|NaN|[+-]Inf)$')


def parse_metrics(text):
    """Parses the Prometheus text exposition format strictly: every line is a HELP, a
    TYPE or a sample; each family has HELP then TYPE before its samples, once, and
    samples of a family are contiguous. Returns {(name, labels-string): value}."""
    assert text.endswith("\n"), "the exposition must end with a newline"
    helps, types, out, seen_done = {}, {}, {}, set()
    current = None
    for n, line in enumerate(text.split("\n")[:-1], 1):
        if line.startswith("# HELP "):
            name, help_text = line[7:].split(" ", 1)
            assert name not in helps, "line %d: second HELP for %s" % (n, name)
            assert help_text.strip(), "line %d: empty HELP" % n
            helps[name] = help_text
            if current:
                seen_done.add(current)
            current = name
            continue
        if line.startswith("# TYPE "):
            name, typ = line[7:].split(" ")
            assert name == current and name not in types, "line %d: TYPE not after HELP" % n
            assert typ in ("counter", "gauge"), "line %d: type %s" % (n, typ)
            types[name] = typ
            continue
        m = SAMPLE.match(line)
        assert m, "line %d is not a sample: %r" % (n, line)
        name = m.group(1)
        assert name == current and name in types, "line %d: sample of %s outside its family" % (
            n, name)
        assert name not in seen_done
        if types[name] == "counter":
            assert name.endswith("_total"), name
        v = float(m.group(4))
        if types[name] == "counter":
            assert v >= 0, line
        key = (name, m.group(3) or "")
        assert key not in out, "line %d: duplicate series %r" % (n, key)
        out[key] = v
    return out, types


def chromium():
    for name in ("chromium", "chromium-browser"):
        path = shutil.which(name)
        if path:
            return path
    pytest.skip("headless Chromium is not installed (Debian package 'chromium'; "
                "scripts/deps.sh installs it)")


def browse(workdir, target, *flags):
    """Runs headless Chromium on target with flags; returns its stdout."""
    profile = workdir / "chromium-profile"
    args = [chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
            "--disable-dev-shm-usage", "--hide-scrollbars", "--user-data-dir=%s" % profile,
            "--window-size=1280,900"] + list(flags) + [target]
    # its own process group, so its renderer and GPU processes go with it on a timeout
    p = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        out, err = p.communicate(timeout=scaled(60))
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        p.communicate()
        raise AssertionError("chromium did not finish in time on %s" % target)
    finally:
        try:
            os.killpg(p.pid, signal.SIGKILL)  # helpers left behind, if any
        except ProcessLookupError:
            pass
    assert p.returncode == 0, "chromium failed: %s" % err[-2000:]
    return re.sub(r"<script>.*?</script>", "", out, flags=re.S)  # the text, not the code


def png_pixels_vary(path):
    """(width, height, distinct byte values of the decoded rows): a blank page has a
    single colour, so its filtered rows hold only a handful of byte values."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat, w, h = 8, b"", 0, 0
    while pos < len(data):
        ln, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + ln]
        if kind == b"IHDR":
            w, h = struct.unpack(">II", body[:8])
        elif kind == b"IDAT":
            idat += body
        pos += 12 + ln
    raw = zlib.decompress(idat)
    return w, h, len(set(raw))


@pytest.fixture
def busy_cluster(cluster_factory, client_factory, gridnode_bin):
    """A cluster serving stats.http with one node, a finished job, a running one and a
    parallel job waiting for hosts."""
    cl = cluster_factory(dict(FAST))
    client_factory(cl, 1, prefix="statnode", sets=dict(CLIENT))
    done = submit(gridnode_bin, cl, "-n", 3, "--name", "quick<b>", "--", "/bin/true")
    run = submit(gridnode_bin, cl, "-n", 1, "--name", "sleeper", "--", "/bin/sleep", 60)
    par = submit(gridnode_bin, cl, "-p", 2, "--name", "mpi-wait", "--wait-resources", "--",
                 "/bin/true")

    def ready():
        p = cl.state_dir / "stats.json"
        if not p.exists():
            return False
        st = json.loads(p.read_text())
        jobs = {j["job"]: j for j in st["jobs"]}
        return (done in jobs and jobs[done]["state"] == "done" and run in jobs
                and jobs[run]["state"] == "running" and st["active_nodes"] == 1
                and st.get("parallel_jobs"))
    wait_until(ready, scaled(30), msg="jobs done / running in stats.json")
    return cl, done, run, par


def test_http_serves_page_json_and_metrics(busy_cluster):
    cl, done, run, par = busy_cluster
    base = url_of(cl)
    assert base.startswith("http://127.0.0.1:"), base
    # the page: generated time, tables, finished job under <details>, names escaped
    status, hdr, body = get(base)
    assert status == 200 and hdr["Content-Type"].startswith("text/html"), (status, hdr)
    page = body.decode()
    assert "data-generated=" in page and "regenerated every 1 s" in page
    assert 'id="stale"' in page and "Parallel jobs" in page and "mpi-wait" in page
    assert "quick&lt;b&gt;" in page and "quick<b>" not in page
    assert re.search(r"<details><summary>1 finished", page), page[:3000]
    assert page.index("sleeper") < page.index("<details>") < page.index("quick&lt;b&gt;")
    # stats.json: the same document as the file
    status, hdr, body = get(base + "stats.json")
    assert status == 200 and hdr["Content-Type"] == "application/json"
    st = json.loads(body)
    assert st["interval_s"] == 1 and {j["job"] for j in st["jobs"]} >= {done, run}
    assert any(p["job"] == par for p in st["parallel_jobs"])
    # metrics, parsed strictly
    status, hdr, body = get(base + "metrics")
    assert status == 200 and hdr["Content-Type"].startswith("text/plain; version=0.0.4")
    m, types = parse_metrics(body.decode())
    p = "gridnode_cluster_"
    assert m[(p + "jobs", 'state="done"')] >= 1 and m[(p + "jobs", 'state="running"')] >= 1
    assert m[(p + "tasks", 'state="done"')] >= 3 and m[(p + "tasks", 'state="running"')] >= 1
    assert m[(p + "parallel_jobs", 'state="waiting"')] + m[(p + "parallel_jobs",
                                                            'state="queued"')] >= 1
    assert m[(p + "nodes", 'state="active"')] == 1
    assert m[(p + "results_accepted_total", "")] >= 3
    assert m[(p + "tasks_issued_total", "")] >= 4
    assert types[p + "results_accepted_total"] == "counter" and types[p + "nodes"] == "gauge"
    node = [k for k in m if k[0] == p + "node_results_total"]
    assert len(node) == 1 and 'node="statnode1"' in node[0][1] and m[node[0]] >= 3
    assert any(k[0] == p + "queue_jobs" for k in m)
    # anything else: a clear 404 / 405, and the server keeps serving
    status, _, body = get(base + "nope")
    assert status == 404 and b"/metrics" in body
    status, hdr, _ = get(base + "metrics", method="POST")
    assert status == 405 and "GET" in hdr["Allow"]
    assert get(base + "metrics")[0] == 200


def test_http_survives_bad_clients(busy_cluster, gridnode_bin):
    """Idle, half-sent and garbage connections neither stall the role nor the server."""
    cl, _, _, _ = busy_cluster
    host, port = url_of(cl)[len("http://"):].rstrip("/").split(":")
    idle = [socket.create_connection((host, int(port)), timeout=5) for _ in range(10)]
    half = socket.create_connection((host, int(port)), timeout=5)
    half.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")  # never finished
    junk = socket.create_connection((host, int(port)), timeout=5)
    junk.sendall(b"\x00\xff" * 5000 + b"\r\n\r\n")
    try:
        assert get(url_of(cl) + "metrics")[0] == 200
        p = run_cli(gridnode_bin, "jobs", "-e", cl.endpoint)
        assert p.returncode == 0, p.stderr
    finally:
        for s in idle + [half, junk]:
            s.close()
    assert cl.alive()


def test_finished_jobs_collapsed(cluster_factory, gridnode_bin):
    cl = cluster_factory(dict(FAST))
    ids = [submit(gridnode_bin, cl, "--name", "j%d" % i, "--", "/bin/true") for i in range(120)]
    for i in ids:
        p = run_cli(gridnode_bin, "cancel", "-e", cl.endpoint, i)
        assert p.returncode == 0, p.stderr
    live = submit(gridnode_bin, cl, "--name", "still-queued", "--", "/bin/true")

    def page():
        p = cl.state_dir / "stats.html"
        return p.read_text() if p.exists() else ""
    # (a page written between the cancels and the last submission shows the 120 without
    # it: wait for a page that has both)
    wait_until(lambda: "120 finished (the latest 100 shown" in page() and "still-queued" in page(),
               scaled(20), msg="finished jobs collapsed in stats.html")
    html = page()
    head, details = html.split("<details>", 1)
    assert "still-queued" in head and "j119" not in head
    details = details.split("</details>", 1)[0]
    assert details.count("<tr>") == 101  # header + the latest 100
    assert "j119" in details and "j20<" in details and "j19<" not in details
    assert live and len(html) < 64 * 1024


def test_bad_address_refused(cluster_factory, gridnode_bin, workdir):
    p = run_cli(gridnode_bin, "cluster", "--set", "stats.http=localhost:http", "--check-config")
    assert p.returncode != 0 and "stats.http" in p.stderr and "HOST:PORT" in p.stderr, p.stderr
    busy = socket.socket()
    busy.bind(("127.0.0.1", 0))
    busy.listen(1)
    try:
        cl = cluster_factory(dict(FAST, **{"stats.http": "127.0.0.1:%d" % busy.getsockname()[1]}),
                             start=False)
        with pytest.raises(AssertionError) as e:
            cl.start(timeout=scaled(10))
        assert "cannot listen on" in str(e.value) and "Address already in use" in str(e.value)
    finally:
        busy.close()


def test_chromium_page_and_stale_mark(busy_cluster, workdir):
    cl, done, run, par = busy_cluster
    base = url_of(cl)
    # live: the served page, drawn by Chromium
    shot = workdir / "stats.png"
    browse(workdir, base, "--screenshot=%s" % shot)
    w, h, distinct = png_pixels_vary(shot)
    assert (w, h) == (1280, 900) and distinct > 50, (w, h, distinct)
    shutil.copy(shot, workdir.parent / "stats-live.png")  # kept for a person to look at
    dom = browse(workdir, base, "--dump-dom")
    assert "gridnode cluster" in dom and "sleeper" in dom and "mpi-wait" in dom
    assert "statnode1" in dom and "STALE" not in dom and " ago)" in dom
    assert '<div id="stale" class="stale" hidden=""></div>' in dom
    # the role is killed: the file copy (and a browser left open) says STALE
    copy = workdir / "stale.html"
    cl.kill(signal.SIGKILL)
    shutil.copy(cl.state_dir / "stats.html", copy)
    assert '<div id="stale" class="stale" hidden></div>' in copy.read_text()  # from the age
    # stale once older than 2 x stats.interval_s + 5 s by the browser's clock
    gen = int(re.search(r'data-generated="(\d+)"', copy.read_text()).group(1))
    time.sleep(max(0.0, (gen + 7500) / 1000.0 - time.time()))
    dom = browse(workdir, copy.as_uri(), "--dump-dom")
    assert re.search(r'<div id="stale" class="stale">STALE: these statistics are \d+ s old',
                     dom), dom[:2000]
    assert "is stopped or hung" in dom
    stale = workdir / "stale.png"
    browse(workdir, copy.as_uri(), "--screenshot=%s" % stale)
    assert png_pixels_vary(stale)[2] > 50
    shutil.copy(stale, workdir.parent / "stats-stale.png")


def test_the_page_lists_a_bounded_number_of_jobs(cluster_factory):
    # issue 28: at 10^6 pending jobs the page of every job was 156 MB of JSON rewritten
    # every interval. It lists the oldest 5,000 unfinished jobs and the latest 1,000
    # finished ones; jobs_in_memory and the metrics count them all.
    cl = cluster_factory(FAST)
    c = cl.client()
    ids = [c.ok("SUBMIT", "SUBMITTED", argv=["true"], ntasks=1)["job"] for _ in range(6200)]
    for j in ids[:1100]:
        c.ok("CANCEL", job=j)

    def page():
        st = json.loads((cl.state_dir / "stats.json").read_text())
        return st if st.get("jobs_in_memory") == 6200 and sum(
            j["state"] == "cancelled" for j in st["jobs"]) == 1000 else None

    st = wait_until(page, scaled(30), msg="stats.json with every job counted")
    listed = [j["job"] for j in st["jobs"]]
    assert len(listed) == 6000, len(listed)
    assert set(listed) == set(ids[100:6100]), (min(listed), max(listed))
    m, _ = parse_metrics(get(url_of(cl) + "metrics")[2].decode())
    assert m[("gridnode_cluster_jobs", 'state="queued"')] == 5100, m
