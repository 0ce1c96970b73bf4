/*
 * typed.h - loads and stores of a tensor whose element type (peak_dtype) is an
 * argument, written once over the vocabulary (simd/f32-<isa>.h): float32
 * as it is, bfloat16 and float16 widened exactly into float32 lanes
 * (peak_vf_load_bf16_bits, peak_vf_load_f16), for arithmetic: a
 * signalling bfloat16 NaN is not quieted by the load but by the first
 * operation on it.  A kernel that takes 16-bit
 * tensors compiles its loop once per type, with the type a constant (the
 * switch folds away), and gives the float16 copy PEAK_VF_F16_TARGET (F16C
 * on AVX2, which the tier does not require: the scheduler runs those copies
 * only where peak_cpu_features() reports it).
 * Include the tier's vocabulary first.
 */
#ifndef PEAK_SIMD_TYPED_H
#define PEAK_SIMD_TYPED_H

#if !defined(PEAK_VF_LANES) || !defined(PEAK_VF_F16_TARGET)
#error "include the tier's vocabulary (simd/f32-<isa>.h) before simd/typed.h"
#endif

#include "convert.h"

#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* Element i of a tensor of type t at p (i in elements, any sign). */
static inline const void *peak_elem_at(const void *p, ptrdiff_t i, peak_dtype t)
{
    return (const char *)p + i * (ptrdiff_t)peak_dtype_bytes(t);
}

/* PEAK_VF_LANES elements of type t at p (any alignment) as floats. */
static inline __attribute__((always_inline)) peak_vf peak_vf_loadu_as(const void *p, peak_dtype t)
{
    switch (t) {
    case PEAK_BF16:
        return peak_vf_load_bf16_bits((const uint16_t *)p);
    case PEAK_F16:
        return peak_vf_load_f16((const uint16_t *)p);
    default:
        return peak_vf_loadu((const float *)p);
    }
}

/* The first n < PEAK_VF_LANES elements of type t at p, +0 in the other
   lanes; nothing past element n - 1 is read (a 16-bit row's tail goes
   through a buffer: rows whose length is not a multiple of the lanes). */
static inline __attribute__((always_inline)) peak_vf peak_vf_load_first_as(const void *p,
                                                                           size_t n, peak_dtype t)
{
    if (t == PEAK_F32)
        return peak_vf_load_first((const float *)p, n);
    uint16_t h[PEAK_VF_LANES] = {0};
    memcpy(h, p, n * sizeof(uint16_t));
    return t == PEAK_BF16 ? peak_vf_load_bf16_bits(h) : peak_vf_load_f16(h);
}

/* v into PEAK_VF_LANES elements of type t at p (any alignment), rounded
   to nearest even. */
static inline __attribute__((always_inline)) void peak_vf_storeu_as(void *p, peak_vf v,
                                                                    peak_dtype t)
{
    switch (t) {
    case PEAK_BF16:
        peak_vf_store_bf16((uint16_t *)p, v);
        break;
    case PEAK_F16:
        peak_vf_store_f16((uint16_t *)p, v);
        break;
    default:
        peak_vf_storeu((float *)p, v);
    }
}

/* v into PEAK_VF_LANES elements of type t at p with a streaming store: p a
   multiple of PEAK_VF_ALIGN bytes (float32) or half that (16-bit: the
   narrowed patterns fill half a vector, peak_vfh); weakly ordered:
   peak_vf_stream_fence. */
static inline __attribute__((always_inline)) void peak_vf_stream_as(void *p, peak_vf v,
                                                                    peak_dtype t)
{
    switch (t) {
    case PEAK_BF16:
        peak_vfh_stream((float *)p, peak_vf_narrow_bf16(v));
        break;
    case PEAK_F16:
        peak_vfh_stream((float *)p, peak_vf_narrow_f16(v));
        break;
    default:
        peak_vf_stream((float *)p, v);
    }
}

/* Lanes 0 .. n-1 of v into the first n < PEAK_VF_LANES elements of type t
   at p; nothing else is written. */
static inline __attribute__((always_inline)) void
peak_vf_store_first_as(void *p, peak_vf v, size_t n, peak_dtype t)
{
    if (t == PEAK_F32) {
        peak_vf_store_first((float *)p, v, n);
        return;
    }
    uint16_t h[PEAK_VF_LANES];
    if (t == PEAK_BF16)
        peak_vf_store_bf16(h, v);
    else
        peak_vf_store_f16(h, v);
    memcpy(p, h, n * sizeof(uint16_t));
}

#endif /* PEAK_SIMD_TYPED_H */
