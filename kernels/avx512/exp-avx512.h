/*
 * exp-avx512.h - exponentials on 16 floats (AVX-512F/DQ) for the AVX-512
 * softmax, peak_exp and attention.  Header-only and static inline:
 * an out-of-line call per vector would cost as much as the function.
 * Constants and their derivation: exp.h.
 *
 * peak_avx512_exp(x) = e^x for any x (peak_exp).  n = round(x/ln2) by a
 * magic-number FMA, r = x - n ln2 in two FMA steps, e^r by a degree-6
 * polynomial, then VSCALEFPS for p * 2^n.  VSCALEFPS rounds the product
 * once, which gives the edges for free: +inf exactly when e^x overflows,
 * and below FLT_MIN p * 2^n rounded once to the subnormal grid (gradual
 * underflow), then +0.  Exhaustively over all floats: <= 0.91 ULP for
 * normal results; subnormal results within 0.88 of a subnormal step of
 * e^x (98% of them e^x correctly rounded).
 *
 * peak_avx512_exp_sm(a) = 2^-k e^a for the softmax (softmax.h),
 * exp-avx2.h's peak_avx2_exp_sm operation for operation: the same bits.
 *
 * peak_avx512_exp2(t) = 2^t for t <= 1 (attention computes
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

#include "avx512/intrin-avx512.h"

/* e^r for |r| <= ln2/2 (and NaN). */
static inline __m512 peak_avx512_exp_poly(__m512 vr)
{
    __m512 vp = _mm512_set1_ps(PEAK_EXP_C6);
    vp = _mm512_fmadd_ps(vp, vr, _mm512_set1_ps(PEAK_EXP_C5));
    vp = _mm512_fmadd_ps(vp, vr, _mm512_set1_ps(PEAK_EXP_C4));
    vp = _mm512_fmadd_ps(vp, vr, _mm512_set1_ps(PEAK_EXP_C3));
    vp = _mm512_fmadd_ps(vp, vr, _mm512_set1_ps(PEAK_EXP_C2));
    vp = _mm512_fmadd_ps(vp, vr, _mm512_set1_ps(1.0f));
    return _mm512_fmadd_ps(vp, vr, _mm512_set1_ps(1.0f));
}

/* e^x for any x.  MINPS/MAXPS return their second operand when either is
   NaN, hence the order of the clamps (exp.h: why they change no
   result). */
static inline __m512 peak_avx512_exp(__m512 vx)
{
    const __m512 vmagic = _mm512_set1_ps(PEAK_EXP_ROUND_MAGIC);
    vx = _mm512_min_ps(_mm512_set1_ps(PEAK_EXP_X_MAX), vx);
    vx = _mm512_max_ps(_mm512_set1_ps(PEAK_EXP_X_MIN), vx);
    __m512 vn = _mm512_fmadd_ps(vx, _mm512_set1_ps(PEAK_EXP_LOG2E), vmagic);
    vn = _mm512_sub_ps(vn, vmagic);
    __m512 vr = _mm512_fmadd_ps(vn, _mm512_set1_ps(PEAK_EXP_MINUS_LN2_HI), vx);
    vr = _mm512_fmadd_ps(vn, _mm512_set1_ps(PEAK_EXP_MINUS_LN2_LO), vr);
    return _mm512_scalef_ps(peak_avx512_exp_poly(vr), vn);
}

/* 2^r for 0 <= r < 1 (and NaN). */
static inline __m512 peak_avx512_exp2_poly(__m512 vr)
{
    __m512 vp = _mm512_set1_ps(PEAK_EXP2_C5);
    vp = _mm512_fmadd_ps(vp, vr, _mm512_set1_ps(PEAK_EXP2_C4));
    vp = _mm512_fmadd_ps(vp, vr, _mm512_set1_ps(PEAK_EXP2_C3));
    vp = _mm512_fmadd_ps(vp, vr, _mm512_set1_ps(PEAK_EXP2_C2));
    vp = _mm512_fmadd_ps(vp, vr, _mm512_set1_ps(PEAK_EXP2_C1));
    return _mm512_fmadd_ps(vp, vr, _mm512_set1_ps(1.0f));
}

/* 2^t for t <= 1, -inf or NaN, in the lanes of k; +0 in the others and
   where t < -126 (exp.h), both through the VSCALEFPS zero-mask.
   _CMP_NLT_UQ keeps NaN lanes, whose NaN then propagates.  VSCALEFPS uses
   floor(t) of its second operand, the same floor VREDUCEPS (round-down
   mode) took off r. */
static inline __m512 peak_avx512_exp2_maskz(__mmask16 k, __m512 vt)
{
    k = _mm512_mask_cmp_ps_mask(k, vt, _mm512_set1_ps(PEAK_EXP2_T_MIN), _CMP_NLT_UQ);
    const __m512 vr = _mm512_reduce_ps(vt, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
    return _mm512_maskz_scalef_ps(k, peak_avx512_exp2_poly(vr), vt);
}

static inline __m512 peak_avx512_exp2(__m512 vt)
{
    return peak_avx512_exp2_maskz((__mmask16)0xffff, vt);
}

/* 2^-k e^a for the softmax, given its row's constants lo and magic =
   PEAK_EXP_ROUND_MAGIC_BIASED - k (exp.h): exp-avx2.h's
   peak_avx2_exp_sm operation for operation, 2^(M - k) built from exponent
   bits as there.  (VSCALEFPS would need a compare and a mask as well: at
   the clamp, M - k = -127, it gives a subnormal where +0 is due.) */
static inline __m512 peak_avx512_exp_sm(__m512 vs, __m512 vlo, __m512 vmagic)
{
    vs = _mm512_max_ps(vlo, vs);
    const __m512 vn = _mm512_fmadd_ps(vs, _mm512_set1_ps(PEAK_EXP_LOG2E), vmagic);
    const __m512 vm = _mm512_sub_ps(vn, vmagic);
    __m512 vr = _mm512_fmadd_ps(vm, _mm512_set1_ps(PEAK_EXP_MINUS_LN2_HI), vs);
    vr = _mm512_fmadd_ps(vm, _mm512_set1_ps(PEAK_EXP_MINUS_LN2_LO), vr);
    const __m512 vpow = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_castps_si512(vn), 23));
    return _mm512_mul_ps(peak_avx512_exp_poly(vr), vpow);
}

#endif /* PEAK_EXP_AVX512_H */
