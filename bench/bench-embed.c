/*
 * bench-embed.c - peak_embed_pe per tier and PE source, against a plain C
 * loop and memcpy, in one binary so that every ratio comes from the same run
 * on the same machine state.
 *
 * Names: embed/<variant>/batch:<B>/seq_len:<S> (Google Benchmark adds
 * /real_time); vocab 32000, d_model 512, ids uniform at random, positions
 * 0 .. S-1 in every sequence (the seed's case), scale sqrt(d_model).
 * Variants:
 *   table_<tier>   peak_embed_pe with this tier forced, PE from a table
 *                  (peak_pe_table rows 0 .. S-1)
 *   fly_<tier>     the same with PE computed on the fly (desc.pe = NULL)
 *   plain_loop     the formula as a plain C loop over a table, built with the
 *                  project's flags (what the compiler makes of it: SSE2)
 *   plain_loop_novec  the same loop without vectorisation: the scalar loop
 *                  (baseline-plain-loops.h)
 *   memcpy_table   memcpy moving as many bytes as the table path reads and
 *                  writes; memcpy_fly: as many as the on-the-fly path
 * bytes_per_second counts bytes read and written: E rows, PE rows (table
 * only) and output rows (4 * d_model each), and the ids; memcpy counts its
 * source and its destination.  So "GB/s of the table path / GB/s of
 * memcpy_table" is the time memcpy needs for the same traffic over the
 * kernel's time.
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

#define EMB_VOCAB 32000
#define EMB_D 512

typedef enum emb_impl {
    EMB_TABLE,
    EMB_FLY,
    EMB_PLAIN,
    EMB_PLAIN_NOVEC,
    EMB_MEMCPY_TABLE,
    EMB_MEMCPY_FLY
} emb_impl;

typedef struct emb_variant {
    const char *name;
    emb_impl impl;
    peak_isa isa; /* EMB_TABLE, EMB_FLY */
} emb_variant;

static const emb_variant emb_variants[] = {
    {"table_scalar", EMB_TABLE, PEAK_ISA_SCALAR},
#if defined(__x86_64__)
    {"table_avx2", EMB_TABLE, PEAK_ISA_AVX2},
    {"table_avx512", EMB_TABLE, PEAK_ISA_AVX512},
#endif
    {"fly_scalar", EMB_FLY, PEAK_ISA_SCALAR},
#if defined(__x86_64__)
    {"fly_avx2", EMB_FLY, PEAK_ISA_AVX2},
    {"fly_avx512", EMB_FLY, PEAK_ISA_AVX512},
#endif
    {"plain_loop", EMB_PLAIN, PEAK_ISA_SCALAR},
    {"plain_loop_novec", EMB_PLAIN_NOVEC, PEAK_ISA_SCALAR},
    {"memcpy_table", EMB_MEMCPY_TABLE, PEAK_ISA_SCALAR},
    {"memcpy_fly", EMB_MEMCPY_FLY, PEAK_ISA_SCALAR},
};

/* {batch, seq_len}: a short in-cache batch (2 x 50: 200 KB of output),
   a mid-size one and one far out of cache (64 MiB of output). */
static const int64_t emb_shapes[][2] = {{2, 50}, {32, 128}, {64, 512}};

/* The embedding table is built once: 62.5 MiB of random floats. */
static float *emb_table(void)
{
    static float *table;
    if (!table) {
        table = aligned_alloc(64, (size_t)EMB_VOCAB * EMB_D * sizeof(float));
        if (!table)
            return NULL;
        uint64_t s = 0x243f6a8885a308d3ull;
        for (size_t k = 0; k < (size_t)EMB_VOCAB * EMB_D; k++) {
            s = s * 6364136223846793005ull + 1442695040888963407ull;
            table[k] = (float)((double)(s >> 40) * 0x1p-24 * 2.0 - 1.0);
        }
    }
    return table;
}

typedef struct emb_run {
    const emb_variant *v;
    size_t batch, seq, n;
    peak_embed_desc desc;
    int32_t *ids;
    float *pe, *out, *src; /* src: memcpy's source */
    size_t copy_bytes;
} emb_run;

/* Bytes a variant reads and writes per call. */
static size_t emb_traffic(emb_impl impl, size_t n)
{
    const size_t row = EMB_D * sizeof(float);
    const size_t table = n * (3 * row + sizeof(int32_t));
    const size_t fly = n * (2 * row + sizeof(int32_t));
    return impl == EMB_FLY || impl == EMB_MEMCPY_FLY ? fly : table;
}

static peak_status emb_call(emb_run *r)
{
    switch (r->v->impl) {
    case EMB_TABLE:
    case EMB_FLY:
        return peak_embed_pe(r->out, EMB_D, r->ids, r->n, &r->desc);
    case EMB_PLAIN:
        bench_emb_plain_loop_vec(r->out, r->desc.table, r->ids, r->pe, r->batch, r->seq, EMB_D,
                                 r->desc.scale);
        return PEAK_OK;
    case EMB_PLAIN_NOVEC:
        bench_emb_plain_loop_novec(r->out, r->desc.table, r->ids, r->pe, r->batch, r->seq, EMB_D,
                                   r->desc.scale);
        return PEAK_OK;
    case EMB_MEMCPY_TABLE:
    case EMB_MEMCPY_FLY:
        memcpy(r->out, r->src, r->copy_bytes);
        return PEAK_OK;
    }
    return PEAK_ERR_UNSUPPORTED;
}

/* NULL if the output is right, else what is wrong. */
static const char *emb_check(const emb_run *r, char *msg, size_t len)
{
    if (r->v->impl == EMB_MEMCPY_TABLE || r->v->impl == EMB_MEMCPY_FLY)
        return memcmp(r->out, r->src, r->copy_bytes) ? "memcpy copied wrong bytes" : NULL;
    float *want = malloc(r->n * EMB_D * sizeof(float));
    if (!want)
        return "out of memory";
    bench_emb_plain_loop_vec(want, r->desc.table, r->ids, r->pe, r->batch, r->seq, EMB_D,
                             r->desc.scale);
    const char *bad = NULL;
    for (size_t k = 0; k < r->n * EMB_D && !bad; k++) {
        if (memcmp(&r->out[k], &want[k], sizeof(float)) != 0) {
            snprintf(msg, len, "wrong output: token %zu col %zu is %.9g, want %.9g", k / EMB_D,
                     k % EMB_D, (double)r->out[k], (double)want[k]);
            bad = msg;
        }
    }
    free(want);
    return bad;
}

static const char *emb_setup(emb_run *r)
{
    const emb_variant *v = r->v;
    if ((v->impl == EMB_TABLE || v->impl == EMB_FLY) && peak_isa_force(v->isa) != PEAK_OK)
        return "isa unsupported on this CPU/OS/build";
    peak_embed_desc d = PEAK_EMBED_DESC_DEFAULT;
    d.table = emb_table();
    d.vocab = EMB_VOCAB;
    d.ld_table = EMB_D;
    d.d_model = EMB_D;
    d.scale = sqrtf((float)EMB_D);
    d.seq_len = r->seq;
    r->ids = malloc(r->n * sizeof *r->ids);
    r->pe = aligned_alloc(64, r->seq * EMB_D * sizeof(float));
    r->copy_bytes = emb_traffic(v->impl, r->n) / 2;
    const size_t out_bytes = r->n * EMB_D * sizeof(float);
    const size_t alloc = out_bytes > r->copy_bytes ? out_bytes : r->copy_bytes;
    r->out = aligned_alloc(64, (alloc + 63) / 64 * 64);
    if (!d.table || !r->ids || !r->pe || !r->out)
        return "out of memory";
    uint64_t s = 0x9e3779b97f4a7c15ull;
    for (size_t t = 0; t < r->n; t++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        r->ids[t] = (int32_t)((s >> 33) % EMB_VOCAB);
    }
    if (peak_pe_table(r->pe, r->seq, EMB_D, 0, NULL) != PEAK_OK)
        return "peak_pe_table failed";
    if (v->impl == EMB_TABLE) {
        d.pe = r->pe;
        d.pe_rows = r->seq;
    }
    r->desc = d;
    if (v->impl == EMB_MEMCPY_TABLE || v->impl == EMB_MEMCPY_FLY) {
        r->src = aligned_alloc(64, (r->copy_bytes + 63) / 64 * 64);
        if (!r->src)
            return "out of memory";
        memset(r->src, 0x3c, r->copy_bytes);
    }
    return NULL;
}

static void emb_measure(gb_state *st, emb_run *r)
{
    for (size_t k = 0; k < r->n * EMB_D; k++)
        r->out[k] = NAN;
    const peak_status status = emb_call(r);
    if (status != PEAK_OK) {
        gb_skip_with_error(st, peak_status_string(status));
        return;
    }
    char msg[160];
    const char *bad = emb_check(r, msg, sizeof msg);
    if (bad) {
        gb_skip_with_error(st, bad);
        return;
    }
    while (gb_keep_running(st)) {
        emb_call(r);
        gb_do_not_optimize(r->out);
    }
    gb_set_bytes_processed(st, gb_iterations(st) * (int64_t)emb_traffic(r->v->impl, r->n));
    gb_set_items_processed(st, gb_iterations(st) * (int64_t)r->n);
}

static void bench_embed(gb_state *st, void *user)
{
    emb_run r = {0};
    r.v = user;
    r.batch = (size_t)gb_range(st, 0);
    r.seq = (size_t)gb_range(st, 1);
    r.n = r.batch * r.seq;
    const char *why = emb_setup(&r);
    if (why)
        gb_skip_with_error(st, why);
    else
        emb_measure(st, &r);
    peak_isa_reset();
    free(r.ids);
    free(r.pe);
    free(r.out);
    free(r.src);
}

void bench_register_embed(void)
{
    static const char *const arg_names[] = {"batch", "seq_len"};
    char name[64];
    for (size_t s = 0; s < sizeof emb_shapes / sizeof emb_shapes[0]; s++) {
        for (size_t i = 0; i < sizeof emb_variants / sizeof emb_variants[0]; i++) {
            snprintf(name, sizeof name, "embed/%s", emb_variants[i].name);
            gb_bench *b = gb_register(name, bench_embed, (void *)&emb_variants[i]);
            b = gb_args(b, emb_shapes[s], 2);
            b = gb_arg_names(b, arg_names, 2);
            b = gb_unit(b, GB_MICROSECOND);
            if (gb_use_real_time(b) == NULL) {
                fprintf(stderr, "bench_peak: cannot register %s\n", name);
                exit(EXIT_FAILURE);
            }
        }
    }
}
