/*
 * attention-loop.h - the block kernel, attention_block_run (part of
 * attention.h; include that, not this): one part of a call (a block of up
 * to PEAK_ATTENTION_BQ query rows of one kv head, against the keys the
 * scheduler gave it) streams over the tiles of its keys, folding the
 * running sums every PEAK_ATTENTION_FOLD_TILES tiles, prefetching the next
 * part's rows and the cached tiles, and finishes with the division into O
 * and lse (attention_block_finish, which adds ALiBi's shift and the sink;
 * optionally through the including file's PEAK_ATTENTION_T8X8_OUT).
 * Which parts there are, in which order, and which go to the row path
 * instead (attention-decode.h) is the scheduler's
 * (schedule/schedule-attention.c).  Expects every other piece of
 * attention.h.
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
    float div[PEAK_ATTENTION_BQ], lse[PEAK_ATTENTION_BQ];
    uint32_t keep[PEAK_ATTENTION_BQ]; /* all ones, or 0 where l = 0 */
    const size_t vrows = blk->vrows;
    for (size_t r = 0; r < vrows; r++) {
        div[r] = w->l[r] == 0.0f ? 1.0f : w->l[r];
        keep[r] = w->l[r] == 0.0f ? 0u : ~0u;
    }
    /* ALiBi's shift or a sink: the row's lse and divisor. */
    if (blk->shifted)
        for (size_t r = 0; r < blk->rows; r++) {
            float dr;
            lse[r] = attention_logits_finish(w->m[r], w->l[r], blk->shift[r], blk->has_sink,
                                             blk->sink[r], &dr);
            div[r] = w->l[r] == 0.0f ? 1.0f : dr;
        }
    /* Eight rows at a time (vrows is a multiple of 8), the +0 of an l = 0
       row by a mask of the bits: GCC vectorises that, where it left a
       select after the division scalar (trapping math). */
    for (size_t c = 0; c < d->v_head_dim; c++)
        for (size_t r8 = 0; r8 < vrows; r8 += 8) {
            float *col = w->oacc + c * PEAK_ATTENTION_BQ + r8;
            for (size_t r = 0; r < 8; r++) {
                const float x = col[r] / div[r8 + r];
                uint32_t u;
                memcpy(&u, &x, sizeof u);
                u &= keep[r8 + r];
                memcpy(&col[r], &u, sizeof u);
            }
        }
    /* Eight rows at a time, through the including file's 8 x 8 transpose
       (PEAK_ATTENTION_T8X8_OUT) when it has one; a group of fewer rows (a
       block of 4: decode with 4 query heads per kv head, a split-KV part
       every 128 keys) sends the missing rows to a sink. */
    for (size_t r = 0; r < PEAK_ATTENTION_ROWS_AHEAD && r < blk->rows; r++)
        peak_prefetch(attention_o_row(o, d, blk->b, blk->head[r], blk->pos[r]), d->v_head_dim,
                      PEAK_PF_WRITE);
    for (size_t r8 = 0; r8 < blk->rows; r8 += 8) {
        const size_t nr = blk->rows - r8 < 8 ? blk->rows - r8 : 8;
        float *rows[8] = {NULL};
        for (size_t k = 0; k < nr; k++) {
            const size_t r = r8 + k, ra = r + PEAK_ATTENTION_ROWS_AHEAD;
            if (ra < blk->rows)
                peak_prefetch(attention_o_row(o, d, blk->b, blk->head[ra], blk->pos[ra]),
                              d->v_head_dim, PEAK_PF_WRITE);
            rows[k] = attention_o_row(o, d, blk->b, blk->head[r], blk->pos[r]);
        }
        size_t c = 0;
#ifdef PEAK_ATTENTION_T8X8_OUT
        if (nr == 8) {
            for (; c + 8 <= d->v_head_dim; c += 8)
                PEAK_ATTENTION_T8X8_OUT(rows, c, w->oacc + c * PEAK_ATTENTION_BQ + r8,
                                        PEAK_ATTENTION_BQ);
        } else {
            float sink[8][8], *dst[8];
            for (; c + 8 <= d->v_head_dim; c += 8) {
                /* sink's rows take the transpose's stores past nr: their
                   addresses are used, never their contents. */
                for (size_t k = 0; k < 8; k++)
                    // cppcheck-suppress legacyUninitvar
                    dst[k] = k < nr ? rows[k] + c : sink[k];
                PEAK_ATTENTION_T8X8_OUT(dst, 0, w->oacc + c * PEAK_ATTENTION_BQ + r8,
                                        PEAK_ATTENTION_BQ);
            }
        }
#endif
        for (; c < d->v_head_dim; c++)
            for (size_t k = 0; k < nr; k++)
                rows[k][c] = w->oacc[c * PEAK_ATTENTION_BQ + r8 + k];
        if (d->lse)
            for (size_t r = r8; r < r8 + nr; r++)
                *attention_lse_at(d, blk->b, blk->head[r], blk->pos[r]) =
                    blk->shifted ? lse[r] : attention_lse(w->m[r], w->l[r]);
    }
}

/* Requests rows [*done, *done + n) of 2 BQ into L2: first the block's O
   rows (finish writes them), then the Q rows of the part that follows in
   the call's order (the scheduler's hint; on one worker it is the next
   part run, on several mostly another worker's, and then the request only
   costs its issue).  Spread over the block's tiles, so that start and
   finish find their strided rows in L2 instead of waiting on them. */
static inline void attention_prefetch_rows_ahead(const attention_block *blk, const float *q,
                                                 float *o, const peak_attention_part *part,
                                                 size_t *done, size_t n)
{
    const peak_attention_desc *d = blk->d;
    const size_t group = d->heads / d->kv_heads, group_rows = group * d->q_len;
    const size_t end = *done + n < 2 * PEAK_ATTENTION_BQ ? *done + n : 2 * PEAK_ATTENTION_BQ;
    for (size_t k = *done; k < end && k < blk->rows; k++)
        peak_prefetch(attention_o_row(o, d, blk->b, blk->head[k], blk->pos[k]), d->v_head_dim,
                      PEAK_PF_WRITE);
    if (part->next_b != SIZE_MAX)
        for (size_t k = *done > PEAK_ATTENTION_BQ ? *done : PEAK_ATTENTION_BQ;
             k < end && part->next_first + k - PEAK_ATTENTION_BQ < group_rows; k++) {
            const size_t R = part->next_first + k - PEAK_ATTENTION_BQ;
            peak_prefetch(attention_q_row(q, d, part->next_b, part->next_kvh * group + R % group,
                                          R / group),
                          d->head_dim, PEAK_PF_L2);
        }
    *done = end;
}

/* Empty folded sums, before a block's first fold (rows below vrows). */
static inline void attention_fold_start(const attention_ws *w, size_t dv, size_t vrows)
{
    for (size_t r = 0; r < vrows; r++) {
        w->m2[r] = -INFINITY;
        w->l2[r] = 0.0f;
    }
    for (size_t c = 0; c < dv; c++)
        memset(w->oacc2 + c * PEAK_ATTENTION_BQ, 0, vrows * sizeof(float));
}

/* O2 = O2 * e^(m2 - m) + O^T and l2 likewise, then O^T = 0, l = 0, m2 = m:
   the block's running sums restart from zero at the same max. */
static inline void attention_fold(const attention_ws *w, size_t dv, size_t vrows)
{
    float s[PEAK_ATTENTION_BQ];
    for (size_t r = 0; r < vrows; r++) {
        s[r] = attention_fold_scale(w->m2[r], w->m[r]);
        w->l2[r] = w->l2[r] * s[r] + w->l[r];
        w->l[r] = 0.0f;
        w->m2[r] = w->m[r];
    }
    for (size_t c = 0; c < dv; c++)
        for (size_t r = 0; r < vrows; r++) {
            w->oacc2[c * PEAK_ATTENTION_BQ + r] =
                w->oacc2[c * PEAK_ATTENTION_BQ + r] * s[r] + w->oacc[c * PEAK_ATTENTION_BQ + r];
            w->oacc[c * PEAK_ATTENTION_BQ + r] = 0.0f;
        }
}

/* The last fold, into O^T and l, for attention_block_finish (after at least
   one attention_fold). */
static inline void attention_unfold(const attention_ws *w, size_t dv, size_t vrows)
{
    float s[PEAK_ATTENTION_BQ];
    for (size_t r = 0; r < vrows; r++) {
        s[r] = attention_fold_scale(w->m2[r], w->m[r]);
        w->l[r] += w->l2[r] * s[r];
    }
    for (size_t c = 0; c < dv; c++)
        for (size_t r = 0; r < vrows; r++)
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

/* Requests into L2 K and V rows [t0, t0 + n) of the kv head at k, v. */
static inline void attention_prefetch_keys(const peak_attention_desc *d, const void *k,
                                           const void *v, size_t t0, size_t n)
{
    const size_t kb = d->head_dim * peak_dtype_bytes(d->k_type),
                 vb = d->v_head_dim * peak_dtype_bytes(d->v_type);
    for (size_t j = t0; j < t0 + n; j++) {
        peak_prefetch_bytes(attention_kv_row(k, j, d->k_stride[1], d->k_type), kb, PEAK_PF_L2);
        peak_prefetch_bytes(attention_kv_row(v, j, d->v_stride[1], d->v_type), vb, PEAK_PF_L2);
    }
}

/* Requests into L2 the K and V rows of the tile of keys [t0, t0 + BC)
   inside [t0, hi) that the block will pack from their source (not from
   the tile cache), one tile ahead.  One kv head's rows in [B, L, H, D]
   are H * D floats apart, a stride the L2 streamer picks up only after a
   few misses, which a split-KV part of 2 tiles pays at every start.  With
   attention_prefetch_next_part, 5% faster on a decode step of 32 heads
   over 8 kv heads and 2048 keys in parts of 128 keys (one core, Zen 3).
   Not with element masks: their dead keys are never touched. */
static inline void attention_prefetch_tile_rows(const attention_block *blk, const attention_ws *w,
                                                size_t t0, size_t hi)
{
    const size_t n = hi - t0 < PEAK_ATTENTION_BC ? hi - t0 : PEAK_ATTENTION_BC;
    const size_t t = t0 / PEAK_ATTENTION_BC;
    if (t0 >= hi || blk->elem_masks ||
        (t0 % PEAK_ATTENTION_BC == 0 && t < w->cache_tiles && w->cache_n[t] >= n))
        return;
    attention_prefetch_keys(blk->d, blk->k, blk->v, t0, n);
}

/* During a part's last tile, the first keys of the part that follows it
   in the call's order, when that part is of another kv head or starts
   elsewhere (a split-KV chunk): on one worker it runs next and would
   start cold (see above).  On a pool the next part is mostly another
   worker's, which then finds the rows in the shared L3. */
static inline void attention_prefetch_next_part(const attention_block *blk, const void *k,
                                                const void *v, const peak_attention_part *part)
{
    const peak_attention_desc *d = blk->d;
    if (part->next_b == SIZE_MAX || blk->elem_masks ||
        (part->next_b == part->b && part->next_kvh == part->kvh &&
         part->next_key_lo == part->key_lo))
        return;
    const size_t lo = part->next_key_lo;
    const size_t n = d->kv_len - lo < PEAK_ATTENTION_BC ? d->kv_len - lo : PEAK_ATTENTION_BC;
    attention_prefetch_keys(
        d, attention_kv_head(k, d->k_stride, d->k_type, part->next_b, part->next_kvh),
        attention_kv_head(v, d->v_stride, d->v_type, part->next_b, part->next_kvh), lo, n);
}

/* Narrows every row's key range to the part's keys [lo, hi) (split-KV);
   [0, Lk) changes nothing. */
static inline void attention_block_clip(attention_block *blk, size_t lo, size_t hi)
{
    for (size_t r = 0; r < blk->rows; r++) {
        blk->lo[r] = blk->lo[r] > lo ? blk->lo[r] : lo;
        blk->hi[r] = blk->hi[r] < hi ? blk->hi[r] : hi;
        if (blk->lo[r] > blk->hi[r])
            blk->lo[r] = blk->hi[r];
    }
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

/* The block kernel: one part of the tile path, its rows streaming over the
   tiles of the keys they see (tiles from the first such key, so that a
   part over all keys computes what the unsplit call did). */
static inline void attention_block_run(float *o, const float *q, const void *k, const void *v,
                                       const peak_attention_desc *d,
                                       const peak_attention_part *part, void *slot)
{
    assert(o && q && k && v && d && part && slot);
    assert(d->kv_heads > 0 && d->heads % d->kv_heads == 0 && d->v_head_dim > 0);
    assert(part->nkvh == 1 && part->rows > 0 && part->rows <= PEAK_ATTENTION_BQ &&
           2 * part->rows >= PEAK_ATTENTION_VW);
    const attention_ws w = attention_ws_carve(slot, d);
    attention_block blk;
    blk.d = d;
    blk.elem_masks = d->mask.keep || d->mask.bias;
    blk.b = part->b;
    blk.k = attention_kv_head(k, d->k_stride, d->k_type, part->b, part->kvh);
    blk.v = attention_kv_head(v, d->v_stride, d->v_type, part->b, part->kvh);
    blk.rows = part->rows;
    attention_block_rows(&blk, part->kvh, part->first);
    attention_block_logits(&blk, part->key_lo > 0 || part->key_hi < d->kv_len);
    attention_block_clip(&blk, part->key_lo, part->key_hi);
    attention_cache_claim(&w, part->b, part->kvh);
    const peak_key_range keys = attention_block_keys(&blk);
    attention_prefetch_tile_rows(&blk, &w, keys.lo, keys.hi);
    attention_block_start(&blk, &w, q);
    const size_t tiles = (keys.hi - keys.lo + PEAK_ATTENTION_BC - 1) / PEAK_ATTENTION_BC;
    size_t ahead = 0, since_fold = 0;
    bool folded = false;
    for (size_t t0 = keys.lo; t0 < keys.hi; t0 += PEAK_ATTENTION_BC) {
        attention_prefetch_rows_ahead(&blk, q, o, part, &ahead,
                                      (2 * PEAK_ATTENTION_BQ + tiles - 1) / tiles);
        if (since_fold++ == PEAK_ATTENTION_FOLD_TILES) {
            if (!folded)
                attention_fold_start(&w, d->v_head_dim, blk.vrows);
            attention_fold(&w, d->v_head_dim, blk.vrows);
            folded = true;
            since_fold = 1;
        }
        attention_prefetch_cached_tile(&w, d, t0 / PEAK_ATTENTION_BC + 1);
        if (t0 + PEAK_ATTENTION_BC < keys.hi)
            attention_prefetch_tile_rows(&blk, &w, t0 + PEAK_ATTENTION_BC, keys.hi);
        else
            attention_prefetch_next_part(&blk, k, v, part);
        attention_tile(&blk, &w, t0,
                       keys.hi - t0 < PEAK_ATTENTION_BC ? keys.hi - t0 : PEAK_ATTENTION_BC);
    }
    if (folded)
        attention_unfold(&w, d->v_head_dim, blk.vrows);
    attention_block_finish(&blk, &w, o);
}

#endif /* PEAK_ATTENTION_LOOP_H */
