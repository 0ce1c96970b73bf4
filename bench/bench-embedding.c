/*
 * bench-embedding.c - peak_embed_pe per tier and PE source, against a plain C
 * loop and memcpy, in one binary so that every ratio comes from the same run
 * on the same machine state.
 *
 * Names: embedding/<variant>/batch:<B>/seq_len:<S>/d_model:<D>[/pos0:<P>]/fly:<0|1>
 * (Google Benchmark adds /real_time); vocab 32000, ids uniform at random,
 * positions P .. P+S-1 in every sequence (P = 0, as in PositionalEncoding's
 * forward(), unless the name says pos0), scale sqrt(d_model).  fly:0 reads
 * PE from a table (peak_pe_table rows 0 .. P+S-1), fly:1 computes it on the
 * fly (desc.pe = NULL).  Shapes: the [2, 50, 512] example batch, BERT/GPT-2's
 * d_model 768 at 128, 512, 1024 and 4096 tokens, 32 x 128 and 64 x 512
 * tokens of 512 (8 and 64 MiB of output), and decode: one new token at
 * position 2047 (after a 2047-token cache) for 1 and for 32 sequences, at
 * d_model 768.
 * Variants:
 *   scalar, avx2, avx512  peak_embed_pe with this tier forced
 *   dispatch       peak_embed_pe on the tier the dispatcher picks (label)
 *   bf16, f16      dispatch with the table and the output in that type (the
 *                  table rounded once from the float32 one; its bytes
 *                  count 2 an element), checked against the float32 call on
 *                  the widened table, rounded
 *   plain_loop     the formula as a plain C loop over a table, built with the
 *                  project's flags (what the compiler makes of it: SSE2);
 *                  fly:0 only
 *   plain_loop_novec  the same loop without vectorisation: the scalar loop
 *                  (baseline-plain-loops.h); fly:0 only
 *   memcpy         memcpy moving as many bytes as the kernel reads and writes
 *                  from the table (fly:0) or on the fly (fly:1)
 *   row_copy       memcpy of each token's E row into its output row: the
 *                  gather's own traffic without PE rows or arithmetic, a
 *                  floor for the kernel where memcpy (one contiguous copy)
 *                  is not one; fly:0 only, and its bytes_per_second counts
 *                  only what it moves (E and output rows, ids), 2/3 of the
 *                  table path's bytes, so compare times
 * bytes_per_second counts bytes read and written: E rows, PE rows (table
 * only) and output rows (4 * d_model each), and the ids; memcpy counts its
 * source and its destination.  So "GB/s of the kernel / GB/s of memcpy" is
 * the time memcpy needs for the same traffic over the kernel's time.
 *
 * Threads: dispatch and memcpy again on a pool of n workers (bench_pool:
 * made once by peak_threadpool_create; memcpy split into one part per
 * worker), names ending /fly:<0|1>/threads:<n> (n from bench_thread_counts:
 * 1 and 2 by default), at 1 x 4096 x 768 and 64 x 512 x 512: the speedup
 * is threads:2 over threads:1, and memcpy at threads:<n> the floor at that
 * thread count, of one run.
 *
 * Before timing, every run fills the output with NaN, runs once and checks
 * it bit for bit against the plain loop (the on-the-fly path against the
 * table path: peak.h promises the same bits); a wrong kernel is skipped
 * instead of producing a fast, meaningless number.  That call also faults
 * the pages in.
 */
#include "baseline-plain-loops.h"
#include "bench.h"
#include "gbench-shim.h"

#include "peak.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EMBEDDING_VOCAB 32000
#define EMBEDDING_D_MAX 768

typedef enum embedding_impl {
    EMBEDDING_TIER,
    EMBEDDING_DISPATCH,
    EMBEDDING_PLAIN,
    EMBEDDING_PLAIN_NOVEC,
    EMBEDDING_MEMCPY,
    EMBEDDING_ROW_COPY
} embedding_impl;

typedef struct embedding_variant {
    const char *name;
    embedding_impl impl;
    peak_isa isa;    /* EMBEDDING_TIER */
    peak_dtype type; /* the table's and the output's (EMBEDDING_DISPATCH) */
} embedding_variant;

static const embedding_variant embedding_variants[] = {
    {"scalar", EMBEDDING_TIER, PEAK_ISA_SCALAR, PEAK_F32},
#if defined(__x86_64__)
    {"avx2", EMBEDDING_TIER, PEAK_ISA_AVX2, PEAK_F32},
    {"avx512", EMBEDDING_TIER, PEAK_ISA_AVX512, PEAK_F32},
#elif defined(__aarch64__)
    {"neon", EMBEDDING_TIER, PEAK_ISA_NEON, PEAK_F32},
#endif
    {"dispatch", EMBEDDING_DISPATCH, PEAK_ISA_SCALAR, PEAK_F32},
    {"bf16", EMBEDDING_DISPATCH, PEAK_ISA_SCALAR, PEAK_BF16},
    {"f16", EMBEDDING_DISPATCH, PEAK_ISA_SCALAR, PEAK_F16},
    {"plain_loop", EMBEDDING_PLAIN, PEAK_ISA_SCALAR, PEAK_F32},
    {"plain_loop_novec", EMBEDDING_PLAIN_NOVEC, PEAK_ISA_SCALAR, PEAK_F32},
    {"memcpy", EMBEDDING_MEMCPY, PEAK_ISA_SCALAR, PEAK_F32},
    {"row_copy", EMBEDDING_ROW_COPY, PEAK_ISA_SCALAR, PEAK_F32},
};

/* {batch, seq_len, d_model, pos0}: the [2, 50, 512] example batch (200 KB
   of output), BERT/GPT-2 sequences, a batch beyond L2 (32 x 128: 8 MiB of
   output), one far out of cache (64 MiB), and decode steps at position
   2047. */
static const int64_t embedding_shapes[][4] = {
    {2, 50, 512, 0},   {1, 128, 768, 0},  {1, 512, 768, 0},  {1, 1024, 768, 0}, {1, 4096, 768, 0},
    {32, 128, 512, 0}, {64, 512, 512, 0}, {1, 1, 768, 2047}, {32, 1, 768, 2047}};

/* The thread variants' shapes, {batch, seq_len, d_model} (pos0 0). */
static const int64_t embedding_thread_shapes[][3] = {{1, 4096, 768}, {64, 512, 512}};

/* The embedding table is built once: 94 MiB of random floats, read as
   [vocab, d_model] rows for every d_model up to EMBEDDING_D_MAX. */
static float *embedding_table(void)
{
    static float *table;
    if (!table) {
        table = aligned_alloc(64, (size_t)EMBEDDING_VOCAB * EMBEDDING_D_MAX * sizeof(float));
        if (!table)
            return NULL;
        uint64_t s = 0x243f6a8885a308d3ull;
        for (size_t k = 0; k < (size_t)EMBEDDING_VOCAB * EMBEDDING_D_MAX; k++) {
            s = s * 6364136223846793005ull + 1442695040888963407ull;
            table[k] = (float)((double)(s >> 40) * 0x1p-24 * 2.0 - 1.0);
        }
    }
    return table;
}

/* The table rounded once into type t (made once a type), or, widen, that
   table widened back into float32 (the check's). */
static const void *embedding_table_as(peak_dtype t, int widen)
{
    static void *narrow[3], *wide[3];
    const size_t n = (size_t)EMBEDDING_VOCAB * EMBEDDING_D_MAX;
    if (t == PEAK_F32)
        return embedding_table();
    if (!narrow[t]) {
        narrow[t] = aligned_alloc(64, n * 2);
        wide[t] = aligned_alloc(64, n * sizeof(float));
        if (!narrow[t] || !wide[t] || !embedding_table() ||
            peak_convert(narrow[t], t, embedding_table(), PEAK_F32, n, NULL) != PEAK_OK ||
            peak_convert(wide[t], PEAK_F32, narrow[t], t, n, NULL) != PEAK_OK)
            return NULL;
    }
    return widen ? wide[t] : narrow[t];
}

typedef struct embedding_run {
    const embedding_variant *v;
    size_t batch, seq, n, d, pos0;
    int fly;
    peak_embed_desc desc;
    int32_t *ids;
    float *pe, *out, *src; /* src: memcpy's source */
    size_t copy_bytes;
    const peak_threadpool *pool; /* dispatch and memcpy: the thread variants' pool */
} embedding_run;

/* Whether the variant reads PE only from a table (fly:0 only). */
static int embedding_table_only(embedding_impl impl)
{
    return impl == EMBEDDING_PLAIN || impl == EMBEDDING_PLAIN_NOVEC || impl == EMBEDDING_ROW_COPY;
}

/* Bytes a variant reads and writes per call, E and output elements of
   `size` bytes; no_pe: it reads no PE rows (on the fly, row_copy). */
static size_t embedding_traffic(int no_pe, size_t n, size_t d, size_t size)
{
    return n * (2 * d * size + (no_pe ? 0 : d * sizeof(float)) + sizeof(int32_t));
}

/* Token t's E row (ld_table is d_model here). */
static const float *embedding_e_row(const embedding_run *r, size_t t)
{
    return (const float *)r->desc.table + (size_t)r->ids[t] * r->d;
}

static peak_status embedding_call(embedding_run *r)
{
    switch (r->v->impl) {
    case EMBEDDING_TIER:
    case EMBEDDING_DISPATCH:
        return peak_embed_pe(r->out, (ptrdiff_t)r->d, r->ids, r->n, &r->desc, r->pool);
    case EMBEDDING_PLAIN:
        bench_embedding_plain_loop_vec(r->out, r->desc.table, r->ids, r->pe + r->pos0 * r->d, r->batch,
                                 r->seq, r->d, r->desc.scale);
        return PEAK_OK;
    case EMBEDDING_PLAIN_NOVEC:
        bench_embedding_plain_loop_novec(r->out, r->desc.table, r->ids, r->pe + r->pos0 * r->d,
                                   r->batch, r->seq, r->d, r->desc.scale);
        return PEAK_OK;
    case EMBEDDING_MEMCPY:
        bench_memcpy_on(r->out, r->src, r->copy_bytes, r->pool);
        return PEAK_OK;
    case EMBEDDING_ROW_COPY:
        for (size_t t = 0; t < r->n; t++)
            memcpy(r->out + t * r->d, embedding_e_row(r, t), r->d * sizeof(float));
        return PEAK_OK;
    }
    return PEAK_ERR_UNSUPPORTED;
}

/* A typed variant's output against the float32 call on the widened
   table, rounded. */
static const char *embedding_check_typed(const embedding_run *r)
{
    const size_t n = r->n * r->d;
    float *want = malloc(n * sizeof(float));
    void *narrow = malloc(n * 2);
    peak_embed_desc d = r->desc;
    d.table = embedding_table_as(r->v->type, 1);
    d.table_type = d.out_type = PEAK_F32;
    const char *bad = !want || !narrow ? "out of memory" : NULL;
    if (!bad && (peak_embed_pe(want, (ptrdiff_t)r->d, r->ids, r->n, &d, NULL) != PEAK_OK ||
                 peak_convert(narrow, r->v->type, want, PEAK_F32, n, NULL) != PEAK_OK))
        bad = "the float32 call failed";
    if (!bad && memcmp(narrow, r->out, n * 2) != 0)
        bad = "wrong output: not the float32 call's, rounded";
    free(want);
    free(narrow);
    return bad;
}

/* NULL if the output is right, else what is wrong. */
static const char *embedding_check(const embedding_run *r, char *msg, size_t len)
{
    if (r->v->type != PEAK_F32)
        return embedding_check_typed(r);
    if (r->v->impl == EMBEDDING_MEMCPY)
        return memcmp(r->out, r->src, r->copy_bytes) ? "memcpy copied wrong bytes" : NULL;
    if (r->v->impl == EMBEDDING_ROW_COPY) {
        for (size_t t = 0; t < r->n; t++)
            if (memcmp(r->out + t * r->d, embedding_e_row(r, t), r->d * sizeof(float)) != 0)
                return "row_copy copied wrong rows";
        return NULL;
    }
    const size_t d = r->d;
    float *want = malloc(r->n * d * sizeof(float));
    if (!want)
        return "out of memory";
    bench_embedding_plain_loop_vec(want, r->desc.table, r->ids, r->pe + r->pos0 * d, r->batch, r->seq,
                             d, r->desc.scale);
    const char *bad = NULL;
    for (size_t k = 0; k < r->n * d && !bad; k++) {
        if (memcmp(&r->out[k], &want[k], sizeof(float)) != 0) {
            snprintf(msg, len, "wrong output: token %zu col %zu is %.9g, want %.9g", k / d,
                     k % d, (double)r->out[k], (double)want[k]);
            bad = msg;
        }
    }
    free(want);
    return bad;
}

static const char *embedding_setup(embedding_run *r)
{
    const embedding_variant *v = r->v;
    if (v->impl == EMBEDDING_TIER && peak_isa_force(v->isa) != PEAK_OK)
        return "isa unsupported on this CPU/OS/build";
    if (embedding_table_only(v->impl) && r->fly)
        return "not measured: fly:0 only";
    peak_embed_desc d = PEAK_EMBED_DESC_DEFAULT;
    d.table = embedding_table_as(v->type, 0);
    d.table_type = d.out_type = v->type;
    d.vocab = EMBEDDING_VOCAB;
    d.ld_table = (ptrdiff_t)r->d;
    d.d_model = r->d;
    d.scale = sqrtf((float)r->d);
    d.seq_len = r->seq;
    d.pos0 = r->pos0;
    const size_t pe_rows = r->pos0 + r->seq;
    r->ids = malloc(r->n * sizeof *r->ids);
    r->pe = aligned_alloc(64, pe_rows * r->d * sizeof(float));
    r->copy_bytes = embedding_traffic(r->fly, r->n, r->d, sizeof(float)) / 2;
    const size_t out_bytes = r->n * r->d * sizeof(float);
    const size_t alloc = out_bytes > r->copy_bytes ? out_bytes : r->copy_bytes;
    r->out = aligned_alloc(64, (alloc + 63) / 64 * 64);
    if (!d.table || !r->ids || !r->pe || !r->out)
        return "out of memory";
    uint64_t s = 0x9e3779b97f4a7c15ull;
    for (size_t t = 0; t < r->n; t++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        r->ids[t] = (int32_t)((s >> 33) % EMBEDDING_VOCAB);
    }
    if (peak_pe_table(r->pe, PEAK_F32, pe_rows, r->d, 0, NULL, NULL) != PEAK_OK)
        return "peak_pe_table failed";
    if (!r->fly) {
        d.pe = r->pe;
        d.pe_rows = pe_rows;
    }
    r->desc = d;
    if (v->impl == EMBEDDING_MEMCPY) {
        r->src = aligned_alloc(64, (r->copy_bytes + 63) / 64 * 64);
        if (!r->src)
            return "out of memory";
        memset(r->src, 0x3c, r->copy_bytes);
    }
    return NULL;
}

static void embedding_measure(gb_state *st, embedding_run *r)
{
    for (size_t k = 0; k < r->n * r->d; k++)
        r->out[k] = NAN;
    const peak_status status = embedding_call(r);
    if (status != PEAK_OK) {
        gb_skip_with_error(st, peak_status_string(status));
        return;
    }
    char msg[160];
    const char *bad = embedding_check(r, msg, sizeof msg);
    if (bad) {
        gb_skip_with_error(st, bad);
        return;
    }
    while (gb_keep_running(st)) {
        embedding_call(r);
        gb_do_not_optimize(r->out);
    }
    if (r->v->impl == EMBEDDING_DISPATCH)
        gb_set_label(st, peak_isa_name(peak_isa_active()));
    const int no_pe = r->fly || r->v->impl == EMBEDDING_ROW_COPY;
    const size_t size = r->v->type == PEAK_F32 ? sizeof(float) : 2;
    gb_set_bytes_processed(st,
                           gb_iterations(st) * (int64_t)embedding_traffic(no_pe, r->n, r->d, size));
    gb_set_items_processed(st, gb_iterations(st) * (int64_t)r->n);
}

/* Arguments batch, seq_len, d_model, then fly (pos0 0) or pos0 and fly. */
static void bench_embedding_args(gb_state *st, void *user, int has_pos0,
                                 const peak_threadpool *pool)
{
    embedding_run r = {0};
    r.v = user;
    r.pool = pool;
    r.batch = (size_t)gb_range(st, 0);
    r.seq = (size_t)gb_range(st, 1);
    r.d = (size_t)gb_range(st, 2);
    r.pos0 = has_pos0 ? (size_t)gb_range(st, 3) : 0;
    r.fly = (int)gb_range(st, has_pos0 ? 4 : 3);
    r.n = r.batch * r.seq;
    const char *why = embedding_setup(&r);
    if (why)
        gb_skip_with_error(st, why);
    else
        embedding_measure(st, &r);
    peak_isa_reset();
    free(r.ids);
    free(r.pe);
    free(r.out);
    free(r.src);
}

static void bench_embedding(gb_state *st, void *user)
{
    bench_embedding_args(st, user, 0, NULL);
}

static void bench_embedding_pos0(gb_state *st, void *user)
{
    bench_embedding_args(st, user, 1, NULL);
}

/* .../fly:<0|1>/threads:<n>: argument 4 */
static void bench_embedding_threads(gb_state *st, void *user)
{
    const peak_threadpool *pool = bench_pool((size_t)gb_range(st, 4));
    if (pool)
        bench_embedding_args(st, user, 0, pool);
    else
        gb_skip_with_error(st, "no pool: peak_threadpool_create failed (built without pthreadpool?)");
}

void bench_register_embedding(void)
{
    static const char *const arg_names[] = {"batch", "seq_len", "d_model", "fly"};
    static const char *const arg_names_pos0[] = {"batch", "seq_len", "d_model", "pos0", "fly"};
    char name[64];
    for (size_t s = 0; s < sizeof embedding_shapes / sizeof embedding_shapes[0]; s++) {
        for (size_t i = 0; i < 2 * (sizeof embedding_variants / sizeof embedding_variants[0]);
             i++) {
            const embedding_variant *v = &embedding_variants[i / 2];
            const int64_t fly = (int64_t)(i % 2);
            if (fly && embedding_table_only(v->impl))
                continue;
            if (v->impl == EMBEDDING_TIER && !bench_tier_has_kernel("embedding", v->isa))
                continue;
            /* pos0 0 stays out of the name, as in bench/torch-bench.py's names. */
            const int64_t pos0 = embedding_shapes[s][3];
            gb_bench *b;
            snprintf(name, sizeof name, "embedding/%s", v->name);
            b = gb_register(name, pos0 ? bench_embedding_pos0 : bench_embedding, (void *)v);
            if (pos0 == 0) {
                const int64_t args[4] = {embedding_shapes[s][0], embedding_shapes[s][1],
                                         embedding_shapes[s][2], fly};
                b = gb_args(b, args, 4);
                b = gb_arg_names(b, arg_names, 4);
            } else {
                const int64_t args[5] = {embedding_shapes[s][0], embedding_shapes[s][1],
                                         embedding_shapes[s][2], pos0, fly};
                b = gb_args(b, args, 5);
                b = gb_arg_names(b, arg_names_pos0, 5);
            }
            b = gb_unit(b, GB_MICROSECOND);
            if (gb_use_real_time(b) == NULL) {
                fprintf(stderr, "bench_peak: cannot register %s\n", name);
                exit(EXIT_FAILURE);
            }
        }
    }
    static const char *const thread_names[] = {"batch", "seq_len", "d_model", "fly", "threads"};
    const int64_t *threads;
    const size_t n_threads = bench_thread_counts(&threads);
    for (size_t s = 0; s < sizeof embedding_thread_shapes / sizeof embedding_thread_shapes[0]; s++)
        for (size_t i = 0; i < sizeof embedding_variants / sizeof embedding_variants[0]; i++) {
            const embedding_variant *v = &embedding_variants[i];
            if (v->impl != EMBEDDING_DISPATCH && v->impl != EMBEDDING_MEMCPY)
                continue;
            snprintf(name, sizeof name, "embedding/%s", v->name);
            for (int64_t fly = 0; fly <= 1; fly++)
                for (size_t t = 0; t < n_threads; t++) {
                    const int64_t args[5] = {embedding_thread_shapes[s][0],
                                             embedding_thread_shapes[s][1],
                                             embedding_thread_shapes[s][2], fly, threads[t]};
                    gb_bench *b = gb_register(name, bench_embedding_threads, (void *)v);
                    b = gb_arg_names(gb_args(b, args, 5), thread_names, 5);
                    if (gb_use_real_time(gb_unit(b, GB_MICROSECOND)) == NULL) {
                        fprintf(stderr, "bench_peak: cannot register %s threads\n", name);
                        exit(EXIT_FAILURE);
                    }
                }
        }
}
