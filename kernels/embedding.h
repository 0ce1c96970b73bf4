/*
 * embedding.h - what every tier of peak_pe_add and peak_embed_pe shares
 * that no vector decides: the prefetch distances, the streaming threshold,
 * the on-the-fly scratch block's geometry and the state its sinks read.
 * The rows and the loops that call them by name are in embedding-body.h,
 * which each SIMD tier compiles against its vector vocabulary; this header
 * is also read by the ISA-free scheduler (schedule/schedule-embedding.c).
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

/* Tokens the table path prefetches ahead (8 KiB of E rows at d_model 512):
   enough to cover the memory latency at one row's processing time, near
   enough that the lines are still in L1 when the row is reached.  Only E
   is prefetched: the PE rows are shared by every sequence of a batch and
   stay cached, and prefetching them too cost ~10% in cache and out
   (measured).  The rows issue the prefetches from their main loop, a few
   lines an iteration, rather than in a loop of their own before the row:
   164-166 cycles a token instead of 177-178 on 2 x 50 tokens of
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

/* ---- the on-the-fly PE's scratch block ------------------------------------ */

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

/* ---- x[b, s, :] += PE(pos0 + s, :) ------------------------------------- */

typedef struct peak_pe_add_fly {
    float *x; /* row s = 0 of batch entry 0 of this block of positions */
    ptrdiff_t batch_stride, ld_x;
    size_t batch;
    const float *scratch;
    size_t ld_scratch;
} peak_pe_add_fly;

#endif /* PEAK_EMBEDDING_H */
