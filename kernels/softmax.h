/*
 * softmax.h - what the SIMD softmax tiers share apart from arithmetic:
 * walking the rows of a peak_softmax_desc, resolving each row's mask with
 * mask.h (so every tier sees exactly the scalar reference's visible set),
 * and filling the rare rows whose result is not computed but decided (no
 * finite maximum, a visible NaN or +inf).  ISA-free: the AVX2, AVX-512 and
 * NEON files hold only their vector loops.
 *
 * The row algorithm every tier follows (softmax-scalar.c has the reasons
 * for the special rows):
 *   1. max m of the visible scores over the structural range [lo, hi)
 *      (causal, window, key_len: nothing outside it is read or computed);
 *      a row with element masks (keep, bias) first writes its scores to
 *      its work area, -inf at masked keys, so that later passes need no
 *      mask;
 *   2. if m is -inf (every visible score -inf or NaN): a zero row, or a
 *      NaN row if some visible score is NaN;
 *   3. the terms e_j = c e^(s_j - m) into the row's work area (c in
 *      [1, 2), common to the row: below), then their sum in double; a NaN
 *      sum means a visible NaN or +inf (inf - inf): a NaN row;
 *   4. y = work * (1/sum), rounded once;
 *   5. zeros over [0, lo) and [hi, k_len), by stores alone.
 * The work area is y[lo, hi) itself (step 4 scales in place), except for
 * outputs too large for any cache (PEAK_SOFTMAX_STREAM_BYTES): there it is a
 * buffer on the stack that stays in L1, and steps 4 and 5 write y with
 * non-temporal stores, which skip reading every line of y from memory
 * before overwriting it: a third less memory traffic for a kernel that,
 * at that size, waits on memory.
 *
 * Accuracy: every probability of at least FLT_MIN within 4 ulp of the
 * exact softmax of the float scores, relative however small (peak.h).
 * Where the error goes, in u = 2^-24 (an ulp of y is u to 2u of y):
 *   - the scores x * scale (+ bias): formed in float, as peak.h defines
 *     them and as the oracle forms them: no error to count;
 *   - s - m: never rounded.  fl(s - m) errs by up to half an ulp of
 *     s - m, which e^(s - m) turns into as much relative error: 64 u where
 *     s - m = -87, near FLT_MIN (the earlier 2^t, t = fl(fl(s - m) log2 e),
 *     lost as much again in t: 16-28 ulp on probabilities near 1e-6, up
 *     to 121 below).  So a row whose maximum is below PEAK_SOFTMAX_SHIFT_MIN
 *     (256) in magnitude subtracts nothing: its terms are 2^-k e^s,
 *     k = floor(m log2(e)), which is e^(s - m) times c = 2^(m log2(e) - k),
 *     a factor in [1, 2) that every term of the row shares and e_j / sum
 *     cancels.  A row whose maximum is 256 or more in magnitude subtracts
 *     it (k = 0, c = 1): every term not flushed to 0 has s within 88.03 of
 *     m, so s and m are within a factor of 2 and s - m is exact
 *     (Sterbenz);
 *   - the exponential of that argument a (exp.h): a Cody-Waite
 *     reduction a - M ln2 in two FMAs, peak_exp's degree-6 polynomial
 *     and an exact 2^(M - k): at most 1.29 u relative, measured
 *     exhaustively over every float a in [-345, 256], the range both kinds
 *     of row reach (a >= (k - 127) ln 2 >= -344.5 after the clamp);
 *   - the sum: added in double, into 16 accumulators (2^-37 relative for
 *     a million keys), so its error is its terms': a weighted mean of
 *     theirs, at most 1.29 u.  (In float, a lane whose partial sum is large rounds each
 *     small term added to it away: 7 ulp in tests/test-softmax.c's
 *     wide_range_relative_ulp.)  One order of addition on every SIMD
 *     tier, PEAK_SOFTMAX_SUM_LANES;
 *   - 1/sum: a double, split into two floats hi + lo, y = e * hi + e * lo
 *     in one FMA: one rounding, 0.5 ulp, and 2^-47 for e * lo's.  Where
 *     hi alone is within 0.5 u of 1/sum (most rows, peak_softmax_factor_for),
 *     lo is 0 and y = e * hi: the same 0.5 ulp rounding, plus hi's own
 *     error, at most 0.5 u relative (y = e * (float)(1/sum) on every row
 *     would add up to 1 u).
 * Total: 0.5 ulp + (1.29 + 1.29 + 0.5) u y <= 3.58 ulp from the exact
 * probability, within 4 ulp of it.  Measured: 2.92 ulp over 22M
 * probabilities down to FLT_MIN (bench/accuracy.c, "wide"; 2.47 with the
 * FMA on every row).
 *
 * The terms below FLT_MIN: the clamp of exp.h flushes a term to +0
 * when M - k <= -127, i.e. when 2^-k e^s < 2^-126.5, so when
 * e^(s - m) < 2^-127.5 at least (the factor above is below 2); a term of
 * at least FLT_MIN stays a normal float (c >= 1), the others may be
 * subnormal.  The largest term is 1 (e^0, exactly, when m is subtracted)
 * or c e^0 in [1, 2) (less its rounding), so sum >= 1, and a row with one
 * visible key gives exactly 1 (e * (hi + lo) is within 2^-47 of 1, e * hi
 * alone within 2^-25: peak_softmax_factor_for).
 *
 * Rows are processed in groups of up to PEAK_SOFTMAX_GROUP, each step for every
 * row of the group before the next step: a short row is a chain of
 * dependent latencies (max reduction, exponentials, sum reduction,
 * division), and interleaving independent rows lets the core overlap them
 * (1.4x faster than one row at a time for rows of 128 keys, AVX-512).
 */
#ifndef PEAK_SOFTMAX_H
#define PEAK_SOFTMAX_H

#include "exp.h"
#include "internal.h"
#include "mask.h"

#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Forces inlining where a bool argument selects a specialisation: the
   scaled and unscaled loops must each be compiled with the test gone. */
#define PEAK_SOFTMAX_INLINE static inline __attribute__((always_inline))

/* log2(e) and ln(2) in double, for the row constants. */
#define PEAK_SOFTMAX_LOG2E_D 1.4426950408889634
#define PEAK_SOFTMAX_LN2_D 0.6931471805599453

/* One row and the part of the mask that applies to it. */
typedef struct peak_softmax_row {
    const float *x;
    float *y;
    float *work;         /* k_len floats for steps 1 to 4: y, or scratch */
    const uint8_t *keep; /* NULL: no boolean mask */
    const float *bias;   /* NULL: no additive mask */
    size_t lo, hi;       /* structural key range; lo == hi: none visible */
    size_t k_len;
    float scale;         /* never 0 (api.c resolves "0 means 1") */
} peak_softmax_row;

/* Rows per group at most, and the L1 bytes a group's x and y rows may
   take (a row is re-read by steps 3 and 4, and should still be there). */
#define PEAK_SOFTMAX_GROUP 8
#define PEAK_SOFTMAX_GROUP_BYTES 32768

/* Outputs of more than this many bytes are streamed (see the top of this
   file): x and y then take over 32 MiB, beyond the last-level cache a core
   can count on, and y would come from memory anyway.  Measured on the
   development machine (8 heads of L x L, AVX-512): streaming 9% slower at
   13 MiB of output, 1.3x faster at 19 MiB, 1.5x at 26 MiB.  Rows of up to
   PEAK_SOFTMAX_SCRATCH_KEYS keys only: the scratch buffer is on the stack. */
#define PEAK_SOFTMAX_STREAM_BYTES ((size_t)16 << 20)
#define PEAK_SOFTMAX_SCRATCH_KEYS 4096

typedef void (*peak_softmax_group_fn)(const peak_softmax_row *rows, size_t n, bool stream);

/* Whether d's output is streamed.  Its size cannot overflow: y's rows do
   not overlap (api.c), so they fit in y's extent, which fits in a
   ptrdiff_t. */
static inline bool peak_softmax_streams(const peak_softmax_desc *d)
{
    return d->k_len <= PEAK_SOFTMAX_SCRATCH_KEYS &&
           d->batch * d->heads * d->q_len * d->k_len > PEAK_SOFTMAX_STREAM_BYTES / sizeof(float);
}

/* Calls group_fn on consecutive runs of rows, in memory order of
   [b, h, i].  Static inline, so that the call through group_fn is resolved
   at compile time in each tier's file. */
static inline void peak_softmax_for_each_group(float *y, const float *x, const peak_softmax_desc *d,
                                          peak_softmax_group_fn group_fn)
{
    const peak_mask *m = &d->mask;
    const bool stream = peak_softmax_streams(d);
    const size_t fit = stream ? PEAK_SOFTMAX_SCRATCH_KEYS / d->k_len
                              : PEAK_SOFTMAX_GROUP_BYTES / (2 * sizeof(float) * d->k_len);
    const size_t per_group = fit < 1 ? 1 : fit > PEAK_SOFTMAX_GROUP ? PEAK_SOFTMAX_GROUP : fit;
    const float scale = peak_f32_is_zero(d->scale) ? 1.0f : d->scale;
    _Alignas(64) float scratch[PEAK_SOFTMAX_SCRATCH_KEYS];
    peak_softmax_row rows[PEAK_SOFTMAX_GROUP];
    size_t n = 0;
    for (size_t b = 0; b < d->batch; b++) {
        for (size_t h = 0; h < d->heads; h++) {
            const float *xr = x + (ptrdiff_t)b * d->x_stride[0] + (ptrdiff_t)h * d->x_stride[1];
            float *yr = y + (ptrdiff_t)b * d->y_stride[0] + (ptrdiff_t)h * d->y_stride[1];
            for (size_t i = 0; i < d->q_len; i++, xr += d->x_stride[2], yr += d->y_stride[2]) {
                peak_softmax_row *r = &rows[n];
                const peak_key_range keys = peak_mask_keys(m, b, i, d->q_len, d->k_len);
                r->x = xr;
                r->y = yr;
                r->work = stream ? scratch + n * d->k_len : yr;
                r->lo = keys.lo;
                r->hi = keys.hi;
                r->keep = peak_mask_keep_row(m, b, h, i);
                r->bias = peak_mask_bias_row(m, b, h, i);
                r->k_len = d->k_len;
                r->scale = scale;
                if (++n == per_group) {
                    group_fn(rows, n, stream);
                    n = 0;
                }
            }
        }
    }
    if (n)
        group_fn(rows, n, stream);
}

/* A rare row (at most once per row, never in the hot loop): `value` at
   the visible keys of [lo, hi), +0 at the masked ones. */
static inline void peak_softmax_fill_visible(const peak_softmax_row *r, float value)
{
    for (size_t j = r->lo; j < r->hi; j++)
        r->y[j] = peak_mask_visible(r->keep, r->bias, j) ? value : 0.0f;
}

/* Whether some s[j] * scale is NaN.  Not the same as some s[j] being NaN:
   with denormals-are-zero set, a subnormal scale reads as 0 and an
   infinite x gives inf * 0 = NaN, as it does in the scalar reference. */
static inline bool peak_softmax_any_nan(const float *s, size_t n, float scale)
{
    for (size_t j = 0; j < n; j++)
        if (isnan(s[j] * scale))
            return true;
    return false;
}

/* ---- the exponentials' row constants --------------------------------- */

/* Rows whose maximum is this large in magnitude subtract it from every
   score (shift = max, k = 0); the others subtract nothing and take k from
   the maximum instead (see the top of this file).  Any bound of at least
   2 * 88.03 keeps s - max exact for every term that is not flushed; below
   256, k stays within [-370, 369], which keeps the arguments in the
   range whose error exp.h measured. */
#define PEAK_SOFTMAX_SHIFT_MIN 256.0f

/* What a tier's exponential needs of a row: e_j = 2^-k e^(s_j - shift),
   +0 for s_j - shift <= lo. */
typedef struct peak_softmax_exp_row {
    float shift; /* subtracted from every score: 0, or the row's maximum */
    float lo;    /* (k - 127) ln 2: s - shift is clamped to >= lo, which gives +0 */
    float magic; /* PEAK_EXP_ROUND_MAGIC_BIASED - k: n = M - k + 127 in its low bits */
} peak_softmax_exp_row;

static inline peak_softmax_exp_row peak_softmax_exp_row_for(float max)
{
    peak_softmax_exp_row e;
    double k = 0.0;
    if (fabsf(max) < PEAK_SOFTMAX_SHIFT_MIN) {
        e.shift = 0.0f;
        k = floor((double)max * PEAK_SOFTMAX_LOG2E_D);
    } else {
        e.shift = max; /* +inf too: every s - shift is then NaN or -inf */
    }
    e.lo = (float)((k - 127.0) * PEAK_SOFTMAX_LN2_D);
    e.magic = PEAK_EXP_ROUND_MAGIC_BIASED - (float)k;
    return e;
}

/* A row's sum, in double and in one order on every SIMD tier (8, 16 or 4
   lanes alike), so that their sums, and so their probabilities, are the
   same bits: key j adds into accumulator j % PEAK_SOFTMAX_SUM_LANES, in order
   of j; then the accumulators fold pairwise, a[i] += a[i + 8] for i < 8,
   then a[i] += a[i + 4], a[i + 2], a[i + 1] (the order of
   _mm512_reduce_add_pd). */
#define PEAK_SOFTMAX_SUM_LANES 16

/* 1/sum as two floats: y = e * hi + e * lo rounds once (an FMA), where
   e * (float)(1/sum) would round twice: up to 1 u more, which would take
   the bound past 4 ulp.  Where (float)(1/sum) is within
   PEAK_SOFTMAX_FACTOR_ONE_ERR of 1/sum, lo is 0 and the tiers multiply once
   (e * hi, the same bits as the FMA with e * 0): the budget at the top of
   this file counts that error.  About 70% of rows (1/sum's rounding error
   is uniform over +-half an ulp, and half an ulp is 2^-25 to 2^-24 of it);
   the FMA on every row took 1.5-2% longer on Zen 3 (AVX2). */
typedef struct peak_softmax_factor {
    float hi, lo;
} peak_softmax_factor;

/* Just under 2^-25 (0.5 u) relative: a row with one visible key still
   gives exactly 1, since e * hi is then within 2^-25 of 1 (1/sum's own
   2^-53 included), which rounds to 1. */
#define PEAK_SOFTMAX_FACTOR_ONE_ERR 0x1.fcp-26

static inline peak_softmax_factor peak_softmax_factor_for(double sum)
{
    const double f = 1.0 / sum;
    peak_softmax_factor r;
    r.hi = (float)f;
    /* Exact: hi is f rounded, within a factor of 2 of it. */
    const double lo = f - (double)r.hi;
    r.lo = fabs(lo) <= PEAK_SOFTMAX_FACTOR_ONE_ERR * f ? 0.0f : (float)lo;
    return r;
}

/* ---- the row algorithm, over one tier's passes ------------------------- */

/* A tier's vector loops.  `scaled` false means scale == 1 (the multiply is
   skipped: x * 1 == x); `stream`: write y with non-temporal stores.  Each
   tier's functions are PEAK_SOFTMAX_INLINE, so that the calls below, through a
   constant table, are inlined and the flags are folded away. */
typedef struct peak_softmax_passes {
    /* Max of x[j] * scale over j < n, NaN skipped; -inf if none. */
    float (*max_dense)(const float *x, size_t n, float scale, bool scaled);
    /* A masked row's scores into work[lo, hi), -inf where masked; their
       max. */
    float (*scores_masked)(const peak_softmax_row *r, bool scaled);
    /* dst[j] = 2^-k e^(s[j] * scale - shift) for j < n with the row's
       constants (peak_softmax_exp_row); dst may be s. */
    void (*exp_store)(float *dst, const float *s, size_t n, float scale,
                      const peak_softmax_exp_row *e, bool scaled);
    /* The sum of src[0 .. n) in double, in the order of
       PEAK_SOFTMAX_SUM_LANES. */
    double (*sum)(const float *src, size_t n);
    /* y[j] = src[j] * (f.hi + f.lo), rounded once, for j < n (src may be
       y). */
    void (*scale_store)(float *y, const float *src, size_t n, peak_softmax_factor f, bool stream);
    /* scale_store, and in the same loop sum(next, m), which it returns
       (next: another row's terms); NULL: the two passes one after the
       other (AVX-512 and NEON: not yet measured on their hardware). */
    double (*scale_store_sum)(float *y, const float *src, size_t n, peak_softmax_factor f,
                              bool stream, const float *next, size_t m);
    void (*store_zeros)(float *y, size_t n, bool stream);
} peak_softmax_passes;

/* Where step 3 finds a row's scores. */
static inline const float *peak_softmax_scores(const peak_softmax_row *r)
{
    return (r->keep || r->bias ? r->work : r->x) + r->lo;
}

/* Step 2 of the row algorithm: every visible score is -inf or NaN.  An
   unmasked row's scores are still x (times scale); a masked row's in the
   work area are finished. */
static inline void peak_softmax_no_finite_max(const peak_softmax_row *r)
{
    const float scale = r->keep || r->bias ? 1.0f : r->scale;
    peak_softmax_fill_visible(r, peak_softmax_any_nan(peak_softmax_scores(r), r->hi - r->lo, scale) ? NAN : 0.0f);
}

/* Step 1; the max of the row's visible scores. */
PEAK_SOFTMAX_INLINE float peak_softmax_max(const peak_softmax_row *r, const peak_softmax_passes *p, bool scaled)
{
    if (r->keep || r->bias)
        return p->scores_masked(r, scaled);
    return p->max_dense(r->x + r->lo, r->hi - r->lo, r->scale, scaled);
}

/* Step 3's exponentials.  A masked row's scores in the work area are
   finished: no scale. */
PEAK_SOFTMAX_INLINE void peak_softmax_exp(const peak_softmax_row *r, const peak_softmax_passes *p, bool scaled,
                                float max)
{
    float *dst = r->work + r->lo;
    const float *s = peak_softmax_scores(r);
    const size_t n = r->hi - r->lo;
    const peak_softmax_exp_row e = peak_softmax_exp_row_for(max);
    scaled = scaled && !r->keep && !r->bias;
    if (scaled)
        p->exp_store(dst, s, n, r->scale, &e, true);
    else
        p->exp_store(dst, s, n, 1.0f, &e, false);
}

/* Steps 1 to 5 for each of the n rows of a group, step by step. */
PEAK_SOFTMAX_INLINE void peak_softmax_group_steps(const peak_softmax_row *rows, size_t n,
                                        const peak_softmax_passes *p, bool scaled, bool stream)
{
    float max[PEAK_SOFTMAX_GROUP];
    bool terms[PEAK_SOFTMAX_GROUP]; /* step 3 stored the row's terms */
    for (size_t k = 0; k < n; k++) /* (-inf where unused: clang-analyzer) */
        max[k] = rows[k].lo < rows[k].hi ? peak_softmax_max(&rows[k], p, scaled) : -INFINITY;
    for (size_t k = 0; k < n; k++) {
        const peak_softmax_row *r = &rows[k];
        terms[k] = r->lo < r->hi && max[k] != -INFINITY;
        if (terms[k])
            peak_softmax_exp(r, p, scaled, max[k]);
        else if (r->lo < r->hi)
            peak_softmax_no_finite_max(r);
    }
    /* Step 3's sums and step 4, row after row of those with terms: row k's
       scaling (multiplies and stores) in one loop with the next row's sum
       (conversions and adds, on other ports): the AVX2 kernel 2.4% faster
       (geomean of 14 shapes, Zen 3).  The order of each sum's additions is
       its own loop's, so the bits are the same with or without it (NULL).
       A NaN sum (a visible NaN or +inf) makes a NaN row; otherwise
       sum >= 1: the largest term is at least 1 (the top of this file). */
    size_t k = 0;
    while (k < n && !terms[k])
        k++;
    double sum = k < n ? p->sum(rows[k].work + rows[k].lo, rows[k].hi - rows[k].lo) : NAN;
    while (k < n) {
        const peak_softmax_row *r = &rows[k];
        size_t next = k + 1;
        while (next < n && !terms[next])
            next++;
        const float *next_terms = next < n ? rows[next].work + rows[next].lo : NULL;
        const size_t next_n = next < n ? rows[next].hi - rows[next].lo : 0;
        double next_sum = NAN;
        if (isnan(sum)) {
            peak_softmax_fill_visible(r, NAN);
        } else if (p->scale_store_sum && next < n) {
            next_sum = p->scale_store_sum(r->y + r->lo, r->work + r->lo, r->hi - r->lo,
                                          peak_softmax_factor_for(sum), stream, next_terms, next_n);
        } else {
            p->scale_store(r->y + r->lo, r->work + r->lo, r->hi - r->lo,
                           peak_softmax_factor_for(sum), stream);
        }
        if (next < n && (isnan(sum) || !p->scale_store_sum))
            next_sum = p->sum(next_terms, next_n);
        sum = next_sum;
        k = next;
    }
    for (size_t i = 0; i < n; i++) {
        p->store_zeros(rows[i].y, rows[i].lo, stream);
        p->store_zeros(rows[i].y + rows[i].hi, rows[i].k_len - rows[i].hi, stream);
    }
}

/* A tier's group function: specialises the steps for scale == 1 and for
   streaming. */
PEAK_SOFTMAX_INLINE void peak_softmax_softmax_group(const peak_softmax_row *rows, size_t n,
                                          const peak_softmax_passes *p, bool stream)
{
    const bool scaled = rows[0].scale != 1.0f;
    if (stream)
        scaled ? peak_softmax_group_steps(rows, n, p, true, true)
               : peak_softmax_group_steps(rows, n, p, false, true);
    else
        scaled ? peak_softmax_group_steps(rows, n, p, true, false)
               : peak_softmax_group_steps(rows, n, p, false, false);
}

#endif /* PEAK_SOFTMAX_H */
