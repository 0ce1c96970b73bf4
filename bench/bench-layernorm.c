/*
 * bench-layernorm.c - peak_add_layernorm per tier, against a plain C loop
 * and memcpy, in one binary so that every ratio comes from the same run on
 * the same machine state.
 *
 * Names: layernorm/<variant>/rows:<R>/d_model:<D> (Google Benchmark adds
 * /real_time).  The post-norm form of the paper, y = LayerNorm(x + r) *
 * gamma + beta, eps 1e-5, rows contiguous; 4096 rows stay within the last
 * level cache, 65536 rows (128 or 192 MiB an operand) do not.  Variants:
 *   scalar, avx2, avx512  peak_add_layernorm with that tier forced
 *   dispatch    peak_add_layernorm on the tier the dispatcher picks (label)
 *   plain_loop  the textbook two-pass loop in C (double accumulators, which
 *               the 1e4 + noise accuracy needs), built with the project's
 *               flags, under which GCC vectorises its last loop (SSE2)
 *   plain_loop_novec  the same loop built with -fno-tree-vectorize: the
 *               straightforward scalar loop; both are reported
 *               (baseline-plain-loops.h)
 *   memcpy      memcpy moving as many bytes as the kernel reads and writes
 *               (of the float32 call)
 *   bf16, f16   dispatch with x, r and y of that type (bytes_per_second
 *               still counts the float32 call's bytes: the same rows a
 *               second, comparable with dispatch)
 * bytes_per_second counts bytes read and written: x, r and y (4 * D each a
 * row) plus gamma and beta once; memcpy counts its source and destination.
 *
 * Threads: dispatch and memcpy again on a pool of n workers (bench_pool:
 * made once by peak_threadpool_create; memcpy split into one part per
 * worker), names ending /threads:<n> (n from bench_thread_counts: 1 and 2
 * by default), at 1024, 4096 and 65536 rows of 768: the speedup is
 * threads:2 over threads:1, and memcpy at threads:<n> the floor at that
 * thread count, of one run.
 *
 * Before timing, every run checks its output against the plain loop
 * (within 2e-6 * max(1, |y|)), so a wrong kernel is skipped instead of
 * producing a fast, meaningless number; that call also faults the pages in.
 */
#include "baseline-plain-loops.h"
#include "bench.h"
#include "gbench-shim.h"

#include "peak.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef enum layernorm_impl {
    LAYERNORM_TIER,
    LAYERNORM_DISPATCH,
    LAYERNORM_PLAIN,
    LAYERNORM_PLAIN_NOVEC,
    LAYERNORM_MEMCPY,
    LAYERNORM_TYPED
} layernorm_impl;

typedef struct layernorm_variant {
    const char *name;
    layernorm_impl impl;
    peak_isa isa;    /* LAYERNORM_TIER */
    peak_dtype type; /* LAYERNORM_TYPED: of x, r and y */
} layernorm_variant;

static const layernorm_variant layernorm_variants[] = {
    {"scalar", LAYERNORM_TIER, PEAK_ISA_SCALAR, PEAK_F32},
#if defined(__x86_64__)
    {"avx2", LAYERNORM_TIER, PEAK_ISA_AVX2, PEAK_F32},
    {"avx512", LAYERNORM_TIER, PEAK_ISA_AVX512, PEAK_F32},
#elif defined(__aarch64__)
    {"neon", LAYERNORM_TIER, PEAK_ISA_NEON, PEAK_F32},
#endif
    {"dispatch", LAYERNORM_DISPATCH, PEAK_ISA_SCALAR, PEAK_F32},
    {"plain_loop", LAYERNORM_PLAIN, PEAK_ISA_SCALAR, PEAK_F32},
    {"plain_loop_novec", LAYERNORM_PLAIN_NOVEC, PEAK_ISA_SCALAR, PEAK_F32},
    {"memcpy", LAYERNORM_MEMCPY, PEAK_ISA_SCALAR, PEAK_F32},
    {"bf16", LAYERNORM_TYPED, PEAK_ISA_SCALAR, PEAK_BF16},
    {"f16", LAYERNORM_TYPED, PEAK_ISA_SCALAR, PEAK_F16},
};

/* The [2, 50, 512] example batch (100 rows); BERT/GPT-2 sequences of 128,
   512 and 1024 tokens of 768; 4096 rows (within the last-level cache);
   65536 rows (out of it). */
static const int64_t layernorm_shapes[][2] = {{100, 512},  {128, 768},  {512, 768},   {1024, 768},
                                              {4096, 512}, {4096, 768}, {65536, 512}, {65536, 768}};

/* The thread variants' shapes. */
static const int64_t layernorm_thread_shapes[][2] = {{1024, 768}, {4096, 768}, {65536, 768}};

#define LAYERNORM_EPS 1e-5f
#define LAYERNORM_TOL 2e-6

typedef struct layernorm_run {
    const layernorm_variant *v;
    size_t rows, d;
    float *x, *r, *y, *gamma, *beta;
    void *xh, *rh, *yh; /* LAYERNORM_TYPED: x, r and y in its type */
    void *src, *dst; /* memcpy */
    size_t copy_bytes;
    const peak_threadpool *pool; /* dispatch and memcpy: the thread variants' pool */
} layernorm_run;

static size_t layernorm_traffic(size_t rows, size_t d)
{
    return (3 * rows * d + 2 * d) * sizeof(float);
}

static peak_status layernorm_call(layernorm_run *w)
{
    switch (w->v->impl) {
    case LAYERNORM_TIER:
    case LAYERNORM_DISPATCH:
        return peak_add_layernorm(w->y, (ptrdiff_t)w->d, NULL, 0, w->x, (ptrdiff_t)w->d, w->r,
                                  (ptrdiff_t)w->d, w->gamma, w->beta, w->rows, w->d, LAYERNORM_EPS, NULL,
                                  w->pool);
    case LAYERNORM_PLAIN:
        bench_layernorm_plain_loop_vec(w->y, w->x, w->r, w->gamma, w->beta, w->rows, w->d, LAYERNORM_EPS);
        return PEAK_OK;
    case LAYERNORM_PLAIN_NOVEC:
        bench_layernorm_plain_loop_novec(w->y, w->x, w->r, w->gamma, w->beta, w->rows, w->d,
                                  LAYERNORM_EPS);
        return PEAK_OK;
    case LAYERNORM_MEMCPY:
        bench_memcpy_on(w->dst, w->src, w->copy_bytes, w->pool);
        return PEAK_OK;
    case LAYERNORM_TYPED: {
        const peak_dtype t = w->v->type;
        const peak_layernorm_types types = {t, t, t, t};
        const peak_status st =
            peak_add_layernorm(w->yh, (ptrdiff_t)w->d, NULL, 0, w->xh, (ptrdiff_t)w->d, w->rh,
                               (ptrdiff_t)w->d, w->gamma, w->beta, w->rows, w->d, LAYERNORM_EPS,
                               &types, w->pool);
        return st;
    }
    }
    return PEAK_ERR_UNSUPPORTED;
}

static float *layernorm_alloc(size_t n)
{
    return aligned_alloc(64, (n * sizeof(float) + 63) / 64 * 64);
}

static void layernorm_fill(float *p, size_t n, uint64_t *s, float lo, float hi)
{
    for (size_t k = 0; k < n; k++) {
        *s = *s * 6364136223846793005ull + 1442695040888963407ull;
        p[k] = lo + (hi - lo) * (float)((double)(*s >> 40) * 0x1p-24);
    }
}

static const char *layernorm_setup(layernorm_run *w)
{
    if (w->v->impl == LAYERNORM_TIER && peak_isa_force(w->v->isa) != PEAK_OK)
        return "isa unsupported on this CPU/OS/build";
    if (w->v->impl == LAYERNORM_MEMCPY) {
        w->copy_bytes = layernorm_traffic(w->rows, w->d) / 2;
        w->src = aligned_alloc(64, (w->copy_bytes + 63) / 64 * 64);
        w->dst = aligned_alloc(64, (w->copy_bytes + 63) / 64 * 64);
        if (!w->src || !w->dst)
            return "out of memory";
        memset(w->src, 0x3c, w->copy_bytes);
        memset(w->dst, 0, w->copy_bytes);
        return NULL;
    }
    const size_t n = w->rows * w->d;
    w->x = layernorm_alloc(n);
    w->r = layernorm_alloc(n);
    w->y = layernorm_alloc(n);
    w->gamma = layernorm_alloc(w->d);
    w->beta = layernorm_alloc(w->d);
    if (!w->x || !w->r || !w->y || !w->gamma || !w->beta)
        return "out of memory";
    uint64_t s = 0x13198a2e03707344ull;
    layernorm_fill(w->x, n, &s, -2.0f, 3.0f);
    layernorm_fill(w->r, n, &s, -1.0f, 1.0f);
    layernorm_fill(w->gamma, w->d, &s, 0.5f, 1.5f);
    layernorm_fill(w->beta, w->d, &s, -1.0f, 1.0f);
    if (w->v->impl == LAYERNORM_TYPED) { /* the 16-bit values, and x, r widened from them */
        const peak_dtype t = w->v->type;
        w->xh = aligned_alloc(64, (n * 2 + 63) / 64 * 64);
        w->rh = aligned_alloc(64, (n * 2 + 63) / 64 * 64);
        w->yh = aligned_alloc(64, (n * 2 + 63) / 64 * 64);
        if (!w->xh || !w->rh || !w->yh)
            return "out of memory";
        peak_convert(w->xh, t, w->x, PEAK_F32, n, NULL);
        peak_convert(w->rh, t, w->r, PEAK_F32, n, NULL);
        peak_convert(w->x, PEAK_F32, w->xh, t, n, NULL);
        peak_convert(w->r, PEAK_F32, w->rh, t, n, NULL);
        memset(w->yh, 0, n * 2);
    }
    return NULL;
}

static const char *layernorm_check(const layernorm_run *w, char *msg, size_t len)
{
    if (w->v->impl == LAYERNORM_MEMCPY)
        return memcmp(w->dst, w->src, w->copy_bytes) ? "memcpy copied wrong bytes" : NULL;
    const size_t n = w->rows * w->d;
    float *want = layernorm_alloc(n);
    if (!want)
        return "out of memory";
    bench_layernorm_plain_loop_vec(want, w->x, w->r, w->gamma, w->beta, w->rows, w->d, LAYERNORM_EPS);
    /* a 16-bit y: within half an ULP of its type more (relative 2^-8, 2^-11) */
    double half_ulp = 0.0;
    if (w->v->impl == LAYERNORM_TYPED) {
        peak_convert(w->y, PEAK_F32, w->yh, w->v->type, n, NULL);
        half_ulp = w->v->type == PEAK_BF16 ? 0x1p-8 : 0x1p-11;
    }
    const char *bad = NULL;
    for (size_t k = 0; k < n && !bad; k++) {
        const double ref = want[k];
        if (!(fabs((double)w->y[k] - ref) <=
              LAYERNORM_TOL * fmax(1.0, fabs(ref)) + half_ulp * fabs(ref))) {
            snprintf(msg, len, "wrong output: row %zu col %zu is %.9g, want %.9g", k / w->d,
                     k % w->d, (double)w->y[k], ref);
            bad = msg;
        }
    }
    free(want);
    return bad;
}

static void layernorm_measure(gb_state *st, layernorm_run *w)
{
    if (w->y)
        for (size_t k = 0; k < w->rows * w->d; k++)
            w->y[k] = NAN;
    const peak_status status = layernorm_call(w);
    if (status != PEAK_OK) {
        gb_skip_with_error(st, peak_status_string(status));
        return;
    }
    char msg[160];
    const char *bad = layernorm_check(w, msg, sizeof msg);
    if (bad) {
        gb_skip_with_error(st, bad);
        return;
    }
    while (gb_keep_running(st)) {
        layernorm_call(w);
        gb_do_not_optimize(w->y ? (void *)w->y : w->dst);
    }
    if (w->v->impl == LAYERNORM_DISPATCH)
        gb_set_label(st, peak_isa_name(peak_isa_active()));
    gb_set_bytes_processed(st, gb_iterations(st) * (int64_t)layernorm_traffic(w->rows, w->d));
    gb_set_items_processed(st, gb_iterations(st) * (int64_t)w->rows);
}

static void layernorm_body(gb_state *st, void *user, const peak_threadpool *pool)
{
    layernorm_run w = {0};
    w.v = user;
    w.pool = pool;
    w.rows = (size_t)gb_range(st, 0);
    w.d = (size_t)gb_range(st, 1);
    const char *why = layernorm_setup(&w);
    if (why)
        gb_skip_with_error(st, why);
    else
        layernorm_measure(st, &w);
    peak_isa_reset();
    free(w.x);
    free(w.r);
    free(w.y);
    free(w.gamma);
    free(w.beta);
    free(w.src);
    free(w.dst);
    free(w.xh);
    free(w.rh);
    free(w.yh);
}

static void bench_layernorm(gb_state *st, void *user)
{
    layernorm_body(st, user, NULL);
}

/* .../threads:<n>: argument 2 */
static void bench_layernorm_threads(gb_state *st, void *user)
{
    const peak_threadpool *pool = bench_pool((size_t)gb_range(st, 2));
    if (pool)
        layernorm_body(st, user, pool);
    else
        gb_skip_with_error(st, "no pool: peak_threadpool_create failed (built without pthreadpool?)");
}

void bench_register_layernorm(void)
{
    static const char *const arg_names[] = {"rows", "d_model"};
    char name[64];
    for (size_t s = 0; s < sizeof layernorm_shapes / sizeof layernorm_shapes[0]; s++) {
        for (size_t i = 0; i < sizeof layernorm_variants / sizeof layernorm_variants[0]; i++) {
            if (layernorm_variants[i].impl == LAYERNORM_TIER &&
                !bench_tier_has_kernel("layernorm", layernorm_variants[i].isa))
                continue;
            snprintf(name, sizeof name, "layernorm/%s", layernorm_variants[i].name);
            gb_bench *b = gb_register(name, bench_layernorm, (void *)&layernorm_variants[i]);
            b = gb_args(b, layernorm_shapes[s], 2);
            b = gb_arg_names(b, arg_names, 2);
            b = gb_unit(b, GB_MICROSECOND);
            if (gb_use_real_time(b) == NULL) {
                fprintf(stderr, "bench_peak: cannot register %s\n", name);
                exit(EXIT_FAILURE);
            }
        }
    }
    static const char *const thread_names[] = {"rows", "d_model", "threads"};
    const int64_t *threads;
    const size_t n_threads = bench_thread_counts(&threads);
    for (size_t s = 0; s < sizeof layernorm_thread_shapes / sizeof layernorm_thread_shapes[0]; s++)
        for (size_t i = 0; i < sizeof layernorm_variants / sizeof layernorm_variants[0]; i++) {
            const layernorm_variant *v = &layernorm_variants[i];
            if (v->impl != LAYERNORM_DISPATCH && v->impl != LAYERNORM_MEMCPY &&
                v->impl != LAYERNORM_TYPED)
                continue;
            snprintf(name, sizeof name, "layernorm/%s", v->name);
            for (size_t t = 0; t < n_threads; t++) {
                const int64_t args[3] = {layernorm_thread_shapes[s][0],
                                         layernorm_thread_shapes[s][1], threads[t]};
                gb_bench *b = gb_register(name, bench_layernorm_threads, (void *)v);
                b = gb_arg_names(gb_args(b, args, 3), thread_names, 3);
                if (gb_use_real_time(gb_unit(b, GB_MICROSECOND)) == NULL) {
                    fprintf(stderr, "bench_peak: cannot register %s threads\n", name);
                    exit(EXIT_FAILURE);
                }
            }
        }
}
