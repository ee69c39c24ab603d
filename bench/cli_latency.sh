#!/usr/bin/env bash
# The user tools' latency, whole process: `gridnode submit -- true` and `gridnode jobs`
# against a local cluster manager the benchmark starts and stops itself (median of
# 200 calls each; target under 5 ms). One JSON line:
#   {"bench":"cli_latency","submit_ms":...,"jobs_ms":...,"true_ms":...,...}
set -eu
export GRIDNODE_PLAIN="${GRIDNODE_PLAIN-1}" # plain on loopback, as bench/run.sh (docs/security.md)
cd "$(dirname "$0")/.."
BUILD="${BUILD:-build}"
gridnode="$BUILD/gridnode"
[ -x "$gridnode" ] || { echo "cli_latency: $gridnode not built (make BUILD=$BUILD)" >&2; exit 1; }
exec /usr/bin/python3 bench/cli_latency.py "$gridnode" "${CLI_CALLS:-200}"
