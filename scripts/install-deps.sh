#!/bin/sh
# Installs the Debian 12 packages peak needs to build, test and run its demo.
# Idempotent: packages already present are not touched, and apt is not even
# called when nothing is missing.  Usage: scripts/install-deps.sh [extra-pkg ...]
set -eu

pkgs="gcc g++ meson ninja-build pkg-config libsleef-dev check libsubunit-dev \
libbenchmark-dev libopenblas-dev"

missing=""
for p in $pkgs "$@"; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
        missing="$missing $p"
    fi
done
[ -z "$missing" ] && exit 0

if [ "$(id -u)" -ne 0 ]; then
    echo "install-deps: missing packages:$missing (run as root, or install them)" >&2
    exit 1
fi
echo "install-deps: installing$missing" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -o DPkg::Lock::Timeout=600 -qq
# shellcheck disable=SC2086
apt-get install -y -qq -o DPkg::Lock::Timeout=600 --no-install-recommends $missing >/dev/null
