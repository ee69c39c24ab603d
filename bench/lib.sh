# bench/lib.sh - what the benchmark scripts share (sourced, not run): a temporary
# directory removed at exit together with every process started through it, cluster
# managers started on a free loopback port and stopped by PID, and CURVE keys.
#
#   bench_init NAME            tmp=a fresh directory; traps for the cleanup
#   bench_spawn LOG CMD...     starts CMD (stdout LOG.out, stderr LOG); pid=its PID
#   bench_cluster STATE LOG ARGS...
#                              a cluster manager on tcp://127.0.0.1:*, state in STATE,
#                              more --set ARGS; waits for it: pid, endpoint
#   bench_stop PID             SIGTERM, SIGKILL after 5 s
#   stop_cluster               bench_stop "$pid"
#   bench_keys KIND            $tmp/keys: a server key and a "bench" key admitted as KIND
#   bench_security curve|plain sets sec=(--set ...) for a role and the tools' environment
#
# PIDs go to $tmp/pids, so processes started inside $(...) subshells are stopped at
# exit too. gridnode must be set by the caller.

bench_stop() {
    local p="$1"
    [ -n "$p" ] && kill -0 "$p" 2>/dev/null || return 0
    kill -TERM "$p" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$p" 2>/dev/null || true
    wait "$p" 2>/dev/null || true
}

bench_cleanup() {
    local p
    if [ -f "$tmp/pids" ]; then
        while read -r p; do bench_stop "$p"; done <"$tmp/pids"
    fi
    rm -rf "$tmp"
}

bench_init() {
    bench_name=$1
    tmp="$(mktemp -d "${TMPDIR:-/tmp}/gridnode-bench-$1.XXXXXX")"
    pid=""
    trap bench_cleanup EXIT
    trap 'exit 130' INT TERM
}

bench_spawn() {
    local log=$1
    shift
    "$@" >"${log%.err}.out" 2>"$log" &
    pid=$!
    echo "$pid" >>"$tmp/pids"
}

bench_cluster() {
    local state=$1 log=$2
    shift 2
    bench_spawn "$log" "$gridnode" cluster --set "cluster.listen=tcp://127.0.0.1:*" \
        --set "cluster.state_dir=$state" --set cluster.log_level=warn "$@"
    for _ in $(seq 100); do
        [ -s "$state/endpoint" ] && break
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    if [ ! -s "$state/endpoint" ]; then
        echo "$bench_name: the cluster did not start:" >&2
        cat "$log" >&2
        exit 1
    fi
    endpoint="$(cat "$state/endpoint")"
}

stop_cluster() {
    bench_stop "$pid"
    pid=""
}

bench_keys() {
    mkdir -p "$tmp/keys"
    "$gridnode" keygen -d "$tmp/keys" server >/dev/null
    "$gridnode" keygen -d "$tmp/keys" bench >/dev/null
    echo "$(tail -1 "$tmp/keys/bench.pub") bench $1" >"$tmp/keys/authorized_keys"
}

bench_security() {
    if [ "$1" = plain ]; then
        sec=(--set security.plain=true)
        export GRIDNODE_PLAIN=1
    else
        sec=(--set "security.secret_key=$tmp/keys/server.key"
             --set "security.authorized_keys=$tmp/keys/authorized_keys")
        unset GRIDNODE_PLAIN
        export GRIDNODE_KEY="$tmp/keys/bench.key" GRIDNODE_SERVER_KEY="$tmp/keys/server.pub"
    fi
}
