/*
 * embedding.h - what the SIMD tiers of peak_pe_add and peak_embed_pe
 * share: the loops over tokens, rows and PE sources, written once.  A tier
 * supplies two row functions (its vector width and tail masks) and its
 * instance of the rows driver (pe-table.h); everything that decides a bit is
 * in those, so the drivers here only choose what is added to what.
 *
 * Both kernels are memory-bound: a token moves its E row in and its output
 * row out (plus its PE row when that comes from a table).  The E rows are
 * gathered at random, so the hardware prefetcher, which follows streams
 * within a page, would notice each 2 KiB row only when it is half read; the
 * drivers prefetch the rows of the tokens a few places ahead instead.
 */
#ifndef PEAK_EMBEDDING_H
#define PEAK_EMBEDDING_H

#include "internal.h"
#include "pe-table.h"

#include <assert.h>
#include <stdint.h>

/* out[j] = e[j] * scale + pe[j] (one multiply, then one add), or
   e[j] * scale when pe is NULL, for j < n.  out may equal pe.  stream: use
   non-temporal stores where whole aligned vectors allow (the caller fences).
   next: an E row of n floats to prefetch into L1 meanwhile, or NULL. */
typedef void (*peak_embedding_row_fn)(float *out, const float *e, float scale, const float *pe,
                                      size_t n, bool stream, const float *next);
/* x[j] += pe[j] for j < n. */
typedef void (*peak_add_row_fn)(float *x, const float *pe, size_t n);
/* The tier's peak_pe_rows__<isa>. */
typedef void (*peak_pe_rows_fn)(float *scratch, size_t scratch_rows, size_t ld_scratch,
                                size_t n_rows, const int64_t *pos, size_t pos0, size_t d_model,
                                const peak_pe_params *params, peak_pe_sink_fn sink, void *ctx);

/* Tokens the table path prefetches ahead (8 KiB of E rows at d_model 512):
   enough to cover the memory latency at one row's processing time, near
   enough that the lines are still in L1 when the row is reached.  Only E
   is prefetched: the PE rows are shared by every sequence of a batch and
   stay cached, and prefetching them too cost ~10% in cache and out
   (measured).  The x86 rows issue the prefetches from their main loop, a
   few lines an iteration, rather than in a loop of their own before the
   row: 164-166 cycles a token instead of 177-178 on 2 x 50 tokens of
   d_model 512 in L2 (doc/perf-notes.md). */
#define PEAK_EMBEDDING_PREFETCH_TOKENS 4
/* Rows the on-the-fly sink prefetches ahead within one column pass.  Not
   more: a pass reads the same 128 or 256 bytes of every 2 KiB row, which
   all fall in the same few L1 sets, and lines fetched further ahead evict
   one another before they are used. */
#define PEAK_EMBEDDING_PREFETCH_ROWS 4

/* A peak_embed_pe call whose output reaches this many bytes is written with
   non-temporal stores.  Measured (bench-embedding.c): on 64 x 512 tokens of
   d_model 512 (64 MiB of output) the output's read-for-ownership costs
   about as much as reading E, and streaming it took the table path from
   ~0.9x to ~1.1-1.3x of memcpy's bandwidth; on 32 x 128 (8 MiB) it still
   helps.  A batch of 2 x 50 tokens of d_model 512 (200 KB) stays on
   ordinary stores, so the next layer finds its input in cache. */
#define PEAK_EMBEDDING_STREAM_BYTES ((size_t)512 << 10)

static inline bool peak_embedding_streams(size_t n_tokens, size_t d_model)
{
    return n_tokens * d_model * sizeof(float) >= PEAK_EMBEDDING_STREAM_BYTES;
}
/* The on-the-fly scratch block lives on the stack: this many floats (32 KiB
   and a little: 15 rows of 512, one row of the widest documented d_model);
   wider rows take a slow path. */
#define PEAK_EMBEDDING_SCRATCH (8192 + 16)

/* A row's main loop calls this each iteration with the floats it covers
   (a multiple of 16, known at compile time), so the prefetches of the next
   row spread over the row's work: the lines that hold next[j + k] for
   k = 0, 16, ...  An unaligned row's straddling lines are fetched by the
   following iteration's first prefetch; the rest of the row, by
   peak_embedding_prefetch_rest after the loop. */
static inline __attribute__((always_inline)) void
peak_embedding_prefetch_part(const float *next, size_t j, size_t floats)
{
    if (next)
        for (size_t k = 0; k < floats; k += 16)
            __builtin_prefetch(next + j + k, 0, 3);
}

static inline __attribute__((always_inline)) void peak_embedding_prefetch_rest(const float *next,
                                                                               size_t j, size_t n)
{
    if (next && j < n)
        peak_prefetch(next + j, n - j, PEAK_PF_L1);
}

static inline const float *peak_embedding_row_of(const peak_embed_desc *d, int32_t id)
{
    return d->table + (ptrdiff_t)id * d->ld_table;
}

/* ---- out = E[id] * scale + PE, PE from the caller's table --------------- */

/* The tokens of a batch that share a position are taken one after another,
   so their PE row comes from L2 (or memory) once and from L1 after that.
   On 2 x 50 tokens of d_model 512 in L2 that saves an eighth of a token's
   L1-L2 traffic (E row, PE row, the output's read for ownership and
   write-back): 160 cycles a token in this order against 178 in token
   order (doc/perf-notes.md).  The prefetch follows the same order. */
static inline __attribute__((always_inline)) void
peak_embed_table_loop(float *out, ptrdiff_t ld_out, const int32_t *ids, const int64_t *pos,
                      size_t n_tokens, size_t batch, size_t seq_stride, const peak_embed_desc *d,
                      peak_embedding_row_fn row, bool stream)
{
    const size_t n = d->d_model;
    /* (sequence, token) of the row to prefetch: PEAK_EMBEDDING_PREFETCH_TOKENS
       rows ahead in the loop's order. */
    size_t ab = PEAK_EMBEDDING_PREFETCH_TOKENS % batch, at = PEAK_EMBEDDING_PREFETCH_TOKENS / batch;
    for (size_t t = 0; t < n_tokens; t++) {
        assert(pos[t] < 0 || (uint64_t)pos[t] < d->pe_rows);
        const float *pe = pos[t] < 0 ? NULL : d->pe + (size_t)pos[t] * n;
        for (size_t b = 0; b < batch; b++) {
            const size_t i = b * seq_stride + t;
            const float *next =
                at < n_tokens ? peak_embedding_row_of(d, ids[ab * seq_stride + at]) : NULL;
            if (++ab == batch) {
                ab = 0;
                at++;
            }
            row(out + (ptrdiff_t)i * ld_out, peak_embedding_row_of(d, ids[i]), d->scale, pe, n,
                stream, next);
        }
    }
}

/* The tier fences after a streaming call. */
static inline __attribute__((always_inline)) void
peak_embed_table_run(float *out, ptrdiff_t ld_out, const int32_t *ids, const int64_t *pos,
                     size_t n_tokens, size_t batch, size_t seq_stride, const peak_embed_desc *d,
                     peak_embedding_row_fn row, bool stream)
{
    if (stream)
        peak_embed_table_loop(out, ld_out, ids, pos, n_tokens, batch, seq_stride, d, row, true);
    else
        peak_embed_table_loop(out, ld_out, ids, pos, n_tokens, batch, seq_stride, d, row, false);
}

/* ---- out = E[id] * scale + PE, PE computed on the fly ------------------ */

/* The scratch block's row stride: a row and a cache line more, so that the
   rows' segments of one column pass spread over the L1 sets instead of
   sharing the few that a power-of-two stride would give them. */
static inline size_t peak_embedding_scratch_ld(size_t d_model)
{
    return (d_model + 15) / 16 * 16 + 16;
}

/* Rows in the scratch block (at least one). */
static inline size_t peak_embedding_scratch_rows(size_t d_model)
{
    const size_t ld = peak_embedding_scratch_ld(d_model);
    return ld <= PEAK_EMBEDDING_SCRATCH ? PEAK_EMBEDDING_SCRATCH / ld : 1;
}

typedef struct peak_embedding_fly {
    float *out;
    ptrdiff_t ld_out;
    const int32_t *ids;
    const int64_t *pos;
    size_t n_tokens;
    const peak_embed_desc *d;
    const float *scratch;
    size_t ld_scratch;
} peak_embedding_fly;

/* The body of a tier's sink: columns [c0, c1) of tokens t0 .. t1-1.

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
static inline __attribute__((always_inline)) void
peak_embed_fly_block(const peak_embedding_fly *f, size_t t0, size_t t1, size_t c0, size_t c1,
                     peak_embedding_row_fn row, bool stream)
{
    const size_t n = c1 - c0, d_model = f->d->d_model;
    const size_t next = c1 + n <= d_model ? n : d_model - c1;
    for (size_t t = t0; t < t1; t++) {
        const size_t ahead = t + PEAK_EMBEDDING_PREFETCH_ROWS;
        const float *e = peak_embedding_row_of(f->d, f->ids[t]);
        if (ahead < f->n_tokens) {
            if (c0 == 0)
                peak_prefetch(peak_embedding_row_of(f->d, f->ids[ahead]), n, PEAK_PF_L1);
            if (!stream)
                peak_prefetch(f->out + (ptrdiff_t)ahead * f->ld_out + c0, n, PEAK_PF_WRITE);
        }
        if (c1 < d_model)
            peak_prefetch(e + c1, next, PEAK_PF_L2);
        if (f->pos[t] >= 0)
            row(f->out + (ptrdiff_t)t * f->ld_out + c0, e + c0, f->d->scale,
                f->scratch + (t - t0) * f->ld_scratch + c0, n, stream, NULL);
    }
}

/* Wider than the scratch (beyond the documented d_model range): each row's
   PE goes into the output row and is added there, one table row a call. */
static inline __attribute__((always_inline)) void
peak_embed_fly_wide(float *out, ptrdiff_t ld_out, const int32_t *ids, const int64_t *pos,
                    size_t n_tokens, const peak_embed_desc *d, peak_embedding_row_fn row,
                    peak_pe_table_fn table)
{
    for (size_t t = 0; t < n_tokens; t++) {
        float *o = out + (ptrdiff_t)t * ld_out;
        if (pos[t] < 0)
            continue;
        table(o, ld_out, 1, d->d_model, (size_t)pos[t], &d->pe_params);
        row(o, peak_embedding_row_of(d, ids[t]), d->scale, o, d->d_model, false, NULL);
    }
}

/* One sequence.  sink and sink_stream: the tier's sinks without and with
   streaming stores. */
static inline __attribute__((always_inline)) void
peak_embed_fly_seq(float *out, ptrdiff_t ld_out, const int32_t *ids, const int64_t *pos,
                   size_t n_tokens, const peak_embed_desc *d, peak_embedding_row_fn row,
                   peak_pe_rows_fn rows, peak_pe_sink_fn sink, peak_pe_sink_fn sink_stream,
                   peak_pe_table_fn table, bool stream)
{
    /* fairseq pad tokens: E[id] * scale and no PE (the driver skips them). */
    for (size_t t = 0; t < n_tokens; t++)
        if (pos[t] < 0)
            row(out + (ptrdiff_t)t * ld_out, peak_embedding_row_of(d, ids[t]), d->scale, NULL,
                d->d_model, false, NULL);
    const size_t ld_s = peak_embedding_scratch_ld(d->d_model);
    if (ld_s > PEAK_EMBEDDING_SCRATCH) {
        peak_embed_fly_wide(out, ld_out, ids, pos, n_tokens, d, row, table);
        return;
    }
    PEAK_PE_ALIGN float scratch[PEAK_EMBEDDING_SCRATCH];
    const size_t sr = peak_embedding_scratch_rows(d->d_model);
    for (size_t t0 = 0; t0 < n_tokens; t0 += PEAK_PE_ROWS_MAX) {
        const size_t n = n_tokens - t0 < PEAK_PE_ROWS_MAX ? n_tokens - t0 : PEAK_PE_ROWS_MAX;
        peak_embedding_fly f = {
            out + (ptrdiff_t)t0 * ld_out, ld_out, ids + t0, pos + t0, n, d, scratch, ld_s};
        rows(scratch, sr, ld_s, n, pos + t0, 0, d->d_model, &d->pe_params,
             stream ? sink_stream : sink, &f);
    }
}

/* The embedding scheduler (dispatch/schedule-embedding.c) computes the PE
   rows that sequences share itself and passes them as a table, so it calls
   this with batch 1 only; a batch (the kernel contract allows one)
   computes each sequence's rows again. */
static inline __attribute__((always_inline)) void
peak_embed_fly_run(float *out, ptrdiff_t ld_out, const int32_t *ids, const int64_t *pos,
                   size_t n_tokens, size_t batch, size_t seq_stride, const peak_embed_desc *d,
                   peak_embedding_row_fn row, peak_pe_rows_fn rows, peak_pe_sink_fn sink,
                   peak_pe_sink_fn sink_stream, peak_pe_table_fn table, bool stream)
{
    for (size_t b = 0; b < batch; b++)
        peak_embed_fly_seq(out + (ptrdiff_t)(b * seq_stride) * ld_out, ld_out,
                           ids + b * seq_stride, pos, n_tokens, d, row, rows, sink, sink_stream,
                           table, stream);
}

/* ---- x[b, s, :] += PE(pos0 + s, :) ------------------------------------- */

static inline __attribute__((always_inline)) void
peak_pe_add_table_run(float *x, ptrdiff_t batch_stride, ptrdiff_t ld_x, size_t batch,
                      size_t seq_len, size_t d_model, size_t pos0, const float *pe,
                      peak_add_row_fn add)
{
    for (size_t s = 0; s < seq_len; s++) {
        const float *row = pe + (pos0 + s) * d_model;
        for (size_t b = 0; b < batch; b++)
            add(x + (ptrdiff_t)b * batch_stride + (ptrdiff_t)s * ld_x, row, d_model);
    }
}

typedef struct peak_pe_add_fly {
    float *x; /* row s = 0 of batch entry 0 of this block of positions */
    ptrdiff_t batch_stride, ld_x;
    size_t batch;
    const float *scratch;
    size_t ld_scratch;
} peak_pe_add_fly;

/* The body of a tier's sink: one PE segment serves every batch entry. */
static inline __attribute__((always_inline)) void
peak_pe_add_fly_block(const peak_pe_add_fly *f, size_t s0, size_t s1, size_t c0, size_t c1,
                      peak_add_row_fn add)
{
    for (size_t s = s0; s < s1; s++) {
        float *x_s = f->x + (ptrdiff_t)s * f->ld_x + c0;
        const float *pe = f->scratch + (s - s0) * f->ld_scratch + c0;
        for (size_t b = 0; b < f->batch; b++)
            add(x_s + (ptrdiff_t)b * f->batch_stride, pe, c1 - c0);
    }
}

/* false (nothing done) when d_model is wider than the scratch block. */
static inline __attribute__((always_inline)) bool
peak_pe_add_fly_run(float *x, ptrdiff_t batch_stride, ptrdiff_t ld_x, size_t batch,
                    size_t seq_len, size_t d_model, size_t pos0, const peak_pe_params *params,
                    peak_pe_rows_fn rows, peak_pe_sink_fn sink)
{
    const size_t ld_s = peak_embedding_scratch_ld(d_model);
    if (ld_s > PEAK_EMBEDDING_SCRATCH)
        return false;
    PEAK_PE_ALIGN float scratch[PEAK_EMBEDDING_SCRATCH];
    const size_t sr = peak_embedding_scratch_rows(d_model);
    for (size_t s0 = 0; s0 < seq_len; s0 += PEAK_PE_ROWS_MAX) {
        const size_t n = seq_len - s0 < PEAK_PE_ROWS_MAX ? seq_len - s0 : PEAK_PE_ROWS_MAX;
        peak_pe_add_fly f = {x + (ptrdiff_t)s0 * ld_x, batch_stride, ld_x, batch, scratch, ld_s};
        rows(scratch, sr, ld_s, n, NULL, pos0 + s0, d_model, params, sink, &f);
    }
    return true;
}

#endif /* PEAK_EMBEDDING_H */
