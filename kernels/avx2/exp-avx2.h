/*
 * exp-avx2.h - e^x on 8 floats (AVX2 + FMA), for the AVX2 softmax, peak_exp
 * and attention.  Header-only and static inline: an out-of-line call per
 * vector would cost as much as the exponential.
 *
 * Method (constants and their derivation: exp.h): the same three
 * functions, range reductions and polynomials as exp-avx512.h; only 2^n
 * differs, since AVX2 has no VSCALEFPS.  2^n is built by shifting n + 127
 * into the exponent field, which covers normal powers only, so:
 *   - peak_avx2_exp(x) (peak_exp) splits 2^n = 2^(n/2) * 2^(n - n/2), two
 *     normal powers for every |n| <= 150, and multiplies p by them in turn.
 *     The first product is exact, the second rounds once: bit for bit the
 *     AVX-512 results (+inf on overflow, gradual underflow to +0).
 *   - peak_avx2_exp_sm(a) (the softmax's 2^-k e^a) and peak_avx2_exp2_ftz(t)
 *     (attention's 2^t) take one power; their results below FLT_MIN are
 *     +0 or subnormal as exp.h says, as on the AVX-512 tier.
 * All: -inf -> +0, NaN -> NaN, e^0 = 2^0 = 1 exactly, never negative.
 */
#ifndef PEAK_EXP_AVX2_H
#define PEAK_EXP_AVX2_H

#include "exp.h"

#include <immintrin.h>

/* e^r for |r| <= ln2/2 (and NaN). */
static inline __m256 peak_avx2_exp_poly(__m256 vr)
{
    __m256 vp = _mm256_set1_ps(PEAK_EXP_C6);
    vp = _mm256_fmadd_ps(vp, vr, _mm256_set1_ps(PEAK_EXP_C5));
    vp = _mm256_fmadd_ps(vp, vr, _mm256_set1_ps(PEAK_EXP_C4));
    vp = _mm256_fmadd_ps(vp, vr, _mm256_set1_ps(PEAK_EXP_C3));
    vp = _mm256_fmadd_ps(vp, vr, _mm256_set1_ps(PEAK_EXP_C2));
    vp = _mm256_fmadd_ps(vp, vr, _mm256_set1_ps(1.0f));
    return _mm256_fmadd_ps(vp, vr, _mm256_set1_ps(1.0f));
}

/* r = x - n ln2 given n as a float. */
static inline __m256 peak_avx2_exp_reduce(__m256 vx, __m256 vn)
{
    __m256 vr = _mm256_fmadd_ps(vn, _mm256_set1_ps(PEAK_EXP_MINUS_LN2_HI), vx);
    return _mm256_fmadd_ps(vn, _mm256_set1_ps(PEAK_EXP_MINUS_LN2_LO), vr);
}

/* 2^e for an integer -126 <= e <= 127, given e + 127 in the low 9 bits
   (a biased value of 0 gives +0.0f rather than 2^-127). */
static inline __m256 peak_avx2_pow2_biased(__m256i vbiased)
{
    return _mm256_castsi256_ps(_mm256_slli_epi32(vbiased, 23));
}

/* e^x for any x.  MINPS/MAXPS return their second operand when either is
   NaN, hence the order of the clamps. */
static inline __m256 peak_avx2_exp(__m256 vx)
{
    const __m256 vmagic = _mm256_set1_ps(PEAK_EXP_ROUND_MAGIC);
    vx = _mm256_min_ps(_mm256_set1_ps(PEAK_EXP_X_MAX), vx);
    vx = _mm256_max_ps(_mm256_set1_ps(PEAK_EXP_X_MIN), vx);
    __m256 vn = _mm256_fmadd_ps(vx, _mm256_set1_ps(PEAK_EXP_LOG2E), vmagic);
    /* The low mantissa bits of vn hold n + 2^22 (two's complement above
       the magic's implicit bit): subtracting the magic's bit pattern gives
       n as an integer, -150 <= n <= 128. */
    const __m256i vni = _mm256_sub_epi32(_mm256_castps_si256(vn),
                                         _mm256_castps_si256(vmagic));
    const __m256i vbias = _mm256_set1_epi32(127);
    const __m256i vhalf = _mm256_srai_epi32(vni, 1);
    const __m256 vs1 = peak_avx2_pow2_biased(_mm256_add_epi32(vhalf, vbias));
    const __m256 vs2 = peak_avx2_pow2_biased(
        _mm256_add_epi32(_mm256_sub_epi32(vni, vhalf), vbias));
    vn = _mm256_sub_ps(vn, vmagic);
    const __m256 vp = peak_avx2_exp_poly(peak_avx2_exp_reduce(vx, vn));
    return _mm256_mul_ps(_mm256_mul_ps(vp, vs1), vs2);
}

/* 2^r for 0 <= r < 1 (and NaN). */
static inline __m256 peak_avx2_exp2_poly(__m256 vr)
{
    __m256 vp = _mm256_set1_ps(PEAK_EXP2_C5);
    vp = _mm256_fmadd_ps(vp, vr, _mm256_set1_ps(PEAK_EXP2_C4));
    vp = _mm256_fmadd_ps(vp, vr, _mm256_set1_ps(PEAK_EXP2_C3));
    vp = _mm256_fmadd_ps(vp, vr, _mm256_set1_ps(PEAK_EXP2_C2));
    vp = _mm256_fmadd_ps(vp, vr, _mm256_set1_ps(PEAK_EXP2_C1));
    return _mm256_fmadd_ps(vp, vr, _mm256_set1_ps(1.0f));
}

/* 2^t for t <= 1, -inf or NaN; +0 where t < -126 (2^t < FLT_MIN), as on
   the AVX-512 tier.  floor(t) + the biased magic number is
   exact and leaves floor(t) + 127 in the low bits; the clamp keeps that
   >= 0, and 0 shifted into the exponent is +0.0f.  A NaN t shifts to +0.0f
   too, but p is NaN and NaN * 0 is NaN. */
static inline __m256 peak_avx2_exp2_ftz(__m256 vt)
{
    vt = _mm256_max_ps(_mm256_set1_ps(PEAK_EXP2_T_CLAMP), vt);
    const __m256 vn = _mm256_floor_ps(vt);
    const __m256 vbiased = _mm256_add_ps(vn, _mm256_set1_ps(PEAK_EXP_ROUND_MAGIC_BIASED));
    const __m256 vp = peak_avx2_exp2_poly(_mm256_sub_ps(vt, vn));
    return _mm256_mul_ps(vp, peak_avx2_pow2_biased(_mm256_castps_si256(vbiased)));
}

/* 2^-k e^s for the softmax, given its row's constants lo and magic =
   PEAK_EXP_ROUND_MAGIC_BIASED - k (exp.h, softmax.h): the
   reduction and polynomial of peak_avx2_exp, with 2^(M - k) one power
   built from exponent bits.  +0 for s <= lo or -inf, NaN for NaN. */
static inline __m256 peak_avx2_exp_sm(__m256 vs, __m256 vlo, __m256 vmagic)
{
    vs = _mm256_max_ps(vlo, vs);
    const __m256 vn = _mm256_fmadd_ps(vs, _mm256_set1_ps(PEAK_EXP_LOG2E), vmagic);
    const __m256 vp = peak_avx2_exp_poly(peak_avx2_exp_reduce(vs, _mm256_sub_ps(vn, vmagic)));
    return _mm256_mul_ps(vp, peak_avx2_pow2_biased(_mm256_castps_si256(vn)));
}

#endif /* PEAK_EXP_AVX2_H */
