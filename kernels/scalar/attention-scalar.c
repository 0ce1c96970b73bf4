/*
 * attention-scalar.c - scaled dot-product attention, the reference every SIMD
 * tier is tested against (peak_attention in peak.h).
 *
 * One query row at a time, the textbook way: all scores of the row into the
 * worker's scratch, then the max, the exponentials and P.V.  The scheduler
 * gives the kernel blocks of rows (schedule/schedule-attention.c).  Everything after the
 * float inputs is double (dot products, scale, bias, exp, the row sum, the
 * P.V accumulator), so the result is the exact attention of the given
 * floats up to ~1e-15 relative before the final rounding to float, and no
 * finite input overflows.
 *
 * Edge cases, per query row:
 *   - masked keys: neither K nor V is read (NaN stored there cannot leak);
 *   - no visible key, or every visible score -inf: O = 0, lse = -inf;
 *   - a visible score that is +inf or NaN: O = NaN, lse = NaN;
 *   - logit options (peak_logits) in double too: the cap by tanh, the
 *     exact ALiBi distance, the sink as one more term of the row's sum;
 *     with a sink, a row that sees nothing has lse = sink.
 */
#include "convert.h"
#include "internal.h"
#include "logits.h"
#include "mask.h"

#include <assert.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>

/* A worker's scratch after the slot head: scores[kv_len] then
   acc[v_head_dim], all double (the slot is 64-byte aligned, so both arrays
   are naturally aligned). */
typedef struct attention_scratch {
    double *scores;
    double *acc;
} attention_scratch;

/* Where one (b, h, i) row reads and writes, and the mask that applies. */
typedef struct attention_row {
    const float *q;
    const void *k; /* key 0 of kv head h/g; key j at k + j * k_ld elements */
    const void *v;
    peak_dtype k_type, v_type;
    float *o;
    float *lse;
    ptrdiff_t k_ld, v_ld;
    const uint8_t *keep;
    const float *bias;
    peak_key_range keys;
    peak_logit_row lg;
} attention_row;

/* Element c of row j of K or V (type t, rows ld elements apart), exact. */
static double kv_at(const void *x, peak_dtype t, ptrdiff_t ld, size_t j, size_t c)
{
    const char *row = (const char *)x + (ptrdiff_t)j * ld * (ptrdiff_t)peak_dtype_bytes(t);
    return (double)peak_f32_of_bits(peak_convert_load(row, t, c));
}

/* q . K[j] in double. */
static double dot(const float *q, const attention_row *r, size_t j, size_t n)
{
    double s = 0.0;
    for (size_t d = 0; d < n; d++)
        s += (double)q[d] * kv_at(r->k, r->k_type, r->k_ld, j, d);
    return s;
}

static bool row_visible(const attention_row *r, size_t j)
{
    return j >= r->keys.lo && j < r->keys.hi && peak_mask_visible(r->keep, r->bias, j);
}

/* Fills scores for the visible keys and returns their maximum; *poisoned
   is set when one of them is +inf or NaN. */
static double row_scores(const attention_row *r, const peak_attention_desc *d, double *scores,
                         bool *poisoned)
{
    double m = -INFINITY;
    *poisoned = false;
    for (size_t j = r->keys.lo; j < r->keys.hi; j++) {
        if (!row_visible(r, j))
            continue;
        double s = dot(r->q, r, j, d->head_dim) * (double)d->scale;
        if (r->lg.softcap != 0.0f)
            s = (double)r->lg.softcap * tanh(s / (double)r->lg.softcap);
        if (r->lg.alibi != PEAK_ALIBI_NONE) {
            const double dist = (double)(r->lg.qpos - (int64_t)j);
            s -= (double)r->lg.slope * (r->lg.alibi == PEAK_ALIBI_SYMMETRIC ? fabs(dist) : dist);
        }
        if (r->bias)
            s += (double)r->bias[j];
        scores[j] = s;
        if (isnan(s) || s == INFINITY)
            *poisoned = true;
        else if (s > m)
            m = s;
    }
    return m;
}

/* acc = sum_j exp(s_j - m) V_j over visible keys; returns the sum of the
   weights, the sink's included. */
static double row_accumulate(const attention_row *r, size_t dv, double m,
                             const attention_scratch *w)
{
    double sum = r->lg.has_sink ? exp((double)r->lg.sink - m) : 0.0;
    for (size_t c = 0; c < dv; c++)
        w->acc[c] = 0.0;
    for (size_t j = r->keys.lo; j < r->keys.hi; j++) {
        if (!row_visible(r, j))
            continue;
        const double p = exp(w->scores[j] - m);
        sum += p;
        for (size_t c = 0; c < dv; c++)
            w->acc[c] += p * kv_at(r->v, r->v_type, r->v_ld, j, c);
    }
    return sum;
}

static void row_fill(const attention_row *r, size_t dv, float value, float lse)
{
    for (size_t c = 0; c < dv; c++)
        r->o[c] = value;
    if (r->lse)
        *r->lse = lse;
}

/* Narrows the row's keys to a part's [lo, hi). */
static void row_clip(attention_row *r, size_t lo, size_t hi)
{
    r->keys.lo = r->keys.lo > lo ? r->keys.lo : lo;
    r->keys.hi = r->keys.hi < hi ? r->keys.hi : hi;
    if (r->keys.lo > r->keys.hi)
        r->keys.lo = r->keys.hi;
}

static void attention_one_row(const attention_row *r, const peak_attention_desc *d,
                              const attention_scratch *w)
{
    bool poisoned;
    const double m = row_scores(r, d, w->scores, &poisoned);
    if (poisoned) {
        row_fill(r, d->v_head_dim, NAN, NAN);
        return;
    }
    if (m == -INFINITY) {
        row_fill(r, d->v_head_dim, 0.0f, r->lg.has_sink ? r->lg.sink : -INFINITY);
        return;
    }
    /* The maximum (a score's or the sink's) contributes exp(0) = 1, so
       sum >= 1. */
    const double ms = r->lg.has_sink && (double)r->lg.sink > m ? (double)r->lg.sink : m;
    const double sum = row_accumulate(r, d->v_head_dim, ms, w);
    for (size_t c = 0; c < d->v_head_dim; c++)
        r->o[c] = (float)(w->acc[c] / sum);
    if (r->lse)
        *r->lse = (float)(ms + log(sum));
}

/* Points r at the operands of (b, h, i); the K/V pointers only depend on
   (b, kv head) and are set by the caller. */
static void row_locate(attention_row *r, const float *q, float *o, const peak_attention_desc *d,
                       size_t b, size_t h, size_t i)
{
    r->q = q + (ptrdiff_t)b * d->q_stride[0] + (ptrdiff_t)i * d->q_stride[1] +
           (ptrdiff_t)h * d->q_stride[2];
    r->o = o + (ptrdiff_t)b * d->o_stride[0] + (ptrdiff_t)i * d->o_stride[1] +
           (ptrdiff_t)h * d->o_stride[2];
    r->lse = d->lse ? d->lse + (ptrdiff_t)b * d->lse_stride[0] +
                          (ptrdiff_t)h * d->lse_stride[1] + (ptrdiff_t)i * d->lse_stride[2]
                    : NULL;
    r->keys = peak_mask_keys(&d->mask, b, i, d->q_len, d->kv_len);
    r->keep = peak_mask_keep_row(&d->mask, b, h, i);
    r->bias = peak_mask_bias_row(&d->mask, b, h, i);
    r->lg = peak_logit_row_of(&d->logits, &d->mask, d->heads, h, i, d->q_len, d->kv_len);
}

/* The slot after its head: 8 (Lk + Dv) bytes, or the sentinel SIZE_MAX
   rounded down to 64 (no allocator can satisfy it, and a caller rounding
   it up to the alignment cannot wrap) when that does not fit. */
static size_t slot_bytes(const peak_attention_desc *d)
{
    const size_t n = d->kv_len + d->v_head_dim;
    if (n < d->kv_len || n > (SIZE_MAX - PEAK_ATTENTION_SLOT_HEAD - 63) / sizeof(double))
        return SIZE_MAX & ~(size_t)63;
    return (PEAK_ATTENTION_SLOT_HEAD + n * sizeof(double) + 63) & ~(size_t)63;
}

/* Rows are independent here (one at a time, rounded once), so any cut of
   them gives the same bytes; keys are never split, so that the reference
   keeps its single rounding.  Blocks of 16 rows: a row of Lk = 512 keys at
   Dh = Dv = 64 takes ~50 us here (0.76 ns per element of Dh + Dv and key,
   measured on Zen 3: the cost model's number), so a part stays far above
   the runner's cost per item, while a decode step of 8 heads still has 8
   parts. */
void peak_f32_attention_geometry__scalar(const peak_attention_desc *desc,
                                         peak_attention_geometry *g)
{
    g->block_rows = 16;
    g->row_path_rows = 0;
    g->row_states = 1;
    g->key_tile = 1;
    g->split_keys = false;
    g->tile_ns = g->row_ns = 0.76;
    g->kv_ns = 0.0;
    g->slot_bytes = slot_bytes(desc);
}

void peak_f32_attention_block__scalar(float *o, const float *q, const void *k, const void *v,
                                      const peak_attention_desc *desc,
                                      const peak_attention_part *part, void *slot)
{
    assert(o && q && k && v && desc && part && slot);
    const peak_attention_desc *d = desc;
    assert(d->kv_heads > 0 && d->heads % d->kv_heads == 0);
    /* scale != 0 in its bits (api.c), but a subnormal scale compares
       equal to 0 under DAZ, so only finiteness is asserted. */
    assert(d->v_head_dim > 0 && isfinite(d->scale));
    double *scratch = (double *)(void *)((char *)slot + PEAK_ATTENTION_SLOT_HEAD);
    const attention_scratch w = {scratch, scratch + d->kv_len};
    const size_t group = d->heads / d->kv_heads, b = part->b;
    attention_row r;
    r.k_ld = d->k_stride[1];
    r.v_ld = d->v_stride[1];
    r.k_type = d->k_type;
    r.v_type = d->v_type;
    for (size_t kvh = part->kvh; kvh < part->kvh + part->nkvh; kvh++) {
        r.k = (const char *)k + ((ptrdiff_t)b * d->k_stride[0] + (ptrdiff_t)kvh * d->k_stride[2]) *
                                    (ptrdiff_t)peak_dtype_bytes(d->k_type);
        r.v = (const char *)v + ((ptrdiff_t)b * d->v_stride[0] + (ptrdiff_t)kvh * d->v_stride[2]) *
                                    (ptrdiff_t)peak_dtype_bytes(d->v_type);
        for (size_t R = part->first; R < part->first + part->rows; R++) {
            row_locate(&r, q, o, d, b, kvh * group + R % group, R / group);
            row_clip(&r, part->key_lo, part->key_hi);
            attention_one_row(&r, d, &w);
        }
    }
}

void peak_f32_attention_rows__scalar(float *o, const float *q, const void *k, const void *v,
                                     const peak_attention_desc *desc,
                                     const peak_attention_part *part, void *slot)
{
    peak_f32_attention_block__scalar(o, q, k, v, desc, part, slot);
}
