/*
 * bench-rope.c - the rotary embedding (peak_rope_apply, peak_rope_cache)
 * per tier and through dispatch, against memcpy of the same bytes, in one
 * binary so that every ratio comes from the same run on the same machine
 * state.
 *
 * Rotation: rope_apply/<variant>/batch:<B>/seq_len:<L>/heads:<H>/
 * head_dim:128/cache:<0|1>/inplace:<0|1>/positions:<0|1> (Google Benchmark
 * adds /real_time), x and y [B, L, H, 128] packed, rotary_dim 128 =
 * head_dim, half-split pairing, EXACT mode, base 10000.  Shapes: LLaMA-2
 * 7B's Q [1, 4096, 32, 128] (64 MiB) and a GQA K [1, 4096, 8, 128]
 * (16 MiB), each with cos/sin from a cache (cache:1, the 131072-row table
 * peak_rope_cache makes; the 4096 rows read are 2 MiB) and on the fly
 * (cache:0), out of place (y a separate buffer, inplace:0) and in place
 * (y = x); and batched decode [32, 1, 32, 128], one token per sequence at
 * its own position (an int64 positions array, positions:1), on the fly.
 * Q and K are read and written out of cache: every iteration takes the next
 * of enough copies of x (and y) to exceed twice the last-level cache
 * (sysconf, 64 MiB if unknown).  Decode's 512 KiB stay in L2.
 * Variants:
 *   scalar, avx2, avx512 (neon on AArch64)  the tier's rope_apply kernel
 *            through peak_kernels_for(), one call per sequence, frequencies
 *            prepared as the scheduler does (the tier variant is registered
 *            only where kernels.inc gives the tier a kernel)
 *   dispatch the public peak_rope_apply() (label: the active tier)
 *   memcpy   rope_apply/memcpy/batch:<B>/seq_len:<L>/heads:<H>/head_dim:128:
 *            glibc memcpy of x's bytes into y, over the same number of
 *            copies: the floor of a pass that reads x and writes y once
 * bytes_per_second counts x read and y written (8 bytes an element, in
 * place too; the cache rows and positions are not counted), memcpy its
 * source and destination: the two rates compare directly.  Items are
 * elements of x.
 *
 * Cache table: rope_cache/<variant>/n_pos:<n>/rotary_dim:128/mode:<0|1>
 * (mode 0 EXACT, 1 HF_F32), positions 0 .. n-1, n = 131072 (64 MiB, out
 * of cache: a 128k-context model's table) and 4096 (2 MiB).  Variants:
 * the tiers' rope_cache kernel in pieces of 256 rows (as the scheduler
 * cuts it: a piece's rows stay in L2 across the frequency chunks) and
 * dispatch (peak_rope_cache).  Items are cache entries (a cos and a sin);
 * bytes the table written.  The write floor of the same bytes is
 * write/bytes:67108864 (bench-limits.c).
 *
 * Threads: dispatch and memcpy again on a pool of n workers (bench_pool:
 * made once by peak_threadpool_create; memcpy split into one part per
 * worker, bench_memcpy_on), names ending /threads:<n> (n from
 * bench_thread_counts: 1 and 2 by default), for every rotation shape and
 * the 131072-row tables: the speedup is threads:2 over threads:1, and
 * memcpy at threads:<n> the floor at that thread count, of one run.
 *
 * Before timing, every run checks its output: the rotation bit for bit
 * against a plain loop over peak_rope_cache's rows (peak.h promises the
 * same bits on every tier, from a cache or on the fly), those rows against
 * double cos/sin of the exact angle (2^-22); the table's every entry
 * finite and in [-1, 1] and sampled rows against double cos/sin (EXACT
 * 2^-22; HF_F32 the float angle's error); memcpy its bytes.  A wrong or
 * unfinished kernel is skipped with the failing element instead of
 * producing a fast, meaningless number.  That first call also faults the
 * pages in.
 */
#include "bench.h"
#include "gbench-shim.h"

#include "internal.h"
#include "peak.h"
#include "rope.h" /* peak_rope_freqs: the tier variants call kernels directly */

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define ROPE_DIM 128
#define ROPE_BASE 10000.0
/* Rows of the cache the rotation reads from (a 128k-context table). */
#define ROPE_CACHE_ROWS ((size_t)131072)
/* The tier variants' table pieces: the scheduler's item (schedule-rope.c). */
#define ROPE_CACHE_PIECE ((size_t)256)

typedef enum rope_impl { ROPE_TIER, ROPE_DISPATCH, ROPE_MEMCPY } rope_impl;

typedef struct rope_variant {
    const char *name;
    rope_impl impl;
    peak_isa isa; /* ROPE_TIER */
} rope_variant;

static const rope_variant rope_variants[] = {
    {"scalar", ROPE_TIER, PEAK_ISA_SCALAR},
#if defined(__x86_64__)
    {"avx2", ROPE_TIER, PEAK_ISA_AVX2},
    {"avx512", ROPE_TIER, PEAK_ISA_AVX512},
#elif defined(__aarch64__)
    {"neon", ROPE_TIER, PEAK_ISA_NEON},
#endif
    {"dispatch", ROPE_DISPATCH, PEAK_ISA_SCALAR},
    {"memcpy", ROPE_MEMCPY, PEAK_ISA_SCALAR},
};

/* {batch, seq_len, heads, cache, inplace, positions} */
static const int64_t rope_apply_shapes[][6] = {
    {1, 4096, 32, 1, 0, 0}, {1, 4096, 32, 0, 0, 0}, {1, 4096, 32, 1, 1, 0},
    {1, 4096, 32, 0, 1, 0}, {1, 4096, 8, 1, 0, 0},  {1, 4096, 8, 0, 0, 0},
    {1, 4096, 8, 1, 1, 0},  {1, 4096, 8, 0, 1, 0},  {32, 1, 32, 0, 0, 1},
};

/* {n_pos, mode} */
static const int64_t rope_cache_shapes[][2] = {
    {131072, PEAK_ROPE_EXACT}, {131072, PEAK_ROPE_HF_F32},
    {4096, PEAK_ROPE_EXACT},   {4096, PEAK_ROPE_HF_F32},
};

/* ---- the rotation -------------------------------------------------------- */

typedef struct rope_apply_case {
    const rope_variant *v;
    size_t batch, seq, heads, n; /* n: floats of x */
    int use_cache, inplace, use_pos;
    float *x, *y;        /* n_copies of x (and of y, out of place) */
    size_t n_copies, copy;
    float *cache;        /* ROPE_CACHE_ROWS rows, EXACT */
    int64_t *positions;  /* [batch] (decode) */
    peak_rope_desc desc;
    const peak_threadpool *pool; /* dispatch, memcpy: the thread variants' pool */
} rope_apply_case;

static size_t rope_llc_bytes(void)
{
#ifdef _SC_LEVEL3_CACHE_SIZE
    const long l3 = sysconf(_SC_LEVEL3_CACHE_SIZE);
    if (l3 > 0)
        return (size_t)l3;
#endif
    return (size_t)64 << 20;
}

static size_t rope_position(const rope_apply_case *c, size_t b, size_t l)
{
    return c->use_pos ? (size_t)c->positions[b] : l;
}

static float *rope_x(const rope_apply_case *c)
{
    return c->x + c->copy * c->n;
}

static float *rope_y(const rope_apply_case *c)
{
    return c->inplace ? rope_x(c) : c->y + c->copy * c->n;
}

static void rope_apply_run(const rope_apply_case *c, float *y, const float *x)
{
    switch (c->v->impl) {
    case ROPE_TIER: {
        peak_rope_freqs f;
        peak_rope_apply_freqs(&f, &c->desc);
        const peak_rope_apply_fn k = peak_kernels_for(c->v->isa)->rope_apply;
        const bool stream = peak_rope_streams(y, x, &c->desc); /* as the scheduler */
        for (size_t b = 0; b < c->batch; b++)
            k(y, x, &c->desc, &f, b, 0, c->seq, stream);
        break;
    }
    case ROPE_DISPATCH:
        peak_rope_apply(y, x, &c->desc, c->pool);
        break;
    case ROPE_MEMCPY:
        bench_memcpy_on(y, x, c->n * sizeof(float), c->pool);
        break;
    }
}

/* NULL if the cache rows the case reads are within 2^-22 of double cos/sin
   of the exact angle (EXACT promises 2^-23). */
static const char *rope_check_rows(const rope_apply_case *c, char *msg, size_t len)
{
    const size_t n = ROPE_DIM / 2;
    for (size_t b = 0; b < c->batch; b++)
        for (size_t l = 0; l < c->seq; l++) {
            const size_t p = rope_position(c, b, l);
            const float *row = c->cache + p * ROPE_DIM;
            for (size_t i = 0; i < n; i++) {
                const double a = (double)p * pow(ROPE_BASE, -(double)(2 * i) / ROPE_DIM);
                if (!(fabs(row[i] - cos(a)) <= 0x1p-22 && fabs(row[n + i] - sin(a)) <= 0x1p-22)) {
                    snprintf(msg, len, "wrong cache: position %zu freq %zu is (%.9g, %.9g), want "
                             "(%.9g, %.9g)", p, i, (double)row[i], (double)row[n + i], cos(a),
                             sin(a));
                    return msg;
                }
            }
        }
    return NULL;
}

/* NULL if y is x rotated as peak.h states, bit for bit: two float
   products, one add, from the cache's rows (-ffp-contract=off keeps the
   products unfused here too). */
static const char *rope_check_apply(const rope_apply_case *c, const float *y, const float *x,
                                    char *msg, size_t len)
{
    const size_t n = ROPE_DIM / 2;
    for (size_t b = 0; b < c->batch; b++)
        for (size_t l = 0; l < c->seq; l++) {
            const float *row = c->cache + rope_position(c, b, l) * ROPE_DIM;
            for (size_t h = 0; h < c->heads; h++) {
                const size_t at = ((b * c->seq + l) * c->heads + h) * ROPE_DIM;
                for (size_t j = 0; j < ROPE_DIM; j++) {
                    const size_t i = j % n;
                    const float cs = row[i], sn = row[n + i];
                    const float want = j < n ? x[at + j] * cs + x[at + n + j] * -sn
                                             : x[at + j] * cs + x[at + j - n] * sn;
                    if (memcmp(&y[at + j], &want, sizeof want) != 0) {
                        snprintf(msg, len, "wrong output: b %zu l %zu h %zu d %zu is %.9g, want "
                                 "%.9g", b, l, h, j, (double)y[at + j], (double)want);
                        return msg;
                    }
                }
            }
        }
    return NULL;
}

static const char *rope_apply_setup(rope_apply_case *c, gb_state *st, char *msg, size_t len)
{
    c->batch = (size_t)gb_range(st, 0);
    c->seq = (size_t)gb_range(st, 1);
    c->heads = (size_t)gb_range(st, 2);
    /* gb_range(st, 3) is head_dim: ROPE_DIM */
    const int memcpy_only = c->v->impl == ROPE_MEMCPY;
    c->use_cache = memcpy_only ? 0 : (int)gb_range(st, 4);
    c->inplace = memcpy_only ? 0 : (int)gb_range(st, 5);
    c->use_pos = memcpy_only ? 0 : (int)gb_range(st, 6);
    c->n = c->batch * c->seq * c->heads * ROPE_DIM;
    if (c->v->impl == ROPE_TIER) {
        const char *why = bench_tier_unavailable(c->v->isa);
        if (why)
            return why;
    }
    const size_t bytes = c->n * sizeof(float), per_copy = (c->inplace ? 1 : 2) * bytes;
    /* Out of cache: a 512 KiB decode batch is what a decode step touches,
       so it stays warm; Q and K cycle through more than twice the LLC. */
    c->n_copies = c->seq == 1 ? 1 : 2 * rope_llc_bytes() / per_copy + 1;
    c->x = bench_alloc(c->n_copies * bytes);
    c->y = c->inplace ? NULL : bench_alloc(c->n_copies * bytes);
    if (!c->x || (!c->inplace && !c->y))
        return "out of memory";
    bench_fill_uniform(c->x, c->n_copies * c->n, 0x5eed0001, -1.0f, 1.0f);
    if (c->y)
        memset(c->y, 0, c->n_copies * bytes);
    if (memcpy_only)
        return NULL;

    peak_rope_desc *d = &c->desc;
    *d = (peak_rope_desc)PEAK_ROPE_DESC_DEFAULT;
    d->batch = c->batch;
    d->seq_len = c->seq;
    d->heads = c->heads;
    d->head_dim = ROPE_DIM;
    const ptrdiff_t token = (ptrdiff_t)(c->heads * ROPE_DIM);
    const ptrdiff_t strides[3] = {(ptrdiff_t)c->seq * token, token, ROPE_DIM};
    memcpy(d->x_stride, strides, sizeof strides);
    memcpy(d->y_stride, strides, sizeof strides);
    d->params.rotary_dim = ROPE_DIM;
    d->params.base = ROPE_BASE;
    /* The reference rows (and the cache:1 source): the whole table. */
    c->cache = bench_alloc(ROPE_CACHE_ROWS * ROPE_DIM * sizeof(float));
    if (!c->cache)
        return "out of memory";
    const peak_status s = peak_rope_cache(c->cache, PEAK_F32, ROPE_CACHE_ROWS, 0, &d->params, NULL);
    if (s != PEAK_OK)
        return peak_status_string(s);
    if (c->use_cache) {
        d->cache = c->cache;
        d->cache_rows = ROPE_CACHE_ROWS;
    }
    if (c->use_pos) {
        /* Past lengths spread over the table, as a server's batch has them. */
        c->positions = malloc(c->batch * sizeof *c->positions);
        if (!c->positions)
            return "out of memory";
        for (size_t b = 0; b < c->batch; b++)
            c->positions[b] = (int64_t)((b * 40503u + 17) % ROPE_CACHE_ROWS);
        d->positions = c->positions;
        d->positions_stride = 1;
    }
    return rope_check_rows(c, msg, len);
}

/* Runs once on copy 0 (into a scratch copy of x when in place) and checks. */
static const char *rope_apply_first(rope_apply_case *c, char *msg, size_t len)
{
    c->copy = 0;
    float *x = rope_x(c);
    if (c->v->impl == ROPE_MEMCPY) {
        rope_apply_run(c, rope_y(c), x);
        return memcmp(rope_y(c), x, c->n * sizeof(float)) ? "memcpy copied wrong bytes" : NULL;
    }
    float *y = c->inplace ? bench_alloc(c->n * sizeof(float)) : rope_y(c);
    if (!y)
        return "out of memory";
    const char *bad = NULL;
    if (c->inplace)
        memcpy(y, x, c->n * sizeof(float));
    else
        for (size_t k = 0; k < c->n; k++)
            y[k] = NAN;
    rope_apply_run(c, y, c->inplace ? y : x);
    bad = rope_check_apply(c, y, x, msg, len);
    if (c->inplace)
        free(y);
    return bad;
}

static void rope_apply_body(gb_state *st, void *user, const peak_threadpool *pool)
{
    rope_apply_case c;
    memset(&c, 0, sizeof c);
    c.v = user;
    c.pool = pool;
    char msg[200];
    const char *why = rope_apply_setup(&c, st, msg, sizeof msg);
    if (!why)
        why = rope_apply_first(&c, msg, sizeof msg);
    if (why) {
        gb_skip_with_error(st, why);
    } else {
        if (c.v->impl == ROPE_DISPATCH)
            gb_set_label(st, peak_isa_name(peak_isa_active()));
        /* Fault in every copy's pages before the clock starts. */
        for (c.copy = 0; c.copy < c.n_copies; c.copy++)
            rope_apply_run(&c, rope_y(&c), rope_x(&c));
        c.copy = 0;
        while (gb_keep_running(st)) {
            rope_apply_run(&c, rope_y(&c), rope_x(&c));
            gb_do_not_optimize(rope_y(&c));
            c.copy = c.copy + 1 == c.n_copies ? 0 : c.copy + 1;
        }
        gb_set_items_processed(st, gb_iterations(st) * (int64_t)c.n);
        gb_set_bytes_processed(st, gb_iterations(st) * (int64_t)(2 * c.n * sizeof(float)));
        gb_set_counter(st, "copies", (double)c.n_copies, GB_COUNTER_PLAIN);
    }
    free(c.x);
    free(c.y);
    free(c.cache);
    free(c.positions);
}

static void bench_rope_apply(gb_state *st, void *user)
{
    rope_apply_body(st, user, NULL);
}

/* .../threads:<n>: the last argument (7 for the kernels, 4 for memcpy) */
static void bench_rope_apply_threads(gb_state *st, void *user)
{
    const rope_variant *v = user;
    const peak_threadpool *pool = bench_pool((size_t)gb_range(st, v->impl == ROPE_MEMCPY ? 4 : 7));
    if (pool)
        rope_apply_body(st, user, pool);
    else
        gb_skip_with_error(st, "no pool: peak_threadpool_create failed (built without pthreadpool?)");
}

/* ---- the cache table ------------------------------------------------------- */

/* NULL if every entry is finite and in [-1, 1] and sampled rows are within
   tolerance of double cos/sin: EXACT 2^-22 (it promises 2^-23); HF_F32 the
   float angle's error, |p w| 2^-21 (inv_freq and the product each round)
   plus 2^-22. */
static const char *rope_check_cache(const float *out, size_t n_pos, peak_rope_mode mode,
                                    char *msg, size_t len)
{
    const size_t n = ROPE_DIM / 2;
    for (size_t k = 0; k < n_pos * ROPE_DIM; k++)
        if (!(out[k] >= -1.0f && out[k] <= 1.0f)) {
            snprintf(msg, len, "wrong output: pos %zu col %zu is %g%s", k / ROPE_DIM,
                     k % ROPE_DIM, (double)out[k], isnan(out[k]) ? " (never written?)" : "");
            return msg;
        }
    for (size_t p = 0; p < n_pos; p = p < 40 ? p + 1 : p + 4099) {
        const size_t rows[2] = {p, n_pos - 1 - p};
        for (size_t r = 0; r < 2; r++)
            for (size_t i = 0; i < n; i++) {
                const size_t q = rows[r];
                const double a = (double)q * pow(ROPE_BASE, -(double)(2 * i) / ROPE_DIM);
                const double tol = mode == PEAK_ROPE_EXACT ? 0x1p-22 : a * 0x1p-21 + 0x1p-22;
                const float *row = out + q * ROPE_DIM;
                if (!(fabs(row[i] - cos(a)) <= tol && fabs(row[n + i] - sin(a)) <= tol)) {
                    snprintf(msg, len, "wrong output: pos %zu freq %zu is (%.9g, %.9g), want "
                             "(%.9g, %.9g) within %.2g", q, i, (double)row[i],
                             (double)row[n + i], cos(a), sin(a), tol);
                    return msg;
                }
            }
    }
    return NULL;
}

static peak_status rope_cache_run(const rope_variant *v, float *out, size_t n_pos,
                                  const peak_rope_params *params, const peak_threadpool *pool)
{
    if (v->impl == ROPE_DISPATCH)
        return peak_rope_cache(out, PEAK_F32, n_pos, 0, params, pool);
    peak_rope_freqs f;
    peak_rope_freqs_init(&f, params);
    const peak_rope_cache_fn k = peak_kernels_for(v->isa)->rope_cache;
    for (size_t t = 0; t < n_pos; t += ROPE_CACHE_PIECE)
        k(out + t * ROPE_DIM, ROPE_DIM, n_pos - t < ROPE_CACHE_PIECE ? n_pos - t : ROPE_CACHE_PIECE,
          t, NULL, &f);
    return PEAK_OK;
}

static void rope_cache_body(gb_state *st, void *user, const peak_threadpool *pool)
{
    const rope_variant *v = user;
    const size_t n_pos = (size_t)gb_range(st, 0);
    peak_rope_params params = PEAK_ROPE_PARAMS_DEFAULT;
    params.rotary_dim = (size_t)gb_range(st, 1);
    params.base = ROPE_BASE;
    params.mode = (peak_rope_mode)gb_range(st, 2);
    const char *why = v->impl == ROPE_TIER ? bench_tier_unavailable(v->isa) : NULL;
    float *out = why ? NULL : bench_alloc(n_pos * params.rotary_dim * sizeof(float));
    char msg[200];
    if (!why && !out)
        why = "out of memory";
    if (!why) {
        for (size_t k = 0; k < n_pos * params.rotary_dim; k++)
            out[k] = NAN;
        const peak_status s = rope_cache_run(v, out, n_pos, &params, pool);
        why = s != PEAK_OK ? peak_status_string(s)
                           : rope_check_cache(out, n_pos, params.mode, msg, sizeof msg);
    }
    if (why) {
        gb_skip_with_error(st, why);
    } else {
        if (v->impl == ROPE_DISPATCH)
            gb_set_label(st, peak_isa_name(peak_isa_active()));
        while (gb_keep_running(st)) {
            rope_cache_run(v, out, n_pos, &params, pool);
            gb_do_not_optimize(out);
        }
        const int64_t entries = (int64_t)(n_pos * params.rotary_dim / 2);
        gb_set_items_processed(st, gb_iterations(st) * entries);
        gb_set_bytes_processed(st, gb_iterations(st) * entries * 2 * (int64_t)sizeof(float));
    }
    free(out);
}

static void bench_rope_cache(gb_state *st, void *user)
{
    rope_cache_body(st, user, NULL);
}

/* .../mode:<m>/threads:<n>: argument 3 */
static void bench_rope_cache_threads(gb_state *st, void *user)
{
    const peak_threadpool *pool = bench_pool((size_t)gb_range(st, 3));
    if (pool)
        rope_cache_body(st, user, pool);
    else
        gb_skip_with_error(st, "no pool: peak_threadpool_create failed (built without pthreadpool?)");
}

/* ---- registration ---------------------------------------------------------- */

static void rope_register(const char *name, gb_fn fn, const rope_variant *v, const int64_t *args,
                          const char *const *names, size_t n_args)
{
    gb_bench *b = gb_register(name, fn, (void *)v);
    b = gb_arg_names(gb_args(b, args, n_args), names, n_args);
    if (gb_use_real_time(gb_unit(b, GB_MICROSECOND)) == NULL) {
        fprintf(stderr, "bench_peak: cannot register %s\n", name);
        exit(EXIT_FAILURE);
    }
}

/* The memcpy floor of a shape is registered once, with the shape's first
   kernel case: cache, inplace and positions do not change the bytes. */
static int rope_first_of_shape(size_t s)
{
    for (size_t e = 0; e < s; e++)
        if (rope_apply_shapes[e][0] == rope_apply_shapes[s][0] &&
            rope_apply_shapes[e][1] == rope_apply_shapes[s][1] &&
            rope_apply_shapes[e][2] == rope_apply_shapes[s][2])
            return 0;
    return 1;
}

void bench_register_rope(void)
{
    static const char *const apply_names[] = {"batch",   "seq_len", "heads",     "head_dim",
                                              "cache",   "inplace", "positions", "threads"};
    static const char *const copy_names[] = {"batch", "seq_len", "heads", "head_dim", "threads"};
    static const char *const cache_names[] = {"n_pos", "rotary_dim", "mode", "threads"};
    const size_t n_variants = sizeof rope_variants / sizeof rope_variants[0];
    const int64_t *threads;
    const size_t n_threads = bench_thread_counts(&threads);
    char name[64];

    for (size_t s = 0; s < sizeof rope_apply_shapes / sizeof rope_apply_shapes[0]; s++) {
        const int64_t *sh = rope_apply_shapes[s];
        int64_t args[8] = {sh[0], sh[1], sh[2], ROPE_DIM, sh[3], sh[4], sh[5], 0};
        for (size_t i = 0; i < n_variants; i++) {
            const rope_variant *v = &rope_variants[i];
            if (v->impl == ROPE_TIER && !bench_tier_has_kernel("rope", v->isa))
                continue;
            snprintf(name, sizeof name, "rope_apply/%s", v->name);
            if (v->impl == ROPE_MEMCPY) {
                if (rope_first_of_shape(s))
                    rope_register(name, bench_rope_apply, v, args, copy_names, 4);
            } else {
                rope_register(name, bench_rope_apply, v, args, apply_names, 7);
            }
        }
    }
    for (size_t s = 0; s < sizeof rope_cache_shapes / sizeof rope_cache_shapes[0]; s++) {
        const int64_t args[4] = {rope_cache_shapes[s][0], ROPE_DIM, rope_cache_shapes[s][1], 0};
        for (size_t i = 0; i < n_variants; i++) {
            const rope_variant *v = &rope_variants[i];
            if (v->impl == ROPE_MEMCPY ||
                (v->impl == ROPE_TIER && !bench_tier_has_kernel("rope", v->isa)))
                continue;
            snprintf(name, sizeof name, "rope_cache/%s", v->name);
            rope_register(name, bench_rope_cache, v, args, cache_names, 3);
        }
    }

    /* Threads: dispatch and memcpy, every rotation shape; the big tables. */
    for (size_t i = 0; i < n_variants; i++) {
        const rope_variant *v = &rope_variants[i];
        if (v->impl == ROPE_TIER)
            continue;
        snprintf(name, sizeof name, "rope_apply/%s", v->name);
        for (size_t s = 0; s < sizeof rope_apply_shapes / sizeof rope_apply_shapes[0]; s++) {
            const int64_t *sh = rope_apply_shapes[s];
            if (v->impl == ROPE_MEMCPY && !rope_first_of_shape(s))
                continue;
            for (size_t t = 0; t < n_threads; t++) {
                if (v->impl == ROPE_MEMCPY) {
                    const int64_t args[5] = {sh[0], sh[1], sh[2], ROPE_DIM, threads[t]};
                    rope_register(name, bench_rope_apply_threads, v, args, copy_names, 5);
                } else {
                    const int64_t args[8] = {sh[0], sh[1], sh[2], ROPE_DIM,
                                             sh[3], sh[4], sh[5], threads[t]};
                    rope_register(name, bench_rope_apply_threads, v, args, apply_names, 8);
                }
            }
        }
    }
    for (size_t i = 0; i < n_variants; i++) {
        const rope_variant *v = &rope_variants[i];
        if (v->impl != ROPE_DISPATCH)
            continue;
        for (size_t s = 0; s < sizeof rope_cache_shapes / sizeof rope_cache_shapes[0]; s++) {
            if (rope_cache_shapes[s][0] != (int64_t)ROPE_CACHE_ROWS)
                continue;
            for (size_t t = 0; t < n_threads; t++) {
                const int64_t args[4] = {rope_cache_shapes[s][0], ROPE_DIM,
                                         rope_cache_shapes[s][1], threads[t]};
                rope_register("rope_cache/dispatch", bench_rope_cache_threads, v, args,
                              cache_names, 4);
            }
        }
    }
}
