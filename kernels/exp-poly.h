/*
 * exp-poly.h - the constants of peak's vector exponentials, shared by every
 * SIMD tier (avx2/exp-avx2.h, avx512/exp-avx512.h, neon/exp-neon.h) so that
 * the tiers differ only in how they put 2^n back, never in the approximation itself.  Two
 * functions, two polynomials, both fitted by scripts/fit-exp-poly.py.
 *
 * ---- e^x for any x (peak_exp) ----
 *
 * e^x = 2^n * e^r,  n = round(x * log2(e)),  r = x - n * ln(2),  |r| <= ln(2)/2.
 *
 * r is formed in two FMA steps (Cody-Waite): ln2_hi is ln(2) rounded to
 * float, so n * ln2_hi is a multiple of 2^-24 and x - n * ln2_hi is exact
 * whenever it is smaller than 1/2 (always, here); the second step adds the
 * 2^-24-relative remainder ln2_lo, leaving one rounding in r.
 *
 * e^r is p(r) = 1 + r + r^2/2 + c3 r^3 + ... + c6 r^6.  c0, c1 and c2 are
 * pinned to 1, 1, 1/2 (so p(0) = 1 exactly and the two largest terms carry
 * no coefficient rounding); c3..c6 are a minimax fit of the relative error
 * over [-ln2/2, ln2/2], each rounded to float in turn and the rest refitted
 * (scripts/fit-exp-poly.py): max |p(r)/e^r - 1| = 4.3e-9, 0.04 ULP, so the
 * polynomial's own error is negligible next to the float roundings of
 * Horner's scheme.  Degree 5 with p(0) = 1 pinned at the centre of the
 * interval could do no better than 4.3e-7 (3.6 ULP).
 */
#ifndef PEAK_EXP_POLY_H
#define PEAK_EXP_POLY_H

#define PEAK_EXP_LOG2E 0x1.715476p+0f
#define PEAK_EXP_MINUS_LN2_HI (-0x1.62e430p-1f)
#define PEAK_EXP_MINUS_LN2_LO 0x1.05c610p-29f

/* 1.5 * 2^23: adding it to |t| < 2^22 rounds t to an integer (ties to
   even) held in the low mantissa bits, subtracting it gives round(t) as a
   float.  The "+ 127" variant leaves n + 127, the biased exponent of 2^n,
   in the low bits, for tiers that build 2^n with an integer shift. */
#define PEAK_EXP_ROUND_MAGIC 0x1.8p+23f
#define PEAK_EXP_ROUND_MAGIC_BIASED 0x1.8000fep+23f

#define PEAK_EXP_C2 0x1.000000p-1f
#define PEAK_EXP_C3 0x1.555466p-3f
#define PEAK_EXP_C4 0x1.5552fep-5f
#define PEAK_EXP_C5 0x1.1257d4p-7f
#define PEAK_EXP_C6 0x1.6ff25ap-10f

/* Inputs are clamped to [X_MIN, X_MAX] before the range reduction, which
   would turn an infinite x into inf - inf = NaN.  The clamped values still
   give the right answer: e^X_MIN < 2^-150 rounds to +0 (so does every
   x < -103.97208, the log of half the smallest subnormal), and e^X_MAX
   overflows to +inf (so does every x > 88.72283, the log of FLT_MAX).  Both
   keep |n| <= 150, far inside the magic number's range. */
#define PEAK_EXP_X_MIN (-0x1.ap+6f) /* -104 */
#define PEAK_EXP_X_MAX 0x1.64p+6f /* 89 */

/* ---- 2^t for t <= 1 (the softmax's inner loop) ----
 *
 * The softmax forms t = (s - m) * log2(e) (a subtraction, then a multiply:
 * deliberately not fused, see softmax-rows.h), so 2^t needs no range
 * reduction by ln 2:
 * 2^t = 2^floor(t) * 2^r, r = t - floor(t) in [0, 1), which is exact.
 * 2^r = 1 + r * (c1 + r * (c2 + ... + r * c5)), a minimax fit of the
 * relative error over [0, 1) with p(0) = 1 pinned (so the pin costs
 * nothing, unlike at the centre of an interval): max |p(r)/2^r - 1| =
 * 8.2e-8, 0.7 ULP before Horner's roundings.  Degree 5 suffices here
 * because the softmax normalises: its 4-ULP budget is for the quotient. */
#define PEAK_EXP2_C1 0x1.62e4bap-1f
#define PEAK_EXP2_C2 0x1.ebdb6ap-3f
#define PEAK_EXP2_C3 0x1.c91c10p-5f
#define PEAK_EXP2_C4 0x1.277c1cp-7f
#define PEAK_EXP2_C5 0x1.e96912p-10f

/* Underflow: 2^t < FLT_MIN, i.e. t < -126, is flushed to +0 on every tier,
   and t = -inf with it (where r would be NaN).  For t >= -126, floor(t) >=
   -126 and p >= 1, so every other result is a normal float.  The softmax
   loses nothing it can see: a probability below 1.2e-38 becomes 0.
   AVX-512 compares t with T_MIN and zeroes through the VSCALEFPS mask;
   AVX2 builds 2^floor(t) from exponent bits and clamps t at T_CLAMP
   first, where floor(t) + 127 = 0 is the bit pattern of +0.0f. */
#define PEAK_EXP2_T_MIN (-0x1.f8p+6f) /* -126 */
#define PEAK_EXP2_T_CLAMP (-0x1.fcp+6f) /* -127 */

#endif /* PEAK_EXP_POLY_H */
