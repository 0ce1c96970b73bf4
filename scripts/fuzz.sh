#!/bin/sh
# Differential fuzzing of every kernel family (tests/fuzz/): builds the
# libFuzzer harnesses with clang, AddressSanitizer and UBSan (halting), then
# runs each one for a bounded time from its committed seed corpus, two at a
# time (the machine has 2 cores).  New inputs go to a scratch directory, not
# to the repository.  Prints each harness's totals (runs, exec/s, corpus,
# coverage); a harness that finds a failure prints it with the input as hex
# and makes the script exit 1.  To keep a crash as a regression test, copy
# it to tests/fuzz/corpus/<family>/crash-<what> (meson test --suite fuzz
# replays every file there, in every CI configuration).
#   scripts/fuzz.sh [seconds-per-harness [build-dir [family ...]]]
#   e.g. scripts/fuzz.sh 600 build-fuzz softmax
# FUZZ_SEED=n fixes libFuzzer's random seed (default: a new one each run).
# With a fixed seed (and -reload=0: nothing else writes the corpus) a run
# is a prefix of one sequence of inputs, whatever the machine's speed, so
# CI fixes it: a CI failure can be replayed, and a commit can be checked
# before it lands by running CI's seed for longer than CI will
# (FUZZ_SEED=1 scripts/fuzz.sh 90).  Exploration with new seeds is this
# script without FUZZ_SEED, for as long as you like.
set -eu
cd "$(dirname "$0")/.."
secs=${1:-60}
dir=${2:-build-fuzz}
[ $# -gt 0 ] && shift
[ $# -gt 0 ] && shift
families=${*:-pe-table embedding rope softmax attention layernorm exp convert}

sh scripts/install-deps.sh --reliability
if [ ! -f "$dir/build.ninja" ]; then
    CC=clang CXX=clang++ meson setup "$dir" --buildtype=debugoptimized -Dfuzz=enabled \
        -Db_sanitize=address,undefined -Db_lundef=false -Dbenchmarks=false -Ddemo=disabled \
        -Ddocs=disabled -Dpython= -Dlib_werror=true >/dev/null
fi
targets=""
for f in $families; do targets="$targets tests/fuzz/fuzz-$f"; done
# shellcheck disable=SC2086
ninja -C "$dir" $targets >/dev/null

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export UBSAN_OPTIONS=halt_on_error=1:abort_on_error=1:print_stacktrace=1
export ASAN_OPTIONS=abort_on_error=1:detect_leaks=1

run() {
    f=$1
    mkdir -p "$work/$f/new"
    # -timeout: one input taking 10 s is a hang; -max_len: the decoders read
    # well under 512 bytes.
    # shellcheck disable=SC2086
    if "$dir/tests/fuzz/fuzz-$f" ${FUZZ_SEED:+-seed=$FUZZ_SEED} -max_total_time="$secs" \
        -reload=0 -timeout=10 -rss_limit_mb=2048 \
        -max_len=512 -print_final_stats=1 -artifact_prefix="$work/$f/" \
        "$work/$f/new" "tests/fuzz/corpus/$f" >"$work/$f.log" 2>&1; then
        echo 0 >"$work/$f.rc"
    else
        echo $? >"$work/$f.rc"
    fi
}

report() {
    f=$1
    rc=$(cat "$work/$f.rc")
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$work/$f.log")
    eps=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$work/$f.log")
    cov=$(grep -o 'cov: [0-9]*' "$work/$f.log" | tail -1)
    seeds=$(ls "tests/fuzz/corpus/$f" | wc -l)
    new=$(ls "$work/$f/new" | wc -l)
    echo "fuzz $f: ${runs:-?} runs in ${secs} s, ${eps:-?} exec/s, $cov, corpus $seeds seeds + $new new, seed ${FUZZ_SEED:-random}, exit $rc"
    if [ "$rc" -ne 0 ]; then
        echo "---- fuzz $f FAILED; log tail:"
        tail -40 "$work/$f.log"
        for a in "$work/$f"/crash-* "$work/$f"/leak-* "$work/$f"/timeout-* "$work/$f"/oom-*; do
            [ -f "$a" ] || continue
            echo "---- input $(basename "$a") ($(wc -c <"$a") bytes), as hex:"
            od -An -tx1 -v "$a"
        done
        return 1
    fi
}

status=0
set -- $families
while [ $# -gt 0 ]; do
    a=$1
    shift
    b=${1:-}
    [ $# -gt 0 ] && shift
    run "$a" &
    pa=$!
    if [ -n "$b" ]; then
        run "$b" &
        wait $!
    fi
    wait $pa
    report "$a" || status=1
    [ -z "$b" ] || report "$b" || status=1
done
exit $status
