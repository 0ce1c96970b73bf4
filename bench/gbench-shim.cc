// gbench-shim.cc - the C++ side of gbench-shim.h (C++17).
//
// The opaque C handles are the Google Benchmark objects themselves,
// reinterpreted: no wrapper allocation and no extra indirection on the
// per-iteration path.  No C++ exception may unwind into C frames (that is
// undefined behaviour), so every entry point that can allocate catches.

#include "gbench-shim.h"

#include <benchmark/benchmark.h>

#include <cstdio>
#include <exception>
#include <string>
#include <vector>

namespace {

benchmark::State &S(gb_state *st) { return *reinterpret_cast<benchmark::State *>(st); }
const benchmark::State &S(const gb_state *st)
{
    return *reinterpret_cast<const benchmark::State *>(st);
}
benchmark::internal::Benchmark *B(gb_bench *b)
{
    return reinterpret_cast<benchmark::internal::Benchmark *>(b);
}
gb_bench *C(benchmark::internal::Benchmark *b) { return reinterpret_cast<gb_bench *>(b); }

void report(const char *where, const std::exception &e)
{
    std::fprintf(stderr, "gbench-shim: %s: %s\n", where, e.what());
}

} // namespace

extern "C" {

gb_bench *gb_register(const char *name, gb_fn fn, void *user)
{
    try {
        return C(benchmark::RegisterBenchmark(
            name, [fn, user](benchmark::State &st) { fn(reinterpret_cast<gb_state *>(&st), user); }));
    } catch (const std::exception &e) {
        report("gb_register", e);
        return nullptr;
    }
}

gb_bench *gb_args(gb_bench *b, const int64_t *args, size_t n)
{
    if (b == nullptr)
        return nullptr;
    try {
        B(b)->Args(std::vector<int64_t>(args, args + n));
        return b;
    } catch (const std::exception &e) {
        report("gb_args", e);
        return nullptr;
    }
}

gb_bench *gb_arg_names(gb_bench *b, const char *const *names, size_t n)
{
    if (b == nullptr)
        return nullptr;
    try {
        B(b)->ArgNames(std::vector<std::string>(names, names + n));
        return b;
    } catch (const std::exception &e) {
        report("gb_arg_names", e);
        return nullptr;
    }
}

gb_bench *gb_use_real_time(gb_bench *b)
{
    if (b != nullptr)
        B(b)->UseRealTime();
    return b;
}

gb_bench *gb_min_time(gb_bench *b, double seconds)
{
    if (b != nullptr)
        B(b)->MinTime(seconds);
    return b;
}

gb_bench *gb_unit(gb_bench *b, gb_time_unit unit)
{
    static const benchmark::TimeUnit units[] = {benchmark::kNanosecond, benchmark::kMicrosecond,
                                                benchmark::kMillisecond, benchmark::kSecond};
    if (b != nullptr && static_cast<unsigned>(unit) < sizeof units / sizeof units[0])
        B(b)->Unit(units[unit]);
    return b;
}

void gb_add_context(const char *key, const char *value)
{
    try {
        benchmark::AddCustomContext(key, value);
    } catch (const std::exception &e) {
        report("gb_add_context", e);
    }
}

int gb_keep_running(gb_state *st) { return S(st).KeepRunning(); }

int gb_keep_running_batch(gb_state *st, int64_t n) { return S(st).KeepRunningBatch(n); }

int64_t gb_range(const gb_state *st, size_t i) { return S(st).range(i); }

int64_t gb_iterations(const gb_state *st) { return S(st).iterations(); }

void gb_set_bytes_processed(gb_state *st, int64_t bytes) { S(st).SetBytesProcessed(bytes); }

void gb_set_items_processed(gb_state *st, int64_t items) { S(st).SetItemsProcessed(items); }

void gb_set_counter(gb_state *st, const char *name, double value, gb_counter_kind kind)
{
    try {
        S(st).counters[name] = benchmark::Counter(
            value, kind == GB_COUNTER_RATE ? benchmark::Counter::kIsRate
                                           : benchmark::Counter::kDefaults);
    } catch (const std::exception &e) {
        report("gb_set_counter", e);
    }
}

void gb_set_label(gb_state *st, const char *label)
{
    try {
        S(st).SetLabel(label);
    } catch (const std::exception &e) {
        report("gb_set_label", e);
    }
}

void gb_pause_timing(gb_state *st) { S(st).PauseTiming(); }

void gb_resume_timing(gb_state *st) { S(st).ResumeTiming(); }

void gb_skip_with_error(gb_state *st, const char *msg) { S(st).SkipWithError(msg); }

int gb_main(int argc, char **argv)
{
    try {
        benchmark::Initialize(&argc, argv);
        if (benchmark::ReportUnrecognizedArguments(argc, argv))
            return 1;
        // --benchmark_list_tests also returns the number it matched, so a
        // zero here always means the filter selected nothing.
        const size_t ran = benchmark::RunSpecifiedBenchmarks();
        benchmark::Shutdown();
        return ran == 0 ? 1 : 0;
    } catch (const std::exception &e) {
        report("gb_main", e);
        return 1;
    }
}

} // extern "C"
