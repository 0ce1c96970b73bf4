/*
 * api.c - the public entry points: validate everything, then hand the call
 * to its scheduler (schedule/schedule.h), which runs the active tier's
 * kernels over work items.  No output byte is written before every check has passed,
 * so a rejected call leaves the caller's buffers exactly as they were.
 *
 * What the checks share lives beside this file: overlap.h (how far a
 * strided array reaches and whether two share a byte) and
 * schedule-embedding.h (the position numbering, which the embedding check
 * walks and the embedding scheduler then resolves into kernel calls).
 * peak_status_string is in status.c.
 */
#include "internal.h"
#include "layernorm.h"
#include "logits.h"
#include "overlap.h"
#include "rope.h"
#include "schedule/schedule-embedding.h"
#include "schedule/schedule.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* ---- PE parameters ------------------------------------------------------ */

/* Zero tests on the bits, not with ==: under MXCSR.DAZ (callers built with
   -ffast-math run with it) a subnormal compares equal to 0, which turned a
   subnormal scale into "the default scale" and rejected a subnormal base
   (found by tests/fuzz).  A kernel then reads the subnormal as the FPU
   does: as 0 under DAZ. */
static int f64_is_zero(double v)
{
    uint64_t b;
    memcpy(&b, &v, sizeof b);
    return (b << 1) == 0;
}

static int pe_params_ok(const peak_pe_params *p)
{
    return (unsigned)p->layout <= PEAK_PE_SPLIT_PAPER && (unsigned)p->mode <= PEAK_PE_TORCH_F32 &&
           !signbit(p->base) && !f64_is_zero(p->base) && isfinite(p->base);
}

static const peak_pe_params default_pe_params = PEAK_PE_PARAMS_DEFAULT;

/* ---- sinusoid table ----------------------------------------------------- */

peak_status peak_pe_table(void *out, peak_dtype out_type, size_t n_pos, size_t d_model,
                          size_t pos0, const peak_pe_params *params, const peak_threadpool *pool)
{
    const peak_pe_params *p = params ? params : &default_pe_params;
    if (!out || n_pos == 0 || d_model == 0 || !pe_params_ok(p))
        return PEAK_ERR_INVALID_ARG;
    const size_t es = peak_dtype_size(out_type);
    if (!es)
        return PEAK_ERR_UNSUPPORTED;
    if (pos0 > PEAK_MAX_POSITION || n_pos > PEAK_MAX_POSITION - pos0)
        return PEAK_ERR_OUT_OF_RANGE;
    const ptrdiff_t ld = (ptrdiff_t)d_model;
    if (!extent_fits_as(&n_pos, &ld, 1, d_model, es))
        return PEAK_ERR_OUT_OF_RANGE;
    peak_schedule_pe_table(out, out_type, n_pos, d_model, pos0, p, pool);
    return PEAK_OK;
}

peak_status peak_pe_add(float *x, ptrdiff_t batch_stride, ptrdiff_t ld_x, size_t batch,
                        size_t seq_len, size_t d_model, size_t pos0, const float *pe,
                        size_t pe_rows, const peak_pe_params *params,
                        const peak_threadpool *pool)
{
    const peak_pe_params *p = params ? params : &default_pe_params;
    if (!x || batch == 0 || seq_len == 0 || d_model == 0 || batch_stride < 0 || ld_x < 0)
        return PEAK_ERR_INVALID_ARG;
    size_t n[2] = {batch, seq_len};
    ptrdiff_t st[2] = {batch_stride, ld_x};
    if (!extent_fits(n, st, 2, d_model))
        return PEAK_ERR_OUT_OF_RANGE;
    if ((size_t)ld_x < d_model || !rows_apart(n, st, 2, d_model) || x == pe)
        return PEAK_ERR_INVALID_ARG;
    if (!pe && !pe_params_ok(p))
        return PEAK_ERR_INVALID_ARG;
    size_t limit = pe ? pe_rows : PEAK_MAX_POSITION;
    if (pos0 > limit || seq_len > limit - pos0)
        return PEAK_ERR_OUT_OF_RANGE;
    if (pe) {
        ptrdiff_t ld_pe = (ptrdiff_t)d_model;
        if (!extent_fits(&pe_rows, &ld_pe, 1, d_model))
            return PEAK_ERR_OUT_OF_RANGE;
        if (spans_meet(tensor_span(x, n, st, 2, d_model, sizeof(float)),
                       tensor_span(pe, &pe_rows, &ld_pe, 1, d_model, sizeof(float))))
            return PEAK_ERR_INVALID_ARG;
    }
    peak_schedule_pe_add(x, batch_stride, ld_x, batch, seq_len, d_model, pos0, pe, p, pool);
    return PEAK_OK;
}

/* ---- rotary position embedding ------------------------------------------- */

peak_status peak_rope_cache(void *cache, peak_dtype cache_type, size_t n_pos, size_t pos0,
                            const peak_rope_params *params, const peak_threadpool *pool)
{
    if (!cache || !params || n_pos == 0)
        return PEAK_ERR_INVALID_ARG;
    peak_status s = peak_rope_params_check(params);
    if (s != PEAK_OK)
        return s;
    const size_t es = peak_dtype_size(cache_type);
    if (!es)
        return PEAK_ERR_UNSUPPORTED;
    if (pos0 > PEAK_MAX_POSITION || n_pos > PEAK_MAX_POSITION - pos0)
        return PEAK_ERR_OUT_OF_RANGE;
    const ptrdiff_t ld = (ptrdiff_t)params->rotary_dim;
    if (!extent_fits_as(&n_pos, &ld, 1, params->rotary_dim, es))
        return PEAK_ERR_OUT_OF_RANGE;
    if (spans_meet(array_span(cache, n_pos * params->rotary_dim, es),
                   array_span(params->longrope_factors,
                              params->scaling == PEAK_ROPE_LONGROPE ? params->rotary_dim / 2 : 0,
                              sizeof(float))))
        return PEAK_ERR_INVALID_ARG;
    peak_schedule_rope_cache(cache, cache_type, n_pos, pos0, params, pool);
    return PEAK_OK;
}

/* Every position of a rope_apply call, against `limit` (cache rows, or
   PEAK_MAX_POSITION on the fly). */
static peak_status rope_positions_check(const peak_rope_desc *d, size_t limit)
{
    if (!d->positions && !d->positions32)
        return d->pos0 <= limit && d->seq_len <= limit - d->pos0 ? PEAK_OK
                                                                 : PEAK_ERR_OUT_OF_RANGE;
    for (size_t b = 0; b < d->batch; b++) {
        for (size_t l = 0; l < d->seq_len; l++) {
            const ptrdiff_t at = (ptrdiff_t)b * d->positions_stride + (ptrdiff_t)l;
            const int64_t p = d->positions ? d->positions[at] : (int64_t)d->positions32[at];
            if (p < 0 || (uint64_t)p >= limit)
                return PEAK_ERR_OUT_OF_RANGE;
        }
    }
    return PEAK_OK;
}

/* A rope_apply descriptor on its own: shapes, strides, params, extents
   and every position (not the overlap of y with what it reads). */
static peak_status rope_desc_check(const peak_rope_desc *d)
{
    if (d->batch == 0 || d->seq_len == 0 || d->heads == 0)
        return PEAK_ERR_INVALID_ARG;
    const size_t r = d->params.rotary_dim;
    if (r < 2 || r > PEAK_ROPE_MAX_DIM || (r & 1) || d->head_dim < r ||
        (unsigned)d->pairing > PEAK_ROPE_INTERLEAVED || (d->positions && d->positions32) ||
        !strides_nonneg(d->x_stride, 3) || !strides_nonneg(d->y_stride, 3) ||
        d->positions_stride < 0)
        return PEAK_ERR_INVALID_ARG;
    if (!d->cache) {
        peak_status s = peak_rope_params_check(&d->params);
        if (s != PEAK_OK)
            return s;
    }
    const size_t n[3] = {d->batch, d->seq_len, d->heads};
    const size_t pn[2] = {d->batch, d->seq_len};
    const ptrdiff_t pst[2] = {d->positions_stride, 1};
    ptrdiff_t ld_cache = (ptrdiff_t)r;
    if (!extent_fits(n, d->x_stride, 3, d->head_dim) ||
        !extent_fits(n, d->y_stride, 3, d->head_dim) || !extent_fits(pn, pst, 2, 1) ||
        (d->cache && d->cache_rows && !extent_fits(&d->cache_rows, &ld_cache, 1, r)))
        return PEAK_ERR_OUT_OF_RANGE;
    if (!rows_apart(n, d->y_stride, 3, d->head_dim))
        return PEAK_ERR_INVALID_ARG;
    return rope_positions_check(d, d->cache ? d->cache_rows : PEAK_MAX_POSITION);
}

/* Whether span sp meets one of the arrays a rope call reads besides x. */
static int rope_arrays_meet(span sp, const peak_rope_desc *d)
{
    const size_t r = d->params.rotary_dim;
    const size_t pn[2] = {d->batch, d->seq_len};
    const ptrdiff_t pst[2] = {d->positions_stride, 1};
    ptrdiff_t ld_cache = (ptrdiff_t)r;
    return spans_meet(sp, tensor_span(d->positions, pn, pst, 2, 1, sizeof(int64_t))) ||
           spans_meet(sp, tensor_span(d->positions32, pn, pst, 2, 1, sizeof(int32_t))) ||
           (d->cache && d->cache_rows &&
            spans_meet(sp, tensor_span(d->cache, &d->cache_rows, &ld_cache, 1, r,
                                       sizeof(float)))) ||
           (!d->cache && d->params.scaling == PEAK_ROPE_LONGROPE &&
            spans_meet(sp, array_span(d->params.longrope_factors, r / 2, sizeof(float))));
}

static peak_status rope_apply_check(const float *y, const float *x, const peak_rope_desc *d)
{
    if (!y || !x || !d)
        return PEAK_ERR_INVALID_ARG;
    peak_status s = rope_desc_check(d);
    if (s != PEAK_OK)
        return s;
    /* In place (the same rows), or apart from everything read. */
    const size_t n[3] = {d->batch, d->seq_len, d->heads};
    const span sy = tensor_span(y, n, d->y_stride, 3, d->head_dim, sizeof(float));
    const bool in_place = y == x && memcmp(d->x_stride, d->y_stride, sizeof d->x_stride) == 0;
    if ((!in_place &&
         spans_meet(sy, tensor_span(x, n, d->x_stride, 3, d->head_dim, sizeof(float)))) ||
        rope_arrays_meet(sy, d))
        return PEAK_ERR_INVALID_ARG;
    return PEAK_OK;
}

peak_status peak_rope_apply(float *y, const float *x, const peak_rope_desc *desc,
                            const peak_threadpool *pool)
{
    peak_status s = rope_apply_check(y, x, desc);
    if (s != PEAK_OK)
        return s;
    peak_schedule_rope_apply(y, x, desc, pool);
    return PEAK_OK;
}

/* ---- embedding + PE ------------------------------------------------------ */

static peak_status embed_check(void *out, ptrdiff_t ld_out, const int32_t *ids, size_t n_tokens,
                               const peak_embed_desc *d)
{
    if (d && (!peak_dtype_size(d->table_type) || !peak_dtype_size(d->out_type) ||
              ((d->table_type != PEAK_F32 || d->out_type != PEAK_F32) &&
               d->d_model > PEAK_EMBED_MAX_TYPED)))
        return PEAK_ERR_UNSUPPORTED;
    if (!out || !ids || !d || !d->table || n_tokens == 0 || d->vocab == 0 || d->d_model == 0)
        return PEAK_ERR_INVALID_ARG;
    if (ld_out < 0 || d->ld_table < 0 || (size_t)ld_out < d->d_model ||
        (size_t)d->ld_table < d->d_model || !isfinite(d->scale))
        return PEAK_ERR_INVALID_ARG;
    if (d->padding_idx < -1 || (d->padding_idx >= 0 && (size_t)d->padding_idx >= d->vocab) ||
        (d->padding_idx >= 0 && d->positions))
        return PEAK_ERR_INVALID_ARG;
    if (out == d->table || (d->pe && out == d->pe) || (!d->pe && !pe_params_ok(&d->pe_params)))
        return PEAK_ERR_INVALID_ARG;
    ptrdiff_t ld_pe = (ptrdiff_t)d->d_model;
    if (!extent_fits_as(&n_tokens, &ld_out, 1, d->d_model, peak_dtype_size(d->out_type)) ||
        !extent_fits_as(&d->vocab, &d->ld_table, 1, d->d_model, peak_dtype_size(d->table_type)) ||
        (d->pe && d->pe_rows && !extent_fits(&d->pe_rows, &ld_pe, 1, d->d_model)))
        return PEAK_ERR_OUT_OF_RANGE;
    /* The kernels read ids, positions, table and pe while they write out
       (a chunk of tokens at a time). */
    const span so =
        tensor_span(out, &n_tokens, &ld_out, 1, d->d_model, peak_dtype_size(d->out_type));
    if (spans_meet(so, array_span(ids, n_tokens, sizeof(int32_t))) ||
        spans_meet(so, array_span(d->positions, n_tokens, sizeof(int64_t))) ||
        spans_meet(so, tensor_span(d->table, &d->vocab, &d->ld_table, 1, d->d_model,
                                   peak_dtype_size(d->table_type))) ||
        (d->pe_rows && spans_meet(so, tensor_span(d->pe, &d->pe_rows, &ld_pe, 1, d->d_model,
                                                  sizeof(float)))))
        return PEAK_ERR_INVALID_ARG;
    /* pos0 bounded first, so pos0 + index (+ padding_idx + 1) cannot wrap.
       Against PEAK_MAX_POSITION, not the table: a call of pad tokens only
       uses no position, and is valid with a table as it is on the fly. */
    if (!d->positions && d->pos0 >= PEAK_MAX_POSITION)
        return PEAK_ERR_OUT_OF_RANGE;
    /* Every id and position is checked before the first row is written. */
    const uint64_t limit = d->pe ? d->pe_rows : PEAK_MAX_POSITION;
    pos_walk w = {d, ids, 0, 0, 0};
    for (size_t t = 0; t < n_tokens; t++) {
        int64_t pos = pos_next(&w);
        if (ids[t] < 0 || (size_t)ids[t] >= d->vocab)
            return PEAK_ERR_OUT_OF_RANGE;
        if (pos < -1 || (pos == -1 && d->padding_idx < 0) || (pos >= 0 && (uint64_t)pos >= limit))
            return PEAK_ERR_OUT_OF_RANGE;
    }
    return PEAK_OK;
}

peak_status peak_embed_pe(void *out, ptrdiff_t ld_out, const int32_t *ids, size_t n_tokens,
                          const peak_embed_desc *desc, const peak_threadpool *pool)
{
    peak_status s = embed_check(out, ld_out, ids, n_tokens, desc);
    if (s != PEAK_OK)
        return s;
    peak_schedule_embed_pe(out, ld_out, ids, n_tokens, desc, pool);
    return PEAK_OK;
}

/* ---- masks --------------------------------------------------------------- */

/* qpos = i + q_offset (+ Lk - Lq) must stay far from int64 overflow. */
#define PEAK_MAX_INDEX ((size_t)1 << 40)

static peak_status mask_check(const peak_mask *m, size_t batch, size_t heads, size_t q_len,
                              size_t k_len)
{
    if ((unsigned)m->align > PEAK_ALIGN_BOTTOM_RIGHT || !strides_nonneg(m->keep_stride, 3) ||
        !strides_nonneg(m->bias_stride, 3))
        return PEAK_ERR_INVALID_ARG;
    size_t n[3] = {batch, heads, q_len};
    if ((m->keep && !extent_fits(n, m->keep_stride, 3, k_len)) ||
        (m->bias && !extent_fits(n, m->bias_stride, 3, k_len)))
        return PEAK_ERR_OUT_OF_RANGE;
    if (m->q_offset > PEAK_MAX_INDEX || m->window > PEAK_MAX_INDEX || q_len > PEAK_MAX_INDEX ||
        k_len > PEAK_MAX_INDEX)
        return PEAK_ERR_OUT_OF_RANGE;
    if (m->key_len)
        for (size_t b = 0; b < batch; b++)
            if (m->key_len[b] < 0 || (size_t)m->key_len[b] > k_len)
                return PEAK_ERR_OUT_OF_RANGE;
    return PEAK_OK;
}

/* ---- logit options ------------------------------------------------------ */

peak_status peak_alibi_slopes(float *slopes, size_t heads)
{
    if (!slopes || !heads)
        return PEAK_ERR_INVALID_ARG;
    if (heads > PEAK_ALIBI_MAX_HEADS)
        return PEAK_ERR_OUT_OF_RANGE;
    for (size_t h = 0; h < heads; h++)
        slopes[h] = peak_alibi_slope(h, heads);
    return PEAK_OK;
}

/* One value per head at p[h * stride], each finite and, when nonneg is
   set, not negative (a -0 slope is 0). */
static peak_status per_head_check(const float *p, ptrdiff_t stride, size_t heads, int nonneg)
{
    const size_t n[1] = {heads};
    if (stride < 0)
        return PEAK_ERR_INVALID_ARG;
    if (!extent_fits(n, &stride, 1, 1))
        return PEAK_ERR_OUT_OF_RANGE;
    for (size_t h = 0; h < heads; h++) {
        const float v = p[(ptrdiff_t)h * stride];
        if (!isfinite(v) || (nonneg && v < 0.0f))
            return PEAK_ERR_INVALID_ARG;
    }
    return PEAK_OK;
}

/* peak_logits for a call of `heads` query heads: a cap that is 0 (off) or
   positive and finite, an ALiBi form of the enum with finite, non-negative
   slopes (or a head count peak_alibi_slopes() takes), finite sinks. */
static peak_status logits_check(const peak_logits *l, size_t heads)
{
    if (!peak_f32_is_zero(l->softcap) && (!isfinite(l->softcap) || !(l->softcap > 0.0f)))
        return PEAK_ERR_INVALID_ARG;
    if ((unsigned)l->alibi > PEAK_ALIBI_SYMMETRIC)
        return PEAK_ERR_INVALID_ARG;
    peak_status s = PEAK_OK;
    if (l->alibi != PEAK_ALIBI_NONE && l->alibi_slopes)
        s = per_head_check(l->alibi_slopes, l->alibi_slopes_stride, heads, 1);
    else if (l->alibi != PEAK_ALIBI_NONE && heads > PEAK_ALIBI_MAX_HEADS)
        s = PEAK_ERR_OUT_OF_RANGE;
    if (s == PEAK_OK && l->sinks)
        s = per_head_check(l->sinks, l->sinks_stride, heads, 0);
    return s;
}

/* An output must not overlap the logit options' arrays. */
static int apart_from_logits(span out, const peak_logits *l, size_t heads)
{
    const size_t n[1] = {heads};
    return !(l->alibi != PEAK_ALIBI_NONE &&
             spans_meet(out, tensor_span(l->alibi_slopes, n, &l->alibi_slopes_stride, 1, 1,
                                         sizeof(float)))) &&
           !spans_meet(out, tensor_span(l->sinks, n, &l->sinks_stride, 1, 1, sizeof(float)));
}

/* An output must not overlap the mask's arrays: the kernels read them
   row by row while writing. */
static int apart_from_mask(span out, const peak_mask *m, size_t batch, size_t heads,
                           size_t q_len, size_t k_len)
{
    const size_t n[3] = {batch, heads, q_len};
    return !spans_meet(out, array_span(m->key_len, batch, sizeof(int32_t))) &&
           !spans_meet(out, tensor_span(m->keep, n, m->keep_stride, 3, k_len, 1)) &&
           !spans_meet(out, tensor_span(m->bias, n, m->bias_stride, 3, k_len, sizeof(float)));
}

/* ---- softmax ------------------------------------------------------------ */

peak_status peak_softmax(void *y, const void *x, const peak_softmax_desc *desc,
                         const peak_threadpool *pool)
{
    if (desc && (!peak_dtype_size(desc->x_type) || !peak_dtype_size(desc->y_type)))
        return PEAK_ERR_UNSUPPORTED;
    if (!y || !x || !desc)
        return PEAK_ERR_INVALID_ARG;
    const peak_softmax_desc *d = desc;
    const size_t ex = peak_dtype_size(d->x_type), ey = peak_dtype_size(d->y_type);
    size_t n[3] = {d->batch, d->heads, d->q_len};
    if (!d->batch || !d->heads || !d->q_len || !d->k_len || !isfinite(d->scale))
        return PEAK_ERR_INVALID_ARG;
    if (!strides_nonneg(d->x_stride, 3) || !strides_nonneg(d->y_stride, 3))
        return PEAK_ERR_INVALID_ARG;
    if (!extent_fits_as(n, d->x_stride, 3, d->k_len, ex) ||
        !extent_fits_as(n, d->y_stride, 3, d->k_len, ey))
        return PEAK_ERR_OUT_OF_RANGE;
    if (!rows_apart(n, d->y_stride, 3, d->k_len))
        return PEAK_ERR_INVALID_ARG;
    if (y == x && (d->x_stride[0] != d->y_stride[0] || d->x_stride[1] != d->y_stride[1] ||
                   d->x_stride[2] != d->y_stride[2] || d->x_type != d->y_type))
        return PEAK_ERR_INVALID_ARG;
    peak_status s = mask_check(&d->mask, d->batch, d->heads, d->q_len, d->k_len);
    if (s == PEAK_OK)
        s = logits_check(&d->logits, d->heads);
    if (s != PEAK_OK)
        return s;
    const span sy = tensor_span(y, n, d->y_stride, 3, d->k_len, ey);
    if ((y != x && spans_meet(sy, tensor_span(x, n, d->x_stride, 3, d->k_len, ex))) ||
        !apart_from_mask(sy, &d->mask, d->batch, d->heads, d->q_len, d->k_len) ||
        !apart_from_logits(sy, &d->logits, d->heads))
        return PEAK_ERR_INVALID_ARG;
    /* Kernels never see the "0 means 1" default. */
    peak_softmax_desc resolved = *d;
    if (peak_f32_is_zero(resolved.scale))
        resolved.scale = 1.0f;
    return peak_schedule_softmax(y, x, &resolved, pool);
}

/* ---- exponential ---------------------------------------------------------- */

peak_status peak_exp(float *y, const float *x, size_t n, const peak_threadpool *pool)
{
    if (!y || !x || n == 0)
        return PEAK_ERR_INVALID_ARG;
    if (n > (size_t)PTRDIFF_MAX / sizeof(float))
        return PEAK_ERR_OUT_OF_RANGE;
    if (y != x && spans_meet(array_span(y, n, sizeof(float)), array_span(x, n, sizeof(float))))
        return PEAK_ERR_INVALID_ARG;
    peak_schedule_exp(y, x, n, pool);
    return PEAK_OK;
}

/* ---- element types ---------------------------------------------------------- */

size_t peak_dtype_size(peak_dtype type)
{
    switch (type) {
    case PEAK_F32: return sizeof(float);
    case PEAK_BF16:
    case PEAK_F16: return sizeof(uint16_t);
    }
    return 0;
}

peak_status peak_convert(void *y, peak_dtype y_type, const void *x, peak_dtype x_type, size_t n,
                         const peak_threadpool *pool)
{
    const size_t ys = peak_dtype_size(y_type), xs = peak_dtype_size(x_type);
    if (!ys || !xs)
        return PEAK_ERR_UNSUPPORTED;
    if (!y || !x || n == 0)
        return PEAK_ERR_INVALID_ARG;
    if (n > (size_t)PTRDIFF_MAX / sizeof(float))
        return PEAK_ERR_OUT_OF_RANGE;
    if (y == x && y_type == x_type)
        return PEAK_OK; /* a copy onto itself: nothing to do */
    if (spans_meet(array_span(y, n, ys), array_span(x, n, xs)))
        return PEAK_ERR_INVALID_ARG;
    peak_schedule_convert(y, y_type, x, x_type, n, pool);
    return PEAK_OK;
}

/* ---- attention ------------------------------------------------------------ */

/* peak.h's zero "defaults": kv_heads 0 is heads (no grouping), v_head_dim
   0 is head_dim, scale 0 is 1/sqrt(head_dim).  Kernels never see a zero
   (internal.h).  Needs head_dim != 0. */
static void attention_defaults(peak_attention_desc *d)
{
    if (!d->kv_heads)
        d->kv_heads = d->heads;
    if (!d->v_head_dim)
        d->v_head_dim = d->head_dim;
    if (peak_f32_is_zero(d->scale))
        d->scale = (float)(1.0 / sqrt((double)d->head_dim));
}

/* The rope_apply calls of d's rope (rope.h: Q into a packed copy, K too
   unless the keys are stored rotated) must each be valid. */
static peak_status attention_rope_check(const peak_attention_desc *d)
{
    for (int keys = 0; keys < 2; keys++) {
        if (!peak_attention_rope_rotates(d, keys))
            continue;
        peak_rope_desc r;
        peak_attention_rope_desc(d, keys, &r);
        peak_status s = rope_desc_check(&r);
        if (s != PEAK_OK)
            return s;
    }
    return PEAK_OK;
}

/* Whether span sp is apart from every array d's rope reads. */
static int apart_from_rope(span sp, const peak_attention_desc *d)
{
    for (int keys = 0; keys < 2; keys++) {
        if (!peak_attention_rope_rotates(d, keys))
            continue;
        peak_rope_desc r;
        peak_attention_rope_desc(d, keys, &r);
        if (rope_arrays_meet(sp, &r))
            return 0;
    }
    return 1;
}

/* Resolves the defaults into *d and checks the types and shapes. */
static peak_status attention_resolve(const peak_attention_desc *in, peak_attention_desc *d)
{
    *d = *in;
    if (!peak_dtype_size(d->q_type) || !peak_dtype_size(d->k_type) ||
        !peak_dtype_size(d->v_type) || !peak_dtype_size(d->o_type))
        return PEAK_ERR_UNSUPPORTED;
    if (!d->batch || !d->heads || !d->q_len || !d->kv_len || !d->head_dim || !isfinite(d->scale))
        return PEAK_ERR_INVALID_ARG;
    attention_defaults(d);
    if (d->kv_heads > d->heads || d->heads % d->kv_heads)
        return PEAK_ERR_INVALID_ARG;
    if (!strides_nonneg(d->q_stride, 3) || !strides_nonneg(d->k_stride, 3) ||
        !strides_nonneg(d->v_stride, 3) || !strides_nonneg(d->o_stride, 3) ||
        !strides_nonneg(d->lse_stride, 3))
        return PEAK_ERR_INVALID_ARG;
    size_t nq[3] = {d->batch, d->q_len, d->heads};
    size_t nk[3] = {d->batch, d->kv_len, d->kv_heads};
    size_t nl[3] = {d->batch, d->heads, d->q_len};
    if (!extent_fits_as(nq, d->q_stride, 3, d->head_dim, peak_dtype_size(d->q_type)) ||
        !extent_fits_as(nk, d->k_stride, 3, d->head_dim, peak_dtype_size(d->k_type)) ||
        !extent_fits_as(nk, d->v_stride, 3, d->v_head_dim, peak_dtype_size(d->v_type)) ||
        !extent_fits_as(nq, d->o_stride, 3, d->v_head_dim, peak_dtype_size(d->o_type)) ||
        (d->lse && !extent_fits(nl, d->lse_stride, 3, 1)))
        return PEAK_ERR_OUT_OF_RANGE;
    if (!rows_apart(nq, d->o_stride, 3, d->v_head_dim) ||
        (d->lse && !rows_apart(nl, d->lse_stride, 3, 1)))
        return PEAK_ERR_INVALID_ARG;
    peak_status s = mask_check(&d->mask, d->batch, d->heads, d->q_len, d->kv_len);
    if (s == PEAK_OK)
        s = logits_check(&d->logits, d->heads);
    return s != PEAK_OK ? s : attention_rope_check(d);
}

/* O, lse and the workspace (its first ws_bytes; none when NULL) must not
   overlap an input, the mask's arrays or each other: the kernels write all
   three while they read Q, K, V and the mask. */
static int attention_outputs_apart(const void *o, const void *q, const void *k, const void *v,
                                   const peak_attention_desc *d, const void *ws, size_t ws_bytes)
{
    const size_t nq[3] = {d->batch, d->q_len, d->heads};
    const size_t nk[3] = {d->batch, d->kv_len, d->kv_heads};
    const size_t nl[3] = {d->batch, d->heads, d->q_len};
    const span in[3] = {
        tensor_span(q, nq, d->q_stride, 3, d->head_dim, peak_dtype_size(d->q_type)),
        tensor_span(k, nk, d->k_stride, 3, d->head_dim, peak_dtype_size(d->k_type)),
        tensor_span(v, nk, d->v_stride, 3, d->v_head_dim, peak_dtype_size(d->v_type))};
    const span out[3] = {tensor_span(o, nq, d->o_stride, 3, d->v_head_dim,
                                     peak_dtype_size(d->o_type)),
                         tensor_span(d->lse, nl, d->lse_stride, 3, 1, sizeof(float)),
                         ws_bytes ? array_span(ws, ws_bytes, 1) : (span){0, 0}};
    for (int j = 0; j < 3; j++) {
        for (int i = j + 1; i < 3; i++)
            if (spans_meet(out[j], out[i]))
                return 0;
        for (int i = 0; i < 3; i++)
            if (spans_meet(out[j], in[i]))
                return 0;
        if (!apart_from_mask(out[j], &d->mask, d->batch, d->heads, d->q_len, d->kv_len) ||
            !apart_from_logits(out[j], &d->logits, d->heads) || !apart_from_rope(out[j], d))
            return 0;
    }
    return 1;
}

/* The staged Q, K and O, then the attention's own workspace; the sentinel
   SIZE_MAX & ~63 when the sum does not fit (either part may be it). */
static size_t attention_bytes(size_t stage, size_t att)
{
    return stage > SIZE_MAX - 63 - att ? SIZE_MAX & ~(size_t)63 : stage + att;
}

peak_status peak_attention_workspace_size(const peak_attention_desc *desc,
                                          const peak_threadpool *pool, size_t *bytes)
{
    if (!desc || !bytes)
        return PEAK_ERR_INVALID_ARG;
    peak_attention_desc d;
    peak_status s = attention_resolve(desc, &d);
    if (s != PEAK_OK)
        return s;
    peak_attention_desc staged;
    peak_schedule_attention_stage_desc(&d, &staged);
    *bytes = attention_bytes(peak_schedule_attention_stage_bytes(&d),
                             peak_schedule_attention_workspace(
                                 peak_schedule_attention_kernels(&d), &staged,
                                 peak_threadpool_workers(pool)));
    return PEAK_OK;
}

peak_status peak_attention(void *o, const void *q, const void *k, const void *v,
                           const peak_attention_desc *desc, void *workspace, size_t workspace_size,
                           const peak_threadpool *pool)
{
    if (!o || !q || !k || !v || !desc)
        return PEAK_ERR_INVALID_ARG;
    if (o == q || o == k || o == v || (desc->lse && (desc->lse == o)))
        return PEAK_ERR_INVALID_ARG;
    peak_attention_desc d;
    peak_status s = attention_resolve(desc, &d);
    if (s != PEAK_OK)
        return s;
    /* One plan, with one count of the pool's workers, for the size and
       the run: the workspace holds a slot for each, after the staged Q, K
       and O (which the plan reads and writes at their packed strides). */
    peak_attention_desc staged;
    peak_schedule_attention_stage_desc(&d, &staged);
    peak_attention_plan plan;
    peak_schedule_attention_plan(&plan, peak_schedule_attention_kernels(&d), &staged,
                                 peak_threadpool_workers(pool));
    const size_t stage_bytes = peak_schedule_attention_stage_bytes(&d);
    const size_t need = attention_bytes(stage_bytes, plan.bytes);
    if (workspace && (uintptr_t)workspace % 64)
        return PEAK_ERR_INVALID_ARG;
    /* The size first: a workspace of at least `need` bytes is one whose
       extent below cannot wrap around the address space. */
    if (workspace && workspace_size < need)
        return PEAK_ERR_WORKSPACE;
    if (!attention_outputs_apart(o, q, k, v, &d, workspace, workspace ? need : 0))
        return PEAK_ERR_INVALID_ARG;
    void *ws = workspace, *owned = NULL;
    if (!workspace && need) {
        /* The convenience path; callers in a hot loop pass their own. */
        owned = ws = aligned_alloc(64, (need + 63) & ~(size_t)63);
        if (!owned)
            return PEAK_ERR_NO_MEMORY;
    }
    peak_schedule_attention_stage_in(&d, &q, &k, ws, pool);
    float *o32 = peak_schedule_attention_stage_o(&d, o, ws);
    peak_schedule_attention_run(&plan, o32, q, k, v, stage_bytes ? (char *)ws + stage_bytes : ws,
                                pool);
    peak_schedule_attention_stage_out(&d, o, o32, pool);
    free(owned);
    return PEAK_OK;
}

/* ---- merging partial attention results -------------------------------------- */

static peak_status merge_shapes(const peak_attention_merge_desc *d, const float *lse)
{
    if (!d->batch || !d->heads || !d->q_len || !d->v_head_dim)
        return PEAK_ERR_INVALID_ARG;
    if (!strides_nonneg(d->o_stride, 3) || !strides_nonneg(d->lse_stride, 3) ||
        !strides_nonneg(d->part_o_stride, 3) || !strides_nonneg(d->part_lse_stride, 3))
        return PEAK_ERR_INVALID_ARG;
    const size_t nq[3] = {d->batch, d->q_len, d->heads}, nl[3] = {d->batch, d->heads, d->q_len};
    if (!extent_fits(nq, d->o_stride, 3, d->v_head_dim) ||
        !extent_fits(nq, d->part_o_stride, 3, d->v_head_dim) ||
        (lse && !extent_fits(nl, d->lse_stride, 3, 1)) ||
        !extent_fits(nl, d->part_lse_stride, 3, 1))
        return PEAK_ERR_OUT_OF_RANGE;
    if (!rows_apart(nq, d->o_stride, 3, d->v_head_dim) ||
        (lse && !rows_apart(nl, d->lse_stride, 3, 1)))
        return PEAK_ERR_INVALID_ARG;
    return PEAK_OK;
}

/* An output and part p's tensor of the same kind: apart, or the same
   elements (p == 0, same pointer and strides: in place). */
static int merge_part_ok(span out, const void *out_p, const ptrdiff_t *out_st, span part,
                         const void *part_p, const ptrdiff_t *part_st, size_t p)
{
    if (p == 0 && out_p == part_p && memcmp(out_st, part_st, 3 * sizeof *out_st) == 0)
        return 1;
    return !spans_meet(out, part);
}

peak_status peak_attention_merge(float *o, float *lse, const float *const *o_parts,
                                 const float *const *lse_parts, size_t n_parts,
                                 const peak_attention_merge_desc *desc,
                                 const peak_threadpool *pool)
{
    if (!o || !o_parts || !lse_parts || !desc || !n_parts)
        return PEAK_ERR_INVALID_ARG;
    for (size_t p = 0; p < n_parts; p++)
        if (!o_parts[p] || !lse_parts[p])
            return PEAK_ERR_INVALID_ARG;
    const peak_attention_merge_desc *d = desc;
    peak_status s = merge_shapes(d, lse);
    if (s != PEAK_OK)
        return s;
    const size_t nq[3] = {d->batch, d->q_len, d->heads}, nl[3] = {d->batch, d->heads, d->q_len};
    const span so = tensor_span(o, nq, d->o_stride, 3, d->v_head_dim, sizeof(float));
    const span sl = tensor_span(lse, nl, d->lse_stride, 3, 1, sizeof(float));
    if (spans_meet(so, sl))
        return PEAK_ERR_INVALID_ARG;
    for (size_t p = 0; p < n_parts; p++) {
        const span po = tensor_span(o_parts[p], nq, d->part_o_stride, 3, d->v_head_dim,
                                    sizeof(float));
        const span pl = tensor_span(lse_parts[p], nl, d->part_lse_stride, 3, 1, sizeof(float));
        if (!merge_part_ok(so, o, d->o_stride, po, o_parts[p], d->part_o_stride, p) ||
            spans_meet(so, pl) || spans_meet(sl, po) ||
            !merge_part_ok(sl, lse, d->lse_stride, pl, lse_parts[p], d->part_lse_stride, p))
            return PEAK_ERR_INVALID_ARG;
    }
    peak_schedule_attention_merge(o, lse, o_parts, lse_parts, n_parts, d, pool);
    return PEAK_OK;
}

/* ---- residual + LayerNorm ------------------------------------------------ */

peak_status peak_add_layernorm(void *y, ptrdiff_t ld_y, void *sum, ptrdiff_t ld_sum,
                               const void *x, ptrdiff_t ld_x, const void *r, ptrdiff_t ld_r,
                               const float *gamma, const float *beta, size_t rows,
                               size_t d_model, float eps, const peak_layernorm_types *types,
                               const peak_threadpool *pool)
{
    const peak_layernorm_types f32 = {PEAK_F32, PEAK_F32, PEAK_F32, PEAK_F32},
                               *t = types ? types : &f32;
    const size_t ey = peak_dtype_size(t->y), es = peak_dtype_size(t->sum),
                 ex = peak_dtype_size(t->x), er = peak_dtype_size(t->r);
    /* 16-bit rows go through a float32 row on the stack
       (schedule-layernorm.c): at most PEAK_LAYERNORM_MAX_STAGED floats. */
    const bool typed = t->y != PEAK_F32 || t->x != PEAK_F32 || (r && t->r != PEAK_F32) ||
                       (sum && t->sum != PEAK_F32);
    if (!ey || !es || !ex || !er || (typed && d_model > PEAK_LAYERNORM_MAX_STAGED))
        return PEAK_ERR_UNSUPPORTED;
    if (!y || !x || !rows || !d_model || (signbit(eps) && !peak_f32_is_zero(eps)) || !isfinite(eps))
        return PEAK_ERR_INVALID_ARG;
    if (ld_y < 0 || ld_x < 0 || (size_t)ld_y < d_model || (size_t)ld_x < d_model)
        return PEAK_ERR_INVALID_ARG;
    if ((r && (ld_r < 0 || (size_t)ld_r < d_model)) ||
        (sum && (ld_sum < 0 || (size_t)ld_sum < d_model)))
        return PEAK_ERR_INVALID_ARG;
    if (!extent_fits_as(&rows, &ld_y, 1, d_model, ey) ||
        !extent_fits_as(&rows, &ld_x, 1, d_model, ex) ||
        (r && !extent_fits_as(&rows, &ld_r, 1, d_model, er)) ||
        (sum && !extent_fits_as(&rows, &ld_sum, 1, d_model, es)))
        return PEAK_ERR_OUT_OF_RANGE;
    /* In place means the same type too: bfloat16 over float16 has their
       size and strides. */
    if ((y == x && t->y != t->x) || (r && y == r && t->y != t->r) ||
        (sum && sum == x && t->sum != t->x) || (sum && r && sum == r && t->sum != t->r))
        return PEAK_ERR_INVALID_ARG;
    /* The SIMD tiers write row t while they read row t+1 (layernorm.h),
       so any overlap but the exact in-place one would change the result. */
    const row_set ys = {y, ld_y, rows, ey}, ss = {sum, ld_sum, rows, es},
                  xs = {x, ld_x, rows, ex}, rs = {r, ld_r, rows, er},
                  gs = {gamma, 0, 1, sizeof(float)}, bs = {beta, 0, 1, sizeof(float)};
    const row_set outs[2] = {ys, ss};
    for (int k = 0; k < 2; k++)
        if (!in_place_or_apart(outs[k], xs, d_model) || !in_place_or_apart(outs[k], rs, d_model) ||
            !rows_disjoint(outs[k], gs, d_model) || !rows_disjoint(outs[k], bs, d_model))
            return PEAK_ERR_INVALID_ARG;
    if (!rows_disjoint(ys, ss, d_model))
        return PEAK_ERR_INVALID_ARG;
    peak_schedule_add_layernorm(y, ld_y, sum, ld_sum, x, ld_x, r, ld_r, gamma, beta, rows,
                                d_model, eps, t, pool);
    return PEAK_OK;
}
