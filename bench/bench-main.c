/*
 * bench-main.c - bench_peak: every kernel family's benchmarks in one binary.
 *
 * Usage: bench_peak [--benchmark_filter=REGEX] [--benchmark_min_time=SECONDS]
 *                   [--benchmark_repetitions=N] [--benchmark_format=json] ...
 * (Google Benchmark 1.7.1: --benchmark_min_time takes a plain number of
 * seconds, "0.05", not "0.05s".)  bench/run-pe-table.sh runs the PE table
 * figures and prints the medians and the ratios the issue asks for.
 */
#include "bench.h"
#include "gbench-shim.h"

#include "peak.h"

int main(int argc, char **argv)
{
    /* Recorded in the JSON context so that a number published later can
       be traced to the library build and tier that produced it. */
    gb_add_context("peak_version", peak_version());
    gb_add_context("peak_isa_active", peak_isa_name(peak_isa_active()));
    gb_add_context("peak_isa_reason", peak_isa_reason());

    bench_register_pe_table();
    bench_register_softmax();
    bench_register_embed();
    bench_register_layernorm();
    bench_register_sdpa();
    return gb_main(argc, argv);
}
