/*
 * bench-convert.c - peak_convert per tier and through dispatch, float32 to
 * and from bfloat16 and float16, with a plain memcpy of the same bytes
 * beside it (the floor a conversion cannot beat: it reads x and writes y).
 *
 * Names: convert/<variant>/<from>_<to>/n:<n> (plus /real_time), out of
 * place, 64-byte aligned, x uniform in [-1e4, 1e4] (float32) or its
 * conversion.  n = 65536 (L2) and 16 Mi (beyond the LLC).  Variants:
 *   scalar, avx2, avx512, neon   one tier's kernel (peak_kernels_for())
 *   dispatch                     the public peak_convert() (label: tier)
 *   memcpy                       a copy of (x's + y's bytes) / 2, the
 *                                same bytes moved (read and written)
 * bytes_per_second counts x read and y written.  Threads:
 * convert/dispatch/<from>_<to>/n:<n>/threads:<t> at n = 16 Mi (bench_pool).
 *
 * Before timing, every variant's output is checked against the scalar
 * tier's bytes (which tests/test-convert.c checks against its oracle); a
 * wrong result is skipped, not timed.
 */
#include "bench.h"
#include "gbench-shim.h"

#include "convert.h"
#include "internal.h"
#include "peak.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct cv_variant {
    const char *name;
    int impl; /* 0 tier, 1 dispatch, 2 memcpy */
    peak_isa isa;
} cv_variant;

static const cv_variant cv_variants[] = {
    {"scalar", 0, PEAK_ISA_SCALAR},
#if defined(__x86_64__)
    {"avx2", 0, PEAK_ISA_AVX2},
    {"avx512", 0, PEAK_ISA_AVX512},
#elif defined(__aarch64__)
    {"neon", 0, PEAK_ISA_NEON},
#endif
    {"dispatch", 1, PEAK_ISA_SCALAR},
    {"memcpy", 2, PEAK_ISA_SCALAR},
};

typedef struct cv_pair {
    const char *name;
    peak_dtype from, to;
} cv_pair;

static const cv_pair cv_pairs[] = {
    {"f32_bf16", PEAK_F32, PEAK_BF16},
    {"bf16_f32", PEAK_BF16, PEAK_F32},
    {"f32_f16", PEAK_F32, PEAK_F16},
    {"f16_f32", PEAK_F16, PEAK_F32},
};

static const int64_t cv_sizes[] = {65536, 1 << 24};

typedef struct cv_case {
    const cv_variant *v;
    const cv_pair *p;
} cv_case;

static cv_case cv_cases[sizeof cv_variants / sizeof cv_variants[0]]
                      [sizeof cv_pairs / sizeof cv_pairs[0]];

static void cv_run(const cv_case *c, void *y, const void *x, size_t n, const peak_threadpool *pool)
{
    const size_t xb = n * peak_dtype_size(c->p->from), yb = n * peak_dtype_size(c->p->to);
    switch (c->v->impl) {
    case 0:
        peak_kernels_for(c->v->isa)->convert(y, c->p->to, x, c->p->from, n,
                                                   peak_convert_streams(c->p->to, c->p->from, n));
        break;
    case 1:
        peak_convert(y, c->p->to, x, c->p->from, n, pool);
        break;
    default:
        memcpy(y, x, (xb + yb) / 2);
        break;
    }
}

static void convert_body(gb_state *st, void *user, const peak_threadpool *pool)
{
    const cv_case *c = user;
    const size_t n = (size_t)gb_range(st, 0);
    const char *why = c->v->impl == 0 ? bench_tier_unavailable(c->v->isa) : NULL;
    if (why) {
        gb_skip_with_error(st, why);
        return;
    }
    float *src = bench_alloc(n * sizeof(float));
    void *x = bench_alloc(n * sizeof(float)), *y = bench_alloc(n * sizeof(float));
    void *want = bench_alloc(n * sizeof(float));
    if (!src || !x || !y || !want) {
        gb_skip_with_error(st, "out of memory");
        goto out;
    }
    bench_fill_uniform(src, n, 0x0c0c0c0c, -1e4f, 1e4f);
    peak_kernels_for(PEAK_ISA_SCALAR)->convert(x, c->p->from, src, PEAK_F32, n, false);
    peak_kernels_for(PEAK_ISA_SCALAR)->convert(want, c->p->to, x, c->p->from, n, false);
    cv_run(c, y, x, n, pool);
    if (c->v->impl != 2 && memcmp(y, want, n * peak_dtype_size(c->p->to)) != 0) {
        gb_skip_with_error(st, "wrong output: not the scalar tier's bytes");
        goto out;
    }
    if (c->v->impl == 1)
        gb_set_label(st, peak_isa_name(peak_isa_active()));
    while (gb_keep_running(st)) {
        cv_run(c, y, x, n, pool);
        gb_do_not_optimize(y);
    }
    gb_set_items_processed(st, gb_iterations(st) * (int64_t)n);
    gb_set_bytes_processed(st, gb_iterations(st) * (int64_t)n *
                                   (int64_t)(peak_dtype_size(c->p->from) +
                                             peak_dtype_size(c->p->to)));
out:
    free(src);
    free(x);
    free(y);
    free(want);
}

static void bench_convert(gb_state *st, void *user)
{
    convert_body(st, user, NULL);
}

/* .../threads:<t>: argument 1 */
static void bench_convert_threads(gb_state *st, void *user)
{
    const peak_threadpool *pool = bench_pool((size_t)gb_range(st, 1));
    if (pool)
        convert_body(st, user, pool);
    else
        gb_skip_with_error(st, "no pool: peak_threadpool_create failed (built without pthreadpool?)");
}

static void cv_register(const char *name, void (*fn)(gb_state *, void *), cv_case *c,
                        const int64_t *args, const char *const *arg_names, size_t n_args)
{
    gb_bench *b = gb_register(name, fn, c);
    b = gb_arg_names(gb_args(b, args, n_args), arg_names, n_args);
    if (gb_use_real_time(gb_unit(b, GB_MICROSECOND)) == NULL) {
        fprintf(stderr, "bench_peak: cannot register %s\n", name);
        exit(EXIT_FAILURE);
    }
}

void bench_register_convert(void)
{
    static const char *const arg_names[] = {"n", "threads"};
    const int64_t *threads;
    const size_t n_threads = bench_thread_counts(&threads);
    char name[64];
    for (size_t i = 0; i < sizeof cv_variants / sizeof cv_variants[0]; i++)
        for (size_t p = 0; p < sizeof cv_pairs / sizeof cv_pairs[0]; p++)
            cv_cases[i][p] = (cv_case){&cv_variants[i], &cv_pairs[p]};
    for (size_t p = 0; p < sizeof cv_pairs / sizeof cv_pairs[0]; p++)
        for (size_t s = 0; s < sizeof cv_sizes / sizeof cv_sizes[0]; s++)
            for (size_t i = 0; i < sizeof cv_variants / sizeof cv_variants[0]; i++) {
                const cv_variant *v = &cv_variants[i];
                if (v->impl == 0 && !bench_tier_has_kernel("convert", v->isa))
                    continue;
                snprintf(name, sizeof name, "convert/%s/%s", v->name, cv_pairs[p].name);
                cv_register(name, bench_convert, &cv_cases[i][p], &cv_sizes[s], arg_names, 1);
                if (v->impl == 1 && cv_sizes[s] == (1 << 24))
                    for (size_t t = 0; t < n_threads; t++) {
                        const int64_t args[2] = {cv_sizes[s], threads[t]};
                        cv_register(name, bench_convert_threads, &cv_cases[i][p], args, arg_names,
                                    2);
                    }
            }
}
