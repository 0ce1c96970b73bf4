/*
 * schedule-embedding.c - the embedding scheduler: which kernel calls one
 * validated peak_embed_pe call becomes.  A batch of equal-length sequences
 * goes a block of positions at a time for all its sequences at once; any
 * other call, 256 tokens at a time with their positions resolved here.
 * Kernel policy, not API: api.c has checked every argument before this runs.
 */
#include "schedule-embedding.h"

#include "embedding.h"
#include "parallel.h"

/* A batch of equal-length sequences (pos0 + t % seq_len, no fairseq
   numbering) needs the same PE rows in every sequence, so the kernels are
   handed a block of positions at a time for all the full sequences at once
   (peak_embed_pe_fn's batch), and take the tokens that share a position
   one after another: each PE row is read into L1 once per batch.  A last,
   shorter sequence takes the same block on its own.

   With a table the block is rows of it.  Without one, the block is
   computed here, once per position, into the stack by the pe_table kernel
   (peak_pe_table's values: the kernels' on-the-fly path gives the same
   bits, the tests hold both to them), and the kernels take their table
   path.  The kernels' own on-the-fly path computes a double-precision
   sincos pair per element for every token; here it is one per element per
   position, 1/64 of the work for a batch of 64 (bench-embedding.c: fly:1
   against fly:0).  The stack block is 16 KiB (8 rows of d_model 512): it
   stays in L1 while the batch reads it, and keeps this path's stack below
   the per-token path's (tests/test-stack.c); a 32 KiB block measured ~6%
   faster on 64 x 512 tokens but took 67 KiB of stack on AVX-512.
   false: not this case, or rows wider than the block. */
enum { EMBED_FLY_FLOATS = 4096, EMBED_FLY_ROWS = 64 };
/* Positions per kernel call, resolved into an array on the stack so that
   nothing is allocated (2 KiB). */
enum { EMBED_POS_CHUNK = 256 };

/* The kernel prefetches the E rows of the tokens a few places ahead of the
   one it works on, within its call; a block's first rows are requested
   here, before its PE rows are computed, so that work hides their latency.
   They are the first in the kernel's order: position by position, the
   batch's tokens at each (the block is n positions of batch sequences). */
static void embed_prefetch_block(const int32_t *ids, size_t s0, size_t n, size_t seq,
                                 size_t batch, const peak_embed_desc *d)
{
    for (size_t k = 0; k < PEAK_EMBEDDING_PREFETCH_TOKENS && k < n * batch; k++)
        peak_prefetch(peak_embedding_row_of(d, ids[k % batch * seq + s0 + k / batch]), d->d_model,
                      PEAK_PF_L1);
}

static bool embed_seq_batched(float *out, ptrdiff_t ld_out, const int32_t *ids, size_t n_tokens,
                              const peak_embed_desc *d)
{
    const size_t seq = d->seq_len, dm = d->d_model;
    if (d->positions || d->padding_idx >= 0 || seq == 0 || n_tokens <= seq ||
        (!d->pe && dm > EMBED_FLY_FLOATS))
        return false;
    const size_t full = n_tokens / seq, rest = n_tokens % seq;
    size_t rows = EMBED_POS_CHUNK;
    _Alignas(64) float pe[EMBED_FLY_FLOATS];
    int64_t pos[EMBED_POS_CHUNK];
    peak_embed_desc block = *d;
    if (!d->pe) {
        rows = EMBED_FLY_FLOATS / dm < EMBED_FLY_ROWS ? EMBED_FLY_FLOATS / dm : EMBED_FLY_ROWS;
        block.pe = pe;
        block.pe_rows = rows;
        for (size_t r = 0; r < rows; r++)
            pos[r] = (int64_t)r;
    }
    const peak_kernels *k = peak_active_kernels();
    const bool stream = peak_embedding_streams(n_tokens, dm);
    for (size_t s0 = 0; s0 < seq; s0 += rows) {
        const size_t n = seq - s0 < rows ? seq - s0 : rows;
        embed_prefetch_block(ids, s0, n, seq, full, d);
        if (d->pe)
            for (size_t r = 0; r < n; r++)
                pos[r] = (int64_t)(d->pos0 + s0 + r);
        else
            k->pe_table(pe, (ptrdiff_t)dm, n, dm, d->pos0 + s0, &d->pe_params);
        k->embed_pe(out + s0 * (size_t)ld_out, ld_out, ids + s0, pos, n, full, seq, &block,
                    stream);
        if (rest > s0) {
            const size_t t0 = full * seq + s0;
            k->embed_pe(out + t0 * (size_t)ld_out, ld_out, ids + t0, pos,
                        rest - s0 < n ? rest - s0 : n, 1, 0, &block, stream);
        }
    }
    return true;
}

void peak_schedule_embed_pe(float *out, ptrdiff_t ld_out, const int32_t *ids, size_t n_tokens,
                            const peak_embed_desc *desc, const peak_threadpool *pool)
{
    (void)pool;
    if (embed_seq_batched(out, ld_out, ids, n_tokens, desc))
        return;
    int64_t pos[EMBED_POS_CHUNK];
    pos_walk w = {desc, ids, 0, 0, 0};
    peak_embed_pe_fn kernel = peak_active_kernels()->embed_pe;
    const bool stream = peak_embedding_streams(n_tokens, desc->d_model);
    for (size_t t0 = 0; t0 < n_tokens; t0 += EMBED_POS_CHUNK) {
        size_t n = n_tokens - t0 < EMBED_POS_CHUNK ? n_tokens - t0 : EMBED_POS_CHUNK;
        for (size_t t = 0; t < n; t++)
            pos[t] = pos_next(&w);
        kernel(out + t0 * (size_t)ld_out, ld_out, ids + t0, pos, n, 1, 0, desc, stream);
    }
}
