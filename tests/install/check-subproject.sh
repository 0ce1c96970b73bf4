#!/bin/sh
# check-subproject.sh - use peak as a meson subproject, the way the README
# says: a tiny project with subprojects/peak, `subproject('peak')` (or a
# wrap) and `dependency('peak')`, which peak's meson.override_dependency
# answers.  Builds the consumer (and so the library) from scratch and runs
# it.  Environment from meson test: PEAK_SOURCE_DIR, PEAK_SKIP (non-empty:
# print it and exit 77).
set -eu

if [ -n "${PEAK_SKIP:-}" ]; then
    echo "SKIP: $PEAK_SKIP"
    exit 77
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/peak-subproject.XXXXXX")
trap 'rm -rf "$tmp"' EXIT INT TERM
mkdir -p "$tmp/app/subprojects"
# A copy, not a symlink: meson requires a subproject's files to be inside
# subprojects/.  Only what a release tarball has (no build directories).
(cd "$PEAK_SOURCE_DIR" && tar cf - --exclude='./build*' --exclude=./.git --exclude='*/__pycache__' .) |
    (mkdir "$tmp/app/subprojects/peak" && cd "$tmp/app/subprojects/peak" && tar xf -)
cp "$PEAK_SOURCE_DIR/examples/quickstart.c" "$tmp/app/"
cat >"$tmp/app/meson.build" <<'MESON'
project('app', 'c', default_options : ['c_std=c11'])
# Options of the subproject go here; the benchmarks are never built in a
# subproject anyway.
subproject('peak', default_options : ['docs=disabled'])
peak_dep = dependency('peak')   # the subproject's meson.override_dependency
executable('quickstart', 'quickstart.c', dependencies : peak_dep)
MESON
echo "-- meson setup (peak as subprojects/peak)"
meson setup "$tmp/build" "$tmp/app" >"$tmp/setup.log" 2>&1 || { cat "$tmp/setup.log"; exit 1; }
grep -E "Subproject peak|Dependency peak" "$tmp/setup.log" || true
echo "-- ninja"
ninja -C "$tmp/build" -j2 >"$tmp/ninja.log" 2>&1 || { tail -n 30 "$tmp/ninja.log"; exit 1; }
echo "-- run"
"$tmp/build/quickstart"
# The consumer sees only include/: peak's internal headers stay private.
compile=$(ninja -C "$tmp/build" -t commands quickstart | grep -F "quickstart.c")
echo "   $compile"
case "$compile" in
*subprojects/peak/kernels*)
    echo "FAIL: the consumer is compiled with peak's internal include directory"
    exit 1
    ;;
esac
echo "subproject: ok"
