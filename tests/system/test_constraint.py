"""Node features and submit --constraint (issue 27) at every level: clients declare
features (client.features, their architecture and OS), the cluster keeps them per session
and hands a constrained bag's tasks and places a constrained parallel job only on nodes
that satisfy it; the batch role's engine places only on such hosts and refuses a job none
of its hosts can satisfy; the spool sends a job only to a site that can satisfy it and
refuses one no site can. Bad syntax is INVALID naming the problem at every level, and
`gridnode submit -C` refuses it before sending. Where a task ran is read from the
directory it ran in (under the client's state directory, named after the client)."""

import os
import platform
import subprocess

from conftest import FAST_CLIENT, FAST_CLUSTER as FAST, scaled, wait_until

SD = dict(FAST, **{"queues.sync_ms": 100})


def client_sets(features):
    return dict(FAST_CLIENT, **{"client.slots": 2, "client.features": features})


def run_cli(gridnode_bin, *args, timeout=60):
    return subprocess.run([gridnode_bin] + [str(a) for a in args], capture_output=True,
                          text=True, timeout=scaled(timeout), stdin=subprocess.DEVNULL,
                          env=dict(os.environ))


def job(role, jid):
    return role.client().ok("JOB_GET", "JOB", job=jid, tasks=False, output=False)["job"]


def ended(role, jid):
    return job(role, jid)["state"] in ("done", "failed", "killed", "cancelled")


def where(d, tag):
    """The client names the tasks of TAG ran on (node1, node2, ...)."""
    out = set()
    for f in d.glob("%s.*" % tag):
        path = f.read_text().strip()
        out.update(p for p in path.split("/") if p.startswith("node"))
    return out


def marked(d, tag, n=1, parallel=False, **extra):
    """A job of n tasks (or one process) writing its directory into d/TAG.<random>."""
    f = {"argv": ["pwd > %s/%s.$$" % (d, tag)], "shell": True}
    f.update({"procs": 1} if parallel else {"ntasks": n})
    f.update(extra)
    return f


def two_nodes(cl, client_factory):
    client_factory(cl, 1, sets=client_sets("gpu, big"))
    client_factory(cl, 1, sets=client_sets("small"))

    def both():
        rows = cl.client().ok("NODE_LIST", "NODES")["nodes"]
        return sum(1 for n in rows if n["active"] and "features" in n) == 2
    wait_until(both, scaled(20), msg="both nodes joined with their features")
    return {n["node"]: n["features"] for n in cl.client().ok("NODE_LIST", "NODES")["nodes"]}


def test_cluster_bag_and_parallel(cluster_factory, client_factory, workdir, gridnode_bin):
    """Bags and parallel jobs go only to nodes whose features satisfy the constraint; a
    node's features are its client.features, its architecture and its OS; a constraint
    nobody satisfies leaves the bag queued and refuses a parallel job that does not wait;
    bad syntax is INVALID (and a usage error of the tool); the constraint and the
    features survive kill -9 of the cluster."""
    cl = cluster_factory(SD)
    feats = two_nodes(cl, client_factory)
    arch = platform.machine()
    assert feats["node1"] == ",".join(sorted({"big", "gpu", "linux", arch})), feats
    assert feats["node2"] == ",".join(sorted({"small", "linux", arch})), feats
    d = workdir / "out"
    d.mkdir()
    c = cl.client()
    g = c.ok("SUBMIT", "SUBMITTED", **marked(d, "G", 6, constraint="gpu & big"))["job"]
    s = c.ok("SUBMIT", "SUBMITTED", **marked(d, "S", 6, constraint="nope|small"))["job"]
    a = c.ok("SUBMIT", "SUBMITTED", **marked(d, "A", 4, constraint="linux&%s" % arch))["job"]
    never = c.ok("SUBMIT", "SUBMITTED", **marked(d, "N", 1, constraint="fpga"))["job"]
    p = c.ok("PSUBMIT", "SUBMITTED", **marked(d, "P", parallel=True, constraint="small"))["job"]
    r = c.err("PSUBMIT", "REFUSED", **marked(d, "X", parallel=True, constraint="fpga"))
    assert "no active host has the features of constraint fpga" in r["msg"], r
    assert job(cl, g)["constraint"] == "gpu&big"
    wait_until(lambda: all(ended(cl, x) for x in (g, s, a, p)), scaled(60), msg="jobs ended")
    assert [job(cl, x)["state"] for x in (g, s, a, p)] == ["done"] * 4
    assert where(d, "G") == {"node1"} and where(d, "S") == {"node2"}, (where(d, "G"),
                                                                       where(d, "S"))
    assert where(d, "P") == {"node2"}
    jn = job(cl, never)
    assert jn["state"] == "queued" and jn["issued"] == 0 and not list(d.glob("N.*")), jn
    for bad, word in [("a&&b", "position 3"), ("gpu*2", "count"), ("(a", "')'"),
                      ("a,b", "write & for AND")]:
        r = c.err("SUBMIT", "INVALID", argv=["true"], ntasks=1, constraint=bad)
        assert word in r["msg"], (bad, r)
        r = c.err("PSUBMIT", "INVALID", argv=["true"], procs=1, constraint=bad)
        assert word in r["msg"], (bad, r)
    r = run_cli(gridnode_bin, "submit", "-e", cl.endpoint, "-C", "gpu&&big", "--", "true")
    assert r.returncode == 2 and "--constraint 'gpu&&big'" in r.stderr, r
    r = run_cli(gridnode_bin, "submit", "-e", cl.endpoint, "--constraint", "small", "--", "true")
    assert r.returncode == 0, r.stderr
    r = run_cli(gridnode_bin, "job", g, "-e", cl.endpoint)
    assert r.returncode == 0 and "constraint: gpu&big" in r.stdout, r
    r = run_cli(gridnode_bin, "job", p, "-e", cl.endpoint)
    assert r.returncode == 0 and "constraint: small" in r.stdout, r
    r = run_cli(gridnode_bin, "nodes", "-e", cl.endpoint)
    assert r.returncode == 0 and feats["node1"] in r.stdout and "FEATURES" in r.stdout, r
    cl.restart()
    assert job(cl, never)["constraint"] == "fpga"
    rows = cl.client().ok("NODE_LIST", "NODES")["nodes"]
    assert {n["node"]: n.get("features") for n in rows}["node1"] == feats["node1"]


def test_client_features_checked(gridnode_bin, workdir):
    """client.features with a bad name is a configuration error naming it."""
    r = run_cli(gridnode_bin, "client", "--check-config", "--set", "client.features=gpu,b@d")
    assert r.returncode != 0 and "client.features" in r.stderr and "b@d" in r.stderr, r


# ---- constraint counts (Slurm's NAME*N: at least N of the job's hosts have NAME)


def three_nodes(cl, client_factory):
    """node1, node2: small; node3: gpu (two slots each)."""
    client_factory(cl, 2, sets=client_sets("small"))
    client_factory(cl, 1, sets=client_sets("gpu"))

    def all3():
        rows = cl.client().ok("NODE_LIST", "NODES")["nodes"]
        return sum(1 for n in rows if n["active"] and "features" in n) == 3
    wait_until(all3, scaled(20), msg="three nodes joined with their features")


def count_refusals(c):
    """What every level refuses of counts: on a task, with |, more than its hosts."""
    r = c.err("SUBMIT", "INVALID", argv=["true"], ntasks=1, constraint="gpu*1")
    assert "submit a parallel job" in r["msg"], r
    r = c.err("PSUBMIT", "INVALID", argv=["true"], procs=2, constraint="gpu*1|small")
    assert "only with &" in r["msg"], r
    r = c.err("PSUBMIT", "INVALID", argv=["true"], procs=1, constraint="gpu*2")
    assert "asks for 2 hosts, the job spans at most 1" in r["msg"], r


def test_counts_cluster_and_batch(cluster_factory, client_factory, batch_factory, workdir):
    """gpu*1 on a two-process job: one of its hosts has gpu, though the least loaded
    hosts (node1, node2) would do without the count; gpu*2 with one gpu host is refused
    (the cluster: REFUSED naming the shortfall; the batch role: REFUSED at submission, as
    Slurm refuses a count no node set meets); counts on tasks, with | or beyond the
    job's hosts are INVALID at both levels."""
    cl = cluster_factory(SD)
    three_nodes(cl, client_factory)
    d = workdir / "cnt"
    d.mkdir()
    c = cl.client()
    p = c.ok("PSUBMIT", "SUBMITTED", **marked(d, "P", parallel=True, procs=2,
                                                constraint="gpu*1"))["job"]
    r = c.err("PSUBMIT", "REFUSED", **marked(d, "X", parallel=True, procs=2,
                                             constraint="gpu*2"))
    assert "has 1 active host(s) with gpu" in r["msg"], r
    count_refusals(c)
    wait_until(lambda: ended(cl, p), scaled(60), msg="the counted job ended")
    assert job(cl, p)["state"] == "done" and job(cl, p)["constraint"] == "gpu*1"
    w = where(d, "P")
    assert "node3" in w and len(w) == 2, w
    b = batch_factory([cl])
    wait_until(lambda: sum(1 for n in b.client().ok("NODE_LIST", "NODES")["nodes"]
                           if n["active"]) == 3, scaled(20), msg="the batch role sees 3 hosts")
    bc = b.client()
    bp = bc.ok("PSUBMIT", "SUBMITTED", **marked(d, "BP", parallel=True, procs=2,
                                                 constraint="gpu*1"))["job"]
    r = bc.err("PSUBMIT", "REFUSED", **marked(d, "BX", parallel=True, procs=2,
                                               constraint="gpu*2"))
    assert "too few hosts for its counts (1 host(s) with gpu" in r["msg"], r
    count_refusals(bc)
    wait_until(lambda: ended(b, bp), scaled(60), msg="the batch counted job ended")
    assert job(b, bp)["state"] == "done", job(b, bp)
    assert "node3" in where(d, "BP"), where(d, "BP")


# ---- the batch role: its engine places only on hosts whose features satisfy it


def batch_grid(cluster_factory, client_factory, batch_factory):
    cl = cluster_factory(SD)
    feats = two_nodes(cl, client_factory)
    b = batch_factory([cl])

    def seen():
        rows = b.client().ok("NODE_LIST", "NODES")["nodes"]
        return sum(1 for n in rows if n["active"]) == 2
    wait_until(seen, scaled(20), msg="the batch role sees both hosts")
    return cl, b, feats


def test_batch_places_by_features(cluster_factory, client_factory, batch_factory, workdir,
                                  gridnode_bin):
    """The batch role's engine starts an array's elements and a parallel job only on the
    hosts whose features (as its cluster reports them) satisfy the constraint; a
    constraint no host of the cluster satisfies is REFUSED at submission (as Slurm's
    "Requested node configuration is not available"); bad syntax is INVALID; the
    constraint is shown in JOB and CHECKJOB and survives kill -9 of the batch role."""
    cl, b, feats = batch_grid(cluster_factory, client_factory, batch_factory)
    d = workdir / "bout"
    d.mkdir()
    c = b.client()
    g = c.ok("SUBMIT", "SUBMITTED", **marked(d, "G", 4, constraint="gpu&big"))["job"]
    s = c.ok("PSUBMIT", "SUBMITTED", **marked(d, "S", parallel=True, constraint="small"))["job"]
    r = c.err("SUBMIT", "REFUSED", **marked(d, "X", 1, constraint="fpga|arm64e"))
    assert "no host of cluster" in r["msg"] and "gpu" in r["msg"], r
    r = c.err("PSUBMIT", "INVALID", argv=["true"], procs=1, constraint="gpu|")
    assert "constraint" in r["msg"], r
    assert job(b, g)["constraint"] == "gpu&big"
    chk = c.ok("CHECKJOB", "JOBCHECK", job=s)
    assert "small" in str(chk), chk
    wait_until(lambda: ended(b, g) and ended(b, s), scaled(60), msg="jobs ended")
    assert job(b, g)["state"] == "done" and job(b, s)["state"] == "done"
    assert where(d, "G") == {"node1"} and where(d, "S") == {"node2"}
    b.restart()
    assert job(b, g)["constraint"] == "gpu&big"
    r = run_cli(gridnode_bin, "job", g, "-e", b.endpoint)
    assert r.returncode == 0 and "constraint: gpu&big" in r.stdout, r
    r = run_cli(gridnode_bin, "checkjob", s, "-e", b.endpoint)
    assert r.returncode == 0 and "small" in r.stdout, r


# ---- the spool: only sites that can satisfy it


def test_spool_sends_only_to_sites_that_can(cluster_factory, client_factory, batch_factory,
                                            meta_factory, workdir):
    """Two batch sites, one whose host has gpu, one whose host has small: the spool
    learns their hosts' features (SITE features), sends a gpu job only to the gpu site
    and a small job only to the other, whatever the policy would prefer; a constraint no
    site can satisfy is INVALID at submission naming each site's reason; bad syntax is
    INVALID; the constraint is shown and survives kill -9 of the spool; an old-style
    request (no constraint) still goes anywhere."""
    sites = {}
    for tag, feat in (("a", "gpu"), ("b", "small")):
        cl = cluster_factory(SD, name="cl" + tag)
        client_factory(cl, 1, sets=client_sets(feat), prefix="node" + tag)
        sites["s" + tag] = batch_factory([cl], name="batch" + tag)
    for b in sites.values():
        wait_until(lambda: any(n["active"] for n in b.client().ok("NODE_LIST", "NODES")["nodes"]),
                   scaled(20), msg="the batch role sees its host")
    m = meta_factory(sites)

    def features_known():
        rows = m.client().ok("SITE_INFO", "SITE")["sites"]
        return all(r["known"] and r["features"] for r in rows) or rows
    try:
        wait_until(lambda: features_known() is True, scaled(20),
                   msg="the spool knows the sites' features")
    except AssertionError:
        raise AssertionError((features_known(), [(b.client().ok("SITE_INFO", "SITE"),
                              b.client().ok("NODE_LIST", "NODES")) for b in sites.values()]))
    rows = {r["name"]: r["features"] for r in m.client().ok("SITE_INFO", "SITE")["sites"]}
    assert "gpu" in rows["sa"][0] and "small" in rows["sb"][0], rows
    fh = {r["name"]: r["feature_hosts"] for r in m.client().ok("SITE_INFO", "SITE")["sites"]}
    assert fh == {"sa": [1], "sb": [1]}, fh
    d = workdir / "mout"
    d.mkdir()
    c = m.client()
    g = [c.ok("SUBMIT", "SUBMITTED", **marked(d, "G%d" % i, 1, constraint="gpu"))["job"]
         for i in range(3)]
    s = [c.ok("PSUBMIT", "SUBMITTED", **marked(d, "S%d" % i, parallel=True,
                                               constraint="small|fpga"))["job"]
         for i in range(3)]
    r = c.err("SUBMIT", "INVALID", argv=["true"], ntasks=1, constraint="fpga")
    assert "constraint fpga" in r["msg"] and "site sa" in r["msg"] and "site sb" in r["msg"], r
    r = c.err("SUBMIT", "INVALID", argv=["true"], ntasks=1, constraint="gpu&(")
    assert "constraint" in r["msg"], r
    r = c.err("PSUBMIT", "INVALID", argv=["true"], procs=2, constraint="gpu*2")
    assert "too few hosts for its counts" in r["msg"] and "site sb" in r["msg"], r
    gc = c.ok("PSUBMIT", "SUBMITTED", **marked(d, "GC", parallel=True, procs=2,
                                               constraint="gpu*1"))["job"]
    count_refusals(c)
    assert job(m, g[0])["constraint"] == "gpu"
    m.restart()
    assert job(m, s[0])["constraint"] == "small|fpga"
    wait_until(lambda: all(ended(m, x) for x in g + s), scaled(90), msg="spool jobs ended")
    for x in g:
        jx = job(m, x)
        assert jx["state"] == "done" and jx["site"] == "sa", jx
    for x in s:
        jx = job(m, x)
        assert jx["state"] == "done" and jx["site"] == "sb", jx
    wait_until(lambda: ended(m, gc), scaled(60), msg="the counted spool job ended")
    assert job(m, gc)["site"] == "sa" and job(m, gc)["state"] == "done", job(m, gc)
    hosts = set()
    for i in range(3):
        hosts |= where(d, "G%d" % i)
    assert hosts == {"nodea1"}, hosts
