"""Issue 25: a site's local users are not starved by the spool's reservations. A batch
site with `[grid] local_wait_bound` lets a local job that has waited the bound go before
grid reservations made while it could not hold a job reservation; with the rule off the
same local job runs after the first of them. Orders only: nothing asserts on speed."""

import pytest

from conftest import scaled, wait_until
from test_meta_live import CLIENT, SD, T, mjob


def run_case(cluster_factory, client_factory, batch_factory, meta_factory, bound, name):
    cl = cluster_factory(SD, name="cl_" + name)
    client_factory(cl, 1, sets=dict(CLIENT, **{"client.slots": 2}), prefix=name + "n")
    b = batch_factory([cl], sets={"grid.local_wait_bound": bound}, name="b_" + name)
    wait_until(lambda: sum(1 for n in b.rpc(T["NODE_LIST"])["nodes"] if n["active"]) == 1,
               scaled(20), msg="site sees its host")
    m = meta_factory({name: b})
    wait_until(lambda: all(s["known"] for s in m.rpc(T["SITE_INFO"])["sites"]), scaled(20),
               msg="site known")

    def local(cmd, limit=20):  # a local user's job: both slots of the site
        return b.rpc(T["PSUBMIT"], argv=[cmd], shell=True, procs=2, limit_s=limit)["job"]

    def bjob(j):
        return b.rpc(T["JOB_GET"], job=j)["job"]

    a = local("sleep 6")  # holds the site
    wait_until(lambda: bjob(a).get("started", 0) > 0, scaled(20), msg="A runs")
    k = local("sleep 1")  # the top job: the one job reservation
    # the local job under test: no reservation while K holds it, and a walltime longer
    # than the gap K's walltime leaves before the first grid reservation
    j = local("true", limit=120)
    # the spool floods the site: each grid job reserves the whole site on its walltime
    grid = [m.rpc(T["PSUBMIT"], argv=["sleep 3"], shell=True, procs=2, limit_s=60)["job"]
            for _ in range(3)]
    wait_until(lambda: all(mjob(m, g)["gstate"] == "done" for g in grid), scaled(120),
               msg="grid jobs done")
    wait_until(lambda: bjob(j).get("started", 0) > 0 and bjob(k).get("started", 0) > 0,
               scaled(60), msg="local jobs ran")
    gstarts = sorted(mjob(m, g)["started"] for g in grid)
    return bjob(j)["started"], gstarts, [mjob(m, g)["resv"] for g in grid]


def test_a_local_job_past_the_bound_goes_before_older_grid_reservations(
        cluster_factory, client_factory, batch_factory, meta_factory):
    js, gstarts, resv = run_case(cluster_factory, client_factory, batch_factory, meta_factory,
                                 "3", "guard")
    assert all(resv), resv  # the spool placed them into site reservations
    # J had waited 3 s when K started: the grid reservations ahead of it were released,
    # and it ran before every grid job
    assert js < gstarts[0], (js, gstarts)


def test_without_the_rule_the_local_job_waits_for_grid_jobs(
        cluster_factory, client_factory, batch_factory, meta_factory):
    js, gstarts, resv = run_case(cluster_factory, client_factory, batch_factory, meta_factory,
                                 "0", "noguard")
    assert all(resv), resv
    # the grid reservations made while K held the one job reservation go first
    assert js > gstarts[0], (js, gstarts)
