#!/usr/bin/env bash
# Scheduling cost of the multi-project volunteer client (issue 11 item 12): one real
# `gridnode client` (2 slots, the default engine settings) attached to P projects (P
# real cluster managers, store.sync=none) holding N queued tasks in all (`sleep 3600`,
# N/P per project, fetched through ordinary RPCs: the buffer is set large enough to
# hold them; sched.poll_s = 1 instead of 60, so filling takes seconds and the work-fetch
# check runs 60 times as often as by default: an upper bound). Once the client holds N tasks, the engine's CPU time (CLIENT_STATE
# sched_cpu_s: tick, schedule, work fetch) is measured over W seconds, and the whole
# client process's CPU time (/proc: heartbeats to P clusters, status requests...) too.
# Prints one JSON line on stdout:
#   {"bench":"client_sched","projects":P,"tasks":N,"held":...,"window_s":W,
#    "sched_cpu_s":...,"core_fraction":...,"process_cpu_s":...,"fill_s":...}
# Knobs: SCHED_PROJECTS (20), SCHED_TASKS (1000), SCHED_WINDOW (30), SCHED_FILL_S (90:
# the longest wait for the client to hold the tasks; it is measured with what it holds).
set -eu
export GRIDNODE_PLAIN="${GRIDNODE_PLAIN-1}" # plain on loopback, as bench/run.sh (docs/security.md)
cd "$(dirname "$0")/.."
BUILD="${BUILD:-build}"
P="${SCHED_PROJECTS:-20}"
N="${SCHED_TASKS:-1000}"
W="${SCHED_WINDOW:-30}"
FILL_S="${SCHED_FILL_S:-90}"
gridnode="$BUILD/gridnode"
[ -x "$gridnode" ] || { echo "client_sched: $gridnode not built (make BUILD=$BUILD)" >&2; exit 1; }

tmp="$(mktemp -d "${TMPDIR:-/tmp}/gridnode-bench-sched.XXXXXX")"
pids=()
stop() { # pid: TERM, wait up to 5 s, KILL
    local p="$1"
    kill -0 "$p" 2>/dev/null || return 0
    kill -TERM "$p" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$p" 2>/dev/null || true
    wait "$p" 2>/dev/null || true
}
cleanup() {
    for p in "${pids[@]}"; do stop "$p"; done
    rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

ini="$tmp/client.ini"
printf '[client]\nstate_dir = %s/client\nslots = 2\nlog_level = warn\n[sched]\nmin_buf = 100000\nadditional_buf = 100000\npoll_s = 1\n' "$tmp" >"$ini"
per=$(( (N + P - 1) / P ))
for i in $(seq "$P"); do
    "$gridnode" cluster --set "cluster.listen=tcp://127.0.0.1:*" --set "cluster.state_dir=$tmp/c$i" \
        --set cluster.log_level=warn --set store.sync=none >"$tmp/c$i.out" 2>"$tmp/c$i.err" &
    pids+=($!)
done
for i in $(seq "$P"); do
    for _ in $(seq 200); do [ -s "$tmp/c$i/endpoint" ] && break; sleep 0.1; done
    [ -s "$tmp/c$i/endpoint" ] || { echo "client_sched: cluster $i did not start" >&2; cat "$tmp/c$i.err" >&2; exit 1; }
    ep="$(cat "$tmp/c$i/endpoint")"
    "$gridnode" submit -e "$ep" -n "$per" -- sleep 3600 >/dev/null
    printf '[project p%d]\nshare = %d\nendpoints = %s\n' "$i" "$i" "$ep" >>"$ini"
done
"$gridnode" client -c "$ini" >"$tmp/client.out" 2>"$tmp/client.err" &
cpid=$!
pids+=($cpid)
status() { "$gridnode" client status -s "$tmp/client" --json 2>/dev/null || true; }
field() { /usr/bin/python3 -c 'import json,sys
try:
    d = json.load(sys.stdin)
except ValueError:
    print(-1); sys.exit()
print(len(d["tasks"]) if sys.argv[1] == "tasks" else d[sys.argv[1]])' "$1"; }
t0=$(date +%s.%N)
held=0
while :; do
    held="$(status | field tasks)"
    el="$(awk -v a="$(date +%s.%N)" -v b="$t0" 'BEGIN{print a - b}')"
    [ "$held" -ge "$N" ] && break
    awk -v e="$el" -v l="$FILL_S" 'BEGIN{exit !(e > l)}' && { echo "client_sched: holds $held of $N after $FILL_S s" >&2; "$gridnode" client status -s "$tmp/client" 2>&1 | head -25 >&2; break; }
    kill -0 "$cpid" 2>/dev/null || { echo "client_sched: the client died:" >&2; tail -n 20 "$tmp/client.err" >&2; exit 1; }
    sleep 1
done
echo "client_sched: $P projects, the client holds $held tasks after $el s; measuring $W s" >&2
proc_cpu() { awk '{print $14 + $15}' "/proc/$cpid/stat"; }
s0="$(status | field sched_cpu_s)"
p0="$(proc_cpu)"
w0=$(date +%s.%N)
sleep "$W"
s1="$(status | field sched_cpu_s)"
p1="$(proc_cpu)"
w1=$(date +%s.%N)
awk -v p="$P" -v n="$N" -v h="$held" -v s0="$s0" -v s1="$s1" -v a="$w1" -v b="$w0" -v f="$el" \
    -v p0="$p0" -v p1="$p1" -v hz="$(getconf CLK_TCK)" 'BEGIN{
    w = a - b; c = s1 - s0
    printf "{\"bench\":\"client_sched\",\"projects\":%d,\"tasks\":%d,\"held\":%d,\"window_s\":%.1f,\"sched_cpu_s\":%.4f,\"core_fraction\":%.5f,\"process_cpu_s\":%.3f,\"fill_s\":%.1f}\n", p, n, h, w, c, (w > 0 ? c / w : 0), (p1 - p0) / hz, f }'
