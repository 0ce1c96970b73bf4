/*
 * bench-softmax.c - peak_softmax per tier and through dispatch, against a
 * plain C loop with expf and oneDNN's softmax primitive, in one binary so
 * that every ratio comes from one run on one machine state.
 *
 * Shapes: H heads of L x L attention scores, H*L rows of L keys, no mask
 * and causal: 8 heads at L = 128, 512, 1024 (GPT-2), 2048, and
 * BERT-base/GPT-2-small's 12 heads at L = 128, 512, 1024 and long context
 * 4096 (768 MiB per buffer; the scalar tier is skipped there, too slow).
 * Every variant writes a separate y (out of place), from 64-byte aligned
 * buffers.
 *
 * Names: softmax/<variant>/heads:<H>/L:<L>/causal:<0|1> (plus /real_time),
 * variants:
 *   scalar, avx2, avx512  one tier's kernel through peak_kernels_for()
 *   dispatch              the public peak_softmax() (label: the tier)
 *   expf_loop             max, sum of expf(x - max), scale: the loop a user
 *                         writes; causal rows stop at the diagonal too
 *                         (baseline-softmax.c)
 *   onednn                dnnl_softmax_forward (v1 API, forward inference,
 *                         axis 1 of a [rows, L] f32 tensor), single-threaded:
 *                         Debian's libdnnl2 uses the OpenMP runtime, and the
 *                         benchmark calls omp_set_num_threads(1) before it
 *                         creates the primitive (label: implementation and
 *                         thread count).  Causal: -inf is written into its
 *                         input above the diagonal before timing, since the
 *                         primitive has no mask; that write is not timed.
 * A variant that cannot run here is reported as skipped, never called.
 *
 * Threads: dispatch again on a pool of n workers (bench_pool: made once by
 * peak_threadpool_create), softmax/dispatch/heads:<H>/L:<L>/causal:<0|1>/
 * threads:<n> (n from bench_thread_counts: 1 and 2 by default) at H 12,
 * L 512, 1024 and 4096 and H 8, L 2048: the speedup is threads:2 over
 * threads:1 of one run; the memory-bound floor at the same thread count is
 * memcpy/bytes:<n>/threads:<n> (bench-limits.c).
 *
 * Before timing, every variant runs once and four rows of its output are
 * checked against a double-precision softmax (1e-5 absolute); a wrong
 * result is skipped with the failing entry instead of timed.
 */
#include "baseline-softmax.h"
#include "bench.h"
#include "gbench-shim.h"

#include "internal.h"
#include "peak.h"
#include "softmax.h" /* peak_softmax_streams: every row in one kernel call */

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if PEAK_BENCH_ONEDNN
#include <dlfcn.h>
#include <oneapi/dnnl/dnnl.h>
#endif

typedef enum sm_impl { SM_TIER, SM_DISPATCH, SM_EXPF_LOOP, SM_ONEDNN } sm_impl;

typedef struct sm_variant {
    const char *name;
    sm_impl impl;
    peak_isa isa; /* SM_TIER only */
} sm_variant;

static const sm_variant sm_variants[] = {
    {"scalar", SM_TIER, PEAK_ISA_SCALAR},
#if defined(__x86_64__)
    {"avx2", SM_TIER, PEAK_ISA_AVX2},
    {"avx512", SM_TIER, PEAK_ISA_AVX512},
#elif defined(__aarch64__)
    {"neon", SM_TIER, PEAK_ISA_NEON},
#endif
    {"dispatch", SM_DISPATCH, PEAK_ISA_SCALAR},
    {"expf_loop", SM_EXPF_LOOP, PEAK_ISA_SCALAR},
#if PEAK_BENCH_ONEDNN
    {"onednn", SM_ONEDNN, PEAK_ISA_SCALAR},
#endif
};

/* {heads, L} */
static const int64_t sm_shapes[][2] = {{8, 128},  {8, 512},  {8, 1024},  {8, 2048},
                                       {12, 128}, {12, 512}, {12, 1024}, {12, 4096}};
/* The thread variants' shapes, {heads, L}, each full and causal. */
static const int64_t sm_thread_shapes[][2] = {{12, 512}, {12, 1024}, {8, 2048}, {12, 4096}};
/* The scalar tier is not timed on more scores than this (seconds a call). */
#define SM_SCALAR_MAX ((size_t)1 << 27)
#define SM_CHECK_TOL 1e-5

/* One benchmark's problem: x, y and (for oneDNN) its primitive. */
typedef struct sm_case {
    const sm_variant *v;
    size_t heads, L, rows;
    int causal;
    float *x, *y;
    peak_softmax_desc desc;
    const peak_threadpool *pool; /* dispatch: the thread variants' pool */
#if PEAK_BENCH_ONEDNN
    dnnl_engine_t engine;
    dnnl_stream_t stream;
    dnnl_primitive_t prim;
    dnnl_memory_t src, dst;
#endif
} sm_case;

/* ---- oneDNN --------------------------------------------------------------------- */

#if PEAK_BENCH_ONEDNN
/* The OpenMP runtime is libdnnl's own dependency, already loaded: found by
   name so that the benchmark need not link it itself.  Returns the thread
   count OpenMP will now use, or -1 if there is no OpenMP. */
static int onednn_single_thread(void)
{
    /* memcpy, not a cast: ISO C has no conversion from object pointer to
       function pointer, POSIX only promises the representations match. */
    void (*set)(int);
    int (*get)(void);
    void *set_sym = dlsym(RTLD_DEFAULT, "omp_set_num_threads");
    void *get_sym = dlsym(RTLD_DEFAULT, "omp_get_max_threads");
    if (!set_sym || !get_sym)
        return -1;
    memcpy(&set, &set_sym, sizeof set);
    memcpy(&get, &get_sym, sizeof get);
    set(1);
    return get();
}

/* What oneDNN is given for a causal softmax: -inf above the diagonal. */
static void sm_mask_causal(float *x, size_t rows, size_t L)
{
    for (size_t r = 0; r < rows; r++)
        for (size_t j = r % L + 1; j < L; j++)
            x[r * L + j] = -INFINITY;
}

static const char *onednn_setup(sm_case *c, char *label, size_t label_len)
{
    const int threads = onednn_single_thread();
    const dnnl_dims_t dims = {(dnnl_dim_t)c->rows, (dnnl_dim_t)c->L};
    dnnl_memory_desc_t md;
    dnnl_softmax_desc_t sd;
    dnnl_primitive_desc_t pd;
    if (dnnl_engine_create(&c->engine, dnnl_cpu, 0) != dnnl_success ||
        dnnl_stream_create(&c->stream, c->engine, dnnl_stream_default_flags) != dnnl_success)
        return "oneDNN: no CPU engine";
    if (dnnl_memory_desc_init_by_tag(&md, 2, dims, dnnl_f32, dnnl_ab) != dnnl_success ||
        dnnl_softmax_forward_desc_init(&sd, dnnl_forward_inference, &md, 1) != dnnl_success ||
        dnnl_primitive_desc_create(&pd, &sd, NULL, c->engine, NULL) != dnnl_success)
        return "oneDNN: softmax not supported";
    const char *impl = "?";
    dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl);
    snprintf(label, label_len, "%s, %d thread%s", impl, threads, threads == 1 ? "" : "s");
    const dnnl_status_t s = dnnl_primitive_create(&c->prim, pd);
    dnnl_primitive_desc_destroy(pd);
    if (s != dnnl_success ||
        dnnl_memory_create(&c->src, &md, c->engine, c->x) != dnnl_success ||
        dnnl_memory_create(&c->dst, &md, c->engine, c->y) != dnnl_success)
        return "oneDNN: cannot create the primitive";
    return NULL;
}

static void onednn_run(const sm_case *c)
{
    dnnl_exec_arg_t args[2] = {{DNNL_ARG_SRC, c->src}, {DNNL_ARG_DST, c->dst}};
    dnnl_primitive_execute(c->prim, c->stream, 2, args);
    dnnl_stream_wait(c->stream);
}

static void onednn_teardown(sm_case *c)
{
    if (c->dst)
        dnnl_memory_destroy(c->dst);
    if (c->src)
        dnnl_memory_destroy(c->src);
    if (c->prim)
        dnnl_primitive_destroy(c->prim);
    if (c->stream)
        dnnl_stream_destroy(c->stream);
    if (c->engine)
        dnnl_engine_destroy(c->engine);
}
#endif

/* ---- running and checking ----------------------------------------------------- */

static const char *sm_unavailable(const sm_variant *v)
{
    if (v->impl != SM_TIER)
        return NULL;
    if (peak_kernels_for(v->isa) == NULL)
        return "isa unsupported: not compiled into this build";
    if (!peak_isa_supported(v->isa))
        return "isa unsupported: not available on this CPU/OS";
    return NULL;
}

static void sm_run(const sm_case *c)
{
    switch (c->v->impl) {
    case SM_TIER:
        peak_kernels_for(c->v->isa)->softmax(c->y, c->x, &c->desc, 0, c->rows,
                                             peak_softmax_streams(&c->desc));
        break;
    case SM_DISPATCH:
        peak_softmax(c->y, c->x, &c->desc, c->pool);
        break;
    case SM_EXPF_LOOP:
        bench_softmax_expf_loop(c->y, c->x, c->rows, c->L, c->causal);
        break;
    case SM_ONEDNN:
#if PEAK_BENCH_ONEDNN
        onednn_run(c);
#endif
        break;
    }
}

/* 0 if sampled rows match a double-precision softmax, else a message. */
static int sm_check(const sm_case *c, char *msg, size_t msg_len)
{
    const size_t rows[] = {0, 1, c->L - 1, c->rows / 2 + 3, c->rows - 1};
    for (size_t k = 0; k < sizeof rows / sizeof rows[0]; k++) {
        const size_t r = rows[k];
        const float *x = c->x + r * c->L, *y = c->y + r * c->L;
        const size_t n = c->causal ? r % c->L + 1 : c->L;
        double max = -INFINITY, sum = 0.0;
        for (size_t j = 0; j < n; j++)
            max = x[j] > max ? x[j] : max;
        for (size_t j = 0; j < n; j++)
            sum += exp(x[j] - max);
        for (size_t j = 0; j < c->L; j++) {
            const double want = j < n ? exp(x[j] - max) / sum : 0.0;
            if (!(fabs(y[j] - want) <= SM_CHECK_TOL)) {
                snprintf(msg, msg_len, "wrong output: row %zu key %zu is %.7g, want %.7g", r, j,
                         (double)y[j], want);
                return 1;
            }
        }
    }
    return 0;
}

static void sm_measure(gb_state *st, sm_case *c)
{
    char msg[160];
    for (size_t k = 0; k < c->rows * c->L; k++)
        c->y[k] = NAN;
    sm_run(c);
    if (sm_check(c, msg, sizeof msg) != 0) {
        gb_skip_with_error(st, msg);
        return;
    }
    while (gb_keep_running(st)) {
        sm_run(c);
        gb_do_not_optimize(c->y);
    }
    const int64_t elems = (int64_t)(c->rows * c->L);
    gb_set_items_processed(st, gb_iterations(st) * elems);
    gb_set_bytes_processed(st, gb_iterations(st) * elems * 2 * (int64_t)sizeof(float));
}

static void *sm_alloc(size_t bytes)
{
    return aligned_alloc(64, (bytes + 63) / 64 * 64);
}

/* Sets up the variant's call on the filled c, then measures it. */
static void sm_prepare_and_measure(gb_state *st, sm_case *c)
{
    peak_softmax_desc d = PEAK_SOFTMAX_DESC_DEFAULT;
    d.batch = 1;
    d.heads = c->heads;
    d.q_len = d.k_len = c->L;
    d.x_stride[0] = d.y_stride[0] = (ptrdiff_t)(c->rows * c->L);
    d.x_stride[1] = d.y_stride[1] = (ptrdiff_t)(c->L * c->L);
    d.x_stride[2] = d.y_stride[2] = (ptrdiff_t)c->L;
    d.scale = 1.0f;
    d.mask.causal = c->causal;
    c->desc = d;

    if (c->v->impl == SM_DISPATCH)
        gb_set_label(st, peak_isa_name(peak_isa_active()));
#if PEAK_BENCH_ONEDNN
    if (c->v->impl == SM_ONEDNN) {
        char label[128];
        if (c->causal)
            sm_mask_causal(c->x, c->rows, c->L);
        const char *why = onednn_setup(c, label, sizeof label);
        if (why) {
            gb_skip_with_error(st, why);
            return;
        }
        gb_set_label(st, label);
    }
#endif
    sm_measure(st, c);
}

static void softmax_body(gb_state *st, void *user, const peak_threadpool *pool)
{
    sm_case c;
    memset(&c, 0, sizeof c);
    c.v = user;
    c.pool = pool;
    c.heads = (size_t)gb_range(st, 0);
    c.L = (size_t)gb_range(st, 1);
    c.rows = c.heads * c.L;
    c.causal = (int)gb_range(st, 2);

    const char *why = sm_unavailable(c.v);
    if (why == NULL && c.v->impl == SM_TIER && c.v->isa == PEAK_ISA_SCALAR &&
        c.rows * c.L > SM_SCALAR_MAX)
        why = "scalar: too slow at this size";
    if (why != NULL) {
        gb_skip_with_error(st, why);
        return;
    }
    c.x = sm_alloc(c.rows * c.L * sizeof(float));
    c.y = sm_alloc(c.rows * c.L * sizeof(float));
    if (c.x && c.y) {
        bench_fill_scores(c.x, c.rows * c.L);
        sm_prepare_and_measure(st, &c);
    } else {
        gb_skip_with_error(st, "out of memory");
    }
#if PEAK_BENCH_ONEDNN
    onednn_teardown(&c);
#endif
    free(c.y);
    free(c.x);
}

static void bench_softmax(gb_state *st, void *user)
{
    softmax_body(st, user, NULL);
}

/* .../threads:<n>: argument 3 */
static void bench_softmax_threads(gb_state *st, void *user)
{
    const peak_threadpool *pool = bench_pool((size_t)gb_range(st, 3));
    if (pool)
        softmax_body(st, user, pool);
    else
        gb_skip_with_error(st, "no pool: peak_threadpool_create failed (built without pthreadpool?)");
}

void bench_register_softmax(void)
{
    static const char *const arg_names[] = {"heads", "L", "causal"};
    char name[64];
    for (size_t l = 0; l < sizeof sm_shapes / sizeof sm_shapes[0]; l++) {
        for (int64_t causal = 0; causal <= 1; causal++) {
            const int64_t args[3] = {sm_shapes[l][0], sm_shapes[l][1], causal};
            for (size_t i = 0; i < sizeof sm_variants / sizeof sm_variants[0]; i++) {
                if (sm_variants[i].impl == SM_TIER &&
                    !bench_tier_has_kernel("softmax", sm_variants[i].isa))
                    continue;
                snprintf(name, sizeof name, "softmax/%s", sm_variants[i].name);
                gb_bench *b = gb_register(name, bench_softmax, (void *)&sm_variants[i]);
                b = gb_args(b, args, 3);
                b = gb_arg_names(b, arg_names, 3);
                b = gb_unit(b, GB_MICROSECOND);
                if (gb_use_real_time(b) == NULL) {
                    fprintf(stderr, "bench_peak: cannot register %s\n", name);
                    exit(EXIT_FAILURE);
                }
            }
        }
    }
    static const char *const thread_names[] = {"heads", "L", "causal", "threads"};
    const sm_variant *dispatch = NULL;
    for (size_t i = 0; i < sizeof sm_variants / sizeof sm_variants[0]; i++)
        if (sm_variants[i].impl == SM_DISPATCH)
            dispatch = &sm_variants[i];
    const int64_t *threads;
    const size_t n_threads = bench_thread_counts(&threads);
    for (size_t l = 0; l < sizeof sm_thread_shapes / sizeof sm_thread_shapes[0]; l++)
        for (int64_t causal = 0; causal <= 1; causal++)
            for (size_t t = 0; t < n_threads; t++) {
                const int64_t args[4] = {sm_thread_shapes[l][0], sm_thread_shapes[l][1], causal,
                                         threads[t]};
                gb_bench *b = gb_register("softmax/dispatch", bench_softmax_threads,
                                          (void *)dispatch);
                b = gb_arg_names(gb_args(b, args, 4), thread_names, 4);
                if (gb_use_real_time(gb_unit(b, GB_MICROSECOND)) == NULL) {
                    fprintf(stderr, "bench_peak: cannot register softmax/dispatch threads\n");
                    exit(EXIT_FAILURE);
                }
            }
}
