#!/usr/bin/env bash
# scripts/demo.sh - the README's demo: the whole hierarchy on loopback (scripts/grid up
# --meta: a metascheduler over two batch sites, each driving a cluster manager with two
# clients). Ten prime-counting jobs are submitted at the top; the demo shows where the
# spool placed each one, the sites' queues, the cluster managers' jobs, and the results
# coming back up: state and exit at the spool, the output read through the site's job
# and its cluster job. Then it stops the grid. Run through `make demo`.
#
# DEMO_PORT (default 7300) is the first port: the cluster managers listen on DEMO_PORT
# and DEMO_PORT+1, the batch roles on DEMO_PORT+100 and +101, the meta role on
# DEMO_PORT+200 (or DEMO_BATCH_PORT / DEMO_META_PORT). Each demo keeps its results
# (state, logs, this output in demo.txt) in its own run/demo-YYYYmmdd-HHMMSS/;
# run/demo-latest points at the newest. Nothing of an earlier demo is removed.
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
bin=$top/build/gridnode
port=${DEMO_PORT:-7300}
case $port in '' | *[!0-9]*) echo "demo: DEMO_PORT '$port' is not a port number" >&2; exit 2 ;; esac
port=$((10#$port))
[ "$port" -ge 1024 ] && [ "$port" -le 65300 ] ||
    { echo "demo: DEMO_PORT $port is out of range (1024..65300)" >&2; exit 2; }
bport=${DEMO_BATCH_PORT:-$((port + 100))} mport=${DEMO_META_PORT:-$((port + 200))}
njobs=${DEMO_JOBS:-10}
meta=tcp://127.0.0.1:$mport
stamp=$(date +%Y%m%d-%H%M%S)
runs=${DEMO_RUNS:-$top/run} # where the demo-<timestamp> directories go
dir=$runs/demo-$stamp
if [ -e "$dir" ]; then dir=$dir-$$; fi
mkdir -p "$dir"
ln -sfn "$(basename "$dir")" "$runs/demo-latest" 2>/dev/null || true
# everything the demo prints is also kept in DIR/demo.txt
exec > >(tee -a "$dir/demo.txt") 2>&1
trap '"$top/scripts/grid" down --dir "$dir" >/dev/null; echo "== results kept in $dir (demo.txt, logs/, state); run/demo-latest points at the newest demo"' EXIT
echo "== demo results go to $dir"
echo "== starting the hierarchy on 127.0.0.1: meta :$mport -> batch sites :$bport,:$((bport + 1))" \
    "-> cluster managers :$port,:$((port + 1)) -> 2 clients x 2 slots each"
"$top/scripts/grid" up --meta --dir "$dir" --sites 2 --clients 2 --slots 2 --port "$port" \
    --batch-port "$bport" --meta-port "$mport"
# the grid runs CURVE with keys it made (docs/security.md): talk to it as its admin
export GRIDNODE_KEY=$dir/keys/admin.key GRIDNODE_SERVER_KEY=$dir/keys/server.pub
unset GRIDNODE_PLAIN
# the sites schedule once their cluster managers reported their hosts
for s in 0 1; do
    for _ in $(seq 100); do
        [ "$("$bin" nodes -e "tcp://127.0.0.1:$((bport + s))" --json 2>/dev/null |
            grep -o '"active":true' | wc -l)" -ge 2 ] && break
        sleep 0.1
    done
done
sleep 2.5 # the spool's next SITE_INFO round (every 2 s) sees the sites' hosts

echo
echo "== submitting $njobs jobs to the grid spool (gridnode submit -e $meta):"
echo "   job k counts the primes up to k*30000 (seq | factor), then sleeps 3 s"
ids=""
for k in $(seq "$njobs"); do
    out=$("$bin" submit -e "$meta" --name "primes$k" --limit 120 --shell -- \
        "n=\$(( $k * 30000 )); c=\$(seq 2 \$n | factor | awk 'NF == 2' | wc -l); sleep 3; echo \"primes <= \$n: \$c (on \$GRIDNODE_NODE)\"")
    ids="$ids ${out#submitted job }"
    ids=${ids%% (*}
done
sleep 2
echo
echo "== the grid spool: where each job went (gridnode jobs -e $meta)"
"$bin" jobs -e "$meta"
for s in 1 2; do
    echo
    echo "== site$s, the batch role's queue (gridnode showq -e tcp://127.0.0.1:$((bport + s - 1)))"
    "$bin" showq -e "tcp://127.0.0.1:$((bport + s - 1))" | grep -v '^$'
    echo
    echo "== site$s, its cluster manager's jobs (gridnode jobs -e tcp://127.0.0.1:$((port + s - 1)))"
    "$bin" jobs -e "tcp://127.0.0.1:$((port + s - 1))" | sed -n '/parallel jobs/,$p' | tail -n +2
done

echo
echo "== waiting for every job at the spool (gridnode job ID -e $meta --wait)"
for id in $ids; do "$bin" job "$id" -e "$meta" --wait >/dev/null 2>&1 || true; done
"$bin" jobs -e "$meta"

echo
echo "== results back at the top: each job's output, read down its path"
echo "   (spool job -> site job -> cluster job: gridnode job ID -e EP --json at each level)"
for id in $ids; do
    "$bin" job "$id" -e "$meta" --json | /usr/bin/python3 -c '
import json, subprocess, sys
bin, bport, port = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
j = json.load(sys.stdin)["job"]
def get(jid, ep):
    r = subprocess.run([bin, "job", str(jid), "-e", ep, "--json"], capture_output=True, text=True)
    return json.loads(r.stdout) if r.returncode == 0 else {}
line = "spool job %d %-9s %s exit %s" % (j["job"], j["name"], j["gstate"], j["exit"])
if j["site"]:
    s = int(j["site"][4:])
    t = (get(j["site_job"], "tcp://127.0.0.1:%d" % (bport + s - 1)).get("tasks") or [{}])[0]
    c = get(t.get("cjob", 0), "tcp://127.0.0.1:%d" % (port + s - 1)) if t.get("cjob") else {}
    ranks = c.get("job", {}).get("ranks") or [{}]
    line += " | %s job %d | cluster job %s | %s" % (j["site"], j["site_job"], t.get("cjob", "-"),
                                                  (ranks[0].get("stdout") or "").strip())
print(line)' "$bin" "$bport" "$port"
done
echo
echo "== stopping the grid"
