#!/bin/sh
# Builds peak and runs peak-demo (the README's first Quick-start line): the
# PyTorch PositionalEncoding example (a [5000, 512] table added to a
# [2, 50, 512] batch of word embeddings) carried through one encoder and one
# decoder layer, checked against PyTorch's outputs committed in tests/data.
# Installs missing Debian packages first (as root), so it works on a fresh
# Debian 12 machine.  Usage: scripts/demo.sh [peak-demo options...]
# e.g. scripts/demo.sh --isa avx2; the build dir is $PEAK_BUILD_DIR or build/.
set -eu
cd "$(dirname "$0")/.."
sh scripts/install-deps.sh
dir=${PEAK_BUILD_DIR:-build}
if [ ! -f "$dir/build.ninja" ]; then
    meson setup "$dir" -Ddemo=enabled
elif ! ninja -C "$dir" -t query examples/peak-demo >/dev/null 2>&1; then
    # Configured before OpenBLAS was installed, or with -Ddemo=disabled:
    # asking for the demo makes meson reconfigure (or say why it cannot).
    meson configure "$dir" -Ddemo=enabled
fi
# Only the demo and the library: a unit test that does not build yet must not
# stop the demo.
ninja -C "$dir" examples/peak-demo
exec "$dir/examples/peak-demo" "$@"
