/*
 * convert-body.h - peak_convert's vector loops, written once against the
 * vocabulary's 16-bit loads and stores (simd/f32-<isa>.h:
 * peak_vf_load_bf16, peak_vf_store_bf16, peak_vf_load_f16,
 * peak_vf_store_f16, and PEAK_VF_F16_TARGET, the attribute the float16
 * ones need: F16C on AVX2).  Each pair of types is one loop over whole
 * vectors through float32 registers; the tail goes one element at a time
 * through convert.h, whose bits the vectors give (tests/test-convert.c).
 * A tier's file includes its vocabulary, then this file, which defines
 * the tier's kernel (PEAK_TIER_FN).
 */
#ifndef PEAK_CONVERT_BODY_H
#define PEAK_CONVERT_BODY_H

#include "convert.h"
#include "internal.h"

#if !defined(PEAK_VF_LANES) || !defined(PEAK_VF_F16_TARGET)
#error "include the tier's vocabulary (simd/f32-<isa>.h) before convert-body.h"
#endif

/* The loop of one pair: whole vectors from element j of x (XT elements)
   to y; returns the elements done.  XT and YT are type names, which
   parentheses would not take. */
/* NOLINTBEGIN(bugprone-macro-parentheses) */
#define PEAK_CONVERT_LOOP(name, attr, XT, YT, load, store)                                   \
    attr static size_t name(void *y, const void *x, size_t j, size_t n)                      \
    {                                                                                         \
        const XT *src = x;                                                                    \
        YT *dst = y;                                                                          \
        for (; j + PEAK_VF_LANES <= n; j += PEAK_VF_LANES)                                    \
            store(dst + j, load(src + j));                                                    \
        return j;                                                                             \
    }

PEAK_CONVERT_LOOP(convert_f32_bf16, , float, uint16_t, peak_vf_loadu, peak_vf_store_bf16)
PEAK_CONVERT_LOOP(convert_bf16_f32, , uint16_t, float, peak_vf_load_bf16, peak_vf_storeu)
PEAK_CONVERT_LOOP(convert_f32_f16, PEAK_VF_F16_TARGET, float, uint16_t, peak_vf_loadu,
                  peak_vf_store_f16)
PEAK_CONVERT_LOOP(convert_f16_f32, PEAK_VF_F16_TARGET, uint16_t, float, peak_vf_load_f16,
                  peak_vf_storeu)
PEAK_CONVERT_LOOP(convert_bf16_f16, PEAK_VF_F16_TARGET, uint16_t, uint16_t, peak_vf_load_bf16,
                  peak_vf_store_f16)
PEAK_CONVERT_LOOP(convert_f16_bf16, PEAK_VF_F16_TARGET, uint16_t, uint16_t, peak_vf_load_f16,
                  peak_vf_store_bf16)
/* Widening into a large float32 y: streaming stores (y aligned). */
PEAK_CONVERT_LOOP(convert_bf16_f32_stream, , uint16_t, float, peak_vf_load_bf16, peak_vf_stream)
PEAK_CONVERT_LOOP(convert_f16_f32_stream, PEAK_VF_F16_TARGET, uint16_t, float, peak_vf_load_f16,
                  peak_vf_stream)

/* NOLINTEND(bugprone-macro-parentheses) */
#undef PEAK_CONVERT_LOOP

/* Widening into float32 with streaming stores: the elements before y's
   first aligned vector one by one, then whole vectors, fenced. */
static size_t convert_widen_stream(float *y, const void *x, peak_dtype x_type, size_t n)
{
    size_t head = (PEAK_VF_ALIGN - (uintptr_t)y % PEAK_VF_ALIGN) % PEAK_VF_ALIGN / sizeof(float);
    head = head < n ? head : n;
    peak_convert_one_by_one(y, PEAK_F32, x, x_type, 0, head);
    const size_t done = x_type == PEAK_BF16 ? convert_bf16_f32_stream(y, x, head, n)
                                            : convert_f16_f32_stream(y, x, head, n);
    peak_vf_stream_fence();
    return done;
}

void PEAK_TIER_FN(peak_half_convert)(void *y, peak_dtype y_type, const void *x, peak_dtype x_type,
                                     size_t n, bool stream)
{
    size_t done = 0;
    if (x_type == y_type) {
        peak_convert_copy(y, x, x_type, n);
        return;
    }
    if (x_type == PEAK_F32)
        done = y_type == PEAK_BF16 ? convert_f32_bf16(y, x, 0, n) : convert_f32_f16(y, x, 0, n);
    else if (y_type == PEAK_F32 && stream)
        done = convert_widen_stream(y, x, x_type, n);
    else if (y_type == PEAK_F32)
        done = x_type == PEAK_BF16 ? convert_bf16_f32(y, x, 0, n) : convert_f16_f32(y, x, 0, n);
    else
        done = x_type == PEAK_BF16 ? convert_bf16_f16(y, x, 0, n) : convert_f16_bf16(y, x, 0, n);
    peak_convert_one_by_one(y, y_type, x, x_type, done, n);
}

#endif /* PEAK_CONVERT_BODY_H */
