"""System tests of the class walltimes of the live batch role (issue 9 item 2: "a job
without a walltime gets the class default"; Maui's CLASSCFG DEFAULT.WCLIMIT and
MAX.WCLIMIT as [class NAME] defaultwalltime / maxwalltime in batch.ini)."""

import subprocess
from pathlib import Path

from conftest import TYPES, scaled, wait_until

T = dict(TYPES, PSUBMIT=39, NODE_LIST=37)
SD = {"store.sync": "none", "queues.sync_ms": 100, "tasks.heartbeat_s": 1,
      "tasks.idle_wait_s": 1}
CLIENT = {"rpc.timeout_ms": 2000, "rpc.backoff_min_s": 0.2, "rpc.backoff_max_s": 1}


def test_class_default_and_maximum_walltime(cluster_factory, client_factory, batch_factory):
    cl = cluster_factory(SD)
    client_factory(cl, 1, sets=dict(CLIENT, **{"client.slots": 2}))
    b = batch_factory([cl], sets={"class:DEFAULT.defaultwalltime": "0:02",
                                  "class:DEFAULT.maxwalltime": "10:00"})
    wait_until(lambda: any(n["active"] for n in b.rpc(T["NODE_LIST"])["nodes"]), scaled(20),
               msg="the batch role sees the host")
    # no walltime: the class default (2 s), and the cluster ends it there
    j = b.rpc(T["PSUBMIT"], argv=["sleep 100"], shell=True, procs=1)["job"]
    assert b.rpc(T["JOB_GET"], job=j)["job"]["limit_s"] == 2
    wait_until(lambda: b.rpc(T["JOB_GET"], job=j)["job"]["state"] == "killed", scaled(30),
               msg="ended at the class default walltime")
    assert "wall-clock" in b.rpc(T["JOB_GET"], job=j)["job"]["reason"]
    # a task array too
    a = b.rpc(T["SUBMIT"], argv=["true"], ntasks=2)["job"]
    assert b.rpc(T["JOB_GET"], job=a)["job"]["limit_s"] == 2
    # over the maximum: refused, naming the class and the limit
    e = b.client().err(T["PSUBMIT"], "INVALID", argv=["true"], procs=1, limit_s=601)
    assert "maximum walltime" in e["msg"] and "600" in e["msg"], e
    # a class of its own overrides DEFAULT; a walltime given is kept
    j = b.rpc(T["PSUBMIT"], argv=["true"], shell=True, procs=1, limit_s=300)["job"]
    assert b.rpc(T["JOB_GET"], job=j)["job"]["limit_s"] == 300


def check_config(gridnode_bin, *sets):
    args = [gridnode_bin, "batch", "--check-config", "-c", "configs/batch.ini"]
    for s in sets:
        args += ["--set", s]
    return subprocess.run(args, capture_output=True, text=True, timeout=scaled(20),
                          cwd=Path(__file__).resolve().parents[2])


def test_class_walltime_config(gridnode_bin):
    r = check_config(gridnode_bin, "class:batch.defaultwalltime=1:00:00",
                     "class:batch.maxwalltime=2:00:00:00")
    assert r.returncode == 0, r.stderr
    assert "[class batch]" in r.stdout and "defaultwalltime = 3600" in r.stdout
    assert "maxwalltime = 172800" in r.stdout
    for key, val, want in (("class:DEFAULT.defaultwalltime", "soon", "must be a duration"),
                           ("class:DEFAULT.maxwalltime", "0", "must be a duration"),
                           ("user:bob.maxwalltime", "10", "is a class setting")):
        r = check_config(gridnode_bin, "%s=%s" % (key, val))
        assert r.returncode != 0 and want in r.stderr, (key, r.stderr)
