/*
 * exp-neon.h - e^x, the softmax's 2^-k e^a and attention's 2^t on 4 floats
 * (AArch64 AdvSIMD), for the NEON softmax, attention and peak_exp.  Header-only and static inline:
 * an out-of-line call per vector would cost as much as the exponential.
 *
 * Method (constants and their derivation: exp.h): the AVX2 tier's
 * (avx2/exp-avx2.h) operation for operation.  AdvSIMD has no VSCALEFPS
 * either, so 2^n is built by shifting n + 127 into the exponent field:
 *   - peak_neon_exp(x) (peak_exp) splits 2^n = 2^(n/2) * 2^(n - n/2), two
 *     normal powers for every |n| <= 150, multiplied into p in turn (the
 *     first product exact, the second rounded once).  Each step is one
 *     correctly rounded FMLA/FMUL where the scalar tier has one fmaf/`*`,
 *     so the results are the scalar and x86 tiers' bits.
 *   - peak_neon_exp_sm(a) (the softmax) takes one power, exp-avx2.h's
 *     peak_avx2_exp_sm operation for operation: the x86 tiers' bits.
 *   - peak_neon_exp2_ftz(t) (attention) takes one power; results below
 *     FLT_MIN are +0.  FRINTM is floor() and r = t - floor(t) is exact, so
 *     these are the scalar tier's bits too.
 * NaN: FMIN/FMAX return NaN if either operand is NaN (unlike MINPS, whose
 * operand order decides), so a NaN input reaches the polynomial whatever
 * the clamp order and comes out NaN; the exponent bits built from it do not
 * matter.  -inf -> +0, e^0 = 2^0 = 1 exactly, never negative.
 *
 * Expected on a Neoverse V1/V2 (4 x 128-bit FP/ASIMD pipes, FMA latency
 * 4): peak_neon_exp is 21 FP/ASIMD instructions per 4 floats,
 * peak_neon_exp_sm 13 and peak_neon_exp2_ftz 11, plus a register MOV per
 * Horner step (FMLA
 * overwrites its addend, here a constant), which the renamer may absorb.
 * With 2 to 4 vectors in flight, so that the Horner chains (7 and 5
 * dependent FMAs) overlap, that is ~1.3 and ~0.7 cycle per float: e^x
 * about 1.3x an AVX2 core's cycles per float (21 instructions per 8 floats
 * on two ports), 2^t about the same.  Not measured: no AArch64 hardware
 * here, only qemu.
 */
#ifndef PEAK_EXP_NEON_H
#define PEAK_EXP_NEON_H

#include "exp.h"

#include <arm_neon.h>

/* e^r for |r| <= ln2/2 (and NaN).  vfmaq_f32(a, b, c) is a + b * c. */
static inline float32x4_t peak_neon_exp_poly(float32x4_t vr)
{
    float32x4_t vp = vdupq_n_f32(PEAK_EXP_C6);
    vp = vfmaq_f32(vdupq_n_f32(PEAK_EXP_C5), vp, vr);
    vp = vfmaq_f32(vdupq_n_f32(PEAK_EXP_C4), vp, vr);
    vp = vfmaq_f32(vdupq_n_f32(PEAK_EXP_C3), vp, vr);
    vp = vfmaq_f32(vdupq_n_f32(PEAK_EXP_C2), vp, vr);
    vp = vfmaq_f32(vdupq_n_f32(1.0f), vp, vr);
    return vfmaq_f32(vdupq_n_f32(1.0f), vp, vr);
}

/* 2^e for an integer -126 <= e <= 127, given e + 127 in the low 9 bits
   (a biased value of 0 gives +0.0f rather than 2^-127). */
static inline float32x4_t peak_neon_pow2_biased(int32x4_t vbiased)
{
    return vreinterpretq_f32_s32(vshlq_n_s32(vbiased, 23));
}

/* e^x for any x. */
static inline float32x4_t peak_neon_exp(float32x4_t vx)
{
    const float32x4_t vmagic = vdupq_n_f32(PEAK_EXP_ROUND_MAGIC);
    vx = vminq_f32(vx, vdupq_n_f32(PEAK_EXP_X_MAX));
    vx = vmaxq_f32(vx, vdupq_n_f32(PEAK_EXP_X_MIN));
    float32x4_t vn = vfmaq_f32(vmagic, vx, vdupq_n_f32(PEAK_EXP_LOG2E));
    /* The low mantissa bits of vn hold n + 2^22 (two's complement above
       the magic's implicit bit): subtracting the magic's bit pattern gives
       n as an integer, -150 <= n <= 128. */
    const int32x4_t vni =
        vsubq_s32(vreinterpretq_s32_f32(vn), vreinterpretq_s32_f32(vmagic));
    const int32x4_t vbias = vdupq_n_s32(127);
    const int32x4_t vhalf = vshrq_n_s32(vni, 1);
    const float32x4_t vs1 = peak_neon_pow2_biased(vaddq_s32(vhalf, vbias));
    const float32x4_t vs2 = peak_neon_pow2_biased(vaddq_s32(vsubq_s32(vni, vhalf), vbias));
    vn = vsubq_f32(vn, vmagic);
    float32x4_t vr = vfmaq_f32(vx, vn, vdupq_n_f32(PEAK_EXP_MINUS_LN2_HI));
    vr = vfmaq_f32(vr, vn, vdupq_n_f32(PEAK_EXP_MINUS_LN2_LO));
    const float32x4_t vp = peak_neon_exp_poly(vr);
    return vmulq_f32(vmulq_f32(vp, vs1), vs2);
}

/* 2^r for 0 <= r < 1 (and NaN). */
static inline float32x4_t peak_neon_exp2_poly(float32x4_t vr)
{
    float32x4_t vp = vdupq_n_f32(PEAK_EXP2_C5);
    vp = vfmaq_f32(vdupq_n_f32(PEAK_EXP2_C4), vp, vr);
    vp = vfmaq_f32(vdupq_n_f32(PEAK_EXP2_C3), vp, vr);
    vp = vfmaq_f32(vdupq_n_f32(PEAK_EXP2_C2), vp, vr);
    vp = vfmaq_f32(vdupq_n_f32(PEAK_EXP2_C1), vp, vr);
    return vfmaq_f32(vdupq_n_f32(1.0f), vp, vr);
}

/* 2^t for t <= 1, -inf or NaN; +0 where t < -126 (2^t < FLT_MIN).
   floor(t) + the biased magic number is exact and leaves floor(t) + 127 in
   the low bits; the clamp keeps that >= 0, and 0 shifted into the exponent
   is +0.0f. */
static inline float32x4_t peak_neon_exp2_ftz(float32x4_t vt)
{
    vt = vmaxq_f32(vt, vdupq_n_f32(PEAK_EXP2_T_CLAMP));
    const float32x4_t vn = vrndmq_f32(vt);
    const float32x4_t vbiased = vaddq_f32(vn, vdupq_n_f32(PEAK_EXP_ROUND_MAGIC_BIASED));
    const float32x4_t vp = peak_neon_exp2_poly(vsubq_f32(vt, vn));
    return vmulq_f32(vp, peak_neon_pow2_biased(vreinterpretq_s32_f32(vbiased)));
}

/* 2^-k e^a for the softmax, given its row's constants lo and magic =
   PEAK_EXP_ROUND_MAGIC_BIASED - k (exp.h): avx2/exp-avx2.h's
   peak_avx2_exp_sm operation for operation, so the same bits.  FMAX
   returns NaN for a NaN a, which the polynomial carries through. */
static inline float32x4_t peak_neon_exp_sm(float32x4_t vs, float32x4_t vlo, float32x4_t vmagic)
{
    vs = vmaxq_f32(vs, vlo);
    const float32x4_t vn = vfmaq_f32(vmagic, vs, vdupq_n_f32(PEAK_EXP_LOG2E));
    const float32x4_t vm = vsubq_f32(vn, vmagic);
    float32x4_t vr = vfmaq_f32(vs, vm, vdupq_n_f32(PEAK_EXP_MINUS_LN2_HI));
    vr = vfmaq_f32(vr, vm, vdupq_n_f32(PEAK_EXP_MINUS_LN2_LO));
    return vmulq_f32(peak_neon_exp_poly(vr), peak_neon_pow2_biased(vreinterpretq_s32_f32(vn)));
}

#endif /* PEAK_EXP_NEON_H */
