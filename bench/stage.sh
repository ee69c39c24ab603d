#!/usr/bin/env bash
# Files through the grid (issue 26, evidence 8; docs/data.md). One cluster manager with
# CURVE on (keys from gridnode keygen) and real `gridnode client` nodes. Two JSON lines:
#   stage: one input of STAGE_MB MiB (random bytes) given to one task with `submit
#     --input` and fetched by one node: "mb_s" from the start of `gridnode submit` until
#     the task is done (hash and upload to the cluster, download to the node with its
#     hash checked, placed in the task's directory), "upload_mb_s" and "node_mb_s" the
#     two halves (until `gridnode submit` returns, and after: with cut-through the node
#     fetches while the tool uploads, so the second half is only what the node had left
#     when the upload ended), beside "cp_mb_s" of a plain `cp` of the same file;
#     "ratio" = mb_s / cp_mb_s (target >= 0.30), "node_ratio" = node_mb_s / cp_mb_s.
#   stage_fanout: STAGE_TASKS tasks on 8 nodes sharing one FANOUT_MB MiB input:
#     "bytes_moved" (the nodes' bytes_fetched, from `gridnode client status`) against
#     "target_bytes" = 1.1 x 8 x the input, and "seconds" from submission until done.
# Knobs: STAGE_MB (1024), FANOUT_MB (100), STAGE_TASKS (1000), STAGE_SYNC (full),
# STAGE_PLAIN (set: no CURVE, for the comparison; "curve":false), STAGE_FANOUT (0: the
# first line only, for runs alternated with another binary), STAGE_LOG (the
# clients' log level, warn); --quick: STAGE_MB 256, STAGE_TASKS 200 (said in the JSON:
# "mb", "tasks"). The whole run takes about 80 s on a 2-core machine.
# Where the time goes (docs/data.md "Speed", a table per stage): the tool hashes, then
# uploads the first chunk, submits and uploads the rest while the node (told by its held
# WORK_WAIT) downloads (cut-through), and every hop spends CPU on SHA-256, CURVE and
# copies: about 3.0-3.4 s of CPU per 256 MiB, the limit on a 2-core machine.
set -eu
cd "$(dirname "$0")/.."
BUILD="${BUILD:-build}"
MB="${STAGE_MB:-1024}"
FMB="${FANOUT_MB:-100}"
TASKS="${STAGE_TASKS:-1000}"
SYNC="${STAGE_SYNC:-full}"
if [ "${1:-}" = --quick ]; then
    MB="${STAGE_MB:-256}"
    TASKS="${STAGE_TASKS:-200}"
fi
gridnode="$BUILD/gridnode"
[ -x "$gridnode" ] || { echo "stage: $gridnode not built (make BUILD=$BUILD)" >&2; exit 1; }

. bench/lib.sh
bench_init stage

# keys: the cluster's, the bench user's (an admin) and one node key for every client
bench_keys admin
"$gridnode" keygen -d "$tmp/keys" node >/dev/null
echo "$(tail -1 "$tmp/keys/node.pub") node node" >>"$tmp/keys/authorized_keys"
if [ -n "${STAGE_PLAIN:-}" ]; then mode=plain; else mode=curve; fi
bench_security $mode
bench_cluster "$tmp/cluster" "$tmp/cluster.err" --set "store.sync=$SYNC" "${sec[@]}" \
    --set tasks.heartbeat_s=2 --set "files.job_mb=$((MB + FMB + 16))"
cpid=$pid

if [ $mode = curve ]; then
    nsec=(--set "security.secret_key=$tmp/keys/node.key" --set "security.server_key=$tmp/keys/server.pub"
          --set "security.authorized_keys=$tmp/keys/authorized_keys")
else
    nsec=(--set security.plain=true)
fi
now() { date +%s.%N; }
secs() { awk -v a="$2" -v b="$1" 'BEGIN{printf "%.3f", a - b}'; }

# start_node NAME: a client with the node key
start_node() {
    bench_spawn "$tmp/$1.err" "$gridnode" client --set "client.server=$endpoint" \
        --set "client.state_dir=$tmp/$1" --set "client.name=$1" --set client.slots=2 \
        --set "client.log_level=${STAGE_LOG:-warn}" --set client.parallel=false --set "store.sync=$SYNC" \
        "${nsec[@]}" \
        --set "client.cache_mb=$((MB + FMB + 16))"
    nodes="$nodes $pid"
}

# wait_done JOB NTASKS: until the job's tasks are all done (bounded: 600 s)
wait_done() {
    local js n t0
    t0=$(date +%s)
    while :; do
        js="$("$gridnode" job -e "$endpoint" --json --summary "$1" 2>/dev/null || true)"
        n="$(printf '%s' "$js" | sed -n 's/.*"done": *\([0-9]*\).*/\1/p' | head -n 1)"
        [ "${n:-0}" -ge "$2" ] && return 0
        printf '%s' "$js" | grep -q '"state": *"failed"' && { echo "stage: job $1 failed" >&2; exit 1; }
        [ $(($(date +%s) - t0)) -lt 600 ] || { echo "stage: job $1 not done in 600 s" >&2; exit 1; }
        kill -0 "$cpid" 2>/dev/null || { echo "stage: the cluster died:" >&2; tail -n 20 "$tmp/cluster.err" >&2; exit 1; }
        for p in $nodes; do
            kill -0 "$p" 2>/dev/null || { echo "stage: a client died:" >&2; tail -n 5 "$tmp"/*.err >&2; exit 1; }
        done
        sleep 0.05
    done
}

job_of() { sed -n 's/.*"job": *\([0-9]*\).*/\1/p'; }

# ---- stage: one large input to one node ----
nodes=""
start_node n0
head -c $((MB << 20)) /dev/urandom >"$tmp/big.bin"
sync
t0=$(now)
cp "$tmp/big.bin" "$tmp/big.cp"
sync "$tmp/big.cp" 2>/dev/null || sync
t1=$(now)
cp_s=$(secs "$t0" "$t1")
rm -f "$tmp/big.cp"
echo "stage: cluster $cpid on $endpoint (CURVE), one node; $MB MiB" >&2
t0=$(now)
job="$("$gridnode" submit -e "$endpoint" --json --input "$tmp/big.bin" -- test -s big.bin | job_of)"
[ -n "$job" ] || { echo "stage: submit failed" >&2; exit 1; }
t1=$(now)
wait_done "$job" 1
t2=$(now)
awk -v mb="$MB" -v c="$cp_s" -v up="$(secs "$t0" "$t1")" -v nd="$(secs "$t1" "$t2")" \
    -v all="$(secs "$t0" "$t2")" -v c2="$([ $mode = curve ] && echo true || echo false)" 'BEGIN{
    cr = mb / c; r = mb / all; n = mb / nd
    printf "{\"bench\":\"stage\",\"mb\":%d,\"seconds\":%.3f,\"mb_s\":%.1f,\"upload_mb_s\":%.1f,\"node_mb_s\":%.1f,\"cp_mb_s\":%.1f,\"ratio\":%.3f,\"node_ratio\":%.3f,\"curve\":%s}\n", mb, all, r, mb / up, n, cr, r / cr, n / cr, c2 }'
for p in $nodes; do bench_stop "$p"; done
rm -f "$tmp/big.bin"
rm -rf "$tmp/n0"

[ "${STAGE_FANOUT:-1}" = 0 ] && exit 0 # the single-file figure only (alternated runs)

# ---- stage_fanout: one shared input, 8 nodes ----
nodes=""
for i in 1 2 3 4 5 6 7 8; do start_node "f$i"; done
head -c $((FMB << 20)) /dev/urandom >"$tmp/shared.bin"
echo "stage: $TASKS tasks on 8 nodes sharing $FMB MiB" >&2
t0=$(now)
job="$("$gridnode" submit -e "$endpoint" --json -n "$TASKS" --input "$tmp/shared.bin" -- \
    test -s shared.bin | job_of)"
[ -n "$job" ] || { echo "stage: submit failed" >&2; exit 1; }
wait_done "$job" "$TASKS"
t1=$(now)
moved=0
for i in 1 2 3 4 5 6 7 8; do
    b="$(GRIDNODE_SERVER_KEY="$tmp/keys/node.pub" "$gridnode" client status -s "$tmp/f$i" --json 2>/dev/null |
        sed -n 's/.*"bytes_fetched": *\([0-9]*\).*/\1/p' | head -n 1)"
    moved=$((moved + ${b:-0}))
done
awk -v n="$TASKS" -v mb="$FMB" -v m="$moved" -v s="$(secs "$t0" "$t1")" 'BEGIN{
    tgt = 1.1 * 8 * mb * 1048576
    printf "{\"bench\":\"stage_fanout\",\"tasks\":%d,\"nodes\":8,\"input_mb\":%d,\"bytes_moved\":%d,\"target_bytes\":%d,\"moved_vs_target\":%.3f,\"seconds\":%.3f}\n", n, mb, m, tgt, m / tgt, s }'
