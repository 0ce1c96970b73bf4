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

#include "convert.h"
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

/* The same distance in bytes for a table of elements of `size` bytes: a
   16-bit table's rows are half as long, and 4 of them ahead left the
   bfloat16 call on 64 x 512 tokens of 512 at 1.4x the float32 call's
   speed where 8 gave 1.7x (memory latency, not bandwidth, bounds a
   gather of 1 KiB rows: doc/perf-notes.md). */
static inline size_t peak_embedding_prefetch_tokens(size_t size)
{
    return PEAK_EMBEDDING_PREFETCH_TOKENS * sizeof(float) / size;
}
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

/* A row's main loop calls this each iteration with the elements it
   covers (a multiple of 16, known at compile time) and their size, so the
   prefetches of the next row spread over the row's work: a line every 64
   bytes from next[j].  An unaligned row's straddling lines are fetched by
   the following iteration's first prefetch; the rest of the row, by
   peak_embedding_prefetch_rest after the loop. */
static inline __attribute__((always_inline)) void
peak_embedding_prefetch_part(const void *next, size_t j, size_t floats, size_t size)
{
    if (next)
        for (size_t k = 0; k < floats * size; k += 64)
            __builtin_prefetch((const char *)next + j * size + k, 0, 3);
}

static inline __attribute__((always_inline)) void
peak_embedding_prefetch_rest(const void *next, size_t j, size_t n, size_t size)
{
    if (next && j < n)
        peak_prefetch_bytes((const char *)next + j * size, (n - j) * size, PEAK_PF_L1);
}

/* E's row of token id, in E's type. */
static inline const void *peak_embedding_row_of(const peak_embed_desc *d, int32_t id)
{
    return (const char *)d->table +
           (ptrdiff_t)id * d->ld_table * (ptrdiff_t)peak_dtype_bytes(d->table_type);
}

/* Bytes of E's row, for the prefetches. */
static inline size_t peak_embedding_row_bytes(const peak_embed_desc *d)
{
    return d->d_model * peak_dtype_bytes(d->table_type);
}

/* Whether a tier's peak_embed_pe kernel takes a table of type te and an
   output of type to itself: on the SIMD tiers any table into float32 or
   its own type (float16 on AVX2 only where the CPU has F16C: the
   scheduler takes the scalar tier's kernel otherwise); on the scalar
   tier, any table into float32.  Other pairs are staged by the scheduler
   (schedule-embedding.c): 9 pairs compiled into every loop would triple
   the kernels' code for pairs models do not use. */
static inline bool peak_embedding_kernel_takes(peak_isa isa, peak_dtype te, peak_dtype to)
{
    return to == PEAK_F32 || (to == te && isa != PEAK_ISA_SCALAR);
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
    void *out;
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
