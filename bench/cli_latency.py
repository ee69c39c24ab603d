"""The user tools' latency, whole process (bench/cli_latency.sh).

usage: /usr/bin/python3 bench/cli_latency.py GRIDNODE [CALLS]

Starts a cluster manager on a free loopback port in a temporary state directory,
then runs `gridnode submit -- true` and `gridnode jobs` CALLS times each (default
200, bounded to 120 s in all), each call a whole process started with posix_spawn
(stdout to /dev/null) and timed from spawn to exit. Prints one JSON line:
{"bench":"cli_latency","submit_ms":median,"jobs_ms":median,"submit_p90_ms",
"jobs_p90_ms","true_ms":median of /bin/true (the machine's process floor),"calls"}.
`jobs` lists every job submitted before it (CALLS jobs at the end). The cluster is
stopped (SIGTERM, then SIGKILL) whatever happens.
"""
import json, os, shutil, signal, statistics, subprocess, sys, tempfile, time

gridnode = os.path.abspath(sys.argv[1])
calls = int(sys.argv[2]) if len(sys.argv) > 2 else 200
budget = time.monotonic() + 120


def spawn_times(argv, n, env):
    devnull = os.open(os.devnull, os.O_WRONLY)
    fa = [(os.POSIX_SPAWN_DUP2, devnull, 1)]
    ts = []
    try:
        for _ in range(n):
            if time.monotonic() > budget:
                sys.exit("cli_latency: over the 120 s budget")
            t0 = time.perf_counter()
            pid = os.posix_spawn(argv[0], argv, env, file_actions=fa)
            _, st = os.waitpid(pid, 0)
            ts.append((time.perf_counter() - t0) * 1000)
            if st != 0:
                sys.exit("cli_latency: %s exited with status %d" % (" ".join(argv[1:]), st))
    finally:
        os.close(devnull)
    return ts


tmp = tempfile.mkdtemp(prefix="gridnode-cli-latency-")
log = open(os.path.join(tmp, "cluster.log"), "w")
cl = subprocess.Popen([gridnode, "cluster", "--set", "cluster.state_dir=" + os.path.join(tmp, "st"),
                       "--set", "cluster.listen=tcp://127.0.0.1:*"],
                      stdout=subprocess.PIPE, stderr=log, text=True)
try:
    endpoint = None
    while endpoint is None and time.monotonic() < budget:
        line = cl.stdout.readline()
        if not line:
            sys.exit("cli_latency: the cluster manager exited; log " + log.name)
        if "listening on" in line:
            endpoint = line.split("listening on", 1)[1].strip()
    env = dict(os.environ, GRIDNODE_CLUSTER=endpoint)
    print("cli_latency: %d calls each against %s" % (calls, endpoint), file=sys.stderr)
    spawn_times([gridnode, "jobs"], 5, env)  # warm the page cache
    true_ms = spawn_times(["/bin/true"], calls, env)
    sub = spawn_times([gridnode, "submit", "--", "true"], calls, env)
    jobs = spawn_times([gridnode, "jobs"], calls, env)
finally:
    cl.send_signal(signal.SIGTERM)
    try:
        cl.wait(10)
    except subprocess.TimeoutExpired:
        cl.kill()
        cl.wait()
    log.close()
    shutil.rmtree(tmp, ignore_errors=True)


def p90(ts):
    return sorted(ts)[int(len(ts) * 0.9)]


print(json.dumps({"bench": "cli_latency", "submit_ms": round(statistics.median(sub), 3),
                  "jobs_ms": round(statistics.median(jobs), 3),
                  "submit_p90_ms": round(p90(sub), 3), "jobs_p90_ms": round(p90(jobs), 3),
                  "true_ms": round(statistics.median(true_ms), 3), "calls": calls},
                 separators=(",", ":")))
