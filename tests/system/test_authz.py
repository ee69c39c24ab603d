"""System tests of authorization (issue 23, docs/security.md "Access control"): each
attack of a plain user or node key made against real roles with CURVE on loopback, and
refused with DENIED (or the documented code) and a log line naming the identity; the
legitimate uses beside them still work. Every wait is bounded.

Each test writes its own authorized-keys file. The suite's key (conftest.py) is the
admin "grid" unless a test makes it a peer (the batch role's key towards its cluster)."""

import os
import re
import subprocess
from pathlib import Path

from conftest import ERRORS, REPO, SUITE_KEYS, TYPES, Rpc, scaled, wait_until, write_keypair

T = TYPES
SD = {"store.sync": "none", "queues.sync_ms": 100, "tasks.heartbeat_s": 1,
      "tasks.idle_wait_s": 1}
CLIENT = {"rpc.timeout_ms": 2000, "rpc.backoff_min_s": 0.2, "rpc.backoff_max_s": 1}


class Keys:
    """Key pairs in a directory and an authorized-keys file naming them; the suite's
    key is `suite_kind` ("admin": the fixtures' nodes and helpers act as admin)."""

    def __init__(self, d, suite_kind="admin"):
        self.dir = Path(d)
        self.dir.mkdir(exist_ok=True)
        self.lines = ["%s grid %s" % (SUITE_KEYS["public"], suite_kind)]
        self.auth = self.dir / "authorized_keys"

    def add(self, name, kind, extra=""):
        pub, _ = write_keypair(self.dir, name)
        self.lines.append(("%s %s %s %s" % (pub, name, kind, extra)).strip())
        return self

    def key(self, name):
        return str(self.dir / (name + ".key"))

    def sets(self):
        self.auth.write_text("\n".join(self.lines) + "\n")
        return {"security.authorized_keys": self.auth}

    def rpc(self, endpoint, name):
        return Rpc(endpoint, key=self.key(name), timeout=scaled(10))


def hello(rpc, node):
    r = rpc.ok(T["HELLO"], expect="WELCOME", client="c-" + node, node=node, cores=1)
    return r["sid"]


def in_log(role, *parts, timeout=10):
    """Waits until one line of role's log holds every part (bounded)."""
    def found():
        return any(all(p in line for p in parts) for line in role.log().splitlines())
    wait_until(found, scaled(timeout), msg="a log line with %s" % (parts,))


# ---------------------------------------------------------------------------
# NODE_CTL: admin only, every request logged with the identity


def test_node_ctl_is_admin_only_and_logged_with_the_identity(cluster_factory, workdir):
    k = (Keys(workdir / "keys").add("alice", "user").add("node7", "node")
         .add("feeder", "peer").add("ops", "peer", "grant=NODE_CTL"))
    cl = cluster_factory(dict(SD, **k.sets()))
    hello(k.rpc(cl.endpoint, "node7"), "n7")
    # MASTER_GET is for every key, node keys included (this cluster has no project)
    k.rpc(cl.endpoint, "node7").err(T["MASTER_GET"], "NOT_FOUND")
    for who, kind in (("alice", "user key"), ("node7", "node key"), ("feeder", "peer")):
        e = k.rpc(cl.endpoint, who).err(T["NODE_CTL"], "DENIED", node="n7", op="drain",
                                         reason="mine now")
        assert who in e["msg"] and kind in e["msg"] and "drain n7" in e["msg"], e
        in_log(cl, "denied NODE_CTL from '%s'" % who, "drain n7", kind)
    nodes = cl.rpc(T["NODE_LIST"])["nodes"]
    assert not any("drain" in n for n in nodes), "a refused drain changed nothing"
    # the operator drains and resumes; each request is logged with who asked
    cl.client().ok(T["NODE_CTL"], node="n7", op="drain", reason="disk swap")
    in_log(cl, "NODE_CTL drain n7 from 'grid' (admin): done")
    assert [n["drain"] for n in cl.rpc(T["NODE_LIST"])["nodes"]] == ["disk swap"]
    cl.client().err(T["NODE_CTL"], "NOT_FOUND", node="n99", op="drain", reason="x")
    in_log(cl, "NODE_CTL drain n99 from 'grid' (admin): no node named n99")
    # a peer whose grant names NODE_CTL may (the operator's own automation)
    k.rpc(cl.endpoint, "ops").ok(T["NODE_CTL"], node="n7", op="resume")
    in_log(cl, "NODE_CTL resume n7 from 'ops' (peer): done")
    assert not any("drain" in n for n in cl.rpc(T["NODE_LIST"])["nodes"])


# ---------------------------------------------------------------------------
# sessions: bound to the key that opened them, never shown to users


def test_a_node_key_acts_only_for_its_own_sessions(cluster_factory, workdir, gridnode_bin):
    k = (Keys(workdir / "keys").add("node7", "node").add("node8", "node")
         .add("alice", "user"))
    cl = cluster_factory(dict(SD, **k.sets()))
    n7, n8 = k.rpc(cl.endpoint, "node7"), k.rpc(cl.endpoint, "node8")
    sid = hello(n7, "n7")
    jid = k.rpc(cl.endpoint, "alice").ok(T["SUBMIT"], argv=["true"], ntasks=2)["job"]
    # node8 learnt node7's session id: every request under it is refused and logged
    attacks = [("STATUS", {"running": []}), ("TASK_GET", {"want": 1}),
               ("RESULT", {"results": [], "want": 1}), ("PSYNC", {"procs": []}),
               ("CKPT", {"job": jid, "idx": 0, "issue": 1, "files": []}),  # issue 26
               ("LEAVE", {})]
    for req, f in attacks:
        e = n8.err(T[req], "DENIED", sid=sid, **f)
        assert "opened by another key" in e["msg"], e
        in_log(cl, "denied %s for session %s" % (req, sid), "opened by 'node7'",
               "from 'node8' (node)")
    # a checkpoint is node protocol: a user key may not send one at all, the node that
    # opened the session may (refused here only because the job takes no checkpoints)
    e = k.rpc(cl.endpoint, "alice").err(T["CKPT"], "DENIED", sid=sid, job=jid, idx=0, issue=1,
                                        files=[])
    assert "alice" in e["msg"], e
    r = n7.call(T["CKPT"], sid=sid, job=jid, idx=0, issue=1, files=[])
    assert r.get("code") != ERRORS["DENIED"], r
    # ... and HELLO with it gives node8 a session of its own, not node7's
    w = n8.ok(T["HELLO"], expect="WELCOME", sid=sid, client="x", node="n8", cores=1)
    assert w["sid"] != sid and w["resumed"] is False
    in_log(cl, "denied HELLO for session %s" % sid, "from 'node8' (node)")
    # node7's session is untouched: it works, takes a task and reports
    t = n7.ok(T["TASK_GET"], expect="TASKS", sid=sid, want=1)["tasks"]
    assert len(t) == 1 and t[0]["job"] == jid
    n7.ok(T["STATUS"], expect="STATUS_ACK", sid=sid,
          running=[{"job": jid, "idx": t[0]["idx"], "issue": t[0]["issue"]}])
    n7.ok(T["RESULT"], expect="TASKS", sid=sid, want=0,
          results=[{"job": jid, "idx": t[0]["idx"], "issue": t[0]["issue"], "exit": 0}])
    # session ids are a node's to know: blank for users, shown to admins
    alice = k.rpc(cl.endpoint, "alice")
    rows = alice.ok(T["NODE_LIST"])["nodes"]
    assert len(rows) == 2 and all(n["sid"] == "" for n in rows), rows
    assert sid in [n["sid"] for n in cl.rpc(T["NODE_LIST"])["nodes"]]
    task = alice.ok(T["JOB_GET"], job=jid, tasks=True)["tasks"][t[0]["idx"]]
    assert task["state"] == "ok" and task["node"] == "n7", task  # its name, not its sid
    task = cl.rpc(T["JOB_GET"], job=jid, tasks=True)["tasks"][t[0]["idx"]]
    assert task["node"] == sid
    # the user's tool shows the node's name (it looked sids up in NODE_LIST before)
    r = subprocess.run([gridnode_bin, "job", "-e", cl.endpoint, str(jid)], capture_output=True,
                       text=True, timeout=scaled(20), stdin=subprocess.DEVNULL,
                       env=dict(os.environ, GRIDNODE_KEY=k.key("alice")))
    assert r.returncode == 0 and " n7" in r.stdout and sid not in r.stdout, r.stdout + r.stderr
    # the binding is stored with the session: it holds after kill -9
    cl.restart()
    n7.close(), n8.close()
    n7, n8 = k.rpc(cl.endpoint, "node7"), k.rpc(cl.endpoint, "node8")
    n8.err(T["STATUS"], "DENIED", sid=sid, running=[])
    n7.ok(T["STATUS"], expect="STATUS_ACK", sid=sid, running=[])
    n7.ok(T["LEAVE"], sid=sid)
    assert not [n for n in cl.rpc(T["NODE_LIST"])["nodes"] if n["sid"] == sid][0]["active"]


def test_a_session_without_a_recorded_owner_is_claimed_by_its_first_key(
        cluster_factory, workdir):
    """A session stored before sessions were bound to keys (here: opened while the
    cluster ran plain, which stores no owner either) is claimed by the first key that
    uses it, then refused to others."""
    k = Keys(workdir / "keys").add("node7", "node").add("node8", "node")
    cl = cluster_factory(dict(SD, **k.sets()), env={"GRIDNODE_PLAIN": "1"})
    sid = hello(Rpc(cl.endpoint, plain=True), "n7")
    cl.restart(env={"GRIDNODE_PLAIN": ""})
    n7, n8 = k.rpc(cl.endpoint, "node7"), k.rpc(cl.endpoint, "node8")
    n7.ok(T["STATUS"], expect="STATUS_ACK", sid=sid, running=[])
    in_log(cl, "session %s of node n7 had no recorded owner: now bound to 'node7' (node)"
           % sid)
    n8.err(T["STATUS"], "DENIED", sid=sid, running=[])
    cl.restart(env={"GRIDNODE_PLAIN": ""})
    k.rpc(cl.endpoint, "node8").err(T["LEAVE"], "DENIED", sid=sid)


# ---------------------------------------------------------------------------
# PSUBMIT hosts: admins and peers only, at every level that takes PSUBMIT


def test_host_picking_is_for_peers_and_admins_at_every_level(
        cluster_factory, client_factory, batch_factory, meta_factory, workdir):
    # the suite's key is the grid's peer (the batch role's and meta role's key), as in
    # scripts/grid; the nodes have a node key, the operator an admin key
    k = (Keys(workdir / "keys", suite_kind="peer").add("root", "admin")
         .add("alice", "user").add("worker", "node"))
    cl = cluster_factory(dict(SD, **k.sets()))
    client_factory(cl, 1, sets=dict(CLIENT, **{"client.slots": 2}),
                   env={"GRIDNODE_KEY": k.key("worker")})
    b = batch_factory([cl], sets=k.sets())
    m = meta_factory({"s1": b}, sets=k.sets())
    root = k.rpc(cl.endpoint, "root")
    wait_until(lambda: any(n["active"] for n in root.ok(T["NODE_LIST"])["nodes"]),
               scaled(20), msg="the node's session")
    job = dict(argv=["true"], procs=1, limit_s=30, hosts=["node1"])
    for role in (cl, b, m):
        e = k.rpc(role.endpoint, "alice").err(T["PSUBMIT"], "DENIED", **job)
        assert "'alice' is a user key" in e["msg"] and "hosts" in e["msg"], e
        in_log(role, "denied PSUBMIT from 'alice'", "hosts")
    assert k.rpc(cl.endpoint, "alice").ok(T["JOB_LIST"])["jobs"] == []
    # the batch role (a peer) places alice's job on the cluster with hosts, as before
    jid = k.rpc(b.endpoint, "alice").ok(T["PSUBMIT"], argv=["true"], procs=1,
                                        limit_s=30)["job"]
    wait_until(lambda: k.rpc(b.endpoint, "alice").ok(T["JOB_GET"], job=jid)["job"]["state"]
               == "done", scaled(30), msg="alice's job done through the batch role")
    cj = root.ok(T["JOB_LIST"])["jobs"]
    assert len(cj) == 1 and cj[0]["user"] == "alice" and cj[0]["hosts"] == ["node1"]
    # an operator may still place a job by hand
    r = root.ok(T["PSUBMIT"], argv=["true"], procs=1, limit_s=30, hosts=["node1"])
    assert r["state"] == "running"


# ---------------------------------------------------------------------------
# the batch role's Maui commands: a user sees its own jobs


def test_checkjob_estimate_diagnose_show_a_user_only_its_own(cluster_factory, batch_factory,
                                                             workdir):
    k = (Keys(workdir / "keys").add("alice", "user", "groups=physics")
         .add("bob", "user", "groups=chem"))
    cl = cluster_factory(SD)  # no nodes: every job stays pending
    b = batch_factory([cl], sets=k.sets())
    alice, bob = k.rpc(b.endpoint, "alice"), k.rpc(b.endpoint, "bob")
    mine = alice.ok(T["SUBMIT"], argv=["true"], ntasks=1, limit_s=60, group="physics")["job"]
    theirs = bob.ok(T["SUBMIT"], argv=["true"], ntasks=1, limit_s=60, group="chem")["job"]
    wait_until(lambda: len(b.rpc(T["DIAGNOSE"], what="priority")["jobs"]) == 2, scaled(20),
               msg="both jobs pending in the scheduler")
    # another user's job is answered as if it did not exist (Slurm's PrivateData=jobs)
    gone = alice.err(T["CHECKJOB"], "NOT_FOUND", job=99999)["msg"]
    assert alice.err(T["CHECKJOB"], "NOT_FOUND", job=theirs)["msg"] == gone.replace(
        "99999", str(theirs))
    alice.err(T["ESTIMATE"], "NOT_FOUND", job=theirs)
    alice.err(T["DIAGNOSE"], "NOT_FOUND", what="priority", job=theirs)
    # its own job, whole
    j = alice.ok(T["CHECKJOB"], expect="JOBCHECK", job=mine)["job"]
    assert j["job"] == mine and j["user"] == "alice"
    assert alice.ok(T["ESTIMATE"], expect="STARTS", job=mine)["job"] == mine
    # lists: its own jobs and credentials only; the admin sees everyone's
    assert [r["job"] for r in alice.ok(T["DIAGNOSE"], what="priority")["jobs"]] == [mine]
    creds = alice.ok(T["DIAGNOSE"], what="fairshare")["creds"]
    assert {(c["kind"], c["name"]) for c in creds} == {("user", "alice"), ("group", "physics")}
    assert sorted(r["job"] for r in b.rpc(T["DIAGNOSE"], what="priority")["jobs"]) == sorted(
        [mine, theirs])
    names = {c["name"] for c in b.rpc(T["DIAGNOSE"], what="fairshare")["creds"]}
    assert {"alice", "bob", "physics", "chem"} <= names
    assert b.rpc(T["CHECKJOB"], job=theirs)["job"]["user"] == "bob"
    # node list: no session ids for users
    assert all(n["sid"] == "" for n in alice.ok(T["NODE_LIST"])["nodes"])


# ---------------------------------------------------------------------------
# the access table covers every request type


def request_names():
    """The request types of wire/msgs.c's descriptor table (its 4th column true)."""
    text = (REPO / "wire" / "msgs.c").read_text()
    rows = re.findall(r'\{WT_\w+,\s*"(\w+)",\s*"\w+",\s*(true|false),', text)
    assert len(rows) > 40, "descriptor table not found in wire/msgs.c"
    return {name for name, req in rows if req == "true"}


def access_rows():
    """The rows of docs/security.md's access table: (names in the first cell, cells)."""
    text = (REPO / "docs" / "security.md").read_text()
    sect = text.split("## Access control", 1)[1].split("\n## ", 1)[0]
    rows = []
    for line in sect.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if not line.startswith("|") or set(cells[0]) <= set("-") or cells[0] == "request":
            continue
        rows.append((set(re.findall(r"\b[A-Z][A-Z_]{2,}\b", cells[0])), cells))
    return rows


def test_every_request_type_has_one_row_in_the_access_table():
    reqs, rows = request_names(), access_rows()
    assert rows, "no access table under '## Access control' in docs/security.md"
    for names, cells in rows:
        assert len(cells) == 5, "a row needs request, node, user, admin, peer: %s" % cells
    listed = [n for names, _ in rows for n in names if n in reqs]
    missing = sorted(reqs - set(listed))
    twice = sorted({n for n in listed if listed.count(n) > 1})
    assert not missing, "requests without a row in docs/security.md: %s" % missing
    assert not twice, "requests in more than one row: %s" % twice
    unknown = sorted({n for names, _ in rows for n in names} - reqs - {"DENIED", "NOT_FOUND"})
    assert not unknown, "rows name requests that do not exist: %s" % unknown
