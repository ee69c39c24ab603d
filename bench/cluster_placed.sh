#!/usr/bin/env bash
# The cluster's per-job path as the batch role drives it (issue 9): N 1-process `true`
# jobs placed with PSUBMIT hosts on one client of 64 slots, at most 64 running, their
# ends read from the EVENTS long-poll; submit of the first to the end of the last.
# N defaults to 2000 (CLUSTER_PLACED_N). Prints one JSON line:
#   {"bench":"cluster_placed","jobs":N,"jobs_per_s":...,"wall_s":...,"refused":...}
set -eu
export GRIDNODE_PLAIN="${GRIDNODE_PLAIN-1}" # plain on loopback, as bench/run.sh (docs/security.md)
cd "$(dirname "$0")/.."
BUILD="${BUILD:-build}"
gridnode="$BUILD/gridnode"
[ -x "$gridnode" ] || { echo "cluster_placed: $gridnode not built (make BUILD=$BUILD)" >&2; exit 1; }
exec /usr/bin/python3 - "$gridnode" "${CLUSTER_PLACED_N:-2000}" "${CLUSTER_PLACED_SYNC:-full}" <<'PY'
import json, os, shutil, signal, subprocess, sys, tempfile, time
import msgpack, zmq
gridnode, n, sync = sys.argv[1], int(sys.argv[2]), sys.argv[3]
SLOTS = 64
tmp = tempfile.mkdtemp(prefix="cluster_placed.")
procs = []
def start(args, log):
    p = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=open(log, "w"), text=True)
    procs.append(p)
    return p
try:
    cl = start([gridnode, "cluster", "--set", "cluster.listen=tcp://127.0.0.1:*",
                "--set", "cluster.state_dir=%s/cluster" % tmp, "--set", "store.sync=%s" % sync,
                "--set", "cluster.log_level=warn"], tmp + "/cluster.log")
    ep = cl.stdout.readline().split()[-1]
    start([gridnode, "client", "--set", "client.server=" + ep, "--set", "client.name=b1",
           "--set", "client.state_dir=%s/client" % tmp, "--set", "client.slots=%d" % SLOTS,
           "--set", "client.log_level=warn"], tmp + "/client.log")
    ctx = zmq.Context()
    s = ctx.socket(zmq.DEALER)
    s.setsockopt(zmq.LINGER, 0)
    s.connect(ep)
    ids = iter(range(1, 1 << 62))
    def send(t, **f):
        m = dict(v=1, t=t, id=next(ids), **f)
        s.send(msgpack.packb(m, use_bin_type=True))
        return m["id"]
    def recv(ms):
        if not s.poll(ms):
            return None
        return msgpack.unpackb(s.recv(), raw=False)
    # wait for the host
    deadline = time.monotonic() + 30
    nxt = 0
    while True:
        send(60, **{"from": nxt})
        r = recv(5000)
        nxt = r["next"]
        if any(e["kind"] == "host" and e["node"] == "b1" and e["procs"] for e in r["events"]):
            break
        if time.monotonic() > deadline:
            sys.exit("cluster_placed: the client did not join")
        time.sleep(0.1)
    running = submitted = done = refused = 0
    ev_id = send(60, **{"from": nxt, "wait_ms": 1000})
    t0 = time.monotonic()
    while done < n:
        while running < SLOTS and submitted < n:
            send(39, argv=["true"], procs=1, hosts=["b1"], key="bench:%d" % submitted)
            submitted += 1
            running += 1
        r = recv(10000)
        if r is None:
            sys.exit("cluster_placed: no reply in 10 s (%d done)" % done)
        if r["t"] == 61 and r["id"] == ev_id:
            nxt = r["next"]
            for e in r["events"]:
                if e["kind"] == "job" and e["state"] in ("done", "failed", "killed", "cancelled"):
                    done += 1
                    running -= 1
            ev_id = send(60, **{"from": nxt, "wait_ms": 1000})
        elif r["t"] == 1:
            refused += 1
            running -= 1
            submitted -= 1
    wall = time.monotonic() - t0
    def cpu(p):  # user + system seconds of a process (children not included)
        f = open("/proc/%d/stat" % p.pid).read().rsplit(")", 1)[1].split()
        return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")
    print(json.dumps({"bench": "cluster_placed", "jobs": n, "jobs_per_s": round(n / wall, 1),
                      "wall_s": round(wall, 3), "refused": refused, "sync": sync,
                      "cluster_cpu_s": round(cpu(procs[0]), 2),
                      "client_cpu_s": round(cpu(procs[1]), 2)},
                     separators=(",", ":")))
finally:
    for p in procs:
        p.send_signal(signal.SIGTERM)
    for p in procs:
        try:
            p.wait(10)
        except subprocess.TimeoutExpired:
            p.kill()
    shutil.rmtree(tmp, ignore_errors=True)
PY
