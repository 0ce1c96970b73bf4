#!/bin/sh
# Builds the API reference from include/peak.h's docstrings with Doxygen and
# checks that it is complete (any undocumented public symbol, parameter,
# return value or missing errors/thread-safety/source section fails).
# Installs missing Debian packages first (as root).  Output:
# $PEAK_BUILD_DIR/doc/html/index.html (build/ by default).
set -eu
cd "$(dirname "$0")/.."
sh scripts/install-deps.sh
dir=${PEAK_BUILD_DIR:-build}
if [ ! -f "$dir/build.ninja" ]; then
    meson setup "$dir" -Ddocs=enabled
elif ! ninja -C "$dir" -t query docs >/dev/null 2>&1; then
    # Configured before doxygen was installed, or with -Ddocs=disabled.
    meson configure "$dir" -Ddocs=enabled
fi
ninja -C "$dir" docs
