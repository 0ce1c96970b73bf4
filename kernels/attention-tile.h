/*
 * attention-tile.h - one tile of keys against one block (part of
 * attention.h; include that, not this): the tile's K and V packed, into the
 * kv head's tile cache when the tile is whole (attention_tile_pack), the
 * staircase of a causal diagonal tile, and attention_tile, which runs the
 * tier's isa_scores, isa_logits (the cap and ALiBi), isa_online_softmax
 * and isa_pv on it.  Ends with the fold interval of the running sums
 * (PEAK_ATTENTION_FOLD_TILES, attention_fold_scale), which the row path
 * and the tile loop share.
 * Expects attention-mask.h's tile views and the micro-kernels of
 * attention-isa.h.
 */
#ifndef PEAK_ATTENTION_TILE_H
#define PEAK_ATTENTION_TILE_H
#ifndef PEAK_ATTENTION_H
#error "include attention.h, which includes this after its prerequisites"
#endif

/* Points kp[0 .. n-1] and vp[0 .. n-1] at contiguous float copies of the
   rows kraw and vraw point at (16-bit K and V widened on the way); returns false if one of the V rows holds an inf or NaN
   (which matters to a masked tile only: attention_pv_exact).
   In place, rows a power-of-two stride apart (any [B, L, H, D] layout)
   fall into a few L1 sets, are evicted between the column passes of
   isa_pv, and the broadcasts of isa_scores wait on L2 (20% slower
   measured).  A whole tile -- its keys visible to every row of the block,
   so read legitimately -- goes to the kv head's cache, where the next
   blocks find it; a masked tile (dead keys point at the zero row) is
   packed for this block alone. */
static inline bool attention_tile_pack(const attention_block *blk, const attention_ws *w, size_t t0,
                                       size_t n, bool whole)
{
    const peak_attention_desc *d = blk->d;
    const size_t ldk = attention_round16(d->head_dim), ldv = attention_round16(d->v_head_dim);
    const size_t t = t0 / PEAK_ATTENTION_BC;
    float *kdst = w->kpack, *vdst = w->vpack;
    bool finite;
    if (whole && t0 % PEAK_ATTENTION_BC == 0 && t < w->cache_tiles) {
        kdst = w->kcache + t * PEAK_ATTENTION_BC * ldk;
        vdst = w->vcache + t * PEAK_ATTENTION_BC * ldv;
        /* A later block may see more of the tile (causal): append. */
        const size_t have = w->cache_n[t];
        if (have < n) {
            isa_pack_rows(kdst + have * ldk, ldk, w->kraw + have, n - have, d->head_dim,
                          d->k_type);
            isa_pack_rows(vdst + have * ldv, ldv, w->vraw + have, n - have, d->v_head_dim,
                          d->v_type);
            w->cache_n[t] = (uint32_t)n;
        }
        finite = true; /* whole: P.V as it is */
    } else {
        isa_pack_rows(kdst, ldk, w->kraw, n, d->head_dim, d->k_type);
        finite = isa_pack_rows(vdst, ldv, w->vraw, n, d->v_head_dim, d->v_type);
    }
    for (size_t j = 0; j < n; j++) {
        w->kp[j] = kdst + j * ldk;
        w->vp[j] = vdst + j * ldv;
    }
    return finite;
}

/* A masked tile whose later row vectors see more of it than the earlier
   ones (the diagonal tile of a causal mask: a staircase), when no V is
   inf or NaN: row vector v computes keys [0, n_v) only, n_v covering its
   rows' key ranges (made non-decreasing), so the scores and P.V run once
   per step of keys for the vectors from that step on -- 10/16 of the
   tile's arithmetic on a causal diagonal.  Keys a vector skips are masked
   for all its rows (their weights would be 0).  Returns false, having
   done nothing, when every vector needs the whole tile. */
static inline bool attention_tile_staircase(const attention_block *blk, const attention_ws *w,
                                            size_t t0, size_t n, size_t r0, size_t r1,
                                            const attention_logit_pass *lp)
{
    const peak_attention_desc *d = blk->d;
    size_t nv[PEAK_ATTENTION_NRV] = {0}, prev = 0;
    for (size_t v = r0 / PEAK_ATTENTION_VW; v < r1 / PEAK_ATTENTION_VW; v++) {
        size_t need = prev;
        for (size_t r = v * PEAK_ATTENTION_VW; r < (v + 1) * PEAK_ATTENTION_VW; r++)
            if (blk->hi[r] > t0 + need)
                need = blk->hi[r] - t0 < n ? blk->hi[r] - t0 : n;
        nv[v] = prev = need;
    }
    if (nv[r0 / PEAK_ATTENTION_VW] == n)
        return false;
    const size_t ldv = attention_round16(d->v_head_dim);
    prev = 0;
    for (size_t v = r0 / PEAK_ATTENTION_VW; v < r1 / PEAK_ATTENTION_VW; prev = nv[v++])
        if (nv[v] > prev)
            isa_scores(w->st + prev * PEAK_ATTENTION_BQ, w->kp + prev, w->qt, d->head_dim,
                       nv[v] - prev, d->scale, w->tmax, v * PEAK_ATTENTION_VW, r1);
    if (lp) /* each vector's keys [0, n_v) */
        for (size_t v = r0 / PEAK_ATTENTION_VW; v < r1 / PEAK_ATTENTION_VW; v++)
            if (nv[v])
                isa_logits(w->st, w->tmax, lp, nv[v], v * PEAK_ATTENTION_VW,
                           (v + 1) * PEAK_ATTENTION_VW);
    for (size_t v = r0 / PEAK_ATTENTION_VW; v < r1 / PEAK_ATTENTION_VW; v++)
        if (nv[v])
            isa_online_softmax(w, w->bt, d->v_head_dim, nv[v], v * PEAK_ATTENTION_VW,
                               (v + 1) * PEAK_ATTENTION_VW);
    prev = 0;
    for (size_t v = r0 / PEAK_ATTENTION_VW; v < r1 / PEAK_ATTENTION_VW; prev = nv[v++])
        if (nv[v] > prev)
            isa_pv(w->oacc, w->vp[prev], ldv, w->st + prev * PEAK_ATTENTION_BQ, d->v_head_dim,
                   nv[v] - prev, v * PEAK_ATTENTION_VW, r1);
    return true;
}

static inline void attention_tile(const attention_block *blk, const attention_ws *w, size_t t0,
                                  size_t n)
{
    const peak_attention_desc *d = blk->d;
    size_t r0, r1;
    bool whole;
    if (!attention_tile_rows(blk, t0, t0 + n, &r0, &r1, &whole))
        return;
    if (whole) {
        for (size_t j = 0; j < n; j++) {
            w->kraw[j] = attention_kv_row(blk->k, t0 + j, d->k_stride[1], d->k_type);
            w->vraw[j] = attention_kv_row(blk->v, t0 + j, d->v_stride[1], d->v_type);
        }
    } else {
        attention_tile_mask(blk, w, t0, n, r0, r1);
    }
    const bool finite = attention_tile_pack(blk, w, t0, n, whole);
    /* The cap and ALiBi, in a pass over the tile's scores in L1 after the
       products; ALiBi's distances from (float)(aref - t0) per row. */
    float base[PEAK_ATTENTION_BQ];
    attention_logit_pass pass, *lp = NULL;
    if (blk->capped || blk->alibi) {
        pass.capped = blk->capped;
        pass.cap = blk->softcap;
        pass.alibi = blk->alibi;
        pass.symmetric = blk->symmetric;
        pass.slope = blk->slope;
        if (blk->alibi)
            for (size_t r = r0; r < r1; r++)
                base[r] = (float)(blk->aref[r] - (int64_t)t0);
        pass.base = base;
        lp = &pass;
    }
    /* S^T[j][r0..r1) = K[kp[j]] . Q^T[.][r0..r1) * scale, j < n, and their
       max. */
    for (size_t r = r0; r < r1; r++)
        w->tmax[r] = -INFINITY;
    if (!whole && finite && attention_tile_staircase(blk, w, t0, n, r0, r1, lp))
        return;
    isa_scores(w->st, w->kp, w->qt, d->head_dim, n, d->scale, w->tmax, r0, r1);
    if (lp)
        isa_logits(w->st, w->tmax, lp, n, r0, r1);
    /* Mask with B^T unless NULL, update m and l, rescale O^T by
       e^(m_old - m_new), and leave P^T in st. */
    isa_online_softmax(w, whole ? NULL : w->bt, d->v_head_dim, n, r0, r1);
    /* A whole tile's keys are seen by all its rows: P.V as it is, whatever
       V holds. */
    if (finite || whole)
        isa_pv(w->oacc, w->vp[0], attention_round16(d->v_head_dim), w->st, d->v_head_dim, n, r0,
               r1);
    else
        attention_pv_exact(w, d->v_head_dim, n, r0, r1);
}

/* Tiles whose sums the running accumulators take before they are folded
   into a second level.  One running sum over all keys rounds once per key
   (the P.V FMA chain) and once per tile (l): with Lk = 65536 the error
   reached 1.1e-5 * max|V| (measured, V = 1 +- 0.01); folding every 1024
   keys keeps each chain short. */
#define PEAK_ATTENTION_FOLD_TILES 16

/* Scale of the folded sums (relative to m2) at the running max m: 0 while
   nothing was folded (m2 = -inf; also keeps exp(-inf - -inf) out), NaN
   for a poisoned row, which stays so. */
static inline float attention_fold_scale(float m2, float m)
{
    return m2 == -INFINITY ? 0.0f : expf(m2 - m);
}

#endif /* PEAK_ATTENTION_TILE_H */
