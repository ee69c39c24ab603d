#!/usr/bin/env bash
# Installs the Debian packages gridnode needs, if any are missing. Idempotent.
# Runs apt-get as root, or through sudo when not root.
set -eu
pkgs="build-essential pkg-config libzmq3-dev libmsgpack-dev liblmdb-dev lmdb-utils
      libinih-dev libjansson-dev libsodium-dev libcmocka-dev zlib1g-dev python3-pytest python3-zmq
      python3-msgpack clang clang-format libclang-rt-14-dev procps libmicrohttpd-dev chromium"
# A private single-node Slurm for tests/system/test_meta_slurm.py and bench/slurm_site.sh
# (issue 14): the daemons are started by the tests themselves, never as services.
pkgs="$pkgs slurmctld slurmd slurm-client munge"
missing=""
for p in $pkgs; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing="$missing $p"
done
if [ -z "$missing" ]; then
    echo "deps: all packages present"
    exit 0
fi
echo "deps: installing:$missing"
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
# Package scripts try to start munge/slurmctld/slurmd through invoke-rc.d: a machine
# without a policy-rc.d of its own gets a temporary one that denies it.
made_policy=0
if [ ! -e /usr/sbin/policy-rc.d ]; then
    printf '#!/bin/sh\nexit 101\n' | $sudo tee /usr/sbin/policy-rc.d >/dev/null
    $sudo chmod 755 /usr/sbin/policy-rc.d
    made_policy=1
fi
rc=0
$sudo apt-get install -y -qq --no-install-recommends $missing || rc=$?
[ "$made_policy" -eq 0 ] || $sudo rm -f /usr/sbin/policy-rc.d
exit $rc
