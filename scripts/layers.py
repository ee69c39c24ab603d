#!/usr/bin/python3
"""layers.py - the rule that keeps gridnode's layers pointing down (docs/architecture.md).

    lib/            helpers: import nothing of the project
    wire/  store/   the codec and the only LMDB code: lib/ only
    daemon/         daemon skeleton, access control, CURVE, event loop, statistics pages
    roles/R/engine/ a role's policy: pure (lib/ and its own engine only; no zmq, no LMDB)
    roles/R/sim/    a role's simulator (emulate/ for the client): the engine, lib/; pure too
    roles/R/...     a role's live driver and the rest of the role: everything below
    cmd/            the tools and the role entry points: everything

A role uses another role only where the hierarchy says so: the meta role's simulator runs
batch engines (roles/batch/engine, roles/batch/sim, roles/batch/conffile).

Usage: layers.py [--objects BUILD/obj]   checks every #include "..." of the tree (run from
the top of the checkout); with --objects, also that no object of a pure folder calls zmq,
LMDB, the store or the daemon layer (nm -u). Prints each violation; exit 1 if any.
"""
import os
import re
import subprocess
import sys

SRC_DIRS = ["lib", "wire", "store", "daemon", "roles", "cmd"]
INC = re.compile(r'^\s*#\s*include\s*([<"])([^">]+)[">]', re.M)
PURE_SYSTEM = {"zmq.h", "lmdb.h", "microhttpd.h"}
PURE_SYMBOLS = re.compile(r"^(zmq_|zmqdl_|mdb_|store_|loop_|daemon_|curve_|access_|netopts_|"
                          r"statspage_|httpstats_)")
# A role's folders whose code must stay pure.
PURE_SUB = {"engine", "sim", "emulate"}
# Cross-role uses the hierarchy allows: (from role, to prefix).
CROSS = {("meta", "roles/batch/engine/"), ("meta", "roles/batch/sim/"),
         ("meta", "roles/batch/conffile.h")}


def layer_of(path):
    """(layer name, role or None, role subfolder or None)."""
    parts = path.split("/")
    if parts[0] == "roles":
        sub = parts[2] if len(parts) > 3 else None
        return "roles", parts[1], sub
    return parts[0], None, None


def allowed(src, dst):
    """None when src may include dst, else the rule it breaks."""
    ls, rs, ss = layer_of(src)
    ld, rd, sd = layer_of(dst)
    below = {"lib": set(), "wire": {"lib"}, "store": {"lib"},
             "daemon": {"lib", "wire", "store"},
             "roles": {"lib", "wire", "store", "daemon"},
             "cmd": {"lib", "wire", "store", "daemon", "roles"}}
    if ls == ld and ls != "roles":
        return None
    if ls != "roles":
        return None if ld in below[ls] else f"{ls}/ may not use {ld}/ (it is not below)"
    # src is in a role.
    pure = ss in PURE_SUB
    if ld != "roles":
        if ld not in below["roles"]:
            return f"roles/ may not use {ld}/ (it is not below)"
        if pure and ld != "lib":
            return f"roles/{rs}/{ss}/ is pure: it may use lib/ only, not {ld}/"
        return None
    if rd != rs:
        if any(rs == r and dst.startswith(p) for r, p in CROSS):
            return None
        return f"role {rs} may not use role {rd} (not a use the hierarchy allows)"
    if ss == "engine" and sd != "engine":
        return f"roles/{rs}/engine/ is the policy: it may not use the role's {sd or 'top'}/"
    if ss in ("sim", "emulate") and sd not in ("engine", ss, None):
        return f"roles/{rs}/{ss}/ may not use roles/{rs}/{sd}/ (a simulator drives the engine only)"
    if ss in ("sim", "emulate") and sd is None and dst.endswith(".h"):
        # the role's top-level shared files (conffile) are allowed
        return None
    return None


def check_includes():
    bad = []
    for top in SRC_DIRS:
        for dirpath, _, files in os.walk(top):
            for f in sorted(files):
                if not f.endswith((".c", ".h")):
                    continue
                src = os.path.join(dirpath, f)
                text = open(src, encoding="utf-8").read()
                for kind, inc in INC.findall(text):
                    if kind == "<":
                        ls, _, ss = layer_of(src)
                        if ls == "roles" and ss in PURE_SUB and inc in PURE_SYSTEM:
                            bad.append(f"{src}: includes <{inc}>: roles/*/{ss}/ is pure")
                        elif ls in ("lib", "wire") and inc in ("zmq.h", "lmdb.h"):
                            bad.append(f"{src}: includes <{inc}>: {ls}/ stays below the sockets and the store")
                        continue
                    if not os.path.exists(inc):
                        continue  # a header beside the file or of a library
                    why = allowed(src, inc)
                    if why:
                        bad.append(f"{src}: includes \"{inc}\": {why}")
    return bad


def check_objects(objdir):
    bad = []
    if not os.path.isdir(os.path.join(objdir, "roles")):
        return [f"no objects under {objdir}/roles: build first (make all)"]
    for role in sorted(os.listdir(os.path.join(objdir, "roles"))):
        for sub in sorted(PURE_SUB):
            d = os.path.join(objdir, "roles", role, sub)
            if not os.path.isdir(d):
                continue
            for f in sorted(os.listdir(d)):
                if not f.endswith(".o"):
                    continue
                out = subprocess.run(["nm", "-u", os.path.join(d, f)], capture_output=True,
                                     text=True, check=True).stdout
                for line in out.split("\n"):
                    sym = line.split()[-1] if line.split() else ""
                    if PURE_SYMBOLS.match(sym):
                        bad.append(f"roles/{role}/{sub}/{f[:-2]}.c calls {sym}: "
                                   f"roles/*/{sub}/ is pure (no sockets, no store)")
    return bad


def main():
    bad = check_includes()
    n = 1
    if len(sys.argv) == 3 and sys.argv[1] == "--objects":
        bad += check_objects(sys.argv[2])
        n = 2
    elif len(sys.argv) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    for b in bad:
        print("layers:", b)
    if bad:
        print(f"layers: {len(bad)} use(s) against the layer rule (scripts/layers.py)")
        return 1
    print(f"layers: every include{' and pure object' if n == 2 else ''} points down")
    return 0


if __name__ == "__main__":
    sys.exit(main())
