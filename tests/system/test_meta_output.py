"""`gridnode job -e SPOOL ID --output` in one hop (issue 27): the spool keeps no task
output, its sites do; it relays the user's JOB_GET `output` to the job's site and answers
with the site's JOB under `at_site`. A batch site's parallel job and array name the
cluster job that keeps the output (one command to run there, printed); a job not placed
yet, or held, says so; a site that stops answering gives `site_error`, and the spool
answers anyway. (A Slurm site's output itself: test_meta_slurm.py.)"""

import os
import signal
import subprocess

from conftest import scaled
from test_meta_live import T, mjob, site, wait_gstate


def job_cli(gridnode_bin, *args):
    return subprocess.run([gridnode_bin, "job"] + [str(a) for a in args], capture_output=True,
                          text=True, timeout=scaled(30), stdin=subprocess.DEVNULL)


def test_output_relayed_from_a_batch_site(cluster_factory, client_factory, batch_factory,
                                          meta_factory, gridnode_bin):
    b = site(cluster_factory, client_factory, batch_factory, "gn", slots=2)
    m = meta_factory({"gn": b})
    pj = m.rpc(T["PSUBMIT"], argv=["echo rank-says-hi"], shell=True, procs=1,
               limit_s=60)["job"]
    aj = m.rpc(T["SUBMIT"], argv=["echo task-{i}"], shell=True, ntasks=2, limit_s=60)["job"]
    held = m.rpc(T["PSUBMIT"], argv=["true"], procs=1, limit_s=60, hold=True)["job"]
    for x in (pj, aj):
        assert wait_gstate(m, x, ("done", "failed"), timeout=60)["gstate"] == "done"
    # the parallel job: the site's JOB relayed, naming the cluster job with the output
    g = m.client().ok("JOB_GET", "JOB", job=pj, tasks=True, output=True)
    at = g["at_site"]
    assert at["job"]["job"] == mjob(m, pj)["site_job"] and g["job"]["gstate"] == "done", g
    cjob, ep = at["output_at"]["cjob"], at["output_at"]["endpoint"]
    r = job_cli(gridnode_bin, pj, "-e", m.endpoint, "--output")
    assert r.returncode == 1, (r.stdout, r.stderr)
    want = "run gridnode job %d --output -e %s" % (cjob, ep)
    assert want in r.stderr and "output, as site job" in r.stdout, (r.stdout, r.stderr)
    r = job_cli(gridnode_bin, cjob, "-e", ep, "--output")
    assert r.returncode == 0 and "rank-says-hi" in r.stdout, (r.stdout, r.stderr)
    # the array: its element rows, each naming its cluster job
    r = job_cli(gridnode_bin, aj, "-e", m.endpoint, "--output")
    assert r.returncode == 1 and "gridnode job " in r.stderr and ep in r.stderr, r.stderr
    # not placed: said at once, nothing held
    r = job_cli(gridnode_bin, held, "-e", m.endpoint, "--output")
    assert r.returncode == 1 and "not been placed on a site yet" in r.stderr, r.stderr
    # --json: the whole reply, the site's part included
    r = job_cli(gridnode_bin, pj, "-e", m.endpoint, "--output", "--json")
    assert r.returncode == 0 and '"at_site"' in r.stdout, r
    assert m.alive()


def test_silent_site_gives_site_error(cluster_factory, client_factory, batch_factory,
                                      meta_factory):
    b = site(cluster_factory, client_factory, batch_factory, "gn", slots=2)
    m = meta_factory({"gn": b}, sets={"meta.request_timeout_ms": 1000})
    pj = m.rpc(T["PSUBMIT"], argv=["true"], procs=1, limit_s=60)["job"]
    assert wait_gstate(m, pj, ("done", "failed"), timeout=60)["gstate"] == "done"
    os.kill(b.proc.pid, signal.SIGSTOP)  # the site stops answering (not gone)
    try:
        g = m.client().ok("JOB_GET", "JOB", job=pj, tasks=True, output=True)
    finally:
        os.kill(b.proc.pid, signal.SIGCONT)
    # relayed (the site was up when asked), then answered without it: silent past the
    # timeout, or marked down by its other requests first
    assert "at_site" not in g and g["job"]["job"] == pj, g
    assert "did not answer in time" in g["site_error"] or "went down" in g["site_error"], g
    assert m.alive()
