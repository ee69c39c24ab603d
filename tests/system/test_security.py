"""System tests of transport security and access control (issue 12, docs/security.md):
real roles with CURVE on loopback, keys made by `gridnode keygen` or in keygen's format,
identities from an authorized-keys file. Every wait is bounded.

Each test's roles use the suite's server key (conftest.py) with their own
authorized-keys file, in which the suite key is the admin "grid" (so the fixtures'
nodes and helpers keep working) next to the identities under test."""

import os
import stat
import subprocess
import time

import pytest

from conftest import SUITE_KEYS, TYPES, Rpc, RpcTimeout, scaled, wait_until, write_keypair

T = TYPES
SD = {"store.sync": "none", "queues.sync_ms": 100, "tasks.heartbeat_s": 1,
      "tasks.idle_wait_s": 1}
CLIENT = {"rpc.timeout_ms": 2000, "rpc.backoff_min_s": 0.2, "rpc.backoff_max_s": 1}


def run_tool(gridnode_bin, *args, env=None, timeout=30):
    e = dict(os.environ)
    e.update(env or {})
    return subprocess.run([gridnode_bin] + [str(a) for a in args], capture_output=True,
                          text=True, timeout=scaled(timeout), stdin=subprocess.DEVNULL, env=e)


class Keys:
    """Key pairs in a directory and an authorized-keys file naming them."""

    def __init__(self, d):
        self.dir = d
        self.dir.mkdir(exist_ok=True)
        self.pub = {}
        self.lines = ["%s grid admin" % SUITE_KEYS["public"]]
        self.auth = d / "authorized_keys"

    def add(self, name, kind, extra="", admit=True):
        self.pub[name], _ = write_keypair(self.dir, name)
        if admit:
            self.lines.append(("%s %s %s %s" % (self.pub[name], name, kind, extra)).strip())
        return self.dir / (name + ".key")

    def key(self, name):
        return self.dir / (name + ".key")

    def write(self):
        tmp = self.dir / "authorized_keys.tmp"
        tmp.write_text("\n".join(self.lines) + "\n")
        os.replace(tmp, self.auth)  # a new inode: the role notices the change

    def sets(self):
        self.write()
        return {"security.authorized_keys": self.auth}

    def rpc(self, endpoint, name, **kw):
        return Rpc(endpoint, key=str(self.key(name)), timeout=kw.pop("timeout", scaled(10)),
                   **kw)


@pytest.fixture
def keys(workdir):
    k = Keys(workdir / "keys")
    k.add("alice", "user", "groups=physics,users")
    k.add("bob", "user", "groups=users")
    k.add("node7", "node")
    k.add("feeder", "peer", "grant=JOB_LIST,SUBMIT")
    k.add("evil", "user", admit=False)
    return k


def submit(rpc, **kw):
    r = rpc.call(T["SUBMIT"], argv=["true"], ntasks=1, **kw)
    assert r["t"] == T["SUBMITTED"], r
    return r["job"]


def test_keygen_writes_a_private_secret_and_refuses_to_overwrite(gridnode_bin, workdir):
    r = run_tool(gridnode_bin, "keygen", "-d", workdir, "carol", "--json")
    assert r.returncode == 0, r.stderr
    sec, pub = workdir / "carol.key", workdir / "carol.pub"
    assert stat.S_IMODE(sec.stat().st_mode) == 0o600
    assert pub.read_text().splitlines()[-1] in r.stdout
    r = run_tool(gridnode_bin, "keygen", "-d", workdir, "carol")
    assert r.returncode == 1 and "remove it first" in r.stderr
    assert run_tool(gridnode_bin, "keygen", "--help").returncode == 0
    # a secret key readable by others is refused, naming the fix
    os.chmod(sec, 0o644)
    r = run_tool(gridnode_bin, "cluster", "--set", "cluster.state_dir=%s" % (workdir / "s"),
                 "--set", "cluster.listen=tcp://127.0.0.1:*",
                 "--set", "security.secret_key=%s" % sec, timeout=20)
    assert r.returncode == 1 and "chmod 600" in r.stderr


def test_no_security_or_plain_off_loopback_refuses_to_start(gridnode_bin, workdir):
    env = {"GRIDNODE_KEY": "", "GRIDNODE_SERVER_KEY": "", "GRIDNODE_AUTHORIZED_KEYS": ""}
    base = ["cluster", "--set", "cluster.state_dir=%s" % (workdir / "s")]
    r = run_tool(gridnode_bin, *base, "--set", "cluster.listen=tcp://127.0.0.1:*", env=env)
    assert r.returncode == 1 and "no security configured" in r.stderr
    r = run_tool(gridnode_bin, *base, "--set", "cluster.listen=tcp://0.0.0.0:*",
                 "--set", "security.plain=true", env=env)
    assert r.returncode == 1 and "only on loopback or ipc" in r.stderr
    # a tool with plain towards a non-loopback address refuses too (nothing is sent)
    r = run_tool(gridnode_bin, "jobs", "-e", "tcp://192.0.2.1:7300", "--timeout", 300,
                 env=dict(env, GRIDNODE_PLAIN="1"))
    assert r.returncode == 1 and "only to loopback" in r.stderr


def test_unknown_key_is_refused_at_the_handshake_and_logged(cluster_factory, keys,
                                                            gridnode_bin):
    cl = cluster_factory(keys.sets())
    evil = keys.rpc(cl.endpoint, "evil", timeout=scaled(1.5))
    with pytest.raises(RpcTimeout):  # libzmq never delivers the request
        evil.call(T["JOB_LIST"])
    # the tool says why at once, well within its timeout
    t0 = time.monotonic()
    r = run_tool(gridnode_bin, "jobs", "-e", cl.endpoint, "--timeout", int(scaled(10000)),
                 env={"GRIDNODE_KEY": str(keys.key("evil"))})
    assert r.returncode == 1 and "refused our key" in r.stderr, r.stderr
    assert time.monotonic() - t0 < scaled(5)
    wait_until(lambda: "refused" in cl.log() and keys.pub["evil"] in cl.log(), scaled(15),
               msg="the refusal in the cluster's log")
    # a client that speaks no CURVE at all gets nowhere either
    plain = Rpc(cl.endpoint, plain=True, timeout=scaled(1.5))
    with pytest.raises(RpcTimeout):
        plain.call(T["JOB_LIST"])
    assert cl.alive()


def test_wrong_server_key_is_a_clear_error_within_the_timeout(cluster_factory, keys,
                                                              gridnode_bin, workdir):
    cl = cluster_factory(keys.sets())
    other, _ = write_keypair(workdir, "impostor")
    t0 = time.monotonic()
    r = run_tool(gridnode_bin, "jobs", "-e", cl.endpoint, "--timeout", int(scaled(10000)),
                 env={"GRIDNODE_KEY": str(keys.key("alice")),
                      "GRIDNODE_SERVER_KEY": "z85:" + other})
    assert r.returncode == 1
    assert "server's public key is not the one" in r.stderr, r.stderr
    assert time.monotonic() - t0 < scaled(5)
    # the right keys work, as the user named by the key
    r = run_tool(gridnode_bin, "submit", "-e", cl.endpoint, "--", "true",
                 env={"GRIDNODE_KEY": str(keys.key("alice"))})
    assert r.returncode == 0, r.stderr
    r = run_tool(gridnode_bin, "jobs", "-e", cl.endpoint, "--json",
                 env={"GRIDNODE_KEY": str(keys.key("alice"))})
    assert r.returncode == 0 and '"alice"' in r.stdout, r.stderr


def test_node_key_speaks_only_the_node_protocol(cluster_factory, keys):
    cl = cluster_factory(keys.sets())
    node = keys.rpc(cl.endpoint, "node7")
    e = node.err(T["SUBMIT"], "DENIED", argv=["true"], ntasks=1)
    assert "node key" in e["msg"] and "SUBMIT" in e["msg"]
    node.err(T["JOB_LIST"], "DENIED")
    node.err(T["CONSOLE"], "DENIED", cmd="queues")
    w = node.ok(T["HELLO"], expect="WELCOME", client="test 1", node="n7", cores=1)
    assert w["sid"]
    # and users may not pose as nodes
    keys.rpc(cl.endpoint, "alice").err(T["HELLO"], "DENIED", client="test 1", node="fake",
                                       cores=1)


def test_users_own_jobs_and_admin_only_requests(cluster_factory, keys):
    cl = cluster_factory(keys.sets())
    alice, bob = keys.rpc(cl.endpoint, "alice"), keys.rpc(cl.endpoint, "bob")
    admin = cl.connect()  # the suite key: admin "grid"
    # the user name in a request is the key's: "user" is replaced, not honoured
    ja = submit(alice, user="bob")
    jb = submit(bob)
    assert alice.ok(T["JOB_GET"], job=ja)["job"]["user"] == "alice"
    # each sees only its own jobs; the admin sees all
    assert [j["job"] for j in alice.ok(T["JOB_LIST"])["jobs"]] == [ja]
    assert [j["job"] for j in bob.ok(T["JOB_LIST"])["jobs"]] == [jb]
    assert {j["job"] for j in admin.ok(T["JOB_LIST"])["jobs"]} == {ja, jb}
    # bob can neither see nor cancel alice's job
    e = bob.err(T["CANCEL"], "DENIED", job=ja)
    assert "another user" in e["msg"]
    bob.err(T["JOB_GET"], "DENIED", job=ja)
    assert admin.ok(T["JOB_GET"], job=ja)["job"]["state"] != "cancelled"
    alice.ok(T["CANCEL"], job=ja)
    admin.ok(T["CANCEL"], job=jb)  # admins: any job
    # console, purge: administrators only
    e = alice.err(T["CONSOLE"], "DENIED", cmd="queues")
    assert "administrators" in e["msg"]
    alice.err(T["PURGE"], "DENIED")
    assert admin.ok(T["CONSOLE"], cmd="queues")["t"] == T["CONSOLE_OUT"]


def test_peer_acts_only_within_its_grant(cluster_factory, keys):
    cl = cluster_factory(keys.sets())
    feeder = keys.rpc(cl.endpoint, "feeder")
    j = submit(feeder, user="carol")  # a peer acts for a user: the name is honoured
    assert cl.rpc(T["JOB_GET"], job=j)["job"]["user"] == "carol"
    assert [x["job"] for x in feeder.ok(T["JOB_LIST"])["jobs"]] == [j]
    e = feeder.err(T["CANCEL"], "DENIED", job=j)
    assert "outside the grant" in e["msg"]
    feeder.err(T["EVENTS"], "DENIED")


def test_rotation_new_key_admitted_old_key_refused_without_restart(cluster_factory, keys):
    cl = cluster_factory(keys.sets())
    pid = cl.pid
    old = keys.rpc(cl.endpoint, "alice")
    old.ok(T["JOB_LIST"])
    # add alice's new key next to the old one: admitted without a restart
    keys.add("alice2", "user", "groups=physics,users")
    keys.lines[-1] = keys.lines[-1].replace(" alice2 ", " alice ")
    keys.write()
    new = keys.rpc(cl.endpoint, "alice2")
    j = submit(new)
    assert cl.rpc(T["JOB_GET"], job=j)["job"]["user"] == "alice"
    # remove the old key: refused from now on, even on the open connection
    keys.lines = [x for x in keys.lines if keys.pub["alice"] not in x]
    keys.write()
    wait_until(lambda: old.call(T["JOB_LIST"]).get("code") == 22, scaled(20), interval=0.5,
               msg="the old key refused (AUTH)")
    assert "no longer authorized" in old.call(T["JOB_LIST"])["msg"]
    assert new.ok(T["JOB_LIST"])["jobs"]
    assert cl.pid == pid and cl.alive()
    # a broken file is not applied: the keys in force stay
    keys.auth.write_text("not a key line\n")
    time.sleep(1.5)
    assert new.ok(T["JOB_LIST"])["jobs"]
    wait_until(lambda: "not reloaded" in cl.log(), scaled(10), msg="the reload error logged")


def test_queue_unix_group_checks_the_identitys_groups(cluster_factory, client_factory, keys):
    cl = cluster_factory(dict(SD, **keys.sets()))
    client_factory(cl, 1, sets=CLIENT)
    wait_until(lambda: sum(len(k["hosts"]) for k in cl.rpc(T["SD_INFO"])["clusters"]) >= 1,
               scaled(20), msg="a host")
    cl.client().ok(T["CONSOLE"], cmd="queue 1 group physics")
    alice, bob = keys.rpc(cl.endpoint, "alice"), keys.rpc(cl.endpoint, "bob")
    r = alice.ok(T["PSUBMIT"], expect="SUBMITTED", argv=["true"], shell=True, procs=1, queue=1)
    assert r["job"]
    e = bob.err(T["PSUBMIT"], "REFUSED", argv=["true"], shell=True, procs=1, queue=1)
    assert "group physics" in e["msg"] and "bob" in e["msg"]
    # bob cannot claim alice's name nor a group he is not in
    bob.err(T["PSUBMIT"], "REFUSED", argv=["true"], shell=True, procs=1, queue=1,
            user="alice")
    e = bob.err(T["PSUBMIT"], "DENIED", argv=["true"], shell=True, procs=1, group="physics")
    assert "not a member of group 'physics'" in e["msg"]


def test_reservation_acl_admits_only_its_users_and_groups(cluster_factory, client_factory,
                                                          batch_factory, keys):
    cl = cluster_factory(SD)
    client_factory(cl, 1, sets=CLIENT)
    b = batch_factory([cl], sets=keys.sets())
    wait_until(lambda: any(n["active"] for n in b.rpc(T["NODE_LIST"])["nodes"]), scaled(20),
               msg="the batch role sees the host")
    alice, bob = keys.rpc(b.endpoint, "alice"), keys.rpc(b.endpoint, "bob")
    # users cannot set or release reservations, whatever name they send
    e = alice.err(T["RESV_SET"], "DENIED", user="root", tasks=1, procs=1, duration_s=600,
                  users=["alice"])
    assert "administrators" in e["msg"]
    b.client().ok(T["RESV_SET"], name="ualice", tasks=1, procs=1, duration_s=600,
                  users=["alice"])
    b.client().ok(T["RESV_SET"], name="gphys", tasks=1, procs=1, duration_s=600,
                  groups=["physics"])
    alice.err(T["RESV_RELEASE"], "DENIED", name="ualice")
    job = dict(argv=["true"], shell=True, procs=1, limit_s=60)
    assert alice.ok(T["PSUBMIT"], resv="ualice", **job)["job"]
    r = bob.call(T["PSUBMIT"], resv="ualice", user="alice", **job)  # the name is bob's
    assert r["t"] == T["ERROR"] and "access list" in r["msg"], r
    assert alice.ok(T["PSUBMIT"], resv="gphys", group="physics", **job)["job"]
    e = bob.err(T["PSUBMIT"], "DENIED", resv="gphys", group="physics", **job)
    assert "not a member" in e["msg"]
    r = bob.call(T["PSUBMIT"], resv="gphys", **job)
    assert r["t"] == T["ERROR"] and "access list" in r["msg"], r
    # the batch role's own connection to the cluster is CURVE as well
    assert b.rpc(T["NODE_LIST"])["nodes"]


def test_tools_and_env_without_keys_say_what_to_set(cluster_factory, keys, gridnode_bin):
    cl = cluster_factory(keys.sets())
    r = run_tool(gridnode_bin, "jobs", "-e", cl.endpoint,
                 env={"GRIDNODE_KEY": "", "GRIDNODE_SERVER_KEY": ""})
    assert r.returncode == 1 and "GRIDNODE_KEY" in r.stderr and "GRIDNODE_SERVER_KEY" in r.stderr


def test_node_with_wrong_keys_logs_why_and_the_right_key_works(cluster_factory, client_factory,
                                                               keys, workdir):
    cl = cluster_factory(dict(SD, **keys.sets()))
    other, _ = write_keypair(workdir, "impostor")
    (bad,) = client_factory(cl, 1, sets=CLIENT, prefix="badsrv",
                            env={"GRIDNODE_SERVER_KEY": "z85:" + other})
    (unknown,) = client_factory(cl, 1, sets=CLIENT, prefix="evil",
                                env={"GRIDNODE_KEY": str(keys.key("evil"))})
    (good,) = client_factory(cl, 1, sets=CLIENT, prefix="n",
                             env={"GRIDNODE_KEY": str(keys.key("node7"))})
    wait_until(lambda: "server's public key is not the one" in bad.log(), scaled(20),
               msg="the node names the wrong server key")
    wait_until(lambda: "refused our key" in unknown.log(), scaled(20),
               msg="the node says its key was refused")
    wait_until(lambda: "session" in good.log(), scaled(20), msg="the node7 session")
    names = [n["node"] for n in cl.rpc(T["NODE_LIST"])["nodes"]]
    assert names == [good.name], names


def test_batch_role_with_wrong_cluster_key_logs_why(cluster_factory, batch_factory, keys,
                                                    workdir):
    cl = cluster_factory(keys.sets())
    write_keypair(workdir, "impostor")
    b = batch_factory([cl], env={"GRIDNODE_SERVER_KEY": str(workdir / "impostor.pub")})
    wait_until(lambda: "server's public key is not the one" in b.log(), scaled(20),
               msg="the batch role names the wrong cluster key")
    assert b.alive() and b.rpc(T["NODE_LIST"])["nodes"] == []
