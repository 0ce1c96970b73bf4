/*
 * exp-avx512.h - the AVX-512 tier's exponentials (AVX-512F/DQ): exp-body.h
 * over the AVX-512 vocabulary, with VSCALEFPS and VREDUCEPS where AVX-512
 * has them, for the AVX-512 softmax, peak_exp and attention.  Header-only
 * and static inline: an out-of-line call per vector would cost as much as
 * the function.  Constants and their derivation: exp.h.
 *
 * peak_vf_exp(x) = e^x (override): exp-body.h's reduction and polynomial,
 * then VSCALEFPS for p * 2^n.  VSCALEFPS rounds the product once, which
 * gives the edges for free: +inf exactly when e^x overflows, and below
 * FLT_MIN p * 2^n rounded once to the subnormal grid (gradual underflow),
 * then +0: the bits of exp-body.h's two-step product.  Exhaustively over
 * all floats: <= 0.91 ULP for normal results; subnormal results within
 * 0.88 of a subnormal step of e^x (98% of them e^x correctly rounded).
 *
 * peak_vf_exp_sm (the softmax): exp-body.h's, the other tiers' bits.
 *
 * peak_vf_exp2_ftz(t) = 2^t for t <= 1 (override; attention computes
 * t = (s - max) * log2(e) itself).  VREDUCEPS gives r = t - floor(t) in one
 * instruction, a degree-5 polynomial 2^r, and VSCALEFPS multiplies by
 * 2^floor(t): 9 instructions per 16 values, against 12 for e^x.
 * Exhaustively: <= 2.88 ULP (the degree-5 fit).  2^t below FLT_MIN is +0,
 * as on the AVX2 tier.  Not bit for bit the AVX2 values, though: VREDUCEPS
 * rounds an inexact r (t in (-1/2, 0)) down, AVX2's subtraction to
 * nearest (2.53 ULP there); the two differ by at most one ULP.
 *
 * All: -inf -> +0, NaN -> NaN, e^0 = 2^0 = 1 exactly, never negative.
 */
#ifndef PEAK_EXP_AVX512_H
#define PEAK_EXP_AVX512_H

#include "exp.h"
#include "simd/f32-avx512.h"

/* exp-body.h's, included below. */
static inline peak_vf peak_exp_poly(peak_vf r);
static inline peak_vf peak_exp2_poly(peak_vf r);
static inline peak_vf peak_exp_reduce(peak_vf x, peak_vf n);

/* e^x for any x.  MAXPS/MINPS keep a NaN x (exp.h: why the clamps change
   no result). */
#define PEAK_EXP_HAS_EXP 1
static inline peak_vf peak_vf_exp(peak_vf x)
{
    const peak_vf magic = peak_vf_set1(PEAK_EXP_ROUND_MAGIC);
    x = peak_vf_at_most(x, peak_vf_set1(PEAK_EXP_X_MAX));
    x = peak_vf_at_least(x, peak_vf_set1(PEAK_EXP_X_MIN));
    const peak_vf n = peak_vf_sub(peak_vf_fma(x, peak_vf_set1(PEAK_EXP_LOG2E), magic), magic);
    return _mm512_scalef_ps(peak_exp_poly(peak_exp_reduce(x, n)), n);
}

/* 2^t for t <= 1, -inf or NaN, in the lanes of k; +0 in the others and
   where t < -126 (exp.h), both through the VSCALEFPS zero-mask.
   _CMP_NLT_UQ keeps NaN lanes, whose NaN then propagates.  VSCALEFPS uses
   floor(t) of its second operand, the same floor VREDUCEPS (round-down
   mode) took off r. */
static inline peak_vf peak_avx512_exp2_maskz(__mmask16 k, peak_vf vt)
{
    k = _mm512_mask_cmp_ps_mask(k, vt, _mm512_set1_ps(PEAK_EXP2_T_MIN), _CMP_NLT_UQ);
    const __m512 vr = _mm512_reduce_ps(vt, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
    return _mm512_maskz_scalef_ps(k, peak_exp2_poly(vr), vt);
}

#define PEAK_EXP_HAS_EXP2 1
static inline peak_vf peak_vf_exp2_ftz(peak_vf t)
{
    return peak_avx512_exp2_maskz((__mmask16)0xffff, t);
}

#include "exp-body.h"

#endif /* PEAK_EXP_AVX512_H */
