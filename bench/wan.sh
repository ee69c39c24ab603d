#!/usr/bin/env bash
# Wide-area benchmark (issue 16; issue 28 3b): 500 short tasks and 24 long ones (5 s) on
# 4 clients x 2 slots, the cluster manager, each client and the user tool in their own
# network namespace joined by tests/net's link emulator, at 0, 200 and 500 ms delay
# each way, in two forms: "clean" (0.1 s short tasks, a fixed delay) and "jitter"
# (0.05 s short tasks, each one-way delay varying by +-25 %, uniform, packets of a
# connection kept in order). One JSON line per form and delay:
#   {"bench":"wan","form":"clean","short_s":0.1,"jitter_pct":0,"delay_ms":200,
#    "wall_s":...,"grid_s":...,"submit_s":...,"wait_s":...,"tasks":524,"reissued":...,
#    "ratio":...}
# What a user does: two `gridnode submit`, then one `gridnode job --wait --summary --json
# ID1 ID2`. wall_s: as the user sees it (the tools' own round trips included); submit_s
# and wait_s: its two parts; grid_s: the first job's submission to the last job's end,
# as the cluster recorded them; ratio: wall_s over the same form's at 0 ms (targets:
# 1.25 at 200 ms, 1.5 at 500 ms). Each point on a fresh grid; the other tool calls
# (waiting for the 4 clients, counting re-issues) go from the cluster's namespace.
# Needs root (namespaces, TUN); otherwise one line {"bench":"wan","skipped":"..."}.
# Knobs: WAN_DELAYS ("0 200 500"), WAN_FORMS ("clean jitter"), WAN_JITTER_PCT (25),
# WAN_CLEAN_DELAYS (the clean form's, default WAN_DELAYS; make bench: "0 500"),
# WAN_LIMIT_S (300 per point), WAN_KEEP (a folder: the roles' logs kept there).
set -eu
cd "$(dirname "$0")/.."
BUILD="${BUILD:-build}"
for f in "$BUILD/gridnode" "$BUILD/net/linkemu"; do
    [ -x "$f" ] || { echo "wan: $f not built (make BUILD=$BUILD bench)" >&2; exit 1; }
done
exec /usr/bin/python3 bench/wan.py "$BUILD/gridnode" ${WAN_DELAYS:-0 200 500}
