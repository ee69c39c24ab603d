"""System tests of the batch role's cost per pending job (issue 28): many one-element
jobs each cost the role a small constant (a one-element job's record used to allocate a
page of 256 element slots, 21 KB a job; docs/batch.md "How a task array is held"), and
stats.json lists at most 5,000 unfinished jobs while its summary counts them all
(listing every one made a rebuild take longer than stats.interval_s at 10^5 jobs).

Memory is VmRSS of /proc/PID/status read once every submission is acknowledged; the
bound (4 KiB a job) is a fifth of what a job cost before.
Every wait is bounded with scaled(); nothing here is timed."""

import json

import pytest

from conftest import ASAN, TYPES, scaled, wait_until
from test_bounded import settled_rss

T = dict(TYPES, PSUBMIT=39)
JOBS = 5_100          # more than stats.json lists (5,000)
PER_JOB_MAX_KB = 4    # VmRSS growth allowed per pending one-element job


def submit_pipelined(b, n):
    """n SUBMITs of a one-element job, 256 in flight; returns their job ids."""
    return b.client().submit_pipelined(n, {"argv": ["true"], "ntasks": 1, "name": "scale"})


def role(cluster_factory, batch_factory, stats_s):
    """A batch role over a cluster manager without hosts: every job stays pending."""
    cl = cluster_factory({"store.sync": "none"}, name="cl")
    b = batch_factory([cl], name="b", sets={"stats.interval_s": stats_s})
    b.client().ok(T["JOB_LIST"])
    return b


@pytest.mark.skipif(ASAN, reason="ASan's redzones and quarantine multiply every allocation")
def test_many_pending_jobs_cost_little(cluster_factory, batch_factory):
    # no statistics rebuild while measuring (its JSON tree is memory of its own)
    b = role(cluster_factory, batch_factory, 86400)
    before = settled_rss(b.proc.pid)
    ids = submit_pipelined(b, JOBS)
    assert len(set(ids)) == JOBS
    grew = settled_rss(b.proc.pid) - before
    print("batch role: +%d kB VmRSS for %d pending jobs (%.0f bytes a job)"
          % (grew, JOBS, grew * 1024.0 / JOBS))
    assert grew < PER_JOB_MAX_KB * JOBS, "%d kB for %d jobs" % (grew, JOBS)
    r = b.client().ok(T["JOB_GET"], job=max(ids))
    assert r["job"]["state"] == "queued", r


def test_stats_lists_a_bounded_number_of_jobs(cluster_factory, batch_factory):
    b = role(cluster_factory, batch_factory, 1)
    ids = submit_pipelined(b, JOBS)
    path = b.state_dir / "stats.json"

    def counted():
        try:
            st = json.loads(path.read_text())
        except (OSError, ValueError):
            return None   # not written yet, or being replaced
        s = st["summary"]
        return st if s["eligible"] + s["blocked"] + s["running"] == JOBS else None
    wait_until(counted, scaled(60), msg="stats.json counting every job")
    listed = [j["job"] for j in counted()["jobs"]]
    assert len(listed) == 5000, len(listed)
    assert listed == sorted(ids)[:5000]   # ascending ids, the oldest ones
