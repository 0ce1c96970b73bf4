/*
 * bench-pe-table.c - peak_pe_table per tier, through dispatch, and the
 * baselines its speed-up goals are stated against (GOALS in
 * bench/report_model.py), in one binary so that every ratio comes from the
 * same run on the same machine state.
 *
 * Names: pe_table/<variant>/seq_len:<n>/d_model:<d> (Google Benchmark adds
 * /real_time), variants:
 *   scalar, avx2, avx512 (neon on AArch64)  one tier's kernel, called
 *                       directly through peak_kernels_for(), default params
 *   dispatch            the public peak_pe_table() (the active tier is the
 *                       label), to show what validation + dispatch cost
 *   libm_loop           PositionalEncoding's float32 formula, glibc sinf/cosf
 *                       per element
 *   sleef_scalar        the same formula, SLEEF's scalar u10 sincos per element
 *   sleef_avx512/avx2   the same formula, SLEEF u10 sincos 16/8 at a time
 *   sleef_u35_avx512    the same with SLEEF's faster u35 (3.5 ULP) sincos
 *   libmvec_avx512/avx2 the same formula as a loop GCC vectorises into glibc's
 *                       libmvec sinf/cosf (-O3 -ffast-math, baseline-libmvec.c)
 * A variant this CPU, OS or build can't run is reported as skipped, never
 * called.
 *
 * Threads: dispatch again on a pool of n workers (bench_pool: made once by
 * peak_threadpool_create), pe_table/dispatch/seq_len:<n>/d_model:<d>/
 * threads:<n> (n from bench_thread_counts: 1 and 2 by default) at
 * 5000 x 512, 4096 x 768 and 65536 x 512 (128 MiB): the speedup is
 * threads:2 over threads:1 of one run.
 *
 * Before timing, every run fills the output with NaN, runs once and checks
 * the table (all entries finite and in [-1, 1], sampled entries against
 * double sin/cos of the exact angle); a wrong or unfinished kernel is
 * skipped with the failing entry instead of producing a fast, meaningless
 * number.  That first call also faults the pages in, so the timed loop
 * measures the kernel and not the kernel's page faults.
 */
#include "baseline-pe-table.h"
#include "bench.h"
#include "gbench-shim.h"

#include "internal.h"
#include "pe-table.h" /* peak_pe_streams: a whole table in one kernel call */
#include "peak.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef enum pe_impl {
    PE_TIER,
    PE_DISPATCH,
    PE_LIBM,
    PE_SLEEF_SCALAR,
    PE_SLEEF_AVX512,
    PE_SLEEF_U35_AVX512,
    PE_SLEEF_AVX2,
    PE_LIBMVEC_AVX512,
    PE_LIBMVEC_AVX2
} pe_impl;

typedef struct pe_variant {
    const char *name;
    pe_impl impl;
    peak_isa isa; /* PE_TIER only */
} pe_variant;

static const pe_variant pe_variants[] = {
    {"scalar", PE_TIER, PEAK_ISA_SCALAR},
#if defined(__x86_64__)
    {"avx2", PE_TIER, PEAK_ISA_AVX2},
    {"avx512", PE_TIER, PEAK_ISA_AVX512},
#elif defined(__aarch64__)
    {"neon", PE_TIER, PEAK_ISA_NEON},
#endif
    {"dispatch", PE_DISPATCH, PEAK_ISA_SCALAR},
    {"libm_loop", PE_LIBM, PEAK_ISA_SCALAR},
    {"sleef_scalar", PE_SLEEF_SCALAR, PEAK_ISA_SCALAR},
#if PEAK_BENCH_SLEEF_AVX512
    {"sleef_avx512", PE_SLEEF_AVX512, PEAK_ISA_SCALAR},
    {"sleef_u35_avx512", PE_SLEEF_U35_AVX512, PEAK_ISA_SCALAR},
#endif
#if PEAK_BENCH_SLEEF_AVX2
    {"sleef_avx2", PE_SLEEF_AVX2, PEAK_ISA_SCALAR},
#endif
#if PEAK_BENCH_LIBMVEC_AVX512
    {"libmvec_avx512", PE_LIBMVEC_AVX512, PEAK_ISA_SCALAR},
#endif
#if PEAK_BENCH_LIBMVEC_AVX2
    {"libmvec_avx2", PE_LIBMVEC_AVX2, PEAK_ISA_SCALAR},
#endif
};

/* {seq_len, d_model}.  First the table of the PyTorch PositionalEncoding
   module at max_len 5000, d_model 512, the shape of the speed-up goals
   (AVX-512 12x and AVX2 6x the libm loop, AVX-512 3x SLEEF); then the rows
   its forward() uses for 50-token sentences (100 KB: in L2, the arithmetic
   without the cost of writing 10 MB back to memory); then BERT/GPT-2's
   d_model 768 at 128, 512 and 1024 positions and at the long contexts 2048
   and 4096. */
static const int64_t pe_shapes[][2] = {{5000, 512}, {50, 512},   {128, 768}, {512, 768},
                                       {1024, 768}, {2048, 768}, {4096, 768}};

/* The thread variants' shapes. */
static const int64_t pe_thread_shapes[][2] = {{5000, 512}, {4096, 768}, {65536, 512}};

#define PE_CHECK_TOL 2e-3

/* NULL if v can run here, else why not. */
static const char *pe_unavailable(const pe_variant *v)
{
    switch (v->impl) {
    case PE_TIER:
        if (peak_kernels_for(v->isa) == NULL)
            return "isa unsupported: not compiled into this build";
        if (!peak_isa_supported(v->isa))
            return "isa unsupported: not available on this CPU/OS";
        return NULL;
    case PE_DISPATCH:
    case PE_LIBM:
    case PE_SLEEF_SCALAR:
        return NULL;
    /* The baselines ask the compiler runtime rather than peak: a bug in the
       detection under test must not decide whether its yardstick runs.
       libgcc also checks XCR0, so a kernel without ZMM state support is
       not reported as AVX-512 capable. */
    case PE_SLEEF_AVX512:
    case PE_SLEEF_U35_AVX512:
    case PE_LIBMVEC_AVX512:
#if defined(__x86_64__)
        if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
            __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl"))
            return NULL;
#endif
        return "isa unsupported: no AVX-512 F/DQ/BW/VL on this CPU/OS";
    case PE_SLEEF_AVX2:
    case PE_LIBMVEC_AVX2:
#if defined(__x86_64__)
        if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
            return NULL;
#endif
        return "isa unsupported: no AVX2+FMA on this CPU/OS";
    }
    return "unknown variant";
}

/* pool: dispatch's (NULL: this thread). */
static peak_status pe_run(const pe_variant *v, float *out, size_t n_pos, size_t d_model,
                          float *div, const peak_threadpool *pool)
{
    static const peak_pe_params params = PEAK_PE_PARAMS_DEFAULT;
    switch (v->impl) {
    case PE_TIER:
        peak_kernels_for(v->isa)->pe_table(out, (ptrdiff_t)d_model, n_pos, d_model, 0, &params,
                                           0, PEAK_PE_FREQ_END,
                                           peak_pe_streams(n_pos, d_model, &params));
        return PEAK_OK;
    case PE_DISPATCH:
        return peak_pe_table(out, PEAK_F32, n_pos, d_model, 0, NULL, pool);
    case PE_LIBM:
        bench_pe_table_libm(out, n_pos, d_model, div);
        return PEAK_OK;
    case PE_SLEEF_SCALAR:
        bench_pe_table_sleef_scalar(out, n_pos, d_model, div);
        return PEAK_OK;
    case PE_SLEEF_U35_AVX512:
#if PEAK_BENCH_SLEEF_AVX512
        bench_pe_table_sleef_u35_avx512(out, n_pos, d_model, div);
        return PEAK_OK;
#else
        break;
#endif
    case PE_LIBMVEC_AVX512:
#if PEAK_BENCH_LIBMVEC_AVX512
        bench_pe_table_libmvec_avx512(out, n_pos, d_model, div);
        return PEAK_OK;
#else
        break;
#endif
    case PE_LIBMVEC_AVX2:
#if PEAK_BENCH_LIBMVEC_AVX2
        bench_pe_table_libmvec_avx2(out, n_pos, d_model, div);
        return PEAK_OK;
#else
        break;
#endif
    case PE_SLEEF_AVX512:
#if PEAK_BENCH_SLEEF_AVX512
        bench_pe_table_sleef_avx512(out, n_pos, d_model, div);
        return PEAK_OK;
#else
        break;
#endif
    case PE_SLEEF_AVX2:
#if PEAK_BENCH_SLEEF_AVX2
        bench_pe_table_sleef_avx2(out, n_pos, d_model, div);
        return PEAK_OK;
#else
        break;
#endif
    }
    return PEAK_ERR_UNSUPPORTED;
}

/* 0 if the table looks right, else writes the first problem to msg.
   The tolerance admits both the library's exact mode and the float32
   formula of the baselines (off by ~1e-4 at position 5000). */
static int pe_check(const float *out, size_t n_pos, size_t d_model, char *msg, size_t msg_len)
{
    for (size_t k = 0; k < n_pos * d_model; k++) {
        if (!(out[k] >= -1.0f && out[k] <= 1.0f)) {
            snprintf(msg, msg_len, "wrong output: pos %zu col %zu is %g%s", k / d_model,
                     k % d_model, (double)out[k], isnan(out[k]) ? " (never written?)" : "");
            return 1;
        }
    }
    const size_t rows[] = {0, 1, n_pos / 2, n_pos - 1};
    const size_t cols[] = {0, 1, (d_model / 2) & ~(size_t)1, (d_model / 2) | 1, d_model - 2,
                           d_model - 1};
    for (size_t r = 0; r < sizeof rows / sizeof rows[0]; r++) {
        for (size_t c = 0; c < sizeof cols / sizeof cols[0]; c++) {
            const size_t p = rows[r], j = cols[c];
            if (p >= n_pos || j >= d_model)
                continue;
            const double w = exp(-(double)(j & ~(size_t)1) / (double)d_model * log(10000.0));
            const double a = (double)p * w;
            const double want = (j & 1) ? cos(a) : sin(a);
            const double got = out[p * d_model + j];
            if (fabs(got - want) > PE_CHECK_TOL) {
                snprintf(msg, msg_len, "wrong output: pos %zu col %zu is %.7g, want %.7g", p, j,
                         got, want);
                return 1;
            }
        }
    }
    return 0;
}

static void *pe_alloc(size_t bytes)
{
    /* 64-byte aligned like a framework's tensor allocator, so that no
       variant is helped or hurt by where malloc happened to put it. */
    return aligned_alloc(64, (bytes + 63) / 64 * 64);
}

/* The body of one run, given its buffers. */
static void pe_measure(gb_state *st, const pe_variant *v, float *out, float *div, size_t n_pos,
                       size_t d_model, const peak_threadpool *pool)
{
    for (size_t k = 0; k < n_pos * d_model; k++)
        out[k] = NAN;
    const peak_status s = pe_run(v, out, n_pos, d_model, div, pool);
    if (s != PEAK_OK) {
        gb_skip_with_error(st, peak_status_string(s));
        return;
    }
    char msg[160];
    if (pe_check(out, n_pos, d_model, msg, sizeof msg) != 0) {
        gb_skip_with_error(st, msg);
        return;
    }
    if (v->impl == PE_DISPATCH)
        gb_set_label(st, peak_isa_name(peak_isa_active()));

    while (gb_keep_running(st)) {
        pe_run(v, out, n_pos, d_model, div, pool);
        gb_do_not_optimize(out);
    }

    const int64_t elems = (int64_t)(n_pos * d_model);
    gb_set_items_processed(st, gb_iterations(st) * elems);
    gb_set_bytes_processed(st, gb_iterations(st) * elems * (int64_t)sizeof(float));
}

static void pe_table_body(gb_state *st, void *user, const peak_threadpool *pool)
{
    const pe_variant *v = user;
    const size_t n_pos = (size_t)gb_range(st, 0);
    const size_t d_model = (size_t)gb_range(st, 1);

    const char *why = pe_unavailable(v);
    if (why != NULL) {
        gb_skip_with_error(st, why);
        return;
    }
    float *out = pe_alloc(n_pos * d_model * sizeof(float));
    float *div = pe_alloc(BENCH_PE_DIV_LEN(d_model) * sizeof(float));
    if (out != NULL && div != NULL)
        pe_measure(st, v, out, div, n_pos, d_model, pool);
    else
        gb_skip_with_error(st, "out of memory");
    free(div);
    free(out);
}

static void bench_pe_table(gb_state *st, void *user)
{
    pe_table_body(st, user, NULL);
}

/* .../threads:<n>: argument 2 */
static void bench_pe_table_threads(gb_state *st, void *user)
{
    const peak_threadpool *pool = bench_pool((size_t)gb_range(st, 2));
    if (pool)
        pe_table_body(st, user, pool);
    else
        gb_skip_with_error(st, "no pool: peak_threadpool_create failed (built without pthreadpool?)");
}

void bench_register_pe_table(void)
{
    static const char *const arg_names[] = {"seq_len", "d_model"};
    char name[64];
    /* Shape-major, so that every variant of one shape sits together in the
       console output. */
    for (size_t s = 0; s < sizeof pe_shapes / sizeof pe_shapes[0]; s++) {
        for (size_t i = 0; i < sizeof pe_variants / sizeof pe_variants[0]; i++) {
            if (pe_variants[i].impl == PE_TIER &&
                !bench_tier_has_kernel("pe_table", pe_variants[i].isa))
                continue;
            snprintf(name, sizeof name, "pe_table/%s", pe_variants[i].name);
            gb_bench *b = gb_register(name, bench_pe_table, (void *)&pe_variants[i]);
            b = gb_args(b, pe_shapes[s], 2);
            b = gb_arg_names(b, arg_names, 2);
            b = gb_unit(b, GB_MICROSECOND);
            if (gb_use_real_time(b) == NULL) {
                fprintf(stderr, "bench_peak: cannot register %s\n", name);
                exit(EXIT_FAILURE);
            }
        }
    }
    static const char *const thread_names[] = {"seq_len", "d_model", "threads"};
    const pe_variant *dispatch = NULL;
    for (size_t i = 0; i < sizeof pe_variants / sizeof pe_variants[0]; i++)
        if (pe_variants[i].impl == PE_DISPATCH)
            dispatch = &pe_variants[i];
    const int64_t *threads;
    const size_t n_threads = bench_thread_counts(&threads);
    for (size_t s = 0; s < sizeof pe_thread_shapes / sizeof pe_thread_shapes[0]; s++)
        for (size_t t = 0; t < n_threads; t++) {
            const int64_t args[3] = {pe_thread_shapes[s][0], pe_thread_shapes[s][1], threads[t]};
            gb_bench *b = gb_register("pe_table/dispatch", bench_pe_table_threads, (void *)dispatch);
            b = gb_arg_names(gb_args(b, args, 3), thread_names, 3);
            if (gb_use_real_time(gb_unit(b, GB_MICROSECOND)) == NULL) {
                fprintf(stderr, "bench_peak: cannot register pe_table/dispatch threads\n");
                exit(EXIT_FAILURE);
            }
        }
}
