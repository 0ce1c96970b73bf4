#!/bin/sh
# Static checks of the library (kernels/ and include/), each failing on any
# finding:
#   1 the library built with its warnings as errors (-Wall -Wextra -Wpedantic
#     -Wconversion -Wshadow, -Dlib_werror=true) by clang (CI's other builds
#     use gcc with the same option);
#   2 cppcheck (warning, style, performance, portability) for the x86-64 and
#     the AArch64 configurations;
#   3 clang-tidy with the repository's .clang-tidy (the static analyzer and
#     bugprone; the file says which checks are off and why) on every kernel
#     source, the NEON ones for an aarch64 target.
#   scripts/lint.sh [build-dir]
set -eu
cd "$(dirname "$0")/.."
dir=${1:-build-lint}
sh scripts/install-deps.sh --reliability

echo "lint: [1/3] library with warnings as errors (clang)"
if [ ! -f "$dir/build.ninja" ]; then
    CC=clang meson setup "$dir" --buildtype=debugoptimized -Dlib_werror=true -Dbenchmarks=false \
        -Ddemo=disabled -Ddocs=disabled -Dpython= >/dev/null
fi
ninja -C "$dir" libpeak.a >/dev/null
echo "lint: library builds without a warning"

# knownConditionTrueFalse is suppressed: cppcheck 2.10 reads
# "n = a - b < C ? a - b : C" over size_t as "less than 1" (9 false
# positives, e.g. in kernels/pe-table.h).
echo "lint: [2/3] cppcheck"
for cfg in "-D__x86_64__ -DPEAK_HAVE_AVX2=1 -DPEAK_HAVE_AVX512=1" "-D__aarch64__ -D__linux__ -DPEAK_HAVE_NEON=1"; do
    # shellcheck disable=SC2086
    cppcheck -q --std=c11 --enable=warning,style,performance,portability \
        --suppress=knownConditionTrueFalse --inline-suppr --error-exitcode=1 \
        -I include -I kernels -D__GNUC__ $cfg kernels/ include/
done
echo "lint: cppcheck found nothing"

echo "lint: [3/3] clang-tidy"
x86=""
neon=""
for f in kernels/*/*.c; do
    case "$f" in
    kernels/neon/*) neon="$neon $f" ;;
    *) x86="$x86 $f" ;;
    esac
done
# Two files at a time; -p gives each the flags of its target (ISA flags
# included).  The NEON sources are checked as compiled for AArch64, against
# the AArch64 C library's headers in /usr/aarch64-linux-gnu/include
# (libc6-dev-arm64-cross, installed by --reliability above).
# shellcheck disable=SC2086
printf '%s\n' $x86 | xargs -P 2 -n 1 clang-tidy -p "$dir" --quiet 2>/dev/null
if [ -n "$neon" ]; then
    # shellcheck disable=SC2086
    printf '%s\n' $neon | xargs -P 2 -I '{}' clang-tidy --quiet '{}' -- \
        --target=aarch64-linux-gnu -isystem /usr/aarch64-linux-gnu/include -std=c11 \
        -D_GNU_SOURCE -DPEAK_HAVE_NEON=1 -Iinclude -Ikernels 2>/dev/null
fi
echo "lint: clang-tidy found nothing"
