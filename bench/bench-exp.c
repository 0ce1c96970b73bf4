/*
 * bench-exp.c - peak_exp per tier and through dispatch, against glibc's
 * expf (scalar loop and libmvec) and SLEEF's expf (per element and
 * vector), in one binary so that every ratio comes from one run.
 *
 * Names: exp/<variant>/n:<n> (plus /real_time), out of place, x uniform in
 * [-87, 88] (the whole normal range of the result), 64-byte aligned.
 * n = 4096 (32 KiB in + out: L1), 65536 (L2), 1 Mi (8 MiB: the last-level
 * cache) and 16 Mi (128 MiB).  Variants:
 *   scalar, avx2, avx512  one tier's kernel through peak_kernels_for()
 *   dispatch              the public peak_exp() (label: the tier)
 *   libm_loop             glibc expf per element (baseline-exp.c)
 *   sleef_scalar          Sleef_expf_u10 per element
 *   sleef_avx2/avx512     Sleef_expf8_u10avx2 / Sleef_expf16_u10avx512f
 *   libmvec_avx2/avx512   an expf loop auto-vectorised into glibc's libmvec
 * bytes_per_second counts x read and y written (8 bytes an element).
 *
 * Threads: dispatch again on a pool of n workers (bench_pool: made once by
 * peak_threadpool_create), exp/dispatch/n:<n>/threads:<t> (t from
 * bench_thread_counts: 1 and 2 by default) at n = 65536, 1 Mi and 16 Mi:
 * the speedup is threads:2 over threads:1 of one run; the memory-bound
 * floor at the same thread count is memcpy/bytes:<n>/threads:<t>
 * (bench-limits.c).
 *
 * Before timing, every variant runs once and its output is checked against
 * double exp (relative 1e-6: a few ULP); a wrong result is skipped, not
 * timed.
 */
#include "baseline-exp.h"
#include "bench.h"
#include "gbench-shim.h"

#include "internal.h"
#include "peak.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

typedef enum ex_impl {
    EX_TIER,
    EX_DISPATCH,
    EX_LIBM,
    EX_SLEEF_SCALAR,
    EX_SLEEF_AVX2,
    EX_SLEEF_AVX512,
    EX_LIBMVEC_AVX2,
    EX_LIBMVEC_AVX512
} ex_impl;

typedef struct ex_variant {
    const char *name;
    ex_impl impl;
    peak_isa isa; /* EX_TIER */
} ex_variant;

static const ex_variant ex_variants[] = {
    {"scalar", EX_TIER, PEAK_ISA_SCALAR},
#if defined(__x86_64__)
    {"avx2", EX_TIER, PEAK_ISA_AVX2},
    {"avx512", EX_TIER, PEAK_ISA_AVX512},
#elif defined(__aarch64__)
    {"neon", EX_TIER, PEAK_ISA_NEON},
#endif
    {"dispatch", EX_DISPATCH, PEAK_ISA_SCALAR},
    {"libm_loop", EX_LIBM, PEAK_ISA_SCALAR},
    {"sleef_scalar", EX_SLEEF_SCALAR, PEAK_ISA_SCALAR},
#if PEAK_BENCH_SLEEF_AVX2
    {"sleef_avx2", EX_SLEEF_AVX2, PEAK_ISA_SCALAR},
#endif
#if PEAK_BENCH_SLEEF_AVX512
    {"sleef_avx512", EX_SLEEF_AVX512, PEAK_ISA_SCALAR},
#endif
#if PEAK_BENCH_LIBMVEC_AVX2
    {"libmvec_avx2", EX_LIBMVEC_AVX2, PEAK_ISA_SCALAR},
#endif
#if PEAK_BENCH_LIBMVEC_AVX512
    {"libmvec_avx512", EX_LIBMVEC_AVX512, PEAK_ISA_SCALAR},
#endif
};

static const int64_t ex_sizes[] = {4096, 65536, 1 << 20, 1 << 24};
/* The thread variants' sizes. */
static const int64_t ex_thread_sizes[] = {65536, 1 << 20, 1 << 24};

static const char *ex_unavailable(const ex_variant *v)
{
    switch (v->impl) {
    case EX_TIER:
        return bench_tier_unavailable(v->isa);
    case EX_SLEEF_AVX2:
    case EX_LIBMVEC_AVX2:
        return bench_cpu_avx2() ? NULL : "isa unsupported: no AVX2+FMA on this CPU/OS";
    case EX_SLEEF_AVX512:
    case EX_LIBMVEC_AVX512:
        return bench_cpu_avx512() ? NULL : "isa unsupported: no AVX-512 on this CPU/OS";
    default:
        return NULL;
    }
}

/* pool: dispatch's (NULL: this thread). */
static void ex_run(const ex_variant *v, float *y, const float *x, size_t n,
                   const peak_threadpool *pool)
{
    switch (v->impl) {
    case EX_TIER:
        peak_kernels_for(v->isa)->exp(y, x, n);
        break;
    case EX_DISPATCH:
        peak_exp(y, x, n, pool);
        break;
    case EX_LIBM:
        bench_exp_libm(y, x, n);
        break;
    case EX_SLEEF_SCALAR:
        bench_exp_sleef_scalar(y, x, n);
        break;
    case EX_SLEEF_AVX2:
#if PEAK_BENCH_SLEEF_AVX2
        bench_exp_sleef_avx2(y, x, n);
#endif
        break;
    case EX_SLEEF_AVX512:
#if PEAK_BENCH_SLEEF_AVX512
        bench_exp_sleef_avx512(y, x, n);
#endif
        break;
    case EX_LIBMVEC_AVX2:
#if PEAK_BENCH_LIBMVEC_AVX2
        bench_exp_libmvec_avx2(y, x, n);
#endif
        break;
    case EX_LIBMVEC_AVX512:
#if PEAK_BENCH_LIBMVEC_AVX512
        bench_exp_libmvec_avx512(y, x, n);
#endif
        break;
    }
}

static void exp_body(gb_state *st, void *user, const peak_threadpool *pool)
{
    const ex_variant *v = user;
    const size_t n = (size_t)gb_range(st, 0);
    const char *why = ex_unavailable(v);
    if (why) {
        gb_skip_with_error(st, why);
        return;
    }
    float *x = bench_alloc(n * sizeof(float)), *y = bench_alloc(n * sizeof(float));
    if (!x || !y) {
        gb_skip_with_error(st, "out of memory");
        goto out;
    }
    bench_fill_uniform(x, n, 0x0e0e0e0e, -87.0f, 88.0f);
    for (size_t k = 0; k < n; k++)
        y[k] = NAN;
    ex_run(v, y, x, n, pool);
    for (size_t k = 0; k < n; k++) {
        const double want = exp((double)x[k]);
        if (!(fabs(y[k] - want) <= 1e-6 * want)) {
            char msg[128];
            snprintf(msg, sizeof msg, "wrong output: exp(%.9g) is %.9g, want %.9g",
                     (double)x[k], (double)y[k], want);
            gb_skip_with_error(st, msg);
            goto out;
        }
    }
    if (v->impl == EX_DISPATCH)
        gb_set_label(st, peak_isa_name(peak_isa_active()));
    while (gb_keep_running(st)) {
        ex_run(v, y, x, n, pool);
        gb_do_not_optimize(y);
    }
    gb_set_items_processed(st, gb_iterations(st) * (int64_t)n);
    gb_set_bytes_processed(st, gb_iterations(st) * (int64_t)n * 2 * (int64_t)sizeof(float));
out:
    free(x);
    free(y);
}

static void bench_exp(gb_state *st, void *user)
{
    exp_body(st, user, NULL);
}

/* .../threads:<t>: argument 1 */
static void bench_exp_threads(gb_state *st, void *user)
{
    const peak_threadpool *pool = bench_pool((size_t)gb_range(st, 1));
    if (pool)
        exp_body(st, user, pool);
    else
        gb_skip_with_error(st, "no pool: peak_threadpool_create failed (built without pthreadpool?)");
}

void bench_register_exp(void)
{
    static const char *const arg_names[] = {"n"};
    char name[64];
    for (size_t s = 0; s < sizeof ex_sizes / sizeof ex_sizes[0]; s++)
        for (size_t i = 0; i < sizeof ex_variants / sizeof ex_variants[0]; i++) {
            if (ex_variants[i].impl == EX_TIER && !bench_tier_has_kernel("exp", ex_variants[i].isa))
                continue;
            snprintf(name, sizeof name, "exp/%s", ex_variants[i].name);
            gb_bench *b = gb_register(name, bench_exp, (void *)&ex_variants[i]);
            b = gb_args(b, &ex_sizes[s], 1);
            b = gb_arg_names(b, arg_names, 1);
            b = gb_unit(b, GB_MICROSECOND);
            if (gb_use_real_time(b) == NULL) {
                fprintf(stderr, "bench_peak: cannot register %s\n", name);
                exit(EXIT_FAILURE);
            }
        }
    static const char *const thread_names[] = {"n", "threads"};
    const ex_variant *dispatch = NULL;
    for (size_t i = 0; i < sizeof ex_variants / sizeof ex_variants[0]; i++)
        if (ex_variants[i].impl == EX_DISPATCH)
            dispatch = &ex_variants[i];
    const int64_t *threads;
    const size_t n_threads = bench_thread_counts(&threads);
    for (size_t s = 0; s < sizeof ex_thread_sizes / sizeof ex_thread_sizes[0]; s++)
        for (size_t t = 0; t < n_threads; t++) {
            const int64_t args[2] = {ex_thread_sizes[s], threads[t]};
            gb_bench *b = gb_register("exp/dispatch", bench_exp_threads, (void *)dispatch);
            b = gb_arg_names(gb_args(b, args, 2), thread_names, 2);
            if (gb_use_real_time(gb_unit(b, GB_MICROSECOND)) == NULL) {
                fprintf(stderr, "bench_peak: cannot register exp/dispatch threads\n");
                exit(EXIT_FAILURE);
            }
        }
}
