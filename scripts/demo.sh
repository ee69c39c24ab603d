#!/usr/bin/env bash
# scripts/demo.sh - the README's demo: a local grid (one cluster manager, four
# clients) counts primes in 200 ranges as 200 real tasks, shows progress, the results
# and the per-node statistics, then stops the grid. Run through `make demo`.
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
bin=$top/build/gridnode
dir=${DEMO_DIR:-$top/run/demo}
port=${DEMO_PORT:-7300}
export GRIDNODE_CLUSTER=tcp://127.0.0.1:$port
rm -rf "$dir"
trap '"$top/scripts/grid" down --dir "$dir" >/dev/null' EXIT
echo "== starting a local grid: 1 cluster manager + 4 clients on 127.0.0.1:$port"
"$top/scripts/grid" up --dir "$dir" --port "$port" --clients 4 --slots 2
# the grid runs CURVE with keys it made (docs/security.md): talk to it as its admin
export GRIDNODE_KEY=$dir/keys/admin.key GRIDNODE_SERVER_KEY=$dir/keys/server.pub
unset GRIDNODE_PLAIN
sleep 1
echo
echo "== submitting 200 tasks: task i counts the primes up to (i+1)*2000"
job=$("$bin" submit --json -n 200 --name primes --shell -- \
    'n=$(( ({i} + 1) * 2000 )); c=$(seq 2 $n | factor | awk "NF == 2" | wc -l); echo "primes <= $n: $c"' \
    | sed 's/.*"job":\([0-9]*\).*/\1/')
echo "job $job submitted"
"$bin" job "$job" --wait --summary
echo
echo "== results (first and last tasks)"
"$bin" job "$job" --output --count 3 | sed -n '3,$p'
"$bin" job "$job" --output --from 197 --count 3 | sed -n '4,$p'
echo
echo "== per-node statistics (X-Com node table; also $dir/cluster/stats.html)"
"$bin" nodes
echo
echo "== stopping the grid"
