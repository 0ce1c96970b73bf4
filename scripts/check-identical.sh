#!/bin/sh
# check-identical.sh - prove a refactor left every output byte of libpeak
# as it was: build the reference library from a git revision and the
# candidate (the work tree, by default), run both in one process over every
# committed fuzz corpus input and over the unit tests' shapes, on every tier
# this CPU has, and compare every output byte and status of every public
# call.  Sources: tools/check-identical/ (driver.c says how it works).
#
#   sh scripts/check-identical.sh [--ref REV] [--cand worktree|REV|DIR]
#                                 [--tiers scalar,avx2,...] [--max-show N]
#                                 [--no-emulated] [--keep] [--help]
#
# --ref REV    reference revision (default: $DEFAULT_REF below, the tree
#              before the refactor), taken with git archive: the work tree
#              is never touched
# --cand X     candidate: "worktree" (default: the work tree's files as they
#              are, tracked and untracked-not-ignored, copied), a git
#              revision, or a directory holding a source tree
# --tiers L    compare only these tiers (default: every tier the CPU has)
# --max-show N print the first N mismatches in detail (default 10)
# --no-emulated  skip the emulated AVX-512 comparison (below)
# --keep       keep the temporary directory (builds, log)
#
# What it runs (both libraries built with meson, release, as the project
# builds them; the driver with cc):
#   (a) every file of the reference's tests/fuzz/corpus/<family>/ and the
#       candidate's corpus directories (renamed ones matched by prefix:
#       embed <-> embedding), deduplicated, through the reference's fuzz
#       harnesses tests/fuzz/fuzz-<family>.c (their decoders, unchanged);
#   (b) the reference's unit-test programs tests/test-*.c (the families and
#       the API validation test) on each tier: their shapes, strides,
#       misalignments, masks, layouts, special values.
# Every public call they make runs in both libraries from the same bytes.
# On a CPU without AVX-512 (and with SIMDe, libsimde-dev) it also builds
# each revision's emulated AVX-512 library (tests/avx512-emulated: the
# AVX-512 kernel sources compiled against SIMDe) and compares those two on
# the avx512 tier the same way (about 1.5 min more; --no-emulated skips).
# Exit status: 0 identical, 1 a mismatch, 2 a setup/build error, 3 no
# mismatch but a unit test failed on the reference's own outputs.
set -eu

DEFAULT_REF=d64b1b6
ref=$DEFAULT_REF
cand=worktree
tiers=
max_show=10
keep=0
emulated=1
while [ $# -gt 0 ]; do
  case "$1" in
    --ref) ref=$2; shift 2 ;;
    --cand) cand=$2; shift 2 ;;
    --tiers) tiers=$2; shift 2 ;;
    --max-show) max_show=$2; shift 2 ;;
    --keep) keep=1; shift ;;
    --no-emulated) emulated=0; shift ;;
    -h|--help) sed -n '2,39p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "check-identical: unknown argument $1 (--help)" >&2; exit 2 ;;
  esac
done

root=$(cd "$(dirname "$0")/.." && pwd)
tooldir=$root/tools/check-identical
start=$(date +%s)
tmp=$(mktemp -d /tmp/check-identical.XXXXXX)
cleanup() { if [ "$keep" = 1 ]; then echo "check-identical: kept $tmp"; else rm -rf "$tmp"; fi; }
trap cleanup EXIT
trap 'exit 2' INT TERM

say() { echo "check-identical: $*"; }

# ---- sources ---------------------------------------------------------------
mkdir -p "$tmp/ref" "$tmp/cand"
refsha=$(git -C "$root" rev-parse --short "$ref^{commit}") || { say "no revision $ref" >&2; exit 2; }
git -C "$root" archive "$refsha" | tar -x -C "$tmp/ref"
case "$cand" in
  worktree)
    cand_label="work tree $root (files as they are, copied)"
    # tracked files that exist, and untracked ones not ignored
    (cd "$root" && git ls-files -co --exclude-standard |
      while IFS= read -r f; do if [ -f "$f" ]; then printf '%s\n' "$f"; fi; done |
      tar -T - -cf -) | tar -x -C "$tmp/cand" ;;
  *)
    if [ -d "$cand" ]; then
      cand_label="directory $cand"
      (cd "$cand" && tar --exclude='./build*' -cf - .) | tar -x -C "$tmp/cand"
    else
      csha=$(git -C "$root" rev-parse --short "$cand^{commit}") || { say "no revision $cand" >&2; exit 2; }
      cand_label="revision $csha"
      git -C "$root" archive "$csha" | tar -x -C "$tmp/cand"
    fi ;;
esac
say "reference: revision $refsha; candidate: $cand_label"
if [ "$emulated" = 1 ]; then
  if grep -qw avx512f /proc/cpuinfo 2>/dev/null; then
    emulated=0 # the native avx512 tier is compared
  elif [ "$(uname -m)" != x86_64 ]; then
    emulated=0
  elif ! echo '#include <simde/x86/avx512.h>' | cc -E -x c - > /dev/null 2>&1; then
    emulated=0; say "SIMDe (libsimde-dev) not found: the emulated AVX-512 tier is not compared"
  fi
fi

# ---- the two libraries (meson, the project's default release build) --------
build_lib() { # src build
  opts=
  emu_opt=avx512_emulated=disabled
  [ "$emulated" = 1 ] && emu_opt=avx512_emulated=enabled
  for o in benchmarks=false demo=disabled docs=disabled python= $emu_opt; do
    grep -q "option('${o%%=*}'" "$1/meson_options.txt" 2>/dev/null && opts="$opts -D$o"
  done
  # shellcheck disable=SC2086
  if ! meson setup $opts "$2" "$1" > "$2.log" 2>&1; then
    say "meson setup of $1 failed:" >&2; tail -20 "$2.log" >&2; exit 2
  fi
  targets=$(ninja -C "$2" -t targets all | sed -n 's/^\(libpeak\.so[.0-9]*\|libpeak\.a\|[^ ]*libpeak_avx512_emulated\.a\): .*/\1/p')
  # shellcheck disable=SC2086
  if ! ninja -C "$2" $targets >> "$2.log" 2>&1; then
    say "build of $1 failed:" >&2; tail -30 "$2.log" >&2; exit 2
  fi
}
t0=$(date +%s)
build_lib "$tmp/ref" "$tmp/ref-build"
build_lib "$tmp/cand" "$tmp/cand-build"
so() { find "$1" -maxdepth 1 -name 'libpeak.so.*.*' -type f | head -1; }
ref_so=$(so "$tmp/ref-build"); cand_so=$(so "$tmp/cand-build")
if [ -z "$ref_so" ] || [ -z "$cand_so" ] || [ ! -f "$tmp/ref-build/libpeak.a" ]; then
  say "no libpeak.so/.a built" >&2; exit 2
fi
# distinct file names, so the dynamic loader cannot take one for the other
cp "$ref_so" "$tmp/libpeak-reference.so"; cp "$cand_so" "$tmp/libpeak-candidate.so"
# the emulated AVX-512 copies: static test-only libraries, made shared here
if [ "$emulated" = 1 ]; then
  for side in reference:ref candidate:cand; do
    a=$(find "$tmp/${side#*:}-build" -name libpeak_avx512_emulated.a | head -1)
    # shellcheck disable=SC2046
    if [ -z "$a" ] || ! cc -shared -o "$tmp/libpeak-${side%:*}-avx512-emulated.so" \
        -Wl,--whole-archive "$a" -Wl,--no-whole-archive \
        -Wl,--version-script="$tmp/${side#*:}/peak.map" \
        $(pkg-config --libs sleef 2>/dev/null || echo -lsleef) -lm -lpthread; then
      say "cannot make the ${side%:*}'s emulated AVX-512 library: not compared" >&2
      emulated=0
    fi
  done
  [ "$emulated" = 1 ] && emu_a=$(find "$tmp/ref-build" -name libpeak_avx512_emulated.a | head -1)
fi
say "libraries built in $(( $(date +%s) - t0 )) s"

# ---- the driver: the reference's harnesses and tests, renamed calls ---------
t0=$(date +%s)
obj=$tmp/obj; mkdir -p "$obj"
gen=$obj/families.c
ref_tests=$tmp/ref/tests
cflags="-std=c11 -O2 -g0 -D_GNU_SOURCE -ffp-contract=off -w -include $tooldir/shim.h"
refinc="-I$tmp/ref/include -I$tmp/ref/kernels -I$ref_tests -I$ref_tests/fuzz"
cc_ref() { # out src extra...
  o=$1; s=$2; shift 2
  # shellcheck disable=SC2086,SC2046
  cc $cflags $refinc "$@" -c "$s" -o "$o" $(pkg-config --cflags check 2>/dev/null) || { say "cannot compile $s" >&2; exit 2; }
}
printf '#include <stddef.h>\n#include <stdint.h>\n' > "$gen"
fams=
pids=
for f in "$ref_tests"/fuzz/fuzz-*.c; do
  fam=$(basename "$f" .c); fam=${fam#fuzz-}; id=$(echo "$fam" | tr -c 'a-zA-Z0-9\n' _)
  fams="$fams $fam"
  cc_ref "$obj/fuzz-$fam.o" "$f" -DLLVMFuzzerTestOneInput="ci_fuzz_$id" &
  pids="$pids $!"
  echo "int ci_fuzz_$id(const uint8_t *, size_t);" >> "$gen"
done
units=
for f in "$ref_tests"/test-*.c; do
  name=$(basename "$f" .c)
  case "$name" in test-util|test-dispatch|test-threads|test-stack) continue ;; esac
  id=$(echo "$name" | tr -c 'a-zA-Z0-9\n' _)
  units="$units $name"
  cc_ref "$obj/$name.o" "$f" -Dmain="ci_main_$id" &
  pids="$pids $!"
  echo "int ci_main_$id(int, char **);" >> "$gen"
done
cc_ref "$obj/test-util.o" "$ref_tests/test-util.c"
# the shared tester, in revisions that have one
if [ -f "$ref_tests/tester.c" ]; then cc_ref "$obj/tester.o" "$ref_tests/tester.c"; fi
for p in $pids; do wait "$p" || { say "compile failed" >&2; exit 2; }; done
{
  echo "struct ci_fuzz_entry { const char *fam; int (*fn)(const uint8_t *, size_t); };"
  echo "const struct ci_fuzz_entry ci_fuzz_table[] = {"
  for fam in $fams; do echo "  {\"$fam\", ci_fuzz_$(echo "$fam" | tr -c 'a-zA-Z0-9\n' _)},"; done
  echo "  {0, 0}};"
  echo "struct ci_unit_entry { const char *name; int (*fn)(int, char **); };"
  echo "const struct ci_unit_entry ci_unit_table[] = {"
  for u in $units; do echo "  {\"$u\", ci_main_$(echo "$u" | tr -c 'a-zA-Z0-9\n' _)},"; done
  echo "  {0, 0}};"
} >> "$gen"
# the driver against the candidate's public header
cc -std=c11 -O2 -Wall -Wextra -include "$tooldir/shim.h" -I"$tmp/cand/include" \
  -c "$tooldir/driver.c" -o "$obj/driver.o" || { say "cannot compile driver.c against the candidate's peak.h" >&2; exit 2; }
cc -std=c11 -w -c "$gen" -o "$obj/families.o"
# shellcheck disable=SC2046
cc -o "$tmp/check-identical" "$obj"/*.o "$tmp/ref-build/libpeak.a" \
  $(pkg-config --libs check 2>/dev/null || echo -lcheck) $(pkg-config --libs sleef 2>/dev/null || echo -lsleef) \
  -lm -ldl -lpthread || { say "cannot link the driver" >&2; exit 2; }
# the same, with the reference's emulated library for the internal calls of
# the tests (peak_kernels_for(avx512) must not run native AVX-512 code)
if [ "$emulated" = 1 ]; then
  # shellcheck disable=SC2046
  cc -o "$tmp/check-identical-emulated" "$obj"/*.o "$emu_a" \
    $(pkg-config --libs check 2>/dev/null || echo -lcheck) $(pkg-config --libs sleef 2>/dev/null || echo -lsleef) \
    -lm -ldl -lpthread || { say "cannot link the emulated driver" >&2; exit 2; }
fi
say "driver built in $(( $(date +%s) - t0 )) s"

# ---- corpora: the reference's, plus the candidate's (renames matched) -------
fuzz_args=
for fam in $fams; do
  dirs=$ref_tests/fuzz/corpus/$fam
  for d in "$tmp/cand/tests/fuzz/corpus"/*/; do
    [ -d "$d" ] || continue
    c=$(basename "$d")
    match=
    if [ "$c" = "$fam" ]; then match=1
    else
      # a renamed family (embed -> embedding): a prefix of one another, and
      # no harness of the reference has the candidate directory's exact name
      case " $fams " in *" $c "*) ;; *) case "$c" in "$fam"*) match=1 ;; esac; case "$fam" in "$c"*) match=1 ;; esac ;; esac
    fi
    [ -n "$match" ] && dirs="$dirs:${d%/}"
  done
  fuzz_args="$fuzz_args --fuzz $fam=$dirs"
done
for d in "$tmp/cand/tests/fuzz/corpus"/*/; do
  [ -d "$d" ] || continue
  case "$fuzz_args" in *"${d%/}"*) ;; *) say "WARNING: candidate corpus ${d%/} has no harness in the reference: not run" ;; esac
done

# ---- run ---------------------------------------------------------------------
t0=$(date +%s)
set +e
# shellcheck disable=SC2086
env -u PEAK_ISA -u PEAK_ISA_DEBUG "$tmp/check-identical" --ref "$tmp/libpeak-reference.so" \
  --cand "$tmp/libpeak-candidate.so" ${tiers:+--tiers "$tiers"} --max-show "$max_show" \
  $fuzz_args --unit --log "$tmp/driver.log"
rc=$?
set -e
if [ $rc -ne 0 ] && [ $rc -ne 1 ] && [ $rc -ne 3 ]; then
  say "the driver stopped (exit status $rc); the end of its log:" >&2
  tail -30 "$tmp/driver.log" >&2
  rc=2
fi
if [ "$emulated" = 1 ]; then
  echo
  say "emulated AVX-512 (SIMDe) builds of both revisions, tier avx512:"
  set +e
  # shellcheck disable=SC2086
  env -u PEAK_ISA -u PEAK_ISA_DEBUG "$tmp/check-identical-emulated" \
    --ref "$tmp/libpeak-reference-avx512-emulated.so" --cand "$tmp/libpeak-candidate-avx512-emulated.so" \
    --tiers avx512 --max-show "$max_show" $fuzz_args --unit --log "$tmp/driver-emulated.log"
  erc=$?
  set -e
  if [ $erc -ne 0 ] && [ $erc -ne 1 ] && [ $erc -ne 3 ]; then
    say "the emulated driver stopped (exit status $erc); the end of its log:" >&2
    tail -30 "$tmp/driver-emulated.log" >&2
    erc=2
  fi
  # the worse of the two: 2 (error) > 1 (mismatch) > 3 > 0
  for r in 2 1 3; do
    if [ $rc -eq $r ] || [ $erc -eq $r ]; then rc=$r; break; fi
  done
fi
say "compare: $(( $(date +%s) - t0 )) s; total: $(( $(date +%s) - start )) s; exit status $rc"
exit $rc
