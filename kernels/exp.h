/*
 * exp.h - the constants of peak's exponentials, shared by the vector code
 * (exp-body.h, with the AVX-512 overrides in avx512/exp-avx512.h) and the
 * scalar tier, so that the tiers differ only in how they put 2^n back,
 * never in the approximation itself.  Three
 * functions (peak_exp's e^x, the softmax's 2^-k e^a, attention's 2^t), two
 * polynomials, both fitted by scripts/fit-exp-poly.py.
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
#ifndef PEAK_EXP_H
#define PEAK_EXP_H

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

/* ---- 2^-k e^a for the softmax (softmax.h) ----
 *
 * The reduction and polynomial above, on the softmax's argument a (a score
 * s, or s - max where that is exact), with an integer k of the row taken
 * out of the exponent rather than the argument:
 *   2^-k e^a = 2^(M - k) e^r,  M = round(a log2(e)),  r = a - M ln2.
 * fma(a, log2(e), PEAK_EXP_ROUND_MAGIC_BIASED - k) leaves M - k + 127 in
 * its low bits, shifted into an exponent field as one power; a is first
 * clamped to lo = (k - 127) ln 2, where M - k = -127 gives the bit pattern
 * of +0: every a <= lo (and -inf) gives +0, NaN stays NaN (the clamp's
 * operand order).  M - k <= 1 in a row, so the power is never above 2.
 * For |a| <= 345:
 *   - a - M ln2_hi is exact (the first FMA): M ln2_hi is a multiple of
 *     2^-21 (ln2_hi's last bit), a a multiple of its own ulp, and the
 *     difference is below 1/2, which 24 bits hold for |a| >= 1/4; below
 *     1/4, M = 0;
 *   - the second FMA adds -M ln2_lo, rounded once: <= 2^-26 absolute in r,
 *     a quarter of 2^-24 relative in e^r; ln2_hi + ln2_lo is ln 2 within
 *     8.8e-17, which |M| <= 500 keeps below 2^-44;
 *   - the polynomial: 4.3e-9 of fit, then Horner's roundings (the last,
 *     of a value in [0.71, 1.42], is most of the error).
 * Exhaustively, every float a in [-345, 256] (scripts/softmax-exp-bound.c):
 * |computed / 2^-k e^a - 1| <= 1.29 * 2^-24, where 2^t with t =
 * fl(a log2(e)), as the softmax had it, erred by up to |a| 2^-24 before
 * its polynomial's own error.  The same bits on every SIMD tier: the same
 * FMAs in the same order, 2^(M - k) exact. */

/* ---- 2^t for t <= 1 (attention's inner loop) ----
 *
 * Attention forms t = (s - m) * log2(e) (a subtraction, then a multiply,
 * not fused: s - m is exact for scores within a factor 2 of the maximum),
 * so 2^t needs no range reduction by ln 2:
 * 2^t = 2^floor(t) * 2^r, r = t - floor(t) in [0, 1), which is exact.
 * 2^r = 1 + r * (c1 + r * (c2 + ... + r * c5)), a minimax fit of the
 * relative error over [0, 1) with p(0) = 1 pinned (so the pin costs
 * nothing, unlike at the centre of an interval): max |p(r)/2^r - 1| =
 * 8.2e-8, 0.7 ULP before Horner's roundings, enough for attention's own
 * bound (peak.h); the softmax's bound needs the reduction above. */
#define PEAK_EXP2_C1 0x1.62e4bap-1f
#define PEAK_EXP2_C2 0x1.ebdb6ap-3f
#define PEAK_EXP2_C3 0x1.c91c10p-5f
#define PEAK_EXP2_C4 0x1.277c1cp-7f
#define PEAK_EXP2_C5 0x1.e96912p-10f

/* Underflow: 2^t < FLT_MIN, i.e. t < -126, is flushed to +0 on every tier,
   and t = -inf with it (where r would be NaN).  For t >= -126, floor(t) >=
   -126 and p >= 1, so every other result is a normal float.  Attention
   loses nothing it can see: a weight below 1.2e-38 becomes 0.
   AVX-512 compares t with T_MIN and zeroes through the VSCALEFPS mask;
   AVX2 builds 2^floor(t) from exponent bits and clamps t at T_CLAMP
   first, where floor(t) + 127 = 0 is the bit pattern of +0.0f. */
#define PEAK_EXP2_T_MIN (-0x1.f8p+6f) /* -126 */
#define PEAK_EXP2_T_CLAMP (-0x1.fcp+6f) /* -127 */

#endif /* PEAK_EXP_H */
