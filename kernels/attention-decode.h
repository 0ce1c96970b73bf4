/*
 * attention-decode.h - the row path, the rows kernel (part of attention.h;
 * include that, not this): parts of fewer than PEAK_ATTENTION_VW / 2 query
 * rows per kv head (decode, a small MQA group, a kv head's last few rows)
 * are vectorised along head_dim instead of rows, several kv heads' rows
 * walking the keys in step (attention_rows_run), with the logit options
 * (the cap, ALiBi in the bias array, the sink at the finish).  Also
 * attention_lse, the log-sum-exp of a finished row, which the tile path's
 * finish uses too.  Expects the fold interval (attention-tile.h), the row
 * addresses (attention-block.h), attention_ws and the row path's
 * micro-kernels isa_row_dots, isa_row_softcap, isa_row_exp, isa_row_pv.
 */
#ifndef PEAK_ATTENTION_DECODE_H
#define PEAK_ATTENTION_DECODE_H
#ifndef PEAK_ATTENTION_H
#error "include attention.h, which includes this after its prerequisites"
#endif

/* Scores s[j] = q . K[kp[j]] * scale + b[j] where b[j] > -inf, else -inf,
   for n <= PEAK_VF_LANES keys (isa_row_dots: kp holds a whole vector of
   rows, a masked key's and those past n the workspace's zero row, so K is
   read only where a key is seen); returns them as a vector, -inf in the
   lanes past n and where a score is NaN, for the tile's running max. */
static inline peak_vf attention_row_scores(float *s, const float *q, const float *const *kp,
                                           const float *b, float scale, size_t n, size_t dh)
{
    const peak_vf vninf = peak_vf_set1(-INFINITY);
    const peak_vf vd = peak_vf_mul(isa_row_dots(q, kp, dh), peak_vf_set1(scale));
    peak_vf vs = peak_vf_add_except(vd, peak_vf_load_first(b, n), vninf);
    if (n < PEAK_VF_LANES) {
        vs = peak_vf_first_or(vs, n, -INFINITY);
        peak_vf_store_first(s, vs, n);
    } else {
        peak_vf_storeu(s, vs);
    }
    return peak_vf_max(vs, vninf); /* MAXPS: the second operand where vs is NaN */
}

/* The cap of a tile's scaled scores (a masked key's -inf becomes -cap,
   then -inf again), then b[j] added; returns their max (NaN ignored). */
static inline float attention_row_cap(float *s, const float *b, float cap, size_t n)
{
    isa_row_softcap(s, cap, n);
    float m = -INFINITY;
    for (size_t j = 0; j < n; j++) {
        s[j] = b[j] == -INFINITY ? -INFINITY : s[j] + b[j];
        m = s[j] > m ? s[j] : m;
    }
    return m;
}

/* One query row of the row path and its running softmax. */
typedef struct attention_row_state {
    const float *q;          /* the query row */
    const float *k, *v;      /* key 0 of its kv head */
    const uint8_t *keep;     /* element masks of the row, or NULL */
    const float *bias;
    size_t lo, hi, head, pos; /* keys [lo, hi) by the key-range masks */
    int64_t aref;            /* ALiBi: distances from key aref, the */
    double shift;            /* shift added at the finish, as the tile
                                path's (attention_alibi_ref) */
    float *acc;              /* round16(v_head_dim) floats */
    float *acc2;             /* the folded sums (m2, l2), as attention_fold's */
    size_t tiles;            /* since the last fold */
    float slope;             /* ALiBi (0 without) */
    float sink;              /* with d->logits.sinks */
    float m, l, m2, l2;
} attention_row_state;

/* attention_fold for one row of the row path. */
static inline void attention_row_fold(attention_row_state *r, size_t dv)
{
    const float sc = attention_fold_scale(r->m2, r->m);
    for (size_t c = 0; c < dv; c++) {
        r->acc2[c] = r->acc2[c] * sc + r->acc[c];
        r->acc[c] = 0.0f;
    }
    r->l2 = r->l2 * sc + r->l;
    r->l = 0.0f;
    r->m2 = r->m;
    r->tiles = 0;
}

/* Keys [t0, t1) (inside [lo, hi), at most BC) of one row, vectorised along
   head_dim instead of rows: a decode step (or a small MQA group) would
   fill 1 lane of PEAK_ATTENTION_VW in the tiled path. */
static inline void attention_row_tile(const peak_attention_desc *d, const attention_ws *w,
                                      attention_row_state *r, size_t t0, size_t t1)
{
    float *s = w->st, *bias = w->bt;
    const size_t n = t1 - t0;
    for (size_t j = 0; j < n; j++) {
        const size_t key = t0 + j;
        const bool vis = peak_mask_visible(r->keep, r->bias, key);
        bias[j] = !vis ? -INFINITY : r->bias ? r->bias[key] : 0.0f;
        w->kp[j] = vis ? r->k + (ptrdiff_t)key * d->k_stride[1] : w->zero;
        w->vp[j] = vis ? r->v + (ptrdiff_t)key * d->v_stride[1] : NULL;
    }
    for (size_t j = n; j % PEAK_VF_LANES; j++)
        w->kp[j] = w->zero;
    if (d->logits.alibi != PEAK_ALIBI_NONE) { /* as isa_logits' */
        const float base = (float)(r->aref - (int64_t)t0);
        if (d->logits.alibi == PEAK_ALIBI_SYMMETRIC)
            for (size_t j = 0; j < n; j++)
                bias[j] -= r->slope * fabsf(base - (float)j);
        else
            for (size_t j = 0; j < n; j++)
                bias[j] -= r->slope * (base - (float)j);
    }
    /* With a cap, the scores are the scaled dots first (b: the mask
       alone), capped, then take the bias and ALiBi. */
    const bool capped = !peak_f32_is_zero(d->logits.softcap);
    const float *b = bias;
    if (capped) {
        float *mask = w->bt + PEAK_ATTENTION_BC;
        for (size_t j = 0; j < n; j++)
            mask[j] = bias[j] == -INFINITY ? -INFINITY : 0.0f;
        b = mask;
    }
    /* No software prefetch of the next tile: with a vector of keys' dots
       in flight the core keeps enough misses outstanding, and on Sapphire
       Rapids requesting each visible row's lines cost a decode step over
       8 MiB 1.2x (K/V in L3) and gained nothing out of cache. */
    peak_vf vmax = peak_vf_set1(-INFINITY); /* one reduction a tile */
    for (size_t j0 = 0; j0 < n; j0 += PEAK_VF_LANES) {
        const size_t nc = n - j0 < PEAK_VF_LANES ? n - j0 : PEAK_VF_LANES;
        vmax = peak_vf_max(
            attention_row_scores(s + j0, r->q, w->kp + j0, b + j0, d->scale, nc, d->head_dim),
            vmax);
    }
    float mt = peak_vf_reduce_max(vmax);
    if (capped)
        mt = attention_row_cap(s, bias, d->logits.softcap, n);
    const float mn = mt > r->m ? mt : r->m;
    const float ms = mn == -INFINITY ? 0.0f : mn; /* as in the tiled path */
    const float alpha = isnan(r->m) ? NAN : r->m == -INFINITY ? 0.0f : expf(r->m - ms);
    const float sum = isa_row_exp(s, ms, n);
    r->l = r->l * alpha + sum;
    r->m = mn;
    isa_row_pv(r->acc, alpha, s, w->vp, n, d->v_head_dim);
    if (++r->tiles == PEAK_ATTENTION_FOLD_TILES)
        attention_row_fold(r, d->v_head_dim);
}

/* The natural log-sum-exp of a finished row (-inf: it saw nothing). */
static inline float attention_lse(float m, float l)
{
    return isnan(l) ? NAN : l == 0.0f ? -INFINITY : (float)((double)m + log((double)l));
}

/* Row states the row path keeps at once: kv heads are taken together, up
   to this many rows, and walk their keys tile by tile in step.  In an
   interleaved [B, L, H, D] cache the heads' rows of one key are adjacent,
   so a decode step reads K and V as one sequential stream instead of one
   pass per head over every row. */
#define PEAK_ATTENTION_ROW_STATES 32

/* Starts row state *r: row R of kv head kvh, its key range narrowed to
   the part's keys [klo, khi), its sums empty. */
static inline void attention_row_begin(attention_row_state *r, const peak_attention_desc *d,
                                       const attention_ws *w, const float *q, const float *k,
                                       const float *v, size_t b, size_t kvh, size_t R, size_t klo,
                                       size_t khi, size_t n)
{
    const size_t group = d->heads / d->kv_heads, ldacc = attention_round16(d->v_head_dim);
    const peak_key_range kr = peak_mask_keys(&d->mask, b, R / group, d->q_len, d->kv_len);
    r->head = kvh * group + R % group;
    r->pos = R / group;
    r->q = attention_q_row(q, d, b, r->head, r->pos);
    r->k = k + (ptrdiff_t)b * d->k_stride[0] + (ptrdiff_t)kvh * d->k_stride[2];
    r->v = v + (ptrdiff_t)b * d->v_stride[0] + (ptrdiff_t)kvh * d->v_stride[2];
    r->keep = peak_mask_keep_row(&d->mask, b, r->head, r->pos);
    r->bias = peak_mask_bias_row(&d->mask, b, r->head, r->pos);
    r->lo = kr.lo > klo ? kr.lo : klo;
    r->hi = kr.hi < khi ? kr.hi : khi;
    if (r->lo > r->hi)
        r->lo = r->hi;
    r->slope = r->sink = 0.0f;
    r->aref = 0;
    r->shift = 0.0;
    if (d->logits.alibi != PEAK_ALIBI_NONE || d->logits.sinks) {
        const peak_logit_row lr = peak_logit_row_of(&d->logits, &d->mask, d->heads, r->head,
                                                    r->pos, d->q_len, d->kv_len);
        r->sink = lr.sink;
        r->slope = lr.slope;
        /* The frame of the row's whole range, as attention_block_logits. */
        if (d->logits.alibi != PEAK_ALIBI_NONE)
            attention_alibi_ref(&lr, kr.lo, kr.hi, &r->aref, &r->shift);
    }
    r->m = -INFINITY;
    r->l = 0.0f;
    r->acc = w->vpack + n * ldacc;
    r->acc2 = w->vpack + (PEAK_ATTENTION_ROW_STATES + n) * ldacc;
    memset(r->acc, 0, ldacc * sizeof(float));
    memset(r->acc2, 0, ldacc * sizeof(float));
    r->m2 = -INFINITY;
    r->l2 = 0.0f;
    r->tiles = 0;
}

/* The rows kernel: rows first .. first + rows - 1 of each of kv heads kvh
   .. kvh + nkvh - 1 (nkvh * rows <= PEAK_ATTENTION_ROW_STATES) by the row
   path, against the part's keys, into O and lse.  Tiles are aligned to
   multiples of PEAK_ATTENTION_BC whatever the rows' ranges, so a row's
   result does not depend on the rows it walks with. */
static inline void attention_rows_run(float *o, const float *q, const float *k, const float *v,
                                      const peak_attention_desc *d,
                                      const peak_attention_part *part, void *slot)
{
    assert(o && q && k && v && d && part && slot);
    assert(part->nkvh * part->rows <= PEAK_ATTENTION_ROW_STATES);
    const attention_ws ws = attention_ws_carve(slot, d), *w = &ws;
    const size_t b = part->b;
    const bool chunk = part->key_lo > 0 || part->key_hi < d->kv_len;
    attention_row_state st[PEAK_ATTENTION_ROW_STATES];
    size_t n = 0, lo = SIZE_MAX, hi = 0;
    for (size_t kvh = part->kvh; kvh < part->kvh + part->nkvh; kvh++)
        for (size_t R = part->first; R < part->first + part->rows; R++, n++) {
            attention_row_state *r = &st[n];
            attention_row_begin(r, d, w, q, k, v, b, kvh, R, part->key_lo, part->key_hi, n);
            if (r->lo < r->hi) {
                lo = r->lo < lo ? r->lo : lo;
                hi = r->hi > hi ? r->hi : hi;
            }
        }
    for (size_t t = lo < hi ? lo / PEAK_ATTENTION_BC * PEAK_ATTENTION_BC : hi; t < hi;
         t += PEAK_ATTENTION_BC)
        for (size_t e = 0; e < n; e++) {
            const size_t t0 = st[e].lo > t ? st[e].lo : t;
            const size_t t1 = st[e].hi < t + PEAK_ATTENTION_BC ? st[e].hi : t + PEAK_ATTENTION_BC;
            if (t0 < t1)
                attention_row_tile(d, w, &st[e], t0, t1);
        }
    for (size_t e = 0; e < n; e++) {
        attention_row_state *r = &st[e];
        if (r->m2 != -INFINITY) { /* folded (a NaN m2 too): as attention_unfold */
            const float sc = attention_fold_scale(r->m2, r->m);
            for (size_t c = 0; c < d->v_head_dim; c++)
                r->acc[c] += r->acc2[c] * sc;
            r->l += r->l2 * sc;
        }
        float *orow = attention_o_row(o, d, b, r->head, r->pos);
        /* As attention_block_finish: a division, +0 for a row that saw
           nothing; ALiBi's shift and the sink by attention_logits_finish. */
        float div = r->l, lse;
        if (!chunk && (d->logits.alibi != PEAK_ALIBI_NONE || d->logits.sinks))
            lse = attention_logits_finish(r->m, r->l, r->shift, d->logits.sinks != NULL, r->sink,
                                          &div);
        else /* a chunk leaves the shift and the sink to the merge */
            lse = attention_lse(r->m, r->l);
        for (size_t c = 0; c < d->v_head_dim; c++)
            orow[c] = r->l == 0.0f ? 0.0f : r->acc[c] / div;
        if (d->lse)
            *attention_lse_at(d, b, r->head, r->pos) = lse;
    }
}

#endif /* PEAK_ATTENTION_DECODE_H */
