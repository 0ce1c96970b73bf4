/*
 * tanh.h - float tanh for logit soft-capping (Gemma 2: s = cap tanh(s / cap),
 * peak_logits): the constants shared by the vector code (tanh-body.h) and
 * the scalar reference below, which performs the same operations in the
 * same order, each rounded once (fmaf is correctly rounded, as the vector
 * FMAs are), so that every tier gives the same bits.
 *
 * tanh is odd: it is computed on a = |t| and t's sign put back (so
 * tanh(-t) = -tanh(t) bit for bit, tanh(-0) = -0).  Two branches, split at
 * a = PEAK_TANH_POLY_MAX = 1:
 *
 *   a < 1:  a + a^3 P(a^2), P of degree 6, an odd minimax fit of the
 *           relative error over (0, 1) (scripts/fit-tanh-poly.py, each
 *           coefficient rounded to float and the rest refitted): 5.2e-9,
 *           0.09 ULP.  Evaluated as s = a a, Horner's scheme in s, then
 *           fma(P(s) s, a, a): the leading a is exact and the rounded
 *           correction is at most 31% of the result (a - tanh a over tanh a
 *           at a = 1), so its roundings count for less than a third.
 *           Subnormal a: s is 0 and the result is a itself.
 *   a >= 1: 1 - 2 / (e^(2a) + 1), e^(2a) by peak_vf_exp (exp.h: <= 0.91
 *           ULP; 2a is exact).  q = 2 / (e^(2a) + 1) <= 0.2384, so the
 *           error of e^(2a) reaches the result damped, weighted by q
 *           e^(2a) / (e^(2a) + 1) < q: 0.38 ULP of the result at most,
 *           the rounding of e^(2a) + 1 at most 0.24, the division's at
 *           most 0.125 (half an ulp of q < 1/4), the final subtraction's
 *           0.5: 1.25 ULP a priori.  a is first clamped to PEAK_TANH_CLAMP,
 *           past which tanh rounds to 1 (below).
 *
 * The split at 1, not at 0.55-0.625 where the polynomial could be one
 * degree lower: at a split T the second branch's q reaches 2 / (e^(2T) + 1),
 * and its error grows with q.  Maxima of the second branch over every float
 * in [T, 9.5]: 1.36 ULP for T = 0.625, 1.07 for 0.75, 0.96 for 1; of the
 * polynomial over [2^-14, T], degree 5 up to 0.625 and 0.75, degree 6 up
 * to 1: 0.70, 0.76, 0.94.  One FMA more for a bound below 1 ULP.
 *
 * Measured exhaustively over all 2^32 floats against tanh in double
 * (scripts/tanh-bound.c): at most 0.959 ULP (at t = 0x1.022fd6p+0, the
 * second branch; the polynomial's largest is 0.938 at 0x1.d3e846p-1);
 * monotonic non-decreasing over all floats; |tanh t| <= 1; +-inf -> +-1,
 * NaN -> NaN; and the AVX2 and AVX-512 tiers give these bits for every
 * input.
 *
 * Soft-capping: cap tanh(s / cap) with s / cap a true division (rounded
 * once, not a multiply by a rounded 1 / cap), then tanh, then the product,
 * rounded once.  The division's half ulp (damped by t tanh'(t) / tanh t
 * <= 1) and the product's half ulp add to tanh's error, and an ulp of t,
 * of tanh t and of the product are different fractions of their values
 * (a result at the top of its binade, a tanh at the bottom of its), which
 * can nearly double the first two: even a correctly rounded tanh could
 * not keep this form within 2 ULP.  Measured over every third float s
 * (bit patterns 0 mod 3) in [cap FLT_MIN, 8192], against cap tanh(s / cap)
 * in double (scripts/tanh-bound.c): at most 2.37 ULP for cap 30 (at s =
 * 3.90, t = 0.13), 2.09 for cap 50; beyond 8192, tanh(s / cap) is exactly
 * 1 and the result cap.  Below cap FLT_MIN (3.5e-37 for cap 30), s / cap
 * is subnormal, a multiple of 2^-149, and the product multiplies its
 * rounding by cap: within cap / 2 steps of 2^-149 and the product's half
 * ulp (measured 16 steps for cap 30, 32 for 50).  +-inf -> +-cap,
 * NaN -> NaN, +-0 -> +-0.
 */
#ifndef PEAK_TANH_H
#define PEAK_TANH_H

#include "exp.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

/* P(s) = P0 + P1 s + ... + P6 s^6 (scripts/fit-tanh-poly.py). */
#define PEAK_TANH_P0 (-0x1.55553cp-2f)
#define PEAK_TANH_P1 0x1.110be4p-3f
#define PEAK_TANH_P2 (-0x1.b9623ap-5f)
#define PEAK_TANH_P3 0x1.6009b6p-6f
#define PEAK_TANH_P4 (-0x1.046070p-7f)
#define PEAK_TANH_P5 0x1.2da212p-9f
#define PEAK_TANH_P6 (-0x1.77d128p-12f)

/* a < 1: the polynomial; a >= 1 (and NaN): the exponential. */
#define PEAK_TANH_POLY_MAX 1.0f

/* 9.0625.  tanh(a) rounds to 1 from a = 0x1.205968p+3 = 9.0109138 on
   (1 - tanh a < 2^-25, half an ulp below 1), and the second branch gives
   exactly 1 there (checked exhaustively): the clamp changes no result.  It
   keeps e^(2a) below 2^27, so that +inf never enters the arithmetic
   (inf + 1 and 2 / inf would still give 1, but the bound above is
   measured for finite steps). */
#define PEAK_TANH_CLAMP 0x1.22p+3f

/* e^x for 2 <= x <= 2 PEAK_TANH_CLAMP: exp-body.h's peak_vf_exp one float
   at a time (its clamps change nothing in this range).  n <= 27, so both
   products by a power of two are exact, and AVX-512's VSCALEFPS gives the
   same bits. */
static inline float peak_tanh_ref_exp(float x)
{
    const float magic = PEAK_EXP_ROUND_MAGIC;
    float n = fmaf(x, PEAK_EXP_LOG2E, magic);
    uint32_t nb, mb;
    memcpy(&nb, &n, sizeof nb);
    memcpy(&mb, &magic, sizeof mb);
    const uint32_t ni = nb - mb, half = ni >> 1; /* n >= 0 here */
    const uint32_t b1 = (half + 127u) << 23, b2 = (ni - half + 127u) << 23;
    float s1, s2;
    memcpy(&s1, &b1, sizeof s1);
    memcpy(&s2, &b2, sizeof s2);
    n = n - magic;
    float r = fmaf(n, PEAK_EXP_MINUS_LN2_HI, x);
    r = fmaf(n, PEAK_EXP_MINUS_LN2_LO, r);
    float p = fmaf(PEAK_EXP_C6, r, PEAK_EXP_C5);
    p = fmaf(p, r, PEAK_EXP_C4);
    p = fmaf(p, r, PEAK_EXP_C3);
    p = fmaf(p, r, PEAK_EXP_C2);
    p = fmaf(fmaf(p, r, 1.0f), r, 1.0f);
    return p * s1 * s2;
}

/* tanh(t), the bits of peak_vf_tanh (tanh-body.h). */
static inline float peak_tanh_ref(float t)
{
    if (isnan(t))
        return t + t;
    const float a = fabsf(t);
    float y;
    if (a < PEAK_TANH_POLY_MAX) {
        const float s = a * a;
        float p = fmaf(PEAK_TANH_P6, s, PEAK_TANH_P5);
        p = fmaf(p, s, PEAK_TANH_P4);
        p = fmaf(p, s, PEAK_TANH_P3);
        p = fmaf(p, s, PEAK_TANH_P2);
        p = fmaf(p, s, PEAK_TANH_P1);
        p = fmaf(p, s, PEAK_TANH_P0);
        y = fmaf(p * s, a, a);
    } else {
        const float ac = a < PEAK_TANH_CLAMP ? a : PEAK_TANH_CLAMP;
        y = 1.0f - 2.0f / (peak_tanh_ref_exp(ac + ac) + 1.0f);
    }
    return copysignf(y, t);
}

/* cap tanh(s / cap), the bits of peak_vf_softcap: a true division, tanh,
   the product, each rounded once.  cap > 0 and finite (peak_logits). */
static inline float peak_softcap_ref(float s, float cap) { return cap * peak_tanh_ref(s / cap); }

#endif /* PEAK_TANH_H */
