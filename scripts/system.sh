#!/usr/bin/env bash
# system.sh - the system tests (tests/system) against the plain and the sanitizer
# binary at once: `make system`, part of the README's test command.
#
# The suite spends most of its time waiting for real processes (about 12 % of a core
# measured over test_requeue2, test_job_wait and test_events), so the two runs share a
# 2-core machine well: run one after the other they took 17 and 15 minutes, together
# about as long as the longer one. Every test already tolerates a slow, busy machine
# (bounded waits, scaled() for the sanitizer build, no timing assertions), ports are
# picked by the kernel and each run has its own pytest base directory.
#
# The plain run prints as it goes; the sanitizer run's output is kept in
# BUILD/system-asan.log and printed when it ends. Exits non-zero if either failed.
# SYSTEM_SERIAL=1 runs them one after the other instead (e.g. to read one failure).
set -u
cd "$(dirname "$0")/.."
BUILD="${BUILD:-build}"
PYTEST=(/usr/bin/python3 -m pytest -q -p no:cacheprovider --durations=15)
plain_bin="$(realpath "$BUILD/gridnode")"
asan_bin="$(realpath "$BUILD/asan/gridnode")"
log="$BUILD/system-asan.log"
bt="$(mktemp -d /tmp/gridnode-system.XXXXXX)"
asan_pid=
cleanup() {
    if [ -n "$asan_pid" ] && kill -0 "$asan_pid" 2>/dev/null; then
        kill -INT -- "-$asan_pid" 2>/dev/null # its own group (set -m): pytest cleans up
        wait "$asan_pid" 2>/dev/null
    fi
    rm -rf "$bt"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

run_plain() {
    GRIDNODE_BIN="$plain_bin" "${PYTEST[@]}" --basetemp="$bt/plain" tests/system
}
run_asan() {
    GRIDNODE_BIN="$asan_bin" GRIDNODE_ASAN=1 "${PYTEST[@]}" --basetemp="$bt/asan" \
        -m "not slow" tests/system
}

if [ -n "${SYSTEM_SERIAL:-}" ]; then
    run_plain
    p=$?
    run_asan
    a=$?
else
    echo "system: the sanitizer run goes on beside this one; its output: $log"
    set -m # the sanitizer run gets its own process group, and SIGINT is not ignored in it
    run_asan </dev/null >"$log" 2>&1 &
    asan_pid=$!
    set +m
    run_plain
    p=$?
    [ -t 1 ] && echo "system: waiting for the sanitizer run (tail -f $log)"
    wait "$asan_pid"
    a=$?
    asan_pid=
    echo "== the sanitizer run ($asan_bin):"
    cat "$log"
fi
echo "system: plain run exit $p, sanitizer run exit $a"
[ "$p" -eq 0 ] && [ "$a" -eq 0 ]
