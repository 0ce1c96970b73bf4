#!/bin/sh
# run-pe-table.sh - the PE table figures: 9 repetitions of every pe_table
# benchmark, then the median throughput of each variant and the issue's
# speed-up ratios (avx512 vs libm_loop and sleef_avx512, avx2 vs libm_loop
# at seq_len 5000, d_model 512).
#
#   bench/run-pe-table.sh [BENCH_PEAK] [--benchmark_* flags...]
#
# BENCH_PEAK defaults to build-bench/bench/bench_peak in this checkout
# (meson setup build-bench && ninja -C build-bench).  Extra flags come last,
# so they override the defaults (Google Benchmark 1.7.1 takes
# --benchmark_min_time as plain seconds: 0.5, not 0.5s).  Set
# PEAK_BENCH_JSON=FILE to keep the raw JSON; its summary can be printed
# again with bench/pe-table-report.py FILE.  The benchmark's own progress
# goes to stderr, the summary to stdout.
set -eu

here=$(CDPATH='' cd -- "$(dirname -- "$0")" && pwd)
bin=$here/../build-bench/bench/bench_peak
case ${1-} in
    '' | -*) ;;
    *) bin=$1; shift ;;
esac
if [ ! -x "$bin" ]; then
    echo "run-pe-table.sh: no benchmark binary at $bin (build it, or pass its path)" >&2
    exit 1
fi

json=${PEAK_BENCH_JSON-}
if [ -z "$json" ]; then
    json=$(mktemp)
    trap 'rm -f "$json"' EXIT
    trap 'exit 130' INT TERM
fi

# Random interleaving runs the repetitions of all benchmarks in a shuffled
# order instead of nine in a row: on this shared 2-core machine a burst of
# someone else's work then spreads over every variant rather than landing
# on one variant's nine repetitions and skewing the ratios between them.
set -- "$bin" --benchmark_repetitions=9 --benchmark_report_aggregates_only=true \
    --benchmark_filter=pe_table --benchmark_enable_random_interleaving=true \
    --benchmark_out="$json" --benchmark_out_format=json "$@"
echo "+ $*" >&2
"$@" >&2
python3 "$here/pe-table-report.py" "$json"
