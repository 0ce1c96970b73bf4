/*
 * softmax.h - what the SIMD softmax tiers share apart from arithmetic:
 * walking a range of the rows of a peak_softmax_desc (the scheduler's work
 * item, schedule/schedule-softmax.c), resolving each row's mask with
 * mask.h (so every tier sees exactly the scalar reference's visible set),
 * and filling the rare rows whose result is not computed but decided (no
 * finite maximum, a visible NaN or +inf).  ISA-free: the steps and their
 * vector passes are softmax-body.h, written once for the AVX2, AVX-512 and
 * NEON tiers.
 *
 * The row algorithm every tier follows (softmax-scalar.c has the reasons
 * for the special rows):
 *   1. max m of the visible scores over the structural range [lo, hi)
 *      (causal, window, key_len: nothing outside it is read or computed);
 *      a row with element masks (keep, bias) or whose scores the logit
 *      options shape (a cap, ALiBi: peak.h's peak_logits) first forms its
 *      scores in its work area, -inf at masked keys, so that later passes
 *      need neither;
 *   2. if m is -inf (every visible score -inf or NaN): a zero row, or a
 *      NaN row if some visible score is NaN;
 *   3. the terms e_j = c e^(s_j - m) into the row's work area (c in
 *      [1, 2), common to the row: below), then their sum in double; a NaN
 *      sum means a visible NaN or +inf (inf - inf): a NaN row.  With a
 *      sink, m is max(m, sink) from here on, and the sink's term c
 *      e^(sink - m), by the same exponential, joins the sum after the
 *      keys' (it has no output);
 *   4. y = work * (1/sum), rounded once;
 *   5. zeros over [0, lo) and [hi, k_len), by stores alone.
 * The work area is y[lo, hi) itself (step 4 scales in place), except for
 * outputs too large for any cache (PEAK_SOFTMAX_STREAM_BYTES): there it is a
 * buffer on the stack that stays in L1, and steps 4 and 5 write y with
 * non-temporal stores, which skip reading every line of y from memory
 * before overwriting it: a third less memory traffic for a kernel that,
 * at that size, waits on memory.  Whether a call streams depends on the
 * whole call's size, so the scheduler decides it (peak_softmax_streams) and
 * every item of the call follows.
 *
 * Accuracy: every probability of at least FLT_MIN within 4 ulp of the
 * exact softmax of the float scores, relative however small (peak.h).
 * Where the error goes, in u = 2^-24 (an ulp of y is u to 2u of y):
 *   - the scores x * scale (the cap, the ALiBi term, + bias): formed in
 *     float, as peak.h defines them and as the oracle forms them, each
 *     operation rounded once (the cap by tanh-body.h, tanh.h's bits; the
 *     distance exact below 2^24, converted once beyond): no error to
 *     count;
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
 *     a million keys), so its error is its terms' (a sink's too): a
 *     weighted mean of theirs, at most 1.29 u.  (In float, a lane whose
 *     partial sum is large rounds each small term added to it away: 7 ulp
 *     in tests/test-softmax.c's wide_range_relative_ulp.)  One order of
 *     addition on every SIMD tier, PEAK_SOFTMAX_SUM_LANES;
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
 * subnormal.  The largest term, a key's or the sink's, is 1 (e^0,
 * exactly, when m is subtracted) or c e^0 in [1, 2) (less its rounding),
 * so sum >= 1, and a row with one visible key and no sink gives exactly 1
 * (e * (hi + lo) is within 2^-47 of 1, e * hi alone within 2^-25:
 * peak_softmax_factor_for).
 *
 * Rows are processed in groups of up to PEAK_SOFTMAX_GROUP, each step for every
 * row of the group before the next step: a short row is a chain of
 * dependent latencies (max reduction, exponentials, sum reduction,
 * division), and interleaving independent rows lets the core overlap them
 * (1.4x faster than one row at a time for rows of 128 keys, AVX-512).
 * A row's bits do not depend on its group: every step is the row's own
 * (the fused scaling and next row's sum add in the sum's own order,
 * softmax-body.h); the scheduler still cuts a call at multiples of the
 * group size (peak_softmax_group_rows), so a call's groups are the same
 * however it is cut.
 */
#ifndef PEAK_SOFTMAX_H
#define PEAK_SOFTMAX_H

#include "exp.h"
#include "internal.h"
#include "logits.h"
#include "mask.h"
#include "tanh.h"

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
    bool shaped;         /* a cap or ALiBi: the scores are more than x * scale */
    bool formed;         /* keep, bias or shaped: step 1 forms the scores in work */
    /* Soft-capping, ALiBi, sink (logits.h), read only in a call with logit
       options; kept apart from the row: 32 bytes more a row took calls
       without them 1% more instructions, rows of 128 keys. */
    const peak_logit_row *lg;
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

/* Whether d's output is streamed: the scheduler asks, for the whole call.
   Its size cannot overflow: y's rows do not overlap (api.c), so they fit
   in y's extent, which fits in a ptrdiff_t. */
static inline bool peak_softmax_streams(const peak_softmax_desc *d)
{
    return d->k_len <= PEAK_SOFTMAX_SCRATCH_KEYS &&
           d->batch * d->heads * d->q_len * d->k_len > PEAK_SOFTMAX_STREAM_BYTES / sizeof(float);
}

/* Rows a group takes: as many as fit the scratch buffer (streamed) or the
   group's L1 budget, 1 to PEAK_SOFTMAX_GROUP. */
static inline size_t peak_softmax_group_rows(const peak_softmax_desc *d, bool stream)
{
    const size_t fit = stream ? PEAK_SOFTMAX_SCRATCH_KEYS / d->k_len
                              : PEAK_SOFTMAX_GROUP_BYTES / (2 * sizeof(float) * d->k_len);
    return fit < 1 ? 1 : fit > PEAK_SOFTMAX_GROUP ? PEAK_SOFTMAX_GROUP : fit;
}

/* Rows row0 .. row0+rows-1 of d in memory order of [b, h, i], a group at a
   time (peak_softmax_next_group): the row [b, h, i] that comes next and
   how many are left. */
typedef struct peak_softmax_walk {
    float *y;
    const float *x;
    const peak_softmax_desc *d;
    float *scratch; /* PEAK_SOFTMAX_SCRATCH_KEYS floats: the streamed rows' work */
    ptrdiff_t x0, y0; /* the first row's offsets: x and y point at that row */
    bool stream;
    size_t per_group;
    float scale;
    size_t b, h, i;
    size_t left;
    /* The call's options, the same for every row: any at all (else a row's
       lg is not set), a cap or ALiBi, scores formed in the work area, a
       sink. */
    bool logits, shaped, formed, sinks;
    peak_logit_row lg; /* head h's options, qpos aside (peak_softmax_walk_head) */
} peak_softmax_walk;

/* The options of head w->h, once a head, not once a row: the slope is an
   exp2 when the caller gives none. */
static inline void peak_softmax_walk_head(peak_softmax_walk *w)
{
    const peak_softmax_desc *d = w->d;
    if (w->logits)
        w->lg = peak_logit_row_of(&d->logits, &d->mask, d->heads, w->h, 0, d->q_len, d->k_len);
}

static inline peak_softmax_walk peak_softmax_walk_start(float *y, const float *x,
                                                        const peak_softmax_desc *d, float *scratch,
                                                        size_t row0, size_t rows, bool stream)
{
    const size_t bh = row0 / d->q_len;
    peak_softmax_walk w = {.y = y,
                           .x = x,
                           .d = d,
                           .scratch = scratch,
                           .x0 = peak_softmax_row_offset(d, d->x_stride, row0),
                           .y0 = peak_softmax_row_offset(d, d->y_stride, row0),
                           .stream = stream,
                           .per_group = peak_softmax_group_rows(d, stream),
                           .scale = peak_f32_is_zero(d->scale) ? 1.0f : d->scale,
                           .b = bh / d->heads,
                           .h = bh % d->heads,
                           .i = row0 % d->q_len,
                           .left = rows,
                           .logits = peak_logits_any(&d->logits),
                           .shaped = peak_logits_shape(&d->logits),
                           .sinks = d->logits.sinks != NULL};
    w.formed = w.shaped || d->mask.keep || d->mask.bias;
    if (rows > 0)
        peak_softmax_walk_head(&w);
    return w;
}

/* Row [b, h, i] of w as the n-th of a group, its options into *lg
   (`logits`: the call has some). */
PEAK_SOFTMAX_INLINE void peak_softmax_row_at(const peak_softmax_walk *w, size_t n,
                                             peak_softmax_row *r, peak_logit_row *lg, bool logits)
{
    const peak_softmax_desc *d = w->d;
    const size_t b = w->b, h = w->h, i = w->i;
    const peak_key_range keys = peak_mask_keys(&d->mask, b, i, d->q_len, d->k_len);
    r->x = w->x + ((ptrdiff_t)b * d->x_stride[0] + (ptrdiff_t)h * d->x_stride[1] +
                   (ptrdiff_t)i * d->x_stride[2] - w->x0);
    r->y = w->y + ((ptrdiff_t)b * d->y_stride[0] + (ptrdiff_t)h * d->y_stride[1] +
                   (ptrdiff_t)i * d->y_stride[2] - w->y0);
    r->work = w->stream ? w->scratch + n * d->k_len : r->y;
    r->lo = keys.lo;
    r->hi = keys.hi;
    r->keep = peak_mask_keep_row(&d->mask, b, h, i);
    r->bias = peak_mask_bias_row(&d->mask, b, h, i);
    r->k_len = d->k_len;
    r->scale = w->scale;
    r->shaped = w->shaped;
    r->formed = w->formed;
    r->lg = lg;
    if (logits) {
        *lg = w->lg;
        if (w->lg.alibi != PEAK_ALIBI_NONE)
            lg->qpos = peak_mask_qpos(&d->mask, i, d->q_len, d->k_len);
    }
}

/* The next group of up to per_group consecutive rows into rows, their
   options into lg (arrays of PEAK_SOFTMAX_GROUP, apart from the walk,
   which then stays in registers); their number, 0 when every row of the
   walk has been. */
PEAK_SOFTMAX_INLINE size_t peak_softmax_next_group_with(peak_softmax_walk *w,
                                                        peak_softmax_row *rows, peak_logit_row *lg,
                                                        bool logits)
{
    const peak_softmax_desc *d = w->d;
    size_t n = 0;
    for (; n < w->per_group && w->left > 0; n++, w->left--) {
        peak_softmax_row_at(w, n, &rows[n], &lg[n], logits);
        if (++w->i < d->q_len)
            continue;
        w->i = 0;
        if (++w->h == d->heads) {
            w->h = 0;
            w->b++;
        }
        if (logits && w->left > 1) /* (not past the last row) */
            peak_softmax_walk_head(w);
    }
    return n;
}

/* The walk specialised for calls without logit options, whose rows it
   leaves as they were: 1.3% fewer instructions, rows of 16 keys. */
static inline size_t peak_softmax_next_group(peak_softmax_walk *w, peak_softmax_row *rows,
                                             peak_logit_row *lg)
{
    return w->logits ? peak_softmax_next_group_with(w, rows, lg, true)
                     : peak_softmax_next_group_with(w, rows, lg, false);
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

/* ---- what every tier's steps share (softmax-body.h) --------------------- */

/* Where step 3 finds a row's scores. */
static inline const float *peak_softmax_scores(const peak_softmax_row *r)
{
    return (r->formed ? r->work : r->x) + r->lo;
}

/* Step 2 of the row algorithm: every visible score is -inf or NaN.  A
   plain row's scores are still x (times scale); a formed row's in the
   work area are finished. */
static inline void peak_softmax_no_finite_max(const peak_softmax_row *r)
{
    const float scale = r->formed ? 1.0f : r->scale;
    peak_softmax_fill_visible(r, peak_softmax_any_nan(peak_softmax_scores(r), r->hi - r->lo, scale) ? NAN : 0.0f);
}

/* ---- the logit options (peak.h: peak_logits) ----------------------------- */

/* s = x * scale shaped by the cap and the ALiBi term of key j, one key:
   the scalar reference's operations, each rounded once.  peak_softcap_ref
   gives the bits of the tiers' vector cap (tanh.h). */
static inline float peak_softmax_shape1(const peak_logit_row *lg, float s, size_t j)
{
    if (lg->softcap != 0.0f)
        s = peak_softcap_ref(s, lg->softcap);
    return peak_alibi_add(lg, s, j);
}

/* Distances below this are exact in float, and so are their differences:
   a row whose distances all are can build them in vectors, lane offsets
   subtracted from one converted distance. */
#define PEAK_SOFTMAX_EXACT_DIST ((int64_t)1 << 24)

/* Whether every ALiBi distance of [lo, hi) (lo < hi) is below
   PEAK_SOFTMAX_EXACT_DIST in magnitude: the distance is monotonic in j
   (or has its minimum inside), so the ends decide. */
static inline bool peak_softmax_alibi_exact(const peak_softmax_row *r)
{
    const int64_t a = r->lg->qpos - (int64_t)r->lo, b = r->lg->qpos - (int64_t)(r->hi - 1);
    return r->lg->alibi == PEAK_ALIBI_NONE ||
           (a < PEAK_SOFTMAX_EXACT_DIST && a > -PEAK_SOFTMAX_EXACT_DIST &&
            b < PEAK_SOFTMAX_EXACT_DIST && b > -PEAK_SOFTMAX_EXACT_DIST);
}

/* Step 1 one key at a time, for a shaped row whose ALiBi distances reach
   2^24 (a query 16M positions from a key: rare): work[lo, hi) = the
   scores, -inf at masked keys; returns their maximum, NaN skipped as
   peak_vf_max does.  x and work may be the same row: key j is read
   before it is written. */
static inline float peak_softmax_scores_one_by_one(const peak_softmax_row *r)
{
    float m = -INFINITY;
    for (size_t j = r->lo; j < r->hi; j++) {
        float s = -INFINITY;
        if (peak_mask_visible(r->keep, r->bias, j)) {
            s = peak_softmax_shape1(r->lg, r->x[j] * r->scale, j);
            if (r->bias)
                s += r->bias[j];
        }
        r->work[j] = s;
        m = s > m ? s : m;
    }
    return m;
}

/* The maximum that decides a row's exponentials: its scores' max, or the
   sink where that is larger (peak.h: m' = max(m, sink)). */
static inline float peak_softmax_row_top(const peak_softmax_row *r, float max)
{
    return r->lg->has_sink && r->lg->sink > max ? r->lg->sink : max;
}

#endif /* PEAK_SOFTMAX_H */
