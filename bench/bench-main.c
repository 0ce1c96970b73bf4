/*
 * bench-main.c - bench_peak: every kernel family's benchmarks in one binary.
 *
 * Usage: bench_peak [--benchmark_filter=REGEX] [--benchmark_min_time=SECONDS]
 *                   [--benchmark_repetitions=N] [--benchmark_format=json] ...
 * (Google Benchmark 1.7.1: --benchmark_min_time takes a plain number of
 * seconds, "0.05", not "0.05s".)  bench/report.sh runs it with repetitions,
 * together with the accuracy program and PyTorch, and writes the report in
 * bench/results/ (with --filter, one family's tables and speed-up goals).
 */
#include "bench.h"
#include "gbench-shim.h"

#include "peak.h"

#if PEAK_BENCH_OPENBLAS
#include <cblas.h>
#endif

int main(int argc, char **argv)
{
    /* Recorded in the JSON context so that a number published later can
       be traced to the library build and tier that produced it. */
    gb_add_context("peak_version", peak_version());
    gb_add_context("peak_isa_active", peak_isa_name(peak_isa_active()));
    gb_add_context("peak_isa_reason", peak_isa_reason());
#if PEAK_BENCH_OPENBLAS
    /* OpenBLAS 0.3.21 does not know CPUs newer than Sapphire Rapids and
       falls back to its SSE3 "Prescott" kernels there unless
       OPENBLAS_CORETYPE is set (bench/report.sh sets it for the benchmark
       command only): the core it runs is part of what its figures mean. */
    gb_add_context("openblas_corename", openblas_get_corename());
    gb_add_context("openblas_config", openblas_get_config());
#endif

    bench_register_pe_table();
    bench_register_softmax();
    bench_register_embedding();
    bench_register_layernorm();
    bench_register_attention();
    bench_register_exp();
    bench_register_convert();
    bench_register_rope();
    bench_register_pe_add();
    bench_register_limits();
    return gb_main(argc, argv);
}
