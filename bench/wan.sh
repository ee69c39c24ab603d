#!/usr/bin/env bash
# Wide-area benchmark (issue 16): 500 short tasks (0.1 s) and 24 long ones (5 s) on
# 4 clients x 2 slots, the cluster manager, each client and the user tool in their own
# network namespace joined by tests/net's link emulator, at 0, 200 and 500 ms delay
# each way. One JSON line per delay:
#   {"bench":"wan","delay_ms":200,"wall_s":...,"grid_s":...,"submit_s":...,"wait_s":...,
#    "tasks":524,"reissued":...}
# What a user does: two `gridnode submit`, then one `gridnode job --wait --summary --json
# ID1 ID2`. wall_s: as the user sees it (the tools' own round trips included); submit_s
# and wait_s: its two parts; grid_s: the first job's submission to the last job's end,
# as the cluster recorded them.
# Needs root (namespaces, TUN); otherwise one line {"bench":"wan","skipped":"..."}.
# Knobs: WAN_DELAYS ("0 200 500"), WAN_LIMIT_S (300 per delay).
set -eu
cd "$(dirname "$0")/.."
BUILD="${BUILD:-build}"
for f in "$BUILD/gridnode" "$BUILD/net/linkemu"; do
    [ -x "$f" ] || { echo "wan: $f not built (make BUILD=$BUILD bench)" >&2; exit 1; }
done
exec /usr/bin/python3 bench/wan.py "$BUILD/gridnode" ${WAN_DELAYS:-0 200 500}
