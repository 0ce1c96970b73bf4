/*
 * attention-block.h - a block of the tile path: up to PEAK_ATTENTION_BQ query
 * rows sharing one kv head (part of attention.h; include that, not this).
 * Holds attention_block, the row numbering (attention_block_rows: each
 * row's head, position, key range and element masks), the addresses of a
 * Q, O and lse row (shared with the row path) and the block's start
 * (attention_block_start: Q^T packed, accumulators cleared).  Expects
 * attention_ws and the including file's PEAK_ATTENTION_BQ and, optionally,
 * PEAK_ATTENTION_T8X8_IN.
 */
#ifndef PEAK_ATTENTION_BLOCK_H
#define PEAK_ATTENTION_BLOCK_H
#ifndef PEAK_ATTENTION_H
#error "include attention.h, which includes this after its prerequisites"
#endif

/* One block: up to BQ rows (query head, position) sharing one kv head. */
typedef struct attention_block {
    const peak_attention_desc *d;
    const void *k, *v;  /* key 0 of the kv head (d->k_type, d->v_type) */
    size_t b, rows;
    /* Rows the vector code touches: rows rounded up to whole vectors and
       to the 8 x 8 transposes.  Rows past them are never read or written,
       so a block of 4 rows (decode, 4 query heads per kv head) does not
       pack, clear, fold and divide 64: a decode step of 32 heads over 8
       kv heads and 16 keys went from 16.4 to 11.5 us (AVX2, Zen 3). */
    size_t vrows;
    bool elem_masks;    /* keep or bias present */
    size_t lo[PEAK_ATTENTION_BQ], hi[PEAK_ATTENTION_BQ];
    size_t head[PEAK_ATTENTION_BQ], pos[PEAK_ATTENTION_BQ];
    const uint8_t *keep[PEAK_ATTENTION_BQ];
    const float *bias[PEAK_ATTENTION_BQ];
    /* The logit options (peak_logits), set by attention_block_logits. */
    bool capped;        /* soft-capping at softcap */
    float softcap;
    bool alibi;
    bool symmetric;     /* PEAK_ALIBI_SYMMETRIC */
    bool has_sink;
    bool shifted;       /* the finish adds the shift (ALiBi) or the sink */
    float slope[PEAK_ATTENTION_BQ]; /* 0 past the block */
    /* ALiBi from key aref, and the row's shift (attention_alibi_ref). */
    int64_t aref[PEAK_ATTENTION_BQ];
    double shift[PEAK_ATTENTION_BQ];
    float sink[PEAK_ATTENTION_BQ];
} attention_block;

static inline const float *attention_q_row(const float *q, const peak_attention_desc *d, size_t b,
                                           size_t h, size_t i)
{
    return q + (ptrdiff_t)b * d->q_stride[0] + (ptrdiff_t)i * d->q_stride[1] +
           (ptrdiff_t)h * d->q_stride[2];
}

/* Row `key` of a K or V of element type t, key 0 at base, rows stride
   elements apart. */
static inline const void *attention_kv_row(const void *base, size_t key, ptrdiff_t stride,
                                           peak_dtype t)
{
    return (const char *)base + (ptrdiff_t)key * stride * (ptrdiff_t)peak_dtype_bytes(t);
}

/* Key 0 of kv head kvh of batch entry b in K or V (strides s, type t). */
static inline const void *attention_kv_head(const void *x, const ptrdiff_t s[3], peak_dtype t,
                                            size_t b, size_t kvh)
{
    return (const char *)x +
           ((ptrdiff_t)b * s[0] + (ptrdiff_t)kvh * s[2]) * (ptrdiff_t)peak_dtype_bytes(t);
}

/* vrows' unit: whole vectors and whole 8 x 8 transposes (a preprocessor
   choice: with 8 lanes both branches of a ?: would be the same). */
#if PEAK_ATTENTION_VW > 8
#define PEAK_ATTENTION_ROW_UNIT PEAK_ATTENTION_VW
#else
#define PEAK_ATTENTION_ROW_UNIT 8
#endif

/* Rows first .. first+rows-1 of the kv head's group, numbered
   position-major: row R is query head kvh * group + R % group at position
   R / group, so that causal ranges grow along the block. */
static inline void attention_block_rows(attention_block *blk, size_t kvh, size_t first)
{
    /* The caller set blk's scalars; the per-row arrays are filled here. */
    // cppcheck-suppress ctuuninitvar
    const peak_attention_desc *d = blk->d;
    const size_t group = d->heads / d->kv_heads;
    for (size_t r = 0; r < blk->rows; r++) {
        const size_t R = first + r, h = kvh * group + R % group, i = R / group;
        const peak_key_range kr = peak_mask_keys(&d->mask, blk->b, i, d->q_len, d->kv_len);
        blk->head[r] = h;
        blk->pos[r] = i;
        blk->lo[r] = kr.lo;
        blk->hi[r] = kr.hi;
        blk->keep[r] = peak_mask_keep_row(&d->mask, blk->b, h, i);
        blk->bias[r] = peak_mask_bias_row(&d->mask, blk->b, h, i);
    }
    const size_t unit = PEAK_ATTENTION_ROW_UNIT;
    blk->vrows = (blk->rows + unit - 1) / unit * unit;
    blk->vrows = blk->vrows < PEAK_ATTENTION_BQ ? blk->vrows : PEAK_ATTENTION_BQ;
    for (size_t r = blk->rows; r < PEAK_ATTENTION_BQ; r++) {
        blk->lo[r] = blk->hi[r] = 0; /* rows past the block see nothing */
        blk->keep[r] = NULL;
        blk->bias[r] = NULL;
    }
}

/* The logit options of the block's rows, from their key ranges before
   they are narrowed to the part's (attention_block_clip: every chunk of a
   split row takes the same ALiBi frame): slopes, reference keys, shifts
   and sinks; rows past the block get slope 0 and no shift.  A chunk of a
   split call's keys (chunk) leaves the shift and the sink to the merge
   (attention-logits.h). */
static inline void attention_block_logits(attention_block *blk, bool chunk)
{
    const peak_attention_desc *d = blk->d;
    const peak_logits *lg = &d->logits;
    blk->capped = !peak_f32_is_zero(lg->softcap);
    blk->softcap = lg->softcap;
    blk->alibi = lg->alibi != PEAK_ALIBI_NONE;
    blk->symmetric = lg->alibi == PEAK_ALIBI_SYMMETRIC;
    blk->has_sink = lg->sinks != NULL && !chunk;
    blk->shifted = (blk->alibi && !chunk) || blk->has_sink;
    if (!blk->alibi && !blk->has_sink)
        return;
    for (size_t r = 0; r < PEAK_ATTENTION_BQ; r++) {
        blk->slope[r] = blk->sink[r] = 0.0f;
        blk->aref[r] = 0;
        blk->shift[r] = 0.0;
        if (r >= blk->rows)
            continue;
        const peak_logit_row lr = peak_logit_row_of(lg, &d->mask, d->heads, blk->head[r],
                                                    blk->pos[r], d->q_len, d->kv_len);
        blk->sink[r] = lr.sink;
        if (blk->alibi) {
            blk->slope[r] = lr.slope;
            attention_alibi_ref(&lr, blk->lo[r], blk->hi[r], &blk->aref[r], &blk->shift[r]);
        }
    }
}

/* Rows the block start and finish request ahead of the one they copy: the
   rows of one head in [B, L, H, D] are a power-of-two stride apart, in
   other pages, where no hardware prefetcher follows, so copying them one
   miss at a time cost as much as two tiles of arithmetic per block
   (measured at L = 2048, H = 8). */
#define PEAK_ATTENTION_ROWS_AHEAD 8

static inline float *attention_o_row(float *o, const peak_attention_desc *d, size_t b, size_t h,
                                     size_t i)
{
    return o + (ptrdiff_t)b * d->o_stride[0] + (ptrdiff_t)i * d->o_stride[1] +
           (ptrdiff_t)h * d->o_stride[2];
}

/* lse[b, h, i] (d->lse is not NULL). */
static inline float *attention_lse_at(const peak_attention_desc *d, size_t b, size_t h, size_t i)
{
    return d->lse + (ptrdiff_t)b * d->lse_stride[0] + (ptrdiff_t)h * d->lse_stride[1] +
           (ptrdiff_t)i * d->lse_stride[2];
}

/* Q^T with zero columns past the block's rows up to vrows (their scores
   are finite garbage, never stored), a zero accumulator, m = -inf and
   l = 0, for the rows below vrows.  Eight
   rows at a time: through the including file's 8 x 8 transpose
   (PEAK_ATTENTION_T8X8_IN) when it has one. */
static inline void attention_block_start(const attention_block *blk, const attention_ws *w,
                                         const float *q)
{
    const peak_attention_desc *d = blk->d;
    for (size_t r = 0; r < PEAK_ATTENTION_ROWS_AHEAD && r < blk->rows; r++)
        peak_prefetch(attention_q_row(q, d, blk->b, blk->head[r], blk->pos[r]), d->head_dim,
                      PEAK_PF_L1);
    for (size_t r8 = 0; r8 < blk->vrows; r8 += 8) {
        const float *rows[8];
        for (size_t k = 0; k < 8; k++) {
            const size_t r = r8 + k, ra = r + PEAK_ATTENTION_ROWS_AHEAD;
            if (ra < blk->rows)
                peak_prefetch(attention_q_row(q, d, blk->b, blk->head[ra], blk->pos[ra]),
                              d->head_dim, PEAK_PF_L1);
            rows[k] =
                r < blk->rows ? attention_q_row(q, d, blk->b, blk->head[r], blk->pos[r]) : w->zero;
            w->m[r] = -INFINITY;
            w->l[r] = 0.0f;
        }
        size_t c = 0;
#ifdef PEAK_ATTENTION_T8X8_IN
        for (; c + 8 <= d->head_dim; c += 8)
            PEAK_ATTENTION_T8X8_IN(w->qt + c * PEAK_ATTENTION_BQ + r8, PEAK_ATTENTION_BQ, rows, c);
#endif
        for (; c < d->head_dim; c++)
            for (size_t k = 0; k < 8; k++)
                w->qt[c * PEAK_ATTENTION_BQ + r8 + k] = rows[k][c];
    }
    if (blk->vrows == PEAK_ATTENTION_BQ)
        memset(w->oacc, 0, d->v_head_dim * PEAK_ATTENTION_BQ * sizeof(float));
    else /* eight rows at a time, vectorised: a memset call per column cost more */
        for (size_t c = 0; c < d->v_head_dim; c++)
            for (size_t r8 = 0; r8 < blk->vrows; r8 += 8) {
                float *col = w->oacc + c * PEAK_ATTENTION_BQ + r8;
                for (size_t r = 0; r < 8; r++)
                    col[r] = 0.0f;
            }
}

#endif /* PEAK_ATTENTION_BLOCK_H */
