/*
 * exp-body.h - peak's vector exponentials written once against the vector
 * vocabulary (simd/f32-<isa>.h), for peak_exp, peak_exp2, the softmax and
 * attention.  A tier's exp header (avx2/exp-avx2.h, avx512/exp-avx512.h,
 * neon/exp-neon.h) includes its vocabulary, defines its overrides and
 * includes this file.  Constants and their derivation: exp.h.
 *
 *   - peak_vf_exp(x) = e^x for any x (peak_exp).  2^n is built by shifting
 *     n + 127 into the exponent field, which covers normal powers only, so
 *     it is split, 2^n = 2^(n/2) * 2^(n - n/2), two normal powers for
 *     every |n| <= 150, multiplied into p in turn: the first product exact,
 *     the second rounded once (+inf on overflow, gradual underflow to +0).
 *     Override: PEAK_EXP_HAS_EXP (AVX-512's VSCALEFPS, the same bits).
 *   - peak_vf_exp_sm(a, lo, magic) = the softmax's 2^-k e^a: one power,
 *     results below FLT_MIN +0 or subnormal as exp.h says.
 *   - peak_vf_exp2_ftz(t) = attention's 2^t, +0 below FLT_MIN.
 *     Override: PEAK_EXP_HAS_EXP2 (AVX-512's VREDUCEPS + VSCALEFPS).
 * All: -inf -> +0, NaN -> NaN, e^0 = 2^0 = 1 exactly, never negative.
 * Every FMA is rounded once, as the scalar tier's fmaf, so the generic
 * functions give the scalar tier's bits.
 */
#ifndef PEAK_EXP_BODY_H
#define PEAK_EXP_BODY_H

#include "exp.h"

#include <assert.h>
#include <stdbool.h>
#include <stddef.h>

#if !defined(PEAK_VF_LANES)
#error "include a vector vocabulary before exp-body.h"
#endif

/* Vectors an iteration of the array loops: a tier with short vectors sets
   more, so that independent Horner chains share the FMA latency. */
#ifndef PEAK_EXP_UNROLL
#define PEAK_EXP_UNROLL 1
#endif

/* (((c4 r + c3) r + c2) r + c1) r + c0: Horner's scheme, one rounding a
   step, the part the two polynomials share. */
static inline peak_vf peak_exp_horner(peak_vf r, float c4, float c3, float c2, float c1, float c0)
{
    peak_vf p = peak_vf_set1(c4);
    p = peak_vf_fma(p, r, peak_vf_set1(c3));
    p = peak_vf_fma(p, r, peak_vf_set1(c2));
    p = peak_vf_fma(p, r, peak_vf_set1(c1));
    return peak_vf_fma(p, r, peak_vf_set1(c0));
}

/* e^r for |r| <= ln2/2 (and NaN). */
static inline peak_vf peak_exp_poly(peak_vf r)
{
    const peak_vf one = peak_vf_set1(1.0f);
    const peak_vf p =
        peak_exp_horner(r, PEAK_EXP_C6, PEAK_EXP_C5, PEAK_EXP_C4, PEAK_EXP_C3, PEAK_EXP_C2);
    return peak_vf_fma(peak_vf_fma(p, r, one), r, one);
}

/* 2^r for 0 <= r < 1 (and NaN). */
static inline peak_vf peak_exp2_poly(peak_vf r)
{
    const peak_vf p =
        peak_exp_horner(r, PEAK_EXP2_C5, PEAK_EXP2_C4, PEAK_EXP2_C3, PEAK_EXP2_C2, PEAK_EXP2_C1);
    return peak_vf_fma(p, r, peak_vf_set1(1.0f));
}

/* r = x - n ln2 given n as a float. */
static inline peak_vf peak_exp_reduce(peak_vf x, peak_vf n)
{
    const peak_vf r = peak_vf_fma(n, peak_vf_set1(PEAK_EXP_MINUS_LN2_HI), x);
    return peak_vf_fma(n, peak_vf_set1(PEAK_EXP_MINUS_LN2_LO), r);
}

#ifndef PEAK_EXP_HAS_EXP
/* e^x for any x: the clamps of exp.h, which keep a NaN x. */
static inline peak_vf peak_vf_exp(peak_vf x)
{
    const peak_vf magic = peak_vf_set1(PEAK_EXP_ROUND_MAGIC);
    x = peak_vf_at_most(x, peak_vf_set1(PEAK_EXP_X_MAX));
    x = peak_vf_at_least(x, peak_vf_set1(PEAK_EXP_X_MIN));
    peak_vf n = peak_vf_fma(x, peak_vf_set1(PEAK_EXP_LOG2E), magic);
    /* The low mantissa bits of n hold n + 2^22 (two's complement above
       the magic's implicit bit): subtracting the magic's bit pattern gives
       n as an integer, -150 <= n <= 128. */
    const peak_vi ni = peak_vi_sub(peak_vf_as_vi(n), peak_vf_as_vi(magic));
    const peak_vi bias = peak_vi_set1(127);
    const peak_vi half = peak_vi_halve(ni);
    const peak_vf s1 = peak_vf_pow2_biased(peak_vi_add(half, bias));
    const peak_vf s2 = peak_vf_pow2_biased(peak_vi_add(peak_vi_sub(ni, half), bias));
    n = peak_vf_sub(n, magic);
    const peak_vf p = peak_exp_poly(peak_exp_reduce(x, n));
    return peak_vf_mul(peak_vf_mul(p, s1), s2);
}
#endif

#ifndef PEAK_EXP_HAS_EXP2
/* 2^t for t <= 1, -inf or NaN; +0 where t < -126 (2^t < FLT_MIN).
   floor(t) + the biased magic number is exact and leaves floor(t) + 127
   in the low bits; the clamp keeps that >= 0, and 0 shifted into the
   exponent is +0.0f.  A NaN t shifts to +0.0f too, but p is NaN and
   NaN * 0 is NaN. */
static inline peak_vf peak_vf_exp2_ftz(peak_vf t)
{
    t = peak_vf_at_least(t, peak_vf_set1(PEAK_EXP2_T_CLAMP));
    const peak_vf n = peak_vf_floor(t);
    const peak_vf biased = peak_vf_add(n, peak_vf_set1(PEAK_EXP_ROUND_MAGIC_BIASED));
    const peak_vf p = peak_exp2_poly(peak_vf_sub(t, n));
    return peak_vf_mul(p, peak_vf_pow2_biased(peak_vf_as_vi(biased)));
}
#endif

/* 2^-k e^s for the softmax, given its row's constants lo and magic =
   PEAK_EXP_ROUND_MAGIC_BIASED - k (exp.h, softmax.h): the reduction and
   polynomial of peak_vf_exp, with 2^(M - k) one power built from exponent
   bits.  +0 for s <= lo or -inf, NaN for NaN.  (VSCALEFPS would need a
   compare and a mask as well: at the clamp, M - k = -127, it gives a
   subnormal where +0 is due.) */
static inline peak_vf peak_vf_exp_sm(peak_vf s, peak_vf lo, peak_vf magic)
{
    s = peak_vf_at_least(s, lo);
    const peak_vf n = peak_vf_fma(s, peak_vf_set1(PEAK_EXP_LOG2E), magic);
    const peak_vf p = peak_exp_poly(peak_exp_reduce(s, peak_vf_sub(n, magic)));
    return peak_vf_mul(p, peak_vf_pow2_biased(peak_vf_as_vi(n)));
}

/* ---- peak_exp and peak_exp2 over arrays ---------------------------------- */

/* e^x, or 2^x (`base2`). */
static inline __attribute__((always_inline)) peak_vf peak_exp_of(peak_vf x, bool base2)
{
    return base2 ? peak_vf_exp2_ftz(x) : peak_vf_exp(x);
}

/* y[j] = e^x[j] (or 2^x[j]) for j < n.  The tail goes through
   peak_vf_load_first and peak_vf_store_first: nothing past x[n-1] is read
   or y[n-1] written, and y == x works since each vector is read before it
   is written. */
static inline __attribute__((always_inline)) void peak_exp_map(float *y, const float *x, size_t n,
                                                               bool base2)
{
    assert(y && x);
    const size_t step = PEAK_EXP_UNROLL * PEAK_VF_LANES;
    size_t j = 0;
    for (; PEAK_EXP_UNROLL > 1 && j + step <= n; j += step) {
        peak_vf v[PEAK_EXP_UNROLL];
#pragma GCC unroll 4
        for (size_t u = 0; u < PEAK_EXP_UNROLL; u++)
            v[u] = peak_exp_of(peak_vf_loadu(x + j + u * PEAK_VF_LANES), base2);
#pragma GCC unroll 4
        for (size_t u = 0; u < PEAK_EXP_UNROLL; u++)
            peak_vf_storeu(y + j + u * PEAK_VF_LANES, v[u]);
    }
    for (; j + PEAK_VF_LANES <= n; j += PEAK_VF_LANES)
        peak_vf_storeu(y + j, peak_exp_of(peak_vf_loadu(x + j), base2));
    if (j < n)
        peak_vf_store_first(y + j, peak_exp_of(peak_vf_load_first(x + j, n - j), base2), n - j);
}

#endif /* PEAK_EXP_BODY_H */
