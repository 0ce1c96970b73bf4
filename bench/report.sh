#!/bin/sh
# report.sh - the comparison report in one command: builds the benchmarks
# (release), runs bench_peak with repetitions, the accuracy program and the
# same shapes in PyTorch, and writes bench/results/<cpu>.md, .json and PNG
# plots (bench/report.py).  When the peers venv exists (.venv-peers, made by
# scripts/peers-venv.sh) or PEAK_PEERS_PYTHON names an interpreter with
# PyTorch 2.x (and optionally ONNX Runtime), it also runs
# bench/peers-bench.py: peak against PyTorch 2.x and ONNX Runtime at 1 and
# 2 threads; when the build has bench_replay, the simulated thread scaling
# (bench_replay --format=json; REPLAY_JSON=FILE gives one instead).
#
#   sh bench/report.sh [--quick] [--readme] [--filter REGEX] [--no-peers]
#
#   --quick   one repetition, short minimum times, small accuracy samples:
#             checks the pipeline in a few minutes; its figures are not for
#             publishing
#   --readme  also rewrite the README's Benchmarks block (between the
#             bench-report markers) with this run's summary and roofline
#   --filter  passed to bench_peak's --benchmark_filter and to
#             torch-bench.py (the report then covers those benchmarks only);
#             peers-bench.py takes PEERS_FILTER (a regex on its shape names)
#   --no-peers  leave peers-bench.py out even when its venv exists
#
# Installs the Debian packages it is missing first (as root; see
# scripts/install-deps.sh --bench).  Raw outputs stay in
# build-bench/report/ (bench.json, accuracy.json, torch.json, peers.json,
# replay.json), so bench/report.py can rebuild the report from them.  Takes about 15 minutes
# on a 2-core machine (most of it bench_peak; REPS and MIN_TIME in the
# environment override 5 and 0.05 s).
#
# Each run is also appended to bench/results/history/<cpu>.jsonl
# (bench/report_history.py: one JSON line per run with the commit, whether
# the tree was dirty, the date, the CPU, the thread counts and per benchmark
# the median, min, max and per-repetition real times); with two or more
# runs there the report plots the headline shapes over them.  Compare two
# runs (a history line or a bench_peak JSON each) with
#   /usr/bin/python3 bench/compare.py HISTORY.jsonl@-2 HISTORY.jsonl@-1 [--filter REGEX]
# (median change and a Mann-Whitney U test per benchmark; it never fails).
#
# OpenBLAS 0.3.21 does not know CPUs newer than Sapphire Rapids and runs its
# SSE3 "Prescott" kernels on them; the benchmark commands below (and only
# they: never the tests) set OPENBLAS_CORETYPE to the newest core the CPU
# can run unless the caller set it already.  Everything runs on one thread
# except peers-bench.py, which runs each library at 1 and 2 threads.
set -eu

here=$(CDPATH='' cd -- "$(dirname -- "$0")" && pwd)
root=$(dirname "$here")
quick=no
readme=no
filter=
peers=yes
while [ $# -gt 0 ]; do
    case "$1" in
    --quick) quick=yes ;;
    --readme) readme=yes ;;
    --filter) filter=$2; shift ;;
    --filter=*) filter=${1#--filter=} ;;
    --no-peers) peers=no ;;
    *) echo "usage: sh bench/report.sh [--quick] [--readme] [--filter REGEX] [--no-peers]" >&2
       exit 2 ;;
    esac
    shift
done

cd "$root"
sh scripts/install-deps.sh --bench
build=build-bench
if [ ! -f "$build/build.ninja" ]; then
    meson setup "$build" --buildtype=release
fi
ninja -C "$build" -j2 bench/bench_peak bench/peak_accuracy
targets=$(ninja -C "$build" -t targets all 2>/dev/null || true)
# bench_replay (the simulated thread scaling), where this tree has it
replay_exe=
if printf '%s\n' "$targets" | grep -q '^bench/bench_replay:'; then
    ninja -C "$build" -j2 bench/bench_replay
    replay_exe=$build/bench/bench_replay
fi
# the shared library, which peers-bench.py loads through the Python binding
shlib=$(printf '%s\n' "$targets" | sed -n 's/^\(libpeak\.so\.[0-9.]*\): c_LINKER$/\1/p' | head -n 1)
if [ -n "$shlib" ]; then
    ninja -C "$build" -j2 "$shlib"
fi

raw=$build/report
mkdir -p "$raw"
if [ "$quick" = yes ]; then
    reps=${REPS:-1}
    min_time=${MIN_TIME:-0.02}
    acc_args=--quick
else
    reps=${REPS:-5}
    min_time=${MIN_TIME:-0.05}
    acc_args=
fi

if [ -z "${OPENBLAS_CORETYPE-}" ]; then
    if grep -qw avx512f /proc/cpuinfo 2>/dev/null; then
        coretype=SkylakeX
    elif grep -qw avx2 /proc/cpuinfo 2>/dev/null; then
        coretype=Haswell
    else
        coretype=
    fi
else
    coretype=$OPENBLAS_CORETYPE
fi
# The environment of the benchmark commands only.
run() {
    if [ -n "$coretype" ]; then
        env OPENBLAS_CORETYPE="$coretype" OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 "$@"
    else
        env OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 "$@"
    fi
}

start=$(date +%s)
# 1-, 5- and 15-minute load averages, before and after: the machine is shared.
loadavg() { cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo '?'; }
load_before=$(loadavg)
echo "report: bench_peak, $reps repetitions of >= $min_time s each" >&2
set -- "$build/bench/bench_peak" --benchmark_repetitions="$reps" \
    --benchmark_min_time="$min_time" --benchmark_enable_random_interleaving=true \
    --benchmark_display_aggregates_only=true \
    --benchmark_out="$raw/bench.json" --benchmark_out_format=json
[ -n "$filter" ] && set -- "$@" --benchmark_filter="$filter"
echo "+ OPENBLAS_CORETYPE=$coretype OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 $*" >&2
run "$@" >"$raw/bench.txt"

echo "report: peak_accuracy" >&2
"$build/bench/peak_accuracy" $acc_args >"$raw/accuracy.json"

torch_json=
if /usr/bin/python3 -c 'import torch' 2>/dev/null; then
    echo "report: PyTorch (bench/torch-bench.py)" >&2
    set -- /usr/bin/python3 "$here/torch-bench.py" --repetitions "$reps" --min-time "$min_time"
    [ "$quick" = yes ] && set -- "$@" --quick
    [ -n "$filter" ] && set -- "$@" --filter "$filter"
    run "$@" >"$raw/torch.json"
    torch_json=$raw/torch.json
else
    echo "report: no PyTorch under /usr/bin/python3; its columns stay empty" >&2
fi

# PyTorch 2.x and ONNX Runtime (the peers venv), at 1 and 2 threads
peers_py=${PEAK_PEERS_PYTHON:-}
if [ -z "$peers_py" ] && [ -x "$root/.venv-peers/bin/python" ]; then
    peers_py=$root/.venv-peers/bin/python
fi
peers_json=
if [ "$peers" = no ]; then
    echo "report: peers-bench.py left out (--no-peers)" >&2
elif [ -n "$peers_py" ]; then
    echo "report: PyTorch 2.x and ONNX Runtime (bench/peers-bench.py, $peers_py)" >&2
    rm -f "$raw/peers.json"
    set -- "$peers_py" "$here/peers-bench.py" --out "$raw/peers.json"
    [ "$quick" = yes ] && set -- "$@" --quick
    [ -n "${PEERS_FILTER-}" ] && set -- "$@" --filter "$PEERS_FILTER"
    lib=$root/$build/libpeak.so.4
    [ -e "$lib" ] || lib=$root/$build/$shlib
    echo "+ PEAK_LIBRARY=$lib $*" >&2
    # its own thread counts: no OMP_NUM_THREADS=1 here
    if ! PEAK_LIBRARY="$lib" "$@"; then
        echo "report: peers-bench.py failed (see above); its JSON is used if written" >&2
    fi
    [ -s "$raw/peers.json" ] && peers_json=$raw/peers.json
else
    echo "report: no peers venv (sh scripts/peers-venv.sh makes it); the PyTorch 2.x and" \
        "ONNX Runtime sections say so" >&2
fi

# the simulated thread scaling
replay_json=
if [ -n "${REPLAY_JSON-}" ]; then
    replay_json=$REPLAY_JSON
elif [ -n "$replay_exe" ]; then
    echo "report: bench_replay (the simulated thread scaling)" >&2
    set -- "$replay_exe" --format=json
    [ "$quick" = yes ] && set -- "$@" --repeat=1
    if "$@" >"$raw/replay.json"; then
        replay_json=$raw/replay.json
    else
        echo "report: bench_replay failed; no simulated scaling" >&2
    fi
else
    echo "report: no bench_replay in this build; the scaling table has measured figures" \
        "only" >&2
fi

# the run history: one JSON line per run in bench/results/history/<cpu>.jsonl
set -- /usr/bin/python3 "$here/report_history.py" --bench "$raw/bench.json" \
    --note "sh bench/report.sh$([ "$quick" = yes ] && echo ' --quick')$([ -n "$filter" ] && echo " --filter $filter"); load average (1, 5, 15 min) before: $load_before; after: $(loadavg)"
"$@"

set -- /usr/bin/python3 "$here/report.py" --bench "$raw/bench.json" \
    --accuracy "$raw/accuracy.json" --out-dir "$here/results" \
    --command "sh bench/report.sh" \
    --note "wall time of the whole report: $(( $(date +%s) - start )) s" \
    --note "load average (1, 5, 15 min) before the run: $load_before; after: $(loadavg)"
[ -n "$torch_json" ] && set -- "$@" --torch "$torch_json"
[ -n "$peers_json" ] && set -- "$@" --peers "$peers_json"
[ -n "$replay_json" ] && set -- "$@" --replay "$replay_json"
[ "$readme" = yes ] && set -- "$@" --readme "$root/README.md"
[ "$quick" = yes ] && set -- "$@" --note "quick run (--quick): one repetition, not for publishing"
"$@"
