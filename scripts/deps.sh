#!/usr/bin/env bash
# Installs the Debian packages gridnode needs, if any are missing. Idempotent.
# Runs apt-get as root, or through sudo when not root.
set -eu
pkgs="build-essential pkg-config libzmq3-dev libmsgpack-dev liblmdb-dev lmdb-utils
      libinih-dev libjansson-dev libcmocka-dev zlib1g-dev python3-pytest python3-zmq
      python3-msgpack clang libclang-rt-14-dev procps libmicrohttpd-dev chromium"
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
$sudo apt-get install -y -qq --no-install-recommends $missing
