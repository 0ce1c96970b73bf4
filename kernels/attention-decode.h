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

/* Scores s[j] = dots[j] * scale + b[j] where b[j] > -inf, else -inf, for
   n <= PEAK_VF_LANES keys (dots: isa_row_dots' lanes); returns them as a
   vector, -inf in the lanes past n and where a score is NaN, for the
   tile's running max. */
static inline peak_vf attention_row_scores(float *s, peak_vf dots, const float *b, float scale,
                                           size_t n)
{
    const peak_vf vninf = peak_vf_set1(-INFINITY);
    const peak_vf vd = peak_vf_mul(dots, peak_vf_set1(scale));
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
    const void *k, *v;       /* key 0 of its kv head (d->k_type, d->v_type) */
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

/* A tile's keys for row r: bias[j] (the mask's -inf, the bias, ALiBi's
   -slope * distance), and, with rows, the key rows in w->kraw (a masked key's: the
   zero row, so K is read only where a key is seen; padded with it to
   whole vectors) and w->vraw (a masked key's: NULL, never read). */
static inline void attention_row_keys(const peak_attention_desc *d, const attention_ws *w,
                                      const attention_row_state *r, float *bias, size_t t0,
                                      size_t n, bool rows)
{
    for (size_t j = 0; j < n; j++) {
        const size_t key = t0 + j;
        const bool vis = peak_mask_visible(r->keep, r->bias, key);
        bias[j] = !vis ? -INFINITY : r->bias ? r->bias[key] : 0.0f;
        if (rows) {
            w->kraw[j] = vis ? attention_kv_row(r->k, key, d->k_stride[1], d->k_type) : w->zero;
            w->vraw[j] = vis ? attention_kv_row(r->v, key, d->v_stride[1], d->v_type) : NULL;
        }
    }
    for (size_t j = n; rows && j % PEAK_VF_LANES; j++)
        w->kraw[j] = w->zero;
    if (d->logits.alibi != PEAK_ALIBI_NONE) { /* as isa_logits' */
        const float base = (float)(r->aref - (int64_t)t0);
        if (d->logits.alibi == PEAK_ALIBI_SYMMETRIC)
            for (size_t j = 0; j < n; j++)
                bias[j] -= r->slope * fabsf(base - (float)j);
        else
            for (size_t j = 0; j < n; j++)
                bias[j] -= r->slope * (base - (float)j);
    }
}

/* What the scores take in attention_row_scores: the bias, or, with a cap,
   the mask alone (the scaled dots are capped first, then take the bias
   and ALiBi: attention_row_cap), written to mask. */
static inline const float *attention_row_score_bias(const peak_attention_desc *d,
                                                    const float *bias, float *mask, size_t n)
{
    if (peak_f32_is_zero(d->logits.softcap))
        return bias;
    for (size_t j = 0; j < n; j++)
        mask[j] = bias[j] == -INFINITY ? -INFINITY : 0.0f;
    return mask;
}

/* After the scores s[0 .. n) of row r and their max mt: the cap, the
   running max and sum; leaves P in s and returns alpha, the accumulator's
   rescale. */
static inline float attention_row_softmax(const peak_attention_desc *d, attention_row_state *r,
                                          float *s, const float *bias, float mt, size_t n)
{
    if (!peak_f32_is_zero(d->logits.softcap))
        mt = attention_row_cap(s, bias, d->logits.softcap, n);
    const float mn = mt > r->m ? mt : r->m;
    const float ms = mn == -INFINITY ? 0.0f : mn; /* as in the tiled path */
    const float alpha = isnan(r->m) ? NAN : r->m == -INFINITY ? 0.0f : expf(r->m - ms);
    const float sum = isa_row_exp(s, ms, n);
    r->l = r->l * alpha + sum;
    r->m = mn;
    return alpha;
}

/* Keys [t0, t1) (inside [lo, hi), at most BC) of one row, vectorised along
   head_dim instead of rows: a decode step (or a small MQA group) would
   fill 1 lane of PEAK_ATTENTION_VW in the tiled path. */
static inline void attention_row_tile(const peak_attention_desc *d, const attention_ws *w,
                                      attention_row_state *r, size_t t0, size_t t1)
{
    float *s = w->st, *bias = w->bt;
    const size_t n = t1 - t0;
    attention_row_keys(d, w, r, bias, t0, n, true);
    const float *b = attention_row_score_bias(d, bias, w->bt + PEAK_ATTENTION_BC, n);
    /* No software prefetch of the next tile: with a vector of keys' dots
       in flight the core keeps enough misses outstanding, and on Sapphire
       Rapids requesting each visible row's lines cost a decode step over
       8 MiB 1.2x (K/V in L3) and gained nothing out of cache. */
    peak_vf vmax = peak_vf_set1(-INFINITY); /* one reduction a tile */
    for (size_t j0 = 0; j0 < n; j0 += PEAK_VF_LANES) {
        const size_t nc = n - j0 < PEAK_VF_LANES ? n - j0 : PEAK_VF_LANES;
        const peak_vf dots = isa_row_dots(r->q, w->kraw + j0, d->head_dim, d->k_type);
        vmax = peak_vf_max(attention_row_scores(s + j0, dots, b + j0, d->scale, nc), vmax);
    }
    const float alpha = attention_row_softmax(d, r, s, bias, peak_vf_reduce_max(vmax), n);
    isa_row_pv(r->acc, alpha, s, w->vraw, n, d->v_head_dim, d->v_type);
    if (++r->tiles == PEAK_ATTENTION_FOLD_TILES)
        attention_row_fold(r, d->v_head_dim);
}

/* Row states the row path keeps at once: kv heads are taken together, up
   to this many rows, and walk their keys tile by tile in step.  In an
   interleaved [B, L, H, D] cache the heads' rows of one key are adjacent,
   so a decode step reads K and V as one sequential stream instead of one
   pass per head over every row. */
#define PEAK_ATTENTION_ROW_STATES 32

/* K or V rows key .. key + nc - 1 of the kv head at x (nc <= VW), the
   rest of the vector's pointers the zero row. */
static inline void attention_key_rows(const void **rows, const attention_ws *w, const void *x,
                                      ptrdiff_t stride, peak_dtype t, size_t key, size_t nc)
{
    for (size_t j = 0; j < PEAK_VF_LANES; j++)
        rows[j] = j < nc ? attention_kv_row(x, key + j, stride, t) : w->zero;
}

/* Keys [t0, t1) of all n_rows rows of a part, nr rows a kv head, when
   every row sees exactly those keys (no element masks, one range: the
   query heads of GQA groups at one position, a decode step).  Each K and
   V row is loaded (and widened) once for its kv head's rows
   (isa_rows_dots, isa_rows_pv) instead of once a row, and the kv heads
   take each vector of keys in turn: in a [B, L, H, D] cache their rows of
   a key are adjacent, so the part reads K and V as one forward stream
   (one kv head a tile at a time, each reading a row every H * D elements,
   left a 16-bit GQA decode step waiting on memory).  Every row's
   operations and their order are attention_row_tile's, so its bits are
   too (P.V a vector of keys at a time, the accumulator stored in between
   and rescaled by alpha once). */
static inline void attention_rows_tile_together(const peak_attention_desc *d,
                                                const attention_ws *w, attention_row_state *st,
                                                size_t n_rows, size_t nr, size_t t0, size_t t1)
{
    /* whole blocks of 4 rows, which isa_rows_dots and isa_rows_pv take */
    enum { SLOTS = (PEAK_ATTENTION_GROUP_ROWS + 3) / 4 * 4 };
    const size_t n = t1 - t0;
    peak_vf vmax[PEAK_ATTENTION_ROW_STATES];
    const float *b[PEAK_ATTENTION_ROW_STATES];
    for (size_t e = 0; e < n_rows; e++) {
        float *bias = w->bt + 2 * e * PEAK_ATTENTION_BC;
        attention_row_keys(d, w, &st[e], bias, t0, n, false);
        b[e] = attention_row_score_bias(d, bias, bias + PEAK_ATTENTION_BC, n);
        vmax[e] = peak_vf_set1(-INFINITY);
    }
    const void *kv[PEAK_VF_LANES];
    for (size_t j0 = 0; j0 < n; j0 += PEAK_VF_LANES) {
        const size_t nc = n - j0 < PEAK_VF_LANES ? n - j0 : PEAK_VF_LANES;
        for (size_t g = 0; g < n_rows; g += nr) {
            const float *q[SLOTS];
            peak_vf dots[SLOTS];
            for (size_t r = 0; r < nr; r++)
                q[r] = st[g + r].q;
            attention_key_rows(kv, w, st[g].k, d->k_stride[1], d->k_type, t0 + j0, nc);
            isa_rows_dots(dots, q, nr, kv, d->head_dim, d->k_type);
            for (size_t r = 0, e = g; r < nr; r++, e++) {
                float *s = w->st + e * PEAK_ATTENTION_BC + j0;
                vmax[e] = peak_vf_max(
                    attention_row_scores(s, dots[r], b[e] + j0, d->scale, nc), vmax[e]);
            }
        }
    }
    float alpha[PEAK_ATTENTION_ROW_STATES];
    for (size_t e = 0; e < n_rows; e++)
        alpha[e] = attention_row_softmax(d, &st[e], w->st + e * PEAK_ATTENTION_BC,
                                         w->bt + 2 * e * PEAK_ATTENTION_BC,
                                         peak_vf_reduce_max(vmax[e]), n);
    float ones[SLOTS];
    for (size_t r = 0; r < SLOTS; r++)
        ones[r] = 1.0f;
    for (size_t j0 = 0; j0 < n; j0 += PEAK_VF_LANES) {
        const size_t nc = n - j0 < PEAK_VF_LANES ? n - j0 : PEAK_VF_LANES;
        for (size_t g = 0; g < n_rows; g += nr) {
            float *acc[SLOTS];
            const float *p[SLOTS];
            for (size_t r = 0; r < nr; r++) {
                acc[r] = st[g + r].acc;
                p[r] = w->st + (g + r) * PEAK_ATTENTION_BC + j0;
            }
            attention_key_rows(kv, w, st[g].v, d->v_stride[1], d->v_type, t0 + j0, nc);
            isa_rows_pv(acc, j0 ? ones : alpha + g, p, nr, kv, nc, d->v_head_dim, d->v_type);
        }
    }
    for (size_t e = 0; e < n_rows; e++)
        if (++st[e].tiles == PEAK_ATTENTION_FOLD_TILES)
            attention_row_fold(&st[e], d->v_head_dim);
}

/* The natural log-sum-exp of a finished row (-inf: it saw nothing). */
static inline float attention_lse(float m, float l)
{
    return isnan(l) ? NAN : l == 0.0f ? -INFINITY : (float)((double)m + log((double)l));
}

/* o[c] = acc[c] / div for c < dv, vectorised (one rounding each, as a
   scalar division); div 0: the row saw nothing, +0. */
static inline void attention_row_divide(float *o, const float *acc, float div, size_t dv)
{
    const peak_vf vdiv = peak_vf_set1(div);
    size_t c = 0;
    if (div == 0.0f) {
        for (; c < dv; c++)
            o[c] = 0.0f;
        return;
    }
    for (; c + PEAK_VF_LANES <= dv; c += PEAK_VF_LANES)
        peak_vf_storeu(o + c, peak_vf_div(peak_vf_loadu(acc + c), vdiv));
    if (c < dv)
        peak_vf_store_first(o + c, peak_vf_div(peak_vf_load_first(acc + c, dv - c), vdiv),
                            dv - c);
}

/* Starts row state *r: row R of kv head kvh, its key range narrowed to
   the part's keys [klo, khi), its sums empty. */
static inline void attention_row_begin(attention_row_state *r, const peak_attention_desc *d,
                                       const attention_ws *w, const float *q, const void *k,
                                       const void *v, size_t b, size_t kvh, size_t R, size_t klo,
                                       size_t khi, size_t n)
{
    const size_t group = d->heads / d->kv_heads, ldacc = attention_round16(d->v_head_dim);
    const peak_key_range kr = peak_mask_keys(&d->mask, b, R / group, d->q_len, d->kv_len);
    r->head = kvh * group + R % group;
    r->pos = R / group;
    r->q = attention_q_row(q, d, b, r->head, r->pos);
    r->k = attention_kv_head(k, d->k_stride, d->k_type, b, kvh);
    r->v = attention_kv_head(v, d->v_stride, d->v_type, b, kvh);
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
static inline void attention_rows_run(float *o, const float *q, const void *k, const void *v,
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
    /* All rows walk the keys together (attention_rows_tile_together)
       when no element mask tells them apart and they see the same keys. */
    const size_t nr = part->rows;
    bool together = nr > 1 && nr <= PEAK_ATTENTION_GROUP_ROWS && !d->mask.keep && !d->mask.bias;
    for (size_t e = 1; together && e < n; e++)
        together = st[e].lo == st[0].lo && st[e].hi == st[0].hi;
    for (size_t t = lo < hi ? lo / PEAK_ATTENTION_BC * PEAK_ATTENTION_BC : hi; t < hi;
         t += PEAK_ATTENTION_BC) {
        if (together) {
            const size_t t0 = st[0].lo > t ? st[0].lo : t;
            const size_t t1 = st[0].hi < t + PEAK_ATTENTION_BC ? st[0].hi : t + PEAK_ATTENTION_BC;
            attention_rows_tile_together(d, w, st, n, nr, t0, t1);
            continue;
        }
        for (size_t e = 0; e < n; e++) {
            const size_t t0 = st[e].lo > t ? st[e].lo : t;
            const size_t t1 = st[e].hi < t + PEAK_ATTENTION_BC ? st[e].hi : t + PEAK_ATTENTION_BC;
            if (t0 < t1)
                attention_row_tile(d, w, &st[e], t0, t1);
        }
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
        attention_row_divide(orow, r->acc, r->l == 0.0f ? 0.0f : div, d->v_head_dim);
        if (d->lse)
            *attention_lse_at(d, b, r->head, r->pos) = lse;
    }
}

#endif /* PEAK_ATTENTION_DECODE_H */
