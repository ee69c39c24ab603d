"""`gridnode job -e SPOOL ID --output` in one hop (issue 27): the spool keeps no task
output, its sites do; it relays the user's JOB_GET `output` to the job's site and answers
with the site's JOB under `at_site`. A batch site's parallel job and array name the
cluster job that keeps the output (one command to run there, printed); a job not placed
yet, or held, says so. (A Slurm site's output itself: test_meta_slurm.py.)"""

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
