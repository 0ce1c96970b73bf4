/*
 * convert.h - one element of each conversion between float32 and the
 * 16-bit types (peak_convert), on bit patterns: the scalar tier's kernel
 * and the SIMD tiers' tails.  Every SIMD tier's vector code gives these
 * bits (tests/test-convert.c checks each tier against an oracle of its own
 * over every 16-bit value and a sweep of float32 ones).
 *
 *   bfloat16 -> float32  the 16 bits shifted up: exact;
 *   float16 -> float32   exact (subnormals normalised);
 *   float32 -> either    round to nearest, ties to even, on the bits;
 *                        overflow to inf by the same rounding;
 *   NaN                  quiet (the fraction's top bit set), the sign and
 *                        the payload's top bits kept.
 * Integer operations only: no MXCSR or FPCR mode changes a result.
 */
#ifndef PEAK_CONVERT_H
#define PEAK_CONVERT_H

#include "peak.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define PEAK_F32_ABS 0x7fffffffu
#define PEAK_F32_INF 0x7f800000u
#define PEAK_F32_QUIET 0x00400000u
#define PEAK_BF16_QUIET 0x0040u
#define PEAK_F16_QUIET 0x0200u
#define PEAK_F16_INF 0x7c00u
/* The least float32 magnitude that float16 rounds to inf: 65520, the tie
   between 65504 and 2^16, which goes to the even 2^16. */
#define PEAK_F16_OVERFLOW 0x477ff000u
/* float32's exponent bias less float16's, in place: 112 << 23. */
#define PEAK_F16_REBIAS 0x38000000u
/* 2^-14, float16's least normal, and 2^-25, half its least subnormal
   (a tie that goes to the even 0). */
#define PEAK_F16_MIN_NORMAL 0x38800000u
#define PEAK_F16_HALF_TINY 0x33000000u

/* Widening calls whose float32 output is larger than this stream it: a
   widening writes twice the bytes it reads, and out of cache reading each
   line of y before overwriting it left 16 Mi elements at 0.73x the speed
   of a memcpy of the same bytes (SPR), which streams at that size. */
#define PEAK_CONVERT_STREAM_BYTES ((size_t)16 << 20)

/* Whether a call's output is streamed: the scheduler asks, for the whole
   call, so that every item does the same. */
static inline bool peak_convert_streams(peak_dtype y_type, peak_dtype x_type, size_t n)
{
    return y_type == PEAK_F32 && x_type != PEAK_F32 &&
           n > PEAK_CONVERT_STREAM_BYTES / sizeof(float);
}

static inline uint32_t peak_f32_to_bits(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}

static inline float peak_f32_of_bits(uint32_t u)
{
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

static inline int peak_f32_bits_nan(uint32_t u)
{
    return (u & PEAK_F32_ABS) > PEAK_F32_INF;
}

static inline uint32_t peak_bf16_widen(uint16_t h)
{
    const uint32_t u = (uint32_t)h << 16;
    return peak_f32_bits_nan(u) ? u | PEAK_F32_QUIET : u;
}

static inline uint16_t peak_bf16_narrow(uint32_t u)
{
    if (peak_f32_bits_nan(u))
        return (uint16_t)((u >> 16) | PEAK_BF16_QUIET);
    /* + 0x7fff, + 1 more when the kept part is odd: ties to even; a carry
       into the exponent is the right result, up to inf. */
    return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

static inline uint32_t peak_f16_widen(uint16_t h)
{
    const uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu;
    uint32_t m = h & 0x3ffu;
    if (e == 0x1f)
        return sign | PEAK_F32_INF | (m << 13) | (m ? PEAK_F32_QUIET : 0u);
    if (e != 0)
        return sign | ((e + 112u) << 23) | (m << 13);
    if (m == 0)
        return sign;
    /* m 2^-24: shift its leading 1 up to bit 10, the implicit bit. */
    uint32_t k = 0;
    while (!(m & 0x400u)) {
        m <<= 1;
        k++;
    }
    return sign | ((113u - k) << 23) | ((m & 0x3ffu) << 13);
}

static inline uint16_t peak_f16_narrow(uint32_t u)
{
    const uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    const uint32_t a = u & PEAK_F32_ABS;
    if (a > PEAK_F32_INF)
        return (uint16_t)(sign | PEAK_F16_INF | PEAK_F16_QUIET | ((a >> 13) & 0x3ffu));
    if (a >= PEAK_F16_OVERFLOW)
        return (uint16_t)(sign | PEAK_F16_INF);
    if (a >= PEAK_F16_MIN_NORMAL) {
        const uint32_t r = a - PEAK_F16_REBIAS;
        return (uint16_t)(sign | ((r + 0xfffu + ((r >> 13) & 1u)) >> 13));
    }
    if (a <= PEAK_F16_HALF_TINY)
        return sign;
    /* A subnormal result: the significand in units of 2^-24, rounded to
       nearest even (a carry to 0x400 is the least normal, rightly). */
    const uint32_t mant = (a & 0x7fffffu) | 0x800000u, shift = 126u - (a >> 23);
    const uint32_t half = 1u << (shift - 1), rest = mant & ((half << 1) - 1u);
    uint32_t q = mant >> shift;
    q += rest > half || (rest == half && (q & 1u));
    return (uint16_t)(sign | q);
}

/* One element of x (type xt) as float32 bits. */
static inline uint32_t peak_convert_load(const void *x, peak_dtype xt, size_t j)
{
    if (xt == PEAK_F32)
        return peak_f32_to_bits(((const float *)x)[j]);
    const uint16_t h = ((const uint16_t *)x)[j];
    return xt == PEAK_BF16 ? peak_bf16_widen(h) : peak_f16_widen(h);
}

/* Float32 bits u into element j of y (type yt). */
static inline void peak_convert_store(void *y, peak_dtype yt, size_t j, uint32_t u)
{
    if (yt == PEAK_F32)
        ((float *)y)[j] = peak_f32_of_bits(u);
    else
        ((uint16_t *)y)[j] = yt == PEAK_BF16 ? peak_bf16_narrow(u) : peak_f16_narrow(u);
}

/* Bytes of an element of a valid type (peak_dtype_size checks it first). */
static inline size_t peak_dtype_bytes(peak_dtype t)
{
    return t == PEAK_F32 ? sizeof(float) : sizeof(uint16_t);
}

/* Equal types: a copy, nothing when y is x. */
static inline void peak_convert_copy(void *y, const void *x, peak_dtype t, size_t n)
{
    if (y != x)
        memcpy(y, x, n * peak_dtype_bytes(t));
}

/* Elements j0 .. n-1, one at a time (the scalar kernel, the SIMD tails).
   Equal types are copied by the caller. */
static inline void peak_convert_one_by_one(void *y, peak_dtype yt, const void *x, peak_dtype xt,
                                           size_t j0, size_t n)
{
    for (size_t j = j0; j < n; j++)
        peak_convert_store(y, yt, j, peak_convert_load(x, xt, j));
}

#endif /* PEAK_CONVERT_H */
