#!/bin/sh
# run-softmax.sh - the softmax figures: 9 repetitions of every 8-head
# softmax benchmark (the shapes of the issue's targets), interleaved at
# random (so that a slow spell of the shared machine falls on every variant
# alike, not on one), then the median time of each variant and the issue's
# speed-up ratios.
#
#   bench/run-softmax.sh [BENCH_PEAK] [--benchmark_* flags...]
#
# BENCH_PEAK defaults to build-bench/bench/bench_peak in this checkout.
# Extra flags come last and override the defaults (Google Benchmark 1.7.1
# takes --benchmark_min_time as plain seconds).  PEAK_BENCH_JSON=FILE keeps
# the raw JSON (bench/softmax-report.py FILE prints the summary again).
# oneDNN runs single-threaded: Debian's libdnnl2 uses the OpenMP runtime,
# OMP_NUM_THREADS=1 is set here and bench-softmax.c also calls
# omp_set_num_threads(1) before it creates the primitive.
set -eu

here=$(CDPATH='' cd -- "$(dirname -- "$0")" && pwd)
bin=$here/../build-bench/bench/bench_peak
case ${1-} in
    '' | -*) ;;
    *) bin=$1; shift ;;
esac
if [ ! -x "$bin" ]; then
    echo "run-softmax.sh: no benchmark binary at $bin (build it, or pass its path)" >&2
    exit 1
fi

json=${PEAK_BENCH_JSON-}
if [ -z "$json" ]; then
    json=$(mktemp)
    trap 'rm -f "$json"' EXIT
    trap 'exit 130' INT TERM
fi

export OMP_NUM_THREADS=1
set -- "$bin" --benchmark_filter='^softmax/[^/]*/heads:8/' --benchmark_repetitions=9 \
    --benchmark_enable_random_interleaving=true --benchmark_min_time=0.2 \
    --benchmark_report_aggregates_only=true \
    --benchmark_out="$json" --benchmark_out_format=json "$@"
echo "+ OMP_NUM_THREADS=1 $*" >&2
"$@" >&2
python3 "$here/softmax-report.py" "$json"
