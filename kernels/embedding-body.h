/*
 * embedding-body.h - peak_pe_add and peak_embed_pe written once against
 * the vector vocabulary (simd/f32-<isa>.h): the rows, and the loops over
 * tokens, rows and PE sources that call them, and the tier's two kernels
 * (PEAK_TIER_FN).  A tier's file includes its vocabulary, then this file;
 * the on-the-fly PE comes from the same tier's PE table kernels
 * (peak_f32_pe_rows__<isa>, peak_f32_pe_table__<isa>).
 *
 * Bit-identical to embedding-scalar.c: an element is x + pe, or e * scale
 * rounded and then + pe rounded (peak_vf_mul, peak_vf_add: never an FMA),
 * exactly the scalar's operations; the on-the-fly PE comes from the tier's
 * rows driver, which evaluates peak_pe_table's own expressions.  A row's
 * head and tail vectors go through peak_vf_load_first and
 * peak_vf_store_first, so nothing outside a row's d_model floats is read
 * or written.
 */
#ifndef PEAK_EMBEDDING_BODY_H
#define PEAK_EMBEDDING_BODY_H

#include "common/pe-ref.h"
#include "embedding.h"
#include "simd/typed.h"

#if !defined(PEAK_VF_LANES)
#error "include a vector vocabulary before embedding-body.h"
#endif

#define PEAK_EMBEDDING_PE_ROWS PEAK_TIER_FN(peak_f32_pe_rows)
#define PEAK_EMBEDDING_PE_TABLE PEAK_TIER_FN(peak_f32_pe_table)

/* Floats in a 64-byte cache line: the streaming loop's step. */
#define PEAK_EMBEDDING_LINE 16

/* ---- the rows ------------------------------------------------------------ */

/* The rows are written for a table of type te and an output of type to,
   constants in each of the kernel's copies (PEAK_EMBEDDING_COPY): the
   typed loads and stores (simd/typed.h) fold to one form. */
#define PEAK_EMBEDDING_AI static inline __attribute__((always_inline))

/* Element j of an output row of type to. */
PEAK_EMBEDDING_AI void *peak_embedding_out_at(void *out, size_t j, peak_dtype to)
{
    return (char *)out + j * peak_dtype_bytes(to);
}

PEAK_EMBEDDING_AI peak_vf peak_embedding_scale_add(const void *e, size_t j, peak_dtype te,
                                                  peak_vf vscale, const float *pe)
{
    const peak_vf v = peak_vf_mul(peak_vf_loadu_as(peak_elem_at(e, (ptrdiff_t)j, te), te), vscale);
    return pe ? peak_vf_add(v, peak_vf_loadu(pe + j)) : v;
}

/* out[0 .. n) for n <= PEAK_VF_LANES: a row's head or tail. */
PEAK_EMBEDDING_AI void peak_embedding_part(void *out, peak_dtype to, const void *e, peak_dtype te,
                                           peak_vf vscale, const float *pe, size_t n)
{
    peak_vf v = peak_vf_mul(peak_vf_load_first_as(e, n, te), vscale);
    if (pe)
        v = peak_vf_add(v, peak_vf_load_first(pe, n));
    peak_vf_store_first_as(out, v, n, to);
}

/* Four vectors in address order (peak_store_in_order: GCC would otherwise
   store the first vector last, which measured up to 2x slower on AVX2). */
PEAK_EMBEDDING_AI void peak_embedding_store4(void *out, peak_dtype to, peak_vf v0, peak_vf v1,
                                             peak_vf v2, peak_vf v3)
{
    peak_vf_storeu_as(out, v0, to);
    peak_store_in_order();
    peak_vf_storeu_as(peak_embedding_out_at(out, PEAK_VF_LANES, to), v1, to);
    peak_store_in_order();
    peak_vf_storeu_as(peak_embedding_out_at(out, 2 * PEAK_VF_LANES, to), v2, to);
    peak_store_in_order();
    peak_vf_storeu_as(peak_embedding_out_at(out, 3 * PEAK_VF_LANES, to), v3, to);
}

/* The aligned part of a streamed row: PEAK_EMBEDDING_LINE elements an
   iteration, with streaming stores from where out + j is aligned for them
   (peak_vf_stream_as: PEAK_VF_ALIGN bytes, half that for 16-bit; the
   elements before go through peak_embedding_part).  *pf: where the
   prefetch of next stopped.  Returns the first element not written. */
PEAK_EMBEDDING_AI size_t peak_embedding_stream_part(void *out, peak_dtype to, const void *e,
                                                    peak_dtype te, peak_vf vscale,
                                                    const float *pe, size_t n, const void *next,
                                                    size_t *pf)
{
    const size_t size = peak_dtype_bytes(to);
    const size_t align = to == PEAK_F32 ? PEAK_VF_ALIGN : PEAK_VF_ALIGN / 2;
    size_t j = (align - ((uintptr_t)out & (align - 1))) / size & (PEAK_VF_LANES - 1);
    j = j < n ? j : n;
    if (j)
        peak_embedding_part(out, to, e, te, vscale, pe, j);
    for (; j + PEAK_EMBEDDING_LINE <= n; j += PEAK_EMBEDDING_LINE, *pf = j) {
        peak_embedding_prefetch_part(next, j, PEAK_EMBEDDING_LINE, peak_dtype_bytes(te));
        /* A line is at most 4 vectors (NEON's): all of them unrolled. */
#pragma GCC unroll 4
        for (size_t k = 0; k < PEAK_EMBEDDING_LINE; k += PEAK_VF_LANES)
            peak_vf_stream_as(peak_embedding_out_at(out, j + k, to),
                              peak_embedding_scale_add(e, j + k, te, vscale, pe), to);
    }
    for (; j + PEAK_VF_LANES <= n; j += PEAK_VF_LANES)
        peak_vf_stream_as(peak_embedding_out_at(out, j, to),
                          peak_embedding_scale_add(e, j, te, vscale, pe), to);
    return j;
}

/* out[j] = e[j] * scale + pe[j] (one multiply, then one add), or
   e[j] * scale when pe is NULL, for j < n.  out may equal pe (float32
   out): each vector of pe is read before the same floats of out are
   written.  stream: use streaming stores where whole aligned vectors
   allow (the caller fences).  next: an E row of n elements to prefetch
   into L1 meanwhile, or NULL.

   Four vectors an iteration: two loads, a multiply, an add and a store per
   vector leave the loop overhead a small share.  Each iteration also
   prefetches the matching lines of next (embedding.h); pf is where that
   stopped. */
PEAK_EMBEDDING_AI void peak_embedding_row_pe(void *out, peak_dtype to, const void *e,
                                             peak_dtype te, float scale, const float *pe,
                                             size_t n, bool stream, const void *next)
{
    const peak_vf vscale = peak_vf_set1(scale);
    const size_t lanes = PEAK_VF_LANES;
    size_t j = 0, pf = 0;
    if (stream)
        j = peak_embedding_stream_part(out, to, e, te, vscale, pe, n, next, &pf);
    for (; j + 4 * lanes <= n; j += 4 * lanes, pf = j) {
        peak_embedding_prefetch_part(next, j, 4 * lanes, peak_dtype_bytes(te));
        const peak_vf v0 = peak_embedding_scale_add(e, j, te, vscale, pe);
        const peak_vf v1 = peak_embedding_scale_add(e, j + lanes, te, vscale, pe);
        const peak_vf v2 = peak_embedding_scale_add(e, j + 2 * lanes, te, vscale, pe);
        const peak_vf v3 = peak_embedding_scale_add(e, j + 3 * lanes, te, vscale, pe);
        peak_embedding_store4(peak_embedding_out_at(out, j, to), to, v0, v1, v2, v3);
    }
    peak_embedding_prefetch_rest(next, pf, n, peak_dtype_bytes(te));
    for (; j + lanes <= n; j += lanes)
        peak_vf_storeu_as(peak_embedding_out_at(out, j, to),
                          peak_embedding_scale_add(e, j, te, vscale, pe), to);
    if (j < n)
        peak_embedding_part(peak_embedding_out_at(out, j, to), to, peak_elem_at(e, (ptrdiff_t)j, te),
                            te, vscale, pe ? pe + j : NULL, n - j);
}

/* pe == NULL (a fairseq pad token) is rare: one predictable branch. */
PEAK_EMBEDDING_AI void peak_embedding_row(void *out, peak_dtype to, const void *e, peak_dtype te,
                                          float scale, const float *pe, size_t n, bool stream,
                                          const void *next)
{
    if (pe)
        peak_embedding_row_pe(out, to, e, te, scale, pe, n, stream, next);
    else
        peak_embedding_row_pe(out, to, e, te, scale, NULL, n, stream, next);
}

#ifndef PEAK_EMBEDDING_HAS_ADD_ROW
/* x[j] += pe[j] for j < n: two vectors an iteration. */
static inline __attribute__((always_inline)) void peak_pe_add_row(float *x, const float *pe,
                                                                  size_t n)
{
    size_t j = 0;
    for (; j + 2 * PEAK_VF_LANES <= n; j += 2 * PEAK_VF_LANES) {
        const peak_vf v0 = peak_vf_add(peak_vf_loadu(x + j), peak_vf_loadu(pe + j));
        const peak_vf v1 = peak_vf_add(peak_vf_loadu(x + j + PEAK_VF_LANES),
                                       peak_vf_loadu(pe + j + PEAK_VF_LANES));
        peak_vf_storeu(x + j, v0);
        peak_vf_storeu(x + j + PEAK_VF_LANES, v1);
    }
    for (; j + PEAK_VF_LANES <= n; j += PEAK_VF_LANES)
        peak_vf_storeu(x + j, peak_vf_add(peak_vf_loadu(x + j), peak_vf_loadu(pe + j)));
    if (j < n)
        peak_vf_store_first(
            x + j, peak_vf_add(peak_vf_load_first(x + j, n - j), peak_vf_load_first(pe + j, n - j)),
            n - j);
}
#endif

/* ---- out = E[id] * scale + PE, PE from the caller's table --------------- */

/* The tokens of a batch that share a position are taken one after another,
   so their PE row comes from L2 (or memory) once and from L1 after that.
   On 2 x 50 tokens of d_model 512 in L2 that saves an eighth of a token's
   L1-L2 traffic (E row, PE row, the output's read for ownership and
   write-back): 160 cycles a token in this order against 178 in token
   order (doc/perf-notes.md).  The prefetch follows the same order. */
PEAK_EMBEDDING_AI void peak_embed_table_loop(void *out, ptrdiff_t ld_out, const int32_t *ids,
                                             const int64_t *pos, size_t n_tokens, size_t batch,
                                             size_t seq_stride, const peak_embed_desc *d,
                                             bool stream, peak_dtype te, peak_dtype to)
{
    const size_t n = d->d_model;
    /* (sequence, token) of the row to prefetch: peak_embedding_prefetch_tokens
       rows ahead in the loop's order. */
    const size_t ahead = peak_embedding_prefetch_tokens(peak_dtype_bytes(te));
    size_t ab = ahead % batch, at = ahead / batch;
    for (size_t t = 0; t < n_tokens; t++) {
        assert(pos[t] < 0 || (uint64_t)pos[t] < d->pe_rows);
        const float *pe = pos[t] < 0 ? NULL : d->pe + (size_t)pos[t] * n;
        for (size_t b = 0; b < batch; b++) {
            const size_t i = b * seq_stride + t;
            const void *next =
                at < n_tokens ? peak_embedding_row_of(d, ids[ab * seq_stride + at]) : NULL;
            if (++ab == batch) {
                ab = 0;
                at++;
            }
            peak_embedding_row(peak_embedding_out_at(out, i * (size_t)ld_out, to), to,
                               peak_embedding_row_of(d, ids[i]), te, d->scale, pe, n, stream,
                               next);
        }
    }
}

/* ---- out = E[id] * scale + PE, PE computed on the fly ------------------ */

/* The body of the sinks: columns [c0, c1) of tokens t0 .. t1-1.

   Prefetching.  A column pass reads the same 128 or 256 bytes of every
   token's E row, so the hardware prefetcher sees no stream.  While a pass
   consumes segment [c0, c1) of a row it prefetches the row's next segment
   into L2: a whole pass (~64 KiB of E for 256 tokens) ahead, so the memory
   reads of one pass overlap the sincos and emit work of the one before.
   The first pass has no pass before it and prefetches its segments into L1
   a few tokens ahead instead (not more: the segments of one pass share a
   few L1 sets, and lines fetched further ahead evict one another).  A
   streamed output is not prefetched: that would fetch what the stores are
   about to replace. */
PEAK_EMBEDDING_AI void peak_embed_fly_block(const peak_embedding_fly *f, size_t t0, size_t t1,
                                            size_t c0, size_t c1, bool stream, peak_dtype te,
                                            peak_dtype to)
{
    const size_t n = c1 - c0, d_model = f->d->d_model;
    const size_t next = c1 + n <= d_model ? n : d_model - c1;
    const size_t se = peak_dtype_bytes(te);
    for (size_t t = t0; t < t1; t++) {
        const size_t ahead = t + PEAK_EMBEDDING_PREFETCH_ROWS;
        const char *e = peak_embedding_row_of(f->d, f->ids[t]);
        void *o = peak_embedding_out_at(f->out, t * (size_t)f->ld_out + c0, to);
        if (ahead < f->n_tokens) {
            if (c0 == 0)
                peak_prefetch_bytes(peak_embedding_row_of(f->d, f->ids[ahead]), n * se,
                                    PEAK_PF_L1);
            if (!stream)
                peak_prefetch_bytes(peak_embedding_out_at(f->out, ahead * (size_t)f->ld_out + c0, to),
                                    n * peak_dtype_bytes(to), PEAK_PF_WRITE);
        }
        if (c1 < d_model)
            peak_prefetch_bytes(e + c1 * se, next * se, PEAK_PF_L2);
        if (f->pos[t] >= 0)
            peak_embedding_row(o, to, e + c0 * se, te, f->d->scale,
                               f->scratch + (t - t0) * f->ld_scratch + c0, n, stream, NULL);
    }
}

/* Wider than the scratch (beyond the documented d_model range; float32
   calls only: peak.h bounds a typed call's d_model): each row's PE goes
   into the output row and is added there, one table row a call. */
PEAK_EMBEDDING_AI void peak_embed_fly_wide(void *out, ptrdiff_t ld_out, const int32_t *ids,
                                           const int64_t *pos, size_t n_tokens,
                                           const peak_embed_desc *d, peak_dtype te)
{
    for (size_t t = 0; t < n_tokens; t++) {
        float *o = (float *)out + (ptrdiff_t)t * ld_out;
        if (pos[t] < 0)
            continue;
        PEAK_EMBEDDING_PE_TABLE(o, ld_out, 1, d->d_model, (size_t)pos[t], &d->pe_params, 0,
                                PEAK_PE_FREQ_END, false);
        peak_embedding_row(o, PEAK_F32, peak_embedding_row_of(d, ids[t]), te, d->scale, o,
                           d->d_model, false, NULL);
    }
}

/* A copy of the kernel for table type TE and output type TO: the on-the-fly
   sinks (the PE rows driver calls them by pointer) and the whole kernel,
   in which every row function is inlined with the types constant.  ATTR:
   PEAK_VF_F16_TARGET for the copies with float16 (an attribute: it cannot
   be parenthesised). */
/* NOLINTBEGIN(bugprone-macro-parentheses) */
#define PEAK_EMBEDDING_COPY(name, TE, TO, ATTR)                                        \
    ATTR static void name##_sink(void *ctx, size_t t0, size_t t1, size_t c0, size_t c1)  \
    {                                                                                   \
        peak_embed_fly_block(ctx, t0, t1, c0, c1, false, TE, TO);                      \
    }                                                                                   \
    ATTR static void name##_sink_stream(void *ctx, size_t t0, size_t t1, size_t c0,      \
                                        size_t c1)                                      \
    {                                                                                   \
        peak_embed_fly_block(ctx, t0, t1, c0, c1, true, TE, TO);                       \
    }                                                                                   \
    ATTR static void name(void *out, ptrdiff_t ld_out, const int32_t *ids, const int64_t *pos, \
                          size_t n_tokens, size_t batch, size_t seq_stride,             \
                          const peak_embed_desc *d, bool stream)                        \
    {                                                                                   \
        peak_embed_pe_run(out, ld_out, ids, pos, n_tokens, batch, seq_stride, d, stream, TE, \
                          TO, stream ? name##_sink_stream : name##_sink);               \
    }
/* NOLINTEND(bugprone-macro-parentheses) */

/* One sequence. */
PEAK_EMBEDDING_AI void peak_embed_fly_seq(void *out, ptrdiff_t ld_out, const int32_t *ids,
                                          const int64_t *pos, size_t n_tokens,
                                          const peak_embed_desc *d, peak_dtype te, peak_dtype to,
                                          peak_pe_sink_fn sink)
{
    /* fairseq pad tokens: E[id] * scale and no PE (the driver skips them). */
    for (size_t t = 0; t < n_tokens; t++)
        if (pos[t] < 0)
            peak_embedding_row(peak_embedding_out_at(out, t * (size_t)ld_out, to), to,
                               peak_embedding_row_of(d, ids[t]), te, d->scale, NULL, d->d_model,
                               false, NULL);
    const size_t ld_s = peak_embedding_scratch_ld(d->d_model);
    if (ld_s > PEAK_EMBEDDING_SCRATCH) {
        assert(to == PEAK_F32);
        peak_embed_fly_wide(out, ld_out, ids, pos, n_tokens, d, te);
        return;
    }
    PEAK_PE_ALIGN float scratch[PEAK_EMBEDDING_SCRATCH];
    const size_t sr = peak_embedding_scratch_rows(d->d_model);
    for (size_t t0 = 0; t0 < n_tokens; t0 += PEAK_PE_ROWS_MAX) {
        const size_t n = n_tokens - t0 < PEAK_PE_ROWS_MAX ? n_tokens - t0 : PEAK_PE_ROWS_MAX;
        peak_embedding_fly f = {peak_embedding_out_at(out, t0 * (size_t)ld_out, to),
                                ld_out, ids + t0, pos + t0, n, d, scratch, ld_s};
        PEAK_EMBEDDING_PE_ROWS(scratch, sr, ld_s, n, pos + t0, 0, d->d_model, &d->pe_params, 0,
                               PEAK_PE_FREQ_END, sink, &f);
    }
}

/* peak_embed_pe (peak_embed_pe_fn in internal.h) for table type te and
   output type to.  The embedding scheduler (schedule/schedule-embedding.c)
   computes the PE rows that sequences share itself and passes them as a
   table, so it calls the on-the-fly path with batch 1 only; a batch (the
   kernel contract allows one) computes each sequence's rows again. */
PEAK_EMBEDDING_AI void peak_embed_pe_run(void *out, ptrdiff_t ld_out, const int32_t *ids,
                                         const int64_t *pos, size_t n_tokens, size_t batch,
                                         size_t seq_stride, const peak_embed_desc *d, bool stream,
                                         peak_dtype te, peak_dtype to, peak_pe_sink_fn sink)
{
    assert(out && ids && pos && d && d->table && batch > 0);
    if (d->pe && stream)
        peak_embed_table_loop(out, ld_out, ids, pos, n_tokens, batch, seq_stride, d, true, te, to);
    else if (d->pe)
        peak_embed_table_loop(out, ld_out, ids, pos, n_tokens, batch, seq_stride, d, false, te, to);
    else
        for (size_t b = 0; b < batch; b++)
            peak_embed_fly_seq(peak_embedding_out_at(out, b * seq_stride * (size_t)ld_out, to),
                               ld_out, ids + b * seq_stride, pos, n_tokens, d, te, to, sink);
    /* Streaming stores (large calls) are weakly ordered: fence them. */
    peak_vf_stream_fence();
}

/* ---- x[b, s, :] += PE(pos0 + s, :) ------------------------------------- */

/* The columns [c0, c1) of every row. */
static inline __attribute__((always_inline)) void
peak_pe_add_table_cols(float *x, ptrdiff_t batch_stride, ptrdiff_t ld_x, size_t batch,
                       size_t seq_len, size_t d_model, size_t pos0, const float *pe, size_t c0,
                       size_t c1)
{
    for (size_t s = 0; s < seq_len; s++) {
        const float *row = pe + (pos0 + s) * d_model + c0;
        for (size_t b = 0; b < batch; b++)
            peak_pe_add_row(x + (ptrdiff_t)b * batch_stride + (ptrdiff_t)s * ld_x + c0, row,
                            c1 - c0);
    }
}

static inline __attribute__((always_inline)) void
peak_pe_add_table_run(float *x, ptrdiff_t batch_stride, ptrdiff_t ld_x, size_t batch,
                      size_t seq_len, size_t d_model, size_t pos0, const float *pe,
                      const peak_pe_params *params, size_t f0, size_t f1)
{
    size_t cols[2][2];
    const size_t parts = peak_pe_part_cols(f0, f1, d_model, params->layout, cols);
    for (size_t k = 0; k < parts; k++)
        peak_pe_add_table_cols(x, batch_stride, ld_x, batch, seq_len, d_model, pos0, pe,
                               cols[k][0], cols[k][1]);
}

/* The sink: one PE segment serves every batch entry. */
static void peak_pe_add_fly_sink(void *ctx, size_t s0, size_t s1, size_t c0, size_t c1)
{
    const peak_pe_add_fly *f = ctx;
    for (size_t s = s0; s < s1; s++) {
        float *x_s = f->x + (ptrdiff_t)s * f->ld_x + c0;
        const float *pe = f->scratch + (s - s0) * f->ld_scratch + c0;
        for (size_t b = 0; b < f->batch; b++)
            peak_pe_add_row(x_s + (ptrdiff_t)b * f->batch_stride, pe, c1 - c0);
    }
}

/* false (nothing done) when d_model is wider than the scratch block. */
static inline __attribute__((always_inline)) bool
peak_pe_add_fly_run(float *x, ptrdiff_t batch_stride, ptrdiff_t ld_x, size_t batch,
                    size_t seq_len, size_t d_model, size_t pos0, const peak_pe_params *params,
                    size_t f0, size_t f1)
{
    const size_t ld_s = peak_embedding_scratch_ld(d_model);
    if (ld_s > PEAK_EMBEDDING_SCRATCH)
        return false;
    PEAK_PE_ALIGN float scratch[PEAK_EMBEDDING_SCRATCH];
    const size_t sr = peak_embedding_scratch_rows(d_model);
    for (size_t s0 = 0; s0 < seq_len; s0 += PEAK_PE_ROWS_MAX) {
        const size_t n = seq_len - s0 < PEAK_PE_ROWS_MAX ? seq_len - s0 : PEAK_PE_ROWS_MAX;
        peak_pe_add_fly f = {x + (ptrdiff_t)s0 * ld_x, batch_stride, ld_x, batch, scratch, ld_s};
        PEAK_EMBEDDING_PE_ROWS(scratch, sr, ld_s, n, NULL, pos0 + s0, d_model, params, f0, f1,
                               peak_pe_add_fly_sink, &f);
    }
    return true;
}

/* peak_pe_add (peak_pe_add_fn in internal.h). */
static inline __attribute__((always_inline)) void
peak_pe_add_run(float *x, ptrdiff_t batch_stride, ptrdiff_t ld_x, size_t batch, size_t seq_len,
                size_t d_model, size_t pos0, const float *pe, const peak_pe_params *params,
                size_t f0, size_t f1)
{
    assert(x && batch > 0 && seq_len > 0 && d_model > 0 && (size_t)ld_x >= d_model);
    if (pe)
        peak_pe_add_table_run(x, batch_stride, ld_x, batch, seq_len, d_model, pos0, pe, params,
                              f0, f1);
    else if (!peak_pe_add_fly_run(x, batch_stride, ld_x, batch, seq_len, d_model, pos0, params,
                                  f0, f1))
        peak_pe_add_ref(x, batch_stride, ld_x, batch, seq_len, d_model, pos0, params, f0, f1);
}

/* ---- the kernels of the including tier (kernels.inc) ---- */

PEAK_EMBEDDING_COPY(peak_embed_f32, PEAK_F32, PEAK_F32, )
PEAK_EMBEDDING_COPY(peak_embed_bf16, PEAK_BF16, PEAK_BF16, )
PEAK_EMBEDDING_COPY(peak_embed_bf16_f32, PEAK_BF16, PEAK_F32, )
PEAK_EMBEDDING_COPY(peak_embed_f16, PEAK_F16, PEAK_F16, PEAK_VF_F16_TARGET)
PEAK_EMBEDDING_COPY(peak_embed_f16_f32, PEAK_F16, PEAK_F32, PEAK_VF_F16_TARGET)

void PEAK_TIER_FN(peak_f32_embed_pe)(void *out, ptrdiff_t ld_out, const int32_t *ids,
                                     const int64_t *pos, size_t n_tokens, size_t batch,
                                     size_t seq_stride, const peak_embed_desc *desc, bool stream)
{
    const peak_dtype te = desc->table_type, to = desc->out_type;
    assert(to == PEAK_F32 || to == te);
    if (te == PEAK_BF16)
        (to == PEAK_BF16 ? peak_embed_bf16 : peak_embed_bf16_f32)(out, ld_out, ids, pos, n_tokens,
                                                                   batch, seq_stride, desc, stream);
    else if (te == PEAK_F16)
        (to == PEAK_F16 ? peak_embed_f16 : peak_embed_f16_f32)(out, ld_out, ids, pos, n_tokens,
                                                                batch, seq_stride, desc, stream);
    else
        peak_embed_f32(out, ld_out, ids, pos, n_tokens, batch, seq_stride, desc, stream);
}

void PEAK_TIER_FN(peak_f32_pe_add)(float *x, ptrdiff_t batch_stride, ptrdiff_t ld_x, size_t batch,
                           size_t seq_len, size_t d_model, size_t pos0, const float *pe,
                           const peak_pe_params *params, size_t f0, size_t f1)
{
    peak_pe_add_run(x, batch_stride, ld_x, batch, seq_len, d_model, pos0, pe, params, f0, f1);
}

#endif /* PEAK_EMBEDDING_BODY_H */
