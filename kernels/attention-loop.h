/*
 * attention-loop.h - the driver's loop, attention_tiles_run (part of
 * attention.h; include that, not this): per batch and kv head, blocks of
 * query rows stream over the tiles of their keys, folding the running sums
 * every PEAK_ATTENTION_FOLD_TILES tiles, prefetching the next rows and
 * cached tiles, and finish with the division into O and lse
 * (attention_block_finish; optionally through the including file's
 * PEAK_ATTENTION_T8X8_OUT); a kv head with fewer than PEAK_ATTENTION_VW / 2
 * rows goes to the row path (attention-decode.h).  Expects every other
 * piece of attention.h.
 */
#ifndef PEAK_ATTENTION_LOOP_H
#define PEAK_ATTENTION_LOOP_H
#ifndef PEAK_ATTENTION_H
#error "include attention.h, which includes this after its prerequisites"
#endif

static inline void attention_block_finish(const attention_block *blk, const attention_ws *w,
                                          float *o)
{
    const peak_attention_desc *d = blk->d;
    /* O = O^T / l, in place, along the rows (vectorised by the compiler):
       a division, not a multiply by 1/l -- one rounding, not two.  A row
       with l = 0 saw nothing and is +0; one with l = NaN gets NaN from the
       division. */
    float div[PEAK_ATTENTION_BQ];
    for (size_t r = 0; r < blk->rows; r++)
        div[r] = w->l[r] == 0.0f ? 1.0f : w->l[r];
    for (size_t c = 0; c < d->v_head_dim; c++)
        for (size_t r = 0; r < blk->rows; r++)
            w->oacc[c * PEAK_ATTENTION_BQ + r] =
                w->l[r] == 0.0f ? 0.0f : w->oacc[c * PEAK_ATTENTION_BQ + r] / div[r];
    /* Eight rows at a time, through the including file's 8 x 8 transpose
       (PEAK_ATTENTION_T8X8_OUT) when it has one and the group is whole. */
    for (size_t r = 0; r < PEAK_ATTENTION_ROWS_AHEAD && r < blk->rows; r++)
        peak_prefetch(attention_o_row(o, d, blk->b, blk->head[r], blk->pos[r]), d->v_head_dim,
                      PEAK_PF_WRITE);
    for (size_t r8 = 0; r8 < blk->rows; r8 += 8) {
        const size_t nr = blk->rows - r8 < 8 ? blk->rows - r8 : 8;
        float *rows[8];
        for (size_t k = 0; k < nr; k++) {
            const size_t r = r8 + k, ra = r + PEAK_ATTENTION_ROWS_AHEAD;
            if (ra < blk->rows)
                peak_prefetch(attention_o_row(o, d, blk->b, blk->head[ra], blk->pos[ra]),
                              d->v_head_dim, PEAK_PF_WRITE);
            rows[k] = attention_o_row(o, d, blk->b, blk->head[r], blk->pos[r]);
        }
        size_t c = 0;
#ifdef PEAK_ATTENTION_T8X8_OUT
        if (nr == 8)
            for (; c + 8 <= d->v_head_dim; c += 8)
                PEAK_ATTENTION_T8X8_OUT(rows, c, w->oacc + c * PEAK_ATTENTION_BQ + r8,
                                        PEAK_ATTENTION_BQ);
#endif
        for (; c < d->v_head_dim; c++)
            for (size_t k = 0; k < nr; k++)
                rows[k][c] = w->oacc[c * PEAK_ATTENTION_BQ + r8 + k];
        if (d->lse)
            for (size_t r = r8; r < r8 + nr; r++)
                *attention_lse_at(d, blk->b, blk->head[r], blk->pos[r]) =
                    attention_lse(w->m[r], w->l[r]);
    }
}

/* Requests rows [*done, *done + n) of 2 BQ into L2: first the block's O
   rows (finish writes them), then the Q rows of the next block (the kv
   head's next, else the next kv head's first).  Spread over the block's
   tiles, so that start and finish find their strided rows in L2 instead
   of waiting on them. */
static inline void attention_prefetch_rows_ahead(const attention_block *blk, const float *q,
                                                 float *o, size_t kvh, size_t first,
                                                 size_t group_rows, size_t *done, size_t n)
{
    const peak_attention_desc *d = blk->d;
    const size_t group = d->heads / d->kv_heads;
    const size_t end = *done + n < 2 * PEAK_ATTENTION_BQ ? *done + n : 2 * PEAK_ATTENTION_BQ;
    for (size_t k = *done; k < end; k++) {
        if (k < PEAK_ATTENTION_BQ) {
            if (k < blk->rows)
                peak_prefetch(attention_o_row(o, d, blk->b, blk->head[k], blk->pos[k]),
                              d->v_head_dim, PEAK_PF_WRITE);
        } else {
            /* Row k - BQ of the next block: this kv head's, or the next kv
               head's first (cross-attention: one block per kv head). */
            const bool last = first + PEAK_ATTENTION_BQ >= group_rows;
            const size_t nkvh = last ? kvh + 1 : kvh, R = last ? k - PEAK_ATTENTION_BQ : first + k;
            if (nkvh < d->kv_heads && R < group_rows)
                peak_prefetch(attention_q_row(q, d, blk->b, nkvh * group + R % group, R / group),
                              d->head_dim, PEAK_PF_L2);
        }
    }
    *done = end;
}

/* Empty folded sums, before a block's first fold. */
static inline void attention_fold_start(const attention_ws *w, size_t dv)
{
    for (size_t r = 0; r < PEAK_ATTENTION_BQ; r++) {
        w->m2[r] = -INFINITY;
        w->l2[r] = 0.0f;
    }
    memset(w->oacc2, 0, dv * PEAK_ATTENTION_BQ * sizeof(float));
}

/* O2 = O2 * e^(m2 - m) + O^T and l2 likewise, then O^T = 0, l = 0, m2 = m:
   the block's running sums restart from zero at the same max. */
static inline void attention_fold(const attention_ws *w, size_t dv)
{
    float s[PEAK_ATTENTION_BQ];
    for (size_t r = 0; r < PEAK_ATTENTION_BQ; r++) {
        s[r] = attention_fold_scale(w->m2[r], w->m[r]);
        w->l2[r] = w->l2[r] * s[r] + w->l[r];
        w->l[r] = 0.0f;
        w->m2[r] = w->m[r];
    }
    for (size_t c = 0; c < dv; c++)
        for (size_t r = 0; r < PEAK_ATTENTION_BQ; r++) {
            w->oacc2[c * PEAK_ATTENTION_BQ + r] =
                w->oacc2[c * PEAK_ATTENTION_BQ + r] * s[r] + w->oacc[c * PEAK_ATTENTION_BQ + r];
            w->oacc[c * PEAK_ATTENTION_BQ + r] = 0.0f;
        }
}

/* The last fold, into O^T and l, for attention_block_finish (after at least
   one attention_fold). */
static inline void attention_unfold(const attention_ws *w, size_t dv)
{
    float s[PEAK_ATTENTION_BQ];
    for (size_t r = 0; r < PEAK_ATTENTION_BQ; r++) {
        s[r] = attention_fold_scale(w->m2[r], w->m[r]);
        w->l[r] += w->l2[r] * s[r];
    }
    for (size_t c = 0; c < dv; c++)
        for (size_t r = 0; r < PEAK_ATTENTION_BQ; r++)
            w->oacc[c * PEAK_ATTENTION_BQ + r] += w->oacc2[c * PEAK_ATTENTION_BQ + r] * s[r];
}

/* Requests cached tile t's K and V into L2 while the tile before it
   computes: with Lk = 4096 at Dh = 64 the cache is the size of L2 and
   lives partly in L3. */
static inline void attention_prefetch_cached_tile(const attention_ws *w,
                                                  const peak_attention_desc *d, size_t t)
{
    if (t >= w->cache_tiles || !w->cache_n[t])
        return;
    const size_t ldk = attention_round16(d->head_dim), ldv = attention_round16(d->v_head_dim);
    peak_prefetch(w->kcache + t * PEAK_ATTENTION_BC * ldk, w->cache_n[t] * ldk, PEAK_PF_L2);
    peak_prefetch(w->vcache + t * PEAK_ATTENTION_BC * ldv, w->cache_n[t] * ldv, PEAK_PF_L2);
}

/* Keys [lo, hi) some row of the block may see. */
static inline peak_key_range attention_block_keys(const attention_block *blk)
{
    peak_key_range k = {SIZE_MAX, 0};
    for (size_t r = 0; r < blk->rows; r++)
        if (blk->lo[r] < blk->hi[r]) {
            k.lo = blk->lo[r] < k.lo ? blk->lo[r] : k.lo;
            k.hi = blk->hi[r] > k.hi ? blk->hi[r] : k.hi;
        }
    if (k.lo >= k.hi)
        k.lo = k.hi = 0;
    return k;
}

static inline void attention_tiles_run(float *o, const float *q, const float *k, const float *v,
                                       const peak_attention_desc *d, void *workspace)
{
    assert(o && q && k && v && d && workspace);
    assert(d->kv_heads > 0 && d->heads % d->kv_heads == 0 && d->v_head_dim > 0);
    const attention_ws w = attention_ws_carve(workspace, d);
    const size_t group_rows = d->heads / d->kv_heads * d->q_len;
    if (2 * group_rows < PEAK_ATTENTION_VW) {
        /* Decode: each kv head has a few rows, all for the row path. */
        const size_t step = PEAK_ATTENTION_ROW_STATES / group_rows;
        for (size_t b = 0; b < d->batch; b++)
            for (size_t kvh = 0; kvh < d->kv_heads; kvh += step)
                attention_rows_run(d, &w, o, q, k, v, b, kvh,
                                   d->kv_heads - kvh < step ? d->kv_heads - kvh : step, 0,
                                   group_rows);
        return;
    }
    attention_block blk;
    blk.d = d;
    blk.elem_masks = d->mask.keep || d->mask.bias;
    for (size_t b = 0; b < d->batch; b++)
        for (size_t kvh = 0; kvh < d->kv_heads; kvh++) {
            blk.b = b;
            blk.k = k + (ptrdiff_t)b * d->k_stride[0] + (ptrdiff_t)kvh * d->k_stride[2];
            blk.v = v + (ptrdiff_t)b * d->v_stride[0] + (ptrdiff_t)kvh * d->v_stride[2];
            memset(w.cache_n, 0, w.cache_tiles * sizeof *w.cache_n);
            for (size_t first = 0; first < group_rows; first += PEAK_ATTENTION_BQ) {
                blk.rows =
                    group_rows - first < PEAK_ATTENTION_BQ ? group_rows - first : PEAK_ATTENTION_BQ;
                attention_block_rows(&blk, kvh, first);
                if (2 * blk.rows < PEAK_ATTENTION_VW) { /* the kv head's last few rows */
                    attention_rows_run(d, &w, o, q, k, v, b, kvh, 1, first, blk.rows);
                    continue;
                }
                attention_block_start(&blk, &w, q);
                const peak_key_range keys = attention_block_keys(&blk);
                const size_t tiles =
                    (keys.hi - keys.lo + PEAK_ATTENTION_BC - 1) / PEAK_ATTENTION_BC;
                size_t ahead = 0, since_fold = 0;
                bool folded = false;
                for (size_t t0 = keys.lo; t0 < keys.hi; t0 += PEAK_ATTENTION_BC) {
                    attention_prefetch_rows_ahead(&blk, q, o, kvh, first, group_rows, &ahead,
                                                  (2 * PEAK_ATTENTION_BQ + tiles - 1) / tiles);
                    if (since_fold++ == PEAK_ATTENTION_FOLD_TILES) {
                        if (!folded)
                            attention_fold_start(&w, d->v_head_dim);
                        attention_fold(&w, d->v_head_dim);
                        folded = true;
                        since_fold = 1;
                    }
                    attention_prefetch_cached_tile(&w, d, t0 / PEAK_ATTENTION_BC + 1);
                    attention_tile(&blk, &w, t0,
                                   keys.hi - t0 < PEAK_ATTENTION_BC ? keys.hi - t0
                                                                    : PEAK_ATTENTION_BC);
                }
                if (folded)
                    attention_unfold(&w, d->v_head_dim);
                attention_block_finish(&blk, &w, o);
            }
        }
}

#endif /* PEAK_ATTENTION_LOOP_H */
