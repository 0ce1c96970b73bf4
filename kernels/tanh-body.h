/*
 * tanh-body.h - tanh and logit soft-capping written once against the vector
 * vocabulary (simd/f32-<isa>.h), for the softmax's and attention's cap
 * (peak_logits).  A tier includes its exponentials (<isa>/exp-<isa>.h,
 * which include its vocabulary) and then this file.  Algorithm, constants
 * and error bound: tanh.h, whose peak_tanh_ref and peak_softcap_ref perform
 * these operations one float at a time: the same bits on every tier.
 *
 *   - peak_vf_tanh(t): at most 0.959 ULP (exhaustive), odd bit for bit,
 *     monotonic, +-inf -> +-1, NaN -> NaN, subnormal t -> t.
 *   - peak_vf_softcap(s, cap) = cap tanh(s / cap): +-inf -> +-cap.
 *
 * Both branches are computed in every lane and one is selected, unless
 * every lane takes the polynomial: a lane's bits never depend on its
 * neighbours.
 */
#ifndef PEAK_TANH_BODY_H
#define PEAK_TANH_BODY_H

#include "tanh.h"

#if !defined(PEAK_VF_LANES) || !defined(PEAK_EXP_BODY_H)
#error "include the tier's exponentials (<isa>/exp-<isa>.h) before tanh-body.h"
#endif

/* tanh(t) for every float t. */
static inline peak_vf peak_vf_tanh(peak_vf t)
{
    const peak_vf one = peak_vf_set1(1.0f);
    const peak_vf a = peak_vf_abs(t);
    /* a < 1: a + a^3 P(a^2) */
    const peak_vf s = peak_vf_mul(a, a);
    peak_vf p = peak_vf_fma(peak_vf_set1(PEAK_TANH_P6), s, peak_vf_set1(PEAK_TANH_P5));
    p = peak_vf_fma(p, s, peak_vf_set1(PEAK_TANH_P4));
    p = peak_vf_fma(p, s, peak_vf_set1(PEAK_TANH_P3));
    p = peak_vf_fma(p, s, peak_vf_set1(PEAK_TANH_P2));
    p = peak_vf_fma(p, s, peak_vf_set1(PEAK_TANH_P1));
    p = peak_vf_fma(p, s, peak_vf_set1(PEAK_TANH_P0));
    const peak_vf small = peak_vf_fma(peak_vf_mul(p, s), a, a);
    /* Scores rarely reach the cap: where |t| < 1 in every lane the
       exponential and its division are skipped (capped attention, H 8,
       L 2048, causal: 1.33x -> 1.11x the uncapped time, AVX-512). */
    const peak_vf poly_max = peak_vf_set1(PEAK_TANH_POLY_MAX);
    if (peak_vf_all_lt(a, poly_max))
        return peak_vf_copysign(small, t);
    /* a >= 1 or NaN: 1 - 2 / (e^(2a) + 1); MINPS/FMIN keep a NaN a */
    const peak_vf ac = peak_vf_at_most(a, peak_vf_set1(PEAK_TANH_CLAMP));
    const peak_vf e = peak_vf_exp(peak_vf_add(ac, ac));
    const peak_vf large = peak_vf_sub(one, peak_vf_div(peak_vf_set1(2.0f), peak_vf_add(e, one)));
    const peak_vf y = peak_vf_select_lt(a, poly_max, small, large);
    return peak_vf_copysign(y, t);
}

/* cap tanh(s / cap), cap > 0 and finite in every lane: a true division,
   tanh, the product, each rounded once (tanh.h: peak_softcap_ref). */
static inline peak_vf peak_vf_softcap(peak_vf s, peak_vf cap)
{
    return peak_vf_mul(cap, peak_vf_tanh(peak_vf_div(s, cap)));
}

#endif /* PEAK_TANH_BODY_H */
