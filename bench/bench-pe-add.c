/*
 * bench-pe-add.c - peak_pe_add (PyTorch PositionalEncoding.forward(),
 * x += PE) per tier and through dispatch, against the plain C loop, in one
 * binary so that every ratio comes from one run.
 *
 * Names: pe_add/<variant>/batch:<B>/seq_len:<S>/d_model:<D>/fly:<0|1>
 * (plus /real_time), x [B, S, D] packed, in place, positions 0 .. S-1 in
 * every sequence.  fly:0 reads PE rows from a table (peak_pe_table), fly:1
 * computes them on the fly (pe == NULL).  Shapes: the [2, 50, 512] example
 * batch, BERT/GPT-2 d_model 768 at 128, 512, 1024 tokens, long context 2048 and
 * 4096, and a batch of 32 x 512 x 768 (48 MiB) far out of the L2.
 * Variants:
 *   scalar, avx2, avx512  one tier's kernel through peak_kernels_for()
 *   dispatch              the public peak_pe_add() (label: the tier)
 *   plain_loop            x[b,s,j] += pe[s,j] in C, default flags (fly:0 only)
 * bytes_per_second counts x read and written and the PE rows read (table
 * only): 12 bytes an element from a table, 8 on the fly; items are
 * elements of x.
 *
 * Before timing, every variant runs once on a copy and is checked bit for
 * bit against the plain loop (peak.h promises the same bits on every tier
 * and from the table or on the fly); a wrong result is skipped, not timed.
 * x grows by at most 1 a call while timed: no overflow, no subnormals.
 *
 * Threads: dispatch again on a pool of n workers (bench_pool: made once by
 * peak_threadpool_create), names ending /fly:<0|1>/threads:<n> (n from
 * bench_thread_counts: 1 and 2 by default) at 1 x 4096 x 768 and
 * 32 x 512 x 768: the speedup is threads:2 over threads:1 of one run; the
 * memory-bound floor at the same thread count is memcpy/bytes:<n>/threads:<n>
 * (bench-limits.c).
 */
#include "bench.h"
#include "gbench-shim.h"

#include "internal.h"
#include "peak.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef enum pa_impl { PA_TIER, PA_DISPATCH, PA_PLAIN } pa_impl;

typedef struct pa_variant {
    const char *name;
    pa_impl impl;
    peak_isa isa; /* PA_TIER */
} pa_variant;

static const pa_variant pa_variants[] = {
    {"scalar", PA_TIER, PEAK_ISA_SCALAR},
#if defined(__x86_64__)
    {"avx2", PA_TIER, PEAK_ISA_AVX2},
    {"avx512", PA_TIER, PEAK_ISA_AVX512},
#elif defined(__aarch64__)
    {"neon", PA_TIER, PEAK_ISA_NEON},
#endif
    {"dispatch", PA_DISPATCH, PEAK_ISA_SCALAR},
    {"plain_loop", PA_PLAIN, PEAK_ISA_SCALAR},
};

/* {batch, seq_len, d_model} */
static const int64_t pa_shapes[][3] = {{2, 50, 512},   {1, 128, 768},  {1, 512, 768},
                                       {1, 1024, 768}, {1, 2048, 768}, {1, 4096, 768},
                                       {32, 512, 768}};

/* The thread variants' shapes. */
static const int64_t pa_thread_shapes[][3] = {{1, 4096, 768}, {32, 512, 768}};

typedef struct pa_case {
    const pa_variant *v;
    size_t batch, seq, d;
    int fly;
    float *x, *pe;
    const peak_threadpool *pool; /* dispatch: the thread variants' pool */
} pa_case;

static void pa_plain_loop(float *x, const float *pe, size_t batch, size_t seq, size_t d)
{
    for (size_t b = 0; b < batch; b++)
        for (size_t s = 0; s < seq; s++)
            for (size_t j = 0; j < d; j++)
                x[(b * seq + s) * d + j] += pe[s * d + j];
}

static void pa_run(const pa_case *c, float *x)
{
    static const peak_pe_params params = PEAK_PE_PARAMS_DEFAULT;
    const float *pe = c->fly ? NULL : c->pe;
    const ptrdiff_t bs = (ptrdiff_t)(c->seq * c->d), ld = (ptrdiff_t)c->d;
    switch (c->v->impl) {
    case PA_TIER:
        peak_kernels_for(c->v->isa)->pe_add(x, bs, ld, c->batch, c->seq, c->d, 0, pe, &params, 0,
                                            PEAK_PE_FREQ_END);
        break;
    case PA_DISPATCH:
        peak_pe_add(x, bs, ld, c->batch, c->seq, c->d, 0, pe, c->seq, NULL, c->pool);
        break;
    case PA_PLAIN:
        pa_plain_loop(x, c->pe, c->batch, c->seq, c->d);
        break;
    }
}

/* NULL if one call on a copy of x matches the plain loop bit for bit. */
static const char *pa_check(const pa_case *c, char *msg, size_t len)
{
    const size_t n = c->batch * c->seq * c->d;
    float *got = bench_alloc(n * sizeof(float)), *want = bench_alloc(n * sizeof(float));
    const char *bad = NULL;
    if (!got || !want) {
        bad = "out of memory";
    } else {
        memcpy(got, c->x, n * sizeof(float));
        memcpy(want, c->x, n * sizeof(float));
        pa_run(c, got);
        pa_plain_loop(want, c->pe, c->batch, c->seq, c->d);
        for (size_t k = 0; k < n && !bad; k++)
            if (memcmp(&got[k], &want[k], sizeof(float)) != 0) {
                snprintf(msg, len, "wrong output: element %zu is %.9g, want %.9g", k,
                         (double)got[k], (double)want[k]);
                bad = msg;
            }
    }
    free(got);
    free(want);
    return bad;
}

static void pe_add_body(gb_state *st, void *user, const peak_threadpool *pool)
{
    pa_case c = {0};
    c.v = user;
    c.pool = pool;
    c.batch = (size_t)gb_range(st, 0);
    c.seq = (size_t)gb_range(st, 1);
    c.d = (size_t)gb_range(st, 2);
    c.fly = (int)gb_range(st, 3);
    const size_t n = c.batch * c.seq * c.d;
    const char *why = c.v->impl == PA_TIER ? bench_tier_unavailable(c.v->isa) : NULL;
    char msg[160];
    if (!why && c.fly && c.v->impl == PA_PLAIN)
        why = "not measured: the plain loop reads a table";
    if (!why) {
        c.x = bench_alloc(n * sizeof(float));
        c.pe = bench_alloc(c.seq * c.d * sizeof(float));
        if (!c.x || !c.pe)
            why = "out of memory";
    }
    if (!why) {
        bench_fill_uniform(c.x, n, 0x5eed5eed, -1.0f, 1.0f);
        if (peak_pe_table(c.pe, PEAK_F32, c.seq, c.d, 0, NULL, NULL) != PEAK_OK)
            why = "peak_pe_table failed";
        else
            why = pa_check(&c, msg, sizeof msg);
    }
    if (why) {
        gb_skip_with_error(st, why);
    } else {
        if (c.v->impl == PA_DISPATCH)
            gb_set_label(st, peak_isa_name(peak_isa_active()));
        pa_run(&c, c.x); /* faults the pages in */
        while (gb_keep_running(st)) {
            pa_run(&c, c.x);
            gb_do_not_optimize(c.x);
        }
        const int64_t per_elem = c.fly ? 8 : 12;
        gb_set_items_processed(st, gb_iterations(st) * (int64_t)n);
        gb_set_bytes_processed(st, gb_iterations(st) * (int64_t)n * per_elem);
    }
    free(c.x);
    free(c.pe);
}

static void bench_pe_add(gb_state *st, void *user)
{
    pe_add_body(st, user, NULL);
}

/* .../fly:<0|1>/threads:<n>: argument 4 */
static void bench_pe_add_threads(gb_state *st, void *user)
{
    const peak_threadpool *pool = bench_pool((size_t)gb_range(st, 4));
    if (pool)
        pe_add_body(st, user, pool);
    else
        gb_skip_with_error(st, "no pool: peak_threadpool_create failed (built without pthreadpool?)");
}

void bench_register_pe_add(void)
{
    static const char *const arg_names[] = {"batch", "seq_len", "d_model", "fly"};
    char name[64];
    for (size_t s = 0; s < sizeof pa_shapes / sizeof pa_shapes[0]; s++)
        for (int64_t fly = 0; fly <= 1; fly++)
            for (size_t i = 0; i < sizeof pa_variants / sizeof pa_variants[0]; i++) {
                if (fly && pa_variants[i].impl == PA_PLAIN)
                    continue;
                const int64_t args[4] = {pa_shapes[s][0], pa_shapes[s][1], pa_shapes[s][2], fly};
                if (pa_variants[i].impl == PA_TIER &&
                    !bench_tier_has_kernel("embedding", pa_variants[i].isa))
                    continue;
                snprintf(name, sizeof name, "pe_add/%s", pa_variants[i].name);
                gb_bench *b = gb_register(name, bench_pe_add, (void *)&pa_variants[i]);
                b = gb_args(b, args, 4);
                b = gb_arg_names(b, arg_names, 4);
                b = gb_unit(b, GB_MICROSECOND);
                if (gb_use_real_time(b) == NULL) {
                    fprintf(stderr, "bench_peak: cannot register %s\n", name);
                    exit(EXIT_FAILURE);
                }
            }
    static const char *const thread_names[] = {"batch", "seq_len", "d_model", "fly", "threads"};
    const pa_variant *dispatch = NULL;
    for (size_t i = 0; i < sizeof pa_variants / sizeof pa_variants[0]; i++)
        if (pa_variants[i].impl == PA_DISPATCH)
            dispatch = &pa_variants[i];
    const int64_t *threads;
    const size_t n_threads = bench_thread_counts(&threads);
    for (size_t s = 0; s < sizeof pa_thread_shapes / sizeof pa_thread_shapes[0]; s++)
        for (int64_t fly = 0; fly <= 1; fly++)
            for (size_t t = 0; t < n_threads; t++) {
                const int64_t args[5] = {pa_thread_shapes[s][0], pa_thread_shapes[s][1],
                                         pa_thread_shapes[s][2], fly, threads[t]};
                gb_bench *b = gb_register("pe_add/dispatch", bench_pe_add_threads, (void *)dispatch);
                b = gb_arg_names(gb_args(b, args, 5), thread_names, 5);
                if (gb_use_real_time(gb_unit(b, GB_MICROSECOND)) == NULL) {
                    fprintf(stderr, "bench_peak: cannot register pe_add/dispatch threads\n");
                    exit(EXIT_FAILURE);
                }
            }
}
