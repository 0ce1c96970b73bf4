/*
 * attention-mask.h - what a tile of keys looks like through the masks (part
 * of attention.h; include that, not this): which row vectors of a block see
 * some of it and whether all see it whole (attention_tile_rows), the
 * additive tile B^T and the dead keys redirected to the zero row
 * (attention_tile_mask), and the exact P.V that skips masked weights when a
 * visible V holds inf or NaN (attention_pv_exact).  The per-row key ranges
 * and element masks themselves come from mask.h, shared with the softmax.
 * Expects attention_block, attention_ws and PEAK_ATTENTION_BQ,
 * PEAK_ATTENTION_BC, PEAK_ATTENTION_VW.
 */
#ifndef PEAK_ATTENTION_MASK_H
#define PEAK_ATTENTION_MASK_H
#ifndef PEAK_ATTENTION_H
#error "include attention.h, which includes this after its prerequisites"
#endif

/* Rows [*r0, *r1) are the vectors holding a row that sees part of keys
   [t0, t1); returns false when none does.  *whole: every real row of those
   vectors sees the whole tile. */
static inline bool attention_tile_rows(const attention_block *blk, size_t t0, size_t t1, size_t *r0,
                                       size_t *r1, bool *whole)
{
    size_t first = PEAK_ATTENTION_BQ, last = 0;
    for (size_t r = 0; r < blk->rows; r++) {
        if (blk->lo[r] < t1 && blk->hi[r] > t0 && blk->lo[r] < blk->hi[r]) {
            if (first == PEAK_ATTENTION_BQ)
                first = r;
            last = r;
        }
    }
    if (first == PEAK_ATTENTION_BQ)
        return false;
    *r0 = first / PEAK_ATTENTION_VW * PEAK_ATTENTION_VW;
    *r1 = (last / PEAK_ATTENTION_VW + 1) * PEAK_ATTENTION_VW;
    *whole = !blk->elem_masks;
    for (size_t r = *r0; r < *r1 && r < blk->rows && *whole; r++)
        *whole = blk->lo[r] <= t0 && blk->hi[r] >= t1;
    return true;
}

/* B^T and the live keys of a block with a keep or bias mask, per element. */
static inline void attention_tile_elem_mask(const attention_block *blk, const attention_ws *w,
                                            size_t t0, size_t n, size_t r0, size_t r1, bool *live)
{
    for (size_t r = r0; r < r1; r++) {
        for (size_t j = 0; j < n; j++) {
            const size_t key = t0 + j;
            const bool vis = key >= blk->lo[r] && key < blk->hi[r] &&
                             peak_mask_visible(blk->keep[r], blk->bias[r], key);
            w->bt[j * PEAK_ATTENTION_BQ + r] = !vis           ? -INFINITY
                                               : blk->bias[r] ? blk->bias[r][key]
                                                              : 0.0f;
            live[j] |= vis;
        }
    }
}

/* B^T for keys t0 .. t0+n-1 and rows [r0, r1), and each key's K/V row (the
   zero row for a key no row sees).  Rows past the block have lo = hi = 0. */
static inline void attention_tile_mask(const attention_block *blk, const attention_ws *w, size_t t0,
                                       size_t n, size_t r0, size_t r1)
{
    const peak_attention_desc *d = blk->d;
    bool live[PEAK_ATTENTION_BC] = {false};
    if (blk->elem_masks) {
        attention_tile_elem_mask(blk, w, t0, n, r0, r1, live);
    } else {
        /* Key ranges only (causal, window, padding; the diagonal tiles of a
           causal mask): a row of B^T at a time, in a loop the compiler
           vectorises.  Per element through peak_mask_visible() it took
           twice as long as the tile's arithmetic. */
        for (size_t j = 0; j < n; j++) {
            const size_t key = t0 + j;
            float *bj = w->bt + j * PEAK_ATTENTION_BQ;
            int any = 0;
            for (size_t r = r0; r < r1; r++) {
                const int vis = key >= blk->lo[r] && key < blk->hi[r];
                bj[r] = vis ? 0.0f : -INFINITY;
                any |= vis;
            }
            live[j] = any;
        }
    }
    for (size_t j = 0; j < n; j++) {
        w->kraw[j] = live[j] ? attention_kv_row(blk->k, t0 + j, d->k_stride[1], d->k_type) : w->zero;
        w->vraw[j] = live[j] ? attention_kv_row(blk->v, t0 + j, d->v_stride[1], d->v_type) : w->zero;
    }
}

/* O^T += V^T P^T one weight at a time, skipping the keys each row does not
   see (B^T = -inf): the masked tile whose V holds inf or NaN (rare, so
   plain C).  A key the row sees contributes p * V even when p is 0, as in
   the scalar tier: 0 * NaN is NaN. */
static inline void attention_pv_exact(const attention_ws *w, size_t dv, size_t n, size_t r0,
                                      size_t r1)
{
    for (size_t j = 0; j < n; j++)
        for (size_t r = r0; r < r1; r++) {
            const float p = w->st[j * PEAK_ATTENTION_BQ + r];
            if (w->bt[j * PEAK_ATTENTION_BQ + r] == -INFINITY)
                continue;
            for (size_t c = 0; c < dv; c++)
                w->oacc[c * PEAK_ATTENTION_BQ + r] += p * w->vp[j][c];
        }
}

#endif /* PEAK_ATTENTION_MASK_H */
