#!/bin/sh
# Builds peak and runs its whole test suite (the README's second Quick-start
# line).  Installs missing Debian packages first (as root), so it works on a
# fresh Debian 12 machine.  Usage: scripts/test.sh [build-dir] [meson setup args...]
# e.g. scripts/test.sh build-asan -Db_sanitize=address,undefined
set -eu
cd "$(dirname "$0")/.."
sh scripts/install-deps.sh
dir=${1:-build-test}
[ $# -gt 0 ] && shift
if [ ! -f "$dir/build.ninja" ]; then
    meson setup "$dir" --buildtype=debugoptimized "$@"
elif [ $# -gt 0 ]; then
    meson setup --reconfigure "$dir" "$@"
fi
ninja -C "$dir"
# -v prints every test's own output: Check's summary lines
# ("100%: Checks: N, Failures: 0, Errors: 0") and each SKIP's reason.
meson test -C "$dir" -v --num-processes 2
