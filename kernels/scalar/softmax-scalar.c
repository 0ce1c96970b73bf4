/*
 * softmax-scalar.c - masked softmax, the reference every SIMD tier is tested
 * against (peak_softmax in peak.h).
 *
 * Scores are formed in float exactly as a SIMD tier would form them
 * (s = x * scale, the cap, the ALiBi term, then s += bias, each rounded
 * once, never fused: peak.h, peak_logits); everything
 * after that is double: exp(s - max) by the C library's exp and the row sum
 * accumulated in double, so the only error left in y is the final rounding
 * to float (<= 0.5 ULP plus ~1e-15 relative) and no finite row overflows.
 *
 * Rows are processed in three passes (max, sum, write) that each re-read x
 * instead of keeping exponentials in a buffer: no workspace is needed, and
 * in-place operation is safe because pass 3 reads x[j] before writing y[j].
 *
 * Edge cases, per row:
 *   - masked keys are never read from x and are written as +0;
 *   - no visible key, or every visible score -inf: all zeros (a row whose
 *     visible scores are all -inf has no probability mass to share);
 *   - a visible score that is +inf or NaN: every visible entry NaN, masked
 *     entries still 0;
 *   - a sink joins the max and the sum of a row with a finite maximum.
 */
#include "internal.h"
#include "logits.h"
#include "mask.h"
#include "tanh.h"

#include <assert.h>
#include <float.h>
#include <math.h>
#include <stdbool.h>

/* One row of the softmax and the mask that applies to it. */
typedef struct softmax_row {
    const float *x;
    float *y;
    const uint8_t *keep;
    const float *bias;
    peak_key_range keys;
    size_t k_len;
    float scale;
    peak_logit_row lg; /* soft-capping, ALiBi, sink */
} softmax_row;

/* The scaled, biased score of a visible key; false if the key is masked. */
static bool row_score(const softmax_row *r, size_t j, float *s)
{
    if (!peak_mask_visible(r->keep, r->bias, j))
        return false;
    float v = r->x[j] * r->scale;
    if (r->lg.softcap != 0.0f)
        v = peak_softcap_ref(v, r->lg.softcap);
    v = peak_alibi_add(&r->lg, v, j);
    if (r->bias)
        v += r->bias[j];
    *s = v;
    return true;
}

/* The maximum visible score; *poisoned is set when a visible score is +inf
   or NaN (which max-subtraction cannot handle). -inf when nothing is
   visible. */
static float row_max(const softmax_row *r, bool *poisoned)
{
    float m = -INFINITY;
    *poisoned = false;
    for (size_t j = r->keys.lo; j < r->keys.hi; j++) {
        float s;
        if (!row_score(r, j, &s))
            continue;
        if (isnan(s) || s == INFINITY)
            *poisoned = true;
        else if (s > m)
            m = s;
    }
    return m;
}

/* e^(s - m), with terms below FLT_MIN taken as 0 (peak.h): every tier
   keeps a term of at least FLT_MIN and drops one below 2^-127.5; the SIMD
   tiers may keep those in between as subnormals, which moves a probability
   below FLT_MIN by less than FLT_MIN. */
static double row_exp(float s, float m)
{
    double e = exp((double)s - (double)m);
    return e < (double)FLT_MIN ? 0.0 : e;
}

/* The sink's term joins the sum (peak.h: peak_logits), after the keys'. */
static double row_sum(const softmax_row *r, float m)
{
    double sum = r->lg.has_sink ? row_exp(r->lg.sink, m) : 0.0;
    for (size_t j = r->keys.lo; j < r->keys.hi; j++) {
        float s;
        if (row_score(r, j, &s))
            sum += row_exp(s, m);
    }
    return sum;
}

/* Writes every column: `visible_value` (NaN or 0) at visible keys, 0 at
   masked ones. */
static void row_fill(const softmax_row *r, float visible_value)
{
    for (size_t j = 0; j < r->k_len; j++) {
        bool in_range = j >= r->keys.lo && j < r->keys.hi;
        r->y[j] = in_range && peak_mask_visible(r->keep, r->bias, j) ? visible_value : 0.0f;
    }
}

static void row_normalise(const softmax_row *r, float m, double sum)
{
    for (size_t j = 0; j < r->k_len; j++) {
        float s;
        bool in_range = j >= r->keys.lo && j < r->keys.hi;
        if (in_range && row_score(r, j, &s))
            r->y[j] = (float)(row_exp(s, m) / sum);
        else
            r->y[j] = 0.0f;
    }
}

static void softmax_one_row(const softmax_row *r)
{
    bool poisoned;
    const float m = row_max(r, &poisoned);
    if (poisoned) {
        row_fill(r, NAN);
        return;
    }
    if (m == -INFINITY) {
        row_fill(r, 0.0f);
        return;
    }
    /* The maximum contributes exp(0) = 1, so sum >= 1.  A sink joins the
       maximum only once some key is visible: a row of none stays zeros. */
    const float ms = r->lg.has_sink && r->lg.sink > m ? r->lg.sink : m;
    row_normalise(r, ms, row_sum(r, ms));
}

/* stream is ignored: the reference has no non-temporal stores. */
void peak_f32_softmax__scalar(float *y, const float *x, const peak_softmax_desc *desc,
                              size_t row0, size_t rows, bool stream)
{
    (void)stream;
    assert(y && x && desc);
    const peak_softmax_desc *d = desc;
    assert(row0 + rows <= d->batch * d->heads * d->q_len);
    const peak_mask *mask = &d->mask;
    softmax_row r;
    r.k_len = d->k_len;
    /* api.c documents 0 as "no scaling"; resolve it here too so a direct
       kernel call means the same. */
    r.scale = peak_f32_is_zero(d->scale) ? 1.0f : d->scale;
    const ptrdiff_t x0 = peak_softmax_row_offset(d, d->x_stride, row0),
                    y0 = peak_softmax_row_offset(d, d->y_stride, row0);
    for (size_t row = row0; row < row0 + rows; row++) {
        const size_t i = row % d->q_len, h = row / d->q_len % d->heads;
        const size_t b = row / d->q_len / d->heads;
        r.x = x + (peak_softmax_row_offset(d, d->x_stride, row) - x0);
        r.y = y + (peak_softmax_row_offset(d, d->y_stride, row) - y0);
        r.keys = peak_mask_keys(mask, b, i, d->q_len, d->k_len);
        r.keep = peak_mask_keep_row(mask, b, h, i);
        r.bias = peak_mask_bias_row(mask, b, h, i);
        r.lg = peak_logit_row_of(&d->logits, mask, d->heads, h, i, d->q_len, d->k_len);
        softmax_one_row(&r);
    }
}
