/*
 * softmax-body.h - the SIMD softmax written once against the vector
 * vocabulary (simd/f32-<isa>.h): the row algorithm of softmax.h, step by
 * step over a group of rows, and its vector passes.  A tier's file
 * includes its exponentials (<isa>/exp-<isa>.h, which include its
 * vocabulary), may set PEAK_SOFTMAX_FUSE_SUM, includes this file, which
 * defines the tier's kernel (PEAK_TIER_FN), and then defines the one pass
 * it declares, peak_softmax_scores_masked (a masked row's lanes are per
 * ISA: VMASKMOVPS masks, mask registers, lane-by-lane loads), which
 * shapes its scores with this file's peak_softmax_shape.
 *
 * The same bits on every tier: the same exponential (exp-body.h) and tanh
 * (tanh-body.h), the sum in the order of PEAK_SOFTMAX_SUM_LANES, one
 * rounding in each operation, the sink's term added last.
 *
 * Row ends: a row of PEAK_VF_LANES keys or more ends with a plain store of
 * its last vector, overlapping the one before with the same bits (its
 * source read before any store, since the source may be the output); a
 * shorter stretch goes through peak_vf_load_first and peak_vf_store_first.
 * No byte outside a row is read or written, and no VMASKMOVPS store is
 * used (simd/f32-avx2.h: 10x a plain store on Zen 3).
 */
#ifndef PEAK_SOFTMAX_BODY_H
#define PEAK_SOFTMAX_BODY_H

#include "softmax.h"

#if !defined(PEAK_VF_LANES) || !defined(PEAK_EXP_BODY_H)
#error "include the tier's exponentials (<isa>/exp-<isa>.h) before softmax-body.h"
#endif

#include "tanh-body.h"

/* 1: row k's scaling runs in one loop with row k + 1's sum (conversions
   and adds, on other ports than the multiplies and stores): the AVX2
   kernel 2.4% faster (geomean of 14 shapes, Zen 3).  The other tiers run
   the two passes one after the other until measured on their hardware.
   The order of each sum's additions is its own loop's: the same bits. */
#ifndef PEAK_SOFTMAX_FUSE_SUM
#define PEAK_SOFTMAX_FUSE_SUM 0
#endif

/* peak_vd accumulators of a row's sum. */
#define PEAK_SOFTMAX_SUM_VECTORS (PEAK_SOFTMAX_SUM_LANES / PEAK_VD_LANES)

/* ---- pass 1: the maximum ------------------------------------------------ */

/* s = x * scale, or x itself when the row is unscaled (x * 1 == x). */
PEAK_SOFTMAX_INLINE peak_vf peak_softmax_score(peak_vf vx, peak_vf vscale, bool scaled)
{
    return scaled ? peak_vf_mul(vx, vscale) : vx;
}

/* Max of x[j] * scale over j < n, -inf if none.  peak_vf_max returns its
   second operand when either is NaN: with the running maximum second, a
   NaN score is skipped here and caught by the sum. */
PEAK_SOFTMAX_INLINE float peak_softmax_max_dense(const float *x, size_t n, float scale, bool scaled)
{
    const size_t lanes = PEAK_VF_LANES;
    const peak_vf vscale = peak_vf_set1(scale);
    const peak_vf vminf = peak_vf_set1(-INFINITY);
    peak_vf vmax0 = vminf, vmax1 = vminf, vmax2 = vminf, vmax3 = vminf;
    size_t j = 0;
    for (; j + 4 * lanes <= n; j += 4 * lanes) {
        vmax0 = peak_vf_max(peak_softmax_score(peak_vf_loadu(x + j), vscale, scaled), vmax0);
        vmax1 = peak_vf_max(peak_softmax_score(peak_vf_loadu(x + j + lanes), vscale, scaled), vmax1);
        vmax2 =
            peak_vf_max(peak_softmax_score(peak_vf_loadu(x + j + 2 * lanes), vscale, scaled), vmax2);
        vmax3 =
            peak_vf_max(peak_softmax_score(peak_vf_loadu(x + j + 3 * lanes), vscale, scaled), vmax3);
    }
    for (; j + lanes <= n; j += lanes)
        vmax0 = peak_vf_max(peak_softmax_score(peak_vf_loadu(x + j), vscale, scaled), vmax0);
    if (j < n) {
        const peak_vf vs = peak_softmax_score(peak_vf_load_first(x + j, n - j), vscale, scaled);
        vmax1 = peak_vf_max(peak_vf_first_or(vs, n - j, -INFINITY), vmax1);
    }
    vmax0 = peak_vf_max(peak_vf_max(vmax0, vmax1), peak_vf_max(vmax2, vmax3));
    return peak_vf_reduce_max(vmax0);
}

/* ---- pass 1 of a shaped row: the logit options ------------------------- */

/* Lane offsets: key j + l is lane l. */
static const float peak_softmax_iota[16] = {0.0f, 1.0f, 2.0f,  3.0f,  4.0f,  5.0f,  6.0f,  7.0f,
                                            8.0f, 9.0f, 10.0f, 11.0f, 12.0f, 13.0f, 14.0f, 15.0f};

/* What a shaped row's vectors need: the cap, the slope and the distances'
   form (softmax.h's peak_softmax_alibi_exact holds for the row). */
typedef struct peak_softmax_shaper {
    peak_vf vcap, vslope, viota;
    int64_t qpos;
    bool cap, alibi, symmetric;
} peak_softmax_shaper;

/* What the masked passes of rows that are not shaped get: never read. */
static const peak_softmax_shaper peak_softmax_no_shaper;

static inline peak_softmax_shaper peak_softmax_shaper_for(const peak_softmax_row *r)
{
    peak_softmax_shaper sh;
    sh.vcap = peak_vf_set1(r->lg->softcap);
    sh.vslope = peak_vf_set1(r->lg->slope);
    sh.viota = peak_vf_loadu(peak_softmax_iota);
    sh.qpos = r->lg->qpos;
    sh.cap = r->lg->softcap != 0.0f;
    sh.alibi = r->lg->alibi != PEAK_ALIBI_NONE;
    sh.symmetric = r->lg->alibi == PEAK_ALIBI_SYMMETRIC;
    return sh;
}

/* The signed distances qpos - j - l of keys j + l: exact integers for the
   keys of the row (lanes past its end are never kept). */
static inline peak_vf peak_softmax_signed_dist(const peak_softmax_shaper *sh, size_t j)
{
    return peak_vf_sub(peak_vf_set1((float)(sh->qpos - (int64_t)j)), sh->viota);
}

/* vs capped, then less slope * distance (|d| for the symmetric form),
   each operation rounded once as in the scalar reference (no FMA: the
   build contracts none). */
PEAK_SOFTMAX_INLINE peak_vf peak_softmax_shape_with(peak_vf vs, const peak_softmax_shaper *sh,
                                                    peak_vf vd, bool cap, bool alibi)
{
    if (cap)
        vs = peak_vf_softcap(vs, sh->vcap);
    if (alibi) {
        if (sh->symmetric)
            vd = peak_vf_abs(vd);
        vs = peak_vf_sub(vs, peak_vf_mul(sh->vslope, vd));
    }
    return vs;
}

/* For the tiers' masked passes: keys j .. j + PEAK_VF_LANES - 1 of vs
   (x * scale) shaped, nothing done unless `shaped`. */
PEAK_SOFTMAX_INLINE peak_vf peak_softmax_shape(peak_vf vs, const peak_softmax_shaper *sh, size_t j,
                                               bool shaped)
{
    if (!shaped)
        return vs;
    const peak_vf vd = sh->alibi ? peak_softmax_signed_dist(sh, j) : vs;
    return peak_softmax_shape_with(vs, sh, vd, sh->cap, sh->alibi);
}

/* Pass 1 of a shaped row without element masks: work[lo, hi) = the
   scores, their maximum returned (NaN skipped).  x and work may be the
   same row: each vector is read before it is written.  The distances
   step by PEAK_VF_LANES, exactly. */
PEAK_SOFTMAX_INLINE float peak_softmax_shape_dense(const peak_softmax_row *r,
                                                   const peak_softmax_shaper *sh, bool scaled,
                                                   bool cap, bool alibi)
{
    const size_t lanes = PEAK_VF_LANES, n = r->hi - r->lo;
    const float *x = r->x + r->lo;
    float *dst = r->work + r->lo;
    const peak_vf vscale = peak_vf_set1(r->scale);
    const peak_vf vstep = peak_vf_set1((float)PEAK_VF_LANES);
    peak_vf vmax0 = peak_vf_set1(-INFINITY), vmax1 = vmax0;
    peak_vf vd = alibi ? peak_softmax_signed_dist(sh, r->lo) : vscale;
    size_t j = 0;
    for (; j + 2 * lanes <= n; j += 2 * lanes) {
        const peak_vf vd1 = alibi ? peak_vf_sub(vd, vstep) : vd;
        const peak_vf vs0 = peak_softmax_shape_with(
            peak_softmax_score(peak_vf_loadu(x + j), vscale, scaled), sh, vd, cap, alibi);
        const peak_vf vs1 = peak_softmax_shape_with(
            peak_softmax_score(peak_vf_loadu(x + j + lanes), vscale, scaled), sh, vd1, cap, alibi);
        peak_vf_storeu(dst + j, vs0);
        peak_vf_storeu(dst + j + lanes, vs1);
        vmax0 = peak_vf_max(vs0, vmax0);
        vmax1 = peak_vf_max(vs1, vmax1);
        if (alibi)
            vd = peak_vf_sub(vd1, vstep);
    }
    for (; j < n; j += lanes) {
        const size_t left = n - j < lanes ? n - j : lanes;
        const peak_vf vx = peak_softmax_score(peak_vf_load_first(x + j, left), vscale, scaled);
        const peak_vf vs = peak_softmax_shape_with(vx, sh, vd, cap, alibi);
        peak_vf_store_first(dst + j, vs, left);
        vmax0 = peak_vf_max(peak_vf_first_or(vs, left, -INFINITY), vmax0);
        if (alibi)
            vd = peak_vf_sub(vd, vstep);
    }
    return peak_vf_reduce_max(peak_vf_max(vmax0, vmax1));
}

/* A tier's peak_softmax_scores_masked(r, scaled, sh, shaped), pass 1 of a
   row with element masks: work[lo, hi) gets the score at visible keys
   (x * scale, peak_softmax_shape'd when `shaped`, + bias) and -inf at
   masked ones (so passes 2 and 3 run unmasked, and e^-inf gives the
   masked keys their exact 0); returns the maximum, NaN scores skipped.
   Defined by the tier after this file's include. */
PEAK_SOFTMAX_INLINE float peak_softmax_scores_masked(const peak_softmax_row *r, bool scaled,
                                                     const peak_softmax_shaper *sh, bool shaped);

/* Pass 1 of a shaped row, out of line (rows with logit options only):
   specialised for the cap and ALiBi without element masks, where the
   whole pass is these; the tier's masked pass tests them a vector. */
static __attribute__((noinline)) float peak_softmax_max_shaped(const peak_softmax_row *r,
                                                               bool scaled)
{
    if (!peak_softmax_alibi_exact(r))
        return peak_softmax_scores_one_by_one(r);
    const peak_softmax_shaper sh = peak_softmax_shaper_for(r);
    if (r->keep || r->bias)
        return scaled ? peak_softmax_scores_masked(r, true, &sh, true)
                      : peak_softmax_scores_masked(r, false, &sh, true);
    if (!sh.alibi)
        return scaled ? peak_softmax_shape_dense(r, &sh, true, true, false)
                      : peak_softmax_shape_dense(r, &sh, false, true, false);
    if (!sh.cap)
        return scaled ? peak_softmax_shape_dense(r, &sh, true, false, true)
                      : peak_softmax_shape_dense(r, &sh, false, false, true);
    return scaled ? peak_softmax_shape_dense(r, &sh, true, true, true)
                  : peak_softmax_shape_dense(r, &sh, false, true, true);
}

/* ---- pass 2: the exponentials -------------------------------------------- */

/* 2^-k e^(s - shift) (shifted) or 2^-k e^s (not: shift is 0). */
PEAK_SOFTMAX_INLINE peak_vf peak_softmax_exp_of(peak_vf vs, peak_vf vshift, peak_vf vlo,
                                                peak_vf vmagic, bool shifted)
{
    return peak_vf_exp_sm(shifted ? peak_vf_sub(vs, vshift) : vs, vlo, vmagic);
}

/* dst[j] = 2^-k e^(x[j] * scale - shift) for j < n (dst may be x). */
PEAK_SOFTMAX_INLINE void peak_softmax_exp_store_with(float *dst, const float *x, size_t n,
                                                     float scale, const peak_softmax_exp_row *e,
                                                     bool scaled, bool shifted)
{
    const size_t lanes = PEAK_VF_LANES, step = PEAK_EXP_UNROLL * PEAK_VF_LANES;
    const peak_vf vscale = peak_vf_set1(scale);
    const peak_vf vshift = peak_vf_set1(e->shift);
    const peak_vf vlo = peak_vf_set1(e->lo);
    const peak_vf vmagic = peak_vf_set1(e->magic);
    if (n < lanes) {
        const peak_vf vs = peak_softmax_score(peak_vf_load_first(x, n), vscale, scaled);
        if (n)
            peak_vf_store_first(dst, peak_softmax_exp_of(vs, vshift, vlo, vmagic, shifted), n);
        return;
    }
    const peak_vf vxlast = peak_vf_loadu(x + n - lanes);
    size_t j = 0;
    for (; PEAK_EXP_UNROLL > 1 && j + step <= n; j += step) {
        peak_vf v[PEAK_EXP_UNROLL];
#pragma GCC unroll 4
        for (size_t u = 0; u < PEAK_EXP_UNROLL; u++)
            v[u] = peak_softmax_exp_of(peak_softmax_score(peak_vf_loadu(x + j + u * lanes), vscale, scaled),
                                       vshift, vlo, vmagic, shifted);
#pragma GCC unroll 4
        for (size_t u = 0; u < PEAK_EXP_UNROLL; u++)
            peak_vf_storeu(dst + j + u * lanes, v[u]);
    }
    for (; j + lanes <= n; j += lanes) {
        const peak_vf vs = peak_softmax_score(peak_vf_loadu(x + j), vscale, scaled);
        peak_vf_storeu(dst + j, peak_softmax_exp_of(vs, vshift, vlo, vmagic, shifted));
    }
    if (j < n)
        peak_vf_storeu(dst + n - lanes, peak_softmax_exp_of(peak_softmax_score(vxlast, vscale, scaled),
                                                            vshift, vlo, vmagic, shifted));
}

/* The pass with the row's constants (softmax.h's peak_softmax_exp_row). */
PEAK_SOFTMAX_INLINE void peak_softmax_exp_store(float *dst, const float *x, size_t n, float scale,
                                                const peak_softmax_exp_row *e, bool scaled)
{
    if (e->shift != 0.0f)
        peak_softmax_exp_store_with(dst, x, n, scale, e, scaled, true);
    else
        peak_softmax_exp_store_with(dst, x, n, scale, e, scaled, false);
}

/* ---- the sum ---------------------------------------------------------------- */

/* A row's sum in the order of softmax.h: PEAK_SOFTMAX_SUM_LANES
   accumulators, key j into j % 16; accumulator i + q PEAK_VD_LANES is lane
   i of a[q].  A pass over the stored terms, which are still in L1: summed
   inside the exponential's loop, in double or compensated in float, the
   whole kernel took 1.1-1.4x as long (Zen 3, rows of 128 keys;
   doc/perf-notes.md). */
typedef struct peak_softmax_sum_acc {
    peak_vd a[PEAK_SOFTMAX_SUM_VECTORS];
} peak_softmax_sum_acc;

static inline peak_softmax_sum_acc peak_softmax_sum_start(void)
{
    peak_softmax_sum_acc s;
#pragma GCC unroll 8
    for (size_t q = 0; q < PEAK_SOFTMAX_SUM_VECTORS; q++)
        s.a[q] = peak_vd_zero();
    return s;
}

/* Keys src[0 .. 16) into their accumulators. */
static inline __attribute__((always_inline)) void peak_softmax_sum_add16(peak_softmax_sum_acc *s,
                                                                          const float *src)
{
#pragma GCC unroll 8
    for (size_t q = 0; q < PEAK_SOFTMAX_SUM_VECTORS; q++)
        s->a[q] = peak_vd_add(s->a[q], peak_vd_widen(peak_vfh_loadu(src + q * PEAK_VD_LANES)));
}

/* Keys src[j .. n) (j a multiple of 16) into s, then the fold: a[q] +=
   a[q + w] for w = half the vectors down to 1 (lanes i + 8, i + 4, ...),
   then the last vector's own lanes. */
static inline double peak_softmax_sum_finish(peak_softmax_sum_acc s, const float *src, size_t j,
                                             size_t n)
{
    const size_t lanes = PEAK_VF_LANES;
    for (; j + PEAK_SOFTMAX_SUM_LANES <= n; j += PEAK_SOFTMAX_SUM_LANES)
        peak_softmax_sum_add16(&s, src + j);
    if (j < n) { /* lanes past n load +0, which adds nothing */
#pragma GCC unroll 4
        for (size_t q = 0; q < PEAK_SOFTMAX_SUM_LANES / PEAK_VF_LANES; q++) {
            const size_t at = j + q * lanes;
            const size_t left = at >= n ? 0 : n - at < lanes ? n - at : lanes;
            const peak_vf v = peak_vf_load_first(src + at, left);
            s.a[2 * q] = peak_vd_add(s.a[2 * q], peak_vd_widen(peak_vf_low(v)));
            s.a[2 * q + 1] = peak_vd_add(s.a[2 * q + 1], peak_vd_widen(peak_vf_high(v)));
        }
    }
#pragma GCC unroll 4
    for (size_t w = PEAK_SOFTMAX_SUM_VECTORS / 2; w >= 1; w /= 2)
#pragma GCC unroll 4
        for (size_t q = 0; q < w; q++)
            s.a[q] = peak_vd_add(s.a[q], s.a[q + w]);
    return peak_vd_reduce_add(s.a[0]);
}

static inline double peak_softmax_sum(const float *src, size_t n)
{
    return peak_softmax_sum_finish(peak_softmax_sum_start(), src, 0, n);
}

/* ---- pass 3 and the masked-out keys ----------------------------------------- */

/* Floats from y to the next 64-byte boundary, at most n (y is
   float-aligned).  Streaming stores write whole lines from there, so that
   no line is flushed half-written, and no plain store goes into a streamed
   line (that would read it back from memory). */
static inline size_t peak_softmax_to_line(const float *y, size_t n)
{
    const size_t head = ((64 - ((uintptr_t)y & 63)) & 63) / sizeof(float);
    return head < n ? head : n;
}

PEAK_SOFTMAX_INLINE void peak_softmax_store(float *y, peak_vf v, bool stream)
{
    if (stream)
        peak_vf_stream(y, v);
    else
        peak_vf_storeu(y, v);
}

/* src * (hi + lo), rounded once; src * hi where lo is 0 (`two` false). */
PEAK_SOFTMAX_INLINE peak_vf peak_softmax_times_factor(peak_vf v, peak_vf vhi, peak_vf vlo, bool two)
{
    return two ? peak_vf_fma(v, vhi, peak_vf_mul(v, vlo)) : peak_vf_mul(v, vhi);
}

/* y[j] = src[j] * factor for j < n <= PEAK_VF_LANES. */
PEAK_SOFTMAX_INLINE void peak_softmax_scale_short(float *y, const float *src, size_t n, peak_vf vhi,
                                                  peak_vf vlo, bool two)
{
    const peak_vf v = peak_vf_load_first(src, n);
    peak_vf_store_first(y, peak_softmax_times_factor(v, vhi, vlo, two), n);
}

/* y[j] = src[j] * factor for j < n with plain stores, the last vector
   read first (src may be y): a streamed row's head, up to 15 floats. */
PEAK_SOFTMAX_INLINE void peak_softmax_scale_part(float *y, const float *src, size_t n, peak_vf vhi,
                                                 peak_vf vlo, bool two)
{
    const size_t lanes = PEAK_VF_LANES;
    if (n < lanes) {
        if (n)
            peak_softmax_scale_short(y, src, n, vhi, vlo, two);
        return;
    }
    const peak_vf vlast = peak_softmax_times_factor(peak_vf_loadu(src + n - lanes), vhi, vlo, two);
    for (size_t j = 0; j + lanes < n; j += lanes)
        peak_vf_storeu(y + j, peak_softmax_times_factor(peak_vf_loadu(src + j), vhi, vlo, two));
    peak_vf_storeu(y + n - lanes, vlast);
}

/* y[j] = src[j] * factor for j < n (src may be y), and (`sum`) the sum of
   next[0 .. m) in the same loop, returned (0 if not `sum`).  Streaming:
   streaming stores from the first 64-byte line boundary on, plain stores
   inside the partial lines at either end. */
PEAK_SOFTMAX_INLINE double peak_softmax_scale_store_with(float *y, const float *src, size_t n,
                                                         peak_softmax_factor f, bool stream,
                                                         bool two, bool sum, const float *next,
                                                         size_t m)
{
    const size_t lanes = PEAK_VF_LANES;
    const peak_vf vhi = peak_vf_set1(f.hi), vlo = peak_vf_set1(f.lo);
    peak_softmax_sum_acc acc = peak_softmax_sum_start();
    peak_vf vlast = vhi;
    size_t t = 0; /* next[0 .. t) summed */
    size_t j = 0;
    if (stream) {
        j = peak_softmax_to_line(y, n);
        peak_softmax_scale_part(y, src, j, vhi, vlo, two);
    } else if (n < lanes) {
        if (n)
            peak_softmax_scale_short(y, src, n, vhi, vlo, two);
        return sum ? peak_softmax_sum_finish(acc, next, 0, m) : 0.0;
    } else {
        vlast = peak_vf_loadu(src + n - lanes);
    }
    const size_t step = PEAK_SOFTMAX_SUM_LANES;
    if (sum)
        for (; j + step <= n && t + step <= m; j += step, t += step) {
#pragma GCC unroll 4
            for (size_t q = 0; q < step; q += lanes)
                peak_softmax_store(y + j + q,
                                   peak_softmax_times_factor(peak_vf_loadu(src + j + q), vhi, vlo, two),
                                   stream);
            peak_softmax_sum_add16(&acc, next + t);
        }
    for (; j + lanes <= n; j += lanes)
        peak_softmax_store(y + j, peak_softmax_times_factor(peak_vf_loadu(src + j), vhi, vlo, two),
                           stream);
    if (j < n && stream)
        peak_softmax_scale_short(y + j, src + j, n - j, vhi, vlo, two);
    else if (j < n)
        peak_vf_storeu(y + n - lanes, peak_softmax_times_factor(vlast, vhi, vlo, two));
    return sum ? peak_softmax_sum_finish(acc, next, t, m) : 0.0;
}

/* The scaling by f, with (`sum`) the sum of next[0 .. m); f.lo == 0
   (softmax.h, most rows): one multiply, the same bits as the FMA of
   e * hi + e * 0. */
PEAK_SOFTMAX_INLINE double peak_softmax_scale_store(float *y, const float *src, size_t n,
                                                    peak_softmax_factor f, bool stream, bool sum,
                                                    const float *next, size_t m)
{
    if (f.lo == 0.0f)
        return peak_softmax_scale_store_with(y, src, n, f, stream, false, sum, next, m);
    return peak_softmax_scale_store_with(y, src, n, f, stream, true, sum, next, m);
}

/* y[0 .. n) = v with plain stores, a row of PEAK_VF_LANES or more ending
   with an overlapping full vector. */
PEAK_SOFTMAX_INLINE void peak_softmax_fill(float *y, size_t n, peak_vf v)
{
    const size_t lanes = PEAK_VF_LANES;
    if (n < lanes) {
        if (n)
            peak_vf_store_first(y, v, n);
        return;
    }
    size_t j = 0;
    for (; j + lanes <= n; j += lanes)
        peak_vf_storeu(y + j, v);
    if (j < n)
        peak_vf_storeu(y + n - lanes, v);
}

/* y[0 .. n) = +0, streamed as the scaling is. */
PEAK_SOFTMAX_INLINE void peak_softmax_store_zeros(float *y, size_t n, bool stream)
{
    const peak_vf vzero = peak_vf_opaque(peak_vf_zero());
    if (!stream) {
        peak_softmax_fill(y, n, vzero);
        return;
    }
    size_t j = peak_softmax_to_line(y, n);
    peak_softmax_fill(y, j, vzero);
    for (; j + PEAK_VF_LANES <= n; j += PEAK_VF_LANES)
        peak_vf_stream(y + j, vzero);
    peak_softmax_fill(y + j, n - j, vzero);
}

/* ---- the row algorithm (softmax.h) ------------------------------------------ */

/* Step 1; the max of the row's visible scores. */
PEAK_SOFTMAX_INLINE float peak_softmax_max(const peak_softmax_row *r, bool scaled)
{
    if (!r->formed)
        return peak_softmax_max_dense(r->x + r->lo, r->hi - r->lo, r->scale, scaled);
    if (r->shaped)
        return peak_softmax_max_shaped(r, scaled);
    return peak_softmax_scores_masked(r, scaled, &peak_softmax_no_shaper, false);
}

/* The sinks' terms 2^-k e^(sink - shift) of a group's rows, by the keys'
   own exponential: lane k takes row k's argument a[k] = sink - shift (the
   subtraction peak_softmax_exp_of makes, where it makes one) and
   constants, and every lane is computed on its own, so each row gets the
   bits it would alone, on every tier.  One vector exponential for the
   group rather than one a row (a broadcast, then a reduction): 4% faster
   on AVX-512 for rows of 128 keys, even on AVX2.  Lanes without a term
   (no visible finite score, or past the group) take a = -inf: +0. */
#define PEAK_SOFTMAX_SINK_LANES 16

typedef struct peak_softmax_sinks {
    float a[PEAK_SOFTMAX_SINK_LANES], lo[PEAK_SOFTMAX_SINK_LANES];
    float magic[PEAK_SOFTMAX_SINK_LANES], term[PEAK_SOFTMAX_SINK_LANES];
} peak_softmax_sinks;

static inline void peak_softmax_sinks_clear(peak_softmax_sinks *sk)
{
    for (size_t k = 0; k < PEAK_SOFTMAX_SINK_LANES; k++) {
        sk->a[k] = -INFINITY;
        sk->lo[k] = 0.0f;
        sk->magic[k] = PEAK_EXP_ROUND_MAGIC_BIASED;
    }
}

static inline void peak_softmax_sinks_set(peak_softmax_sinks *sk, size_t k,
                                          const peak_softmax_exp_row *e, float sink)
{
    sk->a[k] = e->shift != 0.0f ? sink - e->shift : sink;
    sk->lo[k] = e->lo;
    sk->magic[k] = e->magic;
}

static inline void peak_softmax_sinks_terms(peak_softmax_sinks *sk, size_t n)
{
    for (size_t k = 0; k < n; k += PEAK_VF_LANES)
        peak_vf_storeu(sk->term + k, peak_vf_exp_sm(peak_vf_loadu(sk->a + k),
                                                   peak_vf_loadu(sk->lo + k),
                                                   peak_vf_loadu(sk->magic + k)));
}

/* Step 3's exponentials, with the constants of the row's max (and sink:
   softmax.h's peak_softmax_row_top, `sinks`: the call has sinks), which
   it returns.  A formed row's scores in the work area are finished: no
   scale. */
PEAK_SOFTMAX_INLINE peak_softmax_exp_row peak_softmax_exp(const peak_softmax_row *r, bool scaled,
                                                          float max, bool sinks)
{
    float *dst = r->work + r->lo;
    const float *s = peak_softmax_scores(r);
    const size_t n = r->hi - r->lo;
    const peak_softmax_exp_row e =
        peak_softmax_exp_row_for(sinks ? peak_softmax_row_top(r, max) : max);
    if (scaled && !r->formed)
        peak_softmax_exp_store(dst, s, n, r->scale, &e, true);
    else
        peak_softmax_exp_store(dst, s, n, 1.0f, &e, false);
    return e;
}

/* Steps 1 to 5 for each of the n rows of a group, step by step. */
PEAK_SOFTMAX_INLINE void peak_softmax_group_steps(const peak_softmax_row *rows, size_t n, bool scaled,
                                                  bool stream, bool sinks)
{
    float max[PEAK_SOFTMAX_GROUP];
    bool terms[PEAK_SOFTMAX_GROUP]; /* step 3 stored the row's terms */
    peak_softmax_sinks sk;
    if (sinks)
        peak_softmax_sinks_clear(&sk);
    for (size_t k = 0; k < n; k++) /* (-inf where unused: clang-analyzer) */
        max[k] = rows[k].lo < rows[k].hi ? peak_softmax_max(&rows[k], scaled) : -INFINITY;
    for (size_t k = 0; k < n; k++) {
        const peak_softmax_row *r = &rows[k];
        terms[k] = r->lo < r->hi && max[k] != -INFINITY;
        if (terms[k]) {
            const peak_softmax_exp_row e = peak_softmax_exp(r, scaled, max[k], sinks);
            if (sinks)
                peak_softmax_sinks_set(&sk, k, &e, r->lg->sink);
        } else if (r->lo < r->hi) {
            peak_softmax_no_finite_max(r);
        }
    }
    /* Step 3's sums and step 4, row after row of those with terms (with
       PEAK_SOFTMAX_FUSE_SUM, row k's scaling and row k + 1's sum in one
       loop).  A NaN sum (a visible NaN or +inf) makes a NaN row; otherwise
       sum >= 1: the largest term, a key's or the sink's, is at least 1
       (softmax.h).  The sink's term is added after the keys' sum, the same
       order on every tier. */
    size_t k = 0;
    while (k < n && !terms[k])
        k++;
    double sum = k < n ? peak_softmax_sum(rows[k].work + rows[k].lo, rows[k].hi - rows[k].lo) : NAN;
    if (sinks) { /* after a sum: the scalar stores of sk's inputs are done */
        peak_softmax_sinks_terms(&sk, n);
        if (k < n)
            sum += (double)sk.term[k];
    }
    while (k < n) {
        const peak_softmax_row *r = &rows[k];
        size_t next = k + 1;
        while (next < n && !terms[next])
            next++;
        const bool fuse = PEAK_SOFTMAX_FUSE_SUM && next < n && !isnan(sum);
        const float *src = r->work + r->lo;
        const float *next_terms = next < n ? rows[next].work + rows[next].lo : NULL;
        const size_t next_n = next < n ? rows[next].hi - rows[next].lo : 0;
        double next_sum = NAN;
        if (isnan(sum))
            peak_softmax_fill_visible(r, NAN);
        else if (fuse)
            next_sum = peak_softmax_scale_store(r->y + r->lo, src, r->hi - r->lo,
                                                peak_softmax_factor_for(sum), stream, true,
                                                next_terms, next_n);
        else /* no sum: `next` is never read */
            peak_softmax_scale_store(r->y + r->lo, src, r->hi - r->lo,
                                     peak_softmax_factor_for(sum), stream, false, src, 0);
        if (next < n && !fuse)
            next_sum = peak_softmax_sum(next_terms, next_n);
        if (sinks && next < n)
            next_sum += (double)sk.term[next];
        sum = next_sum;
        k = next;
    }
    for (size_t i = 0; i < n; i++) {
        peak_softmax_store_zeros(rows[i].y, rows[i].lo, stream);
        peak_softmax_store_zeros(rows[i].y + rows[i].hi, rows[i].k_len - rows[i].hi, stream);
    }
}

/* A group, with the steps specialised for scale == 1, for streaming and
   for sinks (`sinks`: the call has them; tested at run time, they cost
   calls without them 2% more instructions, rows of 128 keys).  With sinks
   the scale is always applied: x * 1 == x, the same bits. */
static inline void peak_softmax_group(const peak_softmax_row *rows, size_t n, bool stream,
                                      bool sinks)
{
    const bool scaled = rows[0].scale != 1.0f;
    if (sinks)
        stream ? peak_softmax_group_steps(rows, n, true, true, true)
               : peak_softmax_group_steps(rows, n, true, false, true);
    else if (stream)
        scaled ? peak_softmax_group_steps(rows, n, true, true, false)
               : peak_softmax_group_steps(rows, n, false, true, false);
    else
        scaled ? peak_softmax_group_steps(rows, n, true, false, false)
               : peak_softmax_group_steps(rows, n, false, false, false);
}

/* Rows row0 .. row0+rows-1 on this tier: the groups of softmax.h's walk,
   then the fence that orders streaming stores before the caller (or
   another thread it signals) reads y. */
static inline void peak_softmax_run(float *y, const float *x, const peak_softmax_desc *d,
                                    size_t row0, size_t rows, bool stream)
{
    _Alignas(64) float scratch[PEAK_SOFTMAX_SCRATCH_KEYS];
    peak_softmax_walk w = peak_softmax_walk_start(y, x, d, scratch, row0, rows, stream);
    peak_softmax_row group[PEAK_SOFTMAX_GROUP];
    peak_logit_row lg[PEAK_SOFTMAX_GROUP];
    size_t n;
    while ((n = peak_softmax_next_group(&w, group, lg)) != 0)
        peak_softmax_group(group, n, w.stream, w.sinks);
    peak_vf_stream_fence();
}

/* ---- the kernel of the including tier (kernels.inc) ---- */

void PEAK_TIER_FN(peak_f32_softmax)(float *y, const float *x, const peak_softmax_desc *desc,
                                    size_t row0, size_t rows, bool stream)
{
    assert(y && x && desc);
    assert(row0 + rows <= desc->batch * desc->heads * desc->q_len);
    peak_softmax_run(y, x, desc, row0, rows, stream);
}

#endif /* PEAK_SOFTMAX_BODY_H */
