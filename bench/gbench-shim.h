/*
 * gbench-shim.h - a C API over Google Benchmark 1.7.1.
 *
 * The library under test is C11 and so are its benchmarks; only
 * gbench-shim.cc is C++.  Google Benchmark brings the things a hand-rolled
 * timer loop gets wrong (iteration-count calibration, repetitions with
 * median/stddev/cv aggregates, JSON output, rate counters, filters), and
 * this header is the narrow waist that lets C reach them.
 *
 * The handles are opaque: a gb_state is Google Benchmark's State and a
 * gb_bench its Benchmark, so nothing of C++ leaks into C and no extra
 * allocation happens per run.  The builder functions return their first
 * argument so calls chain like the C++ fluent interface.
 */
#ifndef PEAK_GBENCH_SHIM_H
#define PEAK_GBENCH_SHIM_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct gb_state gb_state;
typedef struct gb_bench gb_bench;

/* The benchmark body: runs `while (gb_keep_running(st)) { ... }` once per
   repetition.  `user` is the pointer given to gb_register, unchanged. */
typedef void (*gb_fn)(gb_state *st, void *user);

typedef enum gb_counter_kind {
    GB_COUNTER_PLAIN = 0, /* reported as given                              */
    GB_COUNTER_RATE = 1   /* divided by the measured time: a per-second rate */
} gb_counter_kind;

typedef enum gb_time_unit {
    GB_NANOSECOND = 0,
    GB_MICROSECOND = 1,
    GB_MILLISECOND = 2,
    GB_SECOND = 3
} gb_time_unit;

/* ---- registration (before gb_main) -------------------------------------- */

/* name is copied.  Returns NULL only if Google Benchmark throws (out of
   memory); the other builders accept NULL and return it, so one check at
   the end of a chain is enough. */
gb_bench *gb_register(const char *name, gb_fn fn, void *user);
/* Adds one argument tuple (one benchmark instance); read back with
   gb_range(st, 0 .. n-1). */
gb_bench *gb_args(gb_bench *b, const int64_t *args, size_t n);
/* Names the tuple's entries, so the instance is called
   "<name>/<names[0]>:<args[0]>/<names[1]>:<args[1]>...". */
gb_bench *gb_arg_names(gb_bench *b, const char *const *names, size_t n);
/* Wall-clock instead of the process's CPU time: a kernel that waits on
   memory or is descheduled on a shared machine should be charged for it. */
gb_bench *gb_use_real_time(gb_bench *b);
/* Seconds; overrides --benchmark_min_time for this benchmark only. */
gb_bench *gb_min_time(gb_bench *b, double seconds);
gb_bench *gb_unit(gb_bench *b, gb_time_unit unit);

/* Key/value pair written to the "context" of the console and JSON output. */
void gb_add_context(const char *key, const char *value);

/* ---- inside a benchmark body ------------------------------------------- */

/* Nonzero while more iterations are wanted.  An out-of-line call (~1.5 ns):
   keep an iteration's work at microseconds or use gb_keep_running_batch. */
int gb_keep_running(gb_state *st);
/* Like gb_keep_running, but counts n iterations per call. */
int gb_keep_running_batch(gb_state *st, int64_t n);
int64_t gb_range(const gb_state *st, size_t i);
int64_t gb_iterations(const gb_state *st);

/* Totals over all iterations; reported as bytes_per_second and
   items_per_second. */
void gb_set_bytes_processed(gb_state *st, int64_t bytes);
void gb_set_items_processed(gb_state *st, int64_t items);
void gb_set_counter(gb_state *st, const char *name, double value, gb_counter_kind kind);
void gb_set_label(gb_state *st, const char *label);
void gb_pause_timing(gb_state *st);
void gb_resume_timing(gb_state *st);
/* Marks the run as skipped with `msg` (reported, no timings); the body
   must return without entering the loop, or leave it at once. */
void gb_skip_with_error(gb_state *st, const char *msg);

/* ---- running ----------------------------------------------------------- */

/* Parses the --benchmark_* flags, runs the registered benchmarks that match
   the filter and returns the process exit code: 0, or 1 for an unknown
   argument or a filter that matches nothing (so a typo in a script fails
   instead of producing an empty report). */
int gb_main(int argc, char **argv);

/* ---- keeping results alive --------------------------------------------- */

/* The empty asm claims to read *p and to touch all memory, so the compiler
   can neither drop the stores that produced the data nor move them out of
   the timed loop.  Header-only: a call would cost more than it guards. */
static inline void gb_do_not_optimize(const void *p)
{
    __asm__ volatile("" : : "r"(p) : "memory");
}

static inline void gb_clobber_memory(void)
{
    __asm__ volatile("" : : : "memory");
}

#ifdef __cplusplus
}
#endif

#endif /* PEAK_GBENCH_SHIM_H */
