/*
 * exp-scalar.c - peak_exp and attention's 2^t on the scalar tier.
 *
 * The SIMD tiers' algorithms (exp.h) one float at a time, so that
 * every tier returns the same bits: fmaf is the C library's correctly
 * rounded fused multiply-add, as the vector FMAs are, and 2^n is put back
 * in two exact-or-once-rounded products as on the AVX2 tier, not with
 * ldexpf, which may set errno.
 */
#include "internal.h"
#include "exp.h"

#include <assert.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

/* 2^e for an integer -126 <= e <= 127. */
static float pow2i(int e)
{
    const uint32_t bits = (uint32_t)(e + 127) << 23;
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

/* (((c4 r + c3) r + c2) r + c1) r + c0, one rounding a step: the part of
   Horner's scheme the two polynomials share (exp-body.h's order). */
static float horner(float r, float c4, float c3, float c2, float c1, float c0)
{
    float p = fmaf(c4, r, c3);
    p = fmaf(p, r, c2);
    p = fmaf(p, r, c1);
    return fmaf(p, r, c0);
}

static float exp_one(float x)
{
    if (isnan(x))
        return x + x;
    x = x < PEAK_EXP_X_MIN ? PEAK_EXP_X_MIN : x > PEAK_EXP_X_MAX ? PEAK_EXP_X_MAX : x;
    const float n = fmaf(x, PEAK_EXP_LOG2E, PEAK_EXP_ROUND_MAGIC) - PEAK_EXP_ROUND_MAGIC;
    float r = fmaf(n, PEAK_EXP_MINUS_LN2_HI, x);
    r = fmaf(n, PEAK_EXP_MINUS_LN2_LO, r);
    float p = horner(r, PEAK_EXP_C6, PEAK_EXP_C5, PEAK_EXP_C4, PEAK_EXP_C3, PEAK_EXP_C2);
    p = fmaf(fmaf(p, r, 1.0f), r, 1.0f);
    /* -150 <= n <= 128: two normal halves, the first product exact. */
    const int ni = (int)n, half = ni >> 1;
    return p * pow2i(half) * pow2i(ni - half);
}

static float exp2_one(float t)
{
    if (isnan(t))
        return t + t;
    if (!(t >= PEAK_EXP2_T_MIN))
        return 0.0f;
    const float n = floorf(t);
    const float r = t - n;
    const float p = horner(r, PEAK_EXP2_C5, PEAK_EXP2_C4, PEAK_EXP2_C3, PEAK_EXP2_C2, PEAK_EXP2_C1);
    return fmaf(p, r, 1.0f) * pow2i((int)n);
}

void peak_f32_exp__scalar(float *y, const float *x, size_t n)
{
    assert(y && x);
    for (size_t j = 0; j < n; j++)
        y[j] = exp_one(x[j]);
}

void peak_f32_exp2__scalar(float *y, const float *x, size_t n)
{
    assert(y && x);
    for (size_t j = 0; j < n; j++)
        y[j] = exp2_one(x[j]);
}
