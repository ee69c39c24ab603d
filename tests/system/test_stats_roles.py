"""System tests of the statistics of the batch and meta roles (issue 15 item 6;
docs/batch.md and docs/meta.md "Statistics"): stats.http on a loopback port, /metrics
parsed strictly (HELP then TYPE per family, numeric values, counters that grow after
work is done, histogram buckets cumulative), /stats.json, the page's frame shared with
the cluster (daemon/statspage.c), bad settings refused by --check-config, and both pages
drawn by headless Chromium (skipped without it). Waits are bounded and generous."""

import json
import re
import shutil
import subprocess

from conftest import TYPES, scaled, wait_until
from test_stats_http import browse, get, png_pixels_vary, url_of

T = dict(TYPES, NODE_LIST=37)
SD = {"store.sync": "none", "queues.sync_ms": 100, "tasks.heartbeat_s": 1,
      "tasks.idle_wait_s": 1}
CLIENT = {"rpc.timeout_ms": 2000, "rpc.backoff_min_s": 0.2, "rpc.backoff_max_s": 1,
          "client.slots": 2}
STATS = {"stats.http": "127.0.0.1:0", "stats.interval_s": 1}

SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{([a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\.)*"'
                    r'(?:,[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\.)*")*)?\})? '
                    r'(-?[0-9.eE+-]+|NaN|[+-]Inf)$')


def parse_metrics(text, prefix):
    """The Prometheus text format, strictly: HELP then TYPE once per family before its
    contiguous samples, every name under prefix, counters named _total and >= 0,
    histogram samples _bucket/_sum/_count with cumulative buckets ending at +Inf.
    Returns ({(name, labels): value}, {family: type})."""
    assert text.endswith("\n")
    helps, types, out, done = {}, {}, {}, set()
    cur = None
    for n, line in enumerate(text.split("\n")[:-1], 1):
        if line.startswith("# HELP "):
            name, h = line[7:].split(" ", 1)
            assert name.startswith(prefix), (n, name)
            assert name not in helps and h.strip(), (n, line)
            helps[name] = h
            if cur:
                done.add(cur)
            cur = name
            continue
        if line.startswith("# TYPE "):
            name, typ = line[7:].split(" ")
            assert name == cur and name not in types, (n, line)
            assert typ in ("counter", "gauge", "histogram"), (n, typ)
            types[name] = typ
            continue
        m = SAMPLE.match(line)
        assert m, "line %d is not a sample: %r" % (n, line)
        name, v = m.group(1), float(m.group(4))
        fam = name
        if cur and types.get(cur) == "histogram":
            assert name in (cur + "_bucket", cur + "_sum", cur + "_count"), (n, line)
            fam = cur
        assert fam == cur and fam in types and fam not in done, (n, line)
        if types[fam] == "counter":
            assert name.endswith("_total") and v >= 0, line
        key = (name, m.group(3) or "")
        assert key not in out, (n, key)
        out[key] = v
    for fam, typ in types.items():
        if typ == "histogram":
            b = [(k[1], v) for k, v in out.items() if k[0] == fam + "_bucket"]
            assert b and b[-1][0] == 'le="+Inf"', b
            vals = [v for _, v in b]
            assert vals == sorted(vals), b
            assert vals[-1] == out[(fam + "_count", "")], b
    return out, types


def metrics(role, prefix):
    st, hdr, body = get(url_of(role) + "metrics")
    assert st == 200 and hdr["Content-Type"].startswith("text/plain; version=0.0.4"), st
    return parse_metrics(body.decode(), prefix)


def stats_json(role):
    st, hdr, body = get(url_of(role) + "stats.json")
    assert st == 200 and hdr["Content-Type"] == "application/json"
    return json.loads(body)


def site(cluster_factory, client_factory, batch_factory, name="a", bsets=None):
    cl = cluster_factory(SD, name="cl_" + name)
    client_factory(cl, 1, sets=dict(CLIENT), prefix=name + "n")
    b = batch_factory([cl], name="b_" + name, sets=dict(bsets or {}))
    wait_until(lambda: sum(1 for n in b.rpc(T["NODE_LIST"])["nodes"] if n["active"]) == 1,
               scaled(20), msg="site %s sees its host" % name)
    return b


def submit(gridnode_bin, ep, *args):
    r = subprocess.run([gridnode_bin, "submit", "-e", ep] + [str(a) for a in args],
                       capture_output=True, text=True, timeout=scaled(20))
    assert r.returncode == 0, r.stderr
    return int(re.search(r"job (\d+)", r.stdout).group(1))


def test_batch_metrics_json_and_page(cluster_factory, client_factory, batch_factory,
                                     gridnode_bin):
    b = site(cluster_factory, client_factory, batch_factory, bsets=STATS)
    P = "gridnode_batch_"
    wait_until(lambda: any(k[0] == P + "cluster_cores_total" and v > 0
                           for k, v in metrics(b, P)[0].items()),
               scaled(20), msg="cores in the metrics")
    m0, types = metrics(b, P)
    for fam in ("queue_jobs", "jobs_submitted_total", "jobs_started_total", "backfill_total",
                "cycle_duration_seconds", "cluster_cores_free", "cluster_cores_total",
                "cluster_up", "stats_generated_seconds"):
        assert P + fam in types, fam
    assert types[P + "jobs_started_total"] == "counter"
    assert types[P + "cycle_duration_seconds"] == "gauge"
    cores = [v for k, v in m0.items() if k[0] == P + "cluster_cores_total"]
    assert cores == [2.0], m0
    # work: a task array of 3 runs; a held job stays blocked
    done = submit(gridnode_bin, b.endpoint, "-n", 3, "--", "/bin/true")
    held = submit(gridnode_bin, b.endpoint, "-n", 1, "--hold", "--name", "wait<me>", "--",
                  "/bin/true")

    def finished():
        m, _ = metrics(b, P)
        return m[(P + "jobs_completed_total", "")] - m0[(P + "jobs_completed_total", "")] >= 3
    wait_until(finished, scaled(60), msg="3 elements completed in the metrics")
    m1, _ = metrics(b, P)
    assert m1[(P + "jobs_submitted_total", "")] - m0[(P + "jobs_submitted_total", "")] == 2
    assert m1[(P + "jobs_started_total", "")] - m0[(P + "jobs_started_total", "")] >= 3
    assert m1[(P + "cycles_total", "")] > m0[(P + "cycles_total", "")]
    assert m1[(P + "stats_generated_seconds", "")] >= m0[(P + "stats_generated_seconds", "")]
    wait_until(lambda: metrics(b, P)[0][(P + "queue_jobs", 'state="blocked"')] == 1,
               scaled(20), msg="the held job counted blocked")
    assert [v for k, v in m1.items() if k[0] == P + "cluster_up"] == [1.0]
    st = stats_json(b)
    assert st["role"] == "batch" and st["interval_s"] == 1 and st["time_ms"] > 0
    jobs = {j["job"]: j for j in st["jobs"]}
    assert jobs[done]["queue_state"] == "ended" and jobs[held]["queue_state"] == "blocked"
    assert jobs[held]["reason"] and "priority" in jobs[held]
    assert st["summary"]["blocked"] == 1 and st["summary"]["ended"] >= 3
    c = st["clusters"][0]
    assert c["state"] == "up" and c["cores"] == 2 and c["hosts_up"] == 1
    # the page: shared frame, escaped names, showq's sections
    code, hdr, page = get(url_of(b))
    page = page.decode()
    assert code == 200 and "<title>gridnode batch</title>" in page
    assert 'data-who="the batch role"' in page and "wait&lt;me&gt;" in page
    for h in ("Active jobs", "Eligible jobs", "Blocked jobs: 1", "Reservations", "Clusters"):
        assert h in page, h
    # the same documents in the state directory
    assert json.loads((b.state_dir / "stats.json").read_text())["role"] == "batch"
    assert "gridnode batch" in (b.state_dir / "stats.html").read_text()


def test_meta_metrics_json_and_page(cluster_factory, client_factory, batch_factory,
                                    meta_factory, gridnode_bin):
    a = site(cluster_factory, client_factory, batch_factory)
    m = meta_factory({"a": a}, sets=STATS)
    P = "gridnode_meta_"
    wait_until(lambda: metrics(m, P)[0][(P + "site_up", 'site="a"')] == 1, scaled(20),
               msg="site a up in the metrics")
    m0, types = metrics(m, P)
    assert types[P + "placements_total"] == "counter"
    assert types[P + "placement_latency_seconds"] == "histogram"
    assert types[P + "spool_jobs"] == "gauge" and types[P + "site_up"] == "gauge"
    assert m0[(P + "placements_total", 'site="a"')] == 0
    assert m0[(P + "site_cores_free", 'site="a"')] == 2
    jid = submit(gridnode_bin, m.endpoint, "--name", "x&y", "--", "/bin/true")

    def done():
        return metrics(m, P)[0][(P + "spool_jobs", 'state="done"')] == 1
    wait_until(done, scaled(60), msg="job done in the metrics")
    m1, _ = metrics(m, P)
    assert m1[(P + "placements_total", 'site="a"')] == 1
    assert m1[(P + "placement_latency_seconds_count", "")] == 1
    assert m1[(P + "placement_latency_seconds_sum", "")] >= 0
    assert m1[(P + "site_last_answer_seconds", 'site="a"')] > 0
    st = stats_json(m)
    assert st["role"] == "meta" and st["policy"]
    s = st["sites"][0]
    assert s["name"] == "a" and s["state"] == "up" and s["placements"] == 1
    assert s["last_answer_ms"] > 0 and s["cores"] == 2
    j = [x for x in st["jobs"] if x["job"] == jid][0]
    assert j["state"] == "done" and j["site"] == "a" and j["site_job"] > 0
    assert st["summary"]["jobs"]["done"] == 1 and st["summary"]["placements"] == 1
    code, _, page = get(url_of(m))
    page = page.decode()
    assert code == 200 and "<title>gridnode meta</title>" in page
    assert "Sites" in page and "x&amp;y" in page and "1 finished" in page


def test_bad_stats_settings_refused(gridnode_bin, workdir):
    for role, extra in (("batch", ["--set", "batch.clusters=tcp://127.0.0.1:1"]),
                        ("meta", ["--set", "meta.sites=a=tcp://127.0.0.1:1"])):
        for bad, word in (("stats.http=nowhere:port", "stats.http"),
                          ("stats.interval_s=0", "interval_s")):
            r = subprocess.run([gridnode_bin, role, "--check-config", "--set", bad] + extra,
                               capture_output=True, text=True, timeout=scaled(20))
            assert r.returncode in (1, 2) and word in r.stderr, (role, bad, r.stdout, r.stderr)
        r = subprocess.run([gridnode_bin, role, "--check-config", "--set",
                            "stats.http=127.0.0.1:0"] + extra, capture_output=True, text=True,
                           timeout=scaled(20))
        assert r.returncode == 0 and "127.0.0.1:0" in r.stdout, (role, r.stderr)


def test_chromium_batch_and_meta_pages(cluster_factory, client_factory, batch_factory,
                                       meta_factory, gridnode_bin, workdir):
    shutil.which("chromium") or browse(workdir, "about:blank")  # skips without chromium
    a = site(cluster_factory, client_factory, batch_factory, bsets=STATS)
    m = meta_factory({"a": a}, sets=STATS)
    wait_until(lambda: stats_json(m)["sites"][0]["state"] == "up", scaled(20), msg="site up")
    submit(gridnode_bin, a.endpoint, "--hold", "--name", "held-one", "--", "/bin/true")
    wait_until(lambda: stats_json(a)["summary"]["blocked"] == 1, scaled(20), msg="held job")
    for role, words in ((a, ("gridnode batch", "Blocked jobs: 1", "held-one", "Clusters")),
                        (m, ("gridnode meta", "Sites", "Spool"))):
        shot = workdir / ("%s.png" % role.name)
        browse(workdir, url_of(role), "--screenshot=%s" % shot)
        w, h, distinct = png_pixels_vary(shot)
        assert (w, h) == (1280, 900) and distinct > 50, (role.name, w, h, distinct)
        shutil.copy(shot, workdir.parent / ("stats-%s.png" % role.name))
        dom = browse(workdir, url_of(role), "--dump-dom")
        assert "STALE" not in dom and " ago)" in dom, dom[:1000]
        for word in words:
            assert word in dom, (role.name, word)
